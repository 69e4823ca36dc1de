//! The controller's status page over HTTPS with mutual TLS: the service's
//! own certificate, key and CA bundle (reloaded with them on SIGHUP), a
//! client certificate of the same CA required, and only an operator's (or
//! a controller's) identity answered. Every connection is admitted under
//! the same bounds as `/metrics`, gets one answer and is closed.

use crate::listen::Admission;
use crate::metrics_http::Render;
use ibtls::{ReloadableServer, Role};
use std::sync::Arc;
use tokio::net::TcpListener;

/// Open connections: a few people with a browser, a few scripts.
const PER_ADDRESS: usize = 16;
const TOTAL: usize = 64;

/// The identities the page is shown to.
pub const READERS: &[Role] = &[Role::Operator, Role::Controller];

/// Serves `GET /status` (and `/`) on `listener` over `tls` until the task
/// is dropped.
pub async fn serve(listener: TcpListener, tls: Arc<ReloadableServer>, status: Render) {
    let admission = Admission::new("status", PER_ADDRESS, TOTAL);
    crate::metrics_http::serve_admitted(listener, admission, move |conn| {
        let (tls, status) = (tls.clone(), status.clone());
        async move {
            if let Err(e) = answer(&tls, conn, &status).await {
                tracing::debug!("status page request: {e}");
            }
        }
    })
    .await
}

async fn answer(
    tls: &ReloadableServer,
    conn: crate::listen::Admitted,
    status: &Render,
) -> std::io::Result<()> {
    let stream = tls.accept_http1(conn).await?;
    let who = ibtls::peer_state(&stream).map(|p| p.identity);
    match who {
        Some(id) if READERS.contains(&id.role()) => {
            tracing::debug!(peer = %id, "status page");
            crate::metrics_http::answer(stream, None, Some(status)).await
        }
        other => {
            let who = other.map_or_else(|| "no identity".to_string(), |i| i.to_uri());
            tracing::info!(peer = %who, "status page refused: not an operator");
            let body =
                format!("{who} may not read the status page: an operator certificate is needed\n");
            crate::metrics_http::reply(stream, "403 Forbidden", "text/plain", &body).await
        }
    }
}
