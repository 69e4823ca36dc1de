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
}

#[derive(Serialize)]
struct EnginesJson {
    engines: Vec<EngineJson>,
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
            })
            .collect();
        super::print_json("engines", &EnginesJson { engines: list })?;
        return Ok(0);
    }
    for e in engines {
        println!(
            "{:<10} {}{}",
            e.name(),
            e.description(),
            if e.claims_deadlock_free() {
                ""
            } else {
                " [not deadlock free]"
            }
        );
    }
    Ok(0)
}
