//! Meshes and tori of 1 to 3 dimensions.
//!
//! Switch `(x, y, z)` links its neighbours at `±1` along each dimension; a
//! torus also wraps around in every dimension of size 3 or more. A dimension
//! of size 2 gets a single link between its two switches (a wrap link would
//! duplicate it), and one of size 1 gets none.
//!
//! Node order: coordinate 0 varies fastest. Descriptions `s{x}_{y}_{z}`
//! (one number per dimension), hosts `h{x}_{y}_{z}_{j}`.
//!
//! Ports: hosts on `1..=hosts`, then per dimension in order the `-1`
//! neighbour and the `+1` neighbour, each only where the switch has it (so
//! mesh border switches have fewer ports).

use super::{Blueprint, check_lids, check_radix, gen_err, nonzero, product, underscore_host};
use crate::error::Result;
use crate::model::Fabric;

/// Which of its two neighbours along dimension `d` a switch at coordinate
/// `c` has: `(minus, plus)`.
fn sides(size: u32, c: u32, torus: bool) -> (bool, bool) {
    if size < 2 {
        (false, false)
    } else if torus && size >= 3 {
        (true, true)
    } else {
        (c > 0, c + 1 < size)
    }
}

pub(super) fn generate(dims: &[u32], torus: bool, hosts: u32) -> Result<Fabric> {
    let kind = if torus { "torus" } else { "mesh" };
    if dims.is_empty() || dims.len() > 3 {
        return Err(gen_err(format!(
            "a {kind} needs 1 to 3 dimensions, got {}",
            dims.len()
        )));
    }
    for (d, &s) in dims.iter().enumerate() {
        nonzero(&format!("{kind} size of dimension {d}"), s)?;
    }
    nonzero(&format!("{kind} hosts per switch"), hosts)?;
    let net = dims.iter().filter(|&&s| s >= 2).count() as u64 * 2;
    check_radix(
        &format!("a {kind} switch ({hosts} hosts + up to {net} links)"),
        hosts as u64 + net,
    )?;
    let n = product(dims);
    check_lids(n, n.and_then(|n| n.checked_mul(hosts as u64)))?;
    let n = n.unwrap_or(0) as u32;

    let coords = |mut i: u32| -> Vec<u32> {
        dims.iter()
            .map(|&s| {
                let c = i % s;
                i /= s;
                c
            })
            .collect()
    };
    // Network port index of the (minus or plus) neighbour along `d`.
    let port = |c: &[u32], d: usize, plus: bool| -> u32 {
        let mut idx = 0;
        for (dd, (&s, &cc)) in dims.iter().zip(c).enumerate().take(d + 1) {
            let (m, p) = sides(s, cc, torus);
            if dd < d {
                idx += m as u32 + p as u32;
            } else if plus {
                idx += m as u32;
            }
        }
        idx
    };
    let mut strides = Vec::with_capacity(dims.len());
    let mut stride = 1u32;
    for &s in dims {
        strides.push(stride);
        stride = stride.saturating_mul(s);
    }

    let mut plan = Blueprint::with_capacity(n as usize, n as usize * dims.len());
    for i in 0..n {
        let c = coords(i);
        let desc = format!(
            "s{}",
            c.iter().map(u32::to_string).collect::<Vec<_>>().join("_")
        );
        let ports: u32 = dims
            .iter()
            .zip(&c)
            .map(|(&s, &cc)| {
                let (m, p) = sides(s, cc, torus);
                m as u32 + p as u32
            })
            .sum();
        plan.switch(desc, hosts, ports);
    }
    for i in 0..n {
        let c = coords(i);
        for (d, (&s, &cc)) in dims.iter().zip(&c).enumerate() {
            if !sides(s, cc, torus).1 {
                continue;
            }
            let next = (cc + 1) % s;
            let j = i - cc * strides[d] + next * strides[d];
            let mut cj = c.clone();
            cj[d] = next;
            plan.link(i, port(&c, d, true), j, port(&cj, d, false));
        }
    }
    plan.assemble(underscore_host)
}

#[cfg(test)]
mod tests {
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};

    fn mesh(dims: &[u32], torus: bool, hosts: u32) -> crate::Result<crate::Fabric> {
        generate(&Topology::Mesh {
            dims: dims.to_vec(),
            torus,
            hosts,
        })
    }

    /// Links of a mesh/torus counted per dimension.
    fn expected_links(dims: &[u32], torus: bool) -> usize {
        let n: usize = dims.iter().map(|&s| s as usize).product();
        dims.iter()
            .map(|&s| {
                let s = s as usize;
                let per_line = match s {
                    1 => 0,
                    2 => 1,
                    _ if torus => s,
                    _ => s - 1,
                };
                n / s * per_line
            })
            .sum()
    }

    #[test]
    fn counts_degrees_and_diameter() {
        let cases: &[&[u32]] = &[
            &[4, 4, 4],
            &[5, 3],
            &[2, 2, 2],
            &[1, 6],
            &[7],
            &[2, 5, 1],
            &[3, 3, 3],
            &[1],
        ];
        for &dims in cases {
            for torus in [false, true] {
                for hosts in [1, 3] {
                    let f = mesh(dims, torus, hosts).expect("valid mesh");
                    let s = check(&f);
                    let n: usize = dims.iter().map(|&s| s as usize).product();
                    assert_eq!(s.switches, n, "{dims:?}");
                    assert_eq!(s.cas, n * hosts as usize);
                    assert!(s.hosts.iter().all(|&h| h == hosts as usize));
                    assert_eq!(
                        s.net_links,
                        expected_links(dims, torus),
                        "{dims:?} torus={torus}"
                    );
                    let want_diam: u32 = dims
                        .iter()
                        .map(|&s| if torus { s / 2 } else { s - 1 })
                        .sum();
                    assert_eq!(s.diameter, Some(want_diam), "{dims:?} torus={torus}");
                    for (i, &deg) in s.net_degree.iter().enumerate() {
                        let mut rest = i;
                        let mut want = 0;
                        for &size in dims {
                            let size = size as usize;
                            let c = rest % size;
                            rest /= size;
                            want += if torus {
                                (size - 1).min(2)
                            } else {
                                (c > 0) as usize + (c + 1 < size) as usize
                            };
                        }
                        assert_eq!(deg, want, "{dims:?} torus={torus} switch {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn torus_4x4x4() {
        let f = mesh(&[4, 4, 4], true, 1).expect("torus");
        let s = check(&f);
        assert_eq!((s.switches, s.cas, s.net_links), (64, 64, 192));
        assert_eq!(s.min_max_degree(), (6, 6));
        assert_eq!(s.diameter, Some(6));
        // s0_0_0: host on 1, then x-: s3_0_0, x+: s1_0_0, y-: s0_3_0, ...
        let sw = f.switches()[0];
        let peer = |p: u8| f.desc(f.node_of(f.remote(f.slot(sw, p)))).to_string();
        let peers: Vec<String> = (1..=7).map(peer).collect();
        assert_eq!(
            peers,
            [
                "h0_0_0_0", "s3_0_0", "s1_0_0", "s0_3_0", "s0_1_0", "s0_0_3", "s0_0_1"
            ]
        );
    }

    #[test]
    fn mesh_corner_has_fewer_ports() {
        let f = mesh(&[3, 3], false, 2).expect("mesh");
        let s = check(&f);
        assert_eq!(s.net_degree, [2, 3, 2, 3, 4, 3, 2, 3, 2]);
        assert_eq!(f.num_ports(f.switches()[0]), 4);
        assert_eq!(f.num_ports(f.switches()[4]), 6);
    }

    #[test]
    fn bad_parameters() {
        assert_gen_err(mesh(&[], true, 1), "1 to 3 dimensions, got 0");
        assert_gen_err(mesh(&[2, 2, 2, 2], false, 1), "1 to 3 dimensions, got 4");
        assert_gen_err(
            mesh(&[4, 0], true, 1),
            "size of dimension 1 must be at least 1",
        );
        assert_gen_err(
            mesh(&[4, 4], true, 0),
            "hosts per switch must be at least 1",
        );
        assert_gen_err(mesh(&[4, 4, 4], true, 250), "256 ports");
        assert_gen_err(mesh(&[64, 64, 64], true, 1), "524288 addressable ports");
        assert_gen_err(
            mesh(&[u32::MAX, u32::MAX, u32::MAX], true, 1),
            "addressable ports",
        );
    }
}
