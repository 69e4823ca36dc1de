//! Role identities and their encoding as a subject alternative name URI.
//!
//! A leaf certificate names exactly one identity:
//!
//! | identity | URI |
//! |---|---|
//! | controller | `ibfabric://controller` |
//! | agent of a subnet | `ibfabric://agent/0x<prefix, 16 lowercase hex digits>` |
//! | router | `ibfabric://router/0x<node GUID, 16 lowercase hex digits>` |
//! | worker | `ibfabric://worker/<name>` |
//! | operator (reads the controller's status page) | `ibfabric://operator/<name>` |
//!
//! Each identity has one spelling only, so a URI read from a certificate
//! compares equal to the one formatted from a configuration, and two
//! spellings can never be used to name one subnet twice.

use std::fmt;
use std::str::FromStr;
use thiserror::Error;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

/// URI scheme of identities.
pub const SCHEME: &str = "ibfabric";

const PREFIX: &str = "ibfabric://";

/// Longest worker name: keeps file names and log lines readable.
pub const MAX_WORKER_NAME: usize = 64;

const FORMS: &str = "ibfabric://controller, ibfabric://agent/0x<16 hex digits>, \
                     ibfabric://router/0x<16 hex digits>, ibfabric://worker/<name> or \
                     ibfabric://operator/<name>";

/// Who a peer is, as its certificate says.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    /// A controller. Every controller of a cluster shares this identity:
    /// they take over from each other.
    Controller,
    /// The agent of the subnet with this 64-bit subnet prefix.
    Agent { prefix: u64 },
    /// The firmware side of the router with this node GUID.
    Router { guid: u64 },
    /// A worker, by name.
    Worker { name: String },
    /// A person or script that reads the controller's status page, by
    /// name (the same rules as a worker's). No service takes its calls.
    Operator { name: String },
}

/// The kind of an [`Identity`], without its subnet, GUID or name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Controller,
    Agent,
    Router,
    Worker,
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Agent => "agent",
            Role::Router => "router",
            Role::Worker => "worker",
            Role::Operator => "operator",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a URI or a certificate names no usable identity.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IdentityError {
    #[error("'{uri}' is not an ibfabric identity: expected {FORMS}")]
    NotIbfabric { uri: String },
    #[error("'{uri}' is not a valid ibfabric identity: {reason}")]
    Malformed { uri: String, reason: String },
    #[error("worker name '{name}' is not valid: {reason}")]
    WorkerName { name: String, reason: String },
    #[error("not a parsable X.509 certificate: {0}")]
    Certificate(String),
    #[error("a CA certificate carries no identity; a leaf certificate was expected")]
    CaCertificate,
    #[error(
        "the certificate carries no ibfabric identity (a subject alternative name URI such as \
         ibfabric://controller); issue it with `ibfabric certs issue`"
    )]
    Missing,
    #[error(
        "the certificate carries {} ibfabric identities ({}); a leaf certificate must carry exactly one",
        .0.len(),
        .0.join(", ")
    )]
    Several(Vec<String>),
}

impl Identity {
    pub fn role(&self) -> Role {
        match self {
            Identity::Controller => Role::Controller,
            Identity::Agent { .. } => Role::Agent,
            Identity::Router { .. } => Role::Router,
            Identity::Worker { .. } => Role::Worker,
            Identity::Operator { .. } => Role::Operator,
        }
    }

    /// The URI that encodes this identity in a certificate.
    pub fn to_uri(&self) -> String {
        self.to_string()
    }

    /// Parses an identity URI; only the canonical spelling is accepted.
    pub fn parse_uri(uri: &str) -> Result<Identity, IdentityError> {
        let malformed = |reason: &str| IdentityError::Malformed {
            uri: uri.to_string(),
            reason: reason.to_string(),
        };
        let Some(rest) = uri.strip_prefix(PREFIX) else {
            return Err(if is_ibfabric_uri(uri) {
                malformed("the scheme must be written ibfabric:// in lowercase")
            } else {
                IdentityError::NotIbfabric {
                    uri: uri.to_string(),
                }
            });
        };
        let (role, id) = match rest.split_once('/') {
            Some((role, id)) => (role, Some(id)),
            None => (rest, None),
        };
        match (role, id) {
            ("controller", None) => Ok(Identity::Controller),
            ("controller", Some(_)) => Err(malformed("a controller identity has no path")),
            ("agent", Some(id)) => Ok(Identity::Agent {
                prefix: parse_id(id).map_err(|r| malformed(&format!("subnet prefix: {r}")))?,
            }),
            ("router", Some(id)) => Ok(Identity::Router {
                guid: parse_id(id).map_err(|r| malformed(&format!("router GUID: {r}")))?,
            }),
            (role @ ("worker" | "operator"), Some(name)) => {
                check_worker_name(name).map_err(|e| match e {
                    IdentityError::WorkerName { reason, .. } => {
                        malformed(&format!("{role} name: {reason}"))
                    }
                    other => other,
                })?;
                let name = name.to_string();
                Ok(if role == "worker" {
                    Identity::Worker { name }
                } else {
                    Identity::Operator { name }
                })
            }
            ("agent" | "router", None) => Err(malformed(&format!(
                "expected ibfabric://{role}/0x<16 hex digits>"
            ))),
            ("worker" | "operator", None) => {
                Err(malformed(&format!("expected ibfabric://{role}/<name>")))
            }
            _ => Err(malformed(&format!(
                "unknown role '{role}': expected {FORMS}"
            ))),
        }
    }

    /// Checks what the type cannot: a worker's name. Identities parsed from
    /// URIs are always valid; ones built in code are checked before they
    /// go into a certificate.
    pub fn validate(&self) -> Result<(), IdentityError> {
        match self {
            Identity::Worker { name } | Identity::Operator { name } => check_worker_name(name),
            _ => Ok(()),
        }
    }

    /// A file name stem for this identity's certificate:
    /// `controller`, `agent-0x<prefix>`, `router-0x<guid>`, `worker-<name>`.
    pub fn file_stem(&self) -> String {
        match self {
            Identity::Controller => "controller".to_string(),
            Identity::Agent { prefix } => format!("agent-{prefix:#018x}"),
            Identity::Router { guid } => format!("router-{guid:#018x}"),
            Identity::Worker { name } => format!("worker-{name}"),
            Identity::Operator { name } => format!("operator-{name}"),
        }
    }

    /// The identity of a leaf certificate in DER: exactly one ibfabric URI
    /// among its subject alternative names. Other URIs (another naming
    /// scheme sharing the certificate) are ignored; CA certificates and
    /// certificates with no or several ibfabric URIs are refused.
    pub fn from_cert_der(der: &[u8]) -> Result<Identity, IdentityError> {
        let (rest, cert) = X509Certificate::from_der(der)
            .map_err(|e| IdentityError::Certificate(e.to_string()))?;
        if !rest.is_empty() {
            return Err(IdentityError::Certificate(format!(
                "{} bytes after the certificate",
                rest.len()
            )));
        }
        if cert.is_ca() {
            return Err(IdentityError::CaCertificate);
        }
        // RFC 5280 4.2.1.3: a key whose usage is restricted and leaves out
        // digitalSignature may not sign a TLS handshake.
        match cert.key_usage() {
            Ok(Some(ku)) if !ku.value.digital_signature() => {
                return Err(IdentityError::Certificate(
                    "its key usage leaves out digitalSignature: the key may not sign a TLS \
                     handshake (RFC 5280 4.2.1.3)"
                        .into(),
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(IdentityError::Certificate(format!("key usage: {e}"))),
        }
        let san = cert
            .subject_alternative_name()
            .map_err(|e| IdentityError::Certificate(format!("subject alternative names: {e}")))?;
        let uris: Vec<&str> = san
            .iter()
            .flat_map(|ext| ext.value.general_names.iter())
            .filter_map(|name| match name {
                GeneralName::URI(uri) if is_ibfabric_uri(uri) => Some(*uri),
                _ => None,
            })
            .collect();
        match uris.as_slice() {
            [] => Err(IdentityError::Missing),
            [uri] => Identity::parse_uri(uri),
            several => Err(IdentityError::Several(
                several.iter().map(|u| u.to_string()).collect(),
            )),
        }
    }

    /// The DNS names and IP addresses among the subject alternative names
    /// of the first certificate in a PEM text (what a renewal keeps).
    pub fn names_pem(pem: &[u8]) -> Result<(Vec<String>, Vec<std::net::IpAddr>), IdentityError> {
        let der = crate::pem::first_cert(pem).map_err(IdentityError::Certificate)?;
        let (_, cert) = X509Certificate::from_der(&der)
            .map_err(|e| IdentityError::Certificate(e.to_string()))?;
        let san = cert
            .subject_alternative_name()
            .map_err(|e| IdentityError::Certificate(format!("subject alternative names: {e}")))?;
        let (mut dns, mut ips) = (Vec::new(), Vec::new());
        for name in san.iter().flat_map(|ext| ext.value.general_names.iter()) {
            match name {
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => ips.push(std::net::IpAddr::from(
                        <[u8; 4]>::try_from(*b).unwrap_or_default(),
                    )),
                    16 => ips.push(std::net::IpAddr::from(
                        <[u8; 16]>::try_from(*b).unwrap_or_default(),
                    )),
                    _ => {}
                },
                _ => {}
            }
        }
        Ok((dns, ips))
    }

    /// When the first certificate in a PEM text stops being valid, in
    /// unix seconds (its `notAfter`).
    pub fn not_after_pem(pem: &[u8]) -> Result<i64, IdentityError> {
        let der = crate::pem::first_cert(pem).map_err(IdentityError::Certificate)?;
        let (_, cert) = X509Certificate::from_der(&der)
            .map_err(|e| IdentityError::Certificate(e.to_string()))?;
        Ok(cert.validity().not_after.timestamp())
    }

    /// The identity of the first certificate in a PEM text (the leaf of a
    /// chain).
    pub fn from_cert_pem(pem: &[u8]) -> Result<Identity, IdentityError> {
        let der = crate::pem::first_cert(pem).map_err(IdentityError::Certificate)?;
        Identity::from_cert_der(&der)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Controller => write!(f, "{PREFIX}controller"),
            Identity::Agent { prefix } => write!(f, "{PREFIX}agent/{prefix:#018x}"),
            Identity::Router { guid } => write!(f, "{PREFIX}router/{guid:#018x}"),
            Identity::Worker { name } => write!(f, "{PREFIX}worker/{name}"),
            Identity::Operator { name } => write!(f, "{PREFIX}operator/{name}"),
        }
    }
}

impl FromStr for Identity {
    type Err = IdentityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Identity::parse_uri(s)
    }
}

/// URI schemes are case-insensitive, so `IBFABRIC:` counts as ours when
/// counting a certificate's identities, even though only the lowercase
/// spelling parses.
fn is_ibfabric_uri(uri: &str) -> bool {
    uri.split_once(':')
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case(SCHEME))
}

/// `0x` and exactly 16 lowercase hex digits.
fn parse_id(s: &str) -> Result<u64, String> {
    let expected = "expected 0x and 16 lowercase hex digits, like 0xfec0000000000001";
    let digits = s
        .strip_prefix("0x")
        .ok_or_else(|| format!("'{s}': {expected}"))?;
    if digits.len() != 16
        || !digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("'{s}': {expected}"));
    }
    u64::from_str_radix(digits, 16).map_err(|e| format!("'{s}': {e}"))
}

/// Worker names are 1 to 64 characters of ASCII letters, digits, `-`, `_`
/// and `.`, starting with a letter or digit: safe in a URI path and in a
/// file name without escaping.
fn check_worker_name(name: &str) -> Result<(), IdentityError> {
    let bad = |reason: &str| IdentityError::WorkerName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    if name.len() > MAX_WORKER_NAME {
        return Err(bad(&format!(
            "it is longer than {MAX_WORKER_NAME} characters"
        )));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(bad("it must start with a letter or a digit"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(bad(&format!(
            "'{c}' is not allowed (letters, digits, '-', '_' and '.' only)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed leaf for `uri` with these key usages.
    fn leaf(uri: &str, usages: Vec<rcgen::KeyUsagePurpose>) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::default();
        p.subject_alt_names
            .push(rcgen::SanType::URI(uri.try_into().expect("ia5")));
        p.is_ca = rcgen::IsCa::ExplicitNoCa;
        p.key_usages = usages;
        let key = rcgen::KeyPair::generate().expect("key");
        p.self_signed(&key).expect("cert").der().to_vec()
    }

    #[test]
    fn not_after_is_read_from_a_pem_certificate() {
        let ca = crate::generate_ca("t").expect("ca");
        let at = Identity::not_after_pem(ca.cert_pem.as_bytes()).expect("reads");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        assert!(at > now + 300 * 86_400, "{at} vs {now}");
        assert!(Identity::not_after_pem(b"junk").is_err());
    }

    #[test]
    fn a_key_that_may_not_sign_names_no_identity() {
        use rcgen::KeyUsagePurpose as K;
        let uri = "ibfabric://worker/ops";
        let ok = leaf(uri, vec![K::DigitalSignature]);
        assert!(Identity::from_cert_der(&ok).is_ok());
        assert!(
            Identity::from_cert_der(&leaf(uri, Vec::new())).is_ok(),
            "unrestricted"
        );
        let e = Identity::from_cert_der(&leaf(uri, vec![K::KeyEncipherment])).expect_err("refused");
        assert!(e.to_string().contains("digitalSignature"), "{e}");
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(Identity::Controller.to_uri(), "ibfabric://controller");
        assert_eq!(
            Identity::Agent {
                prefix: 0xfec0000000000001
            }
            .to_uri(),
            "ibfabric://agent/0xfec0000000000001"
        );
        assert_eq!(
            Identity::Router {
                guid: 0x0002c90300000001
            }
            .to_uri(),
            "ibfabric://router/0x0002c90300000001"
        );
        assert_eq!(
            Identity::Agent { prefix: 0 }.file_stem(),
            "agent-0x0000000000000000"
        );
        let op = Identity::Operator {
            name: "alice".into(),
        };
        assert_eq!(op.to_uri(), "ibfabric://operator/alice");
        assert_eq!(
            Identity::parse_uri("ibfabric://operator/alice").ok(),
            Some(op.clone())
        );
        assert_eq!(op.role(), Role::Operator);
        assert_eq!(op.file_stem(), "operator-alice");
        for bad in [
            "ibfabric://operator",
            "ibfabric://operator/",
            "ibfabric://operator/a b",
        ] {
            assert!(Identity::parse_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn non_canonical_spellings_are_refused() {
        for uri in [
            "ibfabric://agent/0xFEC0000000000001",
            "ibfabric://agent/fec0000000000001",
            "ibfabric://agent/0xfec0000000001",
            "ibfabric://agent/0x0fec0000000000001",
            "ibfabric://agent/",
            "ibfabric://agent",
            "IBFABRIC://controller",
            "ibfabric://controller/",
            "ibfabric://Controller",
            "ibfabric://worker/",
            "ibfabric://worker/a/b",
            "ibfabric://worker/-x",
            "ibfabric://router/0x+002c90300000001",
        ] {
            assert!(
                matches!(
                    Identity::parse_uri(uri),
                    Err(IdentityError::Malformed { .. })
                ),
                "{uri}: {:?}",
                Identity::parse_uri(uri)
            );
        }
        assert!(matches!(
            Identity::parse_uri("spiffe://example.org/agent"),
            Err(IdentityError::NotIbfabric { .. })
        ));
    }

    #[test]
    fn worker_names() {
        assert!(
            Identity::Worker {
                name: "w-01.rack_3".into()
            }
            .validate()
            .is_ok()
        );
        for name in ["", ".hidden", "a b", "ü", &"x".repeat(65)] {
            assert!(
                Identity::Worker { name: name.into() }.validate().is_err(),
                "{name}"
            );
        }
    }
}
