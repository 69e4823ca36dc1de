//! What an operator's tools see of running services (real processes,
//! mutual TLS): Prometheus metrics that match the state the services
//! report, gRPC health, server reflection, refused requests counted, and
//! `ibfabric status` naming the leader and what lags.

use ibtls::{Identity, Role, Transport};
use integration_tests::cluster::{Cluster, wait_for};
use integration_tests::ibfabric_bin;
use proto::v1;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

/// The value of the sample `name` (with its labels, as printed) in a
/// Prometheus text exposition.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn scrape_until(c: &Cluster, who: &str, name: &str, ok: impl Fn(f64) -> bool) -> String {
    wait_for(&format!("{who} to serve {name}"), CONVERGE, || async {
        let t = c.scrape(who).await?;
        sample(&t, name).filter(|v| ok(*v)).map(|_| t)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn status(c: &Cluster) -> (i32, serde_json::Value) {
    let tls = c
        .tls_for(&Identity::Worker {
            name: "tester".into(),
        })
        .expect("tester cert");
    let out = std::process::Command::new(ibfabric_bin().expect("binary"))
        .args(["status", "--json", "--controller", &c.controllers[0].0])
        .args(["--router", &c.routers[0].addr])
        .arg("--ca")
        .arg(&tls.ca)
        .arg("--cert")
        .arg(&tls.cert)
        .arg("--key")
        .arg(&tls.key)
        .output()
        .expect("status runs");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status --json: {e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_reflection_and_status_tell_what_the_services_hold() {
    let mut c = Cluster::start(2, 1, "updn").expect("cluster starts");
    let st = c.converged(0, CONVERGE).await.expect("converges");
    let router = c.router_state(0).await.expect("router state");

    // Metrics match the state the services report.
    let t = scrape_until(&c, "ctl", "ibfabric_subnets_live", |v| v == 2.0).await;
    assert_eq!(sample(&t, "ibfabric_controller_leader"), Some(1.0), "{t}");
    assert_eq!(sample(&t, "ibfabric_controller_term"), Some(st.term as f64));
    assert_eq!(sample(&t, "ibfabric_routers"), Some(1.0));
    assert!(
        sample(&t, "ibfabric_controller_pushes_total{kind=\"egress\"}").is_some_and(|v| v >= 1.0),
        "{t}"
    );
    assert!(
        sample(&t, "ibfabric_controller_compute_seconds_count").is_some_and(|v| v >= 1.0),
        "{t}"
    );
    assert_eq!(sample(&t, "ibfabric_store_ok"), Some(1.0));
    // The alert rules' inputs: exact lag flags, left-out flags, and the
    // certificates' expiry (a year out for the cluster's certificates).
    for s in st.subnets.iter() {
        let flag = format!(
            "ibfabric_subnet_mapping_behind{{subnet=\"{}\"}}",
            s.agent_id
        );
        assert!(sample(&t, &flag).is_some(), "{flag}: {t}");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let own = sample(
        &t,
        "ibfabric_certificate_expiry_timestamp_seconds{certificate=\"own\"}",
    )
    .expect("own certificate's expiry");
    assert!(own > now + 300.0 * 86_400.0, "{own}");
    let r = scrape_until(&c, "router0", "ibfabric_router_version", |v| {
        v == router.version as f64
    })
    .await;
    assert_eq!(
        sample(&r, "ibfabric_router_rules"),
        Some(f64::from(router.rules)),
        "{r}"
    );
    let a = scrape_until(
        &c,
        &c.agents[0].name.clone(),
        "ibfabric_agent_deadlock_free",
        |v| v == 1.0,
    )
    .await;
    assert!(
        sample(&a, "ibfabric_agent_route_seconds_count{engine=\"updn\"}").is_some_and(|v| v >= 1.0),
        "{a}"
    );
    assert_eq!(sample(&a, "ibfabric_agent_vls"), Some(1.0), "{a}");

    // Health and reflection, over the same mutual TLS as the service.
    let ch = c
        .connect(&c.controllers[0].0, Role::Controller)
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(ch.clone());
    for service in ["ibfabric.v1.Controller", ""] {
        let s = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health answers")
            .into_inner();
        assert_eq!(
            s.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }
    let mut refl =
        tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient::new(ch);
    let req = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            ),
        ),
    };
    let mut answers = refl
        .server_reflection_info(tokio_stream::iter([req]))
        .await
        .expect("reflection answers")
        .into_inner();
    let first = answers
        .message()
        .await
        .expect("a reply")
        .expect("one reply");
    let Some(
        tonic_reflection::pb::v1::server_reflection_response::MessageResponse::ListServicesResponse(
            list,
        ),
    ) = first.message_response
    else {
        panic!("not a service list: {first:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in ["ibfabric.v1.Controller", "grpc.health.v1.Health"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }

    // A refused request is counted, by RPC and code.
    let rogue = Transport::Tls(c.tls_for(&Identity::Router { guid: 0x77 }).expect("cert"));
    let e = proto::client::controller_client(
        c.connect_as(&c.controllers[0].0, Role::Controller, &rogue)
            .await
            .expect("connect"),
    )
    .follow_egress(v1::WatchEgressRequest {
        router_guid: c.routers[0].guid,
        have_version: 0,
        max_message_bytes: 0,
    })
    .await
    .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    scrape_until(
        &c,
        "ctl",
        "ibfabric_requests_refused_total{rpc=\"/ibfabric.v1.Controller/FollowEgress\",code=\"permission_denied\"}",
        |v| v >= 1.0,
    )
    .await;

    // status: the leader, both subnets, the router's versions, nothing lags.
    let (code, v) = status(&c);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["leader"], "ctl", "{v}");
    assert_eq!(v["term"], st.term);
    assert_eq!(v["subnets"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["routers_asked"][0]["version"], router.version, "{v}");
    assert_eq!(v["lagging"].as_array().map(Vec::len), Some(0), "{v}");

    // SIGHUP with a new engine in the agent's file: the agent routes with
    // it through an ordered, checked update and reports it.
    let cfg = c.agents[0].config.clone();
    let text = std::fs::read_to_string(&cfg).expect("agent config");
    std::fs::write(&cfg, text.replace("engine = \"updn\"", "engine = \"dfdn\"")).expect("rewrite");
    c.agents[0].proc.signal("HUP").expect("SIGHUP");
    let prefix = c.agents[0].prefix;
    let routing = wait_for(
        "the agent to report its reloaded engine",
        CONVERGE,
        || async {
            let st = c.state(0).await?;
            let s = st.subnets.into_iter().find(|s| s.subnet_prefix == prefix)?;
            s.routing.filter(|r| r.engine == "dfdn")
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.agents[0].proc.log_tail()));
    assert!(routing.deadlock_free && routing.verified, "{routing:?}");
    let u = routing.update.expect("the update is described");
    assert_eq!(u.method, "recompute", "{u:?}");
    assert!(u.reason.contains("config reloaded"), "{u:?}");

    // An agent stops: once its lease runs out, status names it and exits 6.
    let gone = c.agents[1].name.clone();
    c.agents[1].proc.kill();
    let v = wait_for("status to see the agent gone", CONVERGE, || async {
        let (code, v) = status(&c);
        (code == 6).then_some(v)
    })
    .await
    .expect("degraded");
    let lag = v["lagging"].to_string();
    assert!(
        lag.contains(&format!("subnet {gone}")) && lag.contains("not live"),
        "{v}"
    );
}

/// A controller started as systemd would start it: the config from
/// `IBFABRIC_CONFIG`, a key overridden from the environment, `READY=1` on
/// `NOTIFY_SOCKET` once it serves, and a SIGHUP that re-reads the file and
/// says a restart is needed to apply a change.
#[test]
fn a_service_reads_env_overrides_notifies_readiness_and_rereads_on_sighup() {
    let d = tempfile::tempdir().expect("tmp");
    let cfg = d.path().join("controller.toml");
    let port = integration_tests::cluster::free_port().expect("port");
    // The file's listen address is taken; the environment moves it.
    std::fs::write(
        &cfg,
        "id = \"ctl\"\nlisten = \"127.0.0.1:1\"\ninsecure = true\n",
    )
    .expect("config");
    let notify = d.path().join("notify");
    let sock = std::os::unix::net::UnixDatagram::bind(&notify).expect("notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let log = d.path().join("ctl.log");
    let mut child = std::process::Command::new(ibfabric_bin().expect("binary"))
        .arg("controller")
        .env("IBFABRIC_CONFIG", &cfg)
        .env("IBFABRIC_LISTEN", format!("127.0.0.1:{port}"))
        .env("NOTIFY_SOCKET", &notify)
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("starts");
    let mut buf = [0u8; 64];
    let n = sock.recv(&mut buf).unwrap_or_else(|e| {
        let _ = child.kill();
        panic!(
            "no READY=1: {e}; log: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert_eq!(&buf[..n], b"READY=1");
    // It serves on the overridden address.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let st = rt
        .block_on(async {
            let mut c = proto::client::controller(
                &format!("http://127.0.0.1:{port}"),
                &Transport::Insecure,
            )
            .await?;
            anyhow::Ok(c.state(v1::StateRequest {}).await?.into_inner())
        })
        .expect("state on the overridden port");
    assert_eq!(st.controller_id, "ctl");
    // SIGHUP after an edit: re-read, and the log says it applies on restart.
    std::fs::write(
        &cfg,
        "id = \"ctl\"\nlisten = \"127.0.0.1:1\"\ninsecure = true\nlease_seconds = 20\n",
    )
    .expect("edit");
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let said = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("applies it on restart")
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        said,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}
