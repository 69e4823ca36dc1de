//! What one write costs the memory store with a state file, at the state a
//! controller holds for `IBF_SF_SUBNETS` subnets (default 8) whose stored
//! reports are `IBF_SF_MB` MiB each (default 2.5): the time of a changed
//! report (one value of that size), of a small write (a route head), and
//! the bytes each adds to the file. Medians of `IBF_SF_RUNS` (default 9).
//!
//!   cargo bench -p store --bench state_file

use std::time::Instant;
use store::{MemoryStore, Store};

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let subnets = env("IBF_SF_SUBNETS", 8.0) as usize;
    let size = (env("IBF_SF_MB", 2.5) * 1048576.0) as usize;
    let runs = env("IBF_SF_RUNS", 9.0) as usize;
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("state");
    let s = MemoryStore::open("/bench/", Some(&file)).expect("store");
    for k in 0..subnets {
        s.put(&format!("subnets/{k:016x}"), vec![k as u8; size])
            .await
            .expect("put");
    }
    let len = || std::fs::metadata(&file).map_or(0, |m| m.len()) as f64;
    let (mut big_s, mut big_b, mut small_s, mut small_b) = (vec![], vec![], vec![], vec![]);
    for r in 0..runs {
        let before = len();
        let t = Instant::now();
        s.put("subnets/0000000000000000", vec![r as u8; size])
            .await
            .expect("put");
        big_s.push(t.elapsed().as_secs_f64());
        big_b.push(len() - before);
        let before = len();
        let t = Instant::now();
        s.put(
            "routes/mapping/0000000000000000",
            (r as u64).to_be_bytes().to_vec(),
        )
        .await
        .expect("put");
        small_s.push(t.elapsed().as_secs_f64());
        small_b.push(len() - before);
    }
    println!(
        "state {} subnets x {:.1} MiB: changed report {:.1} ms, file {:+.1} MiB; small write {:.2} ms, file {:+.0} B (medians of {runs}; a negative growth is a fold)",
        subnets,
        size as f64 / 1048576.0,
        median(big_s) * 1e3,
        median(big_b) / 1048576.0,
        median(small_s) * 1e3,
        median(small_b),
    );
}
