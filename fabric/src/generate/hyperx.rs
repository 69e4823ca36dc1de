//! HyperX (Ahn, Binkert, Davis, McLaren, Schreiber, SC'09) with single link
//! width: switches on an `S_0 x S_1 x ...` lattice, two switches linked iff
//! they differ in exactly one coordinate. Network degree `sum(S_d - 1)`,
//! diameter = number of dimensions with `S_d > 1`.
//!
//! Node order: coordinate 0 varies fastest. Descriptions `s{c0}_{c1}_...`,
//! hosts `h{c0}_{c1}_..._{j}`.
//!
//! Ports: hosts on `1..=hosts`, then per dimension `d` in order the
//! `S_d - 1` peers along `d` in ascending order of their coordinate.

use super::{Blueprint, check_lids, check_radix, gen_err, nonzero, product, underscore_host};
use crate::error::Result;
use crate::model::Fabric;

/// Most dimensions accepted (descriptions must fit in 64 bytes).
const MAX_DIMS: usize = 8;

pub(super) fn generate(dims: &[u32], hosts: u32) -> Result<Fabric> {
    if dims.is_empty() || dims.len() > MAX_DIMS {
        return Err(gen_err(format!(
            "a HyperX needs 1 to {MAX_DIMS} dimensions, got {}",
            dims.len()
        )));
    }
    for (d, &s) in dims.iter().enumerate() {
        nonzero(&format!("HyperX size of dimension {d}"), s)?;
    }
    nonzero("HyperX hosts per switch", hosts)?;
    let deg: u64 = dims.iter().map(|&s| s as u64 - 1).sum();
    check_radix(
        &format!("a HyperX switch ({hosts} hosts + {deg} links)"),
        hosts as u64 + deg,
    )?;
    let n = product(dims);
    check_lids(n, n.and_then(|n| n.checked_mul(hosts as u64)))?;
    let (n, deg) = (n.unwrap_or(0) as u32, deg as u32);

    let mut offsets = Vec::with_capacity(dims.len());
    let mut strides = Vec::with_capacity(dims.len());
    let (mut off, mut stride) = (0u32, 1u32);
    for &s in dims {
        offsets.push(off);
        strides.push(stride);
        off += s - 1;
        stride = stride.saturating_mul(s);
    }
    let coords = |mut i: u32| -> Vec<u32> {
        dims.iter()
            .map(|&s| {
                let c = i % s;
                i /= s;
                c
            })
            .collect()
    };
    // Network port index, on a switch with coordinate `own` along `d`, of
    // the peer with coordinate `other` along `d`.
    let port =
        |d: usize, own: u32, other: u32| offsets[d] + if other < own { other } else { other - 1 };

    let mut plan = Blueprint::with_capacity(n as usize, (n as usize * deg as usize) / 2);
    for i in 0..n {
        let c = coords(i);
        let desc = format!(
            "s{}",
            c.iter().map(u32::to_string).collect::<Vec<_>>().join("_")
        );
        plan.switch(desc, hosts, deg);
    }
    for i in 0..n {
        let c = coords(i);
        for (d, (&s, &cc)) in dims.iter().zip(&c).enumerate() {
            for other in cc + 1..s {
                let j = i + (other - cc) * strides[d];
                plan.link(i, port(d, cc, other), j, port(d, other, cc));
            }
        }
    }
    plan.assemble(underscore_host)
}

#[cfg(test)]
mod tests {
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};

    fn hx(dims: &[u32], hosts: u32) -> crate::Result<crate::Fabric> {
        generate(&Topology::HyperX {
            dims: dims.to_vec(),
            hosts,
        })
    }

    #[test]
    fn counts_degrees_and_diameter() {
        let cases: &[&[u32]] = &[
            &[4],
            &[4, 4],
            &[4, 4, 4],
            &[3, 5, 2],
            &[2, 2, 2, 2],
            &[6, 1, 3],
            &[1],
            &[8, 8],
        ];
        for &dims in cases {
            for hosts in [1, 4] {
                let f = hx(dims, hosts).expect("valid HyperX");
                let s = check(&f);
                let n: usize = dims.iter().map(|&s| s as usize).product();
                let deg: usize = dims.iter().map(|&s| s as usize - 1).sum();
                assert_eq!(s.switches, n, "{dims:?}");
                assert_eq!(s.cas, n * hosts as usize);
                assert_eq!(s.min_max_degree(), (deg, deg), "{dims:?}");
                assert_eq!(s.net_links, n * deg / 2);
                let d = dims.iter().filter(|&&s| s > 1).count() as u32;
                assert_eq!(s.diameter, Some(d), "{dims:?}");
            }
        }
    }

    #[test]
    fn port_layout() {
        let f = hx(&[3, 2], 1).expect("valid");
        // s1_0: host, then x peers s0_0, s2_0, then y peer s1_1.
        let sw = f.switches()[1];
        assert_eq!(f.desc(sw), "s1_0");
        let peers: Vec<&str> = (1..=4)
            .map(|p| f.desc(f.node_of(f.remote(f.slot(sw, p)))))
            .collect();
        assert_eq!(peers, ["h1_0_0", "s0_0", "s2_0", "s1_1"]);
    }

    #[test]
    fn bad_parameters() {
        assert_gen_err(hx(&[], 1), "1 to 8 dimensions, got 0");
        assert_gen_err(hx(&[2; 9], 1), "1 to 8 dimensions, got 9");
        assert_gen_err(hx(&[4, 0], 1), "size of dimension 1 must be at least 1");
        assert_gen_err(hx(&[4, 4], 0), "hosts per switch must be at least 1");
        assert_gen_err(hx(&[100, 100, 60], 1), "258 ports");
        assert_gen_err(hx(&[32, 32, 32], 1), "65536 addressable ports");
    }
}
