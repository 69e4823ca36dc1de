//! The traffic patterns of [`super::traffic`] run on the packet model:
//! HPCC rings (ping-pong to both neighbours, message after message as the
//! hosts finish) and saturating uniform traffic with hot spots.

use super::flow::RingStats;
use super::packet::{Channel, Config, McastPaths, Sim, Stop};
use super::sim_err;
use super::traffic::{Destinations, Uniform, ring_order};
use crate::error::Result;
use crate::network::Paths;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// What a ring or uniform run found besides its figure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Deadlocked {
    /// The channels of the cycle of full buffers.
    pub cycle: Vec<Channel>,
    /// When it was found, in byte times.
    pub at: u64,
}

/// One HPCC ring on the packet model: host `order[i]` sends `message`
/// bytes to its left neighbour while receiving from its right one; when
/// both are through it does the same to the right. A host's figure is its
/// two messages over the time it took; the ring's is the mean over hosts,
/// in link bandwidths; or the deadlock that stopped it.
pub fn ring<P: Paths + ?Sized>(
    net: &P,
    cfg: Config,
    order: &[usize],
    message: u64,
) -> Result<std::result::Result<f64, Deadlocked>> {
    let n = order.len();
    if n < 2 {
        return Err(sim_err("a ring needs at least two hosts".into()));
    }
    let mut sim = Sim::new(net, cfg)?;
    // Messages still expected per host and phase: its send and its receive.
    let mut left = vec![[2u8; 2]; n];
    let mut finish = vec![0u64; n];
    let tag = |pos: usize, phase: u64| (pos as u64) << 1 | phase;
    for i in 0..n {
        sim.send(
            order[i],
            order[(i + n - 1) % n],
            message,
            cfg.mtu,
            tag(i, 0),
        )?;
    }
    let mut done = 0;
    while done < n {
        match sim.run(u64::MAX) {
            Stop::Notice => {}
            Stop::Deadlock(cycle) => {
                return Ok(Err(Deadlocked {
                    cycle,
                    at: sim.now(),
                }));
            }
            Stop::Until | Stop::Idle => {
                return Err(sim_err(
                    "the ring stopped before every message arrived".into(),
                ));
            }
        }
        sim.take_drained();
        for (t, at) in sim.take_delivered() {
            let (pos, phase) = ((t >> 1) as usize, (t & 1) as usize);
            // A phase-0 message from `pos` is `pos`'s send and the receive
            // of its left neighbour; a phase-1 one that of its right.
            let other = if phase == 0 {
                (pos + n - 1) % n
            } else {
                (pos + 1) % n
            };
            for h in [pos, other] {
                left[h][phase] -= 1;
                if left[h][phase] > 0 {
                    continue;
                }
                if phase == 0 {
                    sim.send(order[h], order[(h + 1) % n], message, cfg.mtu, tag(h, 1))?;
                } else {
                    finish[h] = at;
                    done += 1;
                }
            }
        }
    }
    let sum: f64 = finish
        .iter()
        .map(|&t| 2.0 * message as f64 / t as f64)
        .sum();
    Ok(Ok(sum / n as f64))
}

/// Ring figures, and the first deadlock when a ring deadlocked (its
/// figure is left out of the statistics).
#[derive(Debug, Clone, PartialEq)]
pub struct Rings {
    pub stats: RingStats,
    pub deadlock: Option<Deadlocked>,
    /// Rings that deadlocked.
    pub deadlocked: usize,
}

/// The natural-order ring and `random` random-order rings on the packet
/// model (rings in parallel; ring `i` draws from stream `i` of `seed`).
pub fn rings<P: Paths + ?Sized>(
    net: &P,
    cfg: Config,
    random: usize,
    seed: u64,
    message: u64,
) -> Result<Rings> {
    let n = net.hosts().len();
    let runs: Vec<std::result::Result<f64, Deadlocked>> = (0..=random)
        .into_par_iter()
        .map(|i| ring(net, cfg, &ring_order(n, i.checked_sub(1), seed), message))
        .collect::<Result<_>>()?;
    let nor = runs[0].as_ref().copied().unwrap_or(0.0);
    let ror: Vec<f64> = runs[1..]
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    let deadlocked = runs.iter().filter(|r| r.is_err()).count();
    let deadlock = runs.into_iter().find_map(|r| r.err());
    let k = ror.len().max(1) as f64;
    let (lo, hi, avg) = if ror.is_empty() {
        (nor, nor, nor)
    } else {
        (
            ror.iter().copied().fold(f64::INFINITY, f64::min),
            ror.iter().copied().fold(0.0, f64::max),
            ror.iter().sum::<f64>() / k,
        )
    };
    Ok(Rings {
        stats: RingStats {
            nor,
            ror_min: lo,
            ror_max: hi,
            ror_avg: avg,
            // Messages end one by one here: there is no separate flow figure.
            ror_flow_avg: avg,
            rings: ror.len(),
        },
        deadlock,
        deadlocked,
    })
}

/// Saturating traffic: every host sends message after message as fast as
/// its link takes them, destinations drawn as [`Uniform`] says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Saturate {
    pub traffic: Uniform,
    /// Bytes per message.
    pub message: u64,
    /// Smallest packet; each message draws its packet size uniformly
    /// between this and the MTU (the MTU alone when equal to it).
    pub min_packet: u32,
    /// Byte times before measuring, then measured.
    pub warmup: u64,
    pub window: u64,
    /// Count messages whose path the tables do not complete (a dead port,
    /// a missing entry, a loop: what an update in progress drops) and send
    /// the next one instead of failing.
    pub skip_unroutable: bool,
    /// Share of messages sent to a multicast group (drawn uniformly among
    /// the groups of [`saturate_with`] the sender is a member of; a host
    /// of none sends unicast) instead of one host.
    pub mcast_share: f64,
}

/// What a saturating run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Throughput {
    /// Bytes consumed in the window over the hosts' injection bandwidth,
    /// averaged over the samples.
    pub throughput: f64,
    /// The first sample's deadlock, if any sample deadlocked (its
    /// throughput counts what arrived before).
    pub deadlock: Option<Deadlocked>,
    /// Messages skipped as unroutable, over all samples.
    pub unroutable: u64,
}

/// [`Saturate`] traffic, `traffic.samples` independent runs in parallel.
pub fn saturate<P: Paths + ?Sized>(net: &P, cfg: Config, s: &Saturate) -> Result<Throughput> {
    saturate_with(net, None, cfg, s)
}

/// [`saturate`], with `s.mcast_share` of the messages sent to the groups
/// of `mc`.
pub fn saturate_with<P: Paths + ?Sized>(
    net: &P,
    mc: Option<&dyn McastPaths>,
    cfg: Config,
    s: &Saturate,
) -> Result<Throughput> {
    let groups = mc.map_or(0, |m| m.num_groups());
    if !(0.0..=1.0).contains(&s.mcast_share) || s.mcast_share > 0.0 && groups == 0 {
        return Err(sim_err(format!(
            "a multicast share of {} with {groups} groups",
            s.mcast_share
        )));
    }
    if s.min_packet == 0 || s.min_packet > cfg.mtu || s.message == 0 || s.window == 0 {
        return Err(sim_err(format!(
            "packets of {}..={} bytes, {}-byte messages, a {}-byte-time window",
            s.min_packet, cfg.mtu, s.message, s.window
        )));
    }
    let pick = Destinations::new(net.hosts(), &s.traffic)?;
    let runs: Vec<(f64, Option<Deadlocked>, u64)> = (0..s.traffic.samples.max(1))
        .into_par_iter()
        .map(|sample| {
            let mut rng = ChaCha8Rng::seed_from_u64(s.traffic.seed);
            rng.set_stream(sample as u64);
            let hot = pick.hot_spots(&mut rng);
            let mut sim = Sim::new(net, cfg)?;
            if let Some(m) = mc {
                sim = sim.with_mcast(m);
            }
            // A host sends to the groups it is a member of.
            let member_of: Vec<Vec<usize>> = (0..net.hosts().len())
                .map(|h| {
                    (0..groups)
                        .filter(|&g| mc.is_some_and(|m| m.is_member(g, h)))
                        .collect()
                })
                .collect();
            let mut unroutable = 0u64;
            // A host that has nowhere to send (every draw unroutable) rests.
            let mut next = |sim: &mut Sim<'_, P>, h: usize, rng: &mut ChaCha8Rng| -> Result<()> {
                let size = |rng: &mut ChaCha8Rng| {
                    if s.min_packet == cfg.mtu {
                        cfg.mtu
                    } else {
                        rng.gen_range(s.min_packet..=cfg.mtu)
                    }
                };
                for _ in 0..64 {
                    // No draw for multicast without groups: unicast runs
                    // draw as they always have.
                    if s.mcast_share > 0.0
                        && !member_of[h].is_empty()
                        && rng.gen_bool(s.mcast_share)
                    {
                        let g = member_of[h][rng.gen_range(0..member_of[h].len())];
                        let packet = size(rng);
                        return sim.send_mcast(h, g, s.message, packet, 0);
                    }
                    let Some(d) = pick.pick(h, &hot, rng) else {
                        return Ok(());
                    };
                    let packet = size(rng);
                    match sim.send(h, d, s.message, packet, 0) {
                        Ok(()) => return Ok(()),
                        Err(_) if s.skip_unroutable && sim.routable(h, d) == Some(false) => {
                            unroutable += 1
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            };
            for h in 0..net.hosts().len() {
                next(&mut sim, h, &mut rng)?;
            }
            let end = s.warmup + s.window;
            let mut start_bytes = None;
            loop {
                let until = if start_bytes.is_none() { s.warmup } else { end };
                match sim.run(until) {
                    Stop::Notice => {
                        sim.take_delivered();
                        for h in sim.take_drained() {
                            next(&mut sim, h, &mut rng)?;
                        }
                    }
                    Stop::Until if start_bytes.is_none() => {
                        start_bytes = Some(sim.delivered_bytes())
                    }
                    Stop::Until | Stop::Idle => break,
                    Stop::Deadlock(cycle) => {
                        let at = sim.now();
                        let got = sim.delivered_bytes() - start_bytes.unwrap_or(0);
                        let t = at.saturating_sub(s.warmup).max(1).min(s.window);
                        let frac = if start_bytes.is_some() {
                            got as f64 / (t as f64 * net.hosts().len() as f64)
                        } else {
                            0.0
                        };
                        return Ok((frac, Some(Deadlocked { cycle, at }), unroutable));
                    }
                }
            }
            let got = sim.delivered_bytes() - start_bytes.unwrap_or(0);
            let frac = got as f64 / (s.window as f64 * net.hosts().len() as f64);
            Ok((frac, None, unroutable))
        })
        .collect::<Result<_>>()?;
    let k = runs.len() as f64;
    Ok(Throughput {
        throughput: runs.iter().map(|r| r.0).sum::<f64>() / k,
        unroutable: runs.iter().map(|r| r.2).sum(),
        deadlock: runs.into_iter().find_map(|r| r.1),
    })
}
