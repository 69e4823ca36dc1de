//! The plain-HTTP `/metrics` endpoint Prometheus scrapes. It needs no
//! certificate, so it must not be a way to starve the service: every
//! connection is admitted under [`crate::listen::Admission`]'s bounds, has
//! [`HEAD_DEADLINE`] to send a request head of at most [`MAX_HEAD`] bytes,
//! and gets one answer, then the connection is closed.

use crate::listen::Admission;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Time a client has to send its request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Time an answer may take to be written.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// Largest request head read.
pub const MAX_HEAD: usize = 8 << 10;
/// Open scrape connections: a few scrapers, a few people with curl.
const PER_ADDRESS: usize = 16;
const TOTAL: usize = 64;

/// What renders a page: Prometheus text, or the status page's HTML.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, render: Render) {
    serve_pages(listener, render, None).await
}

/// [`serve`], and `GET /status` (HTML) when `status` is given.
pub async fn serve_pages(listener: TcpListener, render: Render, status: Option<Render>) {
    let admission = Admission::new("metrics", PER_ADDRESS, TOTAL);
    serve_admitted(listener, admission, move |conn| {
        let (render, status) = (render.clone(), status.clone());
        async move {
            if let Err(e) = answer(conn, Some(&render), status.as_ref()).await {
                tracing::debug!("metrics request: {e}");
            }
        }
    })
    .await
}

/// Accepts connections on `listener` under `admission` and hands each to
/// `handle` in a task of its own, until the task is dropped.
pub(crate) async fn serve_admitted<F, Fut>(listener: TcpListener, admission: Admission, handle: F)
where
    F: Fn(crate::listen::Admitted) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors, most likely: wait, do not spin.
                tracing::warn!("page listener: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Some(conn) = admission.admit(stream) {
            tokio::spawn(handle(conn));
        }
    }
}

/// Reads one request head from `conn` and answers it: `/metrics` (and
/// `/`) with `render`, `/status` with `status`, each when given (`/` is
/// the status page where there are no metrics).
pub(crate) async fn answer<S>(
    mut conn: S,
    render: Option<&Render>,
    status: Option<&Render>,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut head = Vec::with_capacity(512);
    let read = tokio::time::timeout(HEAD_DEADLINE, async {
        let mut buf = [0u8; 1024];
        loop {
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed before the end of the request head",
                ));
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
                return Ok(());
            }
            if head.len() > MAX_HEAD {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "request head over 8 KiB",
                ));
            }
        }
    })
    .await;
    let mut kind = "text/plain; version=0.0.4";
    let (code, body) = match read {
        Err(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no request head within the deadline",
            ));
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            ("431 Request Header Fields Too Large", String::new())
        }
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => {
            let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next()) {
                (Some("GET"), Some("/metrics" | "/")) if render.is_some() => {
                    ("200 OK", render.map(|r| r()).unwrap_or_default())
                }
                (Some("GET"), Some("/status" | "/")) if status.is_some() => {
                    kind = "text/html; charset=utf-8";
                    ("200 OK", status.map(|s| s()).unwrap_or_default())
                }
                (Some("GET"), _) if render.is_some() => {
                    ("404 Not Found", "try /metrics\n".to_string())
                }
                (Some("GET"), _) => ("404 Not Found", "try /status\n".to_string()),
                _ => ("405 Method Not Allowed", String::new()),
            }
        }
    };
    reply(conn, code, kind, &body).await
}

/// Writes one whole answer on `conn` within the write deadline, then closes
/// it.
pub(crate) async fn reply<S>(mut conn: S, code: &str, kind: &str, body: &str) -> std::io::Result<()>
where
    S: tokio::io::AsyncWrite + Unpin,
{
    let reply = format!(
        "HTTP/1.1 {code}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(WRITE_DEADLINE, async {
        conn.write_all(reply.as_bytes()).await?;
        conn.shutdown().await
    })
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "answer not taken in time"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    async fn get(addr: std::net::SocketAddr, req: &[u8]) -> String {
        get_from(None, addr, req).await
    }

    /// A request from the source address `from` (another client).
    async fn get_from(
        from: Option<std::net::SocketAddr>,
        addr: std::net::SocketAddr,
        req: &[u8],
    ) -> String {
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        if let Some(f) = from {
            sock.bind(f).expect("bind the source");
        }
        let mut s = sock.connect(addr).await.expect("connect");
        s.write_all(req).await.expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn scrapes_are_answered_while_half_sent_requests_cannot_starve_it() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let task = tokio::spawn(serve(l, Arc::new(|| "up 1\n".to_string())));
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(ok.ends_with("up 1\n"), "{ok}");
        let nf = get(addr, b"GET /other HTTP/1.1\r\n\r\n").await;
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
        // Many half-sent requests from one address: those over the bound
        // are closed at once; a scrape from another address still works.
        let mut idle = Vec::new();
        for _ in 0..(PER_ADDRESS + 8) {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            s.write_all(b"GET /metr").await.expect("write");
            idle.push(s);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut closed = 0;
        for s in &mut idle {
            let mut b = [0u8; 1];
            // Closed with the request unread: a reset or an end of file.
            match tokio::time::timeout(Duration::from_millis(50), s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => closed += 1,
                _ => {}
            }
        }
        assert_eq!(closed, 8, "the connections over the bound are closed");
        let other: std::net::SocketAddr = "127.0.0.2:0".parse().expect("addr");
        let ok = get_from(Some(other), addr, b"GET /metrics HTTP/1.0\n\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        task.abort();
    }
}
