//! What the service commands share: their config argument, the async
//! runtime, and the shutdown signal.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use tokio::sync::watch;

#[derive(Args)]
pub struct ConfigArgs {
    /// TOML configuration file (see the crate docs or README for the keys).
    #[arg(long, short)]
    pub config: PathBuf,
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Turns Ctrl-C / SIGTERM into the shutdown signal the services watch.
pub fn shutdown_on_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut term) = signal(SignalKind::terminate()) {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            } else {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        let _ = tx.send(true);
    });
    rx
}

/// Serves Prometheus metrics on `addr` (when given) and calls `sample`
/// every second to refresh the gauges read from the service's state.
/// Must run inside the runtime: the exporter's listener is a task of it.
pub fn serve_metrics(
    addr: Option<std::net::SocketAddr>,
    sample: impl Fn() + Send + 'static,
) -> Result<()> {
    let Some(addr) = addr else {
        return Ok(());
    };
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .with_context(|| format!("serving metrics on {addr}"))?;
    metrics::gauge!("ibfabric_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            sample();
        }
    });
    tracing::info!("metrics on http://{addr}/metrics");
    Ok(())
}

/// A service runs only with a certificate that names what it is; with
/// `insecure = true` it says loudly that it authenticates nobody.
pub fn check_identity(t: &ibtls::Transport, want: &ibtls::Identity) -> Result<()> {
    match t {
        ibtls::Transport::Tls(s) => {
            let have = s.identity()?;
            if &have != want {
                anyhow::bail!("the [tls] certificate {} names {have}, but this service is {want}", s.cert.display());
            }
        }
        ibtls::Transport::Insecure => tracing::warn!(
            "insecure = true: plaintext gRPC, no peer is authenticated; use only on a trusted network"
        ),
    }
    Ok(())
}
