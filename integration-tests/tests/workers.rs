//! Verification split over worker processes (mutual TLS on loopback): the
//! merged report equals one process's, for several worker counts and cuts;
//! a worker killed mid-job loses its open part to the others and the
//! report is still the same; with no worker reachable the parts run
//! locally and the output says so.

use ibtls::Identity;
use integration_tests::cluster::{free_port, issue_into, Proc};
use integration_tests::ibfabric;
use std::time::{Duration, Instant};

struct Setup {
    dir: tempfile::TempDir,
    ca: ibtls::CaBundle,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let ca = ibtls::generate_ca("workers test CA").expect("ca");
        std::fs::write(dir.path().join("ca.pem"), &ca.cert_pem).expect("ca.pem");
        Self { dir, ca }
    }

    fn path(&self, n: &str) -> String {
        self.dir.path().join(n).display().to_string()
    }

    /// Starts worker `name`; returns it and its address.
    fn worker(&self, name: &str) -> (Proc, String) {
        let tls = issue_into(
            self.dir.path(),
            &self.ca,
            &Identity::Worker { name: name.into() },
        )
        .expect("cert");
        let port = free_port().expect("port");
        let cfg = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "name = \"{name}\"\nlisten = \"127.0.0.1:{port}\"\n\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
                tls.ca.display(),
                tls.cert.display(),
                tls.key.display()
            ),
        )
        .expect("config");
        let p = Proc::spawn(
            name,
            &["worker", "--config", &cfg.display().to_string()],
            self.dir.path(),
        )
        .expect("worker starts");
        (p, format!("http://127.0.0.1:{port}"))
    }

    fn client_args(&self) -> Vec<String> {
        let tls = issue_into(
            self.dir.path(),
            &self.ca,
            &Identity::Worker { name: "ops".into() },
        )
        .expect("cert");
        vec![
            "--ca".into(),
            tls.ca.display().to_string(),
            "--cert".into(),
            tls.cert.display().to_string(),
            "--key".into(),
            tls.key.display().to_string(),
        ]
    }
}

fn wait_listening(addr: &str) {
    let hostport = addr.trim_start_matches("http://");
    let t = Instant::now();
    while std::net::TcpStream::connect(hostport).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{addr} never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `verify --json` of `dir` on `net`, without the timing and job fields.
fn verify(
    net: &str,
    dir: &str,
    extra: &[String],
) -> (serde_json::Value, Option<serde_json::Value>) {
    let mut args: Vec<String> = ["verify", "-t", net, "-d", dir, "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend_from_slice(extra);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ibfabric(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let mut v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let m = v.as_object_mut().expect("object");
    m.remove("verify_seconds");
    let job = m.remove("job");
    (v, job)
}

fn routed(s: &Setup, topo: &[&str], engine: &str) -> (String, String) {
    let net = s.path(&format!("{engine}.net"));
    let mut g = vec!["gen"];
    g.extend_from_slice(topo);
    g.extend_from_slice(&["-o", &net]);
    ibfabric(&g).expect("gen");
    let out = s.path(&format!("{engine}-out"));
    ibfabric(&["route", "-t", &net, "-e", engine, "-o", &out]).expect("route");
    (net, out)
}

#[test]
fn parts_verified_on_workers_merge_to_the_one_process_report() {
    let s = Setup::new();
    let mut workers: Vec<(Proc, String)> = ["w1", "w2", "w3"].iter().map(|n| s.worker(n)).collect();
    for (_, a) in &workers {
        wait_listening(a);
    }
    let client = s.client_args();
    for (topo, engine) in [
        (&["dragonfly", "--p", "3"][..], "dfdn"),
        (&["slimfly", "--q", "5"][..], "nue"),
        (&["torus", "--dims", "4x4x4"][..], "lash"),
    ] {
        let (net, out) = routed(&s, topo, engine);
        let (local, none) = verify(&net, &out, &[]);
        assert!(none.is_none());
        assert_eq!(local["deadlock_free"], true, "{engine}");
        for (k, parts) in [(1, "1"), (2, "3"), (3, "7")] {
            let addrs: Vec<String> = workers[..k].iter().map(|(_, a)| a.clone()).collect();
            let mut extra = vec![
                "--workers".to_string(),
                addrs.join(","),
                "--parts-per-worker".into(),
                parts.into(),
            ];
            // Two workers get the whole tables; the others each part's
            // columns only.
            if k == 2 {
                extra.push("--whole-tables".into());
            }
            extra.extend(client.clone());
            let (dist, job) = verify(&net, &out, &extra);
            assert_eq!(dist, local, "{engine}, {k} workers x {parts} parts");
            let job = job.expect("the job is described");
            assert_eq!(job["local_parts"], 0, "{job}");
            let done: u64 = job["workers"]
                .as_array()
                .expect("workers")
                .iter()
                .map(|w| w["parts"].as_u64().unwrap_or(0))
                .sum();
            assert_eq!(Some(done), job["parts"].as_u64(), "{job}");
        }
    }

    // A worker killed once it has the job: its open part goes to the
    // others, the report does not change.
    let (net, out) = routed(&s, &["dragonfly", "--p", "4"], "dfdn");
    let (local, _) = verify(&net, &out, &[]);
    let victim_log = workers[1].0.log.clone();
    let loads = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .matches("job loaded")
            .count()
    };
    let before = loads(&victim_log);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let pid = workers[1].0.pid();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && t.elapsed() < Duration::from_secs(60)
            {
                if loads(&victim_log) > before {
                    let _ = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status();
                    return true;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            false
        })
    };
    let addrs: Vec<String> = workers.iter().map(|(_, a)| a.clone()).collect();
    let mut extra = vec![
        "--workers".to_string(),
        addrs.join(","),
        "--parts-per-worker".into(),
        "100".into(),
    ];
    extra.extend(client.clone());
    let (dist, job) = verify(&net, &out, &extra);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(killer.join().expect("killer"), "the victim was killed");
    assert_eq!(dist, local, "the report with a worker lost mid-job");
    let job = job.expect("job");
    let lost: Vec<&serde_json::Value> = job["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter(|w| !w["lost"].is_null())
        .collect();
    assert_eq!(lost.len(), 1, "{job}");
    assert_eq!(lost[0]["address"], workers[1].1, "{job}");
    workers[1].0.kill();

    // No worker reachable: every part here, said so, same report.
    for (p, _) in &mut workers {
        p.kill();
    }
    let mut extra = vec!["--workers".to_string(), addrs.join(",")];
    extra.extend(client);
    let (dist, job) = verify(&net, &out, &extra);
    assert_eq!(dist, local);
    let job = job.expect("job");
    assert_eq!(job["local_parts"], job["parts"], "{job}");
}
