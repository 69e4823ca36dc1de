//! Balanced Dragonfly (Kim, Dally, Scott, Abts, ISCA'08).
//!
//! `p` hosts per router (overridable), `a = 2p` routers per group, `h = p`
//! global links per router, `g = a*h + 1` groups. The routers of a group
//! are fully connected; every pair of groups shares exactly one global link,
//! wired "palmtree" style: global link `j = r*h + k` of group `i` (link `k`
//! of router `r`) goes to group `(i + j + 1) mod g`, where it arrives on
//! global link index `a*h - 1 - j`.
//!
//! Node order: group 0 routers 0..a, group 1, ... Descriptions `g{i}r{r}`,
//! hosts `g{i}r{r}h{j}`.
//!
//! Ports: hosts on `1..=hosts`, then the `a-1` local links in order of the
//! peer router (skipping the router itself), then the `h` global links in
//! order of `k`.

use super::{Blueprint, check_lids, check_radix, nonzero};
use crate::error::Result;
use crate::model::Fabric;

pub(super) fn generate(p: u32, hosts: Option<u32>) -> Result<Fabric> {
    nonzero("Dragonfly p", p)?;
    let hosts = hosts.unwrap_or(p);
    nonzero("Dragonfly hosts per router", hosts)?;
    let (a, h) = (2 * p as u64, p as u64);
    check_radix(
        &format!(
            "a Dragonfly router ({hosts} hosts + {} local + {h} global links)",
            a - 1
        ),
        hosts as u64 + a - 1 + h,
    )?;
    // p <= 84 now, so none of this overflows.
    let g = a * h + 1;
    let routers = a * g;
    check_lids(Some(routers), Some(routers * hosts as u64))?;
    let (a, h, g) = (a as u32, h as u32, g as u32);

    let mut plan = Blueprint::with_capacity(
        (a * g) as usize,
        (g * a * (a - 1) / 2 + g * (g - 1) / 2) as usize,
    );
    for i in 0..g {
        for r in 0..a {
            plan.switch(format!("g{i}r{r}"), hosts, a - 1 + h);
        }
    }
    // Local port index of peer `to` on router `from` (the router skips itself).
    let local = |from: u32, to: u32| if to < from { to } else { to - 1 };
    for i in 0..g {
        for r in 0..a {
            for r2 in r + 1..a {
                plan.link(i * a + r, local(r, r2), i * a + r2, local(r2, r));
            }
        }
    }
    // Global link j pairs with j' = a*h - 1 - j, so j < a*h/2 lists each once.
    let ah = a * h;
    for i in 0..g {
        for j in 0..ah / 2 {
            let i2 = (i + j + 1) % g;
            let j2 = ah - 1 - j;
            plan.link(
                i * a + j / h,
                a - 1 + j % h,
                i2 * a + j2 / h,
                a - 1 + j2 % h,
            );
        }
    }
    plan.assemble(|router, j| format!("{router}h{j}"))
}

#[cfg(test)]
mod tests {
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};
    use std::collections::HashSet;

    fn df(p: u32, hosts: Option<u32>) -> crate::Result<crate::Fabric> {
        generate(&Topology::Dragonfly { p, hosts })
    }

    #[test]
    fn sizes() {
        for (p, switches, cas) in [
            (1, 6, 6),
            (2, 36, 72),
            (3, 114, 342),
            (6, 876, 5256),
            (8, 2064, 16512),
        ] {
            let f = df(p, None).expect("valid dragonfly");
            let s = check(&f);
            assert_eq!((s.switches, s.cas), (switches, cas), "p={p}");
            let (a, h) = (2 * p as usize, p as usize);
            let g = a * h + 1;
            assert_eq!(s.net_links, g * a * (a - 1) / 2 + g * (g - 1) / 2, "p={p}");
            assert_eq!(s.min_max_degree(), (a - 1 + h, a - 1 + h));
            assert!(s.hosts.iter().all(|&x| x == p as usize));
            for sw in f.switches() {
                assert_eq!(f.num_ports(*sw) as usize, p as usize + a - 1 + h);
            }
        }
    }

    #[test]
    fn diameter_three_and_one_link_per_group_pair() {
        for p in [1, 2, 3, 4] {
            let f = df(p, None).expect("valid dragonfly");
            let s = check(&f);
            assert_eq!(s.diameter, Some(3), "p={p}");
            let a = 2 * p as usize;
            let g = a * p as usize + 1;
            let group = |n: u32| f.switch_index(n).map(|i| i as usize / a);
            let mut pairs = HashSet::new();
            let mut local = vec![0usize; g];
            for &sw in f.switches() {
                for sl in f.port_slots(sw) {
                    let peer = f.node_of(f.remote(sl));
                    if f.switch_index(peer).is_none() {
                        continue;
                    }
                    let (gs, gp) = (group(sw), group(peer));
                    match (gs, gp) {
                        (Some(x), Some(y)) if x == y => local[x] += 1,
                        (Some(x), Some(y)) => assert!(pairs.insert((x, y)), "two links {x}-{y}"),
                        _ => unreachable!("switch without index"),
                    }
                }
            }
            assert_eq!(pairs.len(), g * (g - 1), "every ordered group pair once");
            assert!(
                local.iter().all(|&l| l == a * (a - 1)),
                "groups fully connected"
            );
        }
    }

    #[test]
    fn palmtree_wiring() {
        let f = df(2, None).expect("p=2");
        // Router g0r0 has hosts on 1..=2, local links on 3..=5, global on 6..=7.
        let r = f.switches()[0];
        let peer = |p: u8| f.desc(f.node_of(f.remote(f.slot(r, p)))).to_string();
        let peers: Vec<String> = (1..=7).map(peer).collect();
        // Global link 0 goes to group 1, arriving on link index 7 (router 3, k=1).
        assert_eq!(
            peers,
            ["g0r0h0", "g0r0h1", "g0r1", "g0r2", "g0r3", "g1r3", "g2r3"]
        );
        assert_eq!(f.port_of(f.remote(f.slot(r, 6))), 2 + 3 + 2);
    }

    #[test]
    fn custom_hosts_and_bad_parameters() {
        let s = check(&df(2, Some(1)).expect("valid"));
        assert_eq!((s.switches, s.cas), (36, 36));
        assert_gen_err(df(0, None), "Dragonfly p must be at least 1");
        assert_gen_err(df(2, Some(0)), "hosts per router must be at least 1");
        assert_gen_err(df(64, None), "255 ports");
        assert_gen_err(df(2, Some(250)), "255 ports");
        // p = 11: 5346 routers + 58806 HCAs.
        assert_gen_err(df(11, None), "64152 addressable ports");
    }
}
