//! The traffic patterns the flow and packet models share: the HPCC rings'
//! host orders and the inter-subnet paper's uniform traffic with an
//! inter-subnet percentage (ISP) and hot spots.

use super::sim_err;
use crate::error::Result;
use crate::network::Host;
use rand::Rng;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// A ring's host order: the natural order (hosts in subnet, then port
/// order) for `None`, else random ring `i`, drawn from stream `i` of
/// `seed` so that results do not depend on threads.
pub fn ring_order(hosts: usize, random: Option<usize>, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..hosts).collect();
    if let Some(i) = random {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(i as u64);
        order.shuffle(&mut rng);
    }
    order
}

/// Uniform traffic with hot spots, as in the inter-subnet paper: each
/// message goes with probability `isp` to another subnet, else to its own.
/// One hot spot per subnet (drawn per sample) receives a `hot_spot` share of
/// the traffic headed to that subnet; the rest picks uniformly.
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

/// Draws destinations for [`Uniform`] traffic over a fabric's hosts.
pub struct Destinations {
    subnet: Vec<usize>,
    members: Vec<Vec<usize>>,
    /// Per subnet: the other subnets with hosts.
    others: Vec<Vec<usize>>,
    /// Per subnet: how many hosts the other subnets hold.
    remote_hosts: Vec<usize>,
    isp: f64,
    hot_spot: f64,
}

impl Destinations {
    pub fn new(hosts: &[Host], u: &Uniform) -> Result<Self> {
        if !(0.0..=1.0).contains(&u.isp) || !(0.0..=1.0).contains(&u.hot_spot) {
            return Err(sim_err(
                "ISP and hot-spot probabilities lie in 0..=1".into(),
            ));
        }
        let nsub = hosts.iter().map(|h| h.subnet + 1).max().unwrap_or(0);
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); nsub];
        for (i, h) in hosts.iter().enumerate() {
            members[h.subnet].push(i);
        }
        let others: Vec<Vec<usize>> = (0..nsub)
            .map(|s| {
                (0..nsub)
                    .filter(|&t| t != s && !members[t].is_empty())
                    .collect()
            })
            .collect();
        let remote_hosts = others
            .iter()
            .map(|o| o.iter().map(|&t| members[t].len()).sum())
            .collect();
        Ok(Self {
            subnet: hosts.iter().map(|h| h.subnet).collect(),
            members,
            others,
            remote_hosts,
            isp: u.isp,
            hot_spot: u.hot_spot,
        })
    }

    /// One hot spot per subnet (none for a subnet without hosts).
    pub fn hot_spots(&self, rng: &mut impl Rng) -> Vec<Option<usize>> {
        self.members
            .iter()
            .map(|m| m.choose(rng).copied())
            .collect()
    }

    /// A destination for a message from `src`; `None` when `src` has no
    /// other host to send to.
    pub fn pick(&self, src: usize, hot: &[Option<usize>], rng: &mut impl Rng) -> Option<usize> {
        let own = self.subnet[src];
        let others = &self.others[own];
        let remote = !others.is_empty() && rng.gen_bool(self.isp);
        let target = if remote {
            // Weighted by size: a uniform pick among remote hosts.
            let mut k = rng.gen_range(0..self.remote_hosts[own]);
            let mut pick = others[0];
            for &s in others {
                if k < self.members[s].len() {
                    pick = s;
                    break;
                }
                k -= self.members[s].len();
            }
            pick
        } else {
            own
        };
        let pool = &self.members[target];
        if let Some(d) = hot[target].filter(|&d| d != src) {
            if rng.gen_bool(self.hot_spot) {
                return Some(d);
            }
        }
        if pool.len() < 2 && !remote {
            return None;
        }
        loop {
            let d = pool[rng.gen_range(0..pool.len())];
            if d != src {
                return Some(d);
            }
        }
    }
}
