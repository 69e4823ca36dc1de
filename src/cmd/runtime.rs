//! What the service commands share: their config argument, the async
//! runtime, and the shutdown signal.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use tokio::sync::watch;

#[derive(Args)]
#[command(
    after_help = "Every key of the file can be overridden from the environment: \
    IBFABRIC_<KEY> for a top-level key (IBFABRIC_MAX_VLS=4), IBFABRIC_<TABLE>__<KEY> inside a \
    table (IBFABRIC_STORE__ENDPOINTS='[\"https://etcd:2379\"]'); values are TOML values or \
    plain strings. SIGHUP re-reads the file: the agent applies new routing options (engine, \
    base, max_vls, max_sls, root_guids, dqr, stage_wait_ms) through an ordered, checked \
    update; other keys, and the controller's and router's, take a restart (the log says \
    which). Under systemd (Type=notify) the service says READY=1 once it serves. The keys \
    are listed in deploy/README.md and in the example files under deploy/config/."
)]
pub struct ConfigArgs {
    /// TOML configuration file. Default: $IBFABRIC_CONFIG, else
    /// /etc/ibfabric/<role>.toml (agent.toml, controller.toml, router.toml).
    #[arg(long, short, env = "IBFABRIC_CONFIG")]
    pub config: Option<PathBuf>,
}

impl ConfigArgs {
    /// The config file of `role` ("agent", "controller", "router").
    pub fn path(&self, role: &str) -> PathBuf {
        self.config
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("/etc/ibfabric/{role}.toml")))
    }
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
            use tokio::signal::unix::{SignalKind, signal};
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

/// How a command reaches the services: mutual TLS with a certificate of
/// the CA, or plaintext for services started with `insecure = true`.
#[derive(Args, Clone, Debug)]
pub struct ClientTls {
    /// CA certificate for mutual TLS (with --cert and --key: any identity
    /// the CA issued, e.g. `ibfabric certs ... issue worker --name ops`).
    #[arg(long, requires_all = ["cert", "key"])]
    pub ca: Option<PathBuf>,
    /// This client's certificate (PEM), issued by the CA.
    #[arg(long, requires = "ca")]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "ca")]
    pub key: Option<PathBuf>,
    /// Plaintext gRPC (services started with insecure = true).
    #[arg(long, conflicts_with = "ca")]
    pub insecure: bool,
}

impl ClientTls {
    pub fn transport(&self) -> Result<ibtls::Transport> {
        let tls = match (&self.ca, &self.cert, &self.key) {
            (Some(ca), Some(cert), Some(key)) => Some(ibtls::TlsSettings {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        };
        if tls.is_none() && !self.insecure {
            anyhow::bail!(
                "give --ca, --cert and --key (mutual TLS), or --insecure for plaintext services"
            );
        }
        Ok(ibtls::Transport::from_config(tls, self.insecure)?)
    }
}

/// Serves Prometheus metrics on `addr` (when given) and calls `sample`
/// every second to refresh the gauges read from the service's state.
/// Must run inside the runtime: the exporter's listener is a task of it.
pub fn serve_metrics(
    addr: Option<std::net::SocketAddr>,
    sample: impl Fn() + Send + 'static,
) -> Result<()> {
    serve_metrics_and(addr, sample, None)
}

/// [`serve_metrics`], with `GET /status` rendered by `status` when given.
pub fn serve_metrics_and(
    addr: Option<std::net::SocketAddr>,
    sample: impl Fn() + Send + 'static,
    status: Option<proto::metrics_http::Render>,
) -> Result<()> {
    let Some(addr) = addr else {
        return Ok(());
    };
    // The exporter's own listener has no bound on connections or time to
    // send a request: ours ([`proto::metrics_http`]) has both.
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the metrics recorder")?;
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)
        })
        .with_context(|| format!("serving metrics on {addr}"))?;
    tokio::spawn(proto::metrics_http::serve_pages(
        listener,
        std::sync::Arc::new(move || proto::peer_expiry::splice(handle.render())),
        status,
    ));
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

/// Sets `ibfabric_certificate_expiry_timestamp_seconds` for this
/// service's own certificate and its CA (unix seconds of their
/// `notAfter`), for the alert rules (deploy/prometheus/); a SIGHUP that
/// reloads the TLS files sets them again. Nothing without TLS.
pub fn record_certificates(tls: Option<&ibtls::TlsSettings>) {
    if let Some(t) = tls {
        proto::tls_listen::record_certificates(t);
    }
}

/// Tells systemd (`Type=notify`) that the service is up: `READY=1` on
/// `$NOTIFY_SOCKET`. Without systemd there is no socket and nothing to do.
pub fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sent = (|| -> std::io::Result<usize> {
        use std::os::unix::ffi::OsStrExt;
        let sock = std::os::unix::net::UnixDatagram::unbound()?;
        match path.as_bytes().strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(b"READY=1", &addr)
            }
            None => sock.send_to(b"READY=1", &path),
        }
    })();
    match sent {
        Ok(_) => tracing::info!("told systemd the service is ready"),
        Err(e) => tracing::warn!(socket = ?path, "could not notify systemd: {e}"),
    }
}

/// Calls `on_hup` on every SIGHUP, for the life of the runtime. The
/// handler is in place when this returns (before READY=1 is sent, so a
/// reload right after start cannot hit SIGHUP's default action).
pub fn on_sighup(on_hup: impl Fn() + Send + 'static) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("SIGHUP not handled: {e}");
            return;
        }
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            on_hup();
        }
    });
}

/// The SIGHUP of a service that applies its config only at start: the
/// file is re-read and checked, and the log says whether a restart would
/// change anything.
pub fn reload_needs_restart<C>(path: PathBuf, running: C)
where
    C: settings::ConfigFile + std::fmt::Debug + Send + 'static,
{
    on_sighup(move || match C::load(&path) {
        Err(e) => tracing::error!("SIGHUP: {e}; the running config stays"),
        Ok(new) if format!("{new:?}") == format!("{running:?}") => {
            tracing::info!(config = %path.display(), "SIGHUP: config unchanged")
        }
        Ok(_) => tracing::warn!(
            config = %path.display(),
            "SIGHUP: the config changed; this service applies it on restart"
        ),
    });
}

/// A service runs only with a certificate that names what it is; with
/// `insecure = true` it says loudly that it authenticates nobody.
pub fn check_identity(t: &ibtls::Transport, want: &ibtls::Identity) -> Result<()> {
    match t {
        ibtls::Transport::Tls(s) => {
            let have = s.identity()?;
            if &have != want {
                anyhow::bail!(
                    "the [tls] certificate {} names {have}, but this service is {want}",
                    s.cert.display()
                );
            }
        }
        ibtls::Transport::Insecure => tracing::warn!(
            "insecure = true: plaintext gRPC, no peer is authenticated; use only on a trusted network"
        ),
    }
    Ok(())
}

/// The `[store]` table of the TOML file `path` (a controller's or a
/// worker's config will do).
pub fn store_config(path: &std::path::Path) -> Result<store::StoreConfig> {
    use settings::ConfigFile;
    store::registry::StoreFile::load(path)?
        .store
        .with_context(|| format!("{}: no [store] table", path.display()))
}

/// The parts the workers registered in the store of `path`'s `[store]`
/// hold now.
pub async fn held_parts(path: &std::path::Path) -> Result<Vec<store::registry::HeldPart>> {
    let sc = store_config(path)?;
    let store = store::open(&sc)
        .await
        .with_context(|| format!("opening the store {} names", path.display()))?;
    store::registry::held_parts(store.as_ref())
        .await
        .with_context(|| {
            format!(
                "listing the parts held in the store {} names",
                path.display()
            )
        })
}

/// The workers registered in the store `path`'s `[store]` names, with their
/// leases watched.
pub async fn registered_workers(path: &std::path::Path) -> Result<store::registry::Leases> {
    let sc = store_config(path)?;
    let l = store::registry::find(&sc).await.with_context(|| {
        format!(
            "finding the workers registered in the store {} names",
            path.display()
        )
    })?;
    tracing::info!(
        store = %path.display(),
        workers = ?l.workers.iter().map(|w| format!("{}={}", w.name, w.url)).collect::<Vec<_>>(),
        "workers found in the store"
    );
    Ok(l)
}
