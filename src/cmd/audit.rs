//! `ibfabric audit`: read the tables a running fabric holds (switch LFTs,
//! SL-to-VL tables, the SLs the subnet manager answers) through
//! infiniband-diags, verify them, and optionally hold them against the set
//! that was written for it.

use super::report::{TablesJson, print_report};
use agent::live::Diags;
use anyhow::{Context, Result, bail};
use clap::Args;
use fabric::audit::{Comparison, compare};
use fabric::verify;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
#[command(
    after_help = "Exit status: 0 when the live tables route every pair deadlock free (and \
    match --expect); 3 when they are not deadlock free or leave pairs unreachable; 4 when they \
    differ from --expect; 1 on errors (a tool missing or failing, unreadable output).\n\nThe tools run through the local port (-C/-P as for infiniband-diags); with ibsim, \
    export LD_PRELOAD=libumad2sim.so and SIM_HOST as for any diag tool."
)]
pub struct AuditArgs {
    /// Directory for what is read back: ibnetdiscover.txt, dump_lfts.txt,
    /// sl2vl.txt, pathrecords.txt (verify reads each of them).
    #[arg(long, short)]
    out: PathBuf,
    /// A table directory written by `route` or an agent: the live tables
    /// must equal it, entry by entry (matched by GUID, not LID).
    #[arg(long, requires = "topology")]
    expect: Option<PathBuf>,
    /// The topology file the --expect tables were computed for.
    #[arg(long, short)]
    topology: Option<PathBuf>,
    /// Local CA name for the diag tools (-C).
    #[arg(long)]
    ca: Option<String>,
    /// Local port number for the diag tools (-P).
    #[arg(long)]
    port: Option<u8>,
    /// The PathRecord reader built with the OpenSM plugin (default:
    /// `ibfabric-pathrecord-sl` on PATH).
    #[arg(long)]
    pathrecord_tool: Option<PathBuf>,
    /// The SL-to-VL reader built with the OpenSM plugin (default:
    /// `ibfabric-sl2vl-read` on PATH, else one `smpquery sl2vl` per port).
    #[arg(long)]
    sl2vl_tool: Option<PathBuf>,
    /// PathRecords per source: each CA's next K CAs in GUID order (default:
    /// every ordered pair, hosts squared queries).
    /// The rest of the pairs are verified with the --expect set's SLs, so
    /// this needs --expect.
    #[arg(long, value_name = "K", requires = "expect")]
    path_sample: Option<usize>,
    /// Differences to list at most.
    #[arg(long, default_value_t = 20)]
    max_differences: usize,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct AuditJson {
    #[serde(flatten)]
    tables: TablesJson,
    read_seconds: f64,
    verify_seconds: f64,
    queries: usize,
    switches: usize,
    hcas: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<Comparison>,
}

pub fn run(a: AuditArgs) -> Result<i32> {
    let diags = Diags {
        ca: a.ca.clone(),
        port: a.port,
        pathrecord_tool: a.pathrecord_tool.clone(),
        sl2vl_tool: a.sl2vl_tool.clone(),
        path_sample: a.path_sample,
    };
    let t = Instant::now();
    let rb = diags.read_back(&a.out).context("reading the live fabric")?;
    let read_seconds = t.elapsed().as_secs_f64();
    let written = match (&a.expect, &a.topology) {
        (Some(dir), Some(topo)) => {
            let wf = super::read_topology(topo)?;
            let w = fabric::formats::tableset::read_set(&wf, dir)?;
            Some((wf, w))
        }
        (Some(_), None) => {
            bail!("--expect needs --topology (the file its tables were computed for)")
        }
        _ => None,
    };
    let sampled = a.path_sample.is_some();
    let tables = match &written {
        Some((wf, w)) => fabric::audit::verifiable(wf, w, &rb.fabric, &rb.routing, sampled),
        None => rb.routing.clone(),
    };
    let t = Instant::now();
    let r = verify::verify(&rb.fabric, &tables);
    let verify_seconds = t.elapsed().as_secs_f64();
    let expected = written
        .map(|(wf, w)| compare(&wf, &w, &rb.fabric, &rb.routing, sampled, a.max_differences));
    let matches = expected.as_ref().is_none_or(Comparison::matches);
    if a.json {
        super::print_json(
            "audit",
            &AuditJson {
                tables: TablesJson::new(&r, &rb.fabric),
                read_seconds,
                verify_seconds,
                queries: rb.queries,
                switches: rb.fabric.switches().len(),
                hcas: rb.fabric.num_cas(),
                expected,
            },
        )?;
    } else {
        println!(
            "read back       {} switches, {} HCAs, {} queries in {read_seconds:.2} s -> {}",
            rb.fabric.switches().len(),
            rb.fabric.num_cas(),
            rb.queries,
            rb.dir.display()
        );
        println!("verify time     {verify_seconds:.3} s");
        print_report(&r, &rb.fabric);
        if let Some(c) = &expected {
            println!(
                "against --expect: {} LFT entries, {} SL-to-VL rows, {} path SLs compared, {} differ",
                c.lft_entries, c.sl2vl_rows, c.path_sls, c.differences
            );
            for d in &c.first {
                println!("  {}", serde_json::to_string(d)?);
            }
        }
    }
    Ok(if !r.ok() {
        super::exit::UNSAFE
    } else if !matches {
        super::exit::DIFFERS
    } else {
        super::exit::OK
    })
}
