//! The table-holding side of an IB router (`ibfabric router`).
//!
//! It keeps one version of the egress tables in force and swaps in a new
//! one atomically: a decision reads one `Arc` snapshot, so it never sees
//! half a table. A pushed table that is malformed, meant for another
//! router, or not newer than the one in force is refused and the old one
//! stays. Decisions follow the inter-subnet paper: ISSR hashes (source
//! LID, next LID) over the candidate ports, ISFR takes the dedicated port.
//!
//! Tables arrive from the leader controller over `Controller.WatchEgress`
//! ([`watch`]) or from an operator over `RouterFw.Install`.

pub mod config;
pub mod service;
pub mod watch;

use arc_swap::ArcSwap;
use fabric::intersubnet::{Gid, Match, RouterTable, Rule};
use proto::v1;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How many installs [`RouterFw::history`] keeps: a reader polling a few
/// times a second sees every install of a control plane that changes at
/// human pace, and `RouterFw.State` stays small.
pub const INSTALL_HISTORY: usize = 64;

/// One table that went in force, for readers that check the sequence
/// (chaos tests: never an older table, across failovers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstallRecord {
    pub version: u64,
    /// The version in force before it (0 = none).
    pub previous: u64,
    /// The held version the table said it replaces (0 = a plain newer one).
    pub replaces: u64,
    pub at_unix_ms: u64,
}

/// The last [`INSTALL_HISTORY`] installs and how many there were in all,
/// so a reader can tell when it missed some.
#[derive(Debug, Default)]
struct History {
    records: VecDeque<InstallRecord>,
    total: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RejectReason {
    #[error("table is for router {got:#018x}, this is router {want:#018x}")]
    WrongRouter { got: u64, want: u64 },
    #[error("version {offered} is not newer than version {current} in force")]
    NotNewer { offered: u64, current: u64 },
    #[error(transparent)]
    Absurd(proto::version::VersionRefused),
    #[error("malformed table: {0}")]
    Malformed(String),
    #[error("port {port} does not exist on this router (ports 1..={ports})")]
    NoSuchPort { port: u8, ports: u8 },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecideError {
    #[error("no egress table installed yet")]
    NoTable,
    #[error("no rule for destination {0} on ingress port {1}")]
    NoRule(Gid, u8),
}

/// A table indexed for lookups: per context, full GIDs and prefixes to rules.
#[derive(Debug)]
pub struct Installed {
    pub version: u64,
    pub algorithm: String,
    pub table: RouterTable,
    index: Vec<(HashMap<Gid, usize>, HashMap<u64, usize>)>,
}

impl Installed {
    fn new(version: u64, algorithm: String, table: RouterTable) -> Self {
        let index = table
            .contexts
            .iter()
            .map(|c| {
                let mut gids = HashMap::new();
                let mut prefixes = HashMap::new();
                for (i, r) in c.rules.iter().enumerate() {
                    match r.matches {
                        Match::Gid(g) => gids.insert(g, i),
                        Match::Prefix(p) => prefixes.insert(p, i),
                    };
                }
                (gids, prefixes)
            })
            .collect();
        Self {
            version,
            algorithm,
            table,
            index,
        }
    }

    pub fn rules(&self) -> usize {
        self.table.contexts.iter().map(|c| c.rules.len()).sum()
    }

    /// Same semantics as [`RouterTable::lookup`], in constant time.
    pub fn lookup(&self, ingress_port: u8, dest: Gid) -> Option<&Rule> {
        let (ci, c) =
            self.table.contexts.iter().enumerate().find(|(_, c)| {
                c.ingress_ports.is_empty() || c.ingress_ports.contains(&ingress_port)
            })?;
        let (gids, prefixes) = &self.index[ci];
        gids.get(&dest)
            .or_else(|| prefixes.get(&dest.prefix))
            .map(|&i| &c.rules[i])
    }
}

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub egress_port: u8,
    pub next_lid: u16,
    pub table_version: u64,
    pub by_gid: bool,
}

pub struct RouterFw {
    pub guid: u64,
    /// Port count; 0 = not configured (ports are then checked against 254).
    pub ports: u8,
    current: ArcSwap<Option<Installed>>,
    rejected: AtomicU64,
    /// Serializes installs so that the version check and the swap are one
    /// step; decisions never take it.
    install_lock: std::sync::Mutex<()>,
    changed: tokio::sync::watch::Sender<u64>,
    history: std::sync::Mutex<History>,
    started_unix_ms: u64,
}

impl RouterFw {
    pub fn new(guid: u64, ports: u8) -> Self {
        Self {
            guid,
            ports,
            current: ArcSwap::from_pointee(None),
            rejected: AtomicU64::new(0),
            install_lock: std::sync::Mutex::new(()),
            changed: tokio::sync::watch::channel(0).0,
            history: std::sync::Mutex::new(History::default()),
            started_unix_ms: unix_ms(),
        }
    }

    /// The last [`INSTALL_HISTORY`] installs, oldest first, and the count
    /// of installs since this router started.
    pub fn history(&self) -> (Vec<InstallRecord>, u64) {
        let h = self
            .history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (h.records.iter().copied().collect(), h.total)
    }

    /// When this router started (unix milliseconds): a reader of
    /// [`RouterFw::history`] tells a restart by it.
    pub fn started_unix_ms(&self) -> u64 {
        self.started_unix_ms
    }

    /// Version in force (0 = none).
    pub fn version(&self) -> u64 {
        self.current
            .load()
            .as_ref()
            .as_ref()
            .map_or(0, |t| t.version)
    }

    pub fn snapshot(&self) -> Arc<Option<Installed>> {
        self.current.load_full()
    }

    /// What the State RPC answers: version and rules in force, refusals,
    /// the recent installs.
    pub fn state(&self) -> v1::RouterState {
        let snap = self.snapshot();
        let (history, installs_total) = self.history();
        v1::RouterState {
            router_guid: self.guid,
            version: self.version(),
            rules: snap.as_ref().as_ref().map_or(0, |t| t.rules() as u32),
            rejected: self.rejected(),
            installs: history
                .iter()
                .map(|r| v1::InstallRecord {
                    version: r.version,
                    previous: r.previous,
                    replaces: r.replaces,
                    at_unix_ms: r.at_unix_ms,
                })
                .collect(),
            installs_total,
            started_unix_ms: self.started_unix_ms(),
        }
    }

    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Fires with the new version after every successful install.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Checks and installs a pushed table; on refusal the table in force stays.
    pub fn install(&self, t: &v1::EgressTables) -> Result<u64, RejectReason> {
        let r = self.try_install(t);
        match &r {
            Ok(v) => {
                tracing::info!(router = %format!("{:#018x}", self.guid), version = v, "egress table installed");
                self.changed.send_replace(*v);
            }
            Err(e) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(router = %format!("{:#018x}", self.guid), offered = t.version, "egress table refused: {e}");
            }
        }
        r
    }

    fn try_install(&self, t: &v1::EgressTables) -> Result<u64, RejectReason> {
        if t.router_guid != self.guid {
            return Err(RejectReason::WrongRouter {
                got: t.router_guid,
                want: self.guid,
            });
        }
        let table = proto::convert::table_from_wire(t).map_err(|e| RejectReason::Malformed(e.0))?;
        if self.ports > 0 {
            for c in &table.contexts {
                for &p in c
                    .ingress_ports
                    .iter()
                    .chain(c.rules.iter().flat_map(|r| r.ports.iter()))
                {
                    if p > self.ports {
                        return Err(RejectReason::NoSuchPort {
                            port: p,
                            ports: self.ports,
                        });
                    }
                }
            }
        }
        let installed = Installed::new(t.version, t.algorithm.clone(), table);
        let _g = self
            .install_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = self.version();
        match proto::version::accept(t.version, t.replaces, current, proto::version::unix_now()) {
            Ok(()) => {}
            Err(proto::version::VersionRefused::NotNewer { .. }) => {
                return Err(RejectReason::NotNewer {
                    offered: t.version,
                    current,
                });
            }
            Err(e) => return Err(RejectReason::Absurd(e)),
        }
        self.current.store(Arc::new(Some(installed)));
        // Still under the install lock, so the history is in install order.
        let mut h = self
            .history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if h.records.len() == INSTALL_HISTORY {
            h.records.pop_front();
        }
        h.records.push_back(InstallRecord {
            version: t.version,
            previous: current,
            replaces: t.replaces,
            at_unix_ms: unix_ms(),
        });
        h.total += 1;
        Ok(t.version)
    }

    /// The relay decision for a packet entering on `ingress_port` from
    /// `slid` toward `dest`.
    pub fn decide(&self, ingress_port: u8, slid: u16, dest: Gid) -> Result<Decision, DecideError> {
        let snap = self.current.load();
        let t = snap.as_ref().as_ref().ok_or(DecideError::NoTable)?;
        let rule = t
            .lookup(ingress_port, dest)
            .ok_or(DecideError::NoRule(dest, ingress_port))?;
        let egress_port = rule
            .egress_port(slid)
            .ok_or(DecideError::NoRule(dest, ingress_port))?;
        Ok(Decision {
            egress_port,
            next_lid: rule.next_lid,
            table_version: t.version,
            by_gid: matches!(rule.matches, Match::Gid(_)),
        })
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs the router: the RouterFw service on `listener` and the controller
/// watch, until `shutdown` turns true.
pub async fn run(
    fw: Arc<RouterFw>,
    transport: ibtls::Transport,
    listener: tokio::net::TcpListener,
    controllers: Vec<String>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), proto::client::ServeError> {
    let (mut server, tls) = proto::client::server(&transport, proto::client::UNARY_TIMEOUT, 64)?;
    let follow = tokio::spawn(watch::follow(
        fw.clone(),
        transport.clone(),
        controllers,
        shutdown.clone(),
    ));
    let svc = v1::router_fw_server::RouterFwServer::new(service::Service(fw, transport))
        .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
    let (_health, routes) = proto::ops::routes(&mut server, "ibfabric.v1.RouterFw").await?;
    let r = proto::ops::serve(routes.add_service(svc), listener, tls, shutdown).await;
    follow.abort();
    Ok(r?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::intersubnet::{Choice, Context};

    fn table(version: u64, next_lid: u16) -> v1::EgressTables {
        let t = RouterTable {
            router_guid: 0x40,
            contexts: vec![Context {
                ingress_ports: Vec::new(),
                rules: vec![
                    Rule {
                        matches: Match::Gid(Gid {
                            prefix: 2,
                            guid: 77,
                        }),
                        next_lid,
                        ports: vec![3, 4],
                        choice: Choice::Hash,
                    },
                    Rule {
                        matches: Match::Prefix(2),
                        next_lid: 9,
                        ports: vec![4],
                        choice: Choice::First,
                    },
                ],
            }],
        };
        proto::convert::table_to_wire(&t, version, "issr")
    }

    #[test]
    fn installs_newer_and_refuses_older_bad_or_foreign_tables_keeping_the_current_one() {
        let fw = RouterFw::new(0x40, 4);
        let dest = Gid {
            prefix: 2,
            guid: 77,
        };
        assert_eq!(fw.decide(1, 5, dest), Err(DecideError::NoTable));
        assert_eq!(fw.install(&table(1, 20)), Ok(1));
        let d = fw.decide(1, 5, dest).expect("decides");
        assert_eq!((d.next_lid, d.table_version, d.by_gid), (20, 1, true));
        assert!(d.egress_port == 3 || d.egress_port == 4);
        // Not newer.
        assert!(matches!(
            fw.install(&table(1, 21)),
            Err(RejectReason::NotNewer { .. })
        ));
        // Malformed: a multicast next LID.
        let mut bad = table(2, 20);
        bad.contexts[0].rules[0].next_lid = 0xC001;
        assert!(matches!(fw.install(&bad), Err(RejectReason::Malformed(_))));
        // A port the router does not have.
        let mut bad = table(2, 20);
        bad.contexts[0].rules[1].ports = vec![9];
        assert!(matches!(
            fw.install(&bad),
            Err(RejectReason::NoSuchPort { port: 9, .. })
        ));
        // Another router's table.
        let mut other = table(2, 20);
        other.router_guid = 0x41;
        assert!(matches!(
            fw.install(&other),
            Err(RejectReason::WrongRouter { .. })
        ));
        assert_eq!(fw.rejected(), 4);
        // Still version 1, same decision.
        assert_eq!(fw.decide(1, 5, dest), Ok(d));
        // Prefix fallback for another GID of that subnet.
        let p = fw
            .decide(1, 5, Gid { prefix: 2, guid: 1 })
            .expect("prefix rule");
        assert_eq!((p.egress_port, p.next_lid, p.by_gid), (4, 9, false));
        assert!(fw.decide(1, 5, Gid { prefix: 3, guid: 1 }).is_err());
        assert_eq!(fw.install(&table(5, 30)), Ok(5));
        assert_eq!(fw.decide(1, 5, dest).map(|d| d.next_lid), Ok(30));
        // Only the two installs are in the history, refusals are not.
        let (h, total) = fw.history();
        assert_eq!(total, 2);
        let seq: Vec<(u64, u64)> = h.iter().map(|r| (r.previous, r.version)).collect();
        assert_eq!(seq, [(0, 1), (1, 5)]);
    }

    #[test]
    fn the_install_history_keeps_the_latest_records_and_counts_them_all() {
        let fw = RouterFw::new(0x40, 4);
        let n = INSTALL_HISTORY as u64 + 10;
        for v in 1..=n {
            fw.install(&table(v, 20)).expect("newer");
        }
        let (h, total) = fw.history();
        assert_eq!(total, n);
        assert_eq!(h.len(), INSTALL_HISTORY);
        assert_eq!(h.first().map(|r| r.version), Some(11));
        assert_eq!(h.last().map(|r| (r.previous, r.version)), Some((n - 1, n)));
        assert!(h.windows(2).all(|w| w[0].at_unix_ms <= w[1].at_unix_ms));
    }

    #[test]
    fn decisions_during_swaps_see_one_whole_table() {
        // Each version's two rules carry the version in their next LIDs; a
        // reader that saw half of one table and half of another would see
        // a mismatch.
        let fw = Arc::new(RouterFw::new(0x40, 4));
        fw.install(&table(1, 1)).expect("first");
        let reader = {
            let fw = fw.clone();
            std::thread::spawn(move || {
                for _ in 0..200_000 {
                    let snap = fw.snapshot();
                    let t = snap.as_ref().as_ref().expect("installed");
                    let a = t
                        .lookup(
                            1,
                            Gid {
                                prefix: 2,
                                guid: 77,
                            },
                        )
                        .expect("gid")
                        .next_lid;
                    assert_eq!(a as u64, t.version, "rule from another version");
                }
            })
        };
        for v in 2..2000u64 {
            fw.install(&table(v, v as u16)).expect("newer");
        }
        reader.join().expect("reader saw consistent tables");
    }
}
