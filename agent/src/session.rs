//! The agent's sessions with the controller: register, report (again
//! when the tables change or the controller asks), follow the mapping
//! pushes; and the loop that follows the topology file.

use super::*;

/// Runs the agent until `shutdown` turns true: first route (an error here
/// is returned: the agent does not start on tables it cannot verify), then
/// the query service, the topology watch and the controller session.
pub async fn run(
    agent: Arc<Agent>,
    listener: Option<tokio::net::TcpListener>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let transport = agent.cfg.transport();
    // The agent speaks for its prefix only with a certificate that names
    // it: refuse to start with another one rather than be refused later.
    if let ibtls::Transport::Tls(s) = &transport {
        let id = s.identity()?;
        let want = ibtls::Identity::Agent {
            prefix: agent.cfg.subnet_prefix,
        };
        if id != want {
            return Err(AgentError::Identity { have: id, want });
        }
    }
    let server = match listener {
        Some(_) => Some(proto::client::server(
            &transport,
            proto::client::UNARY_TIMEOUT,
            64,
        )?),
        None => None,
    };
    let found = follow::initial_discovery(&agent).await?;
    // Looked at before the first route reads it, so that a change made
    // while the agent starts is a change the watch sees.
    let seen = FileLook::take(&agent.cfg.topology);
    agent.reroute_with(found).await?;
    let mut tasks = Vec::new();
    if agent.cfg.fabric.is_some() {
        let a = agent.clone();
        let sd = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            follow::apply_and_confirm(&a, std::time::Instant::now()).await;
            follow::follow_fabric(a, sd).await;
        }));
    } else if agent.cfg.watch_topology {
        tasks.push(tokio::spawn(watch_topology(
            agent.clone(),
            seen,
            shutdown.clone(),
        )));
    }
    tasks.push(tokio::spawn(controller_session(
        agent.clone(),
        shutdown.clone(),
    )));
    let r = match (listener, server) {
        (Some(l), Some((mut server, tls))) => {
            let (_health, routes) = proto::ops::routes(&mut server, "ibfabric.v1.Agent").await?;
            let svc = v1::agent_server::AgentServer::new(QueryService(agent.clone()))
                .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
            proto::ops::serve(routes.add_service(svc), l, tls, shutdown.clone())
                .await
                .map_err(AgentError::from)
        }
        _ => {
            let mut sd = shutdown.clone();
            let _ = sd.wait_for(|s| *s).await;
            Ok(())
        }
    };
    for t in tasks {
        t.abort();
    }
    r
}

/// What the watch knows of the topology file: its time and size, and
/// while the time is too recent to tell two writes apart (file systems
/// that keep whole seconds, or two writes in one clock tick), a digest of
/// its bytes, as git does for racily clean files.
#[derive(Debug, Clone, PartialEq)]
struct FileLook {
    stamp: Option<(std::time::SystemTime, u64)>,
    digest: Option<[u8; 32]>,
}

/// How recent a modification time must be for the digest to be kept.
const RACY: Duration = Duration::from_secs(2);

impl FileLook {
    fn take(p: &std::path::Path) -> FileLook {
        let stamp = std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let racy = stamp.is_some_and(|(t, _)| t.elapsed().map_or(true, |age| age < RACY));
        let digest = if racy { digest_of(p) } else { None };
        FileLook { stamp, digest }
    }

    /// Whether `now`, taken of `p`, is another file than `self`: another
    /// time or size, or, while `self`'s time was racy, other bytes.
    fn differs(&self, now: &FileLook, p: &std::path::Path) -> bool {
        if now.stamp.is_none() {
            return false;
        }
        if now.stamp != self.stamp {
            return true;
        }
        match (&self.digest, &now.digest) {
            (Some(a), Some(b)) => a != b,
            // No longer racy: the bytes are compared one last time.
            (Some(a), None) => digest_of(p).is_some_and(|b| &b != a),
            _ => false,
        }
    }
}

fn digest_of(p: &std::path::Path) -> Option<[u8; 32]> {
    use sha2::Digest;
    std::fs::read(p)
        .ok()
        .map(|b| sha2::Sha256::digest(&b).into())
}

/// Re-routes when the topology file changes (polled: works on every file
/// system, and a subnet file changes at human pace). `last` is what the
/// routed tables were read from, or older.
async fn watch_topology(
    agent: Arc<Agent>,
    mut last: FileLook,
    mut shutdown: watch::Receiver<bool>,
) {
    let path = agent.cfg.topology.clone();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = shutdown.changed() => return,
        }
        let now = FileLook::take(&path);
        let changed = last.differs(&now, &path);
        if changed || now.stamp == last.stamp {
            // Same file: forget the digest once the time is no longer racy.
            last = now;
        }
        if changed || agent.shrink_due() {
            if changed {
                tracing::info!(topology = %path.display(), "topology changed; rerouting");
            } else {
                tracing::warn!(topology = %path.display(), "the shrunken topology persisted; rerouting it");
            }
            if let Err(e) = agent.reroute().await {
                tracing::error!("reroute failed, keeping the tables in force: {e}");
            }
        }
    }
}

/// Before the first heartbeat says otherwise, the silence after which the
/// mapping stream is left.
const SILENCE_FALLBACK: Duration = Duration::from_secs(5);

/// Register, report, follow the mapping, with whichever controller leads
/// ([`proto::client::follow_leader`]). A session ends when the leader
/// stops sending (three heartbeats of silence: frozen, partitioned,
/// deposed), and the next round finds the current leader.
async fn controller_session(agent: Arc<Agent>, shutdown: watch::Receiver<bool>) {
    let ctrls = agent.cfg.controllers.clone();
    if ctrls.is_empty() {
        tracing::warn!("no controller configured: local routing only");
        return;
    }
    let prefix = agent.cfg.subnet_prefix;
    let transport = agent.cfg.transport();
    proto::client::follow_leader(&ctrls, &transport, shutdown, "controller session", |addr| {
        let (agent, transport) = (agent.clone(), transport.clone());
        async move { one_session(&agent, &transport, &addr, prefix).await }
    })
    .await
}

type Client = v1::controller_client::ControllerClient<tonic::transport::Channel>;

/// Sends the current report on `c`.
async fn send_report(
    agent: Arc<Agent>,
    mut c: Client,
    session: String,
) -> Result<v1::ReportAck, SessionError> {
    let Some(r) = agent.current_report(&session) else {
        return Err(SessionError::NothingRouted);
    };
    c.report(proto::client::unary(r))
        .await
        .map(|a| a.into_inner())
        .map_err(SessionError::call("report"))
}

/// One session with one controller: Ok when it was established and later
/// ended, Err when it could not be established.
async fn one_session(
    agent: &Arc<Agent>,
    transport: &ibtls::Transport,
    addr: &str,
    prefix: u64,
) -> Result<(), SessionError> {
    let mut client = proto::client::controller(addr, transport).await?;
    let reg = client
        .register(proto::client::unary(v1::RegisterRequest {
            agent_id: agent.cfg.agent_id.clone(),
            subnet_prefix: prefix,
            query_addr: agent.cfg.listen.map(|a| a.to_string()).unwrap_or_default(),
        }))
        .await
        .map_err(SessionError::call("register"))?
        .into_inner();
    let lease = Duration::from_secs(reg.lease_seconds.max(1) as u64);
    tracing::info!(controller = %addr, leader = %reg.controller_id, "registered");
    send_report(agent.clone(), client.clone(), reg.session.clone()).await?;
    let req = v1::WatchMappingRequest {
        subnet_prefix: prefix,
        have_version: agent.mapping_version(),
        max_message_bytes: proto::client::MAX_MESSAGE_BYTES as u32,
    };
    // Only the opening has a deadline (a gRPC deadline would end the
    // stream too): the stream itself lives on heartbeats.
    let mut stream = tokio::time::timeout(proto::client::PROBE_TIMEOUT, client.follow_mapping(req))
        .await
        .map_err(|_| SessionError::Call {
            call: "follow mapping",
            status: Status::deadline_exceeded("the controller did not open the stream in time"),
        })?
        .map_err(SessionError::call("follow mapping"))?
        .into_inner();
    // Reports double as the liveness heartbeat: well inside the lease.
    let mut beat = tokio::time::interval(lease / 3);
    beat.tick().await;
    let mut parts = proto::chunk::Assembler::<v1::MappingUpdate>::new();
    let held = proto::client::HeldReporter::spawn(
        client.clone(),
        v1::held_request::Holder::SubnetPrefix(prefix),
    );
    let mut interval = None;
    // At most one report in flight, run aside so a silent leader is
    // noticed by the stream even while a report waits for its answer.
    let mut in_flight: Option<tokio::task::JoinHandle<Result<v1::ReportAck, SessionError>>> = None;
    // Why the controller leaves the subnet out, as last said (logged when
    // it changes, not on every heartbeat).
    let mut left_out = String::new();
    let mut due = false;
    let mut heard = tokio::time::Instant::now();
    let mut reload = proto::client_reload::ClientReload::new(transport);
    let ended = loop {
        if due && in_flight.is_none() {
            due = false;
            in_flight = Some(tokio::spawn(send_report(
                agent.clone(),
                client.clone(),
                reg.session.clone(),
            )));
        }
        let silence = proto::client::silence_bound(interval, SILENCE_FALLBACK);
        tokio::select! {
            // Counted from the last message, whatever else wakes the loop.
            _ = tokio::time::sleep_until(heard + silence) => {
                tracing::warn!(controller = %addr, ?silence, "no heartbeat from the controller; looking for the leader");
                break Ok(());
            }
            () = reload.ready() => {
                tracing::info!(controller = %addr, "TLS files reloaded (SIGHUP): reconnecting with them");
                break Ok(());
            }
            m = stream.message() => {
                heard = tokio::time::Instant::now();
                let push = match m {
                    Ok(Some(p)) => p,
                    Ok(None) => break Ok(()),
                    Err(s) => {
                        tracing::info!(controller = %addr, "mapping watch ended: {}", s.message());
                        break Ok(());
                    }
                };
                let part = match push.kind {
                    Some(v1::mapping_push::Kind::Heartbeat(h)) => {
                        interval = Some(h.interval_ms);
                        continue;
                    }
                    Some(v1::mapping_push::Kind::Part(p)) => p,
                    None => continue,
                };
                let m = match parts.push(part) {
                    Ok(Some(m)) => m,
                    Ok(None) => continue,
                    Err(e) => {
                        // Nothing half is applied: the mapping in force
                        // stays, a new stream starts the version again.
                        tracing::warn!(controller = %addr, "pushed parts refused: {e}");
                        break Ok(());
                    }
                };
                match agent.accept_mapping(&m, prefix) {
                    Ok(true) => {
                        tracing::info!(version = m.version, entries = m.entries.len(), "mapping applied");
                        // What the agent holds, for the controller's status.
                        held.held(m.version);
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!("mapping refused: {e}"),
                }
            }
            r = async { match in_flight.as_mut() { Some(h) => h.await, None => std::future::pending().await } } => {
                in_flight = None;
                match r {
                    Ok(Ok(ack)) if ack.left_out != left_out => {
                        if ack.left_out.is_empty() {
                            tracing::info!("the subnet takes part in the routes again");
                        } else {
                            tracing::warn!("the controller leaves the subnet out of the routes: {}", ack.left_out);
                        }
                        left_out = ack.left_out;
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        // A controller that is not the leader sends the
                        // agent on; any other refusal is the operator's to
                        // see.
                        if !matches!(&e, SessionError::Call { status, .. } if status.code() == tonic::Code::Unavailable) {
                            tracing::warn!("report refused: {e}");
                        }
                        break Err(e);
                    }
                    Err(e) => tracing::warn!("report task: {e}"),
                }
            }
            _ = agent.rerouted.notified() => due = true,
            _ = beat.tick() => due = true,
        }
    };
    if let Some(h) = in_flight {
        h.abort();
    }
    // A report refused after the session was established ends it as an
    // error: the next round registers again, after the backoff.
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn set_time(p: &std::path::Path, t: SystemTime) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .expect("open");
        f.set_modified(t).expect("set mtime");
    }

    /// A file system that keeps whole seconds gives two writes in one
    /// second the same time; with the same size, only the bytes tell.
    #[test]
    fn a_rewrite_with_the_same_time_and_size_is_a_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("t.net");
        std::fs::write(&p, "Rt\t6 x\n").expect("write");
        let t = SystemTime::now();
        set_time(&p, t);
        let before = FileLook::take(&p);
        assert!(before.digest.is_some(), "a fresh time keeps the digest");
        std::fs::write(&p, "Rt\t7 x\n").expect("write");
        set_time(&p, t);
        let now = FileLook::take(&p);
        assert_eq!(now.stamp, before.stamp);
        assert!(before.differs(&now, &p));
        assert!(!now.differs(&FileLook::take(&p), &p));
    }

    /// Once the time is old, the last look compares the bytes one last
    /// time; after that, time and size alone.
    #[test]
    fn an_old_file_is_compared_by_time_and_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("t.net");
        std::fs::write(&p, "a").expect("write");
        let t = SystemTime::now();
        set_time(&p, t);
        let racy = FileLook::take(&p);
        std::fs::write(&p, "b").expect("write");
        let old = t - Duration::from_secs(3600);
        set_time(&p, old);
        let now = FileLook::take(&p);
        assert!(now.digest.is_none(), "an hour-old time needs no digest");
        assert!(racy.differs(&now, &p), "another time");
        let mut same = now.clone();
        same.digest = racy.digest;
        assert!(same.differs(&now, &p), "racy digest against other bytes");
        assert!(!now.differs(&FileLook::take(&p), &p));
        std::fs::remove_file(&p).expect("rm");
        assert!(
            !now.differs(&FileLook::take(&p), &p),
            "a missing file is no change"
        );
    }
}
