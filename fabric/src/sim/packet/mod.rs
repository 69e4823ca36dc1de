//! Packet-level simulation: the link-level flow control of InfiniBand over
//! the emitted tables, so that head-of-line blocking, congestion trees and
//! deadlocks happen as they would on the wire.
//!
//! The model, event driven and deterministic (events at equal times run in
//! the order they were scheduled):
//! - every directed link sends one packet at a time at the line rate (time
//!   is counted in byte times of that rate) and delivers its head after a
//!   fixed latency (cable and switch);
//! - every input port holds one buffer per VL; a sender holds credits for
//!   the buffer across the link and sends a packet only when the whole
//!   packet fits (virtual cut-through: the head moves on as soon as it has
//!   arrived, the buffer space comes back when the tail has left, and the
//!   credit one latency later);
//! - a switch (or router) forwards the head packet of each input buffer to
//!   the channel (link, VL) the path gives it: the LFT port, the SL-to-VL
//!   entry of (in port, out port, SL), the routers' relay decisions, as
//!   [`Paths`] walks them; an input port feeds one packet at a time, and
//!   an output link serves its waiting inputs round robin;
//! - hosts hold one unbounded send queue per VL and consume what reaches
//!   them at line rate.
//!
//! A deadlock is a cycle of input buffers, each full for the packet at the
//! head of the one before it, with nothing in flight toward any of them: no
//! event can ever free one. [`Sim::run`] looks for one every
//! [`Config::check_every`] byte times and whenever nothing is left to
//! happen while packets are still in the fabric, and reports its channels.

use super::sim_err;
use crate::error::Result;
use crate::network::Paths;
use std::collections::{HashMap, HashSet, VecDeque};
use wheel::Wheel;

mod deadlock;
mod mcast;
mod switching;
mod tree;
mod wheel;

use mcast::TreeNode;
pub use tree::{McastPaths, SubnetMcast};

/// VLs per port the model provides (IB's data VLs and VL15's slot).
const VLS: usize = 16;

/// A virtual channel: a directed link (the [`Paths`] link id) and a VL.
pub type Channel = (u32, u8);

/// Buffers, latency and packet size; times in byte times at the line rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Config {
    /// Input buffer per port and VL, in bytes: the credits a sender starts
    /// with.
    pub buffer: u32,
    /// Cable and switch latency of one hop.
    pub latency: u64,
    /// Largest packet; messages are cut into packets of this size.
    pub mtu: u32,
    /// Time between deadlock checks while traffic flows.
    pub check_every: u64,
    /// Bytes each packet carries on the wire besides its payload (headers
    /// and CRCs): they take link time and buffer space and are not
    /// delivered. 0 is the ideal link; [`IB_PACKET_OVERHEAD`] is
    /// InfiniBand's for a routed packet.
    pub overhead: u32,
}

/// InfiniBand's bytes per packet besides the payload, for a packet that
/// crosses subnets: LRH 8, GRH 40, BTH 12, ICRC 4, VCRC 2 (IBA vol. 1,
/// ch. 7 and 9).
pub const IB_PACKET_OVERHEAD: u32 = 8 + 40 + 12 + 4 + 2;

impl Default for Config {
    /// 2048-byte packets (the inter-subnet paper's MTU), four of them per
    /// buffer and VL, 200 ns per hop at 4x DDR's 2 GB/s; the ideal link
    /// (no header bytes).
    fn default() -> Self {
        Self {
            buffer: 4 * 2048,
            latency: 400,
            mtu: 2048,
            check_every: 64 * 2048,
            overhead: 0,
        }
    }
}

/// Why [`Sim::run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The time limit was reached.
    Until,
    /// Messages were delivered or send queues ran empty; see
    /// [`Sim::take_delivered`] and [`Sim::take_drained`].
    Notice,
    /// Nothing is left to happen and no packet is in the fabric.
    Idle,
    /// A cycle of full buffers: the channels in the order their head
    /// packets wait on each other (each waits on the next, the last on the
    /// first).
    Deadlock(Vec<Channel>),
}

#[derive(Clone, Copy)]
struct Packet {
    msg: u32,
    /// Unicast: index in the path of the channel the packet is sent on
    /// next. Multicast: the node in `tree_nodes` of the channel it came in
    /// on ([`ROOT`] in its sender's queue).
    hop: u32,
    /// Multicast, at the head of a queue: copies still to send. The
    /// packet leaves its buffer (and its credit goes back) with the last.
    copies: u16,
    /// On the wire: the payload and the overhead.
    size: u32,
    payload: u32,
}

/// A multicast packet not yet sent on its sender's link.
const ROOT: u32 = u32::MAX;

struct Message {
    /// Offset of the path in `paths`, or the sender's first node in
    /// `tree_nodes`.
    path: u32,
    len: u16,
    mcast: bool,
    group: u32,
    /// Packets still to consume (multicast: times the receivers).
    left: u64,
    tag: u64,
}

// Event kinds, in one tuple so the heap orders them by (time, sequence).
const ARRIVE: u8 = 0;
/// A packet's tail has left: its output link and its input port are free.
const FREE: u8 = 1;
const CREDIT: u8 = 2;
const DELIVER: u8 = 3;
/// DELIVER's argument for a copy a switch drops (no port to copy onto).
const DROP: u32 = 1;

/// A head packet waiting for an output link: its queue, the channel it
/// wants there and its size (kept here so that arbitration reads only
/// this list).
#[derive(Clone, Copy)]
struct Request {
    queue: u32,
    channel: u32,
    size: u32,
    /// Multicast: the tree node of the copy this link would carry.
    node: u32,
}

/// A packet-level simulation over a routed fabric.
pub struct Sim<'a, P: Paths + ?Sized> {
    net: &'a P,
    cfg: Config,
    links: usize,
    now: u64,
    events: Wheel,
    /// Input buffers: channel `link * VLS + vl`, then the hosts' send
    /// queues `(links + host) * VLS + vl`.
    queues: Vec<VecDeque<u32>>,
    credit: Vec<u32>,
    pending_credit: Vec<u32>,
    in_flight: Vec<u32>,
    out_free: Vec<u64>,
    /// Input ports (links, then hosts): when each may feed a packet again,
    /// and the packet it feeds (whose other copies may start before).
    in_free: Vec<u64>,
    feeding: Vec<u32>,
    /// Per link: the queues whose head packet waits for it, ascending.
    requests: Vec<Vec<Request>>,
    last_served: Vec<u32>,
    packets: Vec<Packet>,
    free_packets: Vec<u32>,
    messages: Vec<Message>,
    paths: Vec<Channel>,
    path_of: HashMap<(u32, u32), (u32, u16)>,
    /// One more than the highest VL any path uses: the queues an input
    /// port can hold packets in.
    vls_seen: usize,
    unroutable: HashSet<(u32, u32)>,
    scratch: Vec<Channel>,
    mcast: Option<&'a dyn McastPaths>,
    /// Scratch: a head packet's next links.
    want: Vec<(Channel, u32)>,
    /// Multicast copies: senders' first channels, then per (group, link)
    /// the copies made of what came in over it, as they are first needed.
    tree_nodes: Vec<TreeNode>,
    /// (group, sender) -> its first node and its receivers.
    first_of: HashMap<(u32, u32), (u32, u32)>,
    /// (group, link) -> the run of copies in `tree_nodes`.
    runs: HashMap<(u32, u32), (u32, u16)>,
    copies_scratch: Vec<(Channel, bool)>,
    live: u64,
    delivered: Vec<(u64, u64)>,
    drained: Vec<usize>,
    delivered_bytes: u64,
    next_check: u64,
}

impl<'a, P: Paths + ?Sized> Sim<'a, P> {
    pub fn new(net: &'a P, cfg: Config) -> Result<Self> {
        let largest = u64::from(cfg.mtu) + u64::from(cfg.overhead);
        if cfg.mtu == 0 || u64::from(cfg.buffer) < largest {
            return Err(sim_err(format!(
                "a buffer of {} bytes cannot hold a {largest}-byte packet (MTU {} and {} bytes of headers)",
                cfg.buffer, cfg.mtu, cfg.overhead
            )));
        }
        // The event wheel spans the largest packet plus a latency.
        if cfg.latency > 1 << 24 {
            return Err(sim_err(format!(
                "a latency of {} byte times is beyond the model's 2^24",
                cfg.latency
            )));
        }
        if cfg.check_every == 0 {
            return Err(sim_err(
                "the deadlock check interval must be positive".into(),
            ));
        }
        let links = net.num_links();
        let hosts = net.hosts().len();
        let ports = links + hosts;
        if ports * VLS >= u32::MAX as usize {
            return Err(sim_err("too many links to simulate".into()));
        }
        Ok(Self {
            net,
            cfg,
            links,
            now: 0,
            events: Wheel::new(largest + cfg.latency),
            queues: vec![VecDeque::new(); ports * VLS],
            credit: vec![cfg.buffer; links * VLS],
            pending_credit: vec![0; links * VLS],
            in_flight: vec![0; links * VLS],
            out_free: vec![0; links],
            in_free: vec![0; ports],
            feeding: vec![u32::MAX; ports],
            requests: vec![Vec::new(); links],
            last_served: vec![u32::MAX; links],
            packets: Vec::new(),
            free_packets: Vec::new(),
            messages: Vec::new(),
            paths: Vec::new(),
            path_of: HashMap::new(),
            vls_seen: 0,
            unroutable: HashSet::new(),
            scratch: Vec::new(),
            mcast: None,
            want: Vec::new(),
            tree_nodes: Vec::new(),
            first_of: HashMap::new(),
            runs: HashMap::new(),
            copies_scratch: Vec::new(),
            live: 0,
            delivered: Vec::new(),
            drained: Vec::new(),
            delivered_bytes: 0,
            next_check: cfg.check_every,
        })
    }

    /// The current time, in byte times.
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Bytes consumed by hosts so far.
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }

    /// Packets sent and not yet consumed.
    pub fn packets_in_fabric(&self) -> u64 {
        self.live
    }

    /// Queues a message of `bytes` from host `src` to host `dst`, cut into
    /// packets of at most `packet` bytes (at most the MTU), behind what
    /// `src` already sends on the same VL. `tag` comes back with its
    /// delivery.
    pub fn send(
        &mut self,
        src: usize,
        dst: usize,
        bytes: u64,
        packet: u32,
        tag: u64,
    ) -> Result<()> {
        let hosts = self.net.hosts().len();
        if src >= hosts || dst >= hosts || src == dst {
            return Err(sim_err(format!(
                "no message from host {src} to host {dst} among {hosts} hosts"
            )));
        }
        if packet == 0 || packet > self.cfg.mtu || bytes == 0 {
            return Err(sim_err(format!(
                "a {bytes}-byte message in packets of {packet} bytes (MTU {})",
                self.cfg.mtu
            )));
        }
        let (path, len) = self.path(src, dst)?;
        let vl = self.paths[path as usize].1;
        let m = Message {
            path,
            len,
            mcast: false,
            group: 0,
            left: 1,
            tag,
        };
        self.enqueue(src, vl, m, bytes, packet, 0)
    }

    /// Cuts a message into packets behind what `src` already sends on `vl`.
    fn enqueue(
        &mut self,
        src: usize,
        vl: u8,
        mut m: Message,
        bytes: u64,
        packet: u32,
        hop: u32,
    ) -> Result<()> {
        let count = bytes.div_ceil(packet as u64);
        if count > u32::MAX as u64 {
            return Err(sim_err(format!("a {bytes}-byte message is too long")));
        }
        m.left *= count;
        let msg = self.messages.len() as u32;
        self.messages.push(m);
        let q = (self.links + src) * VLS + vl as usize;
        let was_empty = self.queues[q].is_empty();
        let mut rest = bytes;
        for _ in 0..count {
            let size = rest.min(packet as u64) as u32;
            rest -= size as u64;
            let p = Packet {
                msg,
                hop,
                copies: 0,
                size: size + self.cfg.overhead,
                payload: size,
            };
            let id = self.alloc(p);
            self.queues[q].push_back(id);
        }
        if was_empty {
            self.request(q);
        }
        Ok(())
    }

    /// Whether the tables complete the path from `src` to `dst`, once a
    /// send has tried it (None before).
    pub fn routable(&self, src: usize, dst: usize) -> Option<bool> {
        let key = (src as u32, dst as u32);
        if self.path_of.contains_key(&key) {
            Some(true)
        } else if self.unroutable.contains(&key) {
            Some(false)
        } else {
            None
        }
    }

    fn path(&mut self, src: usize, dst: usize) -> Result<(u32, u16)> {
        if let Some(&p) = self.path_of.get(&(src as u32, dst as u32)) {
            return Ok(p);
        }
        self.scratch.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        let walked = self.net.path_channels(src, dst, &mut scratch);
        self.scratch = scratch;
        if walked.is_err() {
            self.unroutable.insert((src as u32, dst as u32));
        }
        walked?;
        if self.scratch.len() > u16::MAX as usize {
            return Err(sim_err(format!(
                "the path from host {src} to {dst} is too long"
            )));
        }
        if let Some(&(l, vl)) = self
            .scratch
            .iter()
            .find(|c| c.0 as usize >= self.links || c.1 as usize >= VLS)
        {
            return Err(sim_err(format!("channel (link {l}, VL {vl}) out of range")));
        }
        let top = self
            .scratch
            .iter()
            .map(|c| c.1 as usize + 1)
            .max()
            .unwrap_or(0);
        self.vls_seen = self.vls_seen.max(top);
        let p = (self.paths.len() as u32, self.scratch.len() as u16);
        self.paths.extend_from_slice(&self.scratch);
        self.path_of.insert((src as u32, dst as u32), p);
        Ok(p)
    }

    /// Messages delivered since the last call: (tag, time of the last byte).
    pub fn take_delivered(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.delivered)
    }

    /// Hosts whose send queues ran empty since the last call.
    pub fn take_drained(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.drained)
    }

    fn at(&mut self, t: u64, kind: u8, a: u32, b: u32) {
        self.events.push(t, (kind, a, b));
    }

    /// Runs events up to time `until`; returns early on a notice (a message
    /// delivered, a send queue drained) or a deadlock.
    pub fn run(&mut self, until: u64) -> Stop {
        loop {
            if !self.delivered.is_empty() || !self.drained.is_empty() {
                return Stop::Notice;
            }
            let Some(t) = self.events.next_time() else {
                if self.live > 0 {
                    if let Some(c) = self.deadlock() {
                        return Stop::Deadlock(c);
                    }
                }
                return Stop::Idle;
            };
            if t >= self.next_check {
                self.next_check = t + self.cfg.check_every;
                if let Some(c) = self.deadlock() {
                    return Stop::Deadlock(c);
                }
            }
            if t > until {
                if until > self.now {
                    self.now = until;
                    self.events.rewind(until);
                }
                return Stop::Until;
            }
            self.now = t;
            let (kind, a, b) = self.events.pop(t);
            match kind {
                ARRIVE => self.arrive(a, b as usize),
                FREE => self.free(a as usize, b as usize),
                CREDIT => {
                    let ch = a as usize;
                    self.credit[ch] += b;
                    self.pending_credit[ch] -= b;
                    self.arbitrate(ch / VLS);
                }
                _ => self.deliver(a, b == DROP),
            }
        }
    }
}

#[cfg(test)]
mod tests;
