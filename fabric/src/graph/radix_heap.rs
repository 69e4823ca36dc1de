//! A monotone priority queue for Dijkstra searches: `(key, value)` pairs
//! popped least first, ties by the least value, exactly as a
//! `BinaryHeap<Reverse<(u64, u64)>>` pops them.
//!
//! A radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster algorithms for
//! the shortest path problem", JACM 37(2), 1990) over the pair as one
//! 128-bit number: an entry sits in the bucket of the highest bit in which
//! it differs from the last one popped, so a push is an append and a pop
//! only redistributes the one bucket that holds the next minimum. That
//! needs pushes at or above the last pop, which a Dijkstra's are; a push
//! below it is still served (the heap is rebuilt around it), for searches
//! that resume from a new start. A bit mask of the non-empty buckets
//! finds the next one without scanning.

/// Buckets: one for entries equal to the last pop, one per bit above.
const BUCKETS: usize = 129;

/// Entries a bucket keeps room for across [`RadixHeap::clear`].
const KEEP: usize = 1 << 12;

#[derive(Debug, Clone)]
pub struct RadixHeap {
    last: u128,
    len: usize,
    /// Pushes since the last [`RadixHeap::clear`].
    pushed: u64,
    /// Bit `i - 1` set when bucket `i` (1..=128) holds an entry.
    nonempty: u128,
    buckets: Vec<Vec<u128>>,
}

impl Default for RadixHeap {
    fn default() -> Self {
        Self::new()
    }
}

impl RadixHeap {
    pub fn new() -> Self {
        Self {
            last: 0,
            len: 0,
            pushed: 0,
            nonempty: 0,
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the heap, keeping a bounded part of its memory: a bucket
    /// keeps its capacity only up to [`KEEP`] entries, since every bucket
    /// may have been the largest once and 129 of those add up.
    pub fn clear(&mut self) {
        for b in &mut self.buckets {
            b.clear();
            b.shrink_to(KEEP);
        }
        self.last = 0;
        self.len = 0;
        self.pushed = 0;
        self.nonempty = 0;
    }

    /// Pushes since the last [`RadixHeap::clear`].
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    #[inline]
    fn pack(key: u64, value: u64) -> u128 {
        ((key as u128) << 64) | value as u128
    }

    /// Files `x` in its bucket against the current floor.
    #[inline]
    fn file(&mut self, x: u128) {
        let b = Self::bucket(self.last, x);
        if b > 0 {
            self.nonempty |= 1 << (b - 1);
        }
        self.buckets[b].push(x);
    }

    #[inline]
    fn bucket(last: u128, x: u128) -> usize {
        128 - (x ^ last).leading_zeros() as usize
    }

    #[inline]
    pub fn push(&mut self, key: u64, value: u64) {
        let x = Self::pack(key, value);
        if x < self.last {
            self.rebase(x);
        }
        self.file(x);
        self.len += 1;
        self.pushed += 1;
    }

    /// Makes `x` the floor: every entry is bucketed again against it.
    fn rebase(&mut self, x: u128) {
        let mut all = Vec::with_capacity(self.len);
        for b in &mut self.buckets {
            all.append(b);
        }
        self.last = x;
        self.nonempty = 0;
        for y in all {
            self.file(y);
        }
    }

    /// The least `(key, value)`.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            if self.nonempty == 0 {
                return None;
            }
            let i = self.nonempty.trailing_zeros() as usize + 1;
            self.nonempty &= !(1 << (i - 1));
            let mut moved = std::mem::take(&mut self.buckets[i]);
            let min = moved.iter().copied().min()?;
            self.last = min;
            // Every entry of bucket i lands in a lower one: they agree
            // with the new floor above bit i - 1.
            for &y in &moved {
                self.file(y);
            }
            moved.clear();
            // The emptied bucket keeps little: across a search each bucket
            // may hold the most entries once, and their room adds up.
            moved.shrink_to(KEEP);
            self.buckets[i] = moved;
        }
        let x = self.buckets[0].pop()?;
        self.len -= 1;
        Some(((x >> 64) as u64, x as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    proptest! {
        /// Against the binary heap it replaces: any mix of pushes (at or
        /// above the last pop, and sometimes below it) and pops gives the
        /// same pairs in the same order.
        #[test]
        fn pops_what_a_binary_heap_pops(
            ops in prop::collection::vec((0u8..4, 0u64..50, 0u64..8), 1..300),
            shift in prop::sample::select(vec![0u32, 40, 58]),
        ) {
            let mut r = RadixHeap::new();
            let mut b = BinaryHeap::new();
            let mut last = 0u64;
            for (op, k, v) in ops {
                // Keys up to the top buckets; values over their 64 bits.
                let k = k << shift;
                let v = if shift > 0 { v << 50 } else { v };
                if op == 0 {
                    let (x, y) = (r.pop(), b.pop().map(|Reverse(e)| e));
                    prop_assert_eq!(x, y);
                    if let Some((k, _)) = x {
                        last = k;
                    }
                } else {
                    // Mostly at or above the last pop, as a Dijkstra pushes.
                    let key = if op == 3 { k } else { last.saturating_add(k) };
                    r.push(key, v);
                    b.push(Reverse((key, v)));
                }
                prop_assert_eq!(r.len(), b.len());
            }
            while let Some(Reverse(e)) = b.pop() {
                prop_assert_eq!(r.pop(), Some(e));
            }
            prop_assert_eq!(r.pop(), None);
        }
    }
}
