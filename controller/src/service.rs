//! The `Controller` gRPC service over [`Controller`].

use crate::{state, ControlError, Controller, Published};
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
    /// Open watch streams per client.
    streams: Arc<dashmap::DashMap<String, usize>>,
}

impl Service {
    pub fn new(ctl: Arc<Controller>, bounds: Bounds) -> Self {
        Self {
            ctl,
            bounds,
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

/// Who the client is for bounds and logs: its address (the identity once
/// the transport proves one).
fn client_key<T>(req: &Request<T>) -> String {
    req.remote_addr()
        .map_or_else(|| "unknown client".into(), |a| a.ip().to_string())
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
/// listens. A receiver that holds a version from a term after this
/// leader's (impossible unless forged: terms only grow in the store) gets
/// the current item marked as replacing it.
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
                let forged = state::term_of(have) > ctl.term() && ctl.term() > 0;
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
        let r = req.into_inner();
        // Without a proven identity the agent id names the holder: a
        // plaintext control plane trusts its network.
        let holder = format!("insecure:{}", r.agent_id);
        Ok(Response::new(self.ctl.register(&r, &holder).await?))
    }

    async fn report(
        &self,
        req: Request<v1::SubnetReport>,
    ) -> Result<Response<v1::ReportAck>, Status> {
        Ok(Response::new(
            self.ctl.report(req.into_inner(), None).await?,
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
        let slot = self.open_stream(client_key(&req))?;
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
        let slot = self.open_stream(client_key(&req))?;
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
        _req: Request<v1::StateRequest>,
    ) -> Result<Response<v1::ControllerState>, Status> {
        Ok(Response::new(self.ctl.state()))
    }

    async fn held(&self, req: Request<v1::HeldRequest>) -> Result<Response<v1::HeldReply>, Status> {
        let r = req.into_inner();
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
    listener: tokio::net::TcpListener,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    let svc = v1::controller_server::ControllerServer::new(Service::new(ctl, bounds))
        .max_decoding_message_size(bounds.max_message_bytes)
        .max_encoding_message_size(bounds.max_message_bytes);
    proto::client::server(bounds.rpc_timeout, bounds.concurrency_per_connection)
        .add_service(svc)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            async move {
                let _ = shutdown.wait_for(|s| *s).await;
            },
        )
        .await
}
