//! Verification and DF-DN routing split over worker processes (mutual TLS
//! on loopback): the merged report and the merged tables equal one
//! process's, byte for byte, for several worker counts and cuts; a worker
//! killed mid-job loses its open part to the others and nothing changes;
//! with no worker reachable the parts run locally and the output says so.

use ibtls::Identity;
use integration_tests::cluster::{Proc, free_port, issue_into};
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
        self.worker_with(name, false, "")
    }

    /// Starts worker `name` with `more` appended to its config (tables
    /// after its `[tls]`), advertising its address when `advertise`.
    fn worker_with(&self, name: &str, advertise: bool, more: &str) -> (Proc, String) {
        self.worker_cfg(name, advertise, "", more)
    }

    /// [`Self::worker_with`], with `top` among the config's top-level keys.
    fn worker_cfg(&self, name: &str, advertise: bool, top: &str, more: &str) -> (Proc, String) {
        let tls = issue_into(
            self.dir.path(),
            &self.ca,
            &Identity::Worker { name: name.into() },
        )
        .expect("cert");
        let port = free_port().expect("port");
        let addr = format!("http://127.0.0.1:{port}");
        let adv = if advertise {
            format!("advertise = \"{addr}\"\n")
        } else {
            String::new()
        };
        let cfg = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "name = \"{name}\"\nlisten = \"127.0.0.1:{port}\"\n{adv}{top}\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n\n{more}",
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
        (p, addr)
    }

    /// Starts the workers `names` and waits until each listens.
    fn workers(&self, names: &[&str]) -> Vec<(Proc, String)> {
        let ws: Vec<(Proc, String)> = names.iter().map(|n| self.worker(n)).collect();
        for (_, a) in &ws {
            wait_listening(a);
        }
        ws
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

/// Kills worker `pid` (SIGKILL) as soon as its log says it loaded one more
/// job than it has now; gives up after 60 s. Joins to whether it killed.
fn kill_on_next_load(log: std::path::PathBuf, pid: u32) -> std::thread::JoinHandle<bool> {
    kill_after(log, pid, "job loaded", 1)
}

/// Kills worker `pid` (SIGKILL) once its log holds `more` lines saying
/// `what` beyond those it holds now; gives up after 60 s. Joins to whether
/// it killed.
fn kill_after(
    log: std::path::PathBuf,
    pid: u32,
    what: &'static str,
    more: usize,
) -> std::thread::JoinHandle<bool> {
    let count = move |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .matches(what)
            .count()
    };
    let before = count(&log);
    std::thread::spawn(move || {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            if count(&log) >= before + more {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    })
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
    let mut v = json_of(&["verify", "-t", net, "-d", dir, "--json"], extra);
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
    let mut workers = s.workers(&["w1", "w2", "w3"]);
    let client = s.client_args();
    for (topo, engine) in [
        (&["dragonfly", "--p", "3"][..], "dfdn"),
        (&["slimfly", "--q", "5"][..], "nue"),
        (&["torus", "--dims", "4x4x4"][..], "lash"),
        // LMC 1: the parts are cut over every LID of every port, and the
        // workers get the fabric with its LMC.
        (&["dragonfly", "--p", "3", "--lmc", "1"][..], "dfsssp"),
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
    let killer = kill_on_next_load(workers[1].0.log.clone(), workers[1].0.pid());
    let addrs: Vec<String> = workers.iter().map(|(_, a)| a.clone()).collect();
    let mut extra = vec![
        "--workers".to_string(),
        addrs.join(","),
        "--parts-per-worker".into(),
        "100".into(),
    ];
    extra.extend(client.clone());
    let (dist, job) = verify(&net, &out, &extra);
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

/// The three table files `route` writes, as bytes.
/// Starts agent `name` with config `cfg` and waits until it has written
/// its three table files into `out`.
fn agent_writes_tables(s: &Setup, name: &str, cfg: &str, out: &str) -> Proc {
    let agent = Proc::spawn(name, &["agent", "--config", cfg], s.dir.path()).expect("agent");
    let t = Instant::now();
    let files = [
        "ibfabric-lfts.bin",
        "ibfabric-sl2vl.bin",
        "ibfabric-pathsl.bin",
    ];
    while !files
        .iter()
        .all(|f| std::path::Path::new(&format!("{out}/{f}")).exists())
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the agent wrote no tables: {}",
            agent.log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Files are replaced whole; the last one written may still be moving in.
    std::thread::sleep(Duration::from_millis(300));
    agent
}

fn tables(dir: &str) -> Vec<Vec<u8>> {
    [
        "ibfabric-lfts.bin",
        "ibfabric-sl2vl.bin",
        "ibfabric-pathsl.bin",
    ]
    .iter()
    .map(|f| std::fs::read(format!("{dir}/{f}")).unwrap_or_else(|e| panic!("{dir}/{f}: {e}")))
    .collect()
}

/// `route --json` with `extra`; returns the JSON.
fn route_json(net: &str, engine: &str, out: &str, extra: &[String]) -> serde_json::Value {
    json_of(
        &["route", "-t", net, "-e", engine, "-o", out, "--json"],
        extra,
    )
}

/// The JSON `ibfabric ARGS EXTRA` prints (it must succeed).
fn json_of(args: &[&str], extra: &[String]) -> serde_json::Value {
    let mut argv: Vec<&str> = args.to_vec();
    argv.extend(extra.iter().map(String::as_str));
    let out = ibfabric(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    serde_json::from_str(&out).expect("JSON")
}

fn job<'a>(v: &'a serde_json::Value, kind: &str) -> Option<&'a serde_json::Value> {
    v["jobs"]
        .as_array()
        .and_then(|js| js.iter().find(|j| j["kind"] == kind))
}

/// The routing job of `route --json` output `v` ran in rounds on `k`
/// workers: all `units` there, none here, every worker holding some.
fn every_worker_held(v: &serde_json::Value, units: u64, k: usize) {
    let r = job(v, "route").expect("routed on the workers");
    assert_eq!(
        (r["parts"].as_u64(), r["local_parts"].as_u64()),
        (Some(units), Some(0)),
        "{r}"
    );
    let holders: std::collections::BTreeSet<&str> = r["part_runs"]
        .as_array()
        .expect("part runs")
        .iter()
        .filter_map(|p| p["by"].as_str())
        .collect();
    assert_eq!(holders.len(), k, "every worker held units: {r}");
}

/// The addresses of the workers a job ran on, sorted.
fn addresses(job: &serde_json::Value) -> Vec<String> {
    let mut a: Vec<String> = job["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| w["address"].as_str().unwrap_or("").to_string())
        .collect();
    a.sort();
    a
}

fn lost_in(j: &serde_json::Value) -> Vec<String> {
    j["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter(|w| !w["lost"].is_null())
        .map(|w| w["address"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn dfdn_routed_on_workers_writes_the_one_process_tables() {
    let s = Setup::new();
    let mut workers = s.workers(&["r1", "r2", "r3"]);
    let client = s.client_args();
    let all: Vec<String> = workers.iter().map(|(_, a)| a.clone()).collect();
    let with = |k: usize, parts: &str, more: &[&str]| {
        let addrs = &all[..k];
        let mut extra = vec![
            "--workers".to_string(),
            addrs.join(","),
            "--parts-per-worker".into(),
            parts.into(),
        ];
        extra.extend(more.iter().map(|m| m.to_string()));
        extra.extend(client.clone());
        extra
    };
    // Dragonfly and Slim Fly keep the trees; on the fat tree they are
    // lopsided and the merge falls back to SSSP: the same choice as one
    // process makes, from the merged link load.
    for (name, topo) in [
        ("df", &["dragonfly", "--p", "3"][..]),
        ("sf", &["slimfly", "--q", "5"][..]),
        ("ft", &["kary", "--k", "4", "--n", "3"][..]),
    ] {
        let net = s.path(&format!("{name}.net"));
        let mut g = vec!["gen"];
        g.extend_from_slice(topo);
        g.extend_from_slice(&["-o", &net]);
        ibfabric(&g).expect("gen");
        let one = s.path(&format!("{name}-one"));
        let local = route_json(&net, "dfdn", &one, &[]);
        assert_eq!(local["deadlock_free"], true, "{name}");
        assert_eq!(local["broken_pairs"], 0, "{name}");
        for (k, parts) in [(1, "1"), (2, "3"), (3, "7")] {
            let out = s.path(&format!("{name}-{k}"));
            let v = route_json(&net, "dfdn", &out, &with(k, parts, &[]));
            assert_eq!(
                tables(&out),
                tables(&one),
                "{name}: {k} workers x {parts} parts"
            );
            assert_eq!(v["deadlock_free"], true);
            assert_eq!(v["vls"], local["vls"]);
            let r = job(&v, "route").expect("a routing job");
            let done: u64 = r["part_runs"]
                .as_array()
                .expect("part runs")
                .iter()
                .filter(|p| p["by"] != "local")
                .count() as u64;
            assert_eq!(
                Some(done),
                r["parts"].as_u64(),
                "every part on a worker: {r}"
            );
            assert!(job(&v, "verify").is_some(), "verified on the workers too");
        }
    }

    // A base that does not split: routed here, verified on the workers,
    // the same tables.
    let net = s.path("df.net");
    {
        let one = s.path("dfdn-minhop-one");
        let more = ["--base", "minhop"];
        route_json(&net, "dfdn", &one, &more.map(String::from));
        let out = s.path("dfdn-minhop-farm");
        let v = route_json(&net, "dfdn", &out, &with(2, "2", &more));
        assert_eq!(tables(&out), tables(&one), "dfdn on the minhop base");
        assert!(job(&v, "route").is_none(), "the minhop base routed here");
        assert!(job(&v, "verify").is_some());
    }

    // MinHop splits by source switch: each worker computes LFT rows, and
    // the stacked rows are the one process's LFTs (on the fat tree, where
    // MinHop is deadlock free; the unit test covers a Dragonfly and a
    // torus).
    let none: [&str; 0] = [];
    for (name, extra) in [("ft", &none[..])] {
        let net = s.path(&format!("{name}.net"));
        let plain: Vec<String> = extra.iter().map(|m| m.to_string()).collect();
        let one = s.path(&format!("{name}-minhop-one"));
        route_json(&net, "minhop", &one, &plain);
        for (k, parts) in [(1, "1"), (3, "3")] {
            let out = s.path(&format!("{name}-minhop-{k}"));
            let v = route_json(&net, "minhop", &out, &with(k, parts, extra));
            let lft = |d: &str| std::fs::read(format!("{d}/ibfabric-lfts.bin")).expect("lfts");
            assert_eq!(lft(&out), lft(&one), "minhop {name}: {k} workers");
            let r = job(&v, "route").expect("minhop routed on the workers");
            assert_eq!(r["local_parts"], 0, "{r}");
            assert_eq!(
                r["parts"].as_u64(),
                Some((k * parts.parse::<usize>().unwrap_or(1)) as u64)
            );
        }
    }

    // Nue splits by virtual layer: each worker routes its layers round by
    // round on the loads summed here; the tables are the one process's.
    let four = ["--max-vls", "4"];
    let one = s.path("nue-one");
    route_json(&net, "nue", &one, &four.map(String::from));
    for k in [1, 3] {
        let out = s.path(&format!("nue-{k}"));
        let v = route_json(&net, "nue", &out, &with(k, "1", &four));
        assert_eq!(tables(&out), tables(&one), "nue on {k} workers");
        assert_eq!(v["deadlock_free"], true);
        every_worker_held(&v, 4, k);
    }

    // SSSP in streams splits as Nue does, by stream: sssp's LFTs (on the
    // fat tree, where minimal routes are deadlock free) and dfsssp's
    // layered tables (its layering runs here) are the one process's, and
    // they differ from classic SSSP's only through the streams.
    let streams = ["--sssp-streams", "6"];
    for (engine, net) in [("sssp", s.path("ft.net")), ("dfsssp", net.clone())] {
        let one = s.path(&format!("{engine}-streams-one"));
        let local = route_json(&net, engine, &one, &streams.map(String::from));
        assert_eq!(local["deadlock_free"], true, "{engine}");
        assert_eq!(local["broken_pairs"], 0, "{engine}");
        for k in [1, 3] {
            let out = s.path(&format!("{engine}-streams-{k}"));
            let v = route_json(&net, engine, &out, &with(k, "1", &streams));
            let lft = |d: &str| std::fs::read(format!("{d}/ibfabric-lfts.bin")).expect("lfts");
            assert_eq!(lft(&out), lft(&one), "{engine} streams on {k} workers");
            if engine == "dfsssp" {
                assert_eq!(tables(&out), tables(&one), "dfsssp on {k} workers");
            }
            every_worker_held(&v, 6, k);
        }
    }
    // A worker killed once it holds the routing job of a larger fabric:
    // its parts go to the others (or, if it was quick, it is missed by the
    // verification job); the tables do not change.
    let net = s.path("df5.net");
    ibfabric(&["gen", "dragonfly", "--p", "5", "-o", &net]).expect("gen");
    let one = s.path("df5-one");
    route_json(&net, "dfdn", &one, &[]);
    let killer = kill_on_next_load(workers[1].0.log.clone(), workers[1].0.pid());
    let out = s.path("df5-farm");
    let v = route_json(&net, "dfdn", &out, &with(3, "50", &[]));
    assert!(killer.join().expect("killer"), "the victim was killed");
    assert_eq!(
        tables(&out),
        tables(&one),
        "tables with a worker lost mid-job"
    );
    let lost: Vec<String> = ["route", "verify"]
        .iter()
        .filter_map(|k| job(&v, k))
        .flat_map(lost_in)
        .collect();
    assert!(
        !lost.is_empty() && lost.iter().all(|a| *a == all[1]),
        "the victim and only it was lost: {v}"
    );
    workers[1].0.kill();

    // A worker killed after routing some rounds: its layers start again on
    // another worker, which replays those rounds from the loads kept by
    // the caller; the tables do not change.
    let net4 = s.path("df4.net");
    ibfabric(&["gen", "dragonfly", "--p", "4", "-o", &net4]).expect("gen");
    let one4 = s.path("nue4-one");
    route_json(&net4, "nue", &one4, &four.map(String::from));
    let victim = &workers[2].0;
    let killer = kill_after(victim.log.clone(), victim.pid(), "round routed", 4);
    let out = s.path("nue4-farm");
    let mut extra = vec!["--workers".to_string(), format!("{},{}", all[0], all[2])];
    extra.extend(four.map(String::from));
    extra.extend(client.clone());
    let v = route_json(&net4, "nue", &out, &extra);
    assert!(killer.join().expect("killer"), "the victim was killed");
    assert_eq!(
        tables(&out),
        tables(&one4),
        "nue with a worker lost mid-job"
    );
    let r = job(&v, "route").expect("nue routed on the workers");
    assert_eq!(lost_in(r), vec![all[2].clone()], "{r}");
    assert_eq!(
        r["local_parts"], 0,
        "the layers moved to a live worker: {r}"
    );
    workers[2].0.kill();

    // No worker reachable: routed and verified here, said so.
    for (p, _) in &mut workers {
        p.kill();
    }
    let out = s.path("df5-alone");
    let v = route_json(&net, "dfdn", &out, &with(3, "2", &[]));
    assert_eq!(tables(&out), tables(&one));
    let r = job(&v, "route").expect("route job");
    assert_eq!(r["local_parts"], r["parts"], "{r}");
}

/// A worker that holds one job at a time, routing one in rounds, refuses
/// another job of the same caller rather than drop the one in use: the
/// newcomer's verification runs elsewhere (here) and is right, the routing
/// job is never given up on, nothing of it runs here, and the tables do not
/// change. (Two jobs that dropped each other in turn reloaded and dropped
/// each other again until one was given up on.)
#[test]
fn a_worker_keeps_a_job_in_rounds_and_refuses_the_newcomer() {
    let s = Setup::new();
    let (w, addr) = s.worker_cfg("busy", false, "max_jobs = 1\n", "");
    wait_listening(&addr);
    let client = s.client_args();
    let net = s.path("df4.net");
    ibfabric(&["gen", "dragonfly", "--p", "4", "-o", &net]).expect("gen");
    let small = s.path("df2.net");
    ibfabric(&["gen", "dragonfly", "--p", "2", "-o", &small]).expect("gen");
    let small_tables = s.path("df2-tables");
    route_json(&small, "dfdn", &small_tables, &[]);
    let four = ["--max-vls", "4"].map(String::from);
    let one = s.path("nue-one");
    route_json(&net, "nue", &one, &four);

    // Once the worker routed two rounds, the same caller's verification
    // asks to load its job there.
    let (log, before) = (w.log.clone(), loads_in(&w.log));
    let intruder = {
        let (small, small_tables) = (small.clone(), small_tables.clone());
        let mut extra = vec!["--workers".to_string(), addr.clone()];
        extra.extend(client.clone());
        std::thread::spawn(move || {
            let rounds = |p: &std::path::Path| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .matches("round routed")
                    .count()
            };
            let t = Instant::now();
            while rounds(&log) < 2 {
                if t.elapsed() > Duration::from_secs(60) {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let (v, job) = verify(&small, &small_tables, &extra);
            Some((v["deadlock_free"] == true, job))
        })
    };
    let out = s.path("nue-farm");
    let mut extra = vec!["--workers".to_string(), addr.clone()];
    extra.extend(four.clone());
    extra.extend(client.clone());
    let v = route_json(&net, "nue", &out, &extra);
    let (right, vjob) = intruder.join().expect("intruder").expect("rounds seen");
    assert!(right, "the other job ran, and right");
    let vjob = vjob.expect("the verification's job");
    assert_eq!(vjob["local_parts"], vjob["parts"], "it ran here: {vjob}");
    let why = vjob["workers"][0]["lost"].as_str().unwrap_or("");
    assert!(why.contains("in use"), "refused, and why: {vjob}");
    assert_eq!(
        tables(&out),
        tables(&one),
        "nue on a worker that refused another job"
    );
    let r = job(&v, "route").expect("nue routed on the worker");
    assert!(lost_in(r).is_empty(), "the worker was not given up on: {r}");
    assert_eq!(r["local_parts"], 0, "nothing ran here: {r}");
    // The routing job, then its verification's (the routing job idle by
    // then); never the refused one.
    assert_eq!(
        loads_in(&w.log),
        before + 2,
        "loads: the routing job once, its verification once"
    );
}

fn loads_in(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("job loaded")
        .count()
}

/// An agent with `workers` routes its subnet on them: the tables it writes
/// are those of `route -e dfdn` in one process, and the worker did the job.
#[test]
fn an_agent_routes_its_subnet_on_workers() {
    let s = Setup::new();
    // A worker serves the agents its config names.
    let (mut w, addr) = s.worker_cfg(
        "aw1",
        false,
        "coordinators = [\"ibfabric://agent/0xfec0000000000007\"]\n",
        "",
    );
    wait_listening(&addr);
    let net = s.path("agent.net");
    ibfabric(&["gen", "dragonfly", "--p", "3", "-o", &net]).expect("gen");
    let one = s.path("agent-one");
    route_json(&net, "dfdn", &one, &[]);

    let prefix = 0xfec0_0000_0000_0007u64;
    let tls = issue_into(s.dir.path(), &s.ca, &Identity::Agent { prefix }).expect("cert");
    let out = s.path("agent-out");
    let cfg = s.path("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "agent_id = \"sub7\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"{net}\"\nengine = \"dfdn\"\n\
             out_dir = \"{out}\"\nworkers = [\"{addr}\"]\n\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
            tls.ca.display(),
            tls.cert.display(),
            tls.key.display()
        ),
    )
    .expect("config");
    let mut agent = agent_writes_tables(&s, "agent", &cfg, &out);
    assert_eq!(tables(&out), tables(&one), "the agent's tables on workers");
    let log = std::fs::read_to_string(&agent.log).unwrap_or_default();
    assert!(log.contains("routed on workers"), "{log}");
    let wlog = std::fs::read_to_string(&w.log).unwrap_or_default();
    assert!(
        wlog.contains("job loaded"),
        "the worker got the job: {wlog}"
    );
    agent.kill();
    w.kill();
}

/// `status --worker` names each worker, the jobs it holds and the parts it
/// finished; a worker that does not answer is lagging (exit 6).
#[test]
fn status_asks_the_workers() {
    let s = Setup::new();
    let mut workers = s.workers(&["sw1"]);
    let net = s.path("st.net");
    ibfabric(&["gen", "dragonfly", "--p", "2", "-o", &net]).expect("gen");
    let out = s.path("st-out");
    let mut extra = vec![
        "--workers".to_string(),
        workers[0].1.clone(),
        "--parts-per-worker".into(),
        "3".into(),
    ];
    extra.extend(s.client_args());
    route_json(&net, "dfdn", &out, &extra);
    let mut ask = vec![
        "status".to_string(),
        "--json".into(),
        "--worker".into(),
        workers[0].1.clone(),
    ];
    ask.extend(s.client_args());
    let v = json_of(&[], &ask);
    let w = &v["workers_asked"][0];
    assert_eq!(w["name"], "sw1", "{v}");
    // The routing job and the verification job, three parts each.
    assert_eq!(w["jobs"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(w["parts_done"], 6, "{v}");
    assert_eq!(w["working"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["lagging"].as_array().map(Vec::len), Some(0), "{v}");

    let addr = workers[0].1.clone();
    workers[0].0.kill();
    let mut ask = vec![
        "status".to_string(),
        "--json".into(),
        "--worker".into(),
        addr,
    ];
    ask.extend(s.client_args());
    let argv: Vec<&str> = ask.iter().map(String::as_str).collect();
    let o = std::process::Command::new(integration_tests::ibfabric_bin().expect("binary"))
        .args(&argv)
        .output()
        .expect("status runs");
    assert_eq!(o.status.code(), Some(6), "a silent worker is lagging");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(v["workers_asked"][0]["error"].is_string(), "{v}");
}

/// Workers with a `[store]` register under a lease in a real etcd; `route
/// --workers-from` finds them there. A worker frozen (SIGSTOP) once it
/// loads a job keeps its TCP connection, but its lease ends: the
/// coordinator gives it up for that reason, its part goes to the others,
/// and the tables stay the one process's. The next job no longer finds it.
#[test]
fn workers_found_and_given_up_through_their_leases_in_etcd() {
    let etcd = store::testing::EtcdServer::start();
    let ns = store::testing::unique_namespace("workers-leases");
    let store = format!(
        "[store]\nkind = \"etcd\"\nendpoints = [\"{}\"]\ninsecure = true\nprefix = \"{ns}\"\nelection_ttl_seconds = 1\n",
        etcd.endpoint()
    );
    let s = Setup::new();
    let ws: Vec<(Proc, String)> = ["l1", "l2", "l3"]
        .iter()
        .map(|n| s.worker_cfg(n, true, "coordinators = [\"ibfabric://agent/*\"]\n", &store))
        .collect();
    let registered = |name: &str| {
        std::fs::read_to_string(s.dir.path().join(format!("{name}.log")))
            .unwrap_or_default()
            .contains("registered in the store")
    };
    let t = Instant::now();
    while !["l1", "l2", "l3"].iter().all(|n| registered(n)) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "workers never registered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let store_file = s.path("store.toml");
    std::fs::write(&store_file, &store).expect("store file");
    let net = s.path("dfl.net");
    ibfabric(&["gen", "dragonfly", "--p", "5", "-o", &net]).expect("gen");
    let one = s.path("dfl-one");
    route_json(&net, "dfdn", &one, &[]);
    let mut extra = vec![
        "--workers-from".to_string(),
        store_file.clone(),
        "--parts-per-worker".into(),
        "20".into(),
    ];
    extra.extend(s.client_args());

    let out = s.path("dfl-all");
    let v = route_json(&net, "dfdn", &out, &extra);
    assert_eq!(
        tables(&out),
        tables(&one),
        "found in the store: same tables"
    );
    let r = job(&v, "route").expect("routing job");
    let found = addresses(r);
    let mut want: Vec<String> = ws.iter().map(|(_, a)| a.clone()).collect();
    want.sort();
    assert_eq!(
        found, want,
        "every registered worker, by its advertised URL"
    );
    assert!(lost_in(r).is_empty(), "{r}");
    // verify finds them the same way, and its merged report is the one
    // process's.
    let (here, none) = verify(&net, &one, &[]);
    assert!(none.is_none(), "verified here without workers");
    let (there, vjob) = verify(&net, &one, &extra);
    assert_eq!(there, here, "the report verified on the workers");
    let vjob = vjob.expect("verification job");
    assert_eq!(
        addresses(&vjob),
        want,
        "verify --workers-from: every registered worker"
    );
    // status finds them too, each answering as the name it leased.
    let mut args = vec![
        "status".to_string(),
        "--workers-from".into(),
        store_file.clone(),
        "--json".into(),
    ];
    args.extend(s.client_args());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let st: serde_json::Value =
        serde_json::from_str(&ibfabric(&argv).expect("status")).expect("JSON");
    let asked = st["workers_asked"].as_array().expect("workers_asked");
    assert_eq!(asked.len(), 3, "{st}");
    for w in asked {
        assert_eq!(w["registered_as"], w["name"], "{w}");
        assert!(w["jobs"].as_array().is_some_and(|j| !j.is_empty()), "{w}");
    }
    assert_eq!(st["lagging"].as_array().map(Vec::len), Some(0), "{st}");
    assert_eq!(
        st["parts_held"],
        serde_json::json!([]),
        "no job, no part held"
    );

    // While a job runs, the store records which worker holds which part,
    // each under a lease of the worker's; the records go when it ends.
    let status_json = || -> serde_json::Value {
        serde_json::from_str(&ibfabric(&argv).expect("status")).expect("JSON")
    };
    let net4 = s.path("dfl4.net");
    ibfabric(&["gen", "dragonfly", "--p", "4", "-o", &net4]).expect("gen");
    let (n4, out4) = (net4.clone(), s.path("dfl4-nue"));
    let mut nue_extra = extra.clone();
    nue_extra.extend(["--max-vls".to_string(), "4".into()]);
    let nue_job = std::thread::spawn(move || route_json(&n4, "nue", &out4, &nue_extra));
    let t = Instant::now();
    let mut seen: Vec<serde_json::Value> = Vec::new();
    while seen.len() < 3 && !nue_job.is_finished() && t.elapsed() < Duration::from_secs(120) {
        seen = status_json()["parts_held"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["part"].as_str().is_some_and(|n| n.contains("-layers-")))
            .collect();
    }
    let v = nue_job.join().expect("nue job");
    assert!(job(&v, "route").is_some(), "nue routed on the workers: {v}");
    let mut holders: Vec<&str> = seen.iter().filter_map(|p| p["worker"].as_str()).collect();
    holders.sort();
    assert_eq!(
        holders,
        ["l1", "l2", "l3"],
        "each worker's layers recorded: {seen:?}"
    );
    let t = Instant::now();
    while status_json()["parts_held"] != serde_json::json!([]) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "records outlived the job"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Frozen, not dead: only the lease tells.
    let log = s.dir.path().join("l2.log");
    let pid = ws[1].0.pid();
    let before = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .matches("job loaded")
        .count();
    let stopper = std::thread::spawn(move || {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            let n = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .matches("job loaded")
                .count();
            if n > before {
                let _ = std::process::Command::new("kill")
                    .args(["-STOP", &pid.to_string()])
                    .status();
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    });
    let out = s.path("dfl-frozen");
    let t = Instant::now();
    let v = route_json(&net, "dfdn", &out, &extra);
    let took = t.elapsed();
    eprintln!("route + verify with a frozen worker (lease ttl 1 s): {took:?}");
    assert!(stopper.join().expect("stopper"), "l2 never loaded the job");
    assert_eq!(
        tables(&out),
        tables(&one),
        "a frozen worker changes nothing"
    );
    let r = job(&v, "route").expect("routing job");
    let l2 = r["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["address"] == ws[1].1.as_str())
        .expect("l2 in the job");
    let why = l2["lost"].as_str().unwrap_or_default();
    assert!(why.contains("lease in the store ended"), "l2: {l2}");
    // The connection's keepalive would take 15 s; the lease ends in about
    // 1-3 s. The verification job after it does not even wait for a
    // connection to the frozen worker (a connect would time out in 5 s).
    let route_s = r["seconds"].as_f64().unwrap_or(f64::MAX);
    assert!(route_s < 6.0, "routing job took {route_s} s");
    let ver = job(&v, "verify").expect("verification job");
    let l2v = ver["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .find(|w| w["address"] == ws[1].1.as_str())
        .expect("l2 in the verification job");
    assert!(
        l2v["lost"]
            .as_str()
            .is_some_and(|w| w.contains("lease in the store ended")),
        "{l2v}"
    );

    // Its key is gone: the next job does not find it.
    let out = s.path("dfl-next");
    let v = route_json(&net, "dfdn", &out, &extra);
    assert_eq!(tables(&out), tables(&one));
    let r = job(&v, "route").expect("routing job");
    let addrs: Vec<&str> = r["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter_map(|w| w["address"].as_str())
        .collect();
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    assert!(!addrs.contains(&ws[1].1.as_str()));
    // An agent with [workers_store] finds the two left the same way and
    // writes the tables it computes alone.
    let anet = s.path("agent-l.net");
    ibfabric(&["gen", "dragonfly", "--p", "3", "-o", &anet]).expect("gen");
    let aone = s.path("agent-l-one");
    route_json(&anet, "dfdn", &aone, &[]);
    let prefix = 0xfec0_0000_0000_0009u64;
    let tls = issue_into(s.dir.path(), &s.ca, &Identity::Agent { prefix }).expect("cert");
    let aout = s.path("agent-l-out");
    let acfg = s.path("agent-l.toml");
    std::fs::write(
        &acfg,
        format!(
            "agent_id = \"sub9\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"{anet}\"\nengine = \"dfdn\"\n\
             out_dir = \"{aout}\"\n\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n\n{}",
            tls.ca.display(),
            tls.cert.display(),
            tls.key.display(),
            store.replace("[store]", "[workers_store]")
        ),
    )
    .expect("config");
    let loads = |name: &str| {
        std::fs::read_to_string(s.dir.path().join(format!("{name}.log")))
            .unwrap_or_default()
            .matches("job loaded")
            .count()
    };
    let (l1_before, l3_before) = (loads("l1"), loads("l3"));
    let mut agent = agent_writes_tables(&s, "agent-l", &acfg, &aout);
    assert_eq!(
        tables(&aout),
        tables(&aone),
        "the agent's tables on leased workers"
    );
    let alog = std::fs::read_to_string(&agent.log).unwrap_or_default();
    assert!(alog.contains("routed on workers"), "{alog}");
    assert!(
        loads("l1") > l1_before && loads("l3") > l3_before,
        "both live workers got the agent's job"
    );
    agent.kill();

    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status();
    drop(ws);
    drop(etcd);
}

/// Loads `job` (named `name`, of `kind`) on the worker at `addr` as `id`.
async fn load_as(
    s: &Setup,
    addr: &str,
    id: &Identity,
    name: &str,
    kind: &str,
    topology: &[u8],
) -> Result<proto::v1::LoadReply, tonic::Status> {
    let tls = issue_into(s.dir.path(), &s.ca, id).expect("cert");
    let t = ibtls::Transport::Tls(tls);
    let ch = proto::client::connect(addr, &t, ibtls::Role::Worker)
        .await
        .expect("connect");
    let mut c = proto::v1::worker_client::WorkerClient::new(ch);
    let first = proto::v1::JobChunk {
        job: name.into(),
        kind: kind.into(),
        topology_bytes: topology.len() as u64,
        topology: topology.to_vec(),
        ..Default::default()
    };
    c.load(tokio_stream::iter(vec![first]))
        .await
        .map(|r| r.into_inner())
}

/// A worker shared by several callers: routers and agents it does not
/// name are refused; a job's name must be the digest of its content, so
/// no caller can put other tables under a name another computed; jobs
/// are held per caller, so a caller that loads many evicts only its own;
/// a victim's verification on the worker gives the same verdict before
/// and after the attempts.
#[test]
fn a_shared_worker_serves_each_caller_its_own_jobs() {
    let s = Setup::new();
    let (mut w, addr) = s.worker("shared");
    wait_listening(&addr);
    let client = s.client_args();
    let (net, out) = routed(&s, &["torus", "--dims", "4x4"], "lash");
    let on_worker = |s: &Setup| {
        let mut extra = vec![
            "--workers".to_string(),
            addr.clone(),
            "--whole-tables".into(),
        ];
        extra.extend(client.iter().cloned());
        let _ = s;
        verify(&net, &out, &extra).0
    };
    let before = on_worker(&s);
    assert_eq!(before["deadlock_free"], true);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let topo = std::fs::read(&net).expect("topology");
    let name = worker::coordinator::job_id(&topo, &[], "route dfdn");
    rt.block_on(async {
        for id in [
            Identity::Router { guid: 0x77 },
            Identity::Agent { prefix: 0xfec0 },
        ] {
            let e = load_as(&s, &addr, &id, &name, "route dfdn", &topo)
                .await
                .expect_err("refused");
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
        }
        let mallory = Identity::Worker {
            name: "mallory".into(),
        };
        // Other bytes under a name that is not theirs.
        let e = load_as(&s, &addr, &mallory, &name, "route dfdn", b"# not it\n")
            .await
            .expect_err("refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
        assert!(e.message().contains("not the digest"), "{}", e.message());
        // Many jobs of its own: they evict its own jobs only.
        for k in 0..6 {
            let kind = format!("route dfdn {k}");
            let name = worker::coordinator::job_id(&topo, &[], &kind);
            load_as(&s, &addr, &mallory, &name, &kind, &topo)
                .await
                .expect("its own job");
        }
    });
    assert_eq!(on_worker(&s), before, "the same verdict after the attempts");
    w.kill();
}
