//! Between the wire messages and the core library's inter-subnet types.
//! Wire to core is checked: anything a malformed message could carry (a
//! LID or port out of range, a rule with nothing to match) is an error
//! naming the field, never a panic or a silently truncated value.

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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(table_from_wire(&w)
            .expect_err("no port")
            .0
            .contains("no egress port"));
        let mut w = table_to_wire(&table(), 3, "issr");
        w.contexts[0].rules[1].r#match = None;
        assert!(table_from_wire(&w).is_err());
        let mut w = table_to_wire(&table(), 3, "issr");
        let dup = w.contexts[0].rules[0].clone();
        w.contexts[0].rules.push(dup);
        assert!(table_from_wire(&w)
            .expect_err("dup")
            .0
            .contains("same destination"));
        let mut w = table_to_wire(&table(), 3, "issr");
        w.contexts[0].ingress_ports.push(300);
        assert!(table_from_wire(&w).is_err());
    }
}
