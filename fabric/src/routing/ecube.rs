//! E-cube routing on a torus with datelines, in virtual layers: dimension
//! order (the lowest dimension that differs first, the shorter way round
//! each ring), and each route on the layer (SL and VL) named by the set of
//! dimensions whose wrap-around link it crosses.
//!
//! Why layers and not a VL switch at the dateline: in a ring, the routes
//! that never cross the wrap-around link use it as a line, and the routes
//! that do cross it are shorter than half the ring, so together they never
//! cover the link opposite the wrap: each layer's ring is cut in one
//! place, and with dimension order every layer is a mesh routed XY. That
//! is what the DQR paper's torus plug-in needs: the mesh plug-in's detours
//! then apply per layer (`dqr::detour`), and one VL per route keeps the
//! VL-per-hop question out of the reroute. The price is 2^n VLs for n
//! dimensions (4 on a 2D torus, 8 on a 3D one) where a per-hop dateline
//! switch needs 2.
//!
//! The torus is read from the cabling as `gen mesh --torus` lays it out
//! (and as a torus cabled in dimension order is): on every switch, its
//! switch-to-switch ports in port order are the `-1` then the `+1`
//! neighbour of each dimension in turn. Coordinates count from the first
//! switch; the dateline of each ring is the link from coordinate `k-1` to
//! `0`. Anything else (a mesh, a dimension of two switches, a cable out
//! of order) is refused with the switch and port that do not fit.
//!
//! Ties (a ring of even size, destination half way round) go the way that
//! does not cross the dateline, so they take no wrap-around layer and
//! split evenly between the two directions.

use super::paths::identity_sl2vl;
use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::model::{Fabric, NONE, NodeKind};
use crate::tables::{Lfts, PathSl, Routing, SL_NONE};

pub struct Ecube;

impl RoutingEngine for Ecube {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Ecube
    }
    fn description(&self) -> &'static str {
        "E-cube on tori: dimension order, one VL layer per set of wrap-around links crossed (2^dims VLs); the base of the DQR torus plug-in"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let t = Torus::read(f)?;
        let layers = 1u32 << t.dims.len();
        let budget = u32::from(opts.max_vls.min(opts.max_sls));
        if layers > budget {
            return Err(err(format!(
                "a {}-dimensional torus needs {layers} VLs (one per set of wrap-around links crossed), {budget} allowed",
                t.dims.len()
            )));
        }
        let nsw = f.switches().len();
        let mut lfts = Lfts::for_fabric(f);
        // Per destination switch, the port every other switch forwards on:
        // the same for the switch's own LID and for each of its hosts.
        let mut toward = vec![0u8; nsw];
        for (ti, &tsw) in f.switches().iter().enumerate() {
            for (si, port) in toward.iter_mut().enumerate() {
                *port = if si == ti { 0 } else { t.next_port(si, ti) };
            }
            let mut set_col = |lid: u16, own: u8| {
                for (si, &p) in toward.iter().enumerate() {
                    lfts.set(si as u32, lid, if si == ti { own } else { p });
                }
            };
            set_col(f.switch_lid(tsw), 0);
            for p in f.port_slots(tsw) {
                let r = f.remote(p);
                if r != NONE && f.kind(f.node_of(r)) != NodeKind::Switch {
                    set_col(f.lid_of_slot(r), f.port_of(p));
                }
            }
        }
        // Path SLs: one row per source switch (its hosts share it).
        let mut path_sl = PathSl::new(f.max_lid());
        let mut row_of = vec![u32::MAX; nsw];
        let blank = vec![SL_NONE; path_sl.width()];
        let mut used = 0u32;
        for &e in f.endports() {
            let Some(si) = f.switch_index(f.node_of(f.remote(e))) else {
                return Err(err(format!(
                    "end port of '{}' is not linked to a switch",
                    f.desc(f.node_of(e))
                )));
            };
            if row_of[si as usize] == u32::MAX {
                let r = path_sl.push_row(&blank);
                row_of[si as usize] = r;
                let row = path_sl.row_mut(r);
                for &d in f.endports() {
                    let Some(ti) = f.switch_index(f.node_of(f.remote(d))) else {
                        continue;
                    };
                    let layer = t.layer(si as usize, ti as usize);
                    used |= 1u32 << layer;
                    row[f.lid_of_slot(d) as usize] = layer;
                }
            }
            path_sl.assign(f.lid_of_slot(e), row_of[si as usize]);
        }
        // The highest layer any route took, plus one: the VLs the tables use.
        let vls = (32 - used.leading_zeros()).max(1) as u8;
        Ok(Routing {
            lfts,
            sl2vl: Some(identity_sl2vl(f, vls)),
            path_sl: Some(path_sl),
            vls_needed: None,
        })
    }
}

fn err(reason: String) -> Error {
    Error::Routing {
        engine: "ecube".into(),
        reason,
    }
}

/// A torus read from the cabling: ring sizes, switch coordinates and the
/// ports toward each neighbour.
struct Torus {
    dims: Vec<u32>,
    /// Per switch index, `dims.len()` coordinates.
    coord: Vec<u32>,
    /// Per switch index and dimension, the `-1` and `+1` ports.
    ports: Vec<[u8; 2]>,
}

impl Torus {
    fn read(f: &Fabric) -> Result<Self> {
        let sws = f.switches();
        if sws.is_empty() {
            return Err(err("the fabric has no switch".into()));
        }
        // Switch-to-switch ports in port order, per switch index, with the
        // switch each leads to.
        let links: Vec<Vec<(u8, usize)>> = sws
            .iter()
            .map(|&sw| {
                f.port_slots(sw)
                    .filter_map(|p| {
                        let r = f.remote(p);
                        if r == NONE {
                            return None;
                        }
                        let x = f.switch_index(f.node_of(r))?;
                        Some((f.port_of(p), x as usize))
                    })
                    .collect()
            })
            .collect();
        let m = links[0].len();
        if m == 0 || m % 2 == 1 || m > 6 {
            return Err(err(format!(
                "switch '{}' has {m} switch-to-switch links; a torus of 1 to 3 dimensions has 2, 4 or 6 on every switch",
                f.desc(sws[0])
            )));
        }
        if let Some((si, l)) = links.iter().enumerate().find(|(_, l)| l.len() != m) {
            return Err(err(format!(
                "switch '{}' has {} switch-to-switch links, '{}' has {m}: not a torus (a mesh is routed by dor)",
                f.desc(sws[si]),
                l.len(),
                f.desc(sws[0])
            )));
        }
        let n = m / 2;
        // Per switch and dimension, the -1 and +1 (port, neighbour).
        let sides: Vec<[(u8, usize); 2]> = links
            .iter()
            .flat_map(|l| (0..n).map(move |d| [l[2 * d], l[2 * d + 1]]))
            .collect();
        let step = |si: usize, d: usize, side: usize| sides[si * n + d][side].1;
        // Ring sizes: the +1 walk from the first switch back to it.
        let mut dims = Vec::with_capacity(n);
        for (d, first) in sides[..n].iter().enumerate() {
            let (mut at, mut k) = (step(0, d, 1), 1u32);
            while at != 0 && (k as usize) <= sws.len() {
                at = step(at, d, 1);
                k += 1;
            }
            if at != 0 || k < 3 {
                return Err(err(format!(
                    "the +1 ports of dimension {d} from switch '{}' do not close a ring of 3 or more switches (port {})",
                    f.desc(sws[0]),
                    first[1].0
                )));
            }
            dims.push(k);
        }
        let total: usize = dims.iter().map(|&k| k as usize).product();
        if total != sws.len() {
            return Err(err(format!(
                "rings of {} switches make {total} switches, the fabric has {}",
                dims.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join("x"),
                sws.len()
            )));
        }
        // Coordinates by walking +1 from the first switch, dimension by
        // dimension; then every link is checked against them.
        let mut coord = vec![u32::MAX; sws.len() * n];
        let mut at = 0usize;
        let mut c = vec![0u32; n];
        for i in 0..total {
            if coord[at * n] != u32::MAX {
                return Err(err(format!(
                    "switch '{}' is reached twice walking the torus: the cabling is not in dimension order",
                    f.desc(sws[at])
                )));
            }
            coord[at * n..at * n + n].copy_from_slice(&c);
            if i + 1 == total {
                break;
            }
            // Advance like an odometer: +1 in dimension 0, carrying over.
            let mut d = 0;
            loop {
                at = step(at, d, 1);
                c[d] += 1;
                if c[d] < dims[d] || d + 1 == n {
                    break;
                }
                c[d] = 0;
                d += 1;
            }
        }
        for si in 0..sws.len() {
            for d in 0..n {
                for (side, delta) in [(0usize, dims[d] - 1), (1, 1)] {
                    let nb = step(si, d, side);
                    let ok = (0..n).all(|e| {
                        let want = if e == d {
                            (coord[si * n + e] + delta) % dims[e]
                        } else {
                            coord[si * n + e]
                        };
                        coord[nb * n + e] == want
                    });
                    if !ok {
                        return Err(err(format!(
                            "switch '{}' port {} does not lead to its {} neighbour along dimension {d}: not a torus cabled in dimension order",
                            f.desc(sws[si]),
                            sides[si * n + d][side].0,
                            if side == 0 { "-1" } else { "+1" }
                        )));
                    }
                }
            }
        }
        Ok(Self {
            dims,
            coord,
            ports: sides.iter().map(|s| [s[0].0, s[1].0]).collect(),
        })
    }

    /// The way round dimension `d` from `a` to `b` (`a != b`): `(+1?, crosses
    /// the dateline?)`.
    fn way(&self, d: usize, a: u32, b: u32) -> (bool, bool) {
        let k = self.dims[d];
        let fwd = (b + k - a) % k;
        let plus = match (2 * fwd).cmp(&k) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            // Half way round: whichever way stays off the dateline.
            std::cmp::Ordering::Equal => a < b,
        };
        (plus, if plus { b < a } else { b > a })
    }

    /// The port switch `si` forwards on toward switch `ti` (`si != ti`).
    fn next_port(&self, si: usize, ti: usize) -> u8 {
        let n = self.dims.len();
        let (a, b) = (
            &self.coord[si * n..si * n + n],
            &self.coord[ti * n..ti * n + n],
        );
        let d = (0..n).find(|&d| a[d] != b[d]).unwrap_or(0);
        let (plus, _) = self.way(d, a[d], b[d]);
        self.ports[si * n + d][usize::from(plus)]
    }

    /// The layer of the route from switch `si` to switch `ti`: bit `d` set
    /// when it crosses dimension `d`'s dateline.
    fn layer(&self, si: usize, ti: usize) -> u8 {
        let n = self.dims.len();
        (0..n)
            .filter(|&d| {
                let (a, b) = (self.coord[si * n + d], self.coord[ti * n + d]);
                a != b && self.way(d, a, b).1
            })
            .fold(0u8, |m, d| m | 1 << d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};

    fn torus(dims: Vec<u32>, torus: bool) -> Fabric {
        generate(&Topology::Mesh {
            dims,
            torus,
            hosts: 2,
        })
        .expect("torus")
    }

    fn coords_of(f: &Fabric, sw: u32) -> Vec<u32> {
        f.desc(sw)[1..]
            .split('_')
            .map(|c| c.parse().expect("coordinate"))
            .collect()
    }

    /// Deadlock free with one VL per set of datelines crossed, every pair
    /// routed, each route minimal and in dimension order, and its SL the
    /// datelines it crosses (read back from the walk, not the engine).
    #[test]
    fn routes_tori_minimal_in_dimension_order_one_layer_per_dateline_set() {
        for (dims, vls) in [
            (vec![5, 5], 4),
            (vec![4, 6], 4),
            (vec![3, 4, 5], 8),
            (vec![6], 2),
        ] {
            let f = torus(dims.clone(), true);
            let r = Ecube.route(&f, &EngineOptions::default()).expect("routes");
            let rep = crate::verify::verify(&f, &r);
            assert!(rep.ok(), "{dims:?}: {rep:?}");
            assert!(rep.all_pairs_routed(), "{dims:?}");
            assert_eq!(rep.vls_used, vls, "{dims:?}");
            let ps = r.path_sl.as_ref().expect("path SLs");
            for &src in f.endports() {
                for &dst in f.endports() {
                    if src == dst {
                        continue;
                    }
                    let dlid = f.lid_of_slot(dst);
                    let mut sw = f.node_of(f.remote(src));
                    let end = f.node_of(f.remote(dst));
                    let mut seen_dims = Vec::new();
                    let mut crossed = 0u8;
                    let mut hops = 0;
                    while sw != end {
                        let si = f.switch_index(sw).expect("switch");
                        let p = r.lfts.get(si, dlid);
                        let next = f.node_of(f.remote(f.slot(sw, p)));
                        let (a, b) = (coords_of(&f, sw), coords_of(&f, next));
                        let d = (0..dims.len()).find(|&d| a[d] != b[d]).expect("moves");
                        if seen_dims.last() != Some(&d) {
                            seen_dims.push(d);
                        }
                        // A step from k-1 to 0 or back is the wrap-around.
                        if a[d].abs_diff(b[d]) > 1 {
                            crossed |= 1 << d;
                        }
                        sw = next;
                        hops += 1;
                        assert!(hops <= 64, "loop");
                    }
                    let (a, b) = (coords_of(&f, f.node_of(f.remote(src))), coords_of(&f, end));
                    let dist: u32 = (0..dims.len())
                        .map(|d| {
                            let x = a[d].abs_diff(b[d]);
                            x.min(dims[d] - x)
                        })
                        .sum();
                    assert_eq!(hops, dist, "{dims:?} minimal");
                    assert!(seen_dims.windows(2).all(|w| w[0] < w[1]), "dimension order");
                    assert_eq!(
                        ps.get(f.lid_of_slot(src), dlid),
                        crossed,
                        "{dims:?}: SL = datelines crossed"
                    );
                }
            }
        }
    }

    /// The layers matter: the same routes on one VL close a cycle.
    #[test]
    fn on_one_vl_the_same_routes_deadlock() {
        let f = torus(vec![5, 5], true);
        let mut r = Ecube.route(&f, &EngineOptions::default()).expect("routes");
        r.sl2vl = None;
        r.path_sl = None;
        assert!(!crate::verify::verify(&f, &r).ok());
    }

    #[test]
    fn refuses_meshes_small_rings_and_too_few_vls() {
        let msg = |f: &Fabric, opts: &EngineOptions| match Ecube.route(f, opts) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("routed"),
        };
        let m = msg(&torus(vec![4, 4], false), &EngineOptions::default());
        assert!(m.contains("not a torus"), "{m}");
        let m = msg(&torus(vec![2, 4], true), &EngineOptions::default());
        assert!(m.contains("switch-to-switch links"), "{m}");
        let m = msg(
            &torus(vec![3, 3, 3], true),
            &EngineOptions {
                max_vls: 4,
                ..EngineOptions::default()
            },
        );
        assert!(m.contains("needs 8 VLs"), "{m}");
    }
}
