//! Incremental cycle detection by levels (Bender, Fineman, Gilbert and
//! Tarjan, "A new approach to incremental cycle detection and related
//! problems", ACM TALG 12(2), 2016, the algorithm for sparse graphs).
//!
//! Every node has a level and every edge goes to an equal or higher one.
//! An edge to a higher level costs one comparison. Otherwise a backward
//! search among the tail's equal-level ancestors, stopped after `delta`
//! edges, either meets the head (a cycle) or decides the head's new
//! level; a forward search then lifts the head's descendants that fall
//! below it. Levels only rise, which bounds the forward searches in total
//! (`O(m^1.5)` for `m` edges), where a total order ([`super::topo_order`],
//! Pearce and Kelly) may move the same nodes back and forth: on the
//! channel dependency graphs Nue grows near the LID limit its searches
//! visit thousands of channels per turn.
//!
//! The answer is exact either way: an edge is refused exactly when the
//! graph leads from its head back to its tail. Which nodes a search
//! visits differs, which edges are admitted does not, so swapping one
//! structure for the other leaves routes unchanged. Removing edges never
//! breaks the levels, so callers may withdraw edges freely.

use super::topo_order::{ClosesCycle, Digraph};

/// Levels of the nodes `0..len` of a growing acyclic graph, and the
/// scratch space their searches reuse.
#[derive(Debug, Clone)]
pub struct LevelOrder {
    level: Vec<u32>,
    /// Backward-search marks by stamp, so no search has to clear them.
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    /// Levels a forward search changed, to restore when it meets a cycle.
    undo: Vec<(u32, u32)>,
    /// Edges admitted, for the search bound.
    edges: u64,
    /// Admitted edges that lifted some level.
    lifts: u64,
}

/// Fewest edges a backward search may take before it gives up and lifts
/// the head instead: below this, lifting costs more than searching.
const MIN_DELTA: u64 = 64;

/// The paper's bound `m^1/2` divided by this. Nue on Dragonfly p=8
/// (2.6M turns checked, 2 threads): divisor 1 routed in 12.0 s, 10 in
/// 10.1 s, 100 (with a floor of 4) in 10.3 s; bounds of 3 and 10 times
/// the paper's visited 2 and 5 times as many channels. The searches are
/// exact whatever the bound; only their cost moves between the backward
/// and forward halves.
const DELTA_DIVISOR: f64 = 10.0;

impl LevelOrder {
    /// Every node on level 0: any levels suit a graph without edges.
    pub fn new(n: usize) -> Self {
        Self::with_levels(vec![0; n])
    }

    /// Starting levels for graphs whose first edges are known to go up
    /// (equal levels are allowed; the searches sort them out).
    pub fn with_levels(level: Vec<u32>) -> Self {
        let n = level.len();
        Self {
            level,
            mark: vec![0; n],
            stamp: 0,
            stack: Vec::new(),
            undo: Vec::new(),
            edges: 0,
            lifts: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.level.len()
    }

    pub fn is_empty(&self) -> bool {
        self.level.is_empty()
    }

    /// The level of `v`: every edge leads to an equal or higher one.
    #[inline]
    pub fn level(&self, v: u32) -> u32 {
        self.level[v as usize]
    }

    /// How many admitted edges lifted levels (the rest went up already or
    /// stayed within one level).
    pub fn lifts(&self) -> u64 {
        self.lifts
    }

    /// Admits the edge `from -> to` if `g` plus that edge stays acyclic,
    /// lifting levels so that the edge goes up or level; the caller then
    /// inserts the edge into `g`. `g` must not hold the edge yet. A
    /// refused edge leaves every level as it was.
    pub fn try_add_edge<G: Digraph + ?Sized>(
        &mut self,
        g: &G,
        from: u32,
        to: u32,
    ) -> Result<(), ClosesCycle> {
        if from == to {
            return Err(ClosesCycle { from, to });
        }
        let (kv, kw) = (self.level[from as usize], self.level[to as usize]);
        if kv < kw {
            self.edges += 1;
            return Ok(());
        }
        let b = self.next_stamp();
        let lift = match self.backward(g, from, to, kv, b)? {
            // Every equal-level ancestor of `from` seen, `to` not among them.
            true if kw == kv => {
                self.edges += 1;
                return Ok(());
            }
            true => kv,
            // Too many to look at: `to` goes above `from`, and only `from`
            // counts as its ancestor (no other node on `from`'s level can
            // be reached from the lifted nodes).
            false => {
                self.mark[from as usize] = self.next_stamp();
                kv + 1
            }
        };
        let b = self.mark[from as usize];
        self.forward(g, from, to, lift, b)?;
        self.edges += 1;
        self.lifts += 1;
        Ok(())
    }

    /// Marks `from`'s ancestors on its own level `k` with `b`, at most
    /// `delta` edges deep: Ok(true) when it saw them all, Ok(false) when
    /// it stopped, an error when `to` is among them.
    fn backward<G: Digraph + ?Sized>(
        &mut self,
        g: &G,
        from: u32,
        to: u32,
        k: u32,
        b: u32,
    ) -> Result<bool, ClosesCycle> {
        let delta = self.delta();
        let mut taken = 0u64;
        self.stack.clear();
        self.stack.push(from);
        self.mark[from as usize] = b;
        while let Some(x) = self.stack.pop() {
            for p in g.predecessors(x) {
                if self.level[p as usize] != k {
                    continue;
                }
                if p == to {
                    return Err(ClosesCycle { from, to });
                }
                taken += 1;
                if self.mark[p as usize] != b {
                    self.mark[p as usize] = b;
                    self.stack.push(p);
                }
                if taken >= delta {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Lifts `to` to `lift` and every descendant that falls below the
    /// node it is reached from; meeting a node marked `b` (an ancestor of
    /// `from`) is a cycle, and every level lifted is put back.
    fn forward<G: Digraph + ?Sized>(
        &mut self,
        g: &G,
        from: u32,
        to: u32,
        lift: u32,
        b: u32,
    ) -> Result<(), ClosesCycle> {
        self.undo.clear();
        self.undo.push((to, self.level[to as usize]));
        self.level[to as usize] = lift;
        self.stack.clear();
        self.stack.push(to);
        while let Some(x) = self.stack.pop() {
            let kx = self.level[x as usize];
            for y in g.successors(x) {
                if self.mark[y as usize] == b {
                    for &(v, k) in self.undo.iter().rev() {
                        self.level[v as usize] = k;
                    }
                    return Err(ClosesCycle { from, to });
                }
                if self.level[y as usize] < kx {
                    self.undo.push((y, self.level[y as usize]));
                    self.level[y as usize] = kx;
                    self.stack.push(y);
                }
            }
        }
        Ok(())
    }

    /// The backward search's bound: a tenth of the square root of the
    /// edges so far (the paper's `m^1/2`, scaled), at least [`MIN_DELTA`].
    fn delta(&self) -> u64 {
        ((self.edges as f64).sqrt() / DELTA_DIVISOR).max(MIN_DELTA as f64) as u64
    }

    fn next_stamp(&mut self) -> u32 {
        if self.stamp == u32::MAX {
            self.mark.fill(0);
            self.stamp = 0;
        }
        self.stamp += 1;
        self.stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::test_graph::Graph;
    use proptest::prelude::*;

    fn add(o: &mut LevelOrder, g: &mut Graph, a: u32, b: u32) -> Result<(), ClosesCycle> {
        o.try_add_edge(g, a, b)?;
        g.insert(a, b);
        Ok(())
    }

    fn levels(o: &LevelOrder) -> Vec<u32> {
        (0..o.len() as u32).map(|v| o.level(v)).collect()
    }

    #[test]
    fn a_chain_closed_into_a_ring_is_refused_and_moves_nothing() {
        let mut g = Graph::new(4);
        let mut o = LevelOrder::new(4);
        for (a, b) in [(0, 1), (1, 2), (2, 3)] {
            assert_eq!(add(&mut o, &mut g, a, b), Ok(()));
        }
        assert!(o.level(0) <= o.level(1) && o.level(1) <= o.level(2) && o.level(2) <= o.level(3));
        let before = levels(&o);
        assert_eq!(
            o.try_add_edge(&g, 3, 0),
            Err(ClosesCycle { from: 3, to: 0 })
        );
        assert_eq!(levels(&o), before, "a refusal lifts nothing");
        assert_eq!(
            o.try_add_edge(&g, 1, 1),
            Err(ClosesCycle { from: 1, to: 1 })
        );
    }

    #[test]
    fn an_edge_that_goes_up_lifts_nothing() {
        let g = Graph::new(3);
        let mut o = LevelOrder::with_levels(vec![0, 1, 2]);
        assert_eq!(o.try_add_edge(&g, 0, 2), Ok(()));
        assert_eq!(levels(&o), vec![0, 1, 2]);
        assert_eq!(o.lifts(), 0);
    }

    /// A long chain on one level makes the backward search stop early;
    /// the lifted head must still see the cycle through the tail.
    #[test]
    fn a_search_cut_short_still_finds_the_cycle() {
        let n = 400;
        let mut g = Graph::new(n);
        let mut o = LevelOrder::new(n);
        for v in 0..n as u32 - 1 {
            // Each edge is level on arrival: no lift, the chain stays flat.
            assert_eq!(add(&mut o, &mut g, v, v + 1), Ok(()));
        }
        let last = n as u32 - 1;
        assert_eq!(
            o.try_add_edge(&g, last, 0),
            Err(ClosesCycle { from: last, to: 0 })
        );
        assert_eq!(
            o.try_add_edge(&g, last, 5),
            Err(ClosesCycle { from: last, to: 5 })
        );
        assert_eq!(add(&mut o, &mut g, 0, last), Ok(()));
    }

    proptest! {
        /// Random insertions and removals from random starting levels: an
        /// edge is refused exactly when its head already reaches its tail,
        /// a refusal changes no level, and every edge kept goes up or level.
        #[test]
        fn levels_stay_monotone_under_random_edges(
            n in 2usize..40,
            start in prop::collection::vec(0u32..3, 40),
            ops in prop::collection::vec((0u8..5, 0u32..40, 0u32..40), 1..400),
        ) {
            let mut g = Graph::new(n);
            let mut o = LevelOrder::with_levels(start[..n].to_vec());
            for (op, a, b) in ops {
                let Some((a, b, closes)) = g.step(op == 0, a, b) else {
                    continue;
                };
                let before = levels(&o);
                match o.try_add_edge(&g, a, b) {
                    Ok(()) => {
                        prop_assert!(!closes, "{a} -> {b} admitted though it closes a cycle");
                        g.insert(a, b);
                    }
                    Err(e) => {
                        prop_assert!(closes, "{a} -> {b} refused though acyclic");
                        prop_assert_eq!(e, ClosesCycle { from: a, to: b });
                        prop_assert_eq!(levels(&o), before, "a refusal lifted levels");
                    }
                }
                for (x, y) in g.edges() {
                    prop_assert!(o.level(x) <= o.level(y), "edge {x} -> {y} goes down");
                }
            }
        }
    }
}
