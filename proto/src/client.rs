//! How every role dials another: explicit message bounds, HTTP/2
//! keepalive (a frozen or partitioned peer is noticed within seconds, not
//! when TCP gives up) and deadlines on unary calls.

use crate::v1::controller_client::ControllerClient;
use ibtls::{Role, Transport};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// Why a connection to a peer could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{addr}: {source}")]
    Transport {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{addr}: {source}")]
    Tls {
        addr: String,
        #[source]
        source: ibtls::TlsError,
    },
    #[error("{0}: not a URL with a host")]
    Address(String),
    #[error("{0}: no connection within {CONNECT_TIMEOUT:?} (a frozen or unreachable peer)")]
    Timeout(String),
}

/// Largest message either side of a link encodes or decodes.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// Deadline of a unary call.
pub const UNARY_TIMEOUT: Duration = Duration::from_secs(30);
/// Whole connection set-up, TLS handshake included: a frozen peer's
/// kernel still accepts TCP connections, so the TCP connect alone never
/// times out against it.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a leader query waits in all.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 flow-control windows: a worker's round trips carry a few hundred
/// kilobytes each way, which the default 64 KiB window splits into several
/// round trips of window updates.
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 8 << 20;

/// An endpoint with the connection settings every role uses.
pub fn endpoint(addr: &str) -> Result<Endpoint, tonic::transport::Error> {
    Ok(Endpoint::from_shared(addr.to_string())?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .tcp_nodelay(true))
}

/// A controller client over `channel` with the message bounds set.
pub fn controller_client(channel: Channel) -> ControllerClient<Channel> {
    ControllerClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// An endpoint to a peer of role `server` under `transport`: with TLS the
/// client presents its certificate, and checks that the server's
/// certificate comes from the CA, names the host and carries `server`'s
/// role. Addresses may be written `http://`: with TLS they are dialled as
/// `https://`.
pub fn secure_endpoint(
    addr: &str,
    transport: &Transport,
    server: Role,
) -> Result<Endpoint, ConnectError> {
    let bad_addr = || ConnectError::Address(addr.to_string());
    let url = match transport {
        Transport::Tls(_) => match addr.strip_prefix("http://") {
            Some(rest) => format!("https://{rest}"),
            None => addr.to_string(),
        },
        Transport::Insecure => addr.to_string(),
    };
    let e = endpoint(&url).map_err(|source| ConnectError::Transport {
        addr: addr.to_string(),
        source,
    })?;
    match transport {
        Transport::Insecure => Ok(e),
        Transport::Tls(s) => {
            let host = e.uri().host().ok_or_else(bad_addr)?.to_string();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            ibtls::client_endpoint(e, s, host, server).map_err(|source| ConnectError::Tls {
                addr: addr.to_string(),
                source,
            })
        }
    }
}

/// Connects to a peer of role `server`.
pub async fn connect(
    addr: &str,
    transport: &Transport,
    server: Role,
) -> Result<Channel, ConnectError> {
    let e = secure_endpoint(addr, transport, server)?;
    match tokio::time::timeout(CONNECT_TIMEOUT, e.connect()).await {
        Ok(r) => r.map_err(|source| ConnectError::Transport {
            addr: addr.to_string(),
            source,
        }),
        Err(_) => Err(ConnectError::Timeout(addr.to_string())),
    }
}

/// Connects to a controller.
pub async fn controller(
    addr: &str,
    transport: &Transport,
) -> Result<ControllerClient<Channel>, ConnectError> {
    Ok(controller_client(
        connect(addr, transport, Role::Controller).await?,
    ))
}

/// What a client found when it asked the controllers who leads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leaders {
    /// Controllers that said they lead, highest term first (a deposed
    /// leader that has not noticed yet holds a lower term).
    pub leaders: Vec<String>,
    /// Controllers that answered and do not lead (an election may be
    /// under way).
    pub followers: Vec<String>,
    /// Controllers that did not answer in time (down, frozen, cut off).
    pub silent: Vec<String>,
}

/// Asks every controller at once who leads. The answer is ready
/// [`PROBE_GRACE`] after the first controller answered (live controllers
/// on one network answer within milliseconds of each other; a frozen one
/// never answers, and is not waited for), or after [`PROBE_TIMEOUT`] in
/// all.
pub async fn find_leader(controllers: &[String], transport: &Transport) -> Leaders {
    use futures::stream::{FuturesUnordered, StreamExt};
    let mut probes: FuturesUnordered<_> = controllers
        .iter()
        .enumerate()
        .map(|(i, addr)| async move {
            let ask = async {
                let mut c = controller(addr, transport).await.ok()?;
                let mut req = tonic::Request::new(crate::v1::StateRequest {});
                req.set_timeout(PROBE_TIMEOUT);
                c.state(req).await.ok().map(|r| r.into_inner())
            };
            let st = tokio::time::timeout(PROBE_TIMEOUT, ask)
                .await
                .ok()
                .flatten();
            (i, st.map(|s| (s.leader, s.term)))
        })
        .collect();
    let mut answers: Vec<Option<(bool, u64)>> = vec![None; controllers.len()];
    let deadline = tokio::time::sleep(PROBE_TIMEOUT);
    tokio::pin!(deadline);
    let mut grace: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            next = probes.next() => match next {
                Some((i, a)) => {
                    answers[i] = a;
                    if a.is_some() && grace.is_none() {
                        grace = Some(Box::pin(tokio::time::sleep(PROBE_GRACE)));
                    }
                }
                None => break,
            },
            _ = &mut deadline => break,
            _ = async { if let Some(g) = grace.as_mut() { g.await } else { std::future::pending().await } } => break,
        }
    }
    let mut leaders: Vec<(u64, usize)> = Vec::new();
    let mut out = Leaders::default();
    for (i, a) in answers.into_iter().enumerate() {
        match a {
            Some((true, term)) => leaders.push((term, i)),
            Some((false, _)) => out.followers.push(controllers[i].clone()),
            None => out.silent.push(controllers[i].clone()),
        }
    }
    leaders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    out.leaders = leaders
        .into_iter()
        .map(|(_, i)| controllers[i].clone())
        .collect();
    out
}

/// Tells every follower in `found` that the leader is out of reach, when
/// no controller that answered leads and some did not answer: the leader
/// may be cut off from this client while it still holds its term.
pub async fn complain_if_leader_lost(found: &Leaders, transport: &Transport) {
    if !found.leaders.is_empty() || found.followers.is_empty() || found.silent.is_empty() {
        return;
    }
    let calls = found.followers.iter().map(|addr| async move {
        let ask = async {
            let mut c = controller(addr, transport).await.ok()?;
            let mut req = tonic::Request::new(crate::v1::UnreachableRequest {});
            req.set_timeout(PROBE_TIMEOUT);
            c.unreachable(req).await.ok()
        };
        let _ = tokio::time::timeout(PROBE_TIMEOUT, ask).await;
    });
    futures::future::join_all(calls).await;
}

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(3);
/// How often to ask again while the controllers elect a leader.
const ELECTION_POLL: Duration = Duration::from_millis(250);

/// Runs `session` with the leader, round after round, until `shutdown`
/// turns true. Each round asks every controller who leads
/// ([`find_leader`]) and tries only those that say they lead, highest term
/// first (a silent one may be frozen, and would hold the attempt); a
/// session that ran (`Ok`) starts the next round at once, to find whoever
/// leads now. Without a reachable leader the followers are told
/// ([`complain_if_leader_lost`]), and the round is asked again every
/// 250 ms while controllers answer (they are electing one), with a capped
/// exponential backoff while none does.
pub async fn follow_leader<F, Fut, E>(
    controllers: &[String],
    transport: &Transport,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    what: &str,
    mut session: F,
) where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut backoff = BACKOFF_MIN;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let found = tokio::select! {
            f = find_leader(controllers, transport) => f,
            _ = shutdown.changed() => return,
        };
        let mut ran = false;
        for addr in &found.leaders {
            let r = tokio::select! {
                r = session(addr.clone()) => r,
                _ = shutdown.changed() => return,
            };
            match r {
                Ok(()) => {
                    ran = true;
                    break;
                }
                Err(e) => tracing::debug!(controller = %addr, "{what}: {e}"),
            }
        }
        if ran {
            backoff = BACKOFF_MIN;
            continue;
        }
        complain_if_leader_lost(&found, transport).await;
        let electing = !found.followers.is_empty();
        let wait = if electing { ELECTION_POLL } else { backoff };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
        if !electing {
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// How long a leader query waits for other answers once one controller
/// answered: long enough for every live controller on a LAN.
pub const PROBE_GRACE: Duration = Duration::from_millis(150);

/// How long a follower of a push stream waits without any message before
/// it leaves the stream: three heartbeats, or `fallback` before the first
/// heartbeat told the interval.
pub fn silence_bound(interval_ms: Option<u32>, fallback: Duration) -> Duration {
    match interval_ms {
        Some(ms) if ms > 0 => Duration::from_millis(u64::from(ms) * 3),
        _ => fallback,
    }
}

/// Tells a controller which version its receiver holds (`Controller.Held`)
/// from a task of its own: a controller that stopped answering never
/// holds the receiver's loop, and reports go out one at a time, the latest
/// value only, so the controller never sees them out of order. The task
/// ends when this is dropped.
pub struct HeldReporter {
    tx: tokio::sync::watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl HeldReporter {
    pub fn spawn(
        mut client: ControllerClient<Channel>,
        holder: crate::v1::held_request::Holder,
    ) -> Self {
        let (tx, mut rx) = tokio::sync::watch::channel(0u64);
        let task = tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let version = *rx.borrow_and_update();
                let req = crate::v1::HeldRequest {
                    holder: Some(holder),
                    version,
                };
                // A lost answer only costs the controller's view.
                if let Err(s) = client.held(unary(req)).await {
                    tracing::debug!("held: {}", s.message());
                }
            }
        });
        Self { tx, task }
    }

    /// The receiver now holds `version`.
    pub fn held(&self, version: u64) {
        self.tx.send_replace(version);
    }
}

impl Drop for HeldReporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A unary request with its deadline.
pub fn unary<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(UNARY_TIMEOUT);
    r
}

/// HTTP/2 streams one connection may hold open: far above what a client
/// of the control plane or a coordinator opens (a few pushes, a part per
/// worker slot).
pub const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// A server with the settings every role's listener uses: unary
/// deadlines, a bound on requests in flight per connection, and HTTP/2
/// keepalive so dead clients free their streams.
/// With TLS, every client must present a certificate from the CA.
/// Requests refused (unauthenticated, permission denied) are counted
/// ([`crate::ops::REFUSED_REQUESTS`]).
/// The TLS files are read and checked here; [`crate::ops::serve`] takes
/// what is returned beside the server and does the handshakes, so that
/// SIGHUP can swap the files for new connections.
pub fn server(
    transport: &Transport,
    timeout: Duration,
    concurrency_per_connection: usize,
) -> Result<(Server, Option<std::sync::Arc<ibtls::ReloadableServer>>), ServeError> {
    let tls = match transport {
        Transport::Insecure => None,
        Transport::Tls(s) => Some(std::sync::Arc::new(ibtls::ReloadableServer::new(s)?)),
    };
    let b = tonic::transport::Server::builder();
    let server = b
        .timeout(timeout)
        .concurrency_limit_per_connection(concurrency_per_connection)
        // Streams stay open after their call returned its headers (health
        // watches, pushes): bounded per connection, and connections per
        // client by `crate::listen`.
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .tcp_nodelay(true)
        .layer(crate::ops::Guard);
    Ok((server, tls))
}

/// The layers of [`server`]: [`crate::ops::Guard`].
pub type Layers = tower::layer::util::Stack<crate::ops::Guard, tower::layer::util::Identity>;

/// The server [`server`] builds.
pub type Server = tonic::transport::Server<Layers>;

/// Why a listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Tls(#[from] ibtls::TlsError),
    #[error(transparent)]
    Transport(#[from] tonic::transport::Error),
    #[error("server reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the status page over HTTPS needs the service's TLS (status_listen without [tls])")]
    StatusNeedsTls,
}
