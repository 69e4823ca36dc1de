//! Mutual TLS for the ibfabric services.
//!
//! Every gRPC link between controller, agents, routers and workers runs
//! mutual TLS with certificates from one private CA, unless a
//! configuration says `insecure = true`. A certificate names its holder's
//! role and, where a role has many holders, which one, as a subject
//! alternative name URI ([`Identity`]): `ibfabric://controller`,
//! `ibfabric://agent/0x<subnet prefix>`, `ibfabric://router/0x<node GUID>`,
//! `ibfabric://worker/<name>`. Servers read the client's identity from each
//! request ([`peer_identity`], [`require`]) and check it against what the
//! request claims to be.
//!
//! - [`config`]: the `[tls]` section and the TLS-or-insecure rule ([`Transport`])
//! - [`transport`]: tonic server and client TLS configurations from it
//! - [`peer`]: the client identity of a request, and authorization checks
//! - [`issue`]: a CA and the leaf certificates it issues

pub mod config;
pub mod identity;
pub mod issue;
pub mod peer;
mod pem;
pub mod reload;
pub mod transport;

pub use config::{TlsSettings, Transport, TransportError, config_dir};
pub use identity::{Identity, IdentityError, Role};
pub use issue::{CaBundle, CertError, IssuedCert, generate_ca, issue};
pub use peer::{
    Mode, Peer, identity_from_peer_certs, peer_identity, require, require_identity, require_role,
};
pub use reload::{CertState, ReloadableServer, not_after, peer_state};
pub use transport::{TlsError, client_endpoint, client_tls, server_tls};
