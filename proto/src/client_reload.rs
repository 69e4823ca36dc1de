//! SIGHUP for the TLS files a client reads: a long-lived session (an
//! agent's or a router's with the controllers) ends when they change and
//! reconnects with them, as a server's new connections do. Files that fail
//! the start-up checks leave the session as it is.

use ibtls::{TlsSettings, Transport};

/// Waits for a SIGHUP after which the client's TLS files pass the checks.
pub struct ClientReload {
    /// None when plaintext, or no handler could be installed.
    hup: Option<(tokio::signal::unix::Signal, TlsSettings)>,
}

impl ClientReload {
    /// For a client of `transport` (plaintext: never ready); SIGHUPs count
    /// from now on.
    pub fn new(transport: &Transport) -> Self {
        Self {
            hup: match transport {
                Transport::Tls(s) => crate::tls_listen::hangups().map(|h| (h, s.clone())),
                Transport::Insecure => None,
            },
        }
    }

    /// Returns after a SIGHUP once the files read again pass the checks a
    /// service makes at start; files that fail them are logged and the
    /// wait goes on.
    pub async fn ready(&mut self) {
        let Some((hup, s)) = &mut self.hup else {
            return std::future::pending().await;
        };
        loop {
            if hup.recv().await.is_none() {
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
