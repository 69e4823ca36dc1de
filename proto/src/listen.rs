//! What a listener admits before any byte is read: a bound on open
//! connections per client address and in all. A connection costs a file
//! descriptor from `accept` on, and a TLS handshake may take its full
//! timeout: without a bound, clients that open connections and never
//! finish the handshake (or an HTTP request) take every descriptor the
//! process has and every legitimate call fails. A connection over a bound
//! is closed at once, counted (`ibfabric_connections_refused_total`) and
//! logged (at most once per address every ten seconds).

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Open connections one client address may hold: far above what an agent,
/// a router or a worker opens, far below a process's descriptors.
pub const PER_ADDRESS: usize = 128;
/// Open connections a listener holds in all.
pub const TOTAL: usize = 768;
/// How often a refusal is logged per address.
const LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Counts {
    total: usize,
    by_addr: HashMap<IpAddr, usize>,
    logged: HashMap<IpAddr, Instant>,
}

/// The bounds of one listener, shared by its connections.
#[derive(Clone)]
pub struct Admission {
    what: &'static str,
    per_address: usize,
    total: usize,
    counts: Arc<Mutex<Counts>>,
}

impl Admission {
    /// Bounds for the listener named `what` in logs.
    pub fn new(what: &'static str, per_address: usize, total: usize) -> Self {
        Self {
            what,
            per_address,
            total,
            counts: Arc::new(Mutex::new(Counts::default())),
        }
    }

    /// The default bounds ([`PER_ADDRESS`], [`TOTAL`]).
    pub fn standard(what: &'static str) -> Self {
        Self::new(what, PER_ADDRESS, TOTAL)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Open connections now (all addresses).
    pub fn open(&self) -> usize {
        self.lock().total
    }

    /// Takes `stream` under the bounds, or closes it (None) when its
    /// address or the listener is at its bound.
    pub fn admit(&self, stream: TcpStream) -> Option<Admitted> {
        let addr = stream.peer_addr().ok().map(|a| a.ip());
        let mut c = self.lock();
        let mine = addr.map_or(0, |a| c.by_addr.get(&a).copied().unwrap_or(0));
        if c.total >= self.total || mine >= self.per_address {
            metrics::counter!("ibfabric_connections_refused_total", "listener" => self.what)
                .increment(1);
            let key = addr.unwrap_or(IpAddr::from([0, 0, 0, 0]));
            let due = c.logged.get(&key).is_none_or(|t| t.elapsed() >= LOG_EVERY);
            if due {
                if c.logged.len() > 4096 {
                    c.logged.clear();
                }
                c.logged.insert(key, Instant::now());
                tracing::warn!(
                    listener = self.what,
                    client = %key,
                    open = c.total,
                    from_client = mine,
                    "connection refused: too many open connections (per client {}, in all {})",
                    self.per_address,
                    self.total
                );
            }
            return None;
        }
        c.total += 1;
        if let Some(a) = addr {
            *c.by_addr.entry(a).or_insert(0) += 1;
        }
        drop(c);
        Some(Admitted {
            stream,
            slot: Slot {
                admission: self.clone(),
                addr,
            },
            held: None,
        })
    }
}

/// Gives the connection's place back when it closes.
struct Slot {
    admission: Admission,
    addr: Option<IpAddr>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.admission.lock();
        c.total = c.total.saturating_sub(1);
        if let Some(a) = self.addr {
            if let Some(n) = c.by_addr.get_mut(&a) {
                *n -= 1;
                if *n == 0 {
                    c.by_addr.remove(&a);
                }
            }
        }
    }
}

/// An admitted connection: the stream, holding its place until dropped.
pub struct Admitted {
    stream: TcpStream,
    slot: Slot,
    /// Dropped with the connection (the TLS peer it is counted under).
    held: Option<Box<dyn Send + Sync>>,
}

impl Admitted {
    pub fn peer_addr(&self) -> Option<IpAddr> {
        self.slot.addr
    }

    /// Keeps `g` until the connection closes.
    pub(crate) fn hold(&mut self, g: impl Send + Sync + 'static) {
        self.held = Some(Box::new(g));
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The same connection info as a plain TCP stream, so that a request's
/// peer address and (under TLS) its peer certificates read as before.
impl tonic::transport::server::Connected for Admitted {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

/// Raises this process's open-file soft limit to its hard limit: the
/// default soft limit (1,024) is what a few hundred clients and their
/// handshakes use up. Returns the limit in force.
pub fn raise_fd_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct
        // passed, which lives on this stack frame.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
                return 0;
            }
            if r.rlim_cur < r.rlim_max {
                let want = libc::rlimit {
                    rlim_cur: r.rlim_max,
                    rlim_max: r.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                    return want.rlim_cur;
                }
            }
        }
        r.rlim_cur
    }
    #[cfg(not(unix))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_over_the_bounds_are_closed_and_their_places_come_back() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let adm = Admission::new("test", 2, 3);
        let mut held = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..3 {
            clients.push(TcpStream::connect(addr).await.expect("connect"));
            let (s, _) = l.accept().await.expect("accept");
            held.push(adm.admit(s));
        }
        assert!(held[0].is_some() && held[1].is_some());
        assert!(held[2].is_none(), "a third from one address");
        assert_eq!(adm.open(), 2);
        held.pop();
        held.pop();
        assert_eq!(adm.open(), 1, "a closed connection gives its place back");
        clients.push(TcpStream::connect(addr).await.expect("connect"));
        let (s, _) = l.accept().await.expect("accept");
        let again = adm.admit(s).expect("admitted again");
        assert_eq!(again.peer_addr(), Some(IpAddr::from([127, 0, 0, 1])));
        assert_eq!(adm.open(), 2);
    }
}
