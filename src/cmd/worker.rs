//! `ibfabric worker`: computes parts of jobs for coordinators
//! (`ibfabric verify --workers`).

use super::runtime::{ConfigArgs, runtime, shutdown_on_signal};
use anyhow::{Context, Result};
use settings::ConfigFile;
use tokio::net::TcpListener;

pub fn run(a: ConfigArgs) -> Result<i32> {
    let path = a.path("worker");
    let cfg = worker::config::WorkerConfig::load(&path)?;
    super::runtime::check_identity(
        &cfg.transport(),
        &ibtls::Identity::Worker {
            name: cfg.name.clone(),
        },
    )?;
    runtime()?.block_on(async move {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding the worker service to {}", cfg.listen))?;
        let w = worker::Worker::new(cfg.name.clone(), cfg.max_jobs);
        w.admit_agents(cfg.coordinators.clone());
        super::runtime::serve_metrics(cfg.metrics_listen, || {})?;
        super::runtime::record_certificates(cfg.tls.as_ref());
        super::runtime::reload_needs_restart(path, cfg.clone());
        // Registered once it listens: a coordinator that finds the key can
        // connect.
        let _registration = match (&cfg.store, &cfg.advertise) {
            (Some(sc), Some(url)) => {
                let store = store::open(sc).await.with_context(|| {
                    format!("opening the store the worker registers in ({})", sc.kind)
                })?;
                let ttl = std::time::Duration::from_secs(sc.election_ttl_seconds.max(1));
                w.record_parts_in(store.clone(), ttl);
                Some(store::registry::register(
                    store,
                    cfg.name.clone(),
                    url.clone(),
                    ttl,
                    std::time::Duration::from_secs(1),
                ))
            }
            _ => None,
        };
        tracing::info!(name = %cfg.name, listen = %cfg.listen, "worker up");
        super::runtime::notify_ready();
        worker::serve(w, cfg.transport(), listener, shutdown_on_signal()).await?;
        Ok(super::exit::OK)
    })
}
