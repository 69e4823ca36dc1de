//! The `Controller` gRPC service over [`Controller`].

use crate::{ControlError, Controller, Published};
use proto::v1;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// Bounds of the gRPC side, set explicitly on both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Largest message decoded or encoded, in bytes.
    pub max_message_bytes: usize,
    /// Watch streams one client may hold open at once.
    pub max_streams_per_client: usize,
    /// Deadline of every unary call.
    pub rpc_timeout: Duration,
    /// Requests served at once on one connection.
    pub concurrency_per_connection: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max_message_bytes: proto::client::MAX_MESSAGE_BYTES,
            max_streams_per_client: 8,
            rpc_timeout: Duration::from_secs(30),
            concurrency_per_connection: 64,
        }
    }
}

pub struct Service {
    ctl: Arc<Controller>,
    bounds: Bounds,
    transport: ibtls::Transport,
    /// Open watch streams per client.
    streams: Arc<dashmap::DashMap<String, usize>>,
}

impl Service {
    pub fn new(ctl: Arc<Controller>, bounds: Bounds, transport: ibtls::Transport) -> Self {
        Self {
            ctl,
            bounds,
            transport,
            streams: Arc::new(dashmap::DashMap::new()),
        }
    }

    /// Counts a new watch stream of `client`, or refuses it past the bound.
    fn open_stream(&self, client: String) -> Result<StreamSlot, Status> {
        let mut n = self.streams.entry(client.clone()).or_insert(0);
        if *n >= self.bounds.max_streams_per_client {
            return Err(Status::resource_exhausted(format!(
                "{client} already holds {} watch streams (the limit)",
                *n
            )));
        }
        *n += 1;
        Ok(StreamSlot {
            streams: self.streams.clone(),
            client,
        })
    }
}

/// One counted watch stream; uncounted when dropped.
struct StreamSlot {
    streams: Arc<dashmap::DashMap<String, usize>>,
    client: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.streams.remove_if_mut(&self.client, |_, n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
    }
}

/// Who the client is for bounds and logs: its proven identity, else its
/// address.
fn client_key<T>(req: &Request<T>, peer: &ibtls::Peer) -> String {
    match peer.identity() {
        Some(id) => id.to_uri(),
        None => req
            .remote_addr()
            .map_or_else(|| "unknown client".into(), |a| a.ip().to_string()),
    }
}

/// The holder of an agent's session: its identity and the fingerprint of
/// the very certificate it presented, so a second certificate for the same
/// prefix (a twin) cannot take over a live session. Without TLS the agent
/// id stands in: a plaintext control plane trusts its network.
fn holder<T>(req: &Request<T>, peer: &ibtls::Peer, agent_id: &str) -> String {
    use sha2::{Digest, Sha256};
    match (peer.identity(), req.peer_certs()) {
        (Some(id), Some(certs)) => {
            let fp: String = certs
                .first()
                .map(|c| Sha256::digest(c.as_ref()))
                .map(|d| d.iter().take(16).map(|b| format!("{b:02x}")).collect())
                .unwrap_or_default();
            format!("{}#{fp}", id.to_uri())
        }
        _ => format!("insecure:{agent_id}"),
    }
}

/// The identity an agent of `prefix` must have.
fn agent(prefix: u64) -> ibtls::Identity {
    ibtls::Identity::Agent { prefix }
}

impl From<ControlError> for Status {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::NotLeader(_) => Status::unavailable(e.to_string()),
            ControlError::PrefixHeld { .. } | ControlError::StaleReport { .. } => {
                Status::failed_precondition(e.to_string())
            }
            ControlError::UnknownSession(_) => Status::unauthenticated(e.to_string()),
            ControlError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ControlError::Exhausted(_) => Status::resource_exhausted(e.to_string()),
            ControlError::Store(_)
            | ControlError::Undecodable { .. }
            | ControlError::Routing(_) => Status::internal(e.to_string()),
        }
    }
}

/// A pushed item and its version; `replaces` marks it as the repair of a
/// held version from a term no leader has had.
trait Pushed: Clone + Send + 'static {
    fn version(&self) -> u64;
    fn set_replaces(&mut self, v: u64);
}

impl Pushed for v1::MappingUpdate {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_replaces(&mut self, v: u64) {
        self.replaces = v;
    }
}

impl Pushed for v1::EgressTables {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_replaces(&mut self, v: u64) {
        self.replaces = v;
    }
}

/// Streams `pick(snapshot)` whenever it yields a version newer than the
/// last one sent, for as long as this controller leads and the receiver
/// listens. A receiver that holds a version no leader published (above
/// the snapshot's: forged, or from a wiped store) gets the current item
/// marked as replacing it.
fn push_stream<T, F>(
    ctl: Arc<Controller>,
    mut have: u64,
    slot: StreamSlot,
    pick: F,
) -> ReceiverStream<Result<T, Status>>
where
    T: Pushed,
    F: Fn(&Published) -> Option<T> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(4);
    let mut sub = ctl.subscribe();
    tokio::spawn(async move {
        let _slot = slot;
        loop {
            if !ctl.is_leader() {
                let _ = tx.send(Err(Status::unavailable("leadership lost"))).await;
                return;
            }
            let snap = sub.borrow_and_update().clone();
            if let Some(mut item) = pick(&snap) {
                let v = item.version();
                // Every version any leader published is at most the
                // snapshot's (versions only grow, and a leader restores its
                // predecessor's snapshot): a receiver above it holds what
                // no leader published.
                let forged = ctl.term() > 0 && have > snap.version;
                if v > have || (forged && v != have) {
                    if forged {
                        tracing::warn!(
                            held = have,
                            version = v,
                            "a receiver holds a version from a future term; replacing it"
                        );
                        item.set_replaces(have);
                    }
                    have = v;
                    if tx.send(Ok(item)).await.is_err() {
                        return;
                    }
                }
            }
            // Wake on a new snapshot, and now and then to notice a lost
            // leadership even when nothing is published.
            tokio::select! {
                r = sub.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = tx.closed() => return,
            }
        }
    });
    ReceiverStream::new(rx)
}

#[tonic::async_trait]
impl v1::controller_server::Controller for Service {
    async fn register(
        &self,
        req: Request<v1::RegisterRequest>,
    ) -> Result<Response<v1::RegisterReply>, Status> {
        let peer = self.transport.peer(&req)?;
        peer.authorize_as(&agent(req.get_ref().subnet_prefix))?;
        let holder = holder(&req, &peer, &req.get_ref().agent_id);
        Ok(Response::new(
            self.ctl.register(req.get_ref(), &holder).await?,
        ))
    }

    async fn report(
        &self,
        req: Request<v1::SubnetReport>,
    ) -> Result<Response<v1::ReportAck>, Status> {
        let peer = self.transport.peer(&req)?;
        peer.authorize_as(&agent(req.get_ref().subnet_prefix))?;
        // Without TLS the session alone binds a report to its agent.
        let holder = peer.identity().map(|_| holder(&req, &peer, ""));
        Ok(Response::new(
            self.ctl.report(req.into_inner(), holder.as_deref()).await?,
        ))
    }

    type WatchMappingStream = ReceiverStream<Result<v1::MappingUpdate, Status>>;

    async fn watch_mapping(
        &self,
        req: Request<v1::WatchMappingRequest>,
    ) -> Result<Response<Self::WatchMappingStream>, Status> {
        if !self.ctl.is_leader() {
            return Err(ControlError::NotLeader(String::new()).into());
        }
        let peer = self.transport.peer(&req)?;
        peer.authorize_as(&agent(req.get_ref().subnet_prefix))?;
        let slot = self.open_stream(client_key(&req, &peer))?;
        let r = req.into_inner();
        let prefix = r.subnet_prefix;
        self.ctl.held(None, Some(prefix), r.have_version);
        Ok(Response::new(push_stream(
            self.ctl.clone(),
            r.have_version,
            slot,
            move |p| p.mappings.get(&prefix).cloned(),
        )))
    }

    type WatchEgressStream = ReceiverStream<Result<v1::EgressTables, Status>>;

    async fn watch_egress(
        &self,
        req: Request<v1::WatchEgressRequest>,
    ) -> Result<Response<Self::WatchEgressStream>, Status> {
        if !self.ctl.is_leader() {
            return Err(ControlError::NotLeader(String::new()).into());
        }
        let peer = self.transport.peer(&req)?;
        peer.authorize_as(&ibtls::Identity::Router {
            guid: req.get_ref().router_guid,
        })?;
        let slot = self.open_stream(client_key(&req, &peer))?;
        let r = req.into_inner();
        let guid = r.router_guid;
        self.ctl.held(Some(guid), None, r.have_version);
        Ok(Response::new(push_stream(
            self.ctl.clone(),
            r.have_version,
            slot,
            move |p| p.egress.get(&guid).cloned(),
        )))
    }

    async fn state(
        &self,
        req: Request<v1::StateRequest>,
    ) -> Result<Response<v1::ControllerState>, Status> {
        // Any identity of the CA may read the state.
        self.transport.peer(&req)?;
        Ok(Response::new(self.ctl.state()))
    }

    async fn held(&self, req: Request<v1::HeldRequest>) -> Result<Response<v1::HeldReply>, Status> {
        let peer = self.transport.peer(&req)?;
        let r = req.into_inner();
        match r.holder {
            Some(v1::held_request::Holder::RouterGuid(guid)) => {
                peer.authorize_as(&ibtls::Identity::Router { guid })?
            }
            Some(v1::held_request::Holder::SubnetPrefix(p)) => peer.authorize_as(&agent(p))?,
            None => {}
        }
        match r.holder {
            Some(v1::held_request::Holder::RouterGuid(g)) => {
                self.ctl.held(Some(g), None, r.version)
            }
            Some(v1::held_request::Holder::SubnetPrefix(p)) => {
                self.ctl.held(None, Some(p), r.version)
            }
            None => {
                return Err(Status::invalid_argument(
                    "name a router GUID or a subnet prefix",
                ))
            }
        }
        Ok(Response::new(v1::HeldReply {}))
    }
}

/// Serves the controller on `listener` until `shutdown` turns true.
pub async fn serve(
    ctl: Arc<Controller>,
    bounds: Bounds,
    transport: ibtls::Transport,
    listener: tokio::net::TcpListener,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), proto::client::ServeError> {
    let mut server = proto::client::server(
        &transport,
        bounds.rpc_timeout,
        bounds.concurrency_per_connection,
    )?;
    let svc = v1::controller_server::ControllerServer::new(Service::new(ctl, bounds, transport))
        .max_decoding_message_size(bounds.max_message_bytes)
        .max_encoding_message_size(bounds.max_message_bytes);
    Ok(server
        .add_service(svc)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            async move {
                let _ = shutdown.wait_for(|s| *s).await;
            },
        )
        .await?)
}
