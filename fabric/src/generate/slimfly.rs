//! Slim Fly (Besta & Hoefler, SC'14): the McKay–Miller–Širáň (MMS) graph
//! for a prime `q = 4w + delta`, `delta` in `{-1, 1}`.
//!
//! Switches are `(0, x, y)` and `(1, m, c)` with `x, y, m, c` in `Z_q`.
//! With `xi` a primitive root mod `q`, the generator sets are
//!
//! * `delta = 1`:  `X = {1, xi^2, ..., xi^(q-3)}` (the even powers),
//! * `delta = -1`: `X = {1, xi^2, ..., xi^(2w-2)} ∪ {xi^(2w-1), xi^(2w+1), ..., xi^(q-2)}`,
//!
//! and `X' = xi·X` in both cases (the odd powers for `delta = 1`). Both are
//! closed under negation. Links: `(0,x,y) ~ (0,x,y')` iff `y - y'` in `X`;
//! `(1,m,c) ~ (1,m,c')` iff `c - c'` in `X'`; `(0,x,y) ~ (1,m,c)` iff
//! `y = m·x + c`. The graph has `2q^2` switches of degree `(3q - delta)/2`
//! and diameter 2; both are checked on the result.
//!
//! Node order: `(0, x, y)` with `y` fastest, then `(1, m, c)` with `c`
//! fastest. Descriptions `s0_{x}_{y}` / `s1_{m}_{c}`, hosts `h0_{x}_{y}_{j}`.
//!
//! Ports: hosts on `1..=hosts`, then the links inside the subgraph in
//! ascending order of the generator element (`y + e` for `e` in `X`, or
//! `c + e` for `e` in `X'`), then the `q` links to the other subgraph in
//! ascending order of `m` (for `(0,x,y)`) or `x` (for `(1,m,c)`).

use super::{Blueprint, check_lids, check_radix, gen_err};
use crate::error::Result;
use crate::graph::SwitchGraph;
use crate::model::Fabric;

/// Network degree `(3q - delta)/2` of the MMS graph for an odd `q`.
fn degree(q: u32) -> u64 {
    let q = q as u64;
    // delta = 1 for q = 1 mod 4, -1 for q = 3 mod 4.
    if q % 4 == 1 {
        (3 * q - 1) / 2
    } else {
        (3 * q).div_ceil(2)
    }
}

/// Default hosts per switch: `ceil(degree / 2)`.
pub(super) fn default_hosts(q: u32) -> u32 {
    u32::try_from(degree(q).div_ceil(2)).unwrap_or(u32::MAX)
}

/// Prime factorisation by trial division (`n >= 2`), ascending primes.
pub(super) fn factorize(mut n: u64) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut p = 2u64;
    while p * p <= n {
        if n.is_multiple_of(p) {
            let mut e = 0;
            while n.is_multiple_of(p) {
                n /= p;
                e += 1;
            }
            out.push((p, e));
        }
        p += 1;
    }
    if n > 1 {
        out.push((n, 1));
    }
    out
}

fn pow_mod(mut b: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    b %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = r * b % m;
        }
        b = b * b % m;
        e >>= 1;
    }
    r
}

/// Smallest primitive root modulo the prime `q`.
fn primitive_root(q: u64) -> Option<u64> {
    let factors = factorize(q - 1);
    (2..q).find(|&g| {
        factors
            .iter()
            .all(|&(p, _)| pow_mod(g, (q - 1) / p, q) != 1)
    })
}

/// Validates `q` and returns `delta`.
fn check_q(q: u32) -> Result<i32> {
    if q < 3 {
        return Err(gen_err(format!(
            "Slim Fly q must be a prime of the form 4w ± 1 (3, 5, 7, 11, 13, ...), got {q}"
        )));
    }
    let f = factorize(q as u64);
    match f.as_slice() {
        [(_, 1)] => Ok(if q % 4 == 1 { 1 } else { -1 }),
        [(p, e)] => Err(gen_err(format!(
            "Slim Fly q = {q} = {p}^{e} is a prime power; only prime q are supported \
             (prime powers need GF(q) arithmetic)"
        ))),
        _ => Err(gen_err(format!(
            "Slim Fly q = {q} is not a prime; q must be a prime of the form 4w ± 1"
        ))),
    }
}

pub(super) fn generate(q: u32, hosts: Option<u32>) -> Result<Fabric> {
    let delta = check_q(q)?;
    let deg = degree(q);
    let hosts = hosts.unwrap_or_else(|| default_hosts(q));
    if hosts == 0 {
        return Err(gen_err("Slim Fly hosts per switch must be at least 1"));
    }
    check_radix(
        &format!("a Slim Fly switch ({hosts} hosts + {deg} links)"),
        hosts as u64 + deg,
    )?;
    let n = 2 * (q as u64) * (q as u64);
    check_lids(Some(n), Some(n * hosts as u64))?;
    // q <= 169 now (degree <= 253), so everything below fits easily.
    let deg = deg as u32;
    let qq = q as u64;
    let xi = primitive_root(qq).ok_or_else(|| gen_err(format!("no primitive root modulo {q}")))?;
    let w = (q as i64 - delta as i64) / 4;
    let exps: Vec<u64> = if delta == 1 {
        (0..q as u64 - 1).step_by(2).collect()
    } else {
        let (w2, top) = (2 * w as u64, q as u64 - 2);
        (0..w2 - 1)
            .step_by(2)
            .chain((w2 - 1..=top).step_by(2))
            .collect()
    };
    let mut x: Vec<u64> = exps.iter().map(|&e| pow_mod(xi, e, qq)).collect();
    let mut x2: Vec<u64> = x.iter().map(|&v| v * xi % qq).collect();
    x.sort_unstable();
    x2.sort_unstable();

    let (q, n) = (q, n as u32);
    let id0 = |x: u64, y: u64| (x * qq + y) as u32;
    let id1 = |m: u64, c: u64| (qq * qq + m * qq + c) as u32;
    let mut adj: Vec<Vec<u32>> = Vec::with_capacity(n as usize);
    for xx in 0..qq {
        for y in 0..qq {
            let mut l: Vec<u32> = x.iter().map(|&e| id0(xx, (y + e) % qq)).collect();
            // y = m*x + c  =>  c = y - m*x
            l.extend((0..qq).map(|m| id1(m, (y + qq * qq - m * xx % qq) % qq)));
            adj.push(l);
        }
    }
    for m in 0..qq {
        for c in 0..qq {
            let mut l: Vec<u32> = x2.iter().map(|&e| id1(m, (c + e) % qq)).collect();
            l.extend((0..qq).map(|xx| id0(xx, (m * xx + c) % qq)));
            adj.push(l);
        }
    }

    let mut plan = Blueprint::with_capacity(n as usize, (n * deg / 2) as usize);
    for xx in 0..q {
        for y in 0..q {
            plan.switch(
                format!("s0_{xx}_{y}"),
                hosts,
                adj[id0(xx as u64, y as u64) as usize].len() as u32,
            );
        }
    }
    for m in 0..q {
        for c in 0..q {
            plan.switch(
                format!("s1_{m}_{c}"),
                hosts,
                adj[id1(m as u64, c as u64) as usize].len() as u32,
            );
        }
    }
    plan.links_from_adjacency(&adj)?;
    let f = plan.assemble(super::underscore_host)?;

    let g = SwitchGraph::new(&f);
    if let Some(i) = (0..g.len() as u32).find(|&i| g.neighbours(i).len() != deg as usize) {
        return Err(gen_err(format!(
            "Slim Fly q = {q}: switch {i} has degree {} instead of {deg}",
            g.neighbours(i).len()
        )));
    }
    match g.diameter() {
        Some(2) => Ok(f),
        d => Err(gen_err(format!(
            "Slim Fly q = {q}: the MMS graph has diameter {d:?} instead of 2"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::{factorize, primitive_root};
    use crate::generate::testutil::{assert_gen_err, check};
    use crate::generate::{Topology, generate};

    fn sf(q: u32, hosts: Option<u32>) -> crate::Result<crate::Fabric> {
        generate(&Topology::SlimFly { q, hosts })
    }

    #[test]
    fn mms_properties() {
        // (q, degree, default hosts)
        for (q, deg, hosts) in [
            (3, 5, 3),
            (5, 7, 4),
            (7, 11, 6),
            (11, 17, 9),
            (13, 19, 10),
            (17, 25, 13),
            (19, 29, 15),
        ] {
            let f = sf(q, None).unwrap_or_else(|e| panic!("q={q}: {e}"));
            let s = check(&f);
            let n = 2 * (q * q) as usize;
            assert_eq!(s.switches, n, "q={q}");
            assert_eq!(s.cas, n * hosts, "q={q}");
            assert_eq!(s.min_max_degree(), (deg, deg), "q={q}");
            assert_eq!(s.net_links, n * deg / 2);
            assert_eq!(s.diameter, Some(2), "q={q}");
            assert!(s.hosts.iter().all(|&h| h == hosts));
        }
    }

    #[test]
    fn q5_is_the_50_switch_slim_fly() {
        let s = check(&sf(5, None).expect("q=5"));
        assert_eq!((s.switches, s.cas), (50, 200));
        assert_eq!(s.min_max_degree(), (7, 7));
        let s = check(&sf(5, Some(2)).expect("q=5 h=2"));
        assert_eq!(s.cas, 100);
    }

    #[test]
    fn bad_q() {
        for q in [0, 1, 2] {
            assert_gen_err(sf(q, None), "must be a prime of the form 4w ± 1");
        }
        assert_gen_err(sf(9, None), "9 = 3^2 is a prime power");
        assert_gen_err(sf(25, None), "25 = 5^2 is a prime power");
        assert_gen_err(sf(8, None), "8 = 2^3 is a prime power");
        assert_gen_err(sf(15, None), "15 is not a prime");
        assert_gen_err(sf(5, Some(0)), "hosts per switch must be at least 1");
        assert_gen_err(sf(5, Some(250)), "257 ports");
        // q = 37: 2738 switches * (1 + 28 hosts).
        assert_gen_err(sf(37, None), "79402 addressable ports");
        assert_gen_err(sf(4_294_967_291, None), "ports");
    }

    #[test]
    fn number_theory() {
        assert_eq!(factorize(360), [(2, 3), (3, 2), (5, 1)]);
        assert_eq!(primitive_root(5), Some(2));
        assert_eq!(primitive_root(7), Some(3));
        assert_eq!(primitive_root(23), Some(5));
    }
}
