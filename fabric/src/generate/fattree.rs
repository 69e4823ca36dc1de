//! Two-level leaf/spine fat tree: every leaf is linked to every spine
//! `links` times; each leaf has `hosts` HCAs.
//!
//! Node order: leaves `s0_{i}`, then spines `s1_{i}`; hosts `h0_{i}_{j}`.
//!
//! Ports: leaf hosts on `1..=hosts`, then the up-links grouped by spine:
//! link `m` (0-based) to spine `s` is on port `hosts + 1 + s*links + m`.
//! Spine port `1 + l*links + m` is link `m` to leaf `l`.

use super::{Blueprint, check_lids, check_radix, nonzero, underscore_host};
use crate::error::Result;
use crate::model::Fabric;

pub(super) fn generate(leaves: u32, spines: u32, hosts: u32, links: u32) -> Result<Fabric> {
    nonzero("fat tree leaf count", leaves)?;
    nonzero("fat tree spine count", spines)?;
    nonzero("fat tree hosts per leaf", hosts)?;
    nonzero("fat tree links per leaf/spine pair", links)?;
    check_radix(
        &format!("a fat tree leaf ({hosts} hosts + {spines} spines x {links} links)"),
        hosts as u64 + spines as u64 * links as u64,
    )?;
    check_radix(
        &format!("a fat tree spine ({leaves} leaves x {links} links)"),
        leaves as u64 * links as u64,
    )?;
    check_lids(
        Some(leaves as u64 + spines as u64),
        Some(leaves as u64 * hosts as u64),
    )?;

    let mut plan = Blueprint::with_capacity(
        (leaves + spines) as usize,
        (leaves * spines * links) as usize,
    );
    for l in 0..leaves {
        plan.switch(format!("s0_{l}"), hosts, spines * links);
    }
    for s in 0..spines {
        plan.switch(format!("s1_{s}"), 0, leaves * links);
    }
    for l in 0..leaves {
        for s in 0..spines {
            for m in 0..links {
                plan.link(l, s * links + m, leaves + s, l * links + m);
            }
        }
    }
    plan.assemble(underscore_host)
}

#[cfg(test)]
mod tests {
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};

    fn ft(leaves: u32, spines: u32, hosts: u32, links: u32) -> crate::Result<crate::Fabric> {
        generate(&Topology::FatTree2 {
            leaves,
            spines,
            hosts,
            links,
        })
    }

    #[test]
    fn ft648_properties() {
        let f = generate(&Topology::ft648()).expect("ft648");
        let s = check(&f);
        assert_eq!((s.switches, s.cas), (54, 648));
        assert_eq!(s.net_links, 36 * 18);
        assert_eq!(s.links, 36 * 18 + 648);
        assert_eq!(s.diameter, Some(2));
        for sw in f.switches() {
            assert_eq!(f.num_ports(*sw), 36, "all ft648 switches are 36-port");
        }
        assert!(s.net_degree[..36].iter().all(|&d| d == 18));
        assert!(s.net_degree[36..].iter().all(|&d| d == 36));
        assert!(s.hosts[..36].iter().all(|&h| h == 18));
        assert!(s.hosts[36..].iter().all(|&h| h == 0));
    }

    #[test]
    fn parallel_links() {
        let f = ft(4, 2, 3, 2).expect("valid");
        let s = check(&f);
        assert_eq!((s.switches, s.cas, s.net_links), (6, 12, 16));
        assert_eq!(s.diameter, Some(2));
        // Leaf 0, ports 4 and 5 both go to spine 0, ports 6 and 7 to spine 1.
        let leaf = f.switches()[0];
        let peer = |p: u8| f.desc(f.node_of(f.remote(f.slot(leaf, p)))).to_string();
        assert_eq!(
            [peer(4), peer(5), peer(6), peer(7)],
            ["s1_0", "s1_0", "s1_1", "s1_1"]
        );
        // Single leaf, single spine: diameter 1.
        let s = check(&ft(1, 1, 2, 1).expect("valid"));
        assert_eq!(s.diameter, Some(1));
    }

    #[test]
    fn bad_parameters() {
        assert_gen_err(ft(0, 1, 1, 1), "leaf count must be at least 1");
        assert_gen_err(ft(1, 0, 1, 1), "spine count must be at least 1");
        assert_gen_err(ft(1, 1, 0, 1), "hosts per leaf must be at least 1");
        assert_gen_err(
            ft(1, 1, 1, 0),
            "links per leaf/spine pair must be at least 1",
        );
        assert_gen_err(ft(4, 200, 60, 1), "260 ports");
        assert_gen_err(ft(128, 2, 2, 2), "256 ports");
    }
}
