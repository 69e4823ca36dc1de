//! Between the wire messages and the core library's inter-subnet types.
//! Wire to core is checked: anything a malformed message could carry (a
//! LID or port out of range, a rule with nothing to match) is an error
//! naming the field, never a panic or a silently truncated value.

mod summary;

pub use summary::{summary_from_wire, summary_to_wire};

use crate::v1;
use fabric::intersubnet::{
    Choice, Context, Gid, MapEntry, Mapping, Match, RouterPortView, RouterTable, Rule,
};

/// Why a wire message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub fn gid_to_wire(g: Gid) -> v1::Gid {
    v1::Gid {
        prefix: g.prefix,
        guid: g.guid,
    }
}

pub fn gid_from_wire(g: &v1::Gid) -> Gid {
    Gid {
        prefix: g.prefix,
        guid: g.guid,
    }
}

/// A unicast LID (1..=0xBFFF).
pub fn lid(v: u32, what: &str) -> Result<u16, Invalid> {
    if (1..=0xBFFF).contains(&v) {
        Ok(v as u16)
    } else {
        Err(Invalid(format!(
            "{what}: {v} is not a unicast LID (1..=49151)"
        )))
    }
}

/// A port number (1..=254).
pub fn port(v: u32, what: &str) -> Result<u8, Invalid> {
    if (1..=254).contains(&v) {
        Ok(v as u8)
    } else {
        Err(Invalid(format!(
            "{what}: {v} is not a port number (1..=254)"
        )))
    }
}

/// A reported router port as the inter-subnet code sees it. A primary LID
/// out of range is left out: the port still serves, ISFR only loses that
/// destination's dedicated port.
pub fn router_port_from_wire(p: &v1::RouterPort) -> Result<RouterPortView, Invalid> {
    Ok(RouterPortView {
        router_guid: p.router_guid,
        port: port(p.port, "router port")?,
        port_guid: p.port_guid,
        lid: lid(p.lid, "router port LID")?,
        switch_guid: p.switch_guid,
        primary_lids: p
            .primary_lids
            .iter()
            .filter_map(|&l| lid(l, "primary LID").ok())
            .collect(),
    })
}

/// Whether every one of `subnets` subnets has reported a routing and
/// received a mapping, as the controller's state says.
pub fn subnets_mapped(st: &v1::ControllerState, subnets: usize) -> bool {
    st.subnets.len() == subnets
        && st
            .subnets
            .iter()
            .all(|s| s.routing.is_some() && s.mapping_version > 0)
}

/// Whether a router holds the table the controller publishes for it now:
/// some table is not enough, a newer one may still be on its way.
pub fn router_current(st: &v1::ControllerState, rs: &v1::RouterState) -> bool {
    rs.version > 0
        && st
            .routers
            .iter()
            .any(|r| r.router_guid == rs.router_guid && r.egress_version == rs.version)
}

pub fn rule_to_wire(r: &Rule) -> v1::EgressRule {
    v1::EgressRule {
        r#match: Some(match r.matches {
            Match::Gid(g) => v1::egress_rule::Match::Gid(gid_to_wire(g)),
            Match::Prefix(p) => v1::egress_rule::Match::Prefix(p),
        }),
        next_lid: r.next_lid as u32,
        ports: r.ports.iter().map(|&p| p as u32).collect(),
        choice: match r.choice {
            Choice::Hash => v1::Choice::Hash as i32,
            Choice::First => v1::Choice::First as i32,
        },
    }
}

pub fn rule_from_wire(r: &v1::EgressRule, at: &str) -> Result<Rule, Invalid> {
    let matches = match &r.r#match {
        Some(v1::egress_rule::Match::Gid(g)) => Match::Gid(gid_from_wire(g)),
        Some(v1::egress_rule::Match::Prefix(p)) => Match::Prefix(*p),
        None => return Err(Invalid(format!("{at}: rule matches nothing"))),
    };
    if r.ports.is_empty() {
        return Err(Invalid(format!("{at}: rule has no egress port")));
    }
    let ports = r
        .ports
        .iter()
        .map(|&p| port(p, &format!("{at}: egress port")))
        .collect::<Result<Vec<_>, _>>()?;
    let choice = match v1::Choice::try_from(r.choice) {
        Ok(v1::Choice::Hash) => Choice::Hash,
        Ok(v1::Choice::First) => Choice::First,
        Err(_) => return Err(Invalid(format!("{at}: unknown choice {}", r.choice))),
    };
    Ok(Rule {
        matches,
        next_lid: lid(r.next_lid, &format!("{at}: next LID"))?,
        ports,
        choice,
    })
}

pub fn table_to_wire(t: &RouterTable, version: u64, algorithm: &str) -> v1::EgressTables {
    v1::EgressTables {
        replaces: 0,
        router_guid: t.router_guid,
        version,
        algorithm: algorithm.to_string(),
        contexts: t
            .contexts
            .iter()
            .map(|c| v1::IngressContext {
                ingress_ports: c.ingress_ports.iter().map(|&p| p as u32).collect(),
                rules: c.rules.iter().map(rule_to_wire).collect(),
                continued: false,
            })
            .collect(),
        part: 0,
        parts: 0,
    }
}

/// Checks and converts a pushed table. Duplicate matches within one
/// context are refused: which of two rules applies would be ambiguous.
pub fn table_from_wire(t: &v1::EgressTables) -> Result<RouterTable, Invalid> {
    if t.parts > 1 {
        return Err(Invalid(format!(
            "part {} of {}: only whole tables are applied (assemble the parts first)",
            t.part, t.parts
        )));
    }
    if t.contexts.iter().any(|c| c.continued) {
        return Err(Invalid(
            "a context marked as continuing another: only whole tables are applied".into(),
        ));
    }
    let mut contexts = Vec::with_capacity(t.contexts.len());
    for (ci, c) in t.contexts.iter().enumerate() {
        let ingress_ports = c
            .ingress_ports
            .iter()
            .map(|&p| port(p, &format!("context {ci}: ingress port")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = std::collections::HashSet::with_capacity(c.rules.len());
        let mut rules = Vec::with_capacity(c.rules.len());
        for (ri, r) in c.rules.iter().enumerate() {
            let rule = rule_from_wire(r, &format!("context {ci} rule {ri}"))?;
            if !seen.insert(rule.matches) {
                return Err(Invalid(format!(
                    "context {ci} rule {ri}: a second rule for the same destination"
                )));
            }
            rules.push(rule);
        }
        contexts.push(Context {
            ingress_ports,
            rules,
        });
    }
    Ok(RouterTable {
        router_guid: t.router_guid,
        contexts,
    })
}

pub fn mapping_to_wire(m: &Mapping, version: u64, algorithm: &str) -> v1::MappingUpdate {
    v1::MappingUpdate {
        replaces: 0,
        version,
        subnet_prefix: m.prefix,
        algorithm: algorithm.to_string(),
        entries: m
            .entries
            .iter()
            .map(|e| v1::MappingEntry {
                destination: Some(gid_to_wire(e.dest)),
                router_port_guid: e.router_port_guid,
                router_port_lid: e.router_port_lid as u32,
            })
            .collect(),
        default_ports: m.defaults.clone(),
        part: 0,
        parts: 0,
    }
}

pub fn mapping_from_wire(m: &v1::MappingUpdate) -> Result<Mapping, Invalid> {
    if m.parts > 1 {
        return Err(Invalid(format!(
            "part {} of {}: only whole mappings are applied (assemble the parts first)",
            m.part, m.parts
        )));
    }
    let entries = m
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let dest = e
                .destination
                .as_ref()
                .ok_or_else(|| Invalid(format!("mapping entry {i}: no destination")))?;
            Ok(MapEntry {
                dest: gid_from_wire(dest),
                router_port_guid: e.router_port_guid,
                router_port_lid: lid(
                    e.router_port_lid,
                    &format!("mapping entry {i}: router port LID"),
                )?,
            })
        })
        .collect::<Result<Vec<_>, Invalid>>()?;
    Ok(Mapping {
        prefix: m.subnet_prefix,
        entries,
        defaults: m.default_ports.clone(),
    })
}

/// What a report says of its subnet, as the inter-subnet algorithms read
/// it: its end ports and router ports (entries the report cannot carry,
/// a LID or port out of range, are left out; a report is checked in full
/// when it is accepted). The one conversion the controller's state and its
/// whole-fabric check share.
pub fn report_to_view(name: String, r: &v1::SubnetReport) -> fabric::intersubnet::SubnetView {
    fabric::intersubnet::SubnetView {
        name,
        prefix: r.subnet_prefix,
        end_ports: r
            .end_ports
            .iter()
            .filter_map(|p| {
                Some(fabric::intersubnet::EndPortView {
                    guid: p.guid,
                    lid: lid(p.lid, "end port LID").ok()?,
                })
            })
            .collect(),
        router_ports: r
            .router_ports
            .iter()
            .filter_map(|p| router_port_from_wire(p).ok())
            .collect(),
    }
}

/// A report carrying what `sv` holds (end ports and router ports; no
/// routing, topology or summary): what the controller keeps of a subnet's
/// view, for tools and tests that start from a view.
pub fn view_to_report(sv: &fabric::intersubnet::SubnetView) -> v1::SubnetReport {
    v1::SubnetReport {
        subnet_prefix: sv.prefix,
        end_ports: sv
            .end_ports
            .iter()
            .map(|e| v1::EndPort {
                guid: e.guid,
                lid: u32::from(e.lid),
                desc: String::new(),
                // Subnets joined by routers take one LID per port.
                lmc: 0,
            })
            .collect(),
        router_ports: sv
            .router_ports
            .iter()
            .map(|p| v1::RouterPort {
                router_guid: p.router_guid,
                port: u32::from(p.port),
                port_guid: p.port_guid,
                lid: u32::from(p.lid),
                switch_guid: p.switch_guid,
                primary_lids: p.primary_lids.iter().map(|&l| u32::from(l)).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::verify::summary::{self as sm, DependencySummary};

    fn table() -> RouterTable {
        RouterTable {
            router_guid: 9,
            contexts: vec![Context {
                ingress_ports: vec![1, 2],
                rules: vec![
                    Rule {
                        matches: Match::Gid(Gid { prefix: 1, guid: 2 }),
                        next_lid: 5,
                        ports: vec![3, 4],
                        choice: Choice::Hash,
                    },
                    Rule {
                        matches: Match::Prefix(7),
                        next_lid: 12,
                        ports: vec![2],
                        choice: Choice::First,
                    },
                ],
            }],
        }
    }

    #[test]
    fn tables_round_trip() {
        let w = table_to_wire(&table(), 3, "issr");
        assert_eq!(w.version, 3);
        assert_eq!(table_from_wire(&w), Ok(table()));
    }

    #[test]
    fn malformed_tables_are_refused_with_the_field() {
        let mut w = table_to_wire(&table(), 3, "issr");
        w.contexts[0].rules[0].next_lid = 0xC000;
        let e = table_from_wire(&w).expect_err("multicast LID");
        assert!(e.0.contains("rule 0: next LID"), "{e}");
        let mut w = table_to_wire(&table(), 3, "issr");
        w.contexts[0].rules[1].ports.clear();
        assert!(
            table_from_wire(&w)
                .expect_err("no port")
                .0
                .contains("no egress port")
        );
        let mut w = table_to_wire(&table(), 3, "issr");
        w.contexts[0].rules[1].r#match = None;
        assert!(table_from_wire(&w).is_err());
        let mut w = table_to_wire(&table(), 3, "issr");
        let dup = w.contexts[0].rules[0].clone();
        w.contexts[0].rules.push(dup);
        assert!(
            table_from_wire(&w)
                .expect_err("dup")
                .0
                .contains("same destination")
        );
        let mut w = table_to_wire(&table(), 3, "issr");
        w.contexts[0].ingress_ports.push(300);
        assert!(table_from_wire(&w).is_err());
    }

    /// Subnet 0 of a two-subnet fabric: its summary and its report.
    fn summary() -> (DependencySummary, v1::SubnetReport) {
        let m = fabric::multi::fat_tree_subnets(2, 2, 2, 2, 1).expect("fabric");
        let routed = fabric::pipeline::route_subnets(&m, fabric::routing::EngineKind::Ftree)
            .expect("routes");
        let sum = routed.routings[0].dependencies().expect("summary").clone();
        let view = fabric::intersubnet::GlobalView::from_multi(&m);
        let sv = &view.subnets[0];
        let report = view_to_report(sv);
        (sum, report)
    }

    #[test]
    fn dependency_summaries_round_trip() {
        let (sum, report) = summary();
        assert!(!sum.ports.is_empty() && !sum.chains.is_empty());
        let w = summary_to_wire(&sum);
        assert_eq!(summary_from_wire(&w, &report), Ok(sum));
    }

    #[test]
    fn malformed_dependency_summaries_are_refused() {
        let (sum, report) = summary();
        let refused = |w: &v1::DependencySummary, what: &str| {
            let e = summary_from_wire(w, &report).expect_err(what);
            assert!(e.0.contains(what), "{what}: {e}");
        };
        // A router port the report does not list.
        let mut w = summary_to_wire(&sum);
        w.ports[0].port = 99;
        refused(&w, "not among the report's router ports");
        // VL 15 and above.
        let mut w = summary_to_wire(&sum);
        w.vertices[0].vl = 15;
        refused(&w, "VL 15");
        // A CA the report does not list.
        let mut w = summary_to_wire(&sum);
        w.host_lids[0] = 0xBFFF;
        refused(&w, "none of the report's end ports");
        // Sizes over the bounds, refused before anything is built.
        let mut w = summary_to_wire(&sum);
        w.host_lids = vec![1; sm::MAX_HOSTS + 1];
        refused(&w, "the bound is 49151");
        let mut w = summary_to_wire(&sum);
        w.chains[0].vertices = vec![0; sm::MAX_CHAIN_LEN + 1];
        refused(&w, "vertices on chain 0");
        let mut w = summary_to_wire(&sum);
        w.legs.pop();
        refused(&w, "transit legs for");
        // Indices out of range and walks that run elsewhere.
        let mut w = summary_to_wire(&sum);
        w.edge_targets.push(0);
        refused(&w, "more edge targets");
        let mut w = summary_to_wire(&sum);
        w.edge_counts[0] += 1;
        refused(&w, "exceed the targets");
        let mut w = summary_to_wire(&sum);
        w.edge_counts.pop();
        refused(&w, "edge counts for");
        let mut w = summary_to_wire(&sum);
        let n = w.vertices.len() as u32;
        w.edge_counts[0] += 1;
        w.edge_targets.insert(0, n);
        refused(&w, "names no vertex");
        let mut w = summary_to_wire(&sum);
        w.vertices[0].kind = 7;
        refused(&w, "unknown kind");
        let mut w = summary_to_wire(&sum);
        let n = w.vertices.len() as u32;
        w.chains[0].vertices[0] = n;
        refused(&w, "runs elsewhere");
        let mut w = summary_to_wire(&sum);
        w.ports[0].arrive.pop();
        refused(&w, "half a run");
        let mut w = summary_to_wire(&sum);
        w.ports[0].arrive[0] += 1;
        refused(&w, "covers");
    }
}
