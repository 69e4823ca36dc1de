//! The TLS side of a listener: handshakes with the service's reloadable
//! configuration (each in a task of its own, so a slow client holds up no
//! other), SIGHUP to read the certificate, key and CA bundle again, and
//! when this service's certificate, its CA and its peers' certificates
//! expire, as metrics.

use crate::listen::{Admission, Admitted};
use ibtls::ReloadableServer;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

/// When a certificate's validity ends (Unix seconds), labelled
/// `certificate`: `own`, `ca` (the first in the CA file), or `peer` with
/// `peer` (the identity of a client that connected). The alert rules
/// (deploy/prometheus/) subtract `time()` for the days left. A peer's
/// series, with the certificate it last connected with, lasts while it is
/// connected and an hour after ([`crate::peer_expiry`]).
pub const CERT_EXPIRY: &str = "ibfabric_certificate_expiry_timestamp_seconds";
/// Reloads of the TLS files, labelled `result` (`ok`, `error`).
pub const TLS_RELOADS: &str = "ibfabric_tls_reloads_total";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Sets [`CERT_EXPIRY`] for this service's own certificate and its CA
/// from the files of `t`. A file that cannot be read is logged (the
/// service read it at start, or a reload refused it).
pub fn record_certificates(t: &ibtls::TlsSettings) {
    for (which, path) in [("own", &t.cert), ("ca", &t.ca)] {
        let at = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|pem| ibtls::Identity::not_after_pem(&pem).map_err(|e| e.to_string()));
        match at {
            Ok(at) => metrics::gauge!(CERT_EXPIRY, "certificate" => which).set(at as f64),
            Err(e) => {
                tracing::warn!(file = %path.display(), "certificate expiry not exported: {e}")
            }
        }
    }
}

/// Tasks aborted when dropped.
pub struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Tasks {
    /// One task, aborted when the value is dropped.
    pub fn of(t: tokio::task::JoinHandle<()>) -> Self {
        Self(vec![t])
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Connections admitted on `listener` and through their handshake, while
/// the returned tasks are held.
pub(crate) fn incoming(
    listener: TcpListener,
    admission: Admission,
    tls: Arc<ReloadableServer>,
) -> (
    tokio_stream::wrappers::ReceiverStream<std::io::Result<TlsStream<Admitted>>>,
    Tasks,
) {
    let (tx, rx) = mpsc::channel(64);
    let t = tls.clone();
    let accept = tokio::spawn(async move {
        loop {
            let s = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to
                    // close rather than spin.
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if s.set_nodelay(true).is_err() {
                continue;
            }
            if let Some(admitted) = admission.admit(s) {
                tokio::spawn(handshake(t.clone(), admitted, tx.clone()));
            }
        }
    });
    let hup = tokio::spawn(reload_on_hangup(tls));
    (
        tokio_stream::wrappers::ReceiverStream::new(rx),
        Tasks(vec![accept, hup]),
    )
}

/// One connection's handshake; the peer's certificate expiry is recorded.
async fn handshake(
    tls: Arc<ReloadableServer>,
    admitted: Admitted,
    tx: mpsc::Sender<std::io::Result<TlsStream<Admitted>>>,
) {
    match tls.accept(admitted).await {
        Ok(mut stream) => {
            if let Some(p) = ibtls::peer_state(&stream) {
                let seen = crate::peer_expiry::seen(p.identity.to_string(), p.not_after);
                stream.get_mut().0.hold(seen);
            }
            let _ = tx.send(Ok(stream)).await;
        }
        Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
    }
}

/// A stream of this process's SIGHUPs from now on (each caller gets every
/// one); None, logged, when no handler can be installed.
pub(crate) fn hangups() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::hangup())
        .inspect_err(
            |e| tracing::warn!(error = %e, "no SIGHUP handler: the TLS files cannot be reloaded"),
        )
        .ok()
}

/// SIGHUP reads the TLS files again.
async fn reload_on_hangup(tls: Arc<ReloadableServer>) {
    let Some(mut hup) = hangups() else {
        return;
    };
    loop {
        if hup.recv().await.is_none() {
            return;
        }
        match tls.reload() {
            Ok(s) => {
                metrics::counter!(TLS_RELOADS, "result" => "ok").increment(1);
                record_certificates(tls.settings());
                tracing::info!(
                    identity = %s.identity,
                    days_left = s.days_left(now()),
                    "TLS certificate, key and CA bundle reloaded; new connections use them"
                );
            }
            Err(e) => {
                metrics::counter!(TLS_RELOADS, "result" => "error").increment(1);
                tracing::error!(error = %e, "TLS files not reloaded; the ones in force stay");
            }
        }
    }
}
