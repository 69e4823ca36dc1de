//! `ibfabric verify`: re-verify tables from disk against a topology.

use super::report::{print_report, TablesJson};
use anyhow::{bail, Result};
use clap::Args;
use fabric::formats::{lft, pathsl, sl2vl};
use fabric::tables::Routing;
use fabric::verify;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct VerifyArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// Directory holding opensm-lfts.dump and optionally opensm-sl2vl.dump and path-sl.txt.
    #[arg(long, short, conflicts_with_all = ["lfts"])]
    dir: Option<PathBuf>,
    /// LFT dump file (opensm-lfts.dump format).
    #[arg(long)]
    lfts: Option<PathBuf>,
    /// SL-to-VL dump (opensm-sl2vl.dump format); absent = VL 0 everywhere.
    #[arg(long)]
    sl2vl: Option<PathBuf>,
    /// Path SL file (path-sl.txt format); absent = SL 0 for every pair.
    #[arg(long)]
    path_sl: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct VerifyJson {
    #[serde(flatten)]
    tables: TablesJson,
    seconds: f64,
    switches: usize,
    hcas: usize,
}

pub fn run(a: VerifyArgs) -> Result<i32> {
    let f = super::load(&a.topology)?;
    let (lfts_p, sl2vl_p, path_p) = match (&a.dir, &a.lfts) {
        (Some(d), _) => {
            let s = d.join("opensm-sl2vl.dump");
            (
                d.join("opensm-lfts.dump"),
                a.sl2vl.clone().or_else(|| s.exists().then_some(s)),
                Some(a.path_sl.clone().unwrap_or_else(|| d.join("path-sl.txt"))),
            )
        }
        (None, Some(l)) => (l.clone(), a.sl2vl.clone(), a.path_sl.clone()),
        (None, None) => bail!("give --dir DIR or --lfts FILE"),
    };
    let routing = Routing {
        lfts: lft::read(&f, &lfts_p)?,
        sl2vl: sl2vl_p.map(|p| sl2vl::read(&f, &p)).transpose()?,
        path_sl: match path_p {
            Some(p) => pathsl::read_optional(&f, &p)?,
            None => None,
        },
        vls_needed: None,
    };
    let t = Instant::now();
    let r = verify::verify(&f, &routing);
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        super::print_json(&VerifyJson {
            tables: TablesJson::new(&r, &f),
            seconds: secs,
            switches: f.switches().len(),
            hcas: f.num_cas(),
        })?;
    } else {
        println!("verify time     {secs:.3} s");
        print_report(&r, &f);
    }
    Ok(if r.ok() { 0 } else { 2 })
}
