//! Harness for tests that drive real processes: the `ibfabric` binary and
//! its services, the ibsim fabric simulator and OpenSM (through the
//! umad2sim preload), and the services as Docker containers (`chaos`).

pub mod chaos;
pub mod cluster;
pub mod nemesis;
pub mod sim;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `ibfabric` binary: `$IBFABRIC_BIN`, else the workspace's debug or
/// release build (scripts/test.sh builds it before the tests run).
pub fn ibfabric_bin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("IBFABRIC_BIN") {
        return Ok(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for profile in ["debug", "release"] {
        let p = root.join("target").join(profile).join("ibfabric");
        if p.exists() {
            return Ok(p);
        }
    }
    bail!(
        "no ibfabric binary: run `cargo build --bin ibfabric` (scripts/test.sh does) or set IBFABRIC_BIN"
    )
}

/// The OpenSM plugin and the PathRecord reader, built by `make -C
/// opensm-plugin` (scripts/test.sh does).
pub fn opensm_plugin_build() -> Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../opensm-plugin/build");
    for f in ["libibfabric.so", "ibfabric-pathrecord-sl"] {
        if !dir.join(f).exists() {
            bail!(
                "{} missing: run `make -C opensm-plugin` (scripts/test.sh does; needs libopensm-dev, libibmad-dev)",
                dir.join(f).display()
            );
        }
    }
    Ok(dir)
}

/// Runs `ibfabric ARGS`, failing with its stderr when it exits non-zero.
/// A `--json` command's output and exit code, whatever the code (verdicts
/// exit 3 with a report); panics with both streams when stdout is no JSON.
pub fn json_and_code(out: &std::process::Output, what: &str) -> (serde_json::Value, i32) {
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{what} --json: {e}\nstdout: {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

pub fn ibfabric(args: &[&str]) -> Result<String> {
    let bin = ibfabric_bin()?;
    let out = Command::new(&bin)
        .args(args)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        // With --json the reason may be on stdout alone.
        bail!(
            "ibfabric {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Routing entries of an LFT listing, keyed by (switch GUID, destination
/// port GUID): reads both OpenSM's `opensm-lfts.dump` (`0x0001 005 # ...`)
/// and infiniband-diags' `dump_lfts` output (`0x0001 005 : (...)`).
pub fn parse_lft_listing(text: &str) -> Result<std::collections::BTreeMap<(u64, u64), u8>> {
    let mut map = std::collections::BTreeMap::new();
    let mut sw: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("Unicast lids") {
            let g = line
                .split(" guid 0x")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_hexdigit()).next())
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .with_context(|| format!("line {}: no switch GUID in '{line}'", i + 1))?;
            sw = Some(g);
            continue;
        }
        let Some(rest) = line.strip_prefix("0x") else {
            continue;
        };
        let Some(sw) = sw else {
            bail!("line {}: LFT row before a switch header", i + 1)
        };
        let port: u8 = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("line {}: no port in '{line}'", i + 1))?;
        // Rows without a port GUID (LMC paths, unknown LIDs) cannot be keyed.
        let Some(g) = line
            .split("portguid 0x")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_hexdigit()).next())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        else {
            continue;
        };
        map.insert((sw, g), port);
    }
    Ok(map)
}
