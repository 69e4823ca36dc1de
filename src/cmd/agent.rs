//! `ibfabric agent`: route and verify one subnet, report to the
//! controller, answer path queries.

use super::runtime::{runtime, shutdown_on_signal, ConfigArgs};
use anyhow::{Context, Result};
use settings::ConfigFile;
use tokio::net::TcpListener;

pub fn run(a: ConfigArgs) -> Result<i32> {
    let cfg = agent::config::AgentConfig::load(&a.config)?;
    runtime()?.block_on(async move {
        let listener = match cfg.listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding the path query service to {addr}"))?,
            ),
            None => None,
        };
        let metrics_listen = cfg.metrics_listen;
        let ag = agent::Agent::new(cfg);
        let a = ag.clone();
        super::runtime::serve_metrics(metrics_listen, move || a.record_metrics())?;
        agent::run(ag, listener, shutdown_on_signal()).await?;
        Ok(0)
    })
}
