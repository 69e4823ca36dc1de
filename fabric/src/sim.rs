//! Flow-level traffic simulation over routed (multi-subnet) fabrics.
//!
//! Every flow follows the path the emitted tables give it: the source's LFT
//! walk to the router port its subnet's mapping names, the routers' relay
//! decisions, then the LFT walks in the next subnets. Bandwidth is shared
//! max-min fairly (progressive filling): the model of a lossless network
//! whose flows each get the most they can without taking from a flow that
//! has less. It ignores head-of-line blocking and congestion trees, so it
//! shows what the routes allow, not packet-level dynamics. Deterministic:
//! every random choice comes from a seeded ChaCha stream.

use crate::error::{Error, Result};
pub use crate::network::{Host, Network};

fn sim_err(reason: String) -> Error {
    Error::Invalid(format!("simulation: {reason}"))
}
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

impl Network<'_> {
    /// Max-min fair rates (fractions of one link's bandwidth) of flows
    /// given as (source host, destination host) pairs. With equal message
    /// sizes these rates also give completion times (size / rate): a flow's
    /// bottleneck only carries flows as slow or slower, so none of them
    /// speeds up when faster messages end.
    pub fn rates(&self, flows: &[(usize, usize)]) -> Result<Vec<f64>> {
        let mut links = Vec::with_capacity(flows.len() * 8);
        let mut starts = Vec::with_capacity(flows.len() + 1);
        starts.push(0);
        let mut ch = Vec::with_capacity(16);
        for &(s, d) in flows {
            ch.clear();
            self.path_channels(s, d, &mut ch)?;
            links.extend(ch.iter().map(|c| c.0));
            starts.push(links.len());
        }
        Ok(max_min(&links, &starts, self.num_links()))
    }
}

/// Total order on non-NaN shares, for the heap.
#[derive(Clone, Copy, PartialEq)]
struct Share(f64);
impl Eq for Share {}
impl PartialOrd for Share {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Share {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Progressive filling with unit link capacities: the link with the least
/// capacity left per unfrozen flow saturates next and fixes the rates of
/// its flows. Flow `f` crosses `links[starts[f]..starts[f+1]]`. A link's
/// share only grows as flows freeze elsewhere, so a lazy heap holds them.
pub fn max_min(links: &[u32], starts: &[usize], num_links: usize) -> Vec<f64> {
    let nflows = starts.len().saturating_sub(1);
    let mut count = vec![0u32; num_links + 1];
    for &l in links {
        count[l as usize + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut by_link = vec![0u32; links.len()];
    let mut fill = count.clone();
    for f in 0..nflows {
        for &l in &links[starts[f]..starts[f + 1]] {
            by_link[fill[l as usize] as usize] = f as u32;
            fill[l as usize] += 1;
        }
    }
    let mut left = vec![1.0f64; num_links];
    let mut active: Vec<u32> = (0..num_links).map(|l| count[l + 1] - count[l]).collect();
    let mut heap: BinaryHeap<Reverse<(Share, u32)>> = (0..num_links)
        .filter(|&l| active[l] > 0)
        .map(|l| Reverse((Share(1.0 / active[l] as f64), l as u32)))
        .collect();
    let mut rate = vec![f64::NAN; nflows];
    while let Some(Reverse((Share(share), l))) = heap.pop() {
        let l = l as usize;
        if active[l] == 0 || share != left[l] / active[l] as f64 {
            continue;
        }
        for &f in &by_link[count[l] as usize..count[l + 1] as usize] {
            let f = f as usize;
            if !rate[f].is_nan() {
                continue;
            }
            rate[f] = share;
            for &k in &links[starts[f]..starts[f + 1]] {
                let k = k as usize;
                left[k] = (left[k] - share).max(0.0);
                active[k] -= 1;
                if active[k] > 0 && k != l {
                    heap.push(Reverse((Share(left[k] / active[k] as f64), k as u32)));
                }
            }
        }
    }
    // Flows that cross no link (none here: every path has an injection
    // link) would be unconstrained; give them the line rate.
    rate.iter()
        .map(|&r| if r.is_nan() { 1.0 } else { r })
        .collect()
}

/// HPC Challenge ring results, as fractions of one link's bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RingStats {
    /// Natural-order ring (hosts in subnet, then port order).
    pub nor: f64,
    pub ror_min: f64,
    pub ror_max: f64,
    pub ror_avg: f64,
    /// Mean flow rate over the random rings' messages, ignoring that a
    /// send-receive waits for its slower half: the optimistic view.
    pub ror_flow_avg: f64,
    /// Random-order rings simulated.
    pub rings: usize,
}

/// One ring's figure, the HPCC ring test's ping-pong: every host sends to
/// its left neighbour while receiving from its right one (a send-receive
/// that ends when both messages are through), then the same to the right.
/// A host's bandwidth is its two messages over the time of its two
/// exchanges; the figure is the mean over hosts, in link bandwidths.
/// Also returns the mean flow rate of the ring's messages.
pub fn ring(net: &Network<'_>, order: &[usize]) -> Result<(f64, f64)> {
    let n = order.len();
    if n < 2 {
        return Err(sim_err("a ring needs at least two hosts".into()));
    }
    let left: Vec<(usize, usize)> = (0..n).map(|i| (order[i], order[(i + n - 1) % n])).collect();
    let right: Vec<(usize, usize)> = (0..n).map(|i| (order[i], order[(i + 1) % n])).collect();
    let (l, r) = (net.rates(&left)?, net.rates(&right)?);
    let mut sum = 0.0;
    for i in 0..n {
        // Host i sends left[i] and receives left[i+1]; then sends right[i]
        // and receives right[i-1].
        let t1 = (1.0 / l[i]).max(1.0 / l[(i + 1) % n]);
        let t2 = (1.0 / r[i]).max(1.0 / r[(i + n - 1) % n]);
        sum += 2.0 / (t1 + t2);
    }
    let flows = (l.iter().sum::<f64>() + r.iter().sum::<f64>()) / (2 * n) as f64;
    Ok((sum / n as f64, flows))
}

/// The natural-order ring and `random` random-order rings (seeded; ring `i`
/// draws from stream `i` of `seed`, so results do not depend on threads).
pub fn rings(net: &Network<'_>, random: usize, seed: u64) -> Result<RingStats> {
    let natural: Vec<usize> = (0..net.hosts().len()).collect();
    let nor = ring(net, &natural)?.0;
    let values: Vec<(f64, f64)> = (0..random)
        .into_par_iter()
        .map(|i| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(i as u64);
            let mut order = natural.clone();
            order.shuffle(&mut rng);
            ring(net, &order)
        })
        .collect::<Result<_>>()?;
    let (mut lo, mut hi, mut sum, mut flows) = (f64::INFINITY, 0.0f64, 0.0, 0.0);
    for &(v, f) in &values {
        lo = lo.min(v);
        hi = hi.max(v);
        sum += v;
        flows += f;
    }
    let k = values.len().max(1) as f64;
    Ok(RingStats {
        nor,
        ror_min: if values.is_empty() { nor } else { lo },
        ror_max: if values.is_empty() { nor } else { hi },
        ror_avg: if values.is_empty() { nor } else { sum / k },
        ror_flow_avg: if values.is_empty() { nor } else { flows / k },
        rings: values.len(),
    })
}

/// Uniform traffic with hot spots, as in the inter-subnet paper: every host
/// sends one flow; with probability `isp` to another subnet, else to its
/// own. One hot spot per subnet (drawn per sample) receives a `hot_spot`
/// share of the traffic headed to that subnet; the rest picks uniformly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Uniform {
    /// Inter-subnet percentage as a probability, 0..=1.
    pub isp: f64,
    /// Probability of sending to the destination subnet's hot spot (the
    /// paper: 0.05; 0 for plain uniform traffic).
    pub hot_spot: f64,
    /// Independent draws averaged.
    pub samples: usize,
    pub seed: u64,
}

/// Throughput as a fraction of the hosts' injection bandwidth, averaged
/// over the samples.
pub fn uniform(net: &Network<'_>, u: &Uniform) -> Result<f64> {
    if !(0.0..=1.0).contains(&u.isp) || !(0.0..=1.0).contains(&u.hot_spot) {
        return Err(sim_err(
            "ISP and hot-spot probabilities lie in 0..=1".into(),
        ));
    }
    let hosts = net.hosts();
    let nsub = net.num_subnets();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); nsub];
    for (i, h) in hosts.iter().enumerate() {
        members[h.subnet].push(i);
    }
    // Per subnet: the other subnets with hosts, and how many hosts they hold.
    let others: Vec<Vec<usize>> = (0..nsub)
        .map(|s| {
            (0..nsub)
                .filter(|&t| t != s && !members[t].is_empty())
                .collect()
        })
        .collect();
    let remote_hosts: Vec<usize> = others
        .iter()
        .map(|o| o.iter().map(|&t| members[t].len()).sum())
        .collect();
    let values: Vec<f64> = (0..u.samples.max(1))
        .into_par_iter()
        .map(|sample| {
            let mut rng = ChaCha8Rng::seed_from_u64(u.seed);
            rng.set_stream(sample as u64);
            let hot: Vec<Option<usize>> = members
                .iter()
                .map(|m| m.choose(&mut rng).copied())
                .collect();
            let mut flows = Vec::with_capacity(hosts.len());
            for (src, h) in hosts.iter().enumerate() {
                let others = &others[h.subnet];
                let remote = !others.is_empty() && rng.gen_bool(u.isp);
                let target_subnet = if remote {
                    // Weighted by size: a uniform pick among remote hosts.
                    let mut k = rng.gen_range(0..remote_hosts[h.subnet]);
                    let mut pick = others[0];
                    for &s in others {
                        if k < members[s].len() {
                            pick = s;
                            break;
                        }
                        k -= members[s].len();
                    }
                    pick
                } else {
                    h.subnet
                };
                let pool = &members[target_subnet];
                let hot_dst = hot[target_subnet].filter(|&d| d != src);
                let dst = match hot_dst {
                    Some(d) if rng.gen_bool(u.hot_spot) => d,
                    _ => {
                        if pool.len() < 2 && !remote {
                            continue;
                        }
                        loop {
                            let d = pool[rng.gen_range(0..pool.len())];
                            if d != src {
                                break d;
                            }
                        }
                    }
                };
                flows.push((src, dst));
            }
            let r = net.rates(&flows)?;
            Ok(r.iter().sum::<f64>() / hosts.len().max(1) as f64)
        })
        .collect::<Result<_>>()?;
    Ok(values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(paths: &[&[u32]]) -> (Vec<u32>, Vec<usize>) {
        let mut links = Vec::new();
        let mut starts = vec![0];
        for p in paths {
            links.extend_from_slice(p);
            starts.push(links.len());
        }
        (links, starts)
    }

    #[test]
    fn max_min_gives_the_textbook_answer() {
        // Link 0 carries flows a, b, c; link 1 carries c, d. Link 0
        // saturates first (1/3 each); d then takes what c leaves on link 1.
        let (l, s) = flows(&[&[0], &[0], &[0, 1], &[1]]);
        let r = max_min(&l, &s, 2);
        let want = [1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 2.0 / 3.0];
        for (a, b) in r.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{r:?}");
        }
        // Independent flows each get the line rate; shared links split.
        let (l, s) = flows(&[&[0, 2], &[1, 2], &[3]]);
        assert_eq!(max_min(&l, &s, 4), vec![0.5, 0.5, 1.0]);
    }
}
