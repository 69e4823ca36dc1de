//! The options `route` and `verify` share to compute on workers, and the
//! executor they make ([`worker::exec`]: here or on workers, decided in
//! one place for the commands and the agent).

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use worker::exec::{Executor, Workers};

#[derive(Args)]
pub struct WorkerArgs {
    /// Compute on these workers (`ibfabric worker`; addresses
    /// https://host:port, http:// for plaintext workers, repeated or
    /// comma-separated). Routing splits as
    /// the engine says (`ibfabric engines`): dfdn on its default, trees or
    /// auto base by destination switch (the SL choice runs here); minhop by
    /// source switch; nue by virtual layer, round by round, on the channel
    /// loads summed here after every round (a lost worker's layers restart
    /// elsewhere and replay the rounds); sssp and dfsssp with
    /// --sssp-streams by stream (DF-SSSP's layering runs here). Other
    /// engines and bases route here (said so). The verifier's walks are cut
    /// by destination. Lost workers' parts go to the others; with none
    /// left they run here. The tables and the report equal one process's,
    /// byte for byte.
    #[arg(long = "workers", value_delimiter = ',')]
    pub workers: Vec<String>,
    /// Find the workers in the store this TOML file's `[store]` names (a
    /// controller's config will do): the workers registered there under a
    /// lease (`ibfabric worker` with `[store]`). A worker whose lease ends
    /// during the job is given up on at once and its open part requeued.
    #[arg(long, value_name = "FILE", conflicts_with = "workers")]
    pub workers_from: Option<PathBuf>,
    /// With --workers or --workers-from: parts per worker.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub parts_per_worker: u32,
    #[command(flatten)]
    pub tls: super::runtime::ClientTls,
}

impl WorkerArgs {
    /// Whether workers were asked for (the command then talks to the
    /// network).
    pub fn wanted(&self) -> bool {
        !self.workers.is_empty() || self.workers_from.is_some()
    }

    /// The executor these options describe; `columns`: verification parts
    /// carry their LFT and path-SL columns (else each worker loads the
    /// whole tables).
    pub fn executor(&self, columns: bool) -> Result<Executor> {
        let workers = match &self.workers_from {
            Some(p) => Workers::Registered(super::runtime::store_config(p)?),
            None if self.workers.is_empty() => return Ok(Executor::here()),
            None => Workers::Named(self.workers.clone()),
        };
        let opts = worker::coordinator::Options {
            parts_per_worker: self.parts_per_worker as usize,
            columns,
            ..Default::default()
        };
        Ok(Executor::new(workers, self.tls.transport()?, opts))
    }
}

/// The workers for jobs on `f`, or None to compute here; a store that
/// cannot be read is an error naming the file, and an empty one a warning.
pub fn place(
    rt: &tokio::runtime::Runtime,
    exec: &Executor,
    args: &WorkerArgs,
    f: &fabric::Fabric,
) -> Result<Option<worker::exec::Placement>> {
    let placed = rt
        .block_on(exec.place(f))
        .with_context(|| match &args.workers_from {
            Some(p) => format!(
                "finding the workers registered in the store {} names",
                p.display()
            ),
            None => "finding the workers".to_string(),
        })?;
    if placed.is_none() && exec.wants_workers() {
        // The issue is the workers', not the job's: it still runs.
        eprintln!("warning: no worker is registered in the store; computing here");
    }
    Ok(placed)
}
