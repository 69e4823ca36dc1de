//! The whole-fabric check before routes are published: the subnets'
//! dependency summaries (carried in their reports) composed with the
//! inter-subnet routes computed from them (`fabric::verify::compose`).
//! Pure: reports and routes in, a verdict out. It costs router ports times
//! destinations (up to a second for 8 subnets of 16,384 HCAs on two cores,
//! more on a busy machine), so an async caller runs it on a blocking
//! thread.

use fabric::intersubnet::{GlobalView, InterSubnetRoutes};
use fabric::verify::{ComposeError, CycleStep, DependencySummary, Undeliverable, compose};
use proto::v1;

/// Why routes must not be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeRefusal {
    /// The report carries no summary: its agent is older, or its tables
    /// gave none (the agent logs why). Nothing vouches for the subnet.
    #[error("subnet {prefix:#018x} reported no dependency summary")]
    MissingSummary { prefix: u64 },
    #[error("subnet {prefix:#018x}: {reason}")]
    Malformed { prefix: u64, reason: String },
    /// Two reports for one subnet prefix.
    #[error("two reports for subnet {0:#018x}")]
    Duplicate(u64),
    #[error(transparent)]
    Inconsistent(#[from] ComposeError),
    #[error("{unreachable} host pairs are not delivered; the first: {first}")]
    Undeliverable {
        unreachable: u64,
        first: Box<Undeliverable>,
    },
    #[error("the routes close a channel dependency cycle: {}", describe(.0))]
    Cycle(Vec<CycleStep>),
}

fn describe(cycle: &[CycleStep]) -> String {
    cycle
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// Checks `routes`, computed from the view of exactly these `reports`
/// (one per subnet, as the state accepted them), for undelivered host
/// pairs and channel dependency cycles across the whole fabric. Subnets
/// are named by prefix in the refusal.
pub fn check_fabric(
    reports: &[&v1::SubnetReport],
    routes: &InterSubnetRoutes,
) -> Result<(), ComposeRefusal> {
    let mut seen = std::collections::HashSet::with_capacity(reports.len());
    let mut summaries: Vec<(u64, DependencySummary)> = Vec::with_capacity(reports.len());
    let mut subnets = Vec::with_capacity(reports.len());
    for r in reports {
        let prefix = r.subnet_prefix;
        if !seen.insert(prefix) {
            return Err(ComposeRefusal::Duplicate(prefix));
        }
        let w = r
            .dependencies
            .as_ref()
            .ok_or(ComposeRefusal::MissingSummary { prefix })?;
        let s = proto::convert::summary_from_wire(w, r).map_err(|e| ComposeRefusal::Malformed {
            prefix,
            reason: e.0,
        })?;
        summaries.push((prefix, s));
        // The view as the state builds it from the same reports.
        subnets.push(proto::convert::report_to_view(format!("{prefix:#018x}"), r));
    }
    let view = GlobalView { subnets }.normalized();
    let refs: Vec<(u64, &DependencySummary)> = summaries.iter().map(|(p, s)| (*p, s)).collect();
    let report = compose(&view, &refs, routes)?;
    if let Some(first) = report.first_unreachable {
        return Err(ComposeRefusal::Undeliverable {
            unreachable: report.unreachable,
            first: Box::new(first),
        });
    }
    match report.cycle {
        Some(cycle) => Err(ComposeRefusal::Cycle(cycle)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::intersubnet::{AlgorithmKind, Transit, issr_with_transit};
    use fabric::multi::{Join, MultiFabric, TreeSubnets, Wiring, tree_subnets};
    use fabric::pipeline::{self, Routed};
    use fabric::routing::EngineKind;

    /// What the agents of `m`, routed by `engine`, report: end ports,
    /// router ports and their summaries.
    fn reports(m: &MultiFabric, engine: EngineKind) -> (Routed, Vec<v1::SubnetReport>) {
        let routed = pipeline::route_subnets(m, engine).expect("routes");
        let reports = m
            .subnets
            .iter()
            .zip(&routed.routings)
            .map(|(s, v)| {
                let sv = routed
                    .view
                    .subnets
                    .iter()
                    .find(|x| x.prefix == s.prefix)
                    .expect("in the view");
                let mut r = proto::convert::view_to_report(sv);
                r.generation = 1;
                for p in &mut r.router_ports {
                    p.router_num_ports = 8;
                }
                r.dependencies = v.dependencies().ok().map(proto::convert::summary_to_wire);
                r
            })
            .collect();
        (routed, reports)
    }

    fn ring(spines: u32) -> MultiFabric {
        tree_subnets(&TreeSubnets {
            subnets: 5,
            leaves: 2,
            spines,
            hosts: 2,
            routers: 5,
            router_links: 1,
            wiring: Wiring::All,
            join: Join::Ring,
        })
        .expect("generates")
    }

    #[test]
    fn up_down_transit_passes_and_shortest_transit_is_refused_with_its_cycle() {
        let m = ring(2);
        let (routed, reports) = reports(&m, EngineKind::Ftree);
        // Reports in any order: the view is rebuilt by prefix.
        let refs: Vec<&v1::SubnetReport> = reports.iter().rev().collect();
        for alg in [AlgorithmKind::Issr, AlgorithmKind::Isfr] {
            let routes = alg.algorithm().route(&routed.view).expect("routes");
            assert_eq!(check_fabric(&refs, &routes), Ok(()), "{alg}");
        }
        let routes = issr_with_transit(&routed.view, Transit::Shortest).expect("routes");
        match check_fabric(&refs, &routes) {
            Err(ComposeRefusal::Cycle(c)) => {
                let text = describe(&c);
                // Named by subnet, router port and VL, around the ring.
                assert!(text.contains("0xfec0000000000001: router 0x"), "{text}");
                assert!(text.contains("VL 0"), "{text}");
                let subnets: std::collections::BTreeSet<&str> =
                    c.iter().map(|s| s.subnet.as_str()).collect();
                assert_eq!(subnets.len(), 5, "{text}");
            }
            other => panic!("expected a cycle, got {other:?}"),
        }
    }

    #[test]
    fn undeliverable_routes_name_the_source_subnet_and_destination() {
        // The prefix baseline has no transit: subnets two apart on a ring
        // cannot reach each other.
        let m = ring(1);
        let (routed, reports) = reports(&m, EngineKind::Updn);
        let refs: Vec<&v1::SubnetReport> = reports.iter().collect();
        let routes = AlgorithmKind::Prefix
            .algorithm()
            .route(&routed.view)
            .expect("routes");
        match check_fabric(&refs, &routes) {
            Err(ComposeRefusal::Undeliverable { unreachable, first }) => {
                assert_eq!(unreachable, 160);
                let text = first.to_string();
                assert!(text.starts_with("from subnet '0xfec0"), "{text}");
                assert!(text.contains("0xfec0"), "{text}");
            }
            other => panic!("expected undeliverable pairs, got {other:?}"),
        }
    }

    #[test]
    fn a_report_without_or_with_a_malformed_summary_is_refused() {
        let m = ring(1);
        let (routed, mut reports) = reports(&m, EngineKind::Updn);
        let routes = AlgorithmKind::Issr
            .algorithm()
            .route(&routed.view)
            .expect("routes");
        let prefix = reports[2].subnet_prefix;
        let mut bad = reports.clone();
        if let Some(d) = bad[2].dependencies.as_mut() {
            d.vertices[0].vl = 15;
        }
        let refs: Vec<&v1::SubnetReport> = bad.iter().collect();
        match check_fabric(&refs, &routes) {
            Err(ComposeRefusal::Malformed { prefix: p, reason }) => {
                assert_eq!(p, prefix);
                assert!(reason.contains("VL 15"), "{reason}");
            }
            other => panic!("expected a malformed summary, got {other:?}"),
        }
        reports[2].dependencies = None;
        let refs: Vec<&v1::SubnetReport> = reports.iter().collect();
        assert_eq!(
            check_fabric(&refs, &routes),
            Err(ComposeRefusal::MissingSummary { prefix })
        );
        let twice = vec![&reports[0], &reports[0]];
        assert_eq!(
            check_fabric(&twice, &routes),
            Err(ComposeRefusal::Duplicate(reports[0].subnet_prefix))
        );
    }
}
