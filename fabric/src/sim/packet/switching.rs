//! What happens at a port: a head packet asks for its output links, an
//! output link picks the next packet it can send, a packet arrives or is
//! consumed.

use super::{ARRIVE, CREDIT, Channel, DELIVER, DROP, FREE, Packet, Paths, ROOT, Request, Sim, VLS};

impl<P: Paths + ?Sized> Sim<'_, P> {
    /// A unicast packet's next channel.
    pub(super) fn wanted(&self, p: &Packet) -> Channel {
        let m = &self.messages[p.msg as usize];
        self.paths[(m.path + p.hop) as usize]
    }

    /// A multicast packet's copies to send: their nodes in `tree_nodes`
    /// (resolved when it arrived).
    pub(super) fn copies_of(&self, p: &Packet) -> std::ops::Range<usize> {
        if p.hop == ROOT {
            let first = self.messages[p.msg as usize].path as usize;
            return first..first + 1;
        }
        let n = &self.tree_nodes[p.hop as usize];
        let first = n.first as usize;
        first..first + n.children as usize
    }

    /// The links the head packet of a queue waits for, with the tree node
    /// each would carry (multicast) or 0.
    pub(super) fn next_links(&self, p: &Packet, out: &mut Vec<(Channel, u32)>) {
        out.clear();
        if self.messages[p.msg as usize].mcast {
            for i in self.copies_of(p) {
                out.push((self.tree_nodes[i].channel, i as u32));
            }
        } else {
            out.push((self.wanted(p), 0));
        }
    }

    pub(super) fn input_port(&self, q: usize) -> usize {
        q / VLS
    }

    /// Whether queue `q`'s head may start now: its input port feeds no
    /// other packet. The copies of one multicast packet leave together,
    /// as a switch's crossbar replicates them.
    fn port_free(&self, q: usize) -> bool {
        let port = self.input_port(q);
        self.in_free[port] <= self.now || self.queues[q].front() == Some(&self.feeding[port])
    }

    /// The head of queue `q` asks for its next links.
    pub(super) fn request(&mut self, q: usize) {
        let Some(&id) = self.queues[q].front() else {
            return;
        };
        let mut want = std::mem::take(&mut self.want);
        self.next_links(&self.packets[id as usize], &mut want);
        let p = &mut self.packets[id as usize];
        p.copies = want.len() as u16;
        let size = p.size;
        for &((l, vl), node) in &want {
            let req = Request {
                queue: q as u32,
                channel: l * VLS as u32 + vl as u32,
                size,
                node,
            };
            let r = &mut self.requests[l as usize];
            if let Err(i) = r.binary_search_by_key(&req.queue, |x| x.queue) {
                r.insert(i, req);
            }
        }
        for &((l, _), _) in &want {
            self.arbitrate(l as usize);
        }
        self.want = want;
    }

    /// Output link `l` starts the next packet it can: round robin over the
    /// waiting inputs whose packet has credits and whose input port is free.
    pub(super) fn arbitrate(&mut self, l: usize) {
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
            if self.credit[x.channel as usize] >= x.size && self.port_free(x.queue as usize) {
                chosen = Some((i, x));
                break;
            }
        }
        let Some((i, x)) = chosen else {
            return;
        };
        let (q, ch) = (x.queue as usize, x.channel as usize);
        self.requests[l].remove(i);
        self.last_served[l] = q as u32;
        let Some(&id) = self.queues[q].front() else {
            return;
        };
        // A multicast packet sends a copy per child and leaves with the
        // last one; the others are new packets.
        let mut p = self.packets[id as usize];
        let last = !self.messages[p.msg as usize].mcast || p.copies <= 1;
        let sent = if self.messages[p.msg as usize].mcast {
            p.copies = p.copies.saturating_sub(1);
            self.packets[id as usize].copies = p.copies;
            if last {
                self.packets[id as usize].hop = x.node;
                id
            } else {
                self.live += 1;
                self.alloc(Packet {
                    hop: x.node,
                    copies: 0,
                    ..p
                })
            }
        } else {
            id
        };
        let now = self.now;
        let size = p.size as u64;
        self.credit[ch] -= p.size;
        self.in_flight[ch] += 1;
        self.out_free[l] = now + size;
        let port = self.input_port(q);
        self.in_free[port] = self.in_free[port].max(now + size);
        self.feeding[port] = id;
        self.at(now + self.cfg.latency, ARRIVE, sent, ch as u32);
        self.at(now + size, FREE, l as u32, port as u32);
        if !last {
            return;
        }
        self.queues[q].pop_front();
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

    pub(super) fn alloc(&mut self, p: Packet) -> u32 {
        match self.free_packets.pop() {
            Some(id) => {
                self.packets[id as usize] = p;
                id
            }
            None => {
                self.packets.push(p);
                (self.packets.len() - 1) as u32
            }
        }
    }

    /// Output link `l` and input port `port` are free again: each may
    /// start its next packet.
    pub(super) fn free(&mut self, l: usize, port: usize) {
        self.arbitrate(l);
        let mut want = std::mem::take(&mut self.want);
        for vl in 0..self.vls_seen {
            let q = port * VLS + vl;
            if let Some(&id) = self.queues[q].front() {
                self.next_links(&self.packets[id as usize], &mut want);
                for &((l, _), _) in &want {
                    self.arbitrate(l as usize);
                }
            }
        }
        self.want = want;
    }

    pub(super) fn arrive(&mut self, id: u32, ch: usize) {
        self.in_flight[ch] -= 1;
        let (msg, hop) = (self.packets[id as usize].msg, self.packets[id as usize].hop);
        if self.messages[msg as usize].mcast {
            self.resolve(hop, self.messages[msg as usize].group);
        }
        let p = &mut self.packets[id as usize];
        let m = &self.messages[p.msg as usize];
        // Consumed here: by the destination host (unicast), a receiver or
        // a switch with nowhere to copy to (multicast).
        let end = if m.mcast {
            let n = &self.tree_nodes[p.hop as usize];
            (n.children == 0).then_some(if n.to_host { 0 } else { DROP })
        } else {
            p.hop += 1;
            (p.hop == u32::from(m.len)).then_some(0)
        };
        let size = p.size as u64;
        if let Some(how) = end {
            let t = self.now + size;
            self.at(t, DELIVER, id, how);
            self.pending_credit[ch] += size as u32;
            self.at(t + self.cfg.latency, CREDIT, ch as u32, size as u32);
            return;
        }
        self.queues[ch].push_back(id);
        if self.queues[ch].len() == 1 {
            self.request(ch);
        }
    }

    pub(super) fn deliver(&mut self, id: u32, dropped: bool) {
        let p = self.packets[id as usize];
        self.free_packets.push(id);
        self.live -= 1;
        if dropped {
            return;
        }
        self.delivered_bytes += p.payload as u64;
        let m = &mut self.messages[p.msg as usize];
        m.left -= 1;
        if m.left == 0 {
            self.delivered.push((m.tag, self.now));
        }
    }
}
