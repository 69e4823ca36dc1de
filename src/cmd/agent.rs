//! `ibfabric agent`: route and verify one subnet, report to the
//! controller, answer path queries.

use super::runtime::{ConfigArgs, runtime, shutdown_on_signal};
use anyhow::{Context, Result};
use settings::ConfigFile;
use tokio::net::TcpListener;

pub fn run(a: ConfigArgs) -> Result<i32> {
    let path = a.path("agent");
    let cfg = agent::config::AgentConfig::load(&path)?;
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
        let tls = cfg.tls.clone();
        let ag = agent::Agent::new(cfg);
        let a = ag.clone();
        super::runtime::serve_metrics(metrics_listen, move || a.record_metrics())?;
        super::runtime::record_certificates(tls.as_ref());
        // Ready once the first tables are in force (the agent routes before
        // it serves); OpenSM's plugin finds them then.
        let a = ag.clone();
        tokio::spawn(async move {
            while a.subnet.load().is_none() {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            super::runtime::notify_ready();
        });
        let a = ag.clone();
        super::runtime::on_sighup(move || {
            let new = match agent::config::AgentConfig::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!("SIGHUP: {e}; the running config stays");
                    return;
                }
            };
            let (restart, before) = a.reload(&new);
            if !restart.is_empty() {
                tracing::warn!(keys = %restart.join(", "), "SIGHUP: these keys change only on restart");
            }
            let a = a.clone();
            tokio::spawn(async move {
                let t = std::time::Instant::now();
                match a.reroute().await {
                    // The update line before says how (recompute, or kept).
                    Ok(true) => {
                        tracing::info!("SIGHUP: reloaded options applied");
                        // A live fabric gets the new set applied and
                        // confirmed, as after a topology change.
                        agent::follow::apply_and_confirm(&a, t).await;
                    }
                    Ok(false) => tracing::info!("SIGHUP: the tables in force stay"),
                    Err(e) => {
                        a.revert_reload(before);
                        tracing::error!("SIGHUP: the reloaded options were refused ({e}); the tables and options in force stay");
                    }
                }
            });
        });
        agent::run(ag, listener, shutdown_on_signal()).await?;
        Ok(0)
    })
}
