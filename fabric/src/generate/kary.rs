//! k-ary n-tree (Petrini & Vanneschi): `n` levels of `k^(n-1)` switches.
//!
//! Level 0 holds the leaves (`k` hosts each), level `n-1` the roots. A
//! switch is `<w, l>` with `w` a number of `n-1` base-`k` digits (digit `i`
//! is `(w / k^i) % k`); `<w, l>` links `<w', l+1>` iff `w` and `w'` agree on
//! every digit except possibly digit `l`.
//!
//! Node order: level 0 (`w` ascending), then level 1, ... Descriptions
//! `s{l}_{w}`, hosts `h0_{w}_{j}`.
//!
//! Ports: leaves have hosts on `1..=k` and up-links on `k+1..=2k`; inner
//! switches have down-links on `1..=k` and up-links on `k+1..=2k`; roots have
//! only the `k` down-links. The down-link to child `<w, l-1>` is on port
//! `1 + digit_{l-1}(w)`, the up-link to parent `<w', l+1>` on port
//! `k + 1 + digit_l(w')`.

use super::{Blueprint, check_lids, check_radix, nonzero, underscore_host};
use crate::error::Result;
use crate::model::Fabric;

pub(super) fn generate(k: u32, n: u32) -> Result<Fabric> {
    nonzero("k-ary n-tree arity k", k)?;
    nonzero("k-ary n-tree level count n", n)?;
    let radix = if n > 1 { 2 * k as u64 } else { k as u64 };
    check_radix(
        &format!("a k-ary n-tree switch (2k = {})", 2 * k as u64),
        radix,
    )?;
    let per_level = (k as u64).checked_pow(n - 1);
    let switches = per_level.and_then(|p| p.checked_mul(n as u64));
    let hosts = (k as u64).checked_pow(n);
    check_lids(switches, hosts)?;
    // Both fit in 49151 now.
    let per_level = per_level.unwrap_or(0) as u32;

    let mut plan =
        Blueprint::with_capacity((per_level * n) as usize, (per_level * k * (n - 1)) as usize);
    for l in 0..n {
        let hosts = if l == 0 { k } else { 0 };
        let down = if l > 0 { k } else { 0 };
        let up = if l + 1 < n { k } else { 0 };
        for w in 0..per_level {
            plan.switch(format!("s{l}_{w}"), hosts, down + up);
        }
    }
    let id = |l: u32, w: u32| l * per_level + w;
    let mut place = 1u32; // k^l
    for l in 0..n - 1 {
        // Leaves have no down-links: their up-links start at network index 0.
        let up_off = if l == 0 { 0 } else { k };
        for w in 0..per_level {
            let digit = (w / place) % k;
            let base = w - digit * place;
            for d in 0..k {
                let parent = base + d * place;
                plan.link(id(l, w), up_off + d, id(l + 1, parent), digit);
            }
        }
        place = place.saturating_mul(k);
    }
    plan.assemble(underscore_host)
}

#[cfg(test)]
mod tests {
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};

    fn tree(k: u32, n: u32) -> crate::Result<crate::Fabric> {
        generate(&Topology::KaryNTree { k, n })
    }

    #[test]
    fn counts_degrees_and_diameter() {
        for (k, n) in [
            (2, 1),
            (2, 2),
            (2, 3),
            (3, 3),
            (4, 3),
            (2, 5),
            (1, 3),
            (18, 2),
        ] {
            let f = tree(k, n).expect("valid tree");
            let s = check(&f);
            let per_level = (k as usize).pow(n - 1);
            assert_eq!(s.switches, n as usize * per_level, "k={k} n={n}");
            assert_eq!(s.cas, (k as usize).pow(n));
            assert_eq!(s.net_links, per_level * k as usize * (n as usize - 1));
            assert_eq!(s.links, s.net_links + s.cas);
            // A 1-ary tree is a chain of n switches.
            let diameter = if k == 1 { n - 1 } else { 2 * (n - 1) };
            assert_eq!(s.diameter, Some(diameter), "k={k} n={n}");
            for (i, (&deg, &h)) in s.net_degree.iter().zip(&s.hosts).enumerate() {
                let level = i / per_level;
                let (want_h, want_deg) = match level {
                    0 if n == 1 => (k, 0),
                    0 => (k, k),
                    l if l as u32 == n - 1 => (0, k),
                    _ => (0, 2 * k),
                };
                assert_eq!((h, deg), (want_h as usize, want_deg as usize), "switch {i}");
            }
        }
    }

    #[test]
    fn binary_3_tree_is_standard() {
        let f = tree(2, 3).expect("2-ary 3-tree");
        let s = check(&f);
        assert_eq!((s.switches, s.cas), (12, 8));
        // Leaf s0_0 (w=00) goes up to s1_0 and s1_1 (w differs in digit 0).
        let by_desc = |d: &str| {
            (0..f.num_nodes() as u32)
                .find(|&n| f.desc(n) == d)
                .expect("node")
        };
        let leaf = by_desc("s0_0");
        let ups: Vec<&str> = [3u8, 4]
            .iter()
            .map(|&p| f.desc(f.node_of(f.remote(f.slot(leaf, p)))))
            .collect();
        assert_eq!(ups, ["s1_0", "s1_1"]);
        // s1_1 (w=01) goes up to s2_1 and s2_3 (digit 1 varies).
        let mid = by_desc("s1_1");
        let ups: Vec<&str> = [3u8, 4]
            .iter()
            .map(|&p| f.desc(f.node_of(f.remote(f.slot(mid, p)))))
            .collect();
        assert_eq!(ups, ["s2_1", "s2_3"]);
        assert_eq!(f.num_ports(by_desc("s2_0")), 2);
        assert_eq!(f.desc(f.node_of(f.remote(f.slot(leaf, 1)))), "h0_0_0");
    }

    #[test]
    fn bad_parameters() {
        assert_gen_err(tree(0, 3), "arity k must be at least 1");
        assert_gen_err(tree(2, 0), "level count n must be at least 1");
        assert_gen_err(tree(128, 2), "256 ports");
        assert_gen_err(tree(16, 4), "addressable ports");
        assert_gen_err(tree(100, 100), "addressable ports");
    }
}
