//! `ibfabric engines`: the routing engines.

use anyhow::Result;
use clap::Args;
use fabric::routing;
use serde::Serialize;

#[derive(Args)]
pub struct EnginesArgs {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct EngineJson {
    name: &'static str,
    description: &'static str,
    deadlock_free: bool,
    /// Whether it routes every LID of a port with LMC above 0 (the others
    /// refuse such a fabric).
    routes_lmc: bool,
    /// How `--workers` cut its routing (with its default options).
    workers: String,
}

#[derive(Serialize)]
struct EnginesJson {
    engines: Vec<EngineJson>,
}

/// How an engine's routing is cut across workers: with its default
/// options, else with SSSP streams, else not at all (it routes here).
fn on_workers(e: &dyn routing::RoutingEngine) -> String {
    let label = |s: &routing::Split| match s {
        routing::Split::SourceSwitches => Some("by source switch"),
        routing::Split::DestinationSwitches => Some("by destination switch"),
        routing::Split::Rounds => Some("in rounds"),
        routing::Split::Whole(_) => None,
    };
    let streams = routing::EngineOptions {
        sssp_streams: 4,
        ..Default::default()
    };
    match (
        label(&e.split(&Default::default())),
        label(&e.split(&streams)),
    ) {
        (Some(l), _) => l.to_string(),
        (None, Some(l)) => format!("{l} with --sssp-streams N"),
        (None, None) => "here (not cut)".to_string(),
    }
}

pub fn run(a: EnginesArgs) -> Result<i32> {
    let engines = routing::registry();
    if a.json {
        let list: Vec<EngineJson> = engines
            .iter()
            .map(|e| EngineJson {
                name: e.name(),
                description: e.description(),
                deadlock_free: e.claims_deadlock_free(),
                routes_lmc: e.routes_lmc(),
                workers: on_workers(e.as_ref()),
            })
            .collect();
        super::print_json("engines", &EnginesJson { engines: list })?;
        return Ok(0);
    }
    for e in engines {
        println!(
            "{:<10} {}{} [on workers: {}]{}",
            e.name(),
            e.description(),
            if e.claims_deadlock_free() {
                ""
            } else {
                " [not deadlock free]"
            },
            on_workers(e.as_ref()),
            if e.routes_lmc() {
                ""
            } else {
                " [one LID per port: refuses LMC]"
            }
        );
    }
    Ok(0)
}
