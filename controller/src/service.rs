//! The `Controller` gRPC service over [`Controller`].

use crate::{ControlError, Controller, Published};
use proto::v1;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

pub struct Service(pub Arc<Controller>);

impl From<ControlError> for Status {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::NotLeader(_) => Status::unavailable(e.to_string()),
            ControlError::PrefixHeld { .. } | ControlError::StaleReport { .. } => {
                Status::failed_precondition(e.to_string())
            }
            ControlError::UnknownSession(_) => Status::unauthenticated(e.to_string()),
            ControlError::Invalid(_) => Status::invalid_argument(e.to_string()),
            ControlError::Store(_)
            | ControlError::Undecodable { .. }
            | ControlError::Routing(_) => Status::internal(e.to_string()),
        }
    }
}

/// Streams `pick(snapshot)` whenever it yields a version newer than the
/// last one sent, for as long as this controller leads and the receiver
/// listens.
fn push_stream<T, F>(
    ctl: Arc<Controller>,
    mut have: u64,
    pick: F,
) -> ReceiverStream<Result<T, Status>>
where
    T: Send + 'static,
    F: Fn(&Published) -> Option<(u64, T)> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(4);
    let mut sub = ctl.subscribe();
    tokio::spawn(async move {
        loop {
            if !ctl.is_leader() {
                let _ = tx.send(Err(Status::unavailable("leadership lost"))).await;
                return;
            }
            let snap = sub.borrow_and_update().clone();
            if let Some((v, item)) = pick(&snap) {
                if v > have {
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
                _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
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
        Ok(Response::new(self.0.register(&req.into_inner()).await?))
    }

    async fn report(
        &self,
        req: Request<v1::SubnetReport>,
    ) -> Result<Response<v1::ReportAck>, Status> {
        Ok(Response::new(self.0.report(req.into_inner()).await?))
    }

    type WatchMappingStream = ReceiverStream<Result<v1::MappingUpdate, Status>>;

    async fn watch_mapping(
        &self,
        req: Request<v1::WatchMappingRequest>,
    ) -> Result<Response<Self::WatchMappingStream>, Status> {
        if !self.0.is_leader() {
            return Err(ControlError::NotLeader(String::new()).into());
        }
        let r = req.into_inner();
        let prefix = r.subnet_prefix;
        Ok(Response::new(push_stream(
            self.0.clone(),
            r.have_version,
            move |p| p.mappings.get(&prefix).map(|m| (m.version, m.clone())),
        )))
    }

    type WatchEgressStream = ReceiverStream<Result<v1::EgressTables, Status>>;

    async fn watch_egress(
        &self,
        req: Request<v1::WatchEgressRequest>,
    ) -> Result<Response<Self::WatchEgressStream>, Status> {
        if !self.0.is_leader() {
            return Err(ControlError::NotLeader(String::new()).into());
        }
        let r = req.into_inner();
        let guid = r.router_guid;
        Ok(Response::new(push_stream(
            self.0.clone(),
            r.have_version,
            move |p| p.egress.get(&guid).map(|t| (t.version, t.clone())),
        )))
    }

    async fn state(
        &self,
        _req: Request<v1::StateRequest>,
    ) -> Result<Response<v1::ControllerState>, Status> {
        Ok(Response::new(self.0.state()))
    }
}

/// Serves the controller on `listener` until `shutdown` turns true.
pub async fn serve(
    ctl: Arc<Controller>,
    listener: tokio::net::TcpListener,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(v1::controller_server::ControllerServer::new(Service(ctl)))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            async move {
                let _ = shutdown.wait_for(|s| *s).await;
            },
        )
        .await
}
