//! What every service's listener carries besides its own service: gRPC
//! health (`grpc.health.v1.Health`), server reflection (so `grpcurl` lists
//! and calls the services without the .proto files), and a count of the
//! requests it refused, by RPC and code, for the metrics endpoint.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The encoded descriptors of `ibfabric.v1`.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("ibfabric_descriptor");

/// The counter [`Guard`] raises, labelled `rpc` and `code`.
pub const REFUSED_REQUESTS: &str = "ibfabric_requests_refused_total";

/// Server reflection over `ibfabric.v1` and the health service.
pub fn reflection() -> Result<
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::Error,
> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
}

/// The health service, reporting `service` (the full gRPC name, such as
/// `ibfabric.v1.Controller`) and the server as a whole as serving. The
/// reporter lets the caller say otherwise later.
pub async fn health(
    service: &str,
) -> (
    tonic_health::server::HealthReporter,
    tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health + use<>,
    >,
) {
    let (reporter, server) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(service, tonic_health::ServingStatus::Serving)
        .await;
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    (reporter, server)
}

/// The routes every listener starts from: [`health`] for `service` and
/// [`reflection`], on the server [`crate::client::server`] built. The
/// caller adds its own service and serves; keep the reporter to change
/// the health later.
pub async fn routes(
    server: &mut crate::client::Server,
    service: &str,
) -> Result<
    (
        tonic_health::server::HealthReporter,
        tonic::transport::server::Router<crate::client::Layers>,
    ),
    crate::client::ServeError,
> {
    let (reporter, health) = health(service).await;
    let router = server.add_service(health).add_service(reflection()?);
    Ok((reporter, router))
}

/// Serves `routes` on `listener` until `shutdown` turns true; with `tls`
/// (what [`crate::client::server`] made of the transport), every
/// connection is a mutual TLS one, and SIGHUP reloads its files.
pub async fn serve(
    routes: tonic::transport::server::Router<crate::client::Layers>,
    listener: tokio::net::TcpListener,
    tls: Option<std::sync::Arc<ibtls::ReloadableServer>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    use tokio_stream::StreamExt;
    if let Some(tls) = tls {
        let admission = crate::listen::Admission::standard("grpc");
        // The accept and SIGHUP tasks end with this future, also when it
        // is dropped rather than run to its end.
        let (incoming, _tasks) = crate::tls_listen::incoming(listener, admission, tls);
        return routes
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = shutdown.wait_for(|s| *s).await;
            })
            .await;
    }
    // The server's own `tcp_nodelay` applies only to listeners it binds;
    // without it a reply's last segment can wait for the peer's delayed
    // ACK (40 ms on Linux): a worker's rounds took 50 ms instead of 8.
    // Admitted under per-client and total bounds before the TLS handshake
    // (`crate::listen`): half-open connections cannot take every
    // descriptor. A refused connection is dropped (closed) here.
    let admission = crate::listen::Admission::standard("grpc");
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).filter_map(move |s| {
        let s = match s {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = s.set_nodelay(true) {
            return Some(Err(e));
        }
        admission.admit(s).map(Ok::<_, std::io::Error>)
    });
    routes
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = shutdown.wait_for(|s| *s).await;
        })
        .await
}

/// The layer every listener's services sit behind. It refuses, before the
/// request body is read or decoded, a call the caller's role may never
/// make: the method is in the headers and the caller's certificate came
/// with the handshake, so a router's certificate sending a 64 MiB `Report`
/// costs nothing past the headers (the services still check the finer
/// rules, which subnet, which GUID, on the decoded request; on a plaintext
/// transport there is no role to check). And it counts every refusal, its
/// own and the services': responses whose gRPC status (sent in the
/// headers, as every refusal at the start of a call is) is
/// `UNAUTHENTICATED` or `PERMISSION_DENIED`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Guard;

impl<S> tower::Layer<S> for Guard {
    type Service = Guarded<S>;
    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded(inner)
    }
}

#[derive(Clone, Debug)]
pub struct Guarded<S>(S);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The roles that may call `path`, for the methods not every role may.
pub fn roles_for(path: &str) -> Option<&'static [ibtls::Role]> {
    use ibtls::Role::{Agent, Controller, Worker};
    Some(match path {
        "/ibfabric.v1.Controller/Register" | "/ibfabric.v1.Controller/Report" => &[Agent],
        "/ibfabric.v1.Controller/Forget" => &[Controller],
        "/ibfabric.v1.RouterFw/Install" => &[Controller],
        "/ibfabric.v1.Worker/Load"
        | "/ibfabric.v1.Worker/VerifyPart"
        | "/ibfabric.v1.Worker/RoutePart"
        | "/ibfabric.v1.Worker/Round" => &[Controller, Worker, Agent],
        _ => return None,
    })
}

/// The refusal of a call its caller's role may never make (None: let the
/// service decide), with the caller's address for the log.
fn refused_on_headers<B0>(
    req: &http::Request<B0>,
) -> Option<(tonic::Status, Option<std::net::SocketAddr>)> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let path = req.uri().path();
    let roles = roles_for(path)?;
    let info = req.extensions().get::<TlsConnectInfo<TcpConnectInfo>>()?;
    let certs = info.peer_certs();
    let status = match ibtls::identity_from_peer_certs(certs.as_deref().map(Vec::as_slice)) {
        Ok(id) if roles.contains(&id.role()) => return None,
        Ok(id) => tonic::Status::permission_denied(format!("{} may not call {path}", id.to_uri())),
        Err(s) => s,
    };
    Some((status, info.get_ref().remote_addr()))
}

fn count_refusal(rpc: String, h: &http::HeaderMap) {
    if let Some(code) = refusal(h) {
        metrics::counter!(REFUSED_REQUESTS, "rpc" => rpc, "code" => code).increment(1);
    }
}

impl<S, B0, B> tower::Service<http::Request<B0>> for Guarded<S>
where
    S: tower::Service<http::Request<B0>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: Default + Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B0>) -> Self::Future {
        let rpc = req.uri().path().to_string();
        if let Some((s, who)) = refused_on_headers(&req) {
            // The operator wants to know that something tried.
            let msg = s.message().to_string();
            rate_limited(|| tracing::warn!(client = ?who, "call refused: {msg}"));
            let resp: http::Response<B> = s.into_http();
            count_refusal(rpc, resp.headers());
            return Box::pin(async move { Ok(resp) });
        }
        let fut = self.0.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            count_refusal(rpc, resp.headers());
            Ok(resp)
        })
    }
}

/// Runs `log` at most once every ten seconds (per process): refusals are
/// worth a WARN, a flood of them is not worth a full disk.
pub fn rate_limited(log: impl FnOnce()) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST.load(Ordering::Relaxed);
    if now >= last + 10
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        log();
    }
}

fn refusal(h: &http::HeaderMap) -> Option<&'static str> {
    match h.get("grpc-status")?.as_bytes() {
        b"16" => Some("unauthenticated"),
        b"7" => Some("permission_denied"),
        _ => None,
    }
}

/// Sets the gauges that describe a controller from its state: leadership,
/// term, subnets and routers (live, versions published and held), the
/// store. Sampled, so the figures are those of the last call.
pub fn record_controller(s: &crate::v1::ControllerState) {
    use metrics::{counter, gauge};
    gauge!("ibfabric_controller_leader").set(if s.leader { 1.0 } else { 0.0 });
    gauge!("ibfabric_controller_term").set(s.term as f64);
    gauge!("ibfabric_controller_refused").set(if s.refused.is_empty() { 0.0 } else { 1.0 });
    gauge!("ibfabric_subnets").set(s.subnets.len() as f64);
    gauge!("ibfabric_subnets_live").set(s.subnets.iter().filter(|x| x.live).count() as f64);
    gauge!("ibfabric_routers").set(s.routers.len() as f64);
    for x in &s.subnets {
        let id = x.agent_id.clone();
        gauge!("ibfabric_subnet_live", "subnet" => id.clone()).set(if x.live { 1.0 } else { 0.0 });
        gauge!("ibfabric_subnet_generation", "subnet" => id.clone()).set(x.generation as f64);
        gauge!("ibfabric_subnet_mapping_version", "subnet" => id.clone())
            .set(x.mapping_version as f64);
        gauge!("ibfabric_subnet_mapping_held_version", "subnet" => id.clone())
            .set(x.held_mapping_version as f64);
        // Versions are above 2^53 and lose their low bits as floats: the
        // comparison is made here, exactly, for the alert rules.
        let behind = x.mapping_version != 0 && x.held_mapping_version != x.mapping_version;
        gauge!("ibfabric_subnet_mapping_behind", "subnet" => id.clone()).set(if behind {
            1.0
        } else {
            0.0
        });
        gauge!("ibfabric_subnet_left_out", "subnet" => id.clone()).set(if x.left_out.is_empty() {
            0.0
        } else {
            1.0
        });
        if let Some(r) = &x.routing {
            gauge!("ibfabric_subnet_route_seconds", "subnet" => id).set(r.route_seconds);
        }
    }
    for r in &s.routers {
        let g = format!("{:#018x}", r.router_guid);
        gauge!("ibfabric_router_egress_version", "router" => g.clone())
            .set(r.egress_version as f64);
        gauge!("ibfabric_router_held_version", "router" => g.clone()).set(r.held_version as f64);
        let behind = r.egress_version != 0 && r.held_version != r.egress_version;
        gauge!("ibfabric_router_egress_behind", "router" => g).set(if behind { 1.0 } else { 0.0 });
    }
    if let Some(st) = &s.store {
        gauge!("ibfabric_store_ok").set(if st.ok { 1.0 } else { 0.0 });
        gauge!("ibfabric_store_pending").set(if st.pending { 1.0 } else { 0.0 });
        counter!("ibfabric_store_errors_total").absolute(st.failures);
    }
}

/// Sets a router's gauges from its state.
pub fn record_router(s: &crate::v1::RouterState) {
    use metrics::{counter, gauge};
    gauge!("ibfabric_router_version").set(s.version as f64);
    gauge!("ibfabric_router_rules").set(f64::from(s.rules));
    counter!("ibfabric_router_installs_total").absolute(s.installs_total);
    counter!("ibfabric_router_rejected_total").absolute(s.rejected);
}

/// Something a controller's state shows behind: a subnet not live, an
/// agent or router holding an older version than the one published, the
/// store failing, routes refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lag {
    /// `subnet <agent id>`, `router <guid>`, `store` or `routes`.
    pub what: String,
    pub why: String,
}

/// What lags in `s` (the leader's state); empty when all is in step.
pub fn lagging(s: &crate::v1::ControllerState) -> Vec<Lag> {
    let mut out = Vec::new();
    for x in &s.subnets {
        let what = format!("subnet {}", x.agent_id);
        if !x.live {
            out.push(Lag {
                what: what.clone(),
                why: "not live: no report within its lease".into(),
            });
        }
        if !x.left_out.is_empty() {
            out.push(Lag {
                what: format!("{what} ({:#018x})", x.subnet_prefix),
                why: format!("left out of the routes: {}", x.left_out),
            });
        }
        if x.mapping_version != 0 && x.held_mapping_version != x.mapping_version {
            out.push(Lag {
                what,
                why: format!(
                    "holds mapping {}, published {}",
                    x.held_mapping_version, x.mapping_version
                ),
            });
        }
    }
    for r in &s.routers {
        if r.egress_version != 0 && r.held_version != r.egress_version {
            out.push(Lag {
                what: format!("router {:#018x}", r.router_guid),
                why: format!(
                    "holds egress tables {}, published {}",
                    r.held_version, r.egress_version
                ),
            });
        }
    }
    if let Some(st) = &s.store {
        if !st.ok {
            out.push(Lag {
                what: "store".into(),
                why: format!("last operation failed: {}", st.last_error),
            });
        }
        if st.pending {
            out.push(Lag {
                what: "store".into(),
                why: "computed routes not yet written (retried)".into(),
            });
        }
    }
    if !s.refused.is_empty() {
        out.push(Lag {
            what: "routes".into(),
            why: format!(
                "last routes refused, the tables in force stay: {}",
                s.refused
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_by_their_grpc_status() {
        let mut h = http::HeaderMap::new();
        assert_eq!(refusal(&h), None);
        h.insert("grpc-status", http::HeaderValue::from_static("0"));
        assert_eq!(refusal(&h), None);
        h.insert("grpc-status", http::HeaderValue::from_static("7"));
        assert_eq!(refusal(&h), Some("permission_denied"));
        h.insert("grpc-status", http::HeaderValue::from_static("16"));
        assert_eq!(refusal(&h), Some("unauthenticated"));
    }

    #[test]
    fn the_descriptor_set_names_the_services() {
        let text = String::from_utf8_lossy(FILE_DESCRIPTOR_SET);
        for s in ["Controller", "RouterFw", "Agent"] {
            assert!(text.contains(s), "{s}");
        }
    }

    #[test]
    fn lagging_names_what_is_behind() {
        use crate::v1;
        let mut s = v1::ControllerState {
            leader: true,
            subnets: vec![v1::SubnetState {
                agent_id: "a".into(),
                live: true,
                mapping_version: 5,
                held_mapping_version: 5,
                ..Default::default()
            }],
            routers: vec![v1::RouterInfo {
                router_guid: 0x40,
                egress_version: 7,
                held_version: 7,
                ..Default::default()
            }],
            store: Some(v1::StoreHealth {
                ok: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(lagging(&s), []);
        s.subnets[0].held_mapping_version = 4;
        s.routers[0].held_version = 6;
        s.subnets[0].live = false;
        let l = lagging(&s);
        let whats: Vec<&str> = l.iter().map(|x| x.what.as_str()).collect();
        assert_eq!(whats, ["subnet a", "subnet a", "router 0x0000000000000040"]);
        assert!(l[1].why.contains("holds mapping 4, published 5"));
    }
}
