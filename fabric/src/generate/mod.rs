//! Topology generators: a [`Fabric`] for a standard HPC topology family from
//! a handful of parameters.
//!
//! Conventions shared by every family:
//!
//! * **Node order.** All switches first, in the family's natural order (see
//!   each family's module), then the HCAs grouped by the switch they hang off,
//!   in switch order. [`FabricBuilder::build`] assigns LIDs in node order, so
//!   switches get LIDs `1..=S` and the HCAs the LIDs after that.
//! * **GUIDs.** Switch `i` (0-based, in node order) has node GUID
//!   `0x0002_0000_0000_0000 + (i + 1)`; HCA `i` has node GUID
//!   `0x0001_0000_0000_0000 + (i + 1) * 16`, so its port 1 GUID is that `+ 1`.
//! * **HCAs** have exactly one port, linked to a host port of their switch.
//! * **Switch ports.** Host ports come first (`1..=hosts`), then the network
//!   ports in the order documented by each family (trees: down-links before
//!   up-links). Every switch has exactly as many ports as it uses, so a switch
//!   never has an unconnected port.
//! * **Descriptions** are unique, short, and free of spaces, `#`, `@` and `"`.
//!   A host's description is its switch's description with the leading `s`
//!   replaced by `h` and `_j` appended (`s0_3` -> `h0_3_0`), except for
//!   Dragonfly, where routers are `g3r2` and their hosts `g3r2h0`.
//!
//! Parameters are validated up front (before anything large is allocated):
//! zero sizes, switches needing more than [`MAX_RADIX`] ports and fabrics
//! needing more than 49151 LIDs (switches + HCAs) are rejected with
//! [`Error::Generator`].

mod dragonfly;
mod fattree;
mod hyperx;
mod kary;
mod mesh;
mod oft;
mod random;
mod slimfly;

mod lmc;
pub use lmc::with_lmc;

use crate::error::{Error, Result};
use crate::model::{Fabric, FabricBuilder, MAX_UNICAST_LID, NodeId, NodeKind};

/// Most ports a generated switch may have (port numbers are `u8`, 255 is
/// reserved).
pub const MAX_RADIX: u32 = 254;

/// Node GUID base of generated switches; switch `i` gets `SWITCH_GUID_BASE + i + 1`.
pub const SWITCH_GUID_BASE: u64 = 0x0002_0000_0000_0000;
/// Node GUID base of generated HCAs; HCA `i` gets `CA_GUID_BASE + (i + 1) * 16`.
pub const CA_GUID_BASE: u64 = 0x0001_0000_0000_0000;

/// A topology family with its parameters. See [`generate`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Topology {
    /// k-ary n-tree: `n` levels of `k^(n-1)` switches, `k` hosts on each
    /// leaf (`k^n` hosts), switch radix `2k` (the top level uses only its `k`
    /// down ports). Level-`l` switch `<w,l>` links level-`(l+1)` switch
    /// `<w',l+1>` iff `w` and `w'` (`n-1` base-`k` digits) differ at most in
    /// digit `l`. Level 0 holds the leaves.
    KaryNTree { k: u32, n: u32 },
    /// Two-level leaf/spine fat tree: every leaf linked to every spine
    /// `links` times; each leaf has `hosts` HCAs.
    FatTree2 {
        leaves: u32,
        spines: u32,
        hosts: u32,
        links: u32,
    },
    /// 1-, 2- or 3-dimensional mesh, or torus with wrap-around links. A
    /// dimension of size 2 gets a single link even in a torus; size-1
    /// dimensions contribute no links.
    Mesh {
        dims: Vec<u32>,
        torus: bool,
        hosts: u32,
    },
    /// Balanced Dragonfly: `hosts` HCAs per router (default `p`), `a = 2p`
    /// routers per group, `h = p` global links per router, `g = a*h + 1`
    /// groups; groups are fully connected inside, and every pair of groups
    /// shares exactly one global link ("palmtree" wiring).
    Dragonfly { p: u32, hosts: Option<u32> },
    /// Slim Fly (MMS graph) for a prime `q = 4w + delta`, `delta` in
    /// `{-1, 1}`: `2q^2` switches of network degree `(3q - delta)/2`,
    /// diameter 2; default hosts per switch `ceil(degree / 2)`.
    SlimFly { q: u32, hosts: Option<u32> },
    /// Two-level orthogonal fat tree from the projective plane of order
    /// `k - 1` (a prime): `2(k^2 - k + 1)` leaves with `hosts` HCAs
    /// (default `k`) and `k` up-links, `k^2 - k + 1` spines of `2k` ports.
    Oft { k: u32, hosts: Option<u32> },
    /// HyperX: switches on a lattice, fully connected along each dimension
    /// (one link between any two switches that differ in one coordinate).
    HyperX { dims: Vec<u32>, hosts: u32 },
    /// Seeded random connected `degree`-regular switch graph (Jellyfish-like),
    /// identical for the same parameters on every machine.
    RandomRegular {
        switches: u32,
        degree: u32,
        hosts: u32,
        seed: u64,
    },
}

impl Topology {
    /// The 648-HCA two-level fat tree of 36-port switches: 36 leaves with 18
    /// hosts each, 18 spines, one link between every leaf and spine.
    pub fn ft648() -> Self {
        Topology::FatTree2 {
            leaves: 36,
            spines: 18,
            hosts: 18,
            links: 1,
        }
    }

    /// Short name usable as a file name, e.g. `kary-2-3`, `ft2-36x18-h18`,
    /// `torus-4x4x4`, `dragonfly-p6`, `slimfly-q5`, `hyperx-4x4`,
    /// `random-64-d8-s1`. A hosts count that differs from the family's
    /// default is appended as `-hN`.
    pub fn name(&self) -> String {
        fn host_suffix(hosts: u32, default: u32) -> String {
            if hosts == default {
                String::new()
            } else {
                format!("-h{hosts}")
            }
        }
        match self {
            Topology::KaryNTree { k, n } => format!("kary-{k}-{n}"),
            Topology::FatTree2 {
                leaves,
                spines,
                hosts,
                links,
            } => {
                let mut s = format!("ft2-{leaves}x{spines}-h{hosts}");
                if *links != 1 {
                    s.push_str(&format!("-l{links}"));
                }
                s
            }
            Topology::Mesh { dims, torus, hosts } => format!(
                "{}-{}{}",
                if *torus { "torus" } else { "mesh" },
                dims_str(dims),
                host_suffix(*hosts, 1)
            ),
            Topology::Dragonfly { p, hosts } => {
                format!("dragonfly-p{p}{}", host_suffix(hosts.unwrap_or(*p), *p))
            }
            Topology::SlimFly { q, hosts } => {
                let default = slimfly::default_hosts(*q);
                format!(
                    "slimfly-q{q}{}",
                    host_suffix(hosts.unwrap_or(default), default)
                )
            }
            Topology::Oft { k, hosts } => {
                format!("oft-k{k}{}", host_suffix(hosts.unwrap_or(*k), *k))
            }
            Topology::HyperX { dims, hosts } => {
                format!("hyperx-{}{}", dims_str(dims), host_suffix(*hosts, 1))
            }
            Topology::RandomRegular {
                switches,
                degree,
                hosts,
                seed,
            } => format!(
                "random-{switches}-d{degree}-s{seed}{}",
                host_suffix(*hosts, 1)
            ),
        }
    }
}

fn dims_str(dims: &[u32]) -> String {
    dims.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// Builds the fabric of a topology; see the module docs for the node, GUID,
/// port and description conventions. Fails with [`Error::Generator`] on bad
/// parameters.
pub fn generate(t: &Topology) -> Result<Fabric> {
    match t {
        Topology::KaryNTree { k, n } => kary::generate(*k, *n),
        Topology::FatTree2 {
            leaves,
            spines,
            hosts,
            links,
        } => fattree::generate(*leaves, *spines, *hosts, *links),
        Topology::Mesh { dims, torus, hosts } => mesh::generate(dims, *torus, *hosts),
        Topology::Dragonfly { p, hosts } => dragonfly::generate(*p, *hosts),
        Topology::SlimFly { q, hosts } => slimfly::generate(*q, *hosts),
        Topology::Oft { k, hosts } => oft::generate(*k, *hosts),
        Topology::HyperX { dims, hosts } => hyperx::generate(dims, *hosts),
        Topology::RandomRegular {
            switches,
            degree,
            hosts,
            seed,
        } => random::generate(*switches, *degree, *hosts, *seed),
    }
}

fn gen_err(msg: impl Into<String>) -> Error {
    Error::Generator(msg.into())
}

/// Rejects a zero parameter.
fn nonzero(name: &str, v: u32) -> Result<()> {
    if v == 0 {
        Err(gen_err(format!("{name} must be at least 1")))
    } else {
        Ok(())
    }
}

/// Rejects a switch kind that needs more than [`MAX_RADIX`] ports.
fn check_radix(what: &str, ports: u64) -> Result<()> {
    if ports > MAX_RADIX as u64 {
        Err(gen_err(format!(
            "{what} would need {ports} ports, more than the maximum of {MAX_RADIX}"
        )))
    } else {
        Ok(())
    }
}

/// Rejects fabrics with more addressable ports (one per switch, one per HCA)
/// than there are unicast LIDs. `None` means the count overflowed.
fn check_lids(switches: Option<u64>, hcas: Option<u64>) -> Result<()> {
    let total = switches.zip(hcas).and_then(|(s, h)| s.checked_add(h));
    match total {
        Some(t) if t <= MAX_UNICAST_LID as u64 => Ok(()),
        Some(t) => Err(gen_err(format!(
            "the fabric would have {t} addressable ports ({} switches + {} HCAs), \
             more than the {MAX_UNICAST_LID} unicast LIDs of a subnet",
            switches.unwrap_or(0),
            hcas.unwrap_or(0)
        ))),
        None => Err(gen_err(format!(
            "the fabric would have far more addressable ports than the {MAX_UNICAST_LID} \
             unicast LIDs of a subnet"
        ))),
    }
}

/// Checked product of lattice dimensions.
fn product(dims: &[u32]) -> Option<u64> {
    dims.iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
}

/// One switch of a [`Blueprint`].
struct SwitchSpec {
    desc: String,
    hosts: u32,
    net_ports: u32,
}

/// One switch-to-switch link of a [`Blueprint`]: switch indices and 0-based
/// network port indices (network port `i` of a switch with `h` hosts is
/// port `h + 1 + i`).
#[derive(Clone, Copy, Debug)]
struct Link {
    a: u32,
    pa: u32,
    b: u32,
    pb: u32,
}

/// Switch-level description of a generated fabric, turned into a [`Fabric`]
/// by [`Blueprint::assemble`], which applies the shared conventions.
#[derive(Default)]
struct Blueprint {
    switches: Vec<SwitchSpec>,
    links: Vec<Link>,
}

impl Blueprint {
    fn with_capacity(switches: usize, links: usize) -> Self {
        Self {
            switches: Vec::with_capacity(switches),
            links: Vec::with_capacity(links),
        }
    }

    /// Adds a switch with `hosts` host ports followed by `net_ports` network
    /// ports; returns its index.
    fn switch(&mut self, desc: String, hosts: u32, net_ports: u32) -> u32 {
        self.switches.push(SwitchSpec {
            desc,
            hosts,
            net_ports,
        });
        (self.switches.len() - 1) as u32
    }

    fn link(&mut self, a: u32, pa: u32, b: u32, pb: u32) {
        self.links.push(Link { a, pa, b, pb });
    }

    /// Adds one link per adjacency entry of a simple graph (no loops, no
    /// parallel links) given as ordered neighbour lists: the `i`-th
    /// neighbour of a switch sits on its network port `i`.
    fn links_from_adjacency(&mut self, adj: &[Vec<u32>]) -> Result<()> {
        for (u, nbrs) in adj.iter().enumerate() {
            let u = u as u32;
            for (i, &v) in nbrs.iter().enumerate() {
                if v == u {
                    return Err(gen_err(format!(
                        "internal error: switch {u} linked to itself"
                    )));
                }
                if u < v {
                    let j = adj
                        .get(v as usize)
                        .and_then(|l| l.iter().position(|&x| x == u))
                        .ok_or_else(|| {
                            gen_err(format!(
                                "internal error: adjacency of switches {u} and {v} is one-sided"
                            ))
                        })?;
                    self.link(u, i as u32, v, j as u32);
                }
            }
        }
        Ok(())
    }

    /// Builds the fabric. Host descriptions derive from switch descriptions:
    /// `host_desc(switch_desc, j)` names host `j` (0-based) of a switch.
    fn assemble(self, host_desc: impl Fn(&str, u32) -> String) -> Result<Fabric> {
        let mut hcas = 0u64;
        for s in &self.switches {
            check_radix(
                &format!("switch '{}'", s.desc),
                s.hosts as u64 + s.net_ports as u64,
            )?;
            hcas += s.hosts as u64;
        }
        check_lids(Some(self.switches.len() as u64), Some(hcas))?;

        // Every network port must be used exactly once.
        let mut first = Vec::with_capacity(self.switches.len() + 1);
        let mut total = 0usize;
        for s in &self.switches {
            first.push(total);
            total += s.net_ports as usize;
        }
        let mut used = vec![false; total];
        for l in &self.links {
            for (sw, p) in [(l.a, l.pa), (l.b, l.pb)] {
                let spec = self.switches.get(sw as usize).ok_or_else(|| {
                    gen_err(format!("internal error: link to unknown switch {sw}"))
                })?;
                if p >= spec.net_ports {
                    return Err(gen_err(format!(
                        "internal error: switch '{}' has no network port index {p}",
                        spec.desc
                    )));
                }
                let slot = &mut used[first[sw as usize] + p as usize];
                if *slot {
                    return Err(gen_err(format!(
                        "internal error: network port index {p} of switch '{}' used twice",
                        spec.desc
                    )));
                }
                *slot = true;
            }
        }
        if let Some(i) = used.iter().position(|u| !u) {
            let sw = first.partition_point(|&f| f <= i) - 1;
            return Err(gen_err(format!(
                "internal error: network port index {} of switch '{}' left unconnected",
                i - first[sw],
                self.switches[sw].desc
            )));
        }

        let inv = |e: crate::error::ModelError| Error::Invalid(e.to_string());
        let mut b = FabricBuilder::new();
        let mut ids: Vec<NodeId> = Vec::with_capacity(self.switches.len());
        for (i, s) in self.switches.iter().enumerate() {
            let ports = (s.hosts + s.net_ports) as u8;
            ids.push(b.add_node(
                NodeKind::Switch,
                SWITCH_GUID_BASE + i as u64 + 1,
                s.desc.as_str(),
                ports,
            ));
        }
        let mut ca = 0u64;
        for (s, &sw) in self.switches.iter().zip(&ids) {
            for j in 0..s.hosts {
                ca += 1;
                let h = b.add_node(
                    NodeKind::Ca,
                    CA_GUID_BASE + ca * 16,
                    host_desc(&s.desc, j),
                    1,
                );
                b.connect(sw, (j + 1) as u8, h, 1).map_err(inv)?;
            }
        }
        for l in &self.links {
            let (sa, sb) = (&self.switches[l.a as usize], &self.switches[l.b as usize]);
            b.connect(
                ids[l.a as usize],
                (sa.hosts + l.pa + 1) as u8,
                ids[l.b as usize],
                (sb.hosts + l.pb + 1) as u8,
            )
            .map_err(inv)?;
        }
        b.build().map_err(inv)
    }
}

/// Default host naming: `s0_3` -> `h0_3_j`.
fn underscore_host(switch: &str, j: u32) -> String {
    format!("h{}_{j}", switch.strip_prefix('s').unwrap_or(switch))
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Property checks shared by the generator tests.

    use super::{CA_GUID_BASE, SWITCH_GUID_BASE};
    use crate::graph::SwitchGraph;
    use crate::model::{Fabric, NONE, NodeKind};
    use std::collections::HashSet;

    /// What the shared checks measured.
    #[derive(Debug)]
    pub struct Summary {
        pub switches: usize,
        pub cas: usize,
        /// Switch-to-switch links (each counted once).
        pub net_links: usize,
        /// Links counted once, HCA links included.
        pub links: usize,
        /// Network degree (ports to switches) per switch, in switch order.
        pub net_degree: Vec<usize>,
        /// Hosts per switch, in switch order.
        pub hosts: Vec<usize>,
        pub diameter: Option<u32>,
    }

    impl Summary {
        pub fn min_max_degree(&self) -> (usize, usize) {
            let min = self.net_degree.iter().copied().min().unwrap_or(0);
            let max = self.net_degree.iter().copied().max().unwrap_or(0);
            (min, max)
        }
    }

    /// Checks the conventions every generated fabric obeys and measures it.
    pub fn check(f: &Fabric) -> Summary {
        let mut descs = HashSet::new();
        let mut guids = HashSet::new();
        let (mut sw_i, mut ca_i) = (0u64, 0u64);
        let mut net_degree = Vec::new();
        let mut hosts = Vec::new();
        let mut seen_ca = false;
        for n in 0..f.num_nodes() as u32 {
            let d = f.desc(n);
            assert!(
                !d.is_empty() && d.len() <= 32,
                "bad description length: {d:?}"
            );
            assert!(
                !d.contains(|c: char| c == '#' || c == '@' || c == '"' || c.is_whitespace()),
                "bad description {d:?}"
            );
            assert!(descs.insert(d.to_string()), "duplicate description {d}");
            assert!(guids.insert(f.guid(n)));
            match f.kind(n) {
                NodeKind::Switch => {
                    assert!(!seen_ca, "switches must come before HCAs");
                    sw_i += 1;
                    assert_eq!(f.guid(n), SWITCH_GUID_BASE + sw_i);
                    let mut net = 0;
                    let mut h = 0;
                    for s in f.port_slots(n) {
                        let r = f.remote(s);
                        assert_ne!(r, NONE, "port {} of {} unused", f.port_of(s), d);
                        if f.kind(f.node_of(r)) == NodeKind::Switch {
                            assert_ne!(f.node_of(r), n, "self link on {d}");
                            net += 1;
                        } else {
                            assert_eq!(net, 0, "host port after network port on {d}");
                            h += 1;
                        }
                    }
                    net_degree.push(net);
                    hosts.push(h);
                }
                NodeKind::Ca => {
                    seen_ca = true;
                    ca_i += 1;
                    assert_eq!(f.guid(n), CA_GUID_BASE + ca_i * 16);
                    assert_eq!(f.num_ports(n), 1);
                    let s = f.slot(n, 1);
                    assert_eq!(f.port_guid(s), f.guid(n) + 1);
                    let r = f.remote(s);
                    assert_ne!(r, NONE, "HCA {d} unconnected");
                    assert_eq!(f.kind(f.node_of(r)), NodeKind::Switch);
                }
                NodeKind::Router => panic!("generators make no routers"),
            }
        }
        let switches = f.switches().len();
        let cas = f.num_cas();
        assert_eq!(f.max_lid() as usize, switches + cas, "LIDs not dense");
        let g = SwitchGraph::new(f);
        Summary {
            switches,
            cas,
            net_links: net_degree.iter().sum::<usize>() / 2,
            links: f.num_links(),
            net_degree,
            hosts,
            diameter: g.diameter(),
        }
    }

    /// Asserts that `r` is a generator error whose message contains `needle`.
    pub fn assert_gen_err<T: std::fmt::Debug>(r: crate::Result<T>, needle: &str) {
        match r {
            Err(crate::Error::Generator(m)) => {
                assert!(m.contains(needle), "message {m:?} lacks {needle:?}")
            }
            other => panic!("expected a generator error containing {needle:?}, got {other:?}"),
        }
    }

    /// The (node desc, port) pairs on both ends of every link, for
    /// comparing two fabrics.
    pub fn link_list(f: &Fabric) -> Vec<(String, u8, String, u8)> {
        let mut v = Vec::new();
        for s in 0..f.num_slots() as u32 {
            let r = f.remote(s);
            if r != NONE && s < r {
                v.push((
                    f.desc(f.node_of(s)).to_string(),
                    f.port_of(s),
                    f.desc(f.node_of(r)).to_string(),
                    f.port_of(r),
                ));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::assert_gen_err;
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Topology::KaryNTree { k: 2, n: 3 }.name(), "kary-2-3");
        assert_eq!(Topology::ft648().name(), "ft2-36x18-h18");
        assert_eq!(
            Topology::Mesh {
                dims: vec![4, 4, 4],
                torus: true,
                hosts: 1
            }
            .name(),
            "torus-4x4x4"
        );
        assert_eq!(
            Topology::Mesh {
                dims: vec![8, 8],
                torus: false,
                hosts: 2
            }
            .name(),
            "mesh-8x8-h2"
        );
        assert_eq!(
            Topology::Dragonfly { p: 6, hosts: None }.name(),
            "dragonfly-p6"
        );
        assert_eq!(
            Topology::Dragonfly {
                p: 6,
                hosts: Some(6)
            }
            .name(),
            "dragonfly-p6"
        );
        assert_eq!(
            Topology::Dragonfly {
                p: 6,
                hosts: Some(4)
            }
            .name(),
            "dragonfly-p6-h4"
        );
        assert_eq!(Topology::SlimFly { q: 5, hosts: None }.name(), "slimfly-q5");
        assert_eq!(
            Topology::SlimFly {
                q: 5,
                hosts: Some(4)
            }
            .name(),
            "slimfly-q5"
        );
        assert_eq!(
            Topology::HyperX {
                dims: vec![4, 4],
                hosts: 1
            }
            .name(),
            "hyperx-4x4"
        );
        assert_eq!(
            Topology::RandomRegular {
                switches: 64,
                degree: 8,
                hosts: 4,
                seed: 7
            }
            .name(),
            "random-64-d8-s7-h4"
        );
    }

    #[test]
    fn ft648_generates() {
        let f = generate(&Topology::ft648()).expect("ft648");
        assert_eq!(f.switches().len(), 54);
        assert_eq!(f.num_cas(), 648);
    }

    #[test]
    fn lid_limit_names_the_count() {
        // 201 switches + 200 * 250 HCAs = 50201 > 49151.
        let r = generate(&Topology::FatTree2 {
            leaves: 200,
            spines: 1,
            hosts: 250,
            links: 1,
        });
        assert_gen_err(r, "50201 addressable ports");
        // Overflowing sizes are rejected, not wrapped.
        let r = generate(&Topology::HyperX {
            dims: vec![u32::MAX, u32::MAX, u32::MAX],
            hosts: 1,
        });
        assert!(matches!(r, Err(Error::Generator(_))));
    }
}
