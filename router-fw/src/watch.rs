//! Following the leader controller's egress pushes. Any controller in the
//! list may answer; followers refuse the watch (UNAVAILABLE), so the loop
//! moves on to the next address, with capped exponential backoff after a
//! full round without success.

use crate::{RejectReason, RouterFw};
use proto::v1;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Why a watch session ended before any table arrived.
#[derive(Debug, thiserror::Error)]
enum WatchError {
    #[error("connect: {0}")]
    Connect(#[from] proto::client::ConnectError),
    #[error("{}: {}", .0.code(), .0.message())]
    Refused(#[from] tonic::Status),
}

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(3);

/// Runs until `shutdown` turns true.
pub async fn follow(
    fw: Arc<RouterFw>,
    transport: ibtls::Transport,
    controllers: Vec<String>,
    mut shutdown: watch::Receiver<bool>,
) {
    if controllers.is_empty() {
        tracing::warn!("no controller configured: tables only through RouterFw.Install");
        return;
    }
    let mut backoff = BACKOFF_MIN;
    let mut i = 0usize;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let addr = controllers[i % controllers.len()].clone();
        i += 1;
        let got_any = tokio::select! {
            r = watch_one(&fw, &transport, &addr) => match r {
                Ok(n) => n > 0,
                Err(e) => {
                    tracing::debug!(controller = %addr, "egress watch: {e}");
                    false
                }
            },
            _ = shutdown.changed() => return,
        };
        if got_any {
            backoff = BACKOFF_MIN;
        }
        if got_any || i.is_multiple_of(controllers.len()) {
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.changed() => return,
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// One watch session; returns how many tables arrived before it ended.
async fn watch_one(
    fw: &RouterFw,
    transport: &ibtls::Transport,
    addr: &str,
) -> Result<u64, WatchError> {
    let mut client = proto::client::controller(addr, transport).await?;
    let mut stream = client
        .watch_egress(v1::WatchEgressRequest {
            router_guid: fw.guid,
            have_version: fw.version(),
        })
        .await?
        .into_inner();
    tracing::info!(controller = %addr, "following egress tables");
    let mut n = 0;
    // The version this stream last put in force: a change by any other
    // path (an operator's Install) makes the router watch again with the
    // version it now holds, so the leader sees it and can repair it.
    let mut ours = fw.version();
    let mut installs = fw.subscribe();
    loop {
        let msg = tokio::select! {
            m = stream.message() => m,
            r = installs.changed() => {
                if r.is_err() {
                    return Ok(n);
                }
                if *installs.borrow_and_update() != ours {
                    tracing::info!(controller = %addr, "tables installed directly; watching again");
                    return Ok(n.max(1));
                }
                continue;
            }
        };
        match msg {
            Ok(Some(t)) => {
                n += 1;
                match fw.install(&t) {
                    Ok(v) => {
                        ours = v;
                        // What the router holds, for the controller's
                        // status; a lost answer only costs that view.
                        let held = v1::HeldRequest {
                            holder: Some(v1::held_request::Holder::RouterGuid(fw.guid)),
                            version: v,
                        };
                        if let Err(s) = client.held(proto::client::unary(held)).await {
                            tracing::debug!(controller = %addr, "held: {}", s.message());
                        }
                    }
                    Err(RejectReason::NotNewer { .. }) => {}
                    Err(e) => tracing::warn!(controller = %addr, "pushed table refused: {e}"),
                }
            }
            Ok(None) => return Ok(n),
            Err(s) => {
                if n > 0 {
                    tracing::info!(controller = %addr, "egress watch ended: {}", s.message());
                    return Ok(n);
                }
                return Err(s.into());
            }
        }
    }
}
