//! When the certificates of the peers that connect expire, as the
//! `certificate="peer"` series of
//! [`crate::tls_listen::CERT_EXPIRY`]. A peer's series lasts while it has
//! a connection open and [`GRACE`] after its last one closed (a restart,
//! a reconnect), then goes: a peer that left the fabric raises no expiry
//! alert for a certificate nobody uses.
//!
//! The series are kept here rather than as gauges of the metrics
//! recorder, which can set a series but never remove one; they are
//! spliced into the exposition text at each scrape.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a peer's series stays after its last connection closed.
pub const GRACE: Duration = Duration::from_secs(3600);

#[derive(Debug)]
struct Peer {
    not_after: i64,
    open: usize,
    left: Option<Instant>,
}

static PEERS: Mutex<BTreeMap<String, Peer>> = Mutex::new(BTreeMap::new());

fn peers() -> MutexGuard<'static, BTreeMap<String, Peer>> {
    PEERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A connection of a peer, counted until dropped.
#[derive(Debug)]
pub struct Seen(String);

/// Counts a connection of `identity`, whose certificate ends at
/// `not_after` (Unix seconds), until the returned value is dropped.
pub fn seen(identity: String, not_after: i64) -> Seen {
    let mut m = peers();
    let p = m.entry(identity.clone()).or_insert(Peer {
        not_after,
        open: 0,
        left: None,
    });
    p.not_after = not_after;
    p.open += 1;
    p.left = None;
    Seen(identity)
}

impl Drop for Seen {
    fn drop(&mut self) {
        if let Some(p) = peers().get_mut(&self.0) {
            p.open = p.open.saturating_sub(1);
            if p.open == 0 {
                p.left = Some(Instant::now());
            }
        }
    }
}

/// The peers' series, one line each, after dropping those gone longer
/// than [`GRACE`] at `now`.
fn lines(now: Instant) -> Vec<String> {
    let mut m = peers();
    m.retain(|_, p| p.open > 0 || p.left.is_none_or(|t| now.duration_since(t) < GRACE));
    m.iter()
        .map(|(id, p)| {
            let id = id.replace('\\', "\\\\").replace('"', "\\\"");
            format!(
                "{}{{certificate=\"peer\",peer=\"{id}\"}} {}",
                crate::tls_listen::CERT_EXPIRY,
                p.not_after
            )
        })
        .collect()
}

/// `text` (Prometheus exposition) with the peers' series added to their
/// family: after its last sample when the family is there, else as a new
/// family at the end.
pub fn splice(text: String) -> String {
    splice_at(text, Instant::now())
}

fn splice_at(text: String, now: Instant) -> String {
    let peers = lines(now);
    if peers.is_empty() {
        return text;
    }
    let name = crate::tls_listen::CERT_EXPIRY;
    let in_family = |l: &str| {
        l.strip_prefix(name)
            .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
    };
    let mut out = String::with_capacity(text.len() + peers.len() * 96);
    let mut lines = text.lines().peekable();
    let mut done = false;
    while let Some(l) = lines.next() {
        out.push_str(l);
        out.push('\n');
        if !done && in_family(l) && !lines.peek().is_some_and(|n| in_family(n)) {
            for p in &peers {
                out.push_str(p);
                out.push('\n');
            }
            done = true;
        }
    }
    if !done {
        out.push_str(&format!("# TYPE {name} gauge\n"));
        for p in &peers {
            out.push_str(p);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_stays_while_connected_and_for_the_grace_after() {
        let name = crate::tls_listen::CERT_EXPIRY;
        let text = format!(
            "# TYPE {name} gauge\n{name}{{certificate=\"own\"}} 5\n# TYPE other gauge\nother 1\n"
        );
        let a = seen("ibfabric://agent/0x00000000000000aa".into(), 77);
        let b = seen("ibfabric://router/0x00000000000000bb".into(), 88);
        let b2 = seen("ibfabric://router/0x00000000000000bb".into(), 99);
        let now = Instant::now();
        let out = splice_at(text.clone(), now);
        // Grouped with its family, before the next one; the newest expiry.
        let own = out.find("certificate=\"own\"").expect("own");
        let pa = out.find("agent/0x00000000000000aa\"} 77").expect("a");
        let pb = out.find("router/0x00000000000000bb\"} 99").expect("b");
        let other = out.find("# TYPE other").expect("other");
        assert!(own < pa && pa < other && pb < other, "{out}");
        drop(a);
        drop(b);
        // b has a connection left; a is within its grace.
        let out = splice_at(text.clone(), now);
        assert!(out.contains("agent/0x00000000000000aa"), "{out}");
        let later = now + GRACE + Duration::from_secs(1);
        let out = splice_at(text.clone(), later);
        assert!(
            !out.contains("agent/0x00000000000000aa"),
            "gone after the grace: {out}"
        );
        assert!(
            out.contains("router/0x00000000000000bb"),
            "still connected: {out}"
        );
        drop(b2);
        let out = splice_at(text.clone(), later + GRACE + Duration::from_secs(1));
        assert!(!out.contains("router/0x00000000000000bb"), "{out}");
        // No family yet: one is added.
        let _c = seen("ibfabric://worker/w".into(), 5);
        let out = splice_at("x 1\n".into(), Instant::now());
        assert!(
            out.contains(&format!(
                "# TYPE {name} gauge\n{name}{{certificate=\"peer\",peer=\"ibfabric://worker/w\"}} 5"
            )),
            "{out}"
        );
    }
}
