//! `ibfabric gen <KIND>`: the topology generators' command-line front, one
//! clap subcommand per topology family, turned into a
//! [`fabric::generate::Topology`] by [`topology`].

use super::info::Info;
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use fabric::formats::{ibnetdiscover, write_file};
use fabric::generate::Topology;
use fabric::multi::PaperLayout;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

/// Lattice dimensions written as sizes joined by `x`, e.g. `4x4x4`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dims(pub Vec<u32>);

impl FromStr for Dims {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let dims = s
            .split(['x', 'X'])
            .map(|part| match part.trim().parse::<u32>() {
                Ok(0) => Err(format!("dimension sizes must be at least 1 in '{s}'")),
                Ok(v) => Ok(v),
                Err(_) => Err(format!(
                    "'{s}' is not a list of sizes joined by 'x' (like 4x4x4): bad size '{part}'"
                )),
            })
            .collect::<Result<Vec<u32>, String>>()?;
        Ok(Dims(dims))
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("x"))
    }
}

/// Conventions shared by every family, shown at the end of each family's
/// `--help`.
const COMMON: &str = "\
Conventions: switches come first in the node list (LIDs 1..=S), then the HCAs (one port each). \
On every switch the host ports come first (1..=hosts), followed by the network ports; \
every switch has exactly the ports it uses. A fabric may have at most 49151 switches + HCAs \
(one LID each) and a switch at most 254 ports.";

/// Two-level fat-tree subnets joined by routers on top: the shape shared by
/// `gen multi` and `demo`.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct TreeShape {
    /// Number of subnets.
    #[arg(long, default_value_t = 3)]
    pub subnets: u32,
    /// Leaf switches per subnet.
    #[arg(long, default_value_t = 4)]
    pub leaves: u32,
    /// Spine switches per subnet.
    #[arg(long, default_value_t = 2)]
    pub spines: u32,
    /// HCAs per leaf.
    #[arg(long, default_value_t = 4)]
    pub hosts: u32,
    /// Routers on top of the subnets' spines.
    #[arg(long, default_value_t = 2)]
    pub routers: u32,
    /// Which subnets a router joins: `all`; `chain` (router r joins
    /// subnets r mod (K-1) and the next: distant subnets talk through
    /// transit subnets); `ring` (a chain closed from last to first).
    #[arg(long, default_value = "all")]
    pub join: String,
}

impl TreeShape {
    pub fn join(&self) -> Result<fabric::multi::Join> {
        use fabric::multi::Join;
        Ok(match self.join.as_str() {
            "all" => Join::All,
            "chain" => Join::Chain,
            "ring" => Join::Ring,
            j => anyhow::bail!("--join is 'all', 'chain' or 'ring', not '{j}'"),
        })
    }
}

/// The topology families `ibfabric gen` can build.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum GenKind {
    /// Several two-level fat-tree subnets joined by routers on top, written
    /// as one ibnetdiscover file per subnet plus `manifest.toml` into the
    /// directory given by --out.
    ///
    /// `--paper K` builds the inter-subnet paper's setup with K subnets (2,
    /// 3 or 6): by default as its text sizes it (K x 72 HCAs, 12 per leaf,
    /// 12 routers on top), with `--paper-layout ports648` the 648-HCA
    /// three-level fat tree cut into K subnets, the 18 top switches
    /// replaced by routers. Otherwise the other options shape it.
    Multi {
        /// The paper's setup with this many subnets (overrides the shape
        /// options).
        #[arg(long)]
        paper: Option<u32>,
        /// Which reading of the paper's setups `--paper` builds.
        #[arg(long, value_enum, default_value_t = PaperLayout::Text)]
        paper_layout: PaperLayout,
        #[command(flatten)]
        shape: TreeShape,
        /// Parallel links from a router to each spine it joins.
        #[arg(long, default_value_t = 1)]
        router_links: u32,
        /// `all`: every router on every spine of every subnet; `stripe`:
        /// router r on spine r mod spines of every subnet.
        #[arg(long, default_value = "all")]
        wiring: String,
    },
    /// k-ary n-tree fat tree: n levels of k^(n-1) switches, k hosts per leaf.
    ///
    /// Switches have radix 2k: k ports down (hosts on leaves), k ports up;
    /// the top level uses only its k down ports. There are n*k^(n-1)
    /// switches and k^n hosts, diameter 2(n-1). Switches are named
    /// s<level>_<index> with level 0 = leaves; hosts h0_<leaf>_<j>.
    /// Example: `kary --k 2 --n 3` gives 12 switches and 8 hosts.
    #[command(after_long_help = COMMON)]
    Kary {
        /// Arity: hosts per leaf, and down- and up-links per switch (1..=127).
        #[arg(long)]
        k: u32,
        /// Number of switch levels (at least 1).
        #[arg(long)]
        n: u32,
    },
    /// Two-level leaf/spine fat tree (the defaults build the 648-host
    /// "ft648" of 36-port switches).
    ///
    /// Every leaf is linked to every spine `--links` times and carries
    /// `--hosts` HCAs. Leaf ports: hosts first, then the up-links grouped by
    /// spine. Leaves are s0_<i>, spines s1_<i>, hosts h0_<leaf>_<j>.
    #[command(visible_alias = "ft2", after_long_help = COMMON)]
    Fattree {
        /// Number of leaf switches.
        #[arg(long, default_value_t = 36)]
        leaves: u32,
        /// Number of spine switches.
        #[arg(long, default_value_t = 18)]
        spines: u32,
        /// HCAs per leaf switch.
        #[arg(long, default_value_t = 18)]
        hosts: u32,
        /// Parallel links between each leaf and each spine.
        #[arg(long, default_value_t = 1)]
        links: u32,
    },
    /// 1D/2D/3D mesh: switches on a lattice linked to their +/-1 neighbours.
    ///
    /// Border switches have fewer links (and ports). Diameter is the sum of
    /// (size - 1). Switches are s<x>_<y>_<z>, hosts h<x>_<y>_<z>_<j>; network
    /// ports in the order x-, x+, y-, y+, z-, z+ (those that exist).
    #[command(after_long_help = COMMON)]
    Mesh {
        /// Lattice sizes joined by 'x', 1 to 3 of them, e.g. 8x8 or 4x4x4.
        #[arg(long)]
        dims: Dims,
        /// HCAs per switch.
        #[arg(long, default_value_t = 1)]
        hosts: u32,
    },
    /// 1D/2D/3D torus: a mesh with wrap-around links in every dimension.
    ///
    /// A dimension of size 2 gets a single link (a wrap link would duplicate
    /// it), one of size 1 none. Diameter is the sum of floor(size / 2).
    /// Switches are s<x>_<y>_<z>, hosts h<x>_<y>_<z>_<j>; network ports in
    /// the order x-, x+, y-, y+, z-, z+ (those that exist).
    #[command(after_long_help = COMMON)]
    Torus {
        /// Lattice sizes joined by 'x', 1 to 3 of them, e.g. 4x4x4.
        #[arg(long)]
        dims: Dims,
        /// HCAs per switch.
        #[arg(long, default_value_t = 1)]
        hosts: u32,
    },
    /// Balanced Dragonfly: 2p routers per group, p global links per router,
    /// 2p^2+1 fully connected groups.
    ///
    /// Each pair of groups shares exactly one global link ("palmtree"
    /// wiring); diameter 3. p=6 gives 876 routers and 5256 hosts, p=8 2064
    /// routers and 16512 hosts. Routers are g<group>r<router>, hosts
    /// g<group>r<router>h<j>; router ports: hosts, then 2p-1 local links,
    /// then p global links.
    #[command(after_long_help = COMMON)]
    Dragonfly {
        /// Balance parameter p (at least 1): default hosts per router and
        /// global links per router; routers per group are 2p.
        #[arg(long)]
        p: u32,
        /// HCAs per router [default: p].
        #[arg(long)]
        hosts: Option<u32>,
    },
    /// Slim Fly: the diameter-2 MMS graph of 2q^2 switches.
    ///
    /// q must be a prime with q = 4w +/- 1 (3, 5, 7, 11, 13, 17, 19, ...;
    /// prime powers are not supported); the network degree is (3q -/+ 1)/2.
    /// q=5 gives 50 switches of degree 7 with 4 hosts each. Switches are
    /// s0_<x>_<y> and s1_<m>_<c>, hosts h0_<x>_<y>_<j> / h1_<m>_<c>_<j>.
    #[command(after_long_help = COMMON)]
    Slimfly {
        /// The prime q.
        #[arg(long)]
        q: u32,
        /// HCAs per switch [default: ceil(degree / 2)].
        #[arg(long)]
        hosts: Option<u32>,
    },
    /// Two-level orthogonal fat tree (OFT) of radix-2k switches.
    ///
    /// Built from the projective plane of order k - 1, which must be a prime
    /// (k = 3, 4, 6, 8, 12, 14, 18, ...): k^2 - k + 1 spines (the plane's
    /// lines), and two halves of k^2 - k + 1 leaves (its points), each leaf
    /// linked to the k lines through its point. Leaves of one half share
    /// exactly one spine. k=18 gives 614 leaves, 307 spines and 11052
    /// hosts. Leaves are s0_<i> and s1_<i>, spines s2_<j>, hosts
    /// h0_<i>_<h> / h1_<i>_<h>.
    #[command(after_long_help = COMMON)]
    Oft {
        /// Half the switch radix: up-links per leaf (k - 1 a prime).
        #[arg(long)]
        k: u32,
        /// HCAs per leaf [default: k].
        #[arg(long)]
        hosts: Option<u32>,
    },
    /// HyperX: switches on a lattice, fully connected along each dimension.
    ///
    /// Two switches are linked iff they differ in exactly one coordinate
    /// (one link each). Network degree is the sum of (size - 1); diameter is
    /// the number of dimensions larger than 1. Switches are s<c0>_<c1>_...,
    /// hosts h<c0>_<c1>_..._<j>.
    #[command(after_long_help = COMMON)]
    Hyperx {
        /// Lattice sizes joined by 'x', 1 to 8 of them, e.g. 4x4x4.
        #[arg(long)]
        dims: Dims,
        /// HCAs per switch.
        #[arg(long, default_value_t = 1)]
        hosts: u32,
    },
    /// Random regular switch graph (Jellyfish-like), reproducible per seed.
    ///
    /// A connected random graph in which every switch has exactly `--degree`
    /// links to other switches; the same parameters and seed give the same
    /// fabric on every machine. switches x degree must be even and degree
    /// below switches. Switches are s<i>, hosts h<i>_<j>.
    #[command(after_long_help = COMMON)]
    Random {
        /// Number of switches.
        #[arg(long)]
        switches: u32,
        /// Switch-to-switch links per switch.
        #[arg(long)]
        degree: u32,
        /// HCAs per switch.
        #[arg(long, default_value_t = 1)]
        hosts: u32,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// The multi-subnet shape of `gen multi`.
pub fn tree_subnets(kind: &GenKind) -> Result<Option<fabric::multi::TreeSubnets>> {
    use fabric::multi::{TreeSubnets, Wiring};

    let GenKind::Multi {
        paper,
        paper_layout,
        shape,
        router_links,
        wiring,
    } = kind
    else {
        return Ok(None);
    };
    if let Some(k) = paper {
        return Ok(Some(TreeSubnets::paper_setup(*paper_layout, *k)?));
    }
    let wiring = match wiring.as_str() {
        "all" => Wiring::All,
        "stripe" => Wiring::Stripe,
        w => anyhow::bail!("--wiring is 'all' or 'stripe', not '{w}'"),
    };
    let join = shape.join()?;
    Ok(Some(TreeSubnets {
        subnets: shape.subnets,
        leaves: shape.leaves,
        spines: shape.spines,
        hosts: shape.hosts,
        routers: shape.routers,
        router_links: *router_links,
        wiring,
        join,
    }))
}

/// The topology a `gen` subcommand asks for. Parameter checks beyond the
/// syntax happen in [`fabric::generate::generate`].
pub fn topology(kind: &GenKind) -> Result<Topology> {
    Ok(match kind {
        GenKind::Multi { .. } => {
            anyhow::bail!("'gen multi' writes several files; it has no single topology")
        }
        GenKind::Kary { k, n } => Topology::KaryNTree { k: *k, n: *n },
        GenKind::Fattree {
            leaves,
            spines,
            hosts,
            links,
        } => Topology::FatTree2 {
            leaves: *leaves,
            spines: *spines,
            hosts: *hosts,
            links: *links,
        },
        GenKind::Mesh { dims, hosts } => Topology::Mesh {
            dims: dims.0.clone(),
            torus: false,
            hosts: *hosts,
        },
        GenKind::Torus { dims, hosts } => Topology::Mesh {
            dims: dims.0.clone(),
            torus: true,
            hosts: *hosts,
        },
        GenKind::Dragonfly { p, hosts } => Topology::Dragonfly {
            p: *p,
            hosts: *hosts,
        },
        GenKind::Slimfly { q, hosts } => Topology::SlimFly {
            q: *q,
            hosts: *hosts,
        },
        GenKind::Oft { k, hosts } => Topology::Oft {
            k: *k,
            hosts: *hosts,
        },
        GenKind::Hyperx { dims, hosts } => Topology::HyperX {
            dims: dims.0.clone(),
            hosts: *hosts,
        },
        GenKind::Random {
            switches,
            degree,
            hosts,
            seed,
        } => Topology::RandomRegular {
            switches: *switches,
            degree: *degree,
            hosts: *hosts,
            seed: *seed,
        },
    })
}

/// `ibfabric gen`: the command's arguments.
#[derive(Args)]
pub struct GenArgs {
    #[command(subcommand)]
    kind: GenKind,
    /// Output file ("-" for standard output).
    #[arg(short, long, global = true, default_value = "-")]
    out: PathBuf,
    /// Print a JSON summary on stdout (needs --out FILE).
    #[arg(long, global = true)]
    json: bool,
    /// LMC of every CA and router port (0-7): each answers to 2^LMC LIDs,
    /// a range aligned to its size (OpenSM's `lmc` option). Switches keep
    /// one LID.
    #[arg(long, global = true, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=7))]
    lmc: u8,
}

#[derive(Serialize)]
struct MultiJson {
    manifest: String,
    subnets: usize,
    routers: usize,
    hcas: usize,
}

#[derive(Serialize)]
struct GenJson {
    #[serde(flatten)]
    info: Info,
    topology: String,
    file: String,
    gen_seconds: f64,
}

pub fn run(a: GenArgs) -> Result<i32> {
    if let Some(t) = tree_subnets(&a.kind)? {
        if a.lmc > 0 {
            bail!("--lmc is for one subnet: subnets with routers are joined with one LID per port");
        }
        return gen_multi(&t, &a);
    }
    let topo = topology(&a.kind)?;
    let t = Instant::now();
    let mut f = fabric::generate::generate(&topo)?;
    if a.lmc > 0 {
        f = fabric::generate::with_lmc(&f, a.lmc)?;
    }
    let seconds = t.elapsed().as_secs_f64();
    let text = ibnetdiscover::write(&f);
    if a.out.as_os_str() == "-" {
        if a.json {
            bail!("--json needs --out FILE (the topology itself goes to stdout otherwise)");
        }
        print!("{text}");
        return Ok(0);
    }
    write_file(&a.out, &text)?;
    let info = Info::of(&f, false);
    if a.json {
        super::print_json(
            "gen",
            &GenJson {
                info,
                topology: topo.name(),
                file: a.out.display().to_string(),
                gen_seconds: seconds,
            },
        )?;
    } else {
        eprintln!(
            "{}: {} switches, {} CAs, {} links, diameter {} -> {}",
            topo.name(),
            info.switches,
            info.hcas,
            info.links,
            info.diameter
                .map(|d| d.to_string())
                .unwrap_or_else(|| "disconnected".into()),
            a.out.display()
        );
    }
    Ok(0)
}

fn gen_multi(t: &fabric::multi::TreeSubnets, a: &GenArgs) -> Result<i32> {
    if a.out.as_os_str() == "-" {
        bail!("'gen multi' writes a directory: pass --out DIR");
    }
    let m = fabric::multi::tree_subnets(t)?;
    let p = fabric::formats::manifest::write(&m, &a.out)?;
    let cas: usize = m.subnets.iter().map(|s| s.fabric.num_cas()).sum();
    if a.json {
        super::print_json(
            "gen",
            &MultiJson {
                manifest: p.display().to_string(),
                subnets: m.subnets.len(),
                routers: m.routers.len(),
                hcas: cas,
            },
        )?;
    } else {
        eprintln!(
            "{} subnets, {} routers, {cas} CAs -> {}",
            m.subnets.len(),
            m.routers.len(),
            p.display()
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        kind: GenKind,
    }

    fn parse(args: &[&str]) -> Result<Topology> {
        let cli = Cli::try_parse_from(std::iter::once("gen").chain(args.iter().copied()))?;
        topology(&cli.kind)
    }

    #[test]
    fn command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_every_family() -> Result<()> {
        assert_eq!(
            parse(&["kary", "--k", "2", "--n", "3"])?,
            Topology::KaryNTree { k: 2, n: 3 }
        );
        assert_eq!(parse(&["fattree"])?, Topology::ft648());
        assert_eq!(parse(&["ft2"])?, Topology::ft648());
        assert_eq!(
            parse(&[
                "ft2", "--leaves", "4", "--spines", "2", "--hosts", "3", "--links", "2"
            ])?,
            Topology::FatTree2 {
                leaves: 4,
                spines: 2,
                hosts: 3,
                links: 2
            }
        );
        assert_eq!(
            parse(&["torus", "--dims", "4x4x4"])?,
            Topology::Mesh {
                dims: vec![4, 4, 4],
                torus: true,
                hosts: 1
            }
        );
        assert_eq!(
            parse(&["mesh", "--dims", "8X2", "--hosts", "2"])?,
            Topology::Mesh {
                dims: vec![8, 2],
                torus: false,
                hosts: 2
            }
        );
        assert_eq!(
            parse(&["dragonfly", "--p", "6"])?,
            Topology::Dragonfly { p: 6, hosts: None }
        );
        assert_eq!(
            parse(&["slimfly", "--q", "5", "--hosts", "3"])?,
            Topology::SlimFly {
                q: 5,
                hosts: Some(3)
            }
        );
        assert_eq!(
            parse(&["oft", "--k", "6"])?,
            Topology::Oft { k: 6, hosts: None }
        );
        assert_eq!(
            parse(&["hyperx", "--dims", "4x4"])?,
            Topology::HyperX {
                dims: vec![4, 4],
                hosts: 1
            }
        );
        assert_eq!(
            parse(&["random", "--switches", "64", "--degree", "8", "--seed", "9"])?,
            Topology::RandomRegular {
                switches: 64,
                degree: 8,
                hosts: 1,
                seed: 9
            }
        );
        Ok(())
    }

    #[test]
    fn rejects_bad_dims() {
        assert!(parse(&["torus", "--dims", "4x0"]).is_err());
        assert!(parse(&["torus", "--dims", "4xx4"]).is_err());
        assert!(parse(&["torus", "--dims", "four"]).is_err());
        assert_eq!(
            "2x3".parse::<Dims>().map(|d| d.to_string()),
            Ok("2x3".to_string())
        );
    }
}
