//! One module per command; `main.rs` only parses and dispatches.

pub mod agent;
pub mod audit;
pub mod certs;
pub mod controller;
pub mod demo;
pub mod engines;
pub mod gen;
pub mod info;
pub mod report;
pub mod reroute;
pub mod route;
pub mod route_multi;
pub mod router;
pub mod runtime;
pub mod sim;
pub mod verify;

use anyhow::Result;
use fabric::formats::ibnetdiscover;
use fabric::Fabric;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

/// Reads a topology file, logging what it holds.
pub fn load(path: &Path) -> Result<Fabric> {
    let t = Instant::now();
    let f = ibnetdiscover::read(path)?;
    tracing::info!(
        file = %path.display(),
        switches = f.switches().len(),
        end_ports = f.endports().len(),
        secs = t.elapsed().as_secs_f64(),
        "topology loaded"
    );
    Ok(f)
}

/// A labelled progress bar on stderr when stderr is a terminal.
pub fn progress_bar(label: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(0);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb.set_message(label.to_string());
    Some(pb)
}

/// Prints a serializable report as pretty JSON on stdout.
pub fn print_json(v: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}
