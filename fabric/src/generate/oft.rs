//! Two-level orthogonal fat tree (Valerio, Moser and Melliar-Smith,
//! "Recursively scalable fat-trees as interconnection networks", 1994), in
//! the reading of Camarero et al.'s "Projective Networks" and DF-DN's
//! Section V-C: two single-path trees stacked on one top level, built from
//! the projective plane PG(2, q) of order `q = k - 1`.
//!
//! The `q^2 + q + 1` lines of the plane are the top switches (spines); each
//! of the two halves has a leaf per point, linked to the `k = q + 1` lines
//! through it. Two leaves of one half share exactly one spine (two points
//! lie on one line), so every pair of their hosts has a single shortest
//! path; a leaf and the other half's leaf of another point also share one,
//! and a point's two leaves share all `k`. Two spines share one leaf per
//! half (two lines meet in one point). Leaves and spines have radix `2k`:
//! leaves `k` hosts (by default) and `k` up-links, spines `2k` down-links.
//! The plane is built over the prime field GF(q); prime powers other than
//! primes are refused (their fields are not implemented). Other orders
//! have no known plane: none exists for 6 and 14 (Bruck-Ryser-Chowla) or
//! 10 (Lam's search), and none is known for 12 or 15.
//!
//! Node order: half-A leaves `s0_{i}`, half-B leaves `s1_{i}`, spines
//! `s2_{j}`, for points `i` and lines `j` in the order of [`plane`];
//! hosts `h0_{i}_{h}` / `h1_{i}_{h}`.
//!
//! Ports: leaf hosts on `1..=hosts`, then the up-links by ascending line;
//! spine ports `1..=k` lead to half A's leaves by ascending point, then
//! `k+1..=2k` to half B's.

use super::slimfly::factorize;
use super::{Blueprint, check_lids, check_radix, gen_err, underscore_host};
use crate::error::Result;
use crate::model::Fabric;

/// The points (equally, the lines) of PG(2, q) for a prime `q`: the
/// non-zero vectors of GF(q)^3 whose first non-zero coordinate is 1.
fn plane(q: u64) -> Vec<[u64; 3]> {
    let mut v = Vec::with_capacity((q * q + q + 1) as usize);
    for a in 0..q {
        for b in 0..q {
            v.push([1, a, b]);
        }
    }
    for b in 0..q {
        v.push([0, 1, b]);
    }
    v.push([0, 0, 1]);
    v
}

/// Validates `k` and returns the plane's order `q = k - 1`.
fn check_k(k: u32) -> Result<u64> {
    if k < 3 {
        return Err(gen_err(format!(
            "OFT k must be at least 3 (k - 1 a prime: 3, 4, 6, 8, 12, 14, 18, ...), got {k}"
        )));
    }
    let q = k as u64 - 1;
    match factorize(q).as_slice() {
        [(_, 1)] => Ok(q),
        [(p, e)] => Err(gen_err(format!(
            "OFT k = {k}: the plane's order k - 1 = {q} = {p}^{e} is a prime power; \
             only prime orders are built (GF({q}) is not implemented)"
        ))),
        _ => Err(gen_err(format!(
            "OFT k = {k}: no projective plane of order k - 1 = {q} is built (it is not a prime{})",
            match q {
                6 | 14 => "; by Bruck-Ryser-Chowla none exists",
                10 => "; none exists (Lam's search)",
                _ => "; no plane of this order is known",
            }
        ))),
    }
}

pub(super) fn generate(k: u32, hosts: Option<u32>) -> Result<Fabric> {
    let q = check_k(k)?;
    let hosts = hosts.unwrap_or(k);
    if hosts == 0 {
        return Err(gen_err("OFT hosts per leaf must be at least 1"));
    }
    check_radix(
        &format!("an OFT leaf ({hosts} hosts + {k} up-links)"),
        hosts as u64 + k as u64,
    )?;
    check_radix(
        &format!("an OFT spine ({} down-links)", 2 * k),
        2 * k as u64,
    )?;
    let pts = plane(q);
    let n = pts.len() as u64;
    check_lids(Some(3 * n), Some(2 * n * hosts as u64))?;
    // q <= 126 now (radix <= 254), so n < 2^14 and every index fits a u32.
    let n = n as u32;
    let on =
        |p: &[u64; 3], l: &[u64; 3]| (p[0] * l[0] + p[1] * l[1] + p[2] * l[2]).is_multiple_of(q);
    // Per line: its points, ascending.
    let line_pts: Vec<Vec<u32>> = pts
        .iter()
        .map(|l| (0..n).filter(|&i| on(&pts[i as usize], l)).collect())
        .collect();
    let mut pt_lines: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
    for (j, ps) in line_pts.iter().enumerate() {
        for &i in ps {
            pt_lines[i as usize].push(j as u32);
        }
    }
    if let Some(j) = line_pts.iter().position(|p| p.len() != k as usize) {
        return Err(gen_err(format!(
            "OFT k = {k}: line {j} holds {} points instead of {k}",
            line_pts[j].len()
        )));
    }

    let mut plan = Blueprint::with_capacity(3 * n as usize, (2 * n * k) as usize);
    for half in 0..2 {
        for i in 0..n {
            plan.switch(format!("s{half}_{i}"), hosts, k);
        }
    }
    for j in 0..n {
        plan.switch(format!("s2_{j}"), 0, 2 * k);
    }
    for (i, lines) in pt_lines.iter().enumerate() {
        for (up, &j) in lines.iter().enumerate() {
            // The point's rank on the line is the spine's port toward it.
            let down = line_pts[j as usize]
                .iter()
                .position(|&p| p == i as u32)
                .ok_or_else(|| gen_err("internal error: a point is missing from its line"))?
                as u32;
            for half in 0..2 {
                plan.link(half * n + i as u32, up as u32, 2 * n + j, half * k + down);
            }
        }
    }
    plan.assemble(underscore_host)
}

#[cfg(test)]
mod tests {
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};
    use crate::graph::SwitchGraph;

    fn oft(k: u32, hosts: Option<u32>) -> crate::Result<crate::Fabric> {
        generate(&Topology::Oft { k, hosts })
    }

    #[test]
    fn counts_degrees_and_diameter() {
        for k in [3u32, 4, 6, 8, 12] {
            let f = oft(k, None).unwrap_or_else(|e| panic!("k={k}: {e}"));
            let s = check(&f);
            let n = (k * k - k + 1) as usize;
            assert_eq!((s.switches, s.cas), (3 * n, 2 * n * k as usize), "k={k}");
            assert_eq!(s.net_links, 2 * n * k as usize);
            assert!(s.net_degree[..2 * n].iter().all(|&d| d == k as usize));
            assert!(s.net_degree[2 * n..].iter().all(|&d| d == 2 * k as usize));
            assert!(s.hosts[2 * n..].iter().all(|&h| h == 0));
            // Leaf to leaf 2 hops, leaf to a spine off its lines 3.
            assert_eq!(s.diameter, Some(3), "k={k}");
            for sw in f.switches() {
                assert_eq!(f.num_ports(*sw), 2 * k as u8);
            }
        }
    }

    /// The orthogonality that makes it an OFT: leaves share exactly one
    /// spine unless they are one point's two leaves (then all k), and two
    /// spines share exactly one leaf per half.
    #[test]
    fn leaves_share_one_spine_and_spines_one_leaf_per_half() {
        let k = 6usize;
        let f = oft(k as u32, None).unwrap();
        let g = SwitchGraph::new(&f);
        let n = k * k - k + 1;
        let nb =
            |i: usize| -> Vec<u32> { g.neighbours(i as u32).iter().map(|&(v, _)| v).collect() };
        let common = |a: usize, b: usize| nb(a).iter().filter(|v| nb(b).contains(v)).count();
        for a in 0..2 * n {
            for b in a + 1..2 * n {
                let twins = b == a + n;
                assert_eq!(common(a, b), if twins { k } else { 1 }, "leaves {a} {b}");
            }
        }
        for a in 2 * n..3 * n {
            for b in a + 1..3 * n {
                assert_eq!(common(a, b), 2, "spines {a} {b}");
            }
        }
    }

    /// The ports the module doc states: a leaf's up-links by ascending
    /// line after its hosts; a spine's first k ports to half A's leaves by
    /// ascending point, the next k to half B's.
    #[test]
    fn ports_follow_the_documented_order() {
        let k = 4u8;
        let f = oft(k as u32, Some(2)).unwrap();
        let index = |n: u32| -> u32 {
            let d = f.desc(n);
            d[d.find('_').unwrap() + 1..].parse().unwrap()
        };
        let far = |n: u32, p: u8| f.node_of(f.remote(f.slot(n, p)));
        for &sw in f.switches() {
            let d = f.desc(sw).to_string();
            if d.starts_with("s2_") {
                for (half, ports) in [("s0_", 1..=k), ("s1_", k + 1..=2 * k)] {
                    let leaves: Vec<u32> = ports.map(|p| far(sw, p)).collect();
                    assert!(leaves.iter().all(|&l| f.desc(l).starts_with(half)), "{d}");
                    assert!(leaves.windows(2).all(|w| index(w[0]) < index(w[1])), "{d}");
                }
            } else {
                assert!((1..=2).all(|p| f.kind(far(sw, p)) == crate::model::NodeKind::Ca));
                let spines: Vec<u32> = (3..=2 + k).map(|p| far(sw, p)).collect();
                assert!(spines.iter().all(|&s| f.desc(s).starts_with("s2_")), "{d}");
                assert!(spines.windows(2).all(|w| index(w[0]) < index(w[1])), "{d}");
            }
        }
    }

    #[test]
    fn bad_k() {
        for k in [0, 1, 2] {
            assert_gen_err(oft(k, None), "must be at least 3");
        }
        assert_gen_err(oft(5, None), "k - 1 = 4 = 2^2 is a prime power");
        assert_gen_err(oft(16, None), "15 is built (it is not a prime; no plane");
        assert_gen_err(
            oft(7, None),
            "6 is built (it is not a prime; by Bruck-Ryser-Chowla",
        );
        assert_gen_err(
            oft(11, None),
            "10 is built (it is not a prime; none exists (Lam",
        );
        assert_gen_err(oft(6, Some(0)), "hosts per leaf must be at least 1");
        assert_gen_err(oft(6, Some(250)), "256 ports");
        assert_gen_err(oft(128, None), "254");
    }
}
