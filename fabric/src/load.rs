//! How evenly a routing spreads traffic: the edge forwarding index, the
//! number of HCA pairs whose route crosses each directed switch-to-switch
//! link (the figure the DF-SSSP and Nue papers report). Operators compare
//! engines on its maximum: under all-to-all traffic the busiest link sets
//! the pace.
//!
//! Per destination the LFT column is an in-tree: each switch forwards the
//! HCAs below it plus those that reach it from upstream, so one pass over
//! the switches in upstream-first order counts every pair without walking
//! each route.

use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::Lfts;
use rayon::prelude::*;
use serde::Serialize;

/// Paths per directed switch-to-switch link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkLoad {
    /// Directed switch-to-switch links (each cable counts twice).
    pub links: u64,
    /// HCA pairs counted (source != destination; with LMC, a source port
    /// and each LID of a destination port).
    pub pairs: u64,
    /// Pairs whose route did not reach the destination (not counted on
    /// the links past the break).
    pub unrouted: u64,
    pub max: u64,
    pub mean: f64,
    pub stdev: f64,
    /// The busiest link: "switch[port] -> switch[port]".
    pub busiest: Option<String>,
    /// Links per load bucket: ten equal buckets from 0 to `max`.
    pub histogram: Vec<Bucket>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Loads from `low` to `high`, both included.
    pub low: u64,
    pub high: u64,
    pub links: u64,
}

impl LinkLoad {
    /// Max over mean (1.0: perfectly even).
    pub fn imbalance(&self) -> f64 {
        if self.mean > 0.0 {
            self.max as f64 / self.mean
        } else {
            0.0
        }
    }
}

impl LinkLoad {
    /// The histogram as a standalone SVG bar chart: links per load bucket,
    /// with max, mean and the busiest link in the caption. `title` names
    /// the routing (engine and topology).
    pub fn histogram_svg(&self, title: &str) -> String {
        use std::fmt::Write;
        let esc = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        };
        let (left, top, w, h) = (70.0, 72.0, 560.0, 240.0);
        let most = self
            .histogram
            .iter()
            .map(|b| b.links)
            .max()
            .unwrap_or(0)
            .max(1);
        let n = self.histogram.len().max(1) as f64;
        let bw = w / n;
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" \
             font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"11\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{left}\" y=\"18\" font-size=\"13\">{}</text>\n\
             <text x=\"{left}\" y=\"36\">max {} paths, mean {:.1}, stdev {:.1}, max/mean {:.2}; {} directed switch links</text>\n\
             <text x=\"{left}\" y=\"52\">{}</text>\n",
            left + w + 30.0,
            top + h + 50.0,
            esc(title),
            self.max,
            self.mean,
            self.stdev,
            self.imbalance(),
            self.links,
            self.busiest
                .as_deref()
                .map(|b| format!("busiest: {}", esc(b)))
                .unwrap_or_default()
        );
        for k in 0..=4u64 {
            let v = most as f64 * k as f64 / 4.0;
            let y = top + h - h * k as f64 / 4.0;
            let _ = writeln!(
                s,
                "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
                left + w,
                left - 6.0,
                y + 4.0
            );
        }
        for (i, b) in self.histogram.iter().enumerate() {
            let bh = h * b.links as f64 / most as f64;
            let x = left + i as f64 * bw;
            let _ = writeln!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4292c6\">\
                 <title>{} links carry {}-{} paths</title></rect>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\">{}-{}</text>",
                x + 2.0,
                top + h - bh,
                bw - 4.0,
                b.links,
                b.low,
                b.high,
                x + bw / 2.0,
                top + h + 14.0,
                b.low,
                b.high
            );
        }
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">paths per link (HCA pairs); bars: links</text>\n</svg>\n",
            left + w / 2.0,
            top + h + 34.0
        );
        s
    }
}

/// The edge forwarding index of `lfts` on `f`, over all pairs of CA ports
/// (with LMC, of a CA port and a LID of another).
pub fn link_load(f: &Fabric, lfts: &Lfts) -> LinkLoad {
    link_loads(f, lfts).0
}

/// [`link_load`], and with LMC the same per pair of ports as a client
/// that knows one LID per port sends (every CA port toward the base LID of
/// every other): how the base LIDs alone are spread, which the extra LIDs
/// neither help nor hurt. Each LID is walked once: the base LIDs' sums are
/// a part of the whole.
pub fn link_loads(f: &Fabric, lfts: &Lfts) -> (LinkLoad, Option<LinkLoad>) {
    let cas = ca_ports(f);
    let base: Vec<(Slot, u16)> = cas.iter().map(|&e| (e, f.lid_of_slot(e))).collect();
    let mut sums = sums_toward(f, lfts, &base);
    if f.max_lmc() == 0 {
        return (summarize(f, &sums), None);
    }
    let mut by_base = summarize(f, &sums);
    // `summarize` counts a source port toward every LID; here one each.
    by_base.pairs = base.len() as u64 * (base.len() as u64).saturating_sub(1);
    let rest: Vec<(Slot, u16)> = cas
        .iter()
        .flat_map(|&e| f.lids_of_slot(e).skip(1).map(move |l| (e, l)))
        .collect();
    sums.add(&sums_toward(f, lfts, &rest));
    (summarize(f, &sums), Some(by_base))
}

/// The sums of the routes toward `lids` (CA ports and one of their LIDs).
fn sums_toward(f: &Fabric, lfts: &Lfts, lids: &[(Slot, u16)]) -> LoadSums {
    let n = f.switches().len();
    // A walk toward one destination reads one entry of every switch row:
    // from the row-major tables that is a cache miss per switch; from a
    // block of columns (destination-major) a few contiguous KB.
    let mut sums = LoadSums::zero(f);
    for block in lids.chunks(1024) {
        let dl: Vec<u16> = block.iter().map(|x| x.1).collect();
        let cols = lfts.lid_columns(&dl);
        let slots: Vec<Slot> = block.iter().map(|x| x.0).collect();
        sums.add(&load_sums(f, &slots, |k, si| cols[k * n + si as usize]));
    }
    sums
}

/// The CA ports attached to a switch: every destination and every source
/// of the index.
pub fn ca_ports(f: &Fabric) -> Vec<Slot> {
    crate::verify::switch_hosts(f)
        .into_iter()
        .filter(|&e| f.kind(f.node_of(e)) == NodeKind::Ca)
        .collect()
}

/// Paths per directed link of the routes toward some destinations, from
/// every CA port. Sums are exact integers, so the sums of any partition of
/// the destinations add up to the sums of all of them: a job cut by
/// destination merges to the same index whatever the cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSums {
    /// Paths leaving through each port slot.
    pub per_slot: Vec<u64>,
    /// Pairs whose route breaks.
    pub unrouted: u64,
}

impl LoadSums {
    pub fn zero(f: &Fabric) -> Self {
        Self {
            per_slot: vec![0; f.num_slots()],
            unrouted: 0,
        }
    }
    /// Adds `other` (of the same fabric).
    pub fn add(&mut self, other: &LoadSums) {
        for (x, y) in self.per_slot.iter_mut().zip(&other.per_slot) {
            *x += y;
        }
        self.unrouted += other.unrouted;
    }
}

/// The sums of the routes toward `dests` (CA ports), whose forwarding entry
/// at switch index `si` toward `dests[k]` is `entry(k, si)`.
pub fn load_sums(f: &Fabric, dests: &[Slot], entry: impl Fn(usize, u32) -> u8 + Sync) -> LoadSums {
    let n = f.switches().len();
    let mut hosts_at = vec![0u64; n];
    for e in ca_ports(f) {
        if let Some(si) = f.switch_index(f.node_of(f.remote(e))) {
            hosts_at[si as usize] += 1;
        }
    }
    let is_s2s = crate::verify::switch_link_flags(f);
    let (per_slot, unrouted) = dests
        .par_iter()
        .enumerate()
        .fold(
            || (vec![0u64; f.num_slots()], 0u64, Scratch::new(n)),
            |(mut load, mut unrouted, mut sc), (k, &d)| {
                unrouted += to_destination(
                    f,
                    |si| entry(k, si),
                    d,
                    &hosts_at,
                    &is_s2s,
                    &mut load,
                    &mut sc,
                );
                (load, unrouted, sc)
            },
        )
        .map(|(l, u, _)| (l, u))
        .reduce(
            || (vec![0u64; f.num_slots()], 0),
            |(mut a, ua), (b, ub)| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                (a, ua + ub)
            },
        );
    LoadSums { per_slot, unrouted }
}

/// The index of the sums of all destinations.
pub fn summarize(f: &Fabric, sums: &LoadSums) -> LinkLoad {
    let is_s2s = crate::verify::switch_link_flags(f);
    let load = &sums.per_slot;
    let unrouted = sums.unrouted;
    let cas = ca_ports(f);
    let ncas = cas.len() as u64;
    let dest_lids: u64 = cas.iter().map(|&e| 1u64 << f.lmc(e)).sum();
    let links: Vec<(Slot, u64)> = (0..f.num_slots() as Slot)
        .filter(|&s| is_s2s[s as usize] && f.kind(f.node_of(s)) == NodeKind::Switch)
        .map(|s| (s, load[s as usize]))
        .collect();
    let count = links.len() as u64;
    let total: u64 = links.iter().map(|l| l.1).sum();
    let mean = if count > 0 {
        total as f64 / count as f64
    } else {
        0.0
    };
    let var = if count > 0 {
        links
            .iter()
            .map(|&(_, x)| (x as f64 - mean).powi(2))
            .sum::<f64>()
            / count as f64
    } else {
        0.0
    };
    let busiest = links.iter().max_by_key(|l| l.1).copied();
    let max = busiest.map_or(0, |b| b.1);
    let width = max.div_ceil(10).max(1);
    let histogram = (0..10u64)
        .map(|i| {
            let (low, high) = (i * width, (i + 1) * width - 1);
            Bucket {
                low,
                high,
                links: links
                    .iter()
                    .filter(|&&(_, x)| x >= low && (x <= high || i == 9))
                    .count() as u64,
            }
        })
        .filter(|b| b.low <= max)
        .collect();
    LinkLoad {
        links: count,
        pairs: dest_lids * ncas.saturating_sub(1),
        unrouted,
        max,
        mean,
        stdev: var.sqrt(),
        busiest: busiest.filter(|b| b.1 > 0).map(|(s, _)| {
            let r = f.remote(s);
            let name = |x: Slot| format!("{}[{}]", f.desc(f.node_of(x)), f.port_of(x));
            format!("{} -> {}", name(s), name(r))
        }),
        histogram,
    }
}

struct Scratch {
    next: Vec<u32>,
    out_slot: Vec<Slot>,
    indeg: Vec<u32>,
    flow: Vec<u64>,
    queue: Vec<u32>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Self {
            next: vec![0; n],
            out_slot: vec![NONE; n],
            indeg: vec![0; n],
            flow: vec![0; n],
            queue: Vec::with_capacity(n),
        }
    }
}

const TO_DEST: u32 = u32::MAX - 1;
const DROPPED: u32 = u32::MAX;

/// Adds the load of every route toward `d`; returns the pairs toward `d`
/// whose route breaks (a missing entry, a dead port, a loop).
fn to_destination(
    f: &Fabric,
    entry: impl Fn(u32) -> u8,
    d: Slot,
    hosts_at: &[u64],
    is_s2s: &[bool],
    load: &mut [u64],
    sc: &mut Scratch,
) -> u64 {
    let n = f.switches().len();
    let dsw = f.switch_index(f.node_of(f.remote(d)));
    sc.indeg.fill(0);
    for si in 0..n {
        sc.out_slot[si] = NONE;
        sc.next[si] = DROPPED;
        let Some(o) = f.linked_port(f.switches()[si], entry(si as u32)) else {
            continue;
        };
        let r = f.remote(o);
        if r == d {
            sc.next[si] = TO_DEST;
        } else if is_s2s[o as usize] {
            if let Some(t) = f.switch_index(f.node_of(r)) {
                sc.next[si] = t;
                sc.out_slot[si] = o;
                sc.indeg[t as usize] += 1;
            }
        }
    }
    // HCAs below each switch, the destination itself left out.
    for (si, fl) in sc.flow.iter_mut().enumerate() {
        *fl = hosts_at[si] - u64::from(dsw == Some(si as u32));
    }
    sc.queue.clear();
    sc.queue
        .extend((0..n as u32).filter(|&si| sc.indeg[si as usize] == 0));
    let mut unrouted = 0;
    let mut done = 0usize;
    while let Some(si) = sc.queue.pop() {
        done += 1;
        let s = si as usize;
        match sc.next[s] {
            TO_DEST => {}
            DROPPED => unrouted += sc.flow[s],
            t => {
                load[sc.out_slot[s] as usize] += sc.flow[s];
                sc.flow[t as usize] += sc.flow[s];
                sc.indeg[t as usize] -= 1;
                if sc.indeg[t as usize] == 0 {
                    sc.queue.push(t);
                }
            }
        }
    }
    if done < n {
        // Switches on a forwarding loop: their pairs never arrive (the
        // links of the loop are counted up to where the loop closes).
        unrouted += (0..n)
            .filter(|&s| sc.indeg[s] > 0)
            .map(|s| sc.flow[s])
            .sum::<u64>();
    }
    unrouted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::{EngineKind, EngineOptions};
    use crate::tables::NO_PATH;

    /// The load of every link by walking every route, pair by pair.
    fn walked(f: &Fabric, lfts: &Lfts) -> (Vec<u64>, u64) {
        let mut load = vec![0u64; f.num_slots()];
        let mut unrouted = 0;
        let cas: Vec<Slot> = f
            .endports()
            .iter()
            .copied()
            .filter(|&e| f.kind(f.node_of(e)) == NodeKind::Ca)
            .collect();
        for &s in &cas {
            for &d in &cas {
                if s == d {
                    continue;
                }
                let dlid = f.lid_of_slot(d);
                let mut c = s;
                let mut ok = false;
                for _ in 0..=f.switches().len() {
                    let r = f.remote(c);
                    if r == d {
                        ok = true;
                        break;
                    }
                    let Some(si) = f.switch_index(f.node_of(r)) else {
                        break;
                    };
                    let e = lfts.get(si, dlid);
                    if e == NO_PATH || e == 0 || e > f.num_ports(f.node_of(r)) {
                        break;
                    }
                    let o = f.slot(f.node_of(r), e);
                    if f.remote(o) == d {
                        ok = true;
                        break;
                    }
                    load[o as usize] += 1;
                    c = o;
                }
                if !ok {
                    unrouted += 1;
                }
            }
        }
        (load, unrouted)
    }

    #[test]
    fn the_tree_count_equals_walking_every_route() {
        for (t, e) in [
            (
                Topology::Mesh {
                    dims: vec![4, 4],
                    torus: true,
                    hosts: 2,
                },
                EngineKind::Minhop,
            ),
            (Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Dfdn),
            (
                Topology::FatTree2 {
                    leaves: 4,
                    spines: 2,
                    hosts: 3,
                    links: 1,
                },
                EngineKind::Updn,
            ),
        ] {
            let f = generate(&t).expect("topology");
            let r = e
                .engine()
                .route(&f, &EngineOptions::default())
                .expect("routes");
            let got = link_load(&f, &r.lfts);
            let (want, unrouted) = walked(&f, &r.lfts);
            let s2s: Vec<u64> = (0..f.num_slots() as Slot)
                .filter(|&s| {
                    let rem = f.remote(s);
                    f.kind(f.node_of(s)) == NodeKind::Switch
                        && rem != NONE
                        && f.kind(f.node_of(rem)) == NodeKind::Switch
                })
                .map(|s| want[s as usize])
                .collect();
            assert_eq!(got.unrouted, unrouted, "{t:?}");
            assert_eq!(got.links, s2s.len() as u64);
            assert_eq!(got.max, *s2s.iter().max().expect("links"), "{t:?}");
            let mean = s2s.iter().sum::<u64>() as f64 / s2s.len() as f64;
            assert!((got.mean - mean).abs() < 1e-9, "{t:?}");
            assert_eq!(
                got.histogram.iter().map(|b| b.links).sum::<u64>(),
                got.links
            );
        }
    }

    #[test]
    fn with_lmc_the_base_view_walks_the_base_lids_alone() {
        let f0 = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("topology");
        let f = crate::generate::with_lmc(&f0, 1).expect("lmc");
        let r = EngineKind::Updn
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let (all, base) = link_loads(&f, &r.lfts);
        let base = base.expect("a fabric with LMC has the base view");
        // `walked` sends every CA toward every other's base LID.
        let (want, unrouted) = walked(&f, &r.lfts);
        let ncas = ca_ports(&f).len() as u64;
        assert_eq!((base.unrouted, unrouted), (0, 0));
        assert_eq!(base.pairs, ncas * (ncas - 1));
        let max = (0..f.num_slots() as Slot)
            .filter(|&s| f.kind(f.node_of(s)) == NodeKind::Switch)
            .map(|s| want[s as usize])
            .max()
            .expect("links");
        assert_eq!(base.max, max);
        assert_eq!(all, link_load(&f, &r.lfts));
        assert_eq!(all.pairs, 2 * base.pairs);
        assert!(all.mean > base.mean);
        assert!(all.max >= base.max);
    }

    #[test]
    fn a_ring_of_three_loads_each_link_with_its_neighbour_pairs() {
        // Three switches in a ring, one HCA each: every pair is one hop
        // apart, so each directed link carries exactly one pair.
        let f = generate(&Topology::Mesh {
            dims: vec![3],
            torus: true,
            hosts: 1,
        })
        .expect("ring");
        let r = EngineKind::Minhop
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let l = link_load(&f, &r.lfts);
        assert_eq!((l.links, l.pairs, l.unrouted), (6, 6, 0));
        assert_eq!((l.max, l.mean, l.stdev), (1, 1.0, 0.0));
    }

    #[test]
    fn a_broken_table_counts_its_unrouted_pairs() {
        let f = generate(&Topology::Mesh {
            dims: vec![3],
            torus: true,
            hosts: 1,
        })
        .expect("ring");
        let mut r = EngineKind::Minhop
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let d = f.endports()[0];
        let dlid = f.lid_of_slot(d);
        for si in 0..f.switches().len() as u32 {
            r.lfts.set(si, dlid, NO_PATH);
        }
        let l = link_load(&f, &r.lfts);
        assert_eq!(l.unrouted, 2);
        assert_eq!(l.unrouted, walked(&f, &r.lfts).1);
    }
}
