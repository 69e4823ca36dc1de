//! `ibfabric controller`: collect subnet reports, compute inter-subnet
//! routes, push tables.

use super::runtime::{ConfigArgs, runtime, shutdown_on_signal};
use anyhow::{Context, Result};
use controller::config::ControllerConfig;
use settings::ConfigFile;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub fn run(a: ConfigArgs) -> Result<i32> {
    let path = a.path("controller");
    let cfg = ControllerConfig::load(&path)?;
    super::runtime::check_identity(&cfg.transport(), &ibtls::Identity::Controller)?;
    runtime()?.block_on(async move {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding the controller service to {}", cfg.listen))?;
        let shutdown = shutdown_on_signal();
        let ctl = controller::start(&cfg, shutdown.clone()).await?;
        let c = ctl.clone();
        let page = {
            let c = ctl.clone();
            Arc::new(move || controller::status_page::render(&c.state())) as proto::metrics_http::Render
        };
        super::runtime::serve_metrics_and(
            cfg.metrics_listen,
            move || proto::ops::record_controller(&c.state()),
            cfg.status_page.then(|| page.clone()),
        )?;
        let https = match cfg.status_listen {
            Some(addr) => {
                let l = TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding the status page (status_listen) to {addr}"))?;
                tracing::info!(%addr, "status page over HTTPS, operator certificates only");
                Some((l, page))
            }
            None => None,
        };
        super::runtime::record_certificates(cfg.tls.as_ref());
        tracing::info!(id = %cfg.id, listen = %cfg.listen, store = %cfg.store.kind, "controller up");
        super::runtime::reload_needs_restart(path, cfg.clone());
        // The listener is bound: connections queue until serve takes them.
        super::runtime::notify_ready();
        controller::service::serve_with_status(
            ctl,
            cfg.limits.bounds(),
            cfg.transport(),
            (listener, https),
            shutdown,
        )
        .await?;
        Ok(0)
    })
}

/// Builds a controller and waits (up to the election TTL plus a margin)
/// until it leads or names another leader, so callers see a settled role.
pub async fn start_controller(
    cfg: &ControllerConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<Arc<controller::Controller>> {
    let ctl = controller::start(cfg, shutdown).await?;
    let end = Instant::now() + Duration::from_secs(cfg.store.election_ttl_seconds + 3);
    while !ctl.is_leader() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::info!(id = %cfg.id, leader = ctl.is_leader(), "controller started");
    Ok(ctl)
}
