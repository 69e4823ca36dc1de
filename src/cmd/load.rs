//! `ibfabric load`: saturating traffic over one routed table set on the
//! packet model, unicast and the set's multicast groups together, to see
//! the tables carry load (and deadlock, where their dependencies close a
//! cycle) before they are applied.

use super::exit;
use anyhow::{Result, bail};
use clap::Args;
use fabric::Fabric;
use fabric::formats::tableset;
use fabric::mcast::Multicast;
use fabric::mcast::tree::{self, TreeMode};
use fabric::sim::packet::{Config, IB_PACKET_OVERHEAD, SubnetMcast};
use fabric::sim::workload::{Saturate, saturate_with};
use fabric::sim::{LidChoice, Paths, SubnetPaths, Uniform};
use fabric::tables::Routing;
use fabric::verify::{VirtualChannel, describe_channels};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
pub struct LoadArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// The table set (with its manifest), as `route` writes it.
    #[arg(long, short)]
    dir: PathBuf,
    /// Multicast groups, instead of the set's own: with --mfts, their
    /// forwarding tables (read back from the switches, say); with
    /// --mcast-trees, trees built here over the set's routes.
    #[arg(long, value_name = "FILE")]
    mcast_groups: Option<PathBuf>,
    /// Build the trees of --mcast-groups over the set's routes: min-hop
    /// (a tree per group, as OpenSM's default multicast manager builds
    /// them) or shared (one spanning tree), each group on its own SL.
    #[arg(long, value_enum, requires = "mcast_groups", conflicts_with = "mfts")]
    mcast_trees: Option<TreeMode>,
    /// Multicast forwarding tables, in OpenSM's opensm.mcfdbs form or as
    /// `ibroute -M` prints them.
    #[arg(long, value_name = "FILE", requires = "mcast_groups")]
    mfts: Option<PathBuf>,
    /// Share of messages each host sends to a multicast group of the set
    /// it is a member of (0 to 1); the rest go to uniformly drawn hosts.
    #[arg(long, default_value_t = 0.0)]
    mcast_share: f64,
    /// Independent runs (seeds SEED, SEED+1, ... as streams), in parallel.
    #[arg(long, default_value_t = 2)]
    samples: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Input buffer per port and VL, in packets: 1 is the smallest IB
    /// allows, where a dependency cycle fills up soonest.
    #[arg(long, default_value_t = 1)]
    buffer_packets: u32,
    /// Packet size in bytes; every message is one packet.
    #[arg(long, default_value_t = 2048)]
    mtu: u32,
    /// Packets each host's link could carry in the measured time.
    #[arg(long, default_value_t = 3000)]
    window_packets: u64,
    /// With LMC: which LIDs a pair of hosts sends between. base: one path
    /// per pair of ports, on base LIDs; spread: the sources of a
    /// destination spread over its LIDs (source index mod 2^LMC), as
    /// clients with a connection per path.
    #[arg(long, value_enum, default_value = "base")]
    lids: Lids,
    /// Machine-readable results on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
enum Lids {
    Base,
    Spread,
}

#[derive(Serialize)]
struct LoadReport {
    hosts: usize,
    /// The fabric's largest LMC, and the LIDs the hosts sent between.
    max_lmc: u8,
    lids: Lids,
    groups: usize,
    mcast_share: f64,
    samples: usize,
    /// Bytes the hosts consumed over what their links could take.
    throughput: f64,
    deadlock: Option<Deadlock>,
    seconds: f64,
}

#[derive(Serialize)]
struct Deadlock {
    cycle: String,
    channels: usize,
    at_byte_time: u64,
}

/// The trees `mode` builds for the groups of `path` over `routing`.
fn built(f: &Fabric, routing: &mut Routing, path: &Path, mode: TreeMode) -> Result<Multicast> {
    if mode == TreeMode::Reserved {
        bail!(
            "--mcast-trees reserved needs routes made without the reserved SL and VL: \
             route with --mcast-groups and load the set as written"
        );
    }
    let mut groups = super::mcast::read_groups(f, path)?;
    let (mfts, plan) = tree::build(f, routing, &mut groups, mode, None)?;
    Ok(Multicast { groups, mfts, plan })
}

pub fn run(a: LoadArgs) -> Result<i32> {
    if !(0.0..=1.0).contains(&a.mcast_share) {
        bail!("--mcast-share must lie in 0..=1, not {}", a.mcast_share);
    }
    if !(64..=4096).contains(&a.mtu)
        || a.buffer_packets == 0
        || a.window_packets == 0
        || a.samples == 0
    {
        bail!(
            "--mtu must lie in 64..=4096 (IB's MTUs) and --buffer-packets, --window-packets, \
             --samples be positive"
        );
    }
    let f = super::read_topology(&a.topology)?;
    let routing = tableset::read_set(&f, &a.dir)?;
    let mut routing = routing;
    let mc = match (&a.mcast_groups, a.mcast_trees) {
        (Some(g), Some(mode)) => Some(built(&f, &mut routing, g, mode)?),
        (Some(_), None) if a.mfts.is_none() => {
            bail!("--mcast-groups needs their trees: --mfts FILE or --mcast-trees MODE")
        }
        _ => match super::mcast::read_given(&f, a.mcast_groups.as_deref(), a.mfts.as_deref())? {
            Some(m) => Some(m),
            None => tableset::read_multicast(&f, &a.dir)?,
        },
    };
    if a.mcast_share > 0.0 && mc.as_ref().is_none_or(|m| m.groups.is_empty()) {
        bail!(
            "{}: the set has no multicast groups to send a share of {} to",
            a.dir.display(),
            a.mcast_share
        );
    }
    let net = SubnetPaths::new(&f, &routing).with_lids(match a.lids {
        Lids::Base => LidChoice::Base,
        Lids::Spread => LidChoice::Spread,
    });
    let sm = mc
        .as_ref()
        .map(|m| SubnetMcast::new(&f, &routing, m, net.hosts()));
    let overhead = IB_PACKET_OVERHEAD;
    let packet = u64::from(a.mtu) + u64::from(overhead);
    let buffer = u32::try_from(packet * u64::from(a.buffer_packets))
        .map_err(|_| anyhow::anyhow!("--buffer-packets {} is too many", a.buffer_packets))?;
    let cfg = Config {
        buffer,
        mtu: a.mtu,
        check_every: 64 * packet,
        overhead,
        ..Config::default()
    };
    let load = Saturate {
        traffic: Uniform {
            isp: 0.0,
            hot_spot: 0.0,
            samples: a.samples,
            seed: a.seed,
        },
        message: u64::from(a.mtu),
        min_packet: a.mtu,
        warmup: 0,
        window: a
            .window_packets
            .checked_mul(packet)
            .ok_or_else(|| anyhow::anyhow!("--window-packets {} is too many", a.window_packets))?,
        skip_unroutable: false,
        mcast_share: a.mcast_share,
    };
    let t = Instant::now();
    let got = saturate_with(
        &net,
        sm.as_ref()
            .map(|m| m as &dyn fabric::sim::packet::McastPaths),
        cfg,
        &load,
    )?;
    let deadlock = got.deadlock.as_ref().map(|d| {
        let vcs: Vec<VirtualChannel> = d
            .cycle
            .iter()
            .map(|&(slot, vl)| VirtualChannel { slot, vl })
            .collect();
        Deadlock {
            cycle: describe_channels(&f, &vcs),
            channels: vcs.len(),
            at_byte_time: d.at,
        }
    });
    let report = LoadReport {
        hosts: net.hosts().len(),
        max_lmc: f.max_lmc(),
        lids: a.lids,
        groups: mc.as_ref().map_or(0, |m| m.groups.len()),
        mcast_share: a.mcast_share,
        samples: a.samples,
        throughput: got.throughput,
        deadlock,
        seconds: t.elapsed().as_secs_f64(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if f.max_lmc() > 0 {
            println!(
                "LMC up to {}: hosts send between {} LIDs",
                f.max_lmc(),
                match a.lids {
                    Lids::Base => "base",
                    Lids::Spread => "spread",
                }
            );
        }
        println!(
            "{} hosts, {} multicast groups, {:.0} % multicast: throughput {:.3} of the links ({} runs, {:.1} s)",
            report.hosts,
            report.groups,
            100.0 * a.mcast_share,
            report.throughput,
            a.samples,
            report.seconds
        );
        if let Some(d) = &report.deadlock {
            println!(
                "DEADLOCK after {} byte times, a cycle of {} full buffers: {}",
                d.at_byte_time, d.channels, d.cycle
            );
        }
    }
    Ok(if report.deadlock.is_some() {
        exit::UNSAFE
    } else {
        exit::OK
    })
}
