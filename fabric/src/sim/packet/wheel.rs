//! The pending events of the packet model.

/// The pending events: a timing wheel. Every event is scheduled at most
/// an MTU plus a latency ahead, so with more slots than that each slot
/// holds the events of one time, in the order they were scheduled (the
/// order they run in), and finding the next event scans a bounded stretch.
pub(super) struct Wheel {
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
    pub(super) fn new(horizon: u64) -> Self {
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

    pub(super) fn push(&mut self, t: u64, e: (u8, u32, u32)) {
        let i = (t & self.mask) as usize;
        self.slots[i].push(e);
        self.occupied[i / 64] |= 1 << (i % 64);
        self.pending += 1;
    }

    /// The time of the next event.
    pub(super) fn next_time(&mut self) -> Option<u64> {
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
    pub(super) fn rewind(&mut self, t: u64) {
        debug_assert_eq!(self.done, 0);
        self.cursor = t;
    }

    /// Takes the next event of time `t` (as [`Self::next_time`] found it).
    pub(super) fn pop(&mut self, t: u64) -> (u8, u32, u32) {
        let e = self.slots[(t & self.mask) as usize][self.done];
        self.done += 1;
        self.pending -= 1;
        e
    }
}
