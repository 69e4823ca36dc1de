//! Mutual TLS over loopback TCP with a real tonic server and client (the
//! gRPC health service): who gets in, and what the server learns about them.

use ibtls::{
    CaBundle, Identity, Role, TlsSettings, client_endpoint, client_tls, generate_ca, issue,
    peer_identity, require_identity, server_tls,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Server};
use tonic::{Code, Request, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const PREFIX_A: u64 = 0xfec0_0000_0000_000a;
const PREFIX_B: u64 = 0xfec0_0000_0000_000b;

/// What the server's interceptor saw of each request that reached it.
type Seen = Arc<Mutex<Vec<Result<Identity, Code>>>>;

/// Writes a certificate for `id` from `ca` into `dir`, with `ca_file` as
/// the CA to trust.
fn settings(dir: &Path, ca: &CaBundle, ca_file: &Path, id: &Identity) -> TlsSettings {
    let leaf = issue(ca, id, &["localhost".to_string()], &[LOOPBACK]).expect("issue");
    let stem = id.file_stem();
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}-key.pem"));
    std::fs::write(&cert, leaf.cert_pem).unwrap();
    std::fs::write(&key, leaf.key_pem).unwrap();
    TlsSettings {
        ca: ca_file.to_path_buf(),
        cert,
        key,
    }
}

struct Pki {
    _dir: tempfile::TempDir,
    ca_file: std::path::PathBuf,
    server: TlsSettings,
    agent_a: TlsSettings,
    /// An agent whose certificate comes from another CA (but that trusts
    /// ours, so only the server's check can stop it).
    stranger: TlsSettings,
}

fn pki(server_id: Identity) -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca = generate_ca("ibfabric test CA").unwrap();
    let other = generate_ca("some other CA").unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.cert_pem).unwrap();
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    Pki {
        server: settings(dir.path(), &ca, &ca_file, &server_id),
        agent_a: settings(
            dir.path(),
            &ca,
            &ca_file,
            &Identity::Agent { prefix: PREFIX_A },
        ),
        stranger: {
            let mut s = settings(
                &other_dir,
                &other,
                &ca_file,
                &Identity::Agent { prefix: PREFIX_A },
            );
            s.ca = ca_file.clone();
            s
        },
        ca_file,
        _dir: dir,
    }
}

/// A health server on an ephemeral loopback port. Its interceptor records
/// the peer identity of every request and, when the request claims a
/// subnet prefix (`x-claimed-prefix`), requires the agent of that subnet.
async fn serve(tls: &TlsSettings) -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let interceptor = move |req: Request<()>| -> Result<Request<()>, Status> {
        let id = peer_identity(&req);
        log.lock().unwrap().push(id.clone().map_err(|s| s.code()));
        id?;
        if let Some(claim) = req.metadata().get("x-claimed-prefix") {
            let prefix = claim
                .to_str()
                .ok()
                .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                .ok_or_else(|| Status::invalid_argument("bad x-claimed-prefix"))?;
            require_identity(&req, &Identity::Agent { prefix })?;
        }
        Ok(req)
    };
    let svc = HealthServer::with_interceptor(
        HealthService::from_health_reporter(HealthReporter::new()),
        interceptor,
    );
    let listener = TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::builder()
        .tls_config(server_tls(tls).expect("server TLS config"))
        .expect("TLS accepted by tonic")
        .add_service(svc);
    tokio::spawn(server.serve_with_incoming(TcpListenerStream::new(listener)));
    (addr, seen)
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint::from_shared(format!("https://{addr}")).unwrap()
}

/// One health check; the error, if any, as text (connect or call).
async fn check(ep: Endpoint, claim: Option<u64>) -> Result<(), Status> {
    let channel = ep
        .connect()
        .await
        .map_err(|e| Status::unavailable(format!("connect: {e:?}")))?;
    let mut req = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    if let Some(p) = claim {
        req.metadata_mut().insert(
            "x-claimed-prefix",
            MetadataValue::try_from(format!("{p:#018x}")).unwrap(),
        );
    }
    HealthClient::new(channel).check(req).await.map(|_| ())
}

#[tokio::test]
async fn a_client_from_the_same_ca_gets_in_and_is_known_by_its_identity() {
    let p = pki(Identity::Controller);
    let (addr, seen) = serve(&p.server).await;
    for domain in ["localhost", "127.0.0.1"] {
        let ep = endpoint(addr)
            .tls_config(client_tls(&p.agent_a, domain).unwrap())
            .unwrap();
        check(ep, None).await.expect("health check over mTLS");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            Ok(Identity::Agent { prefix: PREFIX_A }),
            Ok(Identity::Agent { prefix: PREFIX_A })
        ]
    );
}

#[tokio::test]
async fn a_client_from_another_ca_is_refused_at_the_handshake() {
    let p = pki(Identity::Controller);
    let (addr, seen) = serve(&p.server).await;
    // client_tls itself refuses a certificate from another CA than the one
    // configured, so the stranger's config is put together by hand.
    let refused = client_tls(&p.stranger, "localhost")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("was not issued by the CA in"), "{refused}");
    let pem = |path: &Path| std::fs::read(path).unwrap();
    let stranger = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pem(&p.stranger.ca)))
        .identity(tonic::transport::Identity::from_pem(
            pem(&p.stranger.cert),
            pem(&p.stranger.key),
        ))
        .domain_name("localhost");
    let ep = endpoint(addr).tls_config(stranger).unwrap();
    let err = check(ep, None).await.unwrap_err();
    // TLS 1.3 lets the client finish its side of the handshake before the
    // server checks its certificate, so the refusal (the server's alert)
    // surfaces on the first call rather than on connect.
    assert!(format!("{err:?}").contains("UnknownCA"), "{err:?}");
    assert!(seen.lock().unwrap().is_empty(), "no request got through");
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_at_the_handshake() {
    let p = pki(Identity::Controller);
    let (addr, seen) = serve(&p.server).await;
    let ca = std::fs::read(&p.ca_file).unwrap();
    let anonymous = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    let err = check(endpoint(addr).tls_config(anonymous).unwrap(), None)
        .await
        .unwrap_err();
    // TLS 1.3 lets the client finish its side of the handshake before the
    // server checks its certificate, so the refusal (the server's alert)
    // surfaces on the first call rather than on connect.
    assert!(
        format!("{err:?}").contains("CertificateRequired"),
        "{err:?}"
    );
    // Plaintext does not get through either.
    let plain = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    assert!(check(plain, None).await.is_err());
    assert!(seen.lock().unwrap().is_empty(), "no request got through");
}

#[tokio::test]
async fn an_agent_may_not_claim_another_subnet() {
    let p = pki(Identity::Controller);
    let (addr, _seen) = serve(&p.server).await;
    let ep = || {
        endpoint(addr)
            .tls_config(client_tls(&p.agent_a, "localhost").unwrap())
            .unwrap()
    };
    check(ep(), Some(PREFIX_A)).await.expect("its own subnet");
    let err = check(ep(), Some(PREFIX_B)).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert_eq!(
        err.message(),
        "ibfabric://agent/0xfec000000000000a may not act as ibfabric://agent/0xfec000000000000b"
    );
}

#[tokio::test]
async fn a_client_can_require_the_servers_role() {
    // The server holds a valid certificate from the right CA, for the right
    // name, but it is an agent's.
    let p = pki(Identity::Agent { prefix: PREFIX_B });
    let (addr, seen) = serve(&p.server).await;
    let ep = client_endpoint(endpoint(addr), &p.agent_a, "localhost", Role::Agent).unwrap();
    check(ep, None).await.expect("an agent, as required");
    let ep = client_endpoint(endpoint(addr), &p.agent_a, "localhost", Role::Controller).unwrap();
    let err = check(ep, None).await.unwrap_err();
    assert!(
        err.message().contains("is not a controller"),
        "the cause reaches the caller: {err:?}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "only the first call got through"
    );
}

#[tokio::test]
async fn the_server_name_is_checked() {
    let p = pki(Identity::Controller);
    let (addr, _seen) = serve(&p.server).await;
    let ep = endpoint(addr)
        .tls_config(client_tls(&p.agent_a, "controller.example.org").unwrap())
        .unwrap();
    assert!(check(ep, None).await.is_err());
}
