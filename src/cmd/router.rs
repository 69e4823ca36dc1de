//! `ibfabric router`: a router's firmware side, holding egress tables and
//! answering forwarding queries.

use super::runtime::{ConfigArgs, runtime, shutdown_on_signal};
use anyhow::{Context, Result};
use settings::ConfigFile;
use std::sync::Arc;
use tokio::net::TcpListener;

pub fn run(a: ConfigArgs) -> Result<i32> {
    let path = a.path("router");
    let cfg = router_fw::config::RouterConfig::load(&path)?;
    let guid = cfg.router_guid;
    super::runtime::check_identity(&cfg.transport(), &ibtls::Identity::Router { guid })?;
    runtime()?.block_on(async move {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding the router service to {}", cfg.listen))?;
        let fw = Arc::new(router_fw::RouterFw::new(guid, cfg.ports));
        let f = fw.clone();
        super::runtime::serve_metrics(cfg.metrics_listen, move || {
            proto::ops::record_router(&f.state())
        })?;
        super::runtime::record_certificates(cfg.tls.as_ref());
        tracing::info!(router = %format!("{guid:#018x}"), listen = %cfg.listen, "router firmware service up");
        super::runtime::reload_needs_restart(path, cfg.clone());
        super::runtime::notify_ready();
        router_fw::run(
            fw,
            cfg.transport(),
            listener,
            cfg.controllers,
            shutdown_on_signal(),
        )
        .await?;
        Ok(0)
    })
}
