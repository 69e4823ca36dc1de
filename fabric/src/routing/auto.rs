//! The engine a topology gets when the operator names none: always a
//! deadlock-free one, chosen from the shape of the fabric.
//!
//! - A fat tree (as `ftree` detects it): `ftree`, non-blocking shift
//!   permutations with 1 VL, what OpenSM's users run on fat trees.
//! - Otherwise, when the switch graph's diameter fits in the VLs allowed:
//!   `dfdn`, any minimal routing made deadlock free by one VL per hop; on
//!   Dragonflies, Slim Flies and tori it balances as well as the best
//!   engine and is the fastest of the deadlock-free ones.
//! - Otherwise `nue`, deadlock free with any number of VLs.
//! - With LMC above 0, `dfdn` where it is the choice (it routes every LID);
//!   where `ftree` or `nue` would be, `updn`: of the engines that route
//!   every LID, the one deadlock free with 1 VL on any connected fabric.

use super::{EngineKind, ftree};
use crate::graph::SwitchGraph;
use crate::model::Fabric;

/// The engine chosen and why, in words an operator reads in the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub engine: EngineKind,
    pub reason: String,
}

pub fn choose(f: &Fabric, max_vls: u8) -> Choice {
    let c = by_shape(f, max_vls);
    if f.max_lmc() == 0 || c.engine.engine().routes_lmc() {
        return c;
    }
    Choice {
        engine: EngineKind::Updn,
        reason: format!(
            "LMC up to {} and {} routes one LID per port: updn routes every LID, \
             spread over different next hops, deadlock free with 1 VL",
            f.max_lmc(),
            c.engine.name()
        ),
    }
}

fn by_shape(f: &Fabric, max_vls: u8) -> Choice {
    if ftree::hca_order(f).is_ok() {
        return Choice {
            engine: EngineKind::Ftree,
            reason: "a fat tree: ftree routes it non-blocking with 1 VL".into(),
        };
    }
    match SwitchGraph::new(f).diameter() {
        Some(d) if d <= u32::from(max_vls) => Choice {
            engine: EngineKind::Dfdn,
            reason: format!(
                "not a fat tree; switch diameter {d} fits in the {max_vls} VLs allowed: \
                 dfdn, one VL per hop"
            ),
        },
        Some(d) => Choice {
            engine: EngineKind::Nue,
            reason: format!(
                "not a fat tree; switch diameter {d} exceeds the {max_vls} VLs allowed: \
                 nue, deadlock free with any VL count"
            ),
        },
        // Disconnected: every engine refuses it; nue's error says why.
        None => Choice {
            engine: EngineKind::Nue,
            reason: "the switch graph is not connected".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::EngineOptions;
    use crate::verify;

    /// Each choice routes its fabric deadlock free, all pairs connected.
    #[test]
    fn the_choice_is_deadlock_free_on_each_shape() {
        let cases = [
            (Topology::KaryNTree { k: 4, n: 3 }, 8, EngineKind::Ftree),
            (
                Topology::Dragonfly { p: 2, hosts: None },
                8,
                EngineKind::Dfdn,
            ),
            (
                Topology::Mesh {
                    dims: vec![4, 4, 4],
                    torus: true,
                    hosts: 1,
                },
                8,
                EngineKind::Dfdn,
            ),
            (
                Topology::Mesh {
                    dims: vec![4, 4, 4],
                    torus: true,
                    hosts: 1,
                },
                4,
                EngineKind::Nue,
            ),
        ];
        for (t, vls, want) in cases {
            let f = generate(&t).expect("generated");
            let c = choose(&f, vls);
            assert_eq!(c.engine, want, "{t:?}: {}", c.reason);
            let opts = EngineOptions {
                max_vls: vls,
                ..EngineOptions::default()
            };
            let r = c.engine.engine().route(&f, &opts).expect("routed");
            let rep = verify::verify(&f, &r);
            assert!(rep.ok(), "{t:?} with {}: {rep:?}", c.engine);
            assert!(rep.vls_used <= u32::from(vls));
        }
    }
}
