//! The example configs in deploy/ parse with the services' own parsers.

use controller::config::StoreKind;
use settings::ConfigFile;
use std::path::Path;

fn text(name: &str) -> (String, String) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/config")
        .join(name);
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (t, p.display().to_string())
}

#[test]
fn example_configs_are_valid() {
    let (t, p) = text("controller.toml");
    let c = controller::config::ControllerConfig::parse(&t, &p).expect("controller config");
    assert!(
        matches!(&c.store.kind, StoreKind::Etcd { endpoints, tls: Some(_) } if !endpoints.is_empty()),
        "{:?}",
        c.store
    );
    let (t, p) = text("agent.toml");
    let a = agent::config::AgentConfig::parse(&t, &p).expect("agent config");
    assert_eq!(a.subnet_prefix, 0xfec0_0000_0000_0001);
    assert!(a.watch_topology);
    let (t, p) = text("router.toml");
    let r = router_fw::config::RouterConfig::parse(&t, &p).expect("router config");
    assert_eq!(r.router_guid, 0x0004_0000_0000_0000);
    let (t, p) = text("worker.toml");
    let w = worker::config::WorkerConfig::parse(&t, &p).expect("worker config");
    assert_eq!(w.name, "w1");
    // Every example speaks mutual TLS, with the certificate of its role.
    for (t, stem) in [
        (c.transport(), "controller"),
        (a.transport(), "agent-0xfec0000000000001"),
        (r.transport(), "router-0x0004000000000000"),
        (w.transport(), "worker-w1"),
    ] {
        match t {
            ibtls::Transport::Tls(s) => assert!(s.cert.ends_with(format!("{stem}.pem")), "{s:?}"),
            ibtls::Transport::Insecure => panic!("{stem}: an example runs in plaintext"),
        }
    }
}

#[test]
fn config_errors_name_the_file_and_line() {
    let e = controller::config::ControllerConfig::parse("id = \"x\"\nlisten = 5\n", "c.toml")
        .expect_err("listen must be an address");
    let msg = e.to_string();
    assert!(
        msg.starts_with("c.toml: ") && msg.contains("line 2"),
        "{msg}"
    );
    let e = controller::config::ControllerConfig::parse(
        "id = \"x\"\nlisten = \"127.0.0.1:1\"\n[store]\nkind = \"etcd\"\n",
        "c.toml",
    )
    .expect_err("etcd needs endpoints");
    assert!(e.to_string().contains("endpoints"), "{e}");
    let e = router_fw::config::RouterConfig::parse(
        "router_guid = \"nope\"\nlisten = \"127.0.0.1:1\"\n",
        "r.toml",
    )
    .expect_err("bad guid");
    assert!(e.to_string().contains("router_guid"), "{e}");
}

/// The systemd units: notify-type services that reload on SIGHUP, the
/// agent ordered after OpenSM; `systemd-analyze verify` accepts them (run
/// against the built binary) where systemd's tools are installed.
#[test]
fn systemd_units_notify_reload_and_verify() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/systemd");
    let tmp = tempfile::tempdir().expect("tmp");
    for role in ["agent", "controller", "router", "worker"] {
        let name = format!("ibfabric-{role}.service");
        let unit = std::fs::read_to_string(dir.join(&name)).expect("unit");
        for line in [
            "Type=notify",
            "ExecReload=/bin/kill -HUP $MAINPID",
            &format!("ExecStart=/usr/bin/ibfabric {role} "),
            "User=ibfabric",
            &format!("StateDirectory=ibfabric/{role}\n"),
        ] {
            assert!(unit.contains(line), "{name}: {line}");
        }
        if role == "agent" {
            assert!(
                unit.contains("After=network-online.target opensm.service"),
                "{unit}"
            );
        }
        std::fs::write(
            tmp.path().join(&name),
            unit.replace("/usr/bin/ibfabric", env!("CARGO_BIN_EXE_ibfabric")),
        )
        .expect("copy");
    }
    let units: Vec<_> = ["agent", "controller", "router", "worker"]
        .iter()
        .map(|r| tmp.path().join(format!("ibfabric-{r}.service")))
        .collect();
    match std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .output()
    {
        Err(e) => eprintln!("SKIP systemd-analyze verify: systemd-analyze not runnable ({e})"),
        Ok(o) => assert!(
            o.status.success() && o.stderr.is_empty(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

/// The alert rules load (`promtool check rules`), pass their unit tests
/// (`promtool test rules`: each alert fires on the series that should
/// raise it, and only then), and name only metrics the services export.
#[test]
fn the_alert_rules_check_and_pass_their_unit_tests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let rules = dir.join("ibfabric.rules.yml");
    let tests = dir.join("ibfabric.rules.test.yml");
    for args in [
        vec!["check", "rules", rules.to_str().expect("utf-8")],
        vec!["test", "rules", tests.to_str().expect("utf-8")],
    ] {
        let o = match std::process::Command::new("promtool").args(&args).output() {
            Ok(o) => o,
            Err(e) => panic!(
                "promtool not runnable ({e}): scripts/install-deps.sh installs Debian's prometheus"
            ),
        };
        assert!(
            o.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Every ibfabric_* name in the rules is one the code exports.
    let text = std::fs::read_to_string(&rules).expect("rules");
    let sources: String = [
        "proto/src/ops.rs",
        "src/cmd/runtime.rs",
        "proto/src/listen.rs",
        "proto/src/tls_listen.rs",
    ]
    .iter()
    .map(|p| {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(p)).expect("source")
    })
    .collect();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("ibfabric_") {
            assert!(
                sources.contains(&format!("\"{word}\"")),
                "the rules name {word}, which no service exports"
            );
        }
    }
}
