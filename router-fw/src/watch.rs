//! Following the leader controller's egress pushes, with whichever
//! controller leads ([`proto::client::follow_leader`]). The stream carries
//! tables in parts and heartbeats: a leader that stops sending either for
//! three heartbeats (frozen, partitioned, or deposed without noticing) is
//! left, and the next round finds the current one.

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

/// Before the first heartbeat says otherwise, the silence after which a
/// stream is left.
const SILENCE_FALLBACK: Duration = Duration::from_secs(5);

/// Runs until `shutdown` turns true.
pub async fn follow(
    fw: Arc<RouterFw>,
    transport: ibtls::Transport,
    controllers: Vec<String>,
    shutdown: watch::Receiver<bool>,
) {
    if controllers.is_empty() {
        tracing::warn!("no controller configured: tables only through RouterFw.Install");
        return;
    }
    proto::client::follow_leader(&controllers, &transport, shutdown, "egress watch", |addr| {
        let (fw, transport) = (fw.clone(), transport.clone());
        async move { watch_one(&fw, &transport, &addr).await }
    })
    .await
}

/// One watch session: Ok once the stream was open and has ended, Err when
/// it could not be opened.
async fn watch_one(
    fw: &RouterFw,
    transport: &ibtls::Transport,
    addr: &str,
) -> Result<(), WatchError> {
    let mut client = proto::client::controller(addr, transport).await?;
    let req = v1::WatchEgressRequest {
        router_guid: fw.guid,
        have_version: fw.version(),
        max_message_bytes: proto::client::MAX_MESSAGE_BYTES as u32,
    };
    // Only the opening has a deadline (a gRPC deadline would end the
    // stream too): the stream itself lives on heartbeats.
    let mut stream = tokio::time::timeout(proto::client::PROBE_TIMEOUT, client.follow_egress(req))
        .await
        .map_err(|_| {
            WatchError::Refused(tonic::Status::deadline_exceeded(
                "the controller did not open the stream in time",
            ))
        })??
        .into_inner();
    tracing::info!(controller = %addr, "following egress tables");
    // The version this stream last put in force: a change by any other
    // path (an operator's Install) makes the router watch again with the
    // version it now holds, so the leader sees it and can repair it.
    let mut ours = fw.version();
    let mut installs = fw.subscribe();
    let mut parts = proto::chunk::Assembler::<v1::EgressTables>::new();
    let held = proto::client::HeldReporter::spawn(
        client.clone(),
        v1::held_request::Holder::RouterGuid(fw.guid),
    );
    let mut interval = None;
    let mut heard = tokio::time::Instant::now();
    let mut reload = proto::client_reload::ClientReload::new(transport);
    loop {
        let silence = proto::client::silence_bound(interval, SILENCE_FALLBACK);
        let msg = tokio::select! {
            // Counted from the last message, whatever else wakes the loop.
            _ = tokio::time::sleep_until(heard + silence) => {
                tracing::warn!(controller = %addr, ?silence, "no heartbeat from the controller; looking for the leader");
                return Ok(());
            }
            () = reload.ready() => {
                tracing::info!(controller = %addr, "TLS files reloaded (SIGHUP): reconnecting with them");
                return Ok(());
            }
            m = stream.message() => {
                heard = tokio::time::Instant::now();
                m
            }
            r = installs.changed() => {
                if r.is_err() {
                    return Ok(());
                }
                if *installs.borrow_and_update() != ours {
                    tracing::info!(controller = %addr, "tables installed directly; watching again");
                    return Ok(());
                }
                continue;
            }
        };
        let push = match msg {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(()),
            Err(s) => {
                tracing::info!(controller = %addr, "egress watch ended: {}", s.message());
                return Ok(());
            }
        };
        let part = match push.kind {
            Some(v1::egress_push::Kind::Heartbeat(h)) => {
                interval = Some(h.interval_ms);
                continue;
            }
            Some(v1::egress_push::Kind::Part(p)) => p,
            None => continue,
        };
        let t = match parts.push(part) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(e) => {
                // Nothing half is applied: the tables in force stay, and
                // a new stream starts the version again.
                tracing::warn!(controller = %addr, "pushed parts refused: {e}");
                return Ok(());
            }
        };
        match fw.install(&t) {
            Ok(v) => {
                ours = v;
                // What the router holds, for the controller's status; a
                // lost answer only costs that view.
                held.held(v);
            }
            Err(RejectReason::NotNewer { .. }) => {}
            Err(e) => tracing::warn!(controller = %addr, "pushed table refused: {e}"),
        }
    }
}
