//! Who sent a request, and whether it may do what it asks.
//!
//! A server configured for TLS requires client certificates at the
//! handshake, so every request it sees carries a verified chain; these
//! functions read the identity from the leaf and check it against what the
//! request claims (the subnet prefix an agent registers, the GUID a router
//! watches for). A plaintext server has no identity to check: [`Peer`]
//! makes that case explicit instead of passing it off as an identity.

use crate::identity::{Identity, Role};
use std::fmt;
use tonic::transport::CertificateDer;
use tonic::{Request, Status};

/// The identity of the client of `request`, from the leaf certificate it
/// presented during the TLS handshake.
///
/// `unauthenticated` when the connection has no client certificate
/// (plaintext, or a server that does not require one); `permission_denied`
/// when the certificate names no valid ibfabric identity.
pub fn peer_identity<T>(request: &Request<T>) -> Result<Identity, Status> {
    let certs = request.peer_certs();
    identity_from_peer_certs(certs.as_deref().map(Vec::as_slice))
}

/// [`peer_identity`] for code that holds the peer's chain rather than the
/// request (interceptors, layers): leaf first, as TLS sends it.
pub fn identity_from_peer_certs(certs: Option<&[CertificateDer<'_>]>) -> Result<Identity, Status> {
    let Some(leaf) = certs.and_then(|c| c.first()) else {
        return Err(Status::unauthenticated(
            "no client certificate: this server requires mutual TLS with a certificate \
             issued by its CA",
        ));
    };
    Identity::from_cert_der(leaf)
        .map_err(|e| Status::permission_denied(format!("client certificate refused: {e}")))
}

/// The identity of the client of `request` if `allowed` admits it;
/// `permission_denied` naming the identity and `claim` otherwise.
///
/// ```
/// # fn check(request: &tonic::Request<()>, claimed: u64) -> Result<(), tonic::Status> {
/// use ibtls::Identity;
/// ibtls::require(
///     request,
///     |id| matches!(id, Identity::Agent { prefix } if *prefix == claimed),
///     format_args!("the agent of subnet {claimed:#018x}"),
/// )?;
/// # Ok(()) }
/// ```
pub fn require<T>(
    request: &Request<T>,
    allowed: impl FnOnce(&Identity) -> bool,
    claim: impl fmt::Display,
) -> Result<Identity, Status> {
    let id = peer_identity(request)?;
    check(&id, allowed, claim)?;
    Ok(id)
}

/// The client of `request` must be exactly `claimed`.
pub fn require_identity<T>(request: &Request<T>, claimed: &Identity) -> Result<Identity, Status> {
    require(request, |id| id == claimed, claimed)
}

/// The client of `request` must have `role` (any subnet, GUID or name).
pub fn require_role<T>(request: &Request<T>, role: Role) -> Result<Identity, Status> {
    require(request, |id| id.role() == role, format_args!("a {role}"))
}

fn check(
    id: &Identity,
    allowed: impl FnOnce(&Identity) -> bool,
    claim: impl fmt::Display,
) -> Result<(), Status> {
    if allowed(id) {
        Ok(())
    } else {
        Err(Status::permission_denied(format!(
            "{id} may not act as {claim}"
        )))
    }
}

/// Whether a server authenticates its peers; [`crate::Transport::mode`]
/// gives it from a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Mutual TLS: every request has a verified client identity.
    Tls,
    /// Plaintext: no request has one.
    Insecure,
}

impl Mode {
    /// The peer of `request`. Under [`Mode::Tls`] a request without a valid
    /// identity is an error; under [`Mode::Insecure`] every request is
    /// [`Peer::Insecure`], whatever it carries.
    pub fn peer<T>(self, request: &Request<T>) -> Result<Peer, Status> {
        match self {
            Mode::Tls => peer_identity(request).map(Peer::Authenticated),
            Mode::Insecure => Ok(Peer::Insecure),
        }
    }
}

/// The client of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Verified by mutual TLS.
    Authenticated(Identity),
    /// Plaintext: the configuration chose not to authenticate, so nothing
    /// is known about the client.
    Insecure,
}

impl Peer {
    pub fn identity(&self) -> Option<&Identity> {
        match self {
            Peer::Authenticated(id) => Some(id),
            Peer::Insecure => None,
        }
    }

    /// `permission_denied` if an authenticated peer is not `allowed`.
    /// An insecure peer passes: its configuration said `insecure = true`,
    /// which gives up authorization along with authentication. Match on
    /// [`Peer`] where an insecure peer must be treated otherwise.
    pub fn authorize(
        &self,
        allowed: impl FnOnce(&Identity) -> bool,
        claim: impl fmt::Display,
    ) -> Result<(), Status> {
        match self {
            Peer::Authenticated(id) => check(id, allowed, claim),
            Peer::Insecure => Ok(()),
        }
    }

    /// [`Peer::authorize`] for exactly `claimed`.
    pub fn authorize_as(&self, claimed: &Identity) -> Result<(), Status> {
        self.authorize(|id| id == claimed, claimed)
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Authenticated(id) => id.fmt(f),
            Peer::Insecure => f.write_str("an unauthenticated peer (insecure = true)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn plaintext_requests_have_no_identity() {
        let req = Request::new(());
        let err = peer_identity(&req).unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated);
        assert_eq!(
            Mode::Tls.peer(&req).unwrap_err().code(),
            Code::Unauthenticated
        );
        assert_eq!(Mode::Insecure.peer(&req).unwrap(), Peer::Insecure);
    }

    #[test]
    fn authorization_names_who_and_what() {
        let a = Identity::Agent { prefix: 0xa };
        let b = Identity::Agent { prefix: 0xb };
        let peer = Peer::Authenticated(a.clone());
        assert!(peer.authorize_as(&a).is_ok());
        let err = peer.authorize_as(&b).unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied);
        assert_eq!(
            err.message(),
            "ibfabric://agent/0x000000000000000a may not act as ibfabric://agent/0x000000000000000b"
        );
        assert!(Peer::Insecure.authorize_as(&b).is_ok());
        assert!(Peer::Insecure.identity().is_none());
    }

    #[test]
    fn garbage_certificates_are_denied() {
        let junk = [CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00])];
        let err = identity_from_peer_certs(Some(&junk)).unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied);
        assert_eq!(
            identity_from_peer_certs(Some(&[])).unwrap_err().code(),
            Code::Unauthenticated
        );
    }
}
