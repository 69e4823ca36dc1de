//! Faults and bad input on real processes: what an operator's mistake, a
//! discovery caught mid-write or a client misusing its certificate must
//! not do to the fabric's routes.

use integration_tests::cluster::{Cluster, wait_for};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

/// The table files of a set directory, by name: not the controller's
/// mapping and what is made of it (a mapping may arrive at any time), nor
/// the manifest and temporary files (a restarted agent writes the same
/// tables again under a new generation).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mapping = [
        fabric::formats::tableset::MANIFEST_FILE,
        fabric::formats::routes_files::MAPPING_FILE,
        fabric::formats::routes_files::EGRESS_FILE,
        "prefix-routes.conf",
    ];
    std::fs::read_dir(dir)
        .expect("table set")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter(|e| !mapping.iter().any(|m| e.file_name() == **m))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("reads"),
            )
        })
        .collect()
}

async fn generation(c: &Cluster, prefix: u64) -> u64 {
    c.state(0)
        .await
        .and_then(|st| {
            st.subnets
                .iter()
                .find(|s| s.subnet_prefix == prefix)
                .map(|s| s.generation)
        })
        .unwrap_or(0)
}

/// `ibnetdiscover > file` leaves the file empty while discovery runs: an
/// agent watching it keeps the tables in force (files and report) and
/// says why; a sharp shrink is held until it persists, then routed; the
/// fabric coming back is routed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_shrunken_discovery_keeps_the_tables_until_it_persists() {
    let mut c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let cfg = c.agents[0].config.clone();
    let text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(
        &cfg,
        text.replacen(
            "\n[tls]",
            "watch_topology = true\ndiscovery_hold_ms = 2500\n\n[tls]",
            1,
        ),
    )
    .expect("config");
    c.start_agent(0).expect("agent restarts");
    c.converged(0, CONVERGE).await.expect("converges again");
    // The controller may still hold the report of the agent before the
    // restart: the new one's tables are in place once it says so.
    wait_for("the restarted agent to route", CONVERGE, || async {
        c.agents[0]
            .proc
            .log()
            .contains("subnet routed and verified")
            .then_some(())
    })
    .await
    .expect("routed");
    let prefix = c.agents[0].prefix;
    let out = c.path(&format!("out/{}", c.agents[0].name));
    let net = c.path(&format!("{}.net", c.fabric.subnets[0].name));
    let whole = std::fs::read_to_string(&net).expect("topology");
    let before = files(&out);
    let gen0 = generation(&c, prefix).await;
    assert!(gen0 > 0);
    for (i, empty) in ["", "# ibnetdiscover is still running\n"]
        .iter()
        .enumerate()
    {
        std::fs::write(&net, empty).expect("write");
        let said = wait_for("the agent to refuse the empty file", CONVERGE, || async {
            let n = c.agents[0]
                .proc
                .log()
                .matches("an empty or partial discovery")
                .count();
            (n > i).then_some(())
        })
        .await;
        assert!(said.is_ok(), "{}", c.agents[0].proc.log_tail());
        let now = files(&out);
        let changed: Vec<&String> = now
            .keys()
            .chain(before.keys())
            .filter(|k| now.get(*k) != before.get(*k))
            .collect();
        assert!(
            changed.is_empty(),
            "the tables in force were replaced ({i}): {changed:?}\n{}",
            c.agents[0].proc.log()
        );
        assert_eq!(generation(&c, prefix).await, gen0, "a new report was sent");
    }
    // Half the subnet gone at once: held, then routed when it persists.
    let small = fabric::multi::fat_tree_subnets(2, 1, 2, 2, 1).expect("fabric");
    let shrunk = fabric::formats::ibnetdiscover::write(&small.subnets[0].fabric);
    let t = std::time::Instant::now();
    std::fs::write(&net, &shrunk).expect("write");
    wait_for("the agent to hold the shrink", CONVERGE, || async {
        c.agents[0]
            .proc
            .log()
            .contains("more than half gone")
            .then_some(())
    })
    .await
    .expect("held");
    if t.elapsed() < Duration::from_millis(2000) {
        assert!(files(&out) == before, "routed before the hold");
    }
    wait_for("the shrink to be routed", CONVERGE, || async {
        (generation(&c, prefix).await > gen0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.agents[0].proc.log_tail()));
    assert!(
        t.elapsed() >= Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    assert!(files(&out) != before);
    // The fabric back: routed at once (growth is no shrink).
    let gen1 = generation(&c, prefix).await;
    std::fs::write(&net, &whole).expect("write");
    wait_for("the whole fabric to be routed", CONVERGE, || async {
        (generation(&c, prefix).await > gen1).then_some(())
    })
    .await
    .expect("routed");
}

/// Opens `n` connections to `port` from source address `from`, each
/// sending `first` and then nothing; returns those the server left open.
async fn hold_open(from: &str, port: u16, n: usize, first: &[u8]) -> Vec<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let mut held = Vec::new();
    for _ in 0..n {
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        sock.bind(format!("{from}:0").parse().expect("addr"))
            .expect("bind");
        let Ok(mut s) = sock
            .connect(format!("127.0.0.1:{port}").parse().expect("addr"))
            .await
        else {
            continue;
        };
        if !first.is_empty() {
            let _ = s.write_all(first).await;
        }
        held.push(s);
    }
    held
}

/// Open files of a process, from /proc.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Half-sent HTTP requests on the metrics port and TCP connections that
/// never start their TLS handshake on the gRPC port, over a thousand of
/// each from one address, take neither the controller's descriptors nor
/// its service: calls, scrapes and `status` from other clients go on,
/// and the refusals are logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_cannot_starve_a_service() {
    let limit = proto::listen::raise_fd_limit() as usize;
    let each = limit.saturating_sub(300).min(2_200) / 2;
    assert!(each >= 400, "open-file limit {limit} too low for this test");
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let grpc: u16 = c.controllers[0]
        .0
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let metrics = c
        .metrics
        .iter()
        .find(|(n, _)| n == "ctl")
        .map(|(_, p)| *p)
        .expect("metrics port");
    let pid = c.controllers[0].1.pid();
    let before = open_files(pid);
    let a = hold_open("127.0.0.2", grpc, each, b"").await;
    let b = hold_open("127.0.0.2", metrics, each, b"GET /metr").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = open_files(pid);
    assert!(
        during < before + 2 * proto::listen::PER_ADDRESS,
        "{before} open files before, {during} during"
    );
    // Other clients are served: a call, a scrape, `status`.
    let st = c.state(0).await.expect("the controller answers");
    assert!(st.leader);
    let page = c.scrape("ctl").await.expect("a scrape");
    assert!(
        page.contains("ibfabric_connections_refused_total"),
        "{page}"
    );
    let addr = c.controllers[0].0.clone();
    let t = c
        .tls_for(&ibtls::Identity::Worker {
            name: "tester".into(),
        })
        .expect("cert");
    let out = integration_tests::ibfabric(&[
        "status",
        "--controller",
        &addr,
        "--ca",
        t.ca.to_str().expect("utf-8"),
        "--cert",
        t.cert.to_str().expect("utf-8"),
        "--key",
        t.key.to_str().expect("utf-8"),
    ])
    .expect("status exits 0");
    assert!(out.contains("lagging         nothing"), "{out}");
    assert!(
        c.controllers[0]
            .1
            .log()
            .contains("too many open connections"),
        "the refusals are logged"
    );
    drop((a, b));
}

/// Health `Watch` streams stay open after their first answer: one
/// connection holds at most [`proto::client::MAX_STREAMS_PER_CONNECTION`]
/// of them (the rest wait for a slot), and connections per client are
/// bounded (`half_open_connections_cannot_starve_a_service`), so no client
/// holds unbounded streams; the service answers other calls meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_per_connection_are_bounded() {
    let c = Cluster::start(1, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let ch = c
        .connect(&c.controllers[0].0, ibtls::Role::Controller)
        .await
        .expect("connect");
    let n = proto::client::MAX_STREAMS_PER_CONNECTION as usize + 20;
    let mut tasks = Vec::new();
    for _ in 0..n {
        let mut h = tonic_health::pb::health_client::HealthClient::new(ch.clone());
        tasks.push(tokio::spawn(async move {
            let first = tokio::time::timeout(Duration::from_secs(3), async {
                let mut s = h
                    .watch(tonic_health::pb::HealthCheckRequest {
                        service: String::new(),
                    })
                    .await?
                    .into_inner();
                let m = s.message().await?;
                Ok::<_, tonic::Status>((m, s))
            })
            .await;
            // Held open until the test ends.
            tokio::time::sleep(Duration::from_secs(5)).await;
            matches!(first, Ok(Ok((Some(_), _))))
        }));
        // Staggered so that the first ones hold their slots.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let st = c.state(0).await.expect("other clients are served");
    assert!(st.leader);
    let mut open = 0;
    for t in tasks {
        if t.await.expect("task") {
            open += 1;
        }
    }
    assert!(
        open <= proto::client::MAX_STREAMS_PER_CONNECTION as usize,
        "{open} streams open on one connection"
    );
    assert!(open >= 20, "{open}: watches are served");
}

/// A call the caller's role may never make is refused on its headers,
/// before its body is read: a router's certificate sending a 32 MiB
/// report gets `permission_denied` naming the method, from the layer that
/// runs before decoding (the service's own check would name the subnet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_role_may_never_make_is_refused_before_its_body_is_read() {
    let c = Cluster::start(1, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let t = ibtls::Transport::Tls(
        c.tls_for(&ibtls::Identity::Router { guid: 0x99 })
            .expect("cert"),
    );
    let ch = c
        .connect_as(&c.controllers[0].0, ibtls::Role::Controller, &t)
        .await
        .expect("connect");
    let mut ctl = proto::client::controller_client(ch);
    let big = proto::v1::SubnetReport {
        subnet_prefix: c.agents[0].prefix,
        end_ports: (0..1_000_000u64)
            .map(|g| proto::v1::EndPort {
                guid: g + 1,
                lid: 1,
                desc: "padding-padding-padding".into(),
                lmc: 0,
            })
            .collect(),
        ..Default::default()
    };
    let e = ctl.report(big).await.expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
    assert!(
        e.message().contains(
            "ibfabric://router/0x0000000000000099 may not call /ibfabric.v1.Controller/Report"
        ),
        "{}",
        e.message()
    );
}

/// A router refuses an install from an identity that is not the
/// controllers' and says so in its log (refusals at most once every ten
/// seconds), and its tables stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_logs_an_install_it_refuses() {
    let c = Cluster::start(1, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let before = c.router_state(0).await.expect("router").version;
    let t = ibtls::Transport::Tls(
        c.tls_for(&ibtls::Identity::Agent {
            prefix: c.agents[0].prefix,
        })
        .expect("cert"),
    );
    let ch = c
        .connect_as(&c.routers[0].addr, ibtls::Role::Router, &t)
        .await
        .expect("connect");
    let mut r = proto::v1::router_fw_client::RouterFwClient::new(ch);
    let e = r
        .install(proto::v1::EgressTables {
            router_guid: c.routers[0].guid,
            version: u64::from(u32::MAX) << 32 | 1,
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
    wait_for("the router to log the refusal", CONVERGE, || async {
        c.routers[0]
            .proc
            .log()
            .contains("may not call /ibfabric.v1.RouterFw/Install")
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.routers[0].proc.log_tail()));
    assert_eq!(c.router_state(0).await.expect("router").version, before);
}

/// Turns on `watch_topology` for every agent of `c` (and restarts them).
async fn watching(c: &mut Cluster) {
    for i in 0..c.agents.len() {
        let cfg = c.agents[i].config.clone();
        let text = std::fs::read_to_string(&cfg).expect("config");
        std::fs::write(
            &cfg,
            text.replacen("\n[tls]", "watch_topology = true\n\n[tls]", 1),
        )
        .expect("config");
        c.start_agent(i).expect("agent restarts");
    }
    c.converged(0, CONVERGE).await.expect("converges again");
}

/// Re-cabling as the attack round did it: every subnet's file now gives
/// the router 48 ports, one file after the other. While the two reports
/// disagree, the junior subnet waits (named in `left_out`, no report
/// refused, no re-registration storm); once both agree, both take part
/// and the routes converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_cabling_converges_while_the_reports_disagree() {
    let mut c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    watching(&mut c).await;
    let recable = |i: usize| {
        let net = c.path(&format!("{}.net", c.fabric.subnets[i].name));
        let text = std::fs::read_to_string(&net).expect("topology");
        let mut out = String::new();
        for line in text.lines() {
            match line.strip_prefix("Rt\t") {
                Some(rest) => {
                    let name = rest.split_once(' ').map_or("", |(_, n)| n);
                    out += &format!("Rt\t48 {name}\n");
                }
                None => out += &format!("{line}\n"),
            }
        }
        assert_ne!(out, text, "the router line was found");
        std::fs::write(&net, out).expect("write");
    };
    recable(0);
    let waiting = wait_for("a subnet to wait for the other", CONVERGE, || async {
        let st = c.state(0).await?;
        st.subnets
            .iter()
            .find(|s| s.left_out.contains("ports in the report of subnet"))
            .map(|s| s.left_out.clone())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(waiting.contains("48"), "{waiting}");
    recable(1);
    let st = wait_for("both subnets to take part again", CONVERGE, || async {
        let st = c.state(0).await?;
        let agree = st.subnets.len() == 2
            && st
                .subnets
                .iter()
                .all(|s| s.left_out.is_empty() && s.mapping_version > 0);
        agree.then_some(st)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(st.refused.is_empty(), "{}", st.refused);
    c.converged(0, CONVERGE).await.expect("routes converge");
    for a in &c.agents {
        let log = a.proc.log();
        assert!(!log.contains("report refused"), "{}", a.proc.log_tail());
        assert!(
            log.matches("registered").count() <= 3,
            "{}",
            a.proc.log_tail()
        );
    }
}

/// A memory-store controller started while its state file cannot be
/// written (a full disk; here its directory is a file, which fails for
/// root too) does not lead, and leads once the disk takes writes, without
/// a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_started_on_a_full_disk_leads_once_it_can_write() {
    use integration_tests::cluster::{Proc, free_port};
    let d = tempfile::tempdir().expect("tmp");
    let sf = d.path().join("sf");
    std::fs::write(&sf, "not a directory").expect("file");
    let port = free_port().expect("port");
    let cfg = d.path().join("solo.toml");
    std::fs::write(
        &cfg,
        format!(
            "id = \"solo\"\nlisten = \"127.0.0.1:{port}\"\nalgorithm = \"prefix\"\ninsecure = true\n\n\
             [store]\nkind = \"memory\"\nstate_file = \"sf/solo.state\"\nelection_ttl_seconds = 1\n"
        ),
    )
    .expect("config");
    let mut p = Proc::spawn(
        "solo",
        &["controller", "--config", cfg.to_str().expect("utf-8")],
        d.path(),
    )
    .expect("starts");
    let addr = format!("http://127.0.0.1:{port}");
    let leads = || async {
        let mut c = proto::client::controller(&addr, &ibtls::Transport::Insecure)
            .await
            .ok()?;
        Some(
            c.state(proto::v1::StateRequest {})
                .await
                .ok()?
                .into_inner()
                .leader,
        )
    };
    wait_for("the controller to answer", CONVERGE, || async {
        leads().await
    })
    .await
    .expect("answers");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(leads().await, Some(false), "led without writing its state");
    std::fs::remove_file(&sf).expect("rm");
    std::fs::create_dir(&sf).expect("dir");
    wait_for("the controller to lead", CONVERGE, || async {
        (leads().await == Some(true)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", p.log_tail()));
    assert!(p.log().contains("campaign failed"), "{}", p.log_tail());
    p.kill();
}
