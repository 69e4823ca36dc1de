//! `ibfabric engines`: the routing engines.

use anyhow::Result;
use fabric::routing;

pub fn run() -> Result<i32> {
    for e in routing::registry() {
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
