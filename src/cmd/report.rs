//! The verifier's report as `route` and `verify` print it.

use fabric::Fabric;
use fabric::verify::{self, BrokenPair, Report};
use serde::Serialize;

/// The verifier's findings on one subnet's tables, for `--json`.
#[derive(Serialize)]
pub struct TablesJson {
    pub deadlock_free: bool,
    pub all_pairs_routed: bool,
    pub pairs: u64,
    pub broken_pairs: u64,
    pub broken_examples: Vec<BrokenPair>,
    pub vls: u32,
    pub max_vl: u8,
    pub sls: u32,
    pub max_hops: u32,
    pub cdg_vertices: u64,
    pub cdg_edges: u64,
    /// A channel dependency cycle, one channel per entry, when there is one.
    pub cycle: Option<Vec<verify::ChannelRef>>,
    /// The same cycle as one line, as the text output prints it.
    pub cycle_text: Option<String>,
}

impl TablesJson {
    pub fn new(r: &Report, f: &Fabric) -> Self {
        Self {
            deadlock_free: r.deadlock_free(),
            all_pairs_routed: r.all_pairs_routed(),
            pairs: r.pairs,
            broken_pairs: r.broken_pairs,
            broken_examples: r.broken_examples.clone(),
            vls: r.vls_used,
            max_vl: r.max_vl,
            sls: r.sls_used,
            max_hops: r.max_hops,
            cdg_vertices: r.cdg_vertices,
            cdg_edges: r.cdg_edges,
            cycle: r
                .cycle
                .as_ref()
                .map(|c| c.iter().map(|vc| verify::channel_ref(f, *vc)).collect()),
            cycle_text: r.describe_cycle(f),
        }
    }
}

pub fn print_report(r: &Report, f: &Fabric) {
    println!("pairs           {} ({} broken)", r.pairs, r.broken_pairs);
    for b in &r.broken_examples {
        println!(
            "  broken: LID {} -> LID {}: {:?}",
            b.src_lid, b.dst_lid, b.fault
        );
    }
    println!(
        "VLs used        {} (switch-to-switch channels, max VL {})",
        r.vls_used, r.max_vl
    );
    println!("SLs used        {}", r.sls_used);
    println!("max hops        {} (switch-to-switch links)", r.max_hops);
    println!(
        "CDG             {} virtual channels, {} dependencies",
        r.cdg_vertices, r.cdg_edges
    );
    match r.describe_cycle(f) {
        None => println!("deadlock free   yes"),
        Some(c) => {
            println!(
                "deadlock free   NO: channel dependency cycle of {} channels:",
                r.cycle.as_ref().map_or(0, |c| c.len())
            );
            println!("  {c}");
        }
    }
}

/// How the routes load the links, as `route` and `verify` report it.
#[derive(serde::Serialize)]
pub struct LoadJson {
    /// Paths per directed switch-to-switch link over all HCA pairs (with
    /// LMC, a source port and every LID of a destination port).
    pub link_load: fabric::load::LinkLoad,
    /// With LMC: the same over base LIDs only, one path per pair of ports,
    /// as a client that asks one LID per port sends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_load_base: Option<fabric::load::LinkLoad>,
    /// With LMC: how far each destination's LIDs are spread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lid_spread: Option<fabric::lid_spread::LidSpread>,
}

impl LoadJson {
    pub fn new(f: &fabric::Fabric, lfts: &fabric::tables::Lfts) -> Self {
        let (link_load, link_load_base) = fabric::load::link_loads(f, lfts);
        Self {
            link_load,
            link_load_base,
            lid_spread: fabric::lid_spread::lid_spread(f, lfts),
        }
    }

    pub fn print(&self) {
        print_link_load("link load", &self.link_load);
        if let Some(b) = &self.link_load_base {
            print_link_load("  base LIDs", b);
        }
        print_lid_spread(self.lid_spread.as_ref());
    }
}

/// A link-load line of `route` and `verify`.
fn print_link_load(what: &str, l: &fabric::load::LinkLoad) {
    println!(
        "{what:<15} max {} paths, mean {:.1}, stdev {:.1}, max/mean {:.2} over {} directed switch links{}",
        l.max,
        l.mean,
        l.stdev,
        l.imbalance(),
        l.links,
        l.busiest
            .as_deref()
            .map(|b| format!(" (busiest {b})"))
            .unwrap_or_default()
    );
}

/// The LID-spread line of `route` and `verify` on a fabric with LMC.
fn print_lid_spread(l: Option<&fabric::lid_spread::LidSpread>) {
    if let Some(l) = l {
        println!(
            "LID spread      {:.1} % of a destination's LIDs on first hops of their own, all apart {:.1} %, all on one {:.1} % ({} switch-destination pairs)",
            100.0 * l.first_hops_share,
            100.0 * l.all_apart,
            100.0 * l.all_together,
            l.pairs
        );
    }
}

/// What a job on workers did: per worker its parts and time, or why it was
/// lost; the parts run here; transfer and merge.
pub fn print_job(j: &worker::coordinator::JobRun) {
    for w in &j.workers {
        match &w.lost {
            None => println!(
                "worker          {} ({}): {} parts, load {:.2} s, compute {:.2} s",
                w.address, j.kind, w.parts, w.load_seconds, w.part_seconds
            ),
            Some(why) => println!(
                "worker          {} ({}): {} parts, then lost ({why}); its open part went to the others",
                w.address, j.kind, w.parts
            ),
        }
    }
    if j.local_parts > 0 {
        println!(
            "local           {} {} parts computed here: no worker was left",
            j.local_parts, j.kind
        );
    }
    println!(
        "job             {} {}: {} parts, {:.1} MB loaded per worker, {:.1} MB of columns with the parts, {:.1} MB of replies, merge {:.3} s",
        j.kind,
        j.job,
        j.parts,
        j.bytes_per_load as f64 / 1e6,
        j.column_bytes as f64 / 1e6,
        j.reply_bytes as f64 / 1e6,
        j.merge_seconds
    );
}
