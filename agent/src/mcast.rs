//! Multicast in the agent's sets (docs/multicast.md): reserved trees for
//! the config's groups, checked with each set's unicast tables, and kept
//! across updates by rebuilding the spanning tree in force rather than a
//! new one, so that switches holding old and new entries during an update
//! cannot close a cycle between them.

use crate::config::AgentConfig;
use crate::subnet::RouteError;
use fabric::Fabric;
use fabric::mcast::Multicast;
use fabric::mcast::tree::{self, TreeMode};
use fabric::routing::EngineOptions;
use fabric::tables::Routing;
use fabric::verify::Verified;
use fabric::verify::mcast::{reserved_vl_taken, verify_update, verify_with_mcast};

/// The engine's options with the multicast SL and VL taken out (the
/// config checks that there are some to take).
pub fn engine_options<'a>(cfg: &AgentConfig, mut o: EngineOptions<'a>) -> EngineOptions<'a> {
    if cfg.mcast_groups.is_some() {
        o.max_vls = o.max_vls.saturating_sub(1).max(1);
        o.max_sls = o.max_sls.saturating_sub(1).max(1);
    }
    o
}

/// The SL and VL the config reserves for multicast.
fn reserved(cfg: &AgentConfig) -> (u8, u8) {
    (cfg.max_sls - 1, cfg.max_vls - 1)
}

/// The trees of the config's groups on `f`, whose routing is `routing`
/// (the reserved SL is sent to its VL there). When the tables in force
/// have a plan on the same SL and VL, its spanning tree is repaired, not
/// replaced. `None` without groups in the config.
pub fn plan(
    cfg: &AgentConfig,
    f: &Fabric,
    routing: &mut Routing,
    prev: Option<&Multicast>,
) -> Result<Option<Multicast>, RouteError> {
    let Some(path) = &cfg.mcast_groups else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| fabric::Error::io(path, e))?;
    let mut groups = fabric::formats::mcast::parse_groups(f, &text, path)?;
    let (sl, vl) = reserved(cfg);
    let in_force = prev
        .and_then(|m| m.plan.as_ref())
        .filter(|p| (p.sl, p.vl) == (sl, vl));
    let mc = match in_force {
        Some(p) => {
            tree::reserve(f, routing, sl, vl)?;
            let (groups, mfts, plan) = tree::rebuild(f, p, &groups)?;
            Multicast {
                groups,
                mfts,
                plan: Some(plan),
            }
        }
        None => {
            let (mfts, plan) =
                tree::build(f, routing, &mut groups, TreeMode::Reserved, Some((sl, vl)))?;
            Multicast { groups, mfts, plan }
        }
    };
    tracing::info!(
        groups = mc.groups.len(),
        entries = mc.mfts.len(),
        repaired = in_force.is_some(),
        "multicast trees built"
    );
    Ok(Some(mc))
}

/// Refuses tables (and their drain `stages`) with which the trees are
/// broken or close a cycle, whose unicast routes take the reserved VL, or
/// whose trees mixed with `old`'s could close a cycle during the update.
pub fn check(
    f: &Fabric,
    routing: &Verified<Routing>,
    stages: &[Verified<Routing>],
    mc: &Multicast,
    old: Option<&Multicast>,
) -> Result<(), RouteError> {
    let refuse = |why: String| Err(RouteError::Multicast(why));
    if let Some(why) = reserved_vl_taken(routing.report(), mc) {
        return refuse(why);
    }
    // The final tables: with the mix of old and new trees too, in one walk.
    let (m, mixed) = match old {
        Some(old) => {
            let (_, m, mixed) = verify_update(f, routing.get(), mc, old);
            (m, mixed)
        }
        None => (verify_with_mcast(f, routing.get(), mc).1, None),
    };
    if let Some(why) = m.refusal() {
        return refuse(format!("with the tables, {why}"));
    }
    for s in stages {
        if let Some(why) = verify_with_mcast(f, s.get(), mc).1.refusal() {
            return refuse(format!("with a drain stage, {why}"));
        }
    }
    match mixed {
        Some(c) => refuse(format!(
            "old and new trees mixed on the switches could close a cycle of {} channels",
            c.len()
        )),
        None => Ok(()),
    }
}
