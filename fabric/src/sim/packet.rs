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
    /// Index in the path of the channel the packet is sent on next.
    hop: u16,
    /// On the wire: the payload and the overhead.
    size: u32,
    payload: u32,
}

struct Message {
    path: u32,
    len: u16,
    left: u32,
    tag: u64,
}

// Event kinds, in one tuple so the heap orders them by (time, sequence).
const ARRIVE: u8 = 0;
/// A packet's tail has left: its output link and its input port are free.
const FREE: u8 = 1;
const CREDIT: u8 = 2;
const DELIVER: u8 = 3;

/// The pending events: a timing wheel. Every event is scheduled at most
/// an MTU plus a latency ahead, so with more slots than that each slot
/// holds the events of one time, in the order they were scheduled (the
/// order they run in), and finding the next event scans a bounded stretch.
struct Wheel {
    slots: Vec<Vec<(u8, u32, u32)>>,
    /// One bit per slot holding events, to skip idle stretches by words.
    occupied: Vec<u64>,
    mask: u64,
    /// The time of the slot being run, and how many of its events have.
    cursor: u64,
    done: usize,
    pending: usize,
}

impl Wheel {
    fn new(horizon: u64) -> Self {
        let size = (horizon + 1).next_power_of_two().max(64);
        Self {
            slots: vec![Vec::new(); size as usize],
            occupied: vec![0; size as usize / 64],
            mask: size - 1,
            cursor: 0,
            done: 0,
            pending: 0,
        }
    }

    fn push(&mut self, t: u64, e: (u8, u32, u32)) {
        let i = (t & self.mask) as usize;
        self.slots[i].push(e);
        self.occupied[i / 64] |= 1 << (i % 64);
        self.pending += 1;
    }

    /// The time of the next event.
    fn next_time(&mut self) -> Option<u64> {
        if self.pending == 0 {
            return None;
        }
        let i = (self.cursor & self.mask) as usize;
        if self.done < self.slots[i].len() {
            return Some(self.cursor);
        }
        self.slots[i].clear();
        self.occupied[i / 64] &= !(1 << (i % 64));
        self.done = 0;
        // The next occupied slot after `i`, cyclically: some event is
        // pending, so one is.
        let words = self.occupied.len();
        let mut w = (i + 1) / 64 % words;
        let mut bits = self.occupied[w] & (u64::MAX << ((i + 1) % 64));
        let mut k = 0;
        while bits == 0 && k <= words {
            w = (w + 1) % words;
            bits = self.occupied[w];
            k += 1;
        }
        let j = w * 64 + bits.trailing_zeros() as usize;
        let ahead = (j + self.slots.len() - i) % self.slots.len();
        self.cursor += if ahead == 0 { self.slots.len() } else { ahead } as u64;
        Some(self.cursor)
    }

    /// Moves the wheel back to `t`, where a caller's sends start: no
    /// event is pending before the next one [`Self::next_time`] found, which
    /// is later than `t` and not yet begun, and every pending one is less
    /// than a wheel ahead of `t` (they were of the time before it).
    fn rewind(&mut self, t: u64) {
        debug_assert_eq!(self.done, 0);
        self.cursor = t;
    }

    /// Takes the next event of time `t` (as [`Self::next_time`] found it).
    fn pop(&mut self, t: u64) -> (u8, u32, u32) {
        let e = self.slots[(t & self.mask) as usize][self.done];
        self.done += 1;
        self.pending -= 1;
        e
    }
}

/// A head packet waiting for an output link: its queue, the channel it
/// wants there and its size (kept here so that arbitration reads only
/// this list).
#[derive(Clone, Copy)]
struct Request {
    queue: u32,
    channel: u32,
    size: u32,
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
    /// Input ports (links, then hosts): when each may feed a packet again.
    in_free: Vec<u64>,
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
        let vl = self.paths[path as usize].1 as usize;
        let count = bytes.div_ceil(packet as u64);
        if count > u32::MAX as u64 {
            return Err(sim_err(format!("a {bytes}-byte message is too long")));
        }
        let msg = self.messages.len() as u32;
        self.messages.push(Message {
            path,
            len,
            left: count as u32,
            tag,
        });
        let q = (self.links + src) * VLS + vl;
        let was_empty = self.queues[q].is_empty();
        let mut rest = bytes;
        for _ in 0..count {
            let size = rest.min(packet as u64) as u32;
            rest -= size as u64;
            let p = Packet {
                msg,
                hop: 0,
                size: size + self.cfg.overhead,
                payload: size,
            };
            let id = match self.free_packets.pop() {
                Some(id) => {
                    self.packets[id as usize] = p;
                    id
                }
                None => {
                    self.packets.push(p);
                    (self.packets.len() - 1) as u32
                }
            };
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

    fn wanted(&self, p: &Packet) -> Channel {
        let m = &self.messages[p.msg as usize];
        self.paths[(m.path + p.hop as u32) as usize]
    }

    fn input_port(&self, q: usize) -> usize {
        q / VLS
    }

    /// The head of queue `q` asks for its next link.
    fn request(&mut self, q: usize) {
        let Some(&id) = self.queues[q].front() else {
            return;
        };
        let p = self.packets[id as usize];
        let (l, vl) = self.wanted(&p);
        let req = Request {
            queue: q as u32,
            channel: l * VLS as u32 + vl as u32,
            size: p.size,
        };
        let r = &mut self.requests[l as usize];
        if let Err(i) = r.binary_search_by_key(&req.queue, |x| x.queue) {
            r.insert(i, req);
        }
        self.arbitrate(l as usize);
    }

    /// Output link `l` starts the next packet it can: round robin over the
    /// waiting inputs whose packet has credits and whose input port is free.
    fn arbitrate(&mut self, l: usize) {
        if self.out_free[l] > self.now || self.requests[l].is_empty() {
            return;
        }
        let r = &self.requests[l];
        let start = r.partition_point(|x| x.queue <= self.last_served[l]);
        let n = r.len();
        let mut chosen = None;
        for k in 0..n {
            let i = (start + k) % n;
            let x = r[i];
            if self.credit[x.channel as usize] >= x.size
                && self.in_free[self.input_port(x.queue as usize)] <= self.now
            {
                chosen = Some((i, x.queue as usize, x.channel as usize));
                break;
            }
        }
        let Some((i, q, ch)) = chosen else {
            return;
        };
        self.requests[l].remove(i);
        self.last_served[l] = q as u32;
        let Some(id) = self.queues[q].pop_front() else {
            return;
        };
        let p = self.packets[id as usize];
        let now = self.now;
        let size = p.size as u64;
        self.credit[ch] -= p.size;
        self.in_flight[ch] += 1;
        self.out_free[l] = now + size;
        let port = self.input_port(q);
        self.in_free[port] = now + size;
        self.at(now + self.cfg.latency, ARRIVE, id, ch as u32);
        self.at(now + size, FREE, l as u32, port as u32);
        if q < self.links * VLS {
            // The tail leaves this buffer at now + size; its credit reaches
            // the upstream sender one latency later.
            self.pending_credit[q] += p.size;
            self.at(now + size + self.cfg.latency, CREDIT, q as u32, p.size);
        } else {
            self.live += 1;
        }
        if self.queues[q].is_empty() {
            if q >= self.links * VLS {
                self.drained.push(port - self.links);
            }
        } else {
            self.request(q);
        }
    }

    fn arrive(&mut self, id: u32, ch: usize) {
        self.in_flight[ch] -= 1;
        let p = &mut self.packets[id as usize];
        p.hop += 1;
        let (hop, size, msg) = (p.hop, p.size as u64, p.msg);
        if hop == self.messages[msg as usize].len {
            // The destination host consumes it at line rate.
            let t = self.now + size;
            self.at(t, DELIVER, id, 0);
            self.pending_credit[ch] += size as u32;
            self.at(t + self.cfg.latency, CREDIT, ch as u32, size as u32);
            return;
        }
        self.queues[ch].push_back(id);
        if self.queues[ch].len() == 1 {
            self.request(ch);
        }
    }

    fn deliver(&mut self, id: u32) {
        let p = self.packets[id as usize];
        self.free_packets.push(id);
        self.live -= 1;
        self.delivered_bytes += p.payload as u64;
        let m = &mut self.messages[p.msg as usize];
        m.left -= 1;
        if m.left == 0 {
            self.delivered.push((m.tag, self.now));
        }
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
                FREE => {
                    self.arbitrate(a as usize);
                    let port = b as usize;
                    for vl in 0..self.vls_seen {
                        let q = port * VLS + vl;
                        if let Some(&id) = self.queues[q].front() {
                            let (l, _) = self.wanted(&self.packets[id as usize]);
                            self.arbitrate(l as usize);
                        }
                    }
                }
                CREDIT => {
                    let ch = a as usize;
                    self.credit[ch] += b;
                    self.pending_credit[ch] -= b;
                    self.arbitrate(ch / VLS);
                }
                _ => self.deliver(a),
            }
        }
    }

    /// A cycle of buffers whose head packets each wait for the next one,
    /// which is full for them with no packet or credit on the way.
    fn deadlock(&self) -> Option<Vec<Channel>> {
        let real = self.links * VLS;
        let blocked_on = |q: usize| -> Option<usize> {
            let &id = self.queues[q].front()?;
            let p = &self.packets[id as usize];
            let (l, vl) = self.wanted(p);
            let ch = l as usize * VLS + vl as usize;
            let full = self.credit[ch] + self.pending_credit[ch] < p.size;
            (full && self.in_flight[ch] == 0 && !self.queues[ch].is_empty()).then_some(ch)
        };
        // Each buffer waits on at most one other: follow the chains, three
        // colours, the first chain that meets itself is the cycle.
        let mut state = vec![0u8; real];
        for s in 0..real {
            if state[s] != 0 || self.queues[s].is_empty() {
                continue;
            }
            let mut chain = Vec::new();
            let mut q = s;
            loop {
                if state[q] == 1 {
                    let at = chain.iter().position(|&x| x == q).unwrap_or(0);
                    return Some(
                        chain[at..]
                            .iter()
                            .map(|&c| ((c / VLS) as u32, (c % VLS) as u8))
                            .collect(),
                    );
                }
                if state[q] == 2 {
                    break;
                }
                state[q] = 1;
                chain.push(q);
                match blocked_on(q) {
                    Some(n) => q = n,
                    None => break,
                }
            }
            for c in chain {
                state[c] = 2;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
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
}
