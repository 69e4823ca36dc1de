//! Deadlock: a cycle of input buffers, each holding at its head a packet
//! that needs the next one, which is full for it with nothing in flight
//! toward it. No event can free any of them: a buffer drains only through
//! its head, and a multicast head leaves only when its last copy has.

use super::{Channel, Paths, Request, Sim, VLS};

impl<P: Paths + ?Sized> Sim<'_, P> {
    /// The buffers queue `q`'s head waits for and cannot get: for a
    /// multicast head, those of its copies not yet sent.
    fn blocked_on(&self, q: usize, want: &mut Vec<(Channel, u32)>, out: &mut Vec<usize>) {
        out.clear();
        let Some(&id) = self.queues[q].front() else {
            return;
        };
        let p = &self.packets[id as usize];
        self.next_links(p, want);
        for &((l, vl), _) in want.iter() {
            let waiting = self.requests[l as usize]
                .binary_search_by_key(&(q as u32), |x: &Request| x.queue)
                .is_ok();
            let ch = l as usize * VLS + vl as usize;
            let full = self.credit[ch] + self.pending_credit[ch] < p.size;
            if waiting && full && self.in_flight[ch] == 0 && !self.queues[ch].is_empty() {
                out.push(ch);
            }
        }
    }

    /// The search from buffer `s`: a cycle met on the current path, in
    /// wait order; every buffer it finished is marked 2 in `state`.
    fn cycle_from(
        &self,
        s: usize,
        state: &mut [u8],
        want: &mut Vec<(Channel, u32)>,
    ) -> Option<Vec<Channel>> {
        let mut path: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut next = Vec::new();
        self.blocked_on(s, want, &mut next);
        state[s] = 1;
        path.push((s, next));
        while let Some((q, todo)) = path.last_mut() {
            let Some(n) = todo.pop() else {
                state[*q] = 2;
                path.pop();
                continue;
            };
            if state[n] == 1 {
                let at = path.iter().position(|x| x.0 == n).unwrap_or(0);
                return Some(
                    path[at..]
                        .iter()
                        .map(|&(c, _)| ((c / VLS) as u32, (c % VLS) as u8))
                        .collect(),
                );
            }
            if state[n] == 0 {
                let mut next = Vec::new();
                self.blocked_on(n, want, &mut next);
                state[n] = 1;
                path.push((n, next));
            }
        }
        None
    }

    /// A cycle of buffers whose head packets each wait for the next one,
    /// in that order (the last waits for the first).
    pub(super) fn deadlock(&self) -> Option<Vec<Channel>> {
        let real = self.links * VLS;
        let mut want = Vec::new();
        // Depth first over the wait-for graph, three colours: a buffer on
        // the current path met again closes the cycle.
        let mut state = vec![0u8; real];
        for s in 0..real {
            if state[s] == 0 && !self.queues[s].is_empty() {
                if let Some(c) = self.cycle_from(s, &mut state, &mut want) {
                    return Some(c);
                }
            }
        }
        None
    }
}
