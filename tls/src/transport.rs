//! tonic TLS configurations from a [`TlsSettings`].
//!
//! The files are read and checked here, before tonic sees them, so a
//! misconfigured service stops at start-up naming the file and the cause
//! rather than failing handshakes later: the CA file must hold CA
//! certificates, the certificate must carry exactly one identity and be
//! signed by that CA, and the key must belong to the certificate.

use crate::config::TlsSettings;
use crate::identity::{Identity, Role};
use crate::pem;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, ServerTlsConfig};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// A peer that connects and then stays silent would otherwise hold a
/// connection (and a task) for as long as it likes before authenticating.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS file that cannot be used, by path and cause.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("reading {what} {}: {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {}: {reason}", path.display())]
    Invalid {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("TLS endpoint: {0}")]
    Endpoint(String),
}

pub(crate) const CA: &str = "CA certificate";
const CERT: &str = "certificate";
const KEY: &str = "private key";

/// The PEM files of a [`TlsSettings`], read and checked.
pub(crate) struct Loaded {
    pub(crate) ca_pem: Vec<u8>,
    pub(crate) ca_certs: Vec<CertificateDer<'static>>,
    pub(crate) cert_pem: Vec<u8>,
    pub(crate) key_pem: Vec<u8>,
    pub(crate) identity: Identity,
    /// The certificate and key, for a rustls configuration of its own.
    pub(crate) certified: Arc<rustls::sign::CertifiedKey>,
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn invalid(what: &'static str, path: &Path, reason: impl fmt::Display) -> TlsError {
    TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn parse_x509<'a>(
    what: &'static str,
    path: &Path,
    der: &'a [u8],
) -> Result<X509Certificate<'a>, TlsError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| invalid(what, path, format!("not a parsable X.509 certificate: {e}")))
}

pub(crate) fn provider() -> Arc<CryptoProvider> {
    // Explicit rather than the process default: the default is unset unless
    // exactly one provider is compiled in, which this crate cannot promise.
    Arc::new(rustls::crypto::ring::default_provider())
}

pub(crate) fn load(s: &TlsSettings) -> Result<Loaded, TlsError> {
    let ca_pem = read(CA, &s.ca)?;
    let ca_certs = pem::certs(&ca_pem).map_err(|r| invalid(CA, &s.ca, r))?;
    for der in &ca_certs {
        if !parse_x509(CA, &s.ca, der)?.is_ca() {
            return Err(invalid(
                CA,
                &s.ca,
                "not a CA certificate (its basic constraints do not allow issuing certificates)",
            ));
        }
    }

    let cert_pem = read(CERT, &s.cert)?;
    let chain = pem::certs(&cert_pem).map_err(|r| invalid(CERT, &s.cert, r))?;
    let leaf = &chain[0];
    let identity = Identity::from_cert_der(leaf).map_err(|e| invalid(CERT, &s.cert, e))?;
    // Signed by one of the CA certificates, or by an intermediate sent
    // along in the same file (whose own chain the peer checks).
    let leaf_x509 = parse_x509(CERT, &s.cert, leaf)?;
    let mut issuers = Vec::new();
    for der in ca_certs.iter().chain(&chain[1..]) {
        issuers.push(parse_x509(CERT, &s.cert, der)?);
    }
    if !issuers
        .iter()
        .any(|ca| leaf_x509.verify_signature(Some(ca.public_key())).is_ok())
    {
        return Err(invalid(
            CERT,
            &s.cert,
            format_args!("{identity} was not issued by the CA in {}", s.ca.display()),
        ));
    }

    let key_pem = read(KEY, &s.key)?;
    let key = pem::private_key(&key_pem).map_err(|r| invalid(KEY, &s.key, r))?;
    let certified = rustls::sign::CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
        invalid(
            KEY,
            &s.key,
            format_args!("does not fit the certificate {}: {e}", s.cert.display()),
        )
    })?;

    Ok(Loaded {
        ca_pem,
        ca_certs,
        cert_pem,
        key_pem,
        identity,
        certified: Arc::new(certified),
    })
}

/// The CA certificates of `l` (read from `s.ca`) as trust anchors.
pub(crate) fn trust_anchors(l: &Loaded, s: &TlsSettings) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for der in &l.ca_certs {
        roots
            .add(der.clone())
            .map_err(|e| invalid(CA, &s.ca, format_args!("not usable as a trust anchor: {e}")))?;
    }
    Ok(Arc::new(roots))
}

impl TlsSettings {
    /// The identity in this service's own certificate, after the same
    /// checks as [`server_tls`] and [`client_tls`]. A service compares it
    /// with what its configuration says it is (an agent's subnet prefix, a
    /// router's GUID) before it starts.
    pub fn identity(&self) -> Result<Identity, TlsError> {
        load(self).map(|l| l.identity)
    }
}

/// Server side of mutual TLS: this service's certificate and key, and the
/// CA that client certificates must chain to. Clients without a
/// certificate from that CA are refused during the handshake; which
/// identity may call what is decided per request ([`crate::require`]).
pub fn server_tls(s: &TlsSettings) -> Result<ServerTlsConfig, TlsError> {
    let l = load(s)?;
    Ok(ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(l.cert_pem, l.key_pem))
        .client_ca_root(Certificate::from_pem(l.ca_pem))
        .client_auth_optional(false)
        .timeout(HANDSHAKE_TIMEOUT))
}

/// Client side of mutual TLS: the CA the server's certificate must chain
/// to, the name it must carry (`domain`: a DNS name or an IP address from
/// its subject alternative names), and this service's certificate and key.
///
/// This checks the server's CA and name but not its role; use
/// [`client_endpoint`] where the server must also be, say, a controller.
pub fn client_tls(s: &TlsSettings, domain: &str) -> Result<ClientTlsConfig, TlsError> {
    let l = load(s)?;
    Ok(ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(l.ca_pem))
        .identity(tonic::transport::Identity::from_pem(l.cert_pem, l.key_pem))
        .domain_name(domain)
        .timeout(HANDSHAKE_TIMEOUT))
}

/// `endpoint` with mutual TLS as in [`client_tls`], where the server's
/// certificate must moreover carry an identity of role `server`: names
/// are given out by the operator, so a certificate for the right name but
/// the wrong role (an agent's certificate on a controller's host) must not
/// pass for the controller.
pub fn client_endpoint(
    endpoint: Endpoint,
    s: &TlsSettings,
    domain: &str,
    server: Role,
) -> Result<Endpoint, TlsError> {
    let l = load(s)?;
    let webpki = WebPkiServerVerifier::builder_with_provider(trust_anchors(&l, s)?, provider())
        .build()
        .map_err(|e| invalid(CA, &s.ca, e))?;
    let verifier = Arc::new(RoleVerifier {
        webpki,
        role: server,
    });
    // With a custom verifier tonic takes the roots from the verifier only.
    let cfg = ClientTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(l.cert_pem, l.key_pem))
        .domain_name(domain)
        .timeout(HANDSHAKE_TIMEOUT);
    endpoint
        .tls_config_with_verifier(cfg, verifier)
        .map_err(|e| TlsError::Endpoint(e.to_string()))
}

/// WebPKI verification (CA, validity, name), then the role in the
/// certificate's identity URI.
#[derive(Debug)]
struct RoleVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    role: Role,
}

#[derive(Debug, Error)]
#[error("server certificate: {0}")]
struct WrongServer(String);

impl ServerCertVerifier for RoleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        let refuse = |why: String| {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                WrongServer(why),
            ))))
        };
        let id = Identity::from_cert_der(end_entity).map_err(|e| refuse(e.to_string()))?;
        if id.role() != self.role {
            return Err(refuse(format!("{id} is not a {}", self.role)));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
