//! A private CA for one ibfabric cluster and the leaf certificates it
//! issues: ECDSA P-256, the CA valid for 10 years, leaves for 1 year, each
//! leaf carrying its identity URI.

use crate::identity::{Identity, IdentityError};
use crate::pem;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use thiserror::Error;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// How long a CA certificate is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
/// How long a leaf certificate is valid.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// Certificates start to be valid this long before they were made, so a
/// peer whose clock is a little behind accepts them at once.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// A CA certificate and its private key, in PEM.
#[derive(Clone)]
pub struct CaBundle {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// A leaf certificate and its private key, in PEM.
#[derive(Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// Why a CA could not be made, loaded or used.
#[derive(Debug, Error)]
pub enum CertError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("CA certificate: {0}")]
    CaCert(String),
    #[error("CA private key: {0}")]
    CaKey(String),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("'{name}' is not a valid DNS name: {reason}")]
    DnsName { name: String, reason: String },
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
}

fn validity(params: &mut CertificateParams, valid_for: Duration) {
    let now = SystemTime::now();
    params.not_before = now.checked_sub(BACKDATE).unwrap_or(now).into();
    params.not_after = now.checked_add(valid_for).unwrap_or(now).into();
}

/// A new self-signed CA named `common_name`. It may sign leaf
/// certificates only (path length 0).
pub fn generate_ca(common_name: &str) -> Result<CaBundle, CertError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, CA_VALIDITY);
    let cert = params.self_signed(&key)?;
    Ok(CaBundle {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

impl CaBundle {
    /// A CA from PEM texts, checked: the certificate is a CA and the key is
    /// its key.
    pub fn from_pem(cert_pem: String, key_pem: String) -> Result<CaBundle, CertError> {
        let ca = CaBundle { cert_pem, key_pem };
        ca.issuer()?;
        Ok(ca)
    }

    /// [`CaBundle::from_pem`] from files.
    pub fn load(cert: &Path, key: &Path) -> Result<CaBundle, CertError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| CertError::Read {
                path: path.to_path_buf(),
                source,
            })
        };
        CaBundle::from_pem(read(cert)?, read(key)?)
    }

    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, CertError> {
        let der = pem::first_cert(self.cert_pem.as_bytes()).map_err(CertError::CaCert)?;
        let (_, x509) = X509Certificate::from_der(&der)
            .map_err(|e| CertError::CaCert(format!("not a parsable X.509 certificate: {e}")))?;
        if !x509.is_ca() {
            return Err(CertError::CaCert(
                "not a CA certificate (its basic constraints do not allow issuing certificates)"
                    .into(),
            ));
        }
        let key = KeyPair::from_pem(&self.key_pem)
            .map_err(|e| CertError::CaKey(format!("not a usable private key: {e}")))?;
        if key.public_key_raw() != x509.public_key().subject_public_key.data.as_ref() {
            return Err(CertError::CaKey(
                "does not belong to the CA certificate".into(),
            ));
        }
        Issuer::from_ca_cert_der(&der, key)
            .map_err(|e| CertError::CaCert(format!("cannot sign with it: {e}")))
    }
}

/// A leaf certificate for `identity`, signed by `ca`, with a new key.
///
/// The identity URI is the only ibfabric name in it; `dns_names` and
/// `ip_addrs` are the names clients reach a server by (a server on
/// loopback needs `localhost` and `127.0.0.1`). Every certificate may act
/// as TLS client and server: agents and routers both serve and call.
pub fn issue(
    ca: &CaBundle,
    identity: &Identity,
    dns_names: &[String],
    ip_addrs: &[IpAddr],
) -> Result<IssuedCert, CertError> {
    identity.validate()?;
    let issuer = ca.issuer()?;
    let uri = identity.to_uri();

    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, uri.as_str());
    params.distinguished_name = dn;
    params
        .subject_alt_names
        .push(SanType::URI(uri.as_str().try_into()?));
    for name in dns_names {
        rustls::pki_types::DnsName::try_from(name.as_str()).map_err(|e| CertError::DnsName {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        params
            .subject_alt_names
            .push(SanType::DnsName(name.as_str().try_into()?));
    }
    params
        .subject_alt_names
        .extend(ip_addrs.iter().map(|ip| SanType::IpAddress(*ip)));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, LEAF_VALIDITY);

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(IssuedCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    #[test]
    fn leaf_carries_its_identity_and_names() {
        let ca = generate_ca("test CA").unwrap();
        let id = Identity::Router {
            guid: 0x0002c90300000001,
        };
        let leaf = issue(
            &ca,
            &id,
            &["localhost".into()],
            &["127.0.0.1".parse().unwrap()],
        )
        .unwrap();
        assert_eq!(Identity::from_cert_pem(leaf.cert_pem.as_bytes()), Ok(id));
        assert_eq!(
            Identity::from_cert_pem(ca.cert_pem.as_bytes()),
            Err(IdentityError::CaCertificate)
        );
        let der = pem::first_cert(leaf.cert_pem.as_bytes()).unwrap();
        let (_, x) = X509Certificate::from_der(&der).unwrap();
        let days = (x.validity().not_after.timestamp() - x.validity().not_before.timestamp())
            / DAY.as_secs() as i64;
        assert_eq!(days, 365);
    }

    #[test]
    fn a_ca_needs_its_own_key() {
        let a = generate_ca("a").unwrap();
        let b = generate_ca("b").unwrap();
        let err = CaBundle::from_pem(a.cert_pem.clone(), b.key_pem.clone()).unwrap_err();
        assert!(matches!(err, CertError::CaKey(_)), "{err}");
        let leaf = issue(&a, &Identity::Controller, &[], &[]).unwrap();
        let err = CaBundle::from_pem(leaf.cert_pem, leaf.key_pem).unwrap_err();
        assert!(matches!(err, CertError::CaCert(_)), "{err}");
        assert!(matches!(
            issue(&a, &Identity::Worker { name: "a b".into() }, &[], &[]),
            Err(CertError::Identity(_))
        ));
        assert!(matches!(
            issue(&a, &Identity::Controller, &["bad name!".into()], &[]),
            Err(CertError::DnsName { .. })
        ));
    }
}
