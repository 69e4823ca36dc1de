//! The agent after a topology change: a failed link is rerouted by DQR
//! (only the broken flows move), a drain stage reaches the table directory
//! and is reported applied before the new tables replace it, a second
//! failure is rerouted against the first's tables, and links coming back
//! are recomputed with the update ordered and checked.

use agent::Agent;
use agent::config::{AgentConfig, ConfigFile};
use agent::follow::PLUGIN_STATUS;
use fabric::dqr::{Fault, apply_faults};
use fabric::formats::{ibnetdiscover, tableset, write_file};
use fabric::generate::{Topology, generate};
use fabric::model::Fabric;
use fabric::verify::verify;
use proto::v1;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn config(dir: &Path, engine: &str) -> AgentConfig {
    let text = format!(
        "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"t.net\"\nengine = \"{engine}\"\nout_dir = \"out\"\ninsecure = true\nstage_wait_ms = 20000\n"
    );
    let p = dir.join("agent.toml");
    write_file(&p, &text).expect("config");
    AgentConfig::load(&p).expect("valid config")
}

fn put_topology(dir: &Path, f: &Fabric) {
    write_file(&dir.join("t.net"), &ibnetdiscover::write(f)).expect("topology");
}

/// What a stand-in for OpenSM's plugin saw: each generation of the table
/// set, and whether it dropped entries on purpose (a drain stage).
type Seen = Arc<Mutex<Vec<(u64, bool)>>>;

/// Applies every set the agent writes, as the plugin does, and says so in
/// its status file.
fn fake_plugin(out: PathBuf, stop: Arc<AtomicBool>) -> (Seen, std::thread::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let h = std::thread::spawn(move || {
        let mut last = 0;
        while !stop.load(Ordering::SeqCst) {
            if let Ok(m) = tableset::check_dir(&out) {
                if m.generation != last {
                    last = m.generation;
                    use fabric::formats::compact::{LFTS_FILE, lft::FLAG_DRAIN};
                    let lfts = std::fs::read(out.join(LFTS_FILE)).expect("LFT file");
                    let drain = lfts.get(8).is_some_and(|f| f & FLAG_DRAIN != 0);
                    s.lock().expect("lock").push((m.generation, drain));
                    write_file(
                        &out.join(PLUGIN_STATUS),
                        &format!("applied generation {}\n", m.generation),
                    )
                    .expect("status");
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    (seen, h)
}

async fn ready(a: &Arc<Agent>) {
    let t = Instant::now();
    while !a.dqr_ready() {
        assert!(t.elapsed() < Duration::from_secs(60), "no channel list");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn update_of(a: &Agent) -> v1::TableUpdate {
    let s = a.subnet.load_full().expect("routed");
    s.report
        .routing
        .as_ref()
        .and_then(|r| r.update.clone())
        .expect("an update was reported")
}

/// The set in the directory, read against the fabric in force, verified.
fn check_written(a: &Agent, out: &Path) {
    let s = a.subnet.load_full().expect("routed");
    let m = tableset::check_dir(out).expect("a whole set");
    let r = tableset::read_checked(&s.fabric, out, &m).expect("reads");
    assert_eq!(
        r.lfts,
        s.routing.get().lfts,
        "the set written is the set in force"
    );
    let rep = verify(&s.fabric, &r);
    assert!(rep.ok(), "{rep:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_link_is_rerouted_by_dqr_through_a_drain_stage() {
    let f0 = generate(&Topology::Mesh {
        dims: vec![4, 4],
        torus: false,
        hosts: 1,
    })
    .expect("mesh");
    let mut drained = false;
    // Up*/Down* on a mesh: some link faults reroute in one step, others
    // need the drain stage; try links until one does.
    for &l in f0.switch_links().iter() {
        let d = tempfile::tempdir().expect("tmp");
        put_topology(d.path(), &f0);
        let a = Agent::new(config(d.path(), "updn"));
        assert!(a.reroute().await.expect("routes"));
        let out = d.path().join("out");
        // The plugin has spoken: drain stages wait for its word.
        let gen0 = tableset::check_dir(&out).expect("set").generation;
        write_file(
            &out.join(PLUGIN_STATUS),
            &format!("applied generation {gen0}\n"),
        )
        .expect("status");
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, h) = fake_plugin(out.clone(), stop.clone());
        ready(&a).await;

        // The same fabric again: nothing to do.
        put_topology(d.path(), &f0);
        assert!(!a.reroute().await.expect("same"));

        let f1 = apply_faults(&f0, &[Fault::Link(l)]);
        put_topology(d.path(), &f1);
        assert!(a.reroute().await.expect("reroutes"));
        let u = update_of(&a);
        assert_eq!(u.method, "dqr", "{u:?}");
        assert_eq!(u.links_failed, 1);
        assert!(
            u.flows_broken > 0 && u.flows_broken == u.flows_rerouted,
            "{u:?}"
        );
        check_written(&a, &out);
        // The list DQR extended is pruned to the new tables' dependencies
        // in the background (no flow changed SL on one VL).
        let s = a.subnet.load_full().expect("routed");
        let own = fabric::dqr::ChannelList::build(&s.fabric, s.routing.get())
            .expect("list")
            .0
            .num_edges();
        let t = Instant::now();
        while a.channel_list_dependencies() != Some(own) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "list not pruned: {:?} dependencies, the tables' own {own}",
                a.channel_list_dependencies()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let t = Instant::now();
        let final_gen = tableset::check_dir(&out).expect("set").generation;
        while !seen
            .lock()
            .expect("lock")
            .iter()
            .any(|&(g, _)| g == final_gen)
        {
            assert!(t.elapsed() < Duration::from_secs(10));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let seen = seen.lock().expect("lock").clone();
        // The final set is whole (no drop on purpose); a drain stage, when
        // reported, came first and was applied before the final set.
        assert_eq!(seen.last(), Some(&(final_gen, false)), "{seen:?}");
        assert_eq!(
            seen.iter().filter(|s| s.1).count() as u32,
            u.stages,
            "{seen:?} {u:?}"
        );
        if u.stages > 0 {
            drained = true;
            // A second failure reroutes against the first's tables.
            // One between two switches that keep three links: the mesh
            // stays connected.
            let deg = |s: fabric::model::Slot| {
                let n = f1.node_of(s);
                f1.port_slots(n)
                    .filter(|&p| {
                        let r = f1.remote(p);
                        r != fabric::model::NONE && f1.switch_index(f1.node_of(r)).is_some()
                    })
                    .count()
            };
            let l2 = *f1
                .switch_links()
                .iter()
                .find(|&&x| deg(x) >= 3 && deg(f1.remote(x)) >= 3)
                .expect("an inner link");
            let f2 = apply_faults(&f1, &[Fault::Link(l2)]);
            ready(&a).await;
            put_topology(d.path(), &f2);
            assert!(a.reroute().await.expect("second fault"));
            let u = update_of(&a);
            assert!(u.method == "dqr" || u.method == "recompute", "{u:?}");
            check_written(&a, &out);
            // Everything comes back: a recompute, ordered and checked.
            put_topology(d.path(), &f0);
            if a.reroute().await.expect("restored") {
                let u = update_of(&a);
                assert!(u.method == "recompute" || u.method == "kept", "{u:?}");
                assert!(u.links_restored >= 1, "{u:?}");
                check_written(&a, &out);
            }
        }
        stop.store(true, Ordering::SeqCst);
        h.join().expect("plugin thread");
        if drained {
            break;
        }
    }
    assert!(drained, "no link fault of the mesh needed a drain stage");
}

#[tokio::test]
async fn a_change_beyond_links_is_routed_from_scratch_and_said_so() {
    let d = tempfile::tempdir().expect("tmp");
    let small = generate(&Topology::Mesh {
        dims: vec![4, 4],
        torus: false,
        hosts: 1,
    })
    .expect("mesh");
    put_topology(d.path(), &small);
    let a = Agent::new(config(d.path(), "updn"));
    assert!(a.reroute().await.expect("routes"));
    let big = generate(&Topology::Mesh {
        dims: vec![5, 4],
        torus: false,
        hosts: 1,
    })
    .expect("mesh");
    put_topology(d.path(), &big);
    assert!(a.reroute().await.expect("reroutes"));
    let u = update_of(&a);
    assert_eq!(u.method, "unchecked", "{u:?}");
    assert!(!u.reason.is_empty());
    check_written(&a, &d.path().join("out"));
}

#[tokio::test]
async fn a_switch_gone_from_the_discovery_is_rerouted_around() {
    let d = tempfile::tempdir().expect("tmp");
    let f0 = generate(&Topology::FatTree2 {
        leaves: 4,
        spines: 3,
        hosts: 2,
        links: 1,
    })
    .expect("fat tree");
    put_topology(d.path(), &f0);
    let a = Agent::new(config(d.path(), "updn"));
    assert!(a.reroute().await.expect("routes"));
    ready(&a).await;
    let spine = *f0.switches().last().expect("switches");
    // The discovery no longer lists the spine at all.
    let text = ibnetdiscover::write(&apply_faults(&f0, &[Fault::Switch(spine)]));
    let gone = format!("guid=0x{:016x}\n", f0.guid(spine));
    let kept: Vec<&str> = text.split("\n\n").filter(|b| !b.contains(&gone)).collect();
    write_file(&d.path().join("t.net"), &kept.join("\n\n")).expect("topology");
    assert!(a.reroute().await.expect("reroutes"));
    let u = update_of(&a);
    assert_eq!((u.method.as_str(), u.switches_failed), ("dqr", 1), "{u:?}");
    assert!(
        u.flows_broken > 0 && u.flows_broken == u.flows_rerouted,
        "{u:?}"
    );
    check_written(&a, &d.path().join("out"));
    // Discovered again without the spine: no change.
    assert!(!a.reroute().await.expect("same"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dfdn_after_a_link_comes_back_moves_only_through_checked_steps() {
    let f0 = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("dragonfly");
    let mut methods = Vec::new();
    for &l in f0.switch_links().iter().take(4) {
        let d = tempfile::tempdir().expect("tmp");
        put_topology(d.path(), &f0);
        let mut cfg = config(d.path(), "dfdn");
        cfg.stage_wait_ms = 10;
        let a = Agent::new(cfg);
        assert!(a.reroute().await.expect("routes"));
        let vls = a
            .subnet
            .load_full()
            .expect("routed")
            .routing
            .report()
            .vls_used;
        ready(&a).await;
        put_topology(d.path(), &apply_faults(&f0, &[Fault::Link(l)]));
        assert!(a.reroute().await.expect("reroutes"));
        assert_eq!(update_of(&a).method, "dqr");
        let s = a.subnet.load_full().expect("routed");
        assert!(s.routing.report().vls_used <= vls, "DQR keeps DF-DN's VLs");
        check_written(&a, &d.path().join("out"));
        put_topology(d.path(), &f0);
        assert!(a.reroute().await.expect("restored"));
        let u = update_of(&a);
        // Either the recompute has a checked order, or the tables in force
        // stay, bound to the fabric with the link back.
        assert!(u.method == "recompute" || u.method == "kept", "{u:?}");
        if u.method == "kept" {
            assert!(u.reason.contains("cycle"), "{u:?}");
            let s2 = a.subnet.load_full().expect("routed");
            assert_eq!(s2.routing.get().lfts, s.routing.get().lfts);
        }
        check_written(&a, &d.path().join("out"));
        methods.push(u.method);
    }
    eprintln!("dfdn p=2, a link back after DQR: {methods:?}");
}
