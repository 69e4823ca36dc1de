use super::*;
use crate::generate::{Topology, generate};
use crate::network::SubnetPaths;
use crate::routing::{EngineKind, EngineOptions};
use crate::sim::workload::ring;

fn fat_tree() -> (crate::model::Fabric, crate::tables::Routing) {
    let f = generate(&Topology::FatTree2 {
        leaves: 4,
        spines: 4,
        hosts: 4,
        links: 1,
    })
    .expect("topology");
    let r = EngineKind::Ftree
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routes");
    (f, r)
}

/// Runs until nothing is left; the deliveries in order.
fn run_out<P: Paths + ?Sized>(sim: &mut Sim<'_, P>) -> Vec<(u64, u64)> {
    let mut got = Vec::new();
    loop {
        match sim.run(u64::MAX) {
            Stop::Notice => {
                sim.take_drained();
                got.extend(sim.take_delivered());
            }
            Stop::Idle => return got,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_lone_message_streams_at_line_rate_behind_one_latency_per_hop() {
    let (f, r) = fat_tree();
    let net = SubnetPaths::new(&f, &r);
    let cfg = Config::default();
    let mut sim = Sim::new(&net, cfg).expect("sim");
    // Hosts 0 and 15 sit on different leaves: host, leaf, spine, leaf,
    // host is four links.
    let mut path = Vec::new();
    net.path_channels(0, 15, &mut path).expect("path");
    assert_eq!(path.len(), 4);
    sim.send(0, 15, 100 * 2048, 2048, 7).expect("send");
    // The last packet leaves the host after 99 packet times, its head
    // crosses four hops, its tail arrives one packet time later.
    assert_eq!(run_out(&mut sim), vec![(7, 100 * 2048 + 4 * cfg.latency)]);
    assert_eq!(sim.delivered_bytes(), 100 * 2048);
}

#[test]
fn headers_take_link_time_and_buffer_space_but_are_not_delivered() {
    let (f, r) = fat_tree();
    let net = SubnetPaths::new(&f, &r);
    let cfg = Config {
        overhead: IB_PACKET_OVERHEAD,
        ..Config::default()
    };
    let mut sim = Sim::new(&net, cfg).expect("sim");
    sim.send(0, 15, 100 * 2048, 2048, 7).expect("send");
    // Each packet is 2048 + 66 bytes on the wire.
    let wire = 2048 + u64::from(IB_PACKET_OVERHEAD);
    assert_eq!(run_out(&mut sim), vec![(7, 100 * wire + 4 * cfg.latency)]);
    assert_eq!(sim.delivered_bytes(), 100 * 2048, "payload only");
    // A buffer must hold a whole packet, headers too.
    let small = Config {
        buffer: 2048 + 10,
        ..cfg
    };
    assert!(Sim::new(&net, small).is_err());
}

#[test]
fn two_senders_to_one_host_share_its_link() {
    let (f, r) = fat_tree();
    let net = SubnetPaths::new(&f, &r);
    let cfg = Config::default();
    let mut sim = Sim::new(&net, cfg).expect("sim");
    sim.send(4, 0, 200 * 2048, 2048, 1).expect("send");
    sim.send(8, 0, 200 * 2048, 2048, 2).expect("send");
    let last = run_out(&mut sim).iter().map(|d| d.1).max().unwrap_or(0);
    // 400 packets through one link: 400 packet times, plus the fill.
    let ideal = 400 * 2048;
    assert!(last >= ideal && last < ideal + 8 * 2048, "{last}");
}

#[test]
fn the_natural_ring_of_a_fat_tree_runs_at_line_rate() {
    let (f, r) = fat_tree();
    let net = SubnetPaths::new(&f, &r);
    let order: Vec<usize> = (0..net.hosts().len()).collect();
    let bw = ring(&net, Config::default(), &order, 64 * 2048)
        .expect("ring")
        .expect("no deadlock");
    assert!(bw > 0.95 && bw <= 1.0, "{bw}");
}
