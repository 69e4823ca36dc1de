//! The `Controller` gRPC service over [`Controller`].

use crate::state::Held;
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
    /// Largest pushed part on the Follow streams (the receiver's own
    /// bound, when lower, wins).
    pub push_part_bytes: usize,
    /// A heartbeat goes out on every Follow stream this often.
    pub heartbeat: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max_message_bytes: proto::client::MAX_MESSAGE_BYTES,
            max_streams_per_client: 8,
            rpc_timeout: Duration::from_secs(30),
            concurrency_per_connection: 64,
            push_part_bytes: 4 << 20,
            heartbeat: Duration::from_secs(1),
        }
    }
}

pub struct Service {
    ctl: Arc<Controller>,
    bounds: Bounds,
    transport: ibtls::Transport,
}

impl Service {
    pub fn new(ctl: Arc<Controller>, bounds: Bounds, transport: ibtls::Transport) -> Self {
        Self {
            ctl,
            bounds,
            transport,
        }
    }

    /// Counts a new watch stream of `client`, or refuses it past the bound.
    fn open_stream(&self, client: String) -> Result<StreamSlot, Status> {
        let mut n = self.ctl.streams.entry(client.clone()).or_insert(0);
        if *n >= self.bounds.max_streams_per_client {
            return Err(Status::resource_exhausted(format!(
                "{client} already holds {} watch streams (the limit)",
                *n
            )));
        }
        *n += 1;
        Ok(StreamSlot {
            streams: self.ctl.streams.clone(),
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
            | ControlError::Routing(_)
            | ControlError::Task(_) => Status::internal(e.to_string()),
            ControlError::Refused(_) | ControlError::StoreLayout(_) => {
                Status::failed_precondition(e.to_string())
            }
        }
    }
}

/// A pushed result: its version, its repair marker, and how it is cut
/// into parts.
trait Pushed: crate::state::Versioned + Clone + Send + Sync + 'static {
    /// The label of the pushes counter.
    const KIND: &'static str;
    fn set_replaces(&mut self, v: u64);
    fn split(&self, max_bytes: usize) -> Result<Vec<Self>, proto::chunk::ChunkError>;
}

impl Pushed for v1::MappingUpdate {
    const KIND: &'static str = "mapping";
    fn set_replaces(&mut self, v: u64) {
        self.replaces = v;
    }
    fn split(&self, max_bytes: usize) -> Result<Vec<Self>, proto::chunk::ChunkError> {
        proto::chunk::split_mapping(self, max_bytes)
    }
}

impl Pushed for v1::EgressTables {
    const KIND: &'static str = "egress";
    fn set_replaces(&mut self, v: u64) {
        self.replaces = v;
    }
    fn split(&self, max_bytes: usize) -> Result<Vec<Self>, proto::chunk::ChunkError> {
        proto::chunk::split_egress(self, max_bytes)
    }
}

/// How one kind of stream frames what it sends.
trait Framing<T>: Clone + Send + Sync + 'static {
    type Out: Send + 'static;
    /// The messages that carry one version.
    fn frame(&self, item: T) -> Result<Vec<Self::Out>, Status>;
    /// A heartbeat, on streams that have them.
    fn beat(&self, hb: v1::Heartbeat) -> Option<Self::Out>;
}

/// The Watch streams of earlier releases: whole messages, no heartbeats.
#[derive(Clone, Copy)]
struct Whole {
    max_bytes: usize,
}

impl<T: Pushed> Framing<T> for Whole {
    type Out = T;
    fn frame(&self, item: T) -> Result<Vec<T>, Status> {
        let n = item.encoded_len();
        if n > self.max_bytes {
            return Err(Status::resource_exhausted(format!(
                "version {} is {n} bytes, over the message bound of {}: follow with FollowMapping / FollowEgress, which send it in parts",
                item.version(),
                self.max_bytes
            )));
        }
        Ok(vec![item])
    }
    fn beat(&self, _: v1::Heartbeat) -> Option<T> {
        None
    }
}

/// The Follow streams: parts no larger than the receiver decodes, and
/// heartbeats, wrapped in `wrap`.
#[derive(Clone, Copy)]
struct InParts<W> {
    max_bytes: usize,
    wrap: W,
}

/// What a Follow stream carries.
enum Framed<T> {
    Part(T),
    Beat(v1::Heartbeat),
}

impl<T: Pushed, O: Send + 'static, W: Fn(Framed<T>) -> O + Clone + Send + Sync + 'static> Framing<T>
    for InParts<W>
{
    type Out = O;
    fn frame(&self, item: T) -> Result<Vec<O>, Status> {
        let parts = item.split(self.max_bytes).map_err(|e| {
            Status::resource_exhausted(format!("version {} cannot be sent: {e}", item.version()))
        })?;
        Ok(parts
            .into_iter()
            .map(|p| (self.wrap)(Framed::Part(p)))
            .collect())
    }
    fn beat(&self, hb: v1::Heartbeat) -> Option<O> {
        Some((self.wrap)(Framed::Beat(hb)))
    }
}

fn mapping_push(f: Framed<v1::MappingUpdate>) -> v1::MappingPush {
    use v1::mapping_push::Kind;
    v1::MappingPush {
        kind: Some(match f {
            Framed::Part(p) => Kind::Part(p),
            Framed::Beat(h) => Kind::Heartbeat(h),
        }),
    }
}

fn egress_push(f: Framed<v1::EgressTables>) -> v1::EgressPush {
    use v1::egress_push::Kind;
    v1::EgressPush {
        kind: Some(match f {
            Framed::Part(p) => Kind::Part(p),
            Framed::Beat(h) => Kind::Heartbeat(h),
        }),
    }
}

/// Streams `pick(snapshot)` whenever it yields a version newer than the
/// last one sent, for as long as this controller leads and the receiver
/// listens, framed by `framing` (with a heartbeat every `heartbeat` where
/// the framing has them). A receiver that holds a version no leader
/// published (above the snapshot's: forged, or from a wiped store) gets
/// the current item marked as replacing it.
fn push_stream<T, F, M>(
    ctl: Arc<Controller>,
    mut have: u64,
    slot: StreamSlot,
    heartbeat: Duration,
    framing: M,
    pick: F,
) -> ReceiverStream<Result<M::Out, Status>>
where
    T: Pushed,
    F: Fn(&Published) -> Option<Arc<Held<T>>> + Send + 'static,
    M: Framing<T>,
{
    let (tx, rx) = mpsc::channel(4);
    let mut sub = ctl.subscribe();
    tokio::spawn(async move {
        let _slot = slot;
        let mut beat = tokio::time::interval(heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if !ctl.is_leader() {
                let _ = tx.send(Err(Status::unavailable("leadership lost"))).await;
                return;
            }
            let snap = sub.borrow_and_update().clone();
            if let Some(item) = pick(&snap) {
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
                    }
                    // Copying and cutting megabytes of tables: off the
                    // async workers, which keep the election lease alive.
                    let f = framing.clone();
                    let framed = tokio::task::spawn_blocking(move || {
                        let mut item = item.decode().map_err(|e| {
                            Status::internal(format!("a published result does not decode: {e}"))
                        })?;
                        if forged {
                            item.set_replaces(have);
                        }
                        f.frame(item)
                    })
                    .await
                    .unwrap_or_else(|e| Err(Status::internal(format!("framing task: {e}"))));
                    let msgs = match framed {
                        Ok(m) => m,
                        Err(s) => {
                            tracing::error!("push refused: {}", s.message());
                            let _ = tx.send(Err(s)).await;
                            return;
                        }
                    };
                    for m in msgs {
                        if tx.send(Ok(m)).await.is_err() {
                            return;
                        }
                    }
                    metrics::counter!("ibfabric_controller_pushes_total", "kind" => T::KIND)
                        .increment(1);
                    have = v;
                }
            }
            // Wake on a new snapshot, to beat, and now and then to notice a
            // lost leadership even when nothing is published.
            tokio::select! {
                r = sub.changed() => if r.is_err() { return },
                _ = beat.tick() => {
                    let hb = v1::Heartbeat {
                        controller_id: ctl.id.clone(),
                        term: ctl.term(),
                        interval_ms: heartbeat.as_millis().min(u128::from(u32::MAX)) as u32,
                    };
                    if let Some(m) = framing.beat(hb) {
                        if tx.send(Ok(m)).await.is_err() {
                            return;
                        }
                    }
                }
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = tx.closed() => return,
            }
        }
    });
    ReceiverStream::new(rx)
}

impl Service {
    /// The part bound for a receiver that decodes up to `theirs` bytes
    /// (0: unknown, this side's bound).
    fn part_bytes(&self, theirs: u32) -> usize {
        let mine = self
            .bounds
            .push_part_bytes
            .min(self.bounds.max_message_bytes);
        match theirs as usize {
            0 => mine,
            t => t.min(mine).max(proto::chunk::MIN_PART_BYTES),
        }
    }

    /// A push stream of this service's controller, beating at its
    /// heartbeat.
    fn push<T, F, M>(
        &self,
        have: u64,
        slot: StreamSlot,
        framing: M,
        pick: F,
    ) -> ReceiverStream<Result<M::Out, Status>>
    where
        T: Pushed,
        F: Fn(&Published) -> Option<Arc<Held<T>>> + Send + 'static,
        M: Framing<T>,
    {
        push_stream(
            self.ctl.clone(),
            have,
            slot,
            self.bounds.heartbeat,
            framing,
            pick,
        )
    }

    fn whole(&self) -> Whole {
        Whole {
            max_bytes: self.bounds.max_message_bytes,
        }
    }

    /// Checks a mapping watch and counts its stream.
    fn open_mapping<T>(
        &self,
        req: &Request<T>,
        prefix: u64,
        have: u64,
    ) -> Result<StreamSlot, Status> {
        if !self.ctl.is_leader() {
            return Err(ControlError::NotLeader(String::new()).into());
        }
        let peer = self.transport.peer(req)?;
        peer.authorize_as(&agent(prefix))?;
        let slot = self.open_stream(client_key(req, &peer))?;
        self.ctl.held(None, Some(prefix), have);
        Ok(slot)
    }

    /// Checks an egress watch and counts its stream.
    fn open_egress<T>(&self, req: &Request<T>, guid: u64, have: u64) -> Result<StreamSlot, Status> {
        if !self.ctl.is_leader() {
            return Err(ControlError::NotLeader(String::new()).into());
        }
        let peer = self.transport.peer(req)?;
        peer.authorize_as(&ibtls::Identity::Router { guid })?;
        let slot = self.open_stream(client_key(req, &peer))?;
        self.ctl.held(Some(guid), None, have);
        Ok(slot)
    }
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
        let r = *req.get_ref();
        let slot = self.open_mapping(&req, r.subnet_prefix, r.have_version)?;
        let prefix = r.subnet_prefix;
        Ok(Response::new(self.push(
            r.have_version,
            slot,
            self.whole(),
            move |p| p.mappings.get(&prefix).cloned(),
        )))
    }

    type WatchEgressStream = ReceiverStream<Result<v1::EgressTables, Status>>;

    async fn watch_egress(
        &self,
        req: Request<v1::WatchEgressRequest>,
    ) -> Result<Response<Self::WatchEgressStream>, Status> {
        let r = *req.get_ref();
        let slot = self.open_egress(&req, r.router_guid, r.have_version)?;
        let guid = r.router_guid;
        Ok(Response::new(self.push(
            r.have_version,
            slot,
            self.whole(),
            move |p| p.egress.get(&guid).cloned(),
        )))
    }

    type FollowMappingStream = ReceiverStream<Result<v1::MappingPush, Status>>;

    async fn follow_mapping(
        &self,
        req: Request<v1::WatchMappingRequest>,
    ) -> Result<Response<Self::FollowMappingStream>, Status> {
        let r = *req.get_ref();
        let slot = self.open_mapping(&req, r.subnet_prefix, r.have_version)?;
        let prefix = r.subnet_prefix;
        Ok(Response::new(self.push(
            r.have_version,
            slot,
            InParts {
                max_bytes: self.part_bytes(r.max_message_bytes),
                wrap: mapping_push,
            },
            move |p| p.mappings.get(&prefix).cloned(),
        )))
    }

    type FollowEgressStream = ReceiverStream<Result<v1::EgressPush, Status>>;

    async fn follow_egress(
        &self,
        req: Request<v1::WatchEgressRequest>,
    ) -> Result<Response<Self::FollowEgressStream>, Status> {
        let r = *req.get_ref();
        let slot = self.open_egress(&req, r.router_guid, r.have_version)?;
        let guid = r.router_guid;
        Ok(Response::new(self.push(
            r.have_version,
            slot,
            InParts {
                max_bytes: self.part_bytes(r.max_message_bytes),
                wrap: egress_push,
            },
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

    async fn unreachable(
        &self,
        req: Request<v1::UnreachableRequest>,
    ) -> Result<Response<v1::UnreachableReply>, Status> {
        let peer = self.transport.peer(&req)?;
        // Only the clients a leader serves may complain about it.
        match peer.identity() {
            Some(ibtls::Identity::Agent { .. } | ibtls::Identity::Router { .. }) | None => {}
            Some(other) => {
                return Err(Status::permission_denied(format!(
                    "{} is not a client of the controllers",
                    other.to_uri()
                )));
            }
        }
        self.ctl.complain(&client_key(&req, &peer)).await?;
        Ok(Response::new(v1::UnreachableReply {}))
    }

    async fn forget(
        &self,
        req: Request<v1::ForgetRequest>,
    ) -> Result<Response<v1::ForgetReply>, Status> {
        let peer = self.transport.peer(&req)?;
        // An operator's act: only the controllers' identity may do it.
        peer.authorize_as(&ibtls::Identity::Controller)?;
        let forgotten = self.ctl.forget(req.get_ref().subnet_prefix).await?;
        Ok(Response::new(v1::ForgetReply { forgotten }))
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
                ));
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
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), proto::client::ServeError> {
    serve_with_status(ctl, bounds, transport, (listener, None), shutdown).await
}

/// The status page over HTTPS: its listener and the page.
pub type StatusHttps = (tokio::net::TcpListener, proto::metrics_http::Render);

/// [`serve`], and the status page over HTTPS on the service's own mutual
/// TLS (reloaded with it on SIGHUP) when `status` is given.
pub async fn serve_with_status(
    ctl: Arc<Controller>,
    bounds: Bounds,
    transport: ibtls::Transport,
    (listener, status): (tokio::net::TcpListener, Option<StatusHttps>),
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), proto::client::ServeError> {
    let (mut server, tls) = proto::client::server(
        &transport,
        bounds.rpc_timeout,
        bounds.concurrency_per_connection,
    )?;
    let _page = match (status, &tls) {
        (Some((l, page)), Some(tls)) => Some(proto::tls_listen::Tasks::of(tokio::spawn(
            proto::status_https::serve(l, tls.clone(), page),
        ))),
        (Some(_), None) => return Err(proto::client::ServeError::StatusNeedsTls),
        (None, _) => None,
    };
    let svc = v1::controller_server::ControllerServer::new(Service::new(ctl, bounds, transport))
        .max_decoding_message_size(bounds.max_message_bytes)
        .max_encoding_message_size(bounds.max_message_bytes);
    let (_health, routes) = proto::ops::routes(&mut server, "ibfabric.v1.Controller").await?;
    Ok(proto::ops::serve(routes.add_service(svc), listener, tls, shutdown).await?)
}
