//! What changed between the fabric a routing was computed for and the one
//! discovered now, in the terms a reroute needs: links and switches that
//! went down, links that came (back) up, both on the numbering of the
//! fabric in force, so the tables in force still index the result.
//!
//! Everything is matched by node GUID and port number. A change the
//! numbering cannot express (a node never seen, a link moved to another
//! port, another LID) is [`Change::Other`]: the caller routes the new
//! fabric from scratch.

use super::Fault;
use crate::error::ModelError;
use crate::model::{Fabric, NONE, NodeId, NodeKind, Slot};
use std::collections::HashMap;

/// The difference between two discoveries of one subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The same nodes, links and LIDs.
    Same,
    /// Links went down (`failed`) and/or came up (`restored`) between
    /// nodes the fabric in force knows, every LID unchanged.
    Links {
        failed: Vec<Fault>,
        /// Pairs of slots of the fabric in force, both without a link there.
        restored: Vec<(Slot, Slot)>,
    },
    /// Anything else, with the first difference found.
    Other(String),
}

/// Compares `before` (the fabric in force) with `after` (discovered now).
pub fn change_between(before: &Fabric, after: &Fabric) -> Change {
    match diff(before, after) {
        Ok(c) => c,
        Err(why) => Change::Other(why),
    }
}

/// [`Change::Links`] applied to the fabric in force: same numbering.
pub fn apply_change(
    before: &Fabric,
    failed: &[Fault],
    restored: &[(Slot, Slot)],
) -> Result<Fabric, ModelError> {
    super::apply_faults(before, failed).with_links(restored)
}

fn diff(before: &Fabric, after: &Fabric) -> Result<Change, String> {
    let index = |f: &Fabric| -> HashMap<u64, NodeId> {
        (0..f.num_nodes() as NodeId)
            .map(|n| (f.guid(n), n))
            .collect()
    };
    let (bi, ai) = (index(before), index(after));
    let name = |f: &Fabric, s: Slot| {
        format!(
            "0x{:016x} ('{}') port {}",
            f.guid(f.node_of(s)),
            f.desc(f.node_of(s)),
            f.port_of(s)
        )
    };
    // The port of `before` that stands for `s` of `after`.
    let in_before = |s: Slot| -> Option<Slot> {
        let n = *bi.get(&after.guid(after.node_of(s)))?;
        let p = after.port_of(s);
        (p <= before.num_ports(n)).then(|| before.slot(n, p))
    };
    let mut restored = Vec::new();
    for n in 0..after.num_nodes() as NodeId {
        let g = after.guid(n);
        let Some(&b) = bi.get(&g) else {
            return Err(format!(
                "node 0x{g:016x} ('{}') is new to the subnet",
                after.desc(n)
            ));
        };
        if before.kind(b) != after.kind(n) || before.num_ports(b) != after.num_ports(n) {
            return Err(format!(
                "node 0x{g:016x} ('{}') changed its kind or port count",
                after.desc(n)
            ));
        }
        if after.kind(n) == NodeKind::Switch && before.switch_lid(b) != after.switch_lid(n) {
            return Err(format!(
                "switch 0x{g:016x} ('{}') has LID {} (was {})",
                after.desc(n),
                after.switch_lid(n),
                before.switch_lid(b)
            ));
        }
        for s in after.port_slots(n) {
            let r = after.remote(s);
            if r == NONE {
                continue;
            }
            let (Some(bs), Some(br)) = (in_before(s), in_before(r)) else {
                return Err(format!(
                    "{} has a port the subnet never had",
                    name(after, s)
                ));
            };
            if after.kind(n) != NodeKind::Switch
                && (after.lid_of_slot(s), after.lmc(s)) != (before.lid_of_slot(bs), before.lmc(bs))
            {
                return Err(format!(
                    "{} has LID {} LMC {} (was LID {} LMC {})",
                    name(after, s),
                    after.lid_of_slot(s),
                    after.lmc(s),
                    before.lid_of_slot(bs),
                    before.lmc(bs)
                ));
            }
            match before.remote(bs) {
                x if x == br => {}
                NONE if before.remote(br) == NONE => {
                    if bs < br {
                        restored.push((bs, br));
                    }
                }
                _ => {
                    return Err(format!(
                        "{} now links to {}, another port than before",
                        name(after, s),
                        name(after, r)
                    ));
                }
            }
        }
    }
    let mut failed = Vec::new();
    for n in 0..before.num_nodes() as NodeId {
        let linked: Vec<Slot> = before
            .port_slots(n)
            .filter(|&s| before.remote(s) != NONE)
            .collect();
        if linked.is_empty() {
            continue;
        }
        let Some(&a) = ai.get(&before.guid(n)) else {
            if before.kind(n) == NodeKind::Switch {
                failed.push(Fault::Switch(n));
            } else {
                failed.extend(linked.iter().map(|&s| Fault::Link(s)));
            }
            continue;
        };
        for s in linked {
            let r = before.remote(s);
            // Each link once, and none that a failed switch covers.
            if r < s && ai.contains_key(&before.guid(before.node_of(r))) {
                continue;
            }
            if after.remote(after.slot(a, before.port_of(s))) == NONE {
                failed.push(Fault::Link(s));
            }
        }
    }
    if failed.is_empty() && restored.is_empty() {
        Ok(Change::Same)
    } else {
        Ok(Change::Links { failed, restored })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};

    fn ring() -> Fabric {
        generate(&Topology::Mesh {
            dims: vec![5],
            torus: true,
            hosts: 1,
        })
        .expect("ring")
    }

    /// The same fabric with its nodes numbered in reverse: what another
    /// discovery's file order gives.
    fn renumbered(f: &Fabric) -> Fabric {
        let text = crate::formats::ibnetdiscover::write(f);
        let mut blocks: Vec<&str> = text.split("\n\n").collect();
        blocks.reverse();
        crate::formats::ibnetdiscover::parse(&blocks.join("\n\n"), std::path::Path::new("x"))
            .expect("reparse")
    }

    #[test]
    fn a_rediscovery_in_another_order_is_no_change() {
        let f = ring();
        assert_eq!(change_between(&f, &renumbered(&f)), Change::Same);
    }

    #[test]
    fn a_failed_link_and_switch_are_found_and_come_back() {
        let f = ring();
        let l = f.switch_links()[0];
        let sw = f.switches()[3];
        let down = super::super::apply_faults(&f, &[Fault::Link(l), Fault::Switch(sw)]);
        // Discovered: the dead switch and its host are gone from the file.
        let host = f
            .port_slots(sw)
            .map(|s| f.remote(s))
            .find(|&r| r != NONE && f.kind(f.node_of(r)) != NodeKind::Switch)
            .map(|r| f.guid(f.node_of(r)))
            .expect("a host on the switch");
        let text = crate::formats::ibnetdiscover::write(&down);
        let gone = [f.guid(sw), host].map(|g| format!("guid=0x{g:016x}\n"));
        let kept: Vec<&str> = text
            .split("\n\n")
            .filter(|b| !gone.iter().any(|g| b.contains(g.as_str())))
            .collect();
        let seen =
            crate::formats::ibnetdiscover::parse(&kept.join("\n\n"), std::path::Path::new("x"))
                .expect("reparse");
        assert_eq!(seen.num_nodes(), f.num_nodes() - 2);
        let Change::Links { failed, restored } = change_between(&f, &seen) else {
            panic!("not a link change");
        };
        assert!(restored.is_empty());
        assert!(failed.contains(&Fault::Switch(sw)), "{failed:?}");
        assert!(
            failed
                .iter()
                .any(|&x| x == Fault::Link(l) || x == Fault::Link(f.remote(l))),
            "{failed:?}"
        );
        // The fabric in force after the fault, then everything back.
        let applied = apply_change(&f, &failed, &[]).expect("apply");
        assert_eq!(change_between(&applied, &seen), Change::Same);
        let Change::Links { failed, restored } = change_between(&applied, &f) else {
            panic!("not a link change");
        };
        assert!(failed.is_empty());
        // The ring link, the switch's two ring links and its host's.
        assert_eq!(restored.len(), 4, "{restored:?}");
        let back = apply_change(&applied, &[], &restored).expect("restore");
        assert_eq!(change_between(&back, &f), Change::Same);
        assert_eq!(back.endports().len(), f.endports().len());
    }

    #[test]
    fn a_new_node_or_moved_link_is_another_change() {
        let f = ring();
        let bigger = generate(&Topology::Mesh {
            dims: vec![6],
            torus: true,
            hosts: 1,
        })
        .expect("ring");
        assert!(matches!(change_between(&f, &bigger), Change::Other(_)));
        assert!(matches!(change_between(&bigger, &f), Change::Other(_)));
    }
}
