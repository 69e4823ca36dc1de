//! One module per command; `main.rs` only parses and dispatches.

pub mod agent;
pub mod audit;
pub mod certs;
pub mod controller;
pub mod demo;
pub mod docs;
pub mod dqr_curve;
pub mod engines;
pub mod exit;
pub mod forget;
pub mod generate;
pub mod info;
pub mod load;
pub mod mcast;
pub mod report;
pub mod reroute;
pub mod route;
pub mod route_multi;
pub mod router;
pub mod runtime;
pub mod sim;
pub mod status;
pub mod verify;
pub mod worker;
pub mod workers;

use anyhow::{Context, Result};
use fabric::Fabric;
use fabric::formats::ibnetdiscover;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

/// Reads a topology file with its ports' LMC (every command takes every
/// LID of a port), logging what it holds.
pub fn read_topology(path: &Path) -> Result<Fabric> {
    let t = Instant::now();
    let f = ibnetdiscover::read_with_lmc(path)?;
    tracing::info!(
        file = %path.display(),
        switches = f.switches().len(),
        end_ports = f.endports().len(),
        secs = t.elapsed().as_secs_f64(),
        "topology loaded"
    );
    Ok(f)
}

/// [`read_topology`] for a command that routes the fabric (the engines
/// route every LID, or refuse by name): an empty or comments-only file (a
/// discovery being written) is refused before any table set is touched.
pub fn read_fabric_to_route(path: &Path) -> Result<Fabric> {
    let f = read_topology(path)?;
    fabric::routing::check_switch_lmc(&f)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    fabric::discovery::check(None, &f)
        .map_err(|e| anyhow::anyhow!("{}: {e}; nothing routed or written", path.display()))?;
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

/// An error and its causes on one line, each said once: library errors
/// often print their cause in their own message too.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg
}

/// A labelled spinner with the elapsed time, for phases that report no
/// progress of their own (verification, writing); on a terminal only.
pub fn spinner(label: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_message(label.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(pb)
}

/// The version of the `--json` objects: every command's object carries it
/// with the command's name, and it changes when a field changes meaning or
/// goes away (new fields keep it).
pub const SCHEMA_VERSION: u32 = 1;

/// Prints a command's report as pretty JSON on stdout, with
/// `schema_version` and `command` added. Names are shared across commands:
/// `hcas`, `switches`, `vls`, `<phase>_seconds`, cycles as channel objects.
pub fn print_json(command: &str, v: &impl serde::Serialize) -> Result<()> {
    let mut j = serde_json::to_value(v)?;
    let serde_json::Value::Object(m) = &mut j else {
        anyhow::bail!("internal error: the --json report of {command} is not an object");
    };
    m.insert("schema_version".into(), SCHEMA_VERSION.into());
    m.insert("command".into(), command.into());
    // Written, not printed: a full disk or a closed file behind stdout is
    // an error of the command (exit 1), not a panic.
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &j)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush())
        .context("writing the --json report to standard output")?;
    Ok(())
}
