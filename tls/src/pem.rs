//! PEM sections, with error text fit for "file: cause" messages.

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Every `CERTIFICATE` section, in file order; at least one.
pub(crate) fn certs(text: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no PEM CERTIFICATE section".to_string());
    }
    Ok(certs)
}

pub(crate) fn first_cert(text: &[u8]) -> Result<CertificateDer<'static>, String> {
    certs(text)?
        .into_iter()
        .next()
        .ok_or_else(|| "no PEM CERTIFICATE section".to_string())
}

/// The private key (PKCS#8, SEC1 or PKCS#1).
pub(crate) fn private_key(text: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(text).map_err(|e| match e {
        pem::Error::NoItemsFound => "no PEM PRIVATE KEY section".to_string(),
        e => format!("bad PEM: {e}"),
    })
}
