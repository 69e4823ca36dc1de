//! Dimension-order routing (OpenSM's `dor`): shortest paths, and among a
//! switch's shortest-path ports toward a destination the lowest-numbered
//! one (with the ports cabled to the same neighbour as it, balanced by
//! port load like MinHop, for parallel links). A mesh or torus cabled with
//! its ports in dimension order (as `gen mesh` numbers them: per dimension
//! the `-1` then the `+1` neighbour) is then routed dimension by dimension,
//! XY routing in two dimensions: deadlock free on a mesh with one VL, and
//! the base the DQR mesh plug-in extends. On a torus the wrap-around links
//! close cycles; the verifier refuses those tables.

use super::{EngineOptions, RoutingEngine};
use crate::error::Result;
use crate::graph::{SwitchGraph, UNREACHABLE};
use crate::model::Fabric;
use crate::tables::Routing;

pub struct Dor;

impl RoutingEngine for Dor {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Dor
    }
    fn description(&self) -> &'static str {
        "dimension order: shortest paths on the lowest port (OpenSM dor); deadlock free on meshes cabled in dimension order, not on tori"
    }
    fn claims_deadlock_free(&self) -> bool {
        false
    }
    /// MinHop's LMC handling over DOR's candidates: a port's LIDs share
    /// the dimension-order path, spread only over parallel links to the
    /// same neighbour.
    fn routes_lmc(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let g = SwitchGraph::new(f);
        let hops = g.hop_matrix();
        let n = g.len();
        Ok(Routing::lfts_only(super::minhop::balanced_lfts(
            f,
            &g,
            opts,
            |si, j, out| {
                let h = hops[si as usize * n + j as usize];
                if h == UNREACHABLE || h == 0 {
                    return;
                }
                // The lowest shortest-path port, then every port to the
                // same neighbour (the graph lists a switch's links in port
                // order, as balanced_lfts wants its candidates).
                let closer = |nb: u32| hops[nb as usize * n + j as usize] == h - 1;
                let Some(&(nb0, _)) = g.neighbours(si).iter().find(|&&(nb, _)| closer(nb)) else {
                    return;
                };
                out.extend(
                    g.neighbours(si)
                        .iter()
                        .filter(|&&(nb, _)| nb == nb0)
                        .map(|&(_, slot)| f.port_of(slot)),
                );
            },
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::EngineKind;

    fn mesh(dims: Vec<u32>, torus: bool) -> Fabric {
        generate(&Topology::Mesh {
            dims,
            torus,
            hosts: 1,
        })
        .expect("mesh")
    }

    /// XY routing on a mesh: every path goes along dimension 0 first, then
    /// dimension 1, so no route turns from Y back to X; deadlock free on
    /// one VL.
    #[test]
    fn routes_a_mesh_x_then_y_without_cycles() {
        let f = mesh(vec![5, 4], false);
        let r = Dor.route(&f, &EngineOptions::default()).expect("routes");
        let rep = crate::verify::verify(&f, &r);
        assert!(rep.ok(), "{rep:?}");
        assert!(rep.all_pairs_routed());
        assert_eq!(rep.vls_used, 1);
        // From s0_0 toward the host of s3_2: three hops along X, then two
        // along Y.
        let at = |x: u32, y: u32| {
            f.switches()
                .iter()
                .position(|&s| f.desc(s) == format!("s{x}_{y}"))
                .expect("switch") as u32
        };
        let host = f
            .endports()
            .iter()
            .copied()
            .find(|&e| f.desc(f.node_of(e)) == "h3_2_0")
            .expect("host");
        let dlid = f.lid_of_slot(host);
        // Walk the route and record the dimension of every hop.
        let mut si = at(0, 0);
        let mut dims = Vec::new();
        for _ in 0..10 {
            let sw = f.switches()[si as usize];
            let p = r.lfts.get(si, dlid);
            let rem = f.remote(f.slot(sw, p));
            let Some(next) = f.switch_index(f.node_of(rem)) else {
                break;
            };
            let (a, b) = (f.desc(sw), f.desc(f.node_of(rem)));
            let same_y = a.split('_').nth(1) == b.split('_').nth(1);
            dims.push(if same_y { 'x' } else { 'y' });
            si = next;
        }
        assert_eq!(dims, vec!['x', 'x', 'x', 'y', 'y']);
    }

    #[test]
    fn a_torus_routed_by_dimension_order_has_a_cycle() {
        let f = mesh(vec![4, 4], true);
        let r = EngineKind::Dor
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let rep = crate::verify::verify(&f, &r);
        assert!(rep.all_pairs_routed());
        assert!(!rep.ok(), "the wrap-around links close a cycle");
    }
}
