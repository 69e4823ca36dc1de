//! The Compose example (deploy/compose) up, routing, failing over and
//! down on the machine's Docker engine: images built FROM scratch by
//! deploy/container/build-image.sh (this workspace's ibfabric build and
//! Debian's etcd), the state made by deploy/compose/prepare.sh, and
//! `ibfabric status` run in a container on the stack's network; workers in
//! containers compute subnet0's DF-DN base routes and a `route --workers`
//! job run from a container, with both workers, found through their
//! leases in etcd, with one frozen (its lease ends) and one killed.
//! Skips, saying why, without a Docker daemon, docker-compose or etcd.

use integration_tests::chaos::docker_unavailable;
use integration_tests::ibfabric_bin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The tester's identity inside a container (prepare.sh's `tester`).
const TESTER_TLS: [&str; 6] = [
    "--ca",
    "/etc/ibfabric/ca.pem",
    "--cert",
    "/etc/ibfabric/worker-tester.pem",
    "--key",
    "/etc/ibfabric/worker-tester-key.pem",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The Compose command: `docker-compose`, else the `docker compose` plugin.
fn compose_cmd() -> Option<Vec<String>> {
    let works = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works(&["docker-compose", "version"]) {
        Some(vec!["docker-compose".into()])
    } else if works(&["docker", "compose", "version"]) {
        Some(vec!["docker".into(), "compose".into()])
    } else {
        None
    }
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Tears the stack and its images down however the test ends.
struct Stack {
    compose: Vec<String>,
    project: String,
    file: PathBuf,
    env: Vec<(String, String)>,
    images: Vec<String>,
}

impl Stack {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.compose[0]);
        c.args(&self.compose[1..])
            .args(["-p", &self.project, "-f"])
            .arg(&self.file)
            .args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn logs(&self) -> String {
        let o = self.cmd(&["logs", "--no-color", "--tail", "15"]).output();
        o.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// `ibfabric ...` in a container on the stack's `fabric` network, the
    /// tester's certificate at /etc/ibfabric and `mounts` (host, container).
    fn tester(&self, state: &Path, mounts: &[(&Path, &str)]) -> Command {
        self.tester_cmd("run", state, mounts)
    }

    /// `docker VERB` (`run`, which also removes the container, or
    /// `create`) of a tester container on the `fabric` network.
    fn tester_cmd(&self, verb: &str, state: &Path, mounts: &[(&Path, &str)]) -> Command {
        let mut c = Command::new("docker");
        c.arg(verb);
        if verb == "run" {
            c.arg("--rm");
        }
        c.args(["--network", &format!("{}_fabric", self.project)])
            .arg("-v")
            .arg(format!(
                "{}:/etc/ibfabric:ro",
                state.join("tester").display()
            ));
        for (host, inside) in mounts {
            c.arg("-v").arg(format!("{}:{inside}", host.display()));
        }
        c.arg(&self.images[0]);
        c
    }

    /// `ibfabric ARGS` in a tester container on both of the stack's
    /// networks (the workers' and etcd's): a container joins one network
    /// when created and the other before it starts.
    fn tester_on_both(&self, state: &Path, mounts: &[(&Path, &str)], args: &[&str]) -> Output {
        let o = run(self
            .tester_cmd("create", state, mounts)
            .args(args)
            .args(TESTER_TLS));
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        run(Command::new("docker").args([
            "network",
            "connect",
            &format!("{}_store", self.project),
            &id,
        ]));
        let out = Command::new("docker")
            .args(["start", "-a", &id])
            .output()
            .expect("docker start");
        let _ = Command::new("docker").args(["rm", "-f", &id]).output();
        assert!(
            out.status.success(),
            "tester {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `ibfabric status --json` from a container on the stack's network,
    /// with the tester's certificate.
    fn status(&self, state: &Path) -> (i32, serde_json::Value) {
        let o = self
            .tester(state, &[])
            .args([
                "status",
                "--json",
                "--controller",
                "https://ctl-a:7100,https://ctl-b:7100",
            ])
            .args(TESTER_TLS)
            .output()
            .expect("docker run");
        let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        (o.status.code().unwrap_or(-1), v)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.cmd(&["down", "-v", "--remove-orphans"]).output();
        for i in &self.images {
            let _ = Command::new("docker").args(["rmi", "-f", i]).output();
        }
    }
}

fn wait_status(
    s: &Stack,
    state: &Path,
    what: &str,
    ok: impl Fn(i32, &serde_json::Value) -> bool,
) -> serde_json::Value {
    let t0 = Instant::now();
    let mut last = (0, serde_json::Value::Null);
    while t0.elapsed() < Duration::from_secs(120) {
        last = s.status(state);
        if ok(last.0, &last.1) {
            return last.1;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{what}: not within 120 s; last status (exit {}): {}\n{}",
        last.0,
        last.1,
        s.logs()
    );
}

#[test]
fn the_compose_stack_comes_up_routes_fails_over_and_goes_down() {
    if let Some(why) = docker_unavailable() {
        eprintln!("compose: SKIPPED (no Docker daemon): {why}");
        return;
    }
    let Some(compose) = compose_cmd() else {
        eprintln!("compose: SKIPPED (neither docker-compose nor `docker compose` runs)");
        return;
    };
    if !Path::new("/usr/bin/etcd").exists() {
        eprintln!("compose: SKIPPED (no /usr/bin/etcd; Debian: etcd-server)");
        return;
    }
    let id = format!("ibfc{}", std::process::id());
    let (image, etcd_image) = (format!("ibfabric:{id}"), format!("ibfabric-etcd:{id}"));
    let bin = ibfabric_bin().expect("ibfabric binary");
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().expect("tmp");
    let state = tmp.path().join("state");
    // The guard first: the images go whatever fails after their build.
    let s = Stack {
        compose,
        project: id.clone(),
        file: root().join("deploy/compose/compose.yaml"),
        env: vec![
            ("STATE_DIR".into(), state.display().to_string()),
            ("IBF_IMAGE".into(), image.clone()),
            ("ETCD_IMAGE".into(), etcd_image.clone()),
        ],
        images: vec![image.clone(), etcd_image.clone()],
    };
    run(Command::new(root().join("deploy/container/build-image.sh"))
        .arg("--binary")
        .arg(&bin)
        .args(["--tag", &image, "--etcd-tag", &etcd_image]));
    run(Command::new(root().join("deploy/compose/prepare.sh"))
        .arg("--ibfabric")
        .arg(&bin)
        .arg(&state));
    run(&mut s.cmd(&["config", "-q"]));
    run(&mut s.cmd(&["up", "-d"]));

    // Up and routed: one leader, both subnets live with deadlock-free
    // tables, every router holding the egress tables published.
    let v = wait_status(&s, &state, "the stack to converge", |code, v| {
        let n = |k: &str| v[k].as_array().map_or(0, Vec::len);
        let routers_hold = v["routers"].as_array().is_some_and(|rs| {
            rs.iter().all(|r| {
                r["egress_version"].as_u64().is_some_and(|x| x > 0)
                    && r["egress_version"] == r["held_version"]
            })
        });
        // Every subnet has reported its verified tables, not only
        // registered (a registered agent shows no tables yet).
        let subnets_routed = v["subnets"].as_array().is_some_and(|ss| {
            ss.iter()
                .all(|s| s["live"] == true && s["deadlock_free"] == true)
        });
        code == 0 && n("subnets") == 2 && n("routers") == 2 && routers_hold && subnets_routed
    });
    let up = t0.elapsed();
    let leader = v["leader"].as_str().expect("a leader").to_string();
    assert_eq!(v["subnets"].as_array().map(Vec::len), Some(2), "{v}");
    for sub in v["subnets"].as_array().into_iter().flatten() {
        assert_eq!(sub["live"], true, "{sub}");
        assert_eq!(sub["deadlock_free"], true, "{sub}");
        assert_eq!(sub["mapping_version"], sub["held_mapping_version"], "{sub}");
    }
    assert_eq!(v["routers"].as_array().map(Vec::len), Some(2), "{v}");
    for r in v["routers"].as_array().into_iter().flatten() {
        assert!(r["egress_version"].as_u64().is_some_and(|x| x > 0), "{r}");
        assert_eq!(r["egress_version"], r["held_version"], "{r}");
    }

    // Workers in containers: subnet0's agent routed on them, and a routing
    // job from a container on the network gives one process's tables,
    // with both workers and with one killed.
    let logs_of = |svc: &str| {
        s.cmd(&["logs", "--no-color", svc])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    assert!(
        logs_of("subnet0").contains("routed on workers"),
        "subnet0 routed on the workers: {}",
        logs_of("subnet0")
    );
    assert!(
        ["worker-1", "worker-2"]
            .iter()
            .any(|w| logs_of(w).contains("job loaded")),
        "a worker got subnet0's job:\n{}\n{}",
        logs_of("worker-1"),
        logs_of("worker-2")
    );
    let jobs = tmp.path().join("jobs");
    std::fs::create_dir_all(&jobs).expect("jobs dir");
    let df = jobs.join("df.net");
    run(Command::new(&bin)
        .args(["gen", "dragonfly", "--p", "3", "-o"])
        .arg(&df));
    run(Command::new(&bin)
        .args(["route", "-e", "dfdn", "-t"])
        .arg(&df)
        .arg("-o")
        .arg(jobs.join("one")));
    // `found`: the workers registered in etcd (prepare.sh's tester
    // store.toml), else the two named.
    let farm_with = |out: &str, found: bool| -> serde_json::Value {
        let dir = format!("/jobs/{out}");
        let mut args = vec![
            "route",
            "-e",
            "dfdn",
            "-t",
            "/jobs/df.net",
            "-o",
            &dir,
            "--json",
        ];
        let o = if found {
            args.extend(["--workers-from", "/etc/ibfabric/store.toml"]);
            s.tester_on_both(&state, &[(&jobs, "/jobs")], &args)
        } else {
            args.extend(["--workers", "https://worker-1:7400,https://worker-2:7400"]);
            run(s
                .tester(&state, &[(&jobs, "/jobs")])
                .args(&args)
                .args(TESTER_TLS))
        };
        serde_json::from_slice(&o.stdout).expect("route --json")
    };
    let farm = |out: &str| farm_with(out, false);
    let same = |out: &str| {
        for f in [
            "ibfabric-lfts.bin",
            "ibfabric-sl2vl.bin",
            "ibfabric-pathsl.bin",
        ] {
            let a = std::fs::read(jobs.join("one").join(f)).expect("one");
            let b = std::fs::read(jobs.join(out).join(f)).expect("farm");
            assert!(a == b, "{out}/{f} differs from one process's");
        }
    };
    let lost = |v: &serde_json::Value| -> Vec<String> {
        v["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|j| j["workers"].as_array().cloned().unwrap_or_default())
            .filter(|w| !w["lost"].is_null())
            .map(|w| w["address"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let job_workers = |v: &serde_json::Value, kind: &str| -> Vec<String> {
        v["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["kind"] == kind)
            .flat_map(|j| j["workers"].as_array().cloned().unwrap_or_default())
            .map(|w| w["address"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let v = farm("both");
    same("both");
    assert!(lost(&v).is_empty(), "{v}");
    let on_workers: usize = v["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|j| j["part_runs"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["by"] != "local")
        .count();
    assert!(on_workers > 0, "{v}");
    // Found through their leases in the 3-member etcd: both, by the URLs
    // they advertise.
    let v = farm_with("found", true);
    same("found");
    let mut found: Vec<String> = job_workers(&v, "route");
    found.sort();
    assert_eq!(
        found,
        ["https://worker-1:7400", "https://worker-2:7400"],
        "{v}"
    );
    assert!(lost(&v).is_empty(), "{v}");
    // worker-2 frozen (paused): its connections stay open, its lease
    // ends; a job started now either no longer finds it or gives it up
    // for its lease, and the tables do not change.
    run(&mut s.cmd(&["pause", "worker-2"]));
    let v = farm_with("frozen", true);
    run(&mut s.cmd(&["unpause", "worker-2"]));
    same("frozen");
    for j in v["jobs"].as_array().into_iter().flatten() {
        for w in j["workers"].as_array().into_iter().flatten() {
            if w["address"] == "https://worker-2:7400" {
                assert!(
                    w["lost"]
                        .as_str()
                        .is_some_and(|l| l.contains("lease in the store ended")),
                    "worker-2 frozen: {w}"
                );
            } else {
                assert!(w["lost"].is_null(), "{w}");
            }
        }
    }
    run(&mut s.cmd(&["kill", "worker-2"]));
    let v = farm("one-killed");
    same("one-killed");
    let l = lost(&v);
    assert!(
        !l.is_empty() && l.iter().all(|a| a.contains("worker-2")),
        "worker-2 and only it lost: {v}"
    );

    // The leader stops: the other controller takes over and the clients
    // follow it; status names the stopped one and exits 6.
    run(&mut s.cmd(&["stop", &leader]));
    let t1 = Instant::now();
    let other = if leader == "ctl-a" { "ctl-b" } else { "ctl-a" };
    let v = wait_status(&s, &state, "the other controller to lead", |code, v| {
        code == 6
            && v["leader"] == other
            && v["lagging"].as_array().is_some_and(|l| {
                l.len() == 1 && l[0]["what"].as_str().is_some_and(|w| w.contains(&leader))
            })
    });
    eprintln!(
        "compose: images, state and stack up and converged in {:.1} s; {leader} stopped, {other} led with every client in step after {:.1} s",
        up.as_secs_f64(),
        t1.elapsed().as_secs_f64()
    );
    for r in v["routers"].as_array().into_iter().flatten() {
        assert_eq!(r["egress_version"], r["held_version"], "{r}");
    }
    drop(s);
}
