//! A topological order of a growing directed acyclic graph, kept up to
//! date edge by edge (Pearce and Kelly, "A dynamic topological sort
//! algorithm for directed acyclic graphs", ACM JEA 11, 2006).
//!
//! An edge that agrees with the order costs one comparison. Otherwise a
//! search bounded by the two end positions either meets the edge's tail,
//! so the edge would close a cycle and is refused, or collects the few
//! nodes in between that must move; only those are reordered. That is what
//! makes per-turn cycle checks on large channel dependency graphs
//! affordable: LASH and Nue check every turn they add this way.
//!
//! The edges stay with the caller, who stores them in whatever form suits
//! it (turn tables, counters) and shows them through [`Digraph`]. Removing
//! edges never invalidates an order, so callers may withdraw edges freely.

/// The edges an order is kept for, as the caller stores them.
///
/// The graph must be acyclic and every edge must go forward in the order.
/// Both hold when each edge is inserted only after
/// [`TopoOrder::try_add_edge`] admitted it, whatever was removed since.
pub trait Digraph {
    /// Heads of the edges leaving `v`.
    fn successors(&self, v: u32) -> impl Iterator<Item = u32> + '_;
    /// Tails of the edges entering `v`.
    fn predecessors(&self, v: u32) -> impl Iterator<Item = u32> + '_;
}

/// An edge refused because the graph already leads from its head back to
/// its tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the edge {from} -> {to} closes a cycle")]
pub struct ClosesCycle {
    pub from: u32,
    pub to: u32,
}

/// A starting order that is not a permutation of its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not an order of the nodes 0..{len}: node {node} is out of range or listed twice")]
pub struct NotAnOrder {
    pub len: usize,
    pub node: u32,
}

/// Positions of the nodes `0..len` in a topological order, and the scratch
/// space its searches reuse.
#[derive(Debug, Clone)]
pub struct TopoOrder {
    /// Position of each node; a permutation of `0..len`.
    pos: Vec<u32>,
    /// Visit marks by search stamp, so no search has to clear them.
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    slots: Vec<u32>,
    reorders: u64,
}

impl TopoOrder {
    /// The order `0, 1, ..., n - 1`: any order suits a graph without edges.
    pub fn new(n: usize) -> Self {
        Self::with_positions((0..n as u32).collect())
    }

    /// The order that lists `sequence` first to last, for graphs whose
    /// first edges are known to agree with it; fails unless `sequence`
    /// holds each of `0..sequence.len()` exactly once.
    pub fn from_sequence(sequence: &[u32]) -> Result<Self, NotAnOrder> {
        let len = sequence.len();
        let mut pos = vec![u32::MAX; len];
        for (p, &v) in sequence.iter().enumerate() {
            match pos.get_mut(v as usize) {
                Some(slot) if *slot == u32::MAX => *slot = p as u32,
                _ => return Err(NotAnOrder { len, node: v }),
            }
        }
        Ok(Self::with_positions(pos))
    }

    fn with_positions(pos: Vec<u32>) -> Self {
        let n = pos.len();
        Self {
            pos,
            mark: vec![0; n],
            stamp: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            bwd: Vec::new(),
            slots: Vec::new(),
            reorders: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.pos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// Where `v` stands: every edge leads to a higher position.
    #[inline]
    pub fn position(&self, v: u32) -> u32 {
        self.pos[v as usize]
    }

    /// Whether `a` comes before `b`.
    #[inline]
    pub fn precedes(&self, a: u32, b: u32) -> bool {
        self.pos[a as usize] < self.pos[b as usize]
    }

    /// The nodes, first to last.
    pub fn sequence(&self) -> Vec<u32> {
        let mut seq = vec![0u32; self.pos.len()];
        for (v, &p) in self.pos.iter().enumerate() {
            seq[p as usize] = v as u32;
        }
        seq
    }

    /// How many admitted edges moved nodes (the rest agreed with the order).
    pub fn reorders(&self) -> u64 {
        self.reorders
    }

    /// Admits the edge `from -> to` if `g` plus that edge stays acyclic,
    /// moving nodes so that the order agrees with it; the caller then
    /// inserts the edge into `g`. `g` must not hold the edge yet. A refused
    /// edge leaves the order as it was; [`TopoOrder::cycle`] names the
    /// cycle it would close.
    pub fn try_add_edge<G: Digraph + ?Sized>(
        &mut self,
        g: &G,
        from: u32,
        to: u32,
    ) -> Result<(), ClosesCycle> {
        if from == to {
            return Err(ClosesCycle { from, to });
        }
        let lb = self.pos[to as usize];
        let ub = self.pos[from as usize];
        if ub < lb {
            return Ok(());
        }
        let (gf, gb) = self.next_stamps();
        self.forward(g, from, to, gf)?;
        // Nodes that reach `from` and sit after `to`.
        self.bwd.clear();
        self.stack.push(from);
        self.mark[from as usize] = gb;
        while let Some(v) = self.stack.pop() {
            self.bwd.push(v);
            for w in g.predecessors(v) {
                if self.mark[w as usize] != gb && self.pos[w as usize] > lb {
                    self.mark[w as usize] = gb;
                    self.stack.push(w);
                }
            }
        }
        // Both sets keep their inner order; the `from` side moves before
        // the `to` side, within the positions the two sets held, so no
        // other node moves.
        let pos = &mut self.pos;
        self.bwd.sort_unstable_by_key(|&v| pos[v as usize]);
        self.fwd.sort_unstable_by_key(|&v| pos[v as usize]);
        self.slots.clear();
        self.slots
            .extend(self.bwd.iter().chain(&self.fwd).map(|&v| pos[v as usize]));
        self.slots.sort_unstable();
        for (&v, &p) in self.bwd.iter().chain(&self.fwd).zip(&self.slots) {
            pos[v as usize] = p;
        }
        self.reorders += 1;
        Ok(())
    }

    /// Whether [`TopoOrder::try_add_edge`] would admit `from -> to`, without
    /// changing the order: a search for a path a caller may take many
    /// times before it adds anything.
    pub fn admits<G: Digraph + ?Sized>(&mut self, g: &G, from: u32, to: u32) -> bool {
        if from == to {
            return false;
        }
        if self.pos[from as usize] < self.pos[to as usize] {
            return true;
        }
        let (gf, _) = self.next_stamps();
        self.forward(g, from, to, gf).is_ok()
    }

    /// Collects into `fwd` the nodes `to` reaches that sit before `from`
    /// (marked `gf`): `from` among them means a cycle. Any path from `to`
    /// to `from` stays between the two positions, so nothing outside them
    /// needs a look.
    fn forward<G: Digraph + ?Sized>(
        &mut self,
        g: &G,
        from: u32,
        to: u32,
        gf: u32,
    ) -> Result<(), ClosesCycle> {
        let ub = self.pos[from as usize];
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(to);
        self.mark[to as usize] = gf;
        while let Some(v) = self.stack.pop() {
            self.fwd.push(v);
            for w in g.successors(v) {
                if w == from {
                    return Err(ClosesCycle { from, to });
                }
                if self.mark[w as usize] != gf && self.pos[w as usize] < ub {
                    self.mark[w as usize] = gf;
                    self.stack.push(w);
                }
            }
        }
        Ok(())
    }

    /// The path `to -> ... -> from` in `g` that the edge `from -> to` would
    /// close into a cycle (`[from]` when the edge is a loop), or `None` when
    /// the edge keeps `g` acyclic. Allocates: it explains a refusal, it is
    /// not meant for the hot path.
    pub fn cycle<G: Digraph + ?Sized>(&self, g: &G, from: u32, to: u32) -> Option<Vec<u32>> {
        if from == to {
            return Some(vec![from]);
        }
        let ub = self.pos[from as usize];
        if ub < self.pos[to as usize] {
            return None;
        }
        let mut parent = vec![u32::MAX; self.pos.len()];
        parent[to as usize] = to;
        let mut stack = vec![to];
        while let Some(v) = stack.pop() {
            for w in g.successors(v) {
                if w == from {
                    let mut path = vec![from, v];
                    let mut x = v;
                    while x != to {
                        x = parent[x as usize];
                        path.push(x);
                    }
                    path.reverse();
                    return Some(path);
                }
                if parent[w as usize] == u32::MAX && self.pos[w as usize] < ub {
                    parent[w as usize] = v;
                    stack.push(w);
                }
            }
        }
        None
    }

    /// Two fresh stamps, one per search direction.
    fn next_stamps(&mut self) -> (u32, u32) {
        if self.stamp >= u32::MAX - 2 {
            self.mark.fill(0);
            self.stamp = 0;
        }
        self.stamp += 2;
        (self.stamp - 1, self.stamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::test_graph::Graph;
    use proptest::prelude::*;

    fn add(order: &mut TopoOrder, g: &mut Graph, a: u32, b: u32) -> Result<(), ClosesCycle> {
        order.try_add_edge(g, a, b)?;
        g.insert(a, b);
        Ok(())
    }

    #[test]
    fn an_edge_that_closes_a_cycle_is_refused_and_its_cycle_named() {
        let mut g = Graph::new(4);
        let mut o = TopoOrder::new(4);
        for (a, b) in [(0, 1), (1, 2), (2, 3)] {
            assert_eq!(add(&mut o, &mut g, a, b), Ok(()));
        }
        let before = o.sequence();
        assert_eq!(
            o.try_add_edge(&g, 3, 0),
            Err(ClosesCycle { from: 3, to: 0 })
        );
        assert_eq!(o.sequence(), before, "a refusal moves nothing");
        assert_eq!(o.cycle(&g, 3, 0), Some(vec![0, 1, 2, 3]));
        assert_eq!(o.cycle(&g, 2, 1), Some(vec![1, 2]));
        assert_eq!(o.cycle(&g, 0, 3), None);
    }

    #[test]
    fn a_loop_is_a_cycle() {
        let g = Graph::new(2);
        let mut o = TopoOrder::new(2);
        assert_eq!(
            o.try_add_edge(&g, 1, 1),
            Err(ClosesCycle { from: 1, to: 1 })
        );
        assert_eq!(o.cycle(&g, 1, 1), Some(vec![1]));
    }

    #[test]
    fn an_edge_the_order_agrees_with_moves_nothing() {
        let mut g = Graph::new(3);
        let mut o = TopoOrder::new(3);
        assert_eq!(add(&mut o, &mut g, 0, 2), Ok(()));
        assert_eq!(o.sequence(), vec![0, 1, 2]);
        assert_eq!(o.reorders(), 0);
    }

    #[test]
    fn a_backward_edge_moves_only_the_nodes_between_its_ends() {
        let mut g = Graph::new(5);
        let mut o = TopoOrder::new(5);
        assert_eq!(add(&mut o, &mut g, 1, 2), Ok(()));
        // 3 -> 1 forces 3 before 1 and so before 2; 0 and 4 stay put.
        assert_eq!(add(&mut o, &mut g, 3, 1), Ok(()));
        assert_eq!(o.sequence(), vec![0, 3, 1, 2, 4]);
        assert_eq!(o.reorders(), 1);
        assert!(o.precedes(3, 1) && o.precedes(1, 2));
        assert_eq!(o.position(0), 0);
        assert_eq!(o.position(4), 4);
        assert_eq!(
            o.try_add_edge(&g, 2, 3),
            Err(ClosesCycle { from: 2, to: 3 })
        );
        assert_eq!(o.cycle(&g, 2, 3), Some(vec![3, 1, 2]));
    }

    #[test]
    fn a_starting_sequence_must_list_every_node_once() {
        let o = TopoOrder::from_sequence(&[2, 0, 1]).expect("a permutation");
        assert_eq!(o.sequence(), vec![2, 0, 1]);
        assert_eq!(o.position(2), 0);
        assert_eq!(o.len(), 3);
        assert_eq!(
            TopoOrder::from_sequence(&[0, 0, 1]).unwrap_err(),
            NotAnOrder { len: 3, node: 0 }
        );
        assert_eq!(
            TopoOrder::from_sequence(&[0, 3, 1]).unwrap_err(),
            NotAnOrder { len: 3, node: 3 }
        );
        assert!(TopoOrder::from_sequence(&[]).expect("empty").is_empty());
    }

    proptest! {
        /// Random insertions and removals: an edge is refused exactly when
        /// its head already reaches its tail, the named cycle is a real
        /// path, and every edge kept goes forward in the order.
        #[test]
        fn the_order_stays_topological_under_random_edges(
            n in 2usize..14,
            ops in prop::collection::vec((any::<bool>(), 0u32..14, 0u32..14), 1..120),
        ) {
            let mut g = Graph::new(n);
            let mut o = TopoOrder::new(n);
            for (remove, a, b) in ops {
                let Some((a, b, closes)) = g.step(remove, a, b) else {
                    continue;
                };
                let before = o.sequence();
                prop_assert_eq!(o.admits(&g, a, b), !closes, "admits {} -> {}", a, b);
                prop_assert_eq!(o.sequence(), before, "admits moved nodes");
                match o.try_add_edge(&g, a, b) {
                    Ok(()) => {
                        prop_assert!(!closes, "{a} -> {b} admitted though it closes a cycle");
                        prop_assert_eq!(o.cycle(&g, a, b), None);
                        g.insert(a, b);
                    }
                    Err(e) => {
                        prop_assert!(closes, "{a} -> {b} refused without a cycle");
                        prop_assert_eq!(e, ClosesCycle { from: a, to: b });
                        let path = o.cycle(&g, a, b).expect("a refused edge has a cycle");
                        prop_assert_eq!(path.first(), Some(&b));
                        prop_assert_eq!(path.last(), Some(&a));
                        for w in path.windows(2) {
                            prop_assert!(g.has(w[0], w[1]), "{path:?} is no path");
                        }
                    }
                }
                for (x, y) in g.edges() {
                    prop_assert!(o.precedes(x, y), "{x} -> {y} goes backward");
                }
                let mut seq = o.sequence();
                for (p, &v) in seq.iter().enumerate() {
                    prop_assert_eq!(o.position(v) as usize, p);
                }
                seq.sort_unstable();
                prop_assert_eq!(seq, (0..n as u32).collect::<Vec<_>>());
            }
        }
    }
}
