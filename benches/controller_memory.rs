//! Controller memory and change latency with subnets at the LID limit: the
//! real `ibfabric controller` process (in-memory store with a state file,
//! plaintext on loopback) is sent the reports agents would send, one
//! subnet after another, and its resident memory read from /proc after
//! each; then one subnet's report changes (a host leaves) and the Report
//! call's seconds are timed (the answer comes after the write, the
//! inter-subnet recompute, the whole-fabric check and the publication).
//!
//! Setup: `IBF_CM_SUBNETS` fat-tree subnets (default 8) of `IBF_CM_LEAVES`
//! leaves x `IBF_CM_HOSTS` hosts (default 200 x 230 = 46,000 HCAs, near
//! the 49,151-LID limit), `IBF_CM_SPINES` spines (default 16) and
//! `IBF_CM_ROUTERS` routers joining every subnet (default 8); each subnet
//! routed (minhop) and verified by the agent's code before the timed part.
//! `IBF_BIN` is the binary (default `target/release/ibfabric`); `IBF_CM_ALGO`
//! the inter-subnet algorithm (default prefix); `IBF_CM_CHANGES` changed
//! reports timed (default 3, the median printed).
//!
//!   cargo build --release --bin ibfabric && cargo bench --bench controller_memory

mod common;

use common::{register, route, without_last_hosts};
use fabric::multi::fat_tree_subnets;
use proto::v1;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// VmRSS and VmHWM of `pid`, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Controller(Child);

impl Drop for Controller {
    /// SIGTERM first, so a profiler wrapped around it (`IBF_BIN` a script)
    /// writes its data; SIGKILL after 10 s.
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child's own pid.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn main() {
    let subnets = env("IBF_CM_SUBNETS", 8);
    let leaves = env("IBF_CM_LEAVES", 200);
    let hosts = env("IBF_CM_HOSTS", 230);
    let spines = env("IBF_CM_SPINES", 16);
    let routers = env("IBF_CM_ROUTERS", 8);
    let changes = env("IBF_CM_CHANGES", 3).max(1);
    let algo = std::env::var("IBF_CM_ALGO").unwrap_or_else(|_| "prefix".into());
    let bin = std::env::var("IBF_BIN").unwrap_or_else(|_| "target/release/ibfabric".into());
    let dir = tempfile::tempdir().expect("tmp");

    let t = Instant::now();
    let m = fat_tree_subnets(subnets, leaves, spines, hosts, routers).expect("fabric");
    let mut reports = Vec::new();
    let mut changed = Vec::new();
    for (k, s) in m.subnets.iter().enumerate() {
        let net = dir.path().join(format!("{}.net", s.name));
        let text = fabric::formats::ibnetdiscover::write(&s.fabric);
        fabric::formats::write_file(&net, &text).expect("write");
        reports.push(route(&s.name, s.prefix, &net));
        // Subnet 0 changes: one host leaves, then another, ...
        for g in (k == 0).then_some(1..=changes).into_iter().flatten() {
            let net = dir.path().join(format!("{}-{g}.net", s.name));
            fabric::formats::write_file(&net, &without_last_hosts(&text, g as usize))
                .expect("write");
            let r = route(&s.name, s.prefix, &net);
            assert_eq!(r.end_ports.len() + g as usize, reports[0].end_ports.len());
            changed.push(r);
        }
    }
    let lids = m.subnets[0].fabric.num_cas() + m.subnets[0].fabric.switches().len();
    let report_bytes = prost::Message::encoded_len(&reports[0]);
    eprintln!(
        "{subnets} subnets of {lids} LIDs routed and verified in {:.1} s; a report is {:.1} MiB",
        t.elapsed().as_secs_f64(),
        report_bytes as f64 / (1 << 20) as f64
    );
    drop(m);

    let port = free_port();
    let cfg = dir.path().join("controller.toml");
    std::fs::write(
        &cfg,
        format!(
            "id = \"bench\"\nlisten = \"127.0.0.1:{port}\"\nlease_seconds = 600\nalgorithm = \"{algo}\"\ninsecure = true\n[store]\nkind = \"memory\"\nstate_file = \"{}\"\n",
            dir.path().join("state.db").display()
        ),
    )
    .expect("config");
    let child = Command::new(&bin)
        .args(["controller", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin}: {e} (cargo build --release --bin ibfabric)"));
    let ctl = Controller(child);
    let pid = ctl.0.id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let addr = format!("http://127.0.0.1:{port}");
        let t = Instant::now();
        let ch = loop {
            match tonic::transport::Endpoint::from_shared(addr.clone())
                .expect("endpoint")
                .connect()
                .await
            {
                Ok(c) => break c,
                Err(_) if t.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("controller at {addr}: {e}"),
            }
        };
        let mut client = v1::controller_client::ControllerClient::new(ch)
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20);
        // The controller leads once its election settles.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (idle, _) = memory(pid);
        println!(
            "{subnets} subnets x {lids} LIDs ({} HCAs each), {routers} routers joining every subnet, algorithm {algo}, report {:.1} MiB",
            hosts * leaves,
            report_bytes as f64 / (1 << 20) as f64
        );
        println!("| subnets reported | report seconds | controller RSS MiB | peak MiB |");
        println!("|---:|---:|---:|---:|");
        println!("| 0 | - | {idle:.0} | - |");
        let mut sessions = Vec::new();
        for (k, r) in reports.iter().enumerate() {
            let session = register(&mut client, r.subnet_prefix).await;
            let mut r = r.clone();
            r.session = session.clone();
            r.generation = 1;
            let t = Instant::now();
            client.report(r).await.expect("report");
            let secs = t.elapsed().as_secs_f64();
            sessions.push(session);
            let (rss, hwm) = memory(pid);
            println!("| {} | {secs:.2} | {rss:.0} | {hwm:.0} |", k + 1);
        }
        let mut secs = Vec::new();
        for (g, r) in changed.iter().enumerate() {
            let mut r = r.clone();
            r.session = sessions[0].clone();
            r.generation = 2 + g as u64;
            let t = Instant::now();
            let ack = client.report(r).await.expect("changed report").into_inner();
            secs.push(t.elapsed().as_secs_f64());
            assert!(ack.left_out.is_empty(), "the changed subnet takes part: {}", ack.left_out);
        }
        secs.sort_by(f64::total_cmp);
        let (rss, hwm) = memory(pid);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (settled, _) = memory(pid);
        println!(
            "one changed report (a host leaves), written and published: {:.2} s (median of {changes}); RSS then {rss:.0} MiB, 5 s later {settled:.0} MiB, peak {hwm:.0} MiB",
            secs[secs.len() / 2]
        );
    });
}
