//! What a service's configuration says about transport security.
//!
//! Secure by default: a service runs mutual TLS when its configuration has a
//! `[tls]` section, plaintext only when it says `insecure = true`, and
//! refuses to start when it says neither (or both).

use crate::peer::{Mode, Peer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The `[tls]` section of a service configuration: PEM files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// The CA certificate that peers' certificates must chain to.
    pub ca: PathBuf,
    /// This service's certificate, carrying its identity URI.
    pub cert: PathBuf,
    /// This service's private key.
    pub key: PathBuf,
}

impl TlsSettings {
    /// The three files, for a configuration loader that resolves paths.
    pub fn paths_mut(&mut self) -> [&mut PathBuf; 3] {
        [&mut self.ca, &mut self.cert, &mut self.key]
    }

    /// The same settings with relative paths taken from `base` (usually
    /// [`config_dir`] of the configuration file), so a configuration means
    /// the same files whatever directory the service starts in.
    pub fn relative_to(&self, base: &Path) -> TlsSettings {
        TlsSettings {
            ca: base.join(&self.ca),
            cert: base.join(&self.cert),
            key: base.join(&self.key),
        }
    }
}

/// The directory relative paths in a configuration file are taken from:
/// the file's own directory.
pub fn config_dir(config_file: &Path) -> &Path {
    match config_file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// How a service talks gRPC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Mutual TLS: both ends present certificates from the same CA.
    Tls(TlsSettings),
    /// Plaintext without authentication, because the configuration asked
    /// for it.
    Insecure,
}

/// A configuration that does not say how to secure its transport.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum TransportError {
    #[error(
        "no transport security configured: add a [tls] section with ca, cert and key \
         (PEM files; `ibfabric certs` makes them), or set insecure = true to run in \
         plaintext without authentication"
    )]
    Unconfigured,
    #[error(
        "both a [tls] section and insecure = true are set: remove insecure = true to use \
         TLS, or the [tls] section to run in plaintext"
    )]
    Conflicting,
}

impl Transport {
    /// The transport a configuration asks for: its optional `[tls]` section
    /// and its `insecure` flag.
    pub fn from_config(
        tls: Option<TlsSettings>,
        insecure: bool,
    ) -> Result<Transport, TransportError> {
        match (tls, insecure) {
            (Some(tls), false) => Ok(Transport::Tls(tls)),
            (None, true) => Ok(Transport::Insecure),
            (None, false) => Err(TransportError::Unconfigured),
            (Some(_), true) => Err(TransportError::Conflicting),
        }
    }

    /// The transport of a configuration that [`Transport::from_config`]
    /// accepted when it was read (its `[tls]` section, else plaintext).
    pub fn of_checked(tls: Option<&TlsSettings>, insecure: bool) -> Transport {
        match tls {
            Some(s) if !insecure => Transport::Tls(s.clone()),
            _ => Transport::Insecure,
        }
    }

    /// Relative paths of the TLS files taken from `base`.
    pub fn relative_to(&self, base: &Path) -> Transport {
        match self {
            Transport::Tls(s) => Transport::Tls(s.relative_to(base)),
            Transport::Insecure => Transport::Insecure,
        }
    }

    pub fn is_insecure(&self) -> bool {
        matches!(self, Transport::Insecure)
    }

    /// The URI scheme of endpoints: `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        match self {
            Transport::Tls(_) => "https",
            Transport::Insecure => "http",
        }
    }

    /// What a server needs to judge its peers, without the file paths.
    pub fn mode(&self) -> Mode {
        match self {
            Transport::Tls(_) => Mode::Tls,
            Transport::Insecure => Mode::Insecure,
        }
    }

    /// The peer of a request under this transport.
    pub fn peer<T>(&self, request: &tonic::Request<T>) -> Result<Peer, tonic::Status> {
        self.mode().peer(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TlsSettings {
        TlsSettings {
            ca: "ca.pem".into(),
            cert: "/etc/ibfabric/agent.pem".into(),
            key: "agent-key.pem".into(),
        }
    }

    #[test]
    fn tls_or_insecure_exactly() {
        assert_eq!(
            Transport::from_config(Some(settings()), false),
            Ok(Transport::Tls(settings()))
        );
        assert_eq!(Transport::from_config(None, true), Ok(Transport::Insecure));
        assert_eq!(
            Transport::from_config(None, false),
            Err(TransportError::Unconfigured)
        );
        assert_eq!(
            Transport::from_config(Some(settings()), true),
            Err(TransportError::Conflicting)
        );
        let msg = TransportError::Unconfigured.to_string();
        assert!(
            msg.contains("[tls]") && msg.contains("insecure = true"),
            "{msg}"
        );
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let dir = config_dir(Path::new("/etc/ibfabric/agent.toml"));
        assert_eq!(dir, Path::new("/etc/ibfabric"));
        assert_eq!(config_dir(Path::new("agent.toml")), Path::new("."));
        let s = settings().relative_to(dir);
        assert_eq!(s.ca, Path::new("/etc/ibfabric/ca.pem"));
        assert_eq!(s.cert, Path::new("/etc/ibfabric/agent.pem"));
        assert_eq!(s.key, Path::new("/etc/ibfabric/agent-key.pem"));
    }
}
