//! A server's mutual TLS that can be read again while it serves: the
//! service's certificate, key and CA bundle are swapped for new
//! connections (after `ibfabric certs renew`, on SIGHUP) without closing
//! the ones open. The files pass the same checks as at start-up; files that
//! fail them leave the configuration in force.

use crate::config::TlsSettings;
use crate::identity::Identity;
use crate::transport::{CA, HANDSHAKE_TIMEOUT, TlsError, invalid, load, provider, trust_anchors};
use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use std::sync::{Arc, RwLock};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use x509_parser::prelude::FromDer;

/// What a loaded certificate is: its identity and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertState {
    pub identity: Identity,
    /// The end of its validity, in seconds since the Unix epoch.
    pub not_after: i64,
}

impl CertState {
    /// Days from `now` (seconds since the epoch) to the end of validity;
    /// negative once expired.
    pub fn days_left(&self, now: i64) -> f64 {
        (self.not_after - now) as f64 / 86_400.0
    }
}

/// The end of validity of a DER certificate, in seconds since the epoch.
pub fn not_after(der: &CertificateDer<'_>) -> Option<i64> {
    x509_parser::certificate::X509Certificate::from_der(der)
        .ok()
        .map(|(_, c)| c.validity().not_after.timestamp())
}

/// The identity and expiry of the client certificate a connection was
/// accepted with.
pub fn peer_state<IO>(stream: &TlsStream<IO>) -> Option<CertState> {
    let leaf = stream.get_ref().1.peer_certificates()?.first()?;
    Some(CertState {
        identity: Identity::from_cert_der(leaf).ok()?,
        not_after: not_after(leaf)?,
    })
}

#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The server side of mutual TLS, reloadable.
pub struct ReloadableServer {
    settings: TlsSettings,
    current: RwLock<(Arc<ServerConfig>, CertState)>,
}

impl ReloadableServer {
    /// Reads and checks the files of `s`, as [`crate::server_tls`] does.
    pub fn new(s: &TlsSettings) -> Result<Self, TlsError> {
        Ok(Self {
            settings: s.clone(),
            current: RwLock::new(build(s)?),
        })
    }

    /// Reads the files again; on success new connections use them, on
    /// failure the configuration in force stays. A certificate of another
    /// identity than the one the service started with is refused, as the
    /// service would have refused it at start.
    pub fn reload(&self) -> Result<CertState, TlsError> {
        let next = build(&self.settings)?;
        let state = next.1.clone();
        let had = self.state().identity;
        if state.identity != had {
            return Err(invalid(
                "certificate",
                &self.settings.cert,
                format_args!("names {} where this service is {had}", state.identity),
            ));
        }
        match self.current.write() {
            Ok(mut g) => *g = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
        Ok(state)
    }

    /// The files it reads.
    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// The certificate in force.
    pub fn state(&self) -> CertState {
        match self.current.read() {
            Ok(g) => g.1.clone(),
            Err(poisoned) => poisoned.into_inner().1.clone(),
        }
    }

    fn config(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(g) => g.0.clone(),
            Err(poisoned) => poisoned.into_inner().0.clone(),
        }
    }

    /// The handshake of one connection with the configuration in force,
    /// bounded by the same timeout as the services' other handshakes.
    pub async fn accept<IO>(&self, io: IO) -> std::io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        Self::handshake(TlsAcceptor::from(self.config()), io).await
    }

    /// [`Self::accept`] for HTTP/1.1 (a browser reading the status page)
    /// instead of gRPC's HTTP/2: the same certificate, key, CA bundle and
    /// client verification.
    pub async fn accept_http1<IO>(&self, io: IO) -> std::io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let mut cfg = (*self.config()).clone();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self::handshake(TlsAcceptor::from(Arc::new(cfg)), io).await
    }

    async fn handshake<IO>(acceptor: TlsAcceptor, io: IO) -> std::io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }
}

fn build(s: &TlsSettings) -> Result<(Arc<ServerConfig>, CertState), TlsError> {
    let l = load(s)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(trust_anchors(&l, s)?, provider())
        .build()
        .map_err(|e| invalid(CA, &s.ca, e))?;
    let leaf = l
        .certified
        .cert
        .first()
        .and_then(not_after)
        .ok_or_else(|| invalid("certificate", &s.cert, "no validity period"))?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("certificate", &s.cert, e))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(Fixed(l.certified.clone())));
    // gRPC is HTTP/2 only.
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok((
        Arc::new(cfg),
        CertState {
            identity: l.identity,
            not_after: leaf,
        },
    ))
}
