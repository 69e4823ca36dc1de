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

use super::sim_err;
use super::traffic::{Destinations, Uniform, ring_order};
use crate::error::Result;
use crate::network::Paths;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Max-min fair rates (fractions of one link's bandwidth) of flows given
/// as (source host, destination host) pairs. With equal message sizes these
/// rates also give completion times (size / rate): a flow's bottleneck only
/// carries flows as slow or slower, so none of them speeds up when faster
/// messages end.
pub fn rates<P: Paths + ?Sized>(net: &P, flows: &[(usize, usize)]) -> Result<Vec<f64>> {
    let mut links = Vec::with_capacity(flows.len() * 8);
    let mut starts = Vec::with_capacity(flows.len() + 1);
    starts.push(0);
    let mut ch = Vec::with_capacity(16);
    for &(s, d) in flows {
        ch.clear();
        net.path_channels(s, d, &mut ch)?;
        links.extend(ch.iter().map(|c| c.0));
        starts.push(links.len());
    }
    Ok(max_min(&links, &starts, net.num_links()))
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
pub fn ring<P: Paths + ?Sized>(net: &P, order: &[usize]) -> Result<(f64, f64)> {
    let n = order.len();
    if n < 2 {
        return Err(sim_err("a ring needs at least two hosts".into()));
    }
    let left: Vec<(usize, usize)> = (0..n).map(|i| (order[i], order[(i + n - 1) % n])).collect();
    let right: Vec<(usize, usize)> = (0..n).map(|i| (order[i], order[(i + 1) % n])).collect();
    let (l, r) = (rates(net, &left)?, rates(net, &right)?);
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
pub fn rings<P: Paths + ?Sized>(net: &P, random: usize, seed: u64) -> Result<RingStats> {
    let n = net.hosts().len();
    let nor = ring(net, &ring_order(n, None, seed))?.0;
    let values: Vec<(f64, f64)> = (0..random)
        .into_par_iter()
        .map(|i| ring(net, &ring_order(n, Some(i), seed)))
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

/// Throughput of [`Uniform`] traffic as a fraction of the hosts'
/// injection bandwidth, averaged over the samples: every host sends one
/// flow per sample.
pub fn uniform<P: Paths + ?Sized>(net: &P, u: &Uniform) -> Result<f64> {
    let pick = Destinations::new(net.hosts(), u)?;
    let values: Vec<f64> = (0..u.samples.max(1))
        .into_par_iter()
        .map(|sample| {
            let mut rng = ChaCha8Rng::seed_from_u64(u.seed);
            rng.set_stream(sample as u64);
            let hot = pick.hot_spots(&mut rng);
            let flows: Vec<(usize, usize)> = (0..net.hosts().len())
                .filter_map(|src| pick.pick(src, &hot, &mut rng).map(|d| (src, d)))
                .collect();
            let r = rates(net, &flows)?;
            Ok(r.iter().sum::<f64>() / net.hosts().len().max(1) as f64)
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
