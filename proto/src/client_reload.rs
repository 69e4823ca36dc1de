//! SIGHUP for the TLS files a client reads: a long-lived session (an
//! agent's or a router's with the controllers) ends when they change and
//! reconnects with them, as a server's new connections do. Files that fail
//! the start-up checks leave the session as it is.

use ibtls::{TlsSettings, Transport};
use std::sync::OnceLock;
use tokio::sync::watch;

static HANGUPS: OnceLock<watch::Sender<u64>> = OnceLock::new();

/// The hangups this process received, counted by a task started on first
/// use (inside a Tokio runtime).
fn hangups() -> watch::Receiver<u64> {
    HANGUPS
        .get_or_init(|| {
            let (tx, _) = watch::channel(0u64);
            let feed = tx.clone();
            tokio::spawn(async move {
                use tokio::signal::unix::{SignalKind, signal};
                let mut hup = match signal(SignalKind::hangup()) {
                    Ok(h) => h,
                    Err(e) => {
                        tracing::warn!(error = %e, "no SIGHUP handler: clients keep their TLS files");
                        return;
                    }
                };
                while hup.recv().await.is_some() {
                    feed.send_modify(|n| *n += 1);
                }
            });
            tx
        })
        .subscribe()
}

/// Waits for a SIGHUP after which the client's TLS files pass the checks.
pub struct ClientReload {
    rx: watch::Receiver<u64>,
    settings: Option<TlsSettings>,
}

impl ClientReload {
    /// For a client of `transport` (plaintext: never ready).
    pub fn new(transport: &Transport) -> Self {
        Self {
            rx: hangups(),
            settings: match transport {
                Transport::Tls(s) => Some(s.clone()),
                Transport::Insecure => None,
            },
        }
    }

    /// Returns after a SIGHUP once the files read again pass the checks a
    /// service makes at start; files that fail them are logged and the
    /// wait goes on.
    pub async fn ready(&mut self) {
        let Some(s) = &self.settings else {
            return std::future::pending().await;
        };
        loop {
            if self.rx.changed().await.is_err() {
                return std::future::pending().await;
            }
            match ibtls::ReloadableServer::new(s) {
                Ok(_) => return,
                Err(e) => tracing::error!(
                    error = %e,
                    "TLS files not reloaded; this client's connection keeps the ones in force"
                ),
            }
        }
    }
}
