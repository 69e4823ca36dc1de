//! The `RouterFw` gRPC service: decisions, direct installs, state.

use crate::{DecideError, RejectReason, RouterFw};
use proto::v1;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service over one router's tables, judging its callers by
/// `transport` (with TLS: any identity of the CA may ask, only the
/// controller may install).
pub struct Service(pub Arc<RouterFw>, pub ibtls::Transport);

#[tonic::async_trait]
impl v1::router_fw_server::RouterFw for Service {
    async fn forward(
        &self,
        req: Request<v1::ForwardQuery>,
    ) -> Result<Response<v1::ForwardDecision>, Status> {
        self.1.peer(&req)?;
        let q = req.into_inner();
        let dest = q
            .destination
            .as_ref()
            .map(proto::convert::gid_from_wire)
            .ok_or_else(|| Status::invalid_argument("destination GID missing"))?;
        let ingress = proto::convert::port(q.ingress_port, "ingress_port")
            .map_err(|e| Status::invalid_argument(e.0))?;
        let slid =
            proto::convert::lid(q.slid, "slid").map_err(|e| Status::invalid_argument(e.0))?;
        match self.0.decide(ingress, slid, dest) {
            Ok(d) => Ok(Response::new(v1::ForwardDecision {
                egress_port: d.egress_port as u32,
                next_lid: d.next_lid as u32,
                table_version: d.table_version,
                matched: if d.by_gid { "gid" } else { "prefix" }.into(),
            })),
            Err(e @ DecideError::NoTable) => Err(Status::failed_precondition(e.to_string())),
            Err(e @ DecideError::NoRule(..)) => Err(Status::not_found(e.to_string())),
        }
    }

    async fn install(
        &self,
        req: Request<v1::EgressTables>,
    ) -> Result<Response<v1::InstallReply>, Status> {
        let who = req.remote_addr();
        let allowed = self.1.peer(&req).and_then(|p| {
            p.authorize(
                |id| matches!(id, ibtls::Identity::Controller),
                "install egress tables (the controller's right)",
            )
        });
        if let Err(e) = allowed {
            // An operator wants to know that something tried.
            proto::ops::rate_limited(|| {
                tracing::warn!(client = ?who, "install refused: {}", e.message());
            });
            return Err(e);
        }
        match self.0.install(&req.into_inner()) {
            Ok(version) => Ok(Response::new(v1::InstallReply { version })),
            Err(e @ RejectReason::NotNewer { .. }) => {
                Err(Status::failed_precondition(e.to_string()))
            }
            Err(e) => {
                proto::ops::rate_limited(|| tracing::warn!(client = ?who, "install refused: {e}"));
                Err(Status::invalid_argument(e.to_string()))
            }
        }
    }

    async fn state(
        &self,
        req: Request<v1::RouterStateRequest>,
    ) -> Result<Response<v1::RouterState>, Status> {
        self.1.peer(&req)?;
        Ok(Response::new(self.0.state()))
    }
}
