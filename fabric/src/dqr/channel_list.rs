//! The channel list: every virtual channel of a routing in an order in
//! which every channel dependency goes up (a topological order of the
//! channel dependency graph), kept while dependencies are added.
//!
//! A new path whose every turn goes up the list adds no cycle. A turn that
//! goes down can still be allowed when the channels it would put out of
//! order can move ([`TopoOrder::try_add_edge`], the Pearce-Kelly module
//! LASH and Nue share): that is how DQR enables illegal turns.

use crate::graph::topo_order::{Digraph, TopoOrder};
use crate::model::{Fabric, Slot};
use crate::tables::Routing;
use crate::verify::{Report, verify_with_cdg};

/// A virtual channel as a list vertex: `slot * vls + VL`.
pub type Vertex = u32;

/// The dependencies, stored both ways for the order's searches.
#[derive(Debug, Clone, Default)]
struct Edges {
    succ: Vec<Vec<Vertex>>,
    pred: Vec<Vec<Vertex>>,
}

impl Edges {
    /// The dependencies of the verifier's `cdg` on a fabric of `slots`
    /// ports, numbered for `vls` VLs per channel (at least the CDG's).
    fn of(cdg: &crate::verify::LocalCdg, slots: usize, vls: usize) -> Self {
        let n = slots * vls;
        let mut edges = Edges {
            succ: vec![Vec::new(); n],
            pred: vec![Vec::new(); n],
        };
        let remap = |v: u32| (v as usize / cdg.vls * vls + v as usize % cdg.vls) as u32;
        for a in 0..cdg.start.len() - 1 {
            for &b in &cdg.adj[cdg.start[a] as usize..cdg.start[a + 1] as usize] {
                let (x, y) = (remap(a as u32), remap(b));
                edges.succ[x as usize].push(y);
                edges.pred[y as usize].push(x);
            }
        }
        edges
    }
}

impl Digraph for Edges {
    fn successors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        self.succ[v as usize].iter().copied()
    }
    fn predecessors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        self.pred[v as usize].iter().copied()
    }
}

/// Why a channel list cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelListError {
    #[error("the routing in force has a channel dependency cycle ({0}); no channel list orders it")]
    Cyclic(String),
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ChannelList {
    vls: usize,
    edges: Edges,
    order: TopoOrder,
    added: u64,
    /// Highest VL and VL count the routing used on switch-to-switch links
    /// when the list was built: a reroute stays within them.
    max_vl_used: u8,
    vls_used: u32,
    /// Set once a reroute moved flows to other SLs: the list then holds
    /// the walks of their old SLs on the new paths, which hosts may still
    /// send with, and no table shows.
    cached_sl_walks: bool,
    /// Edges added since [`ChannelList::mark`], which
    /// [`ChannelList::undo_to`] withdraws: a reroute that gives up one
    /// destination's paths to try them in another order.
    journal: Option<Vec<(Vertex, Vertex)>>,
}

impl ChannelList {
    /// The list of `routing` on `f`: its CDG rebuilt from the tables (as
    /// the verifier rebuilds it) and ordered. Also returns the verifier's
    /// report of the tables.
    pub fn build(f: &Fabric, routing: &Routing) -> Result<(Self, Report), ChannelListError> {
        let (report, cdg) = verify_with_cdg(f, routing);
        if let Some(desc) = report.describe_cycle(f) {
            return Err(ChannelListError::Cyclic(desc));
        }
        let list = Self::from_cdg(f, routing, &report, &cdg)?;
        Ok((list, report))
    }

    /// The list of an acyclic `cdg` (the verifier's, of `routing` on `f`).
    fn from_cdg(
        f: &Fabric,
        routing: &Routing,
        report: &Report,
        cdg: &crate::verify::LocalCdg,
    ) -> Result<Self, ChannelListError> {
        // Room for every VL a table names, so a reroute may use any VL the
        // SL-to-VL tables give without outgrowing the list.
        let vls = routing
            .sl2vl
            .as_ref()
            .map_or(1, |t| t.max_vl() as usize + 1)
            .clamp(cdg.vls, 16);
        let edges = Edges::of(cdg, f.num_slots(), vls);
        let n = f.num_slots() * vls;
        let mut indeg: Vec<u32> = edges.pred.iter().map(|p| p.len() as u32).collect();
        // Kahn's algorithm: the verifier found no cycle, so every vertex
        // gets a position.
        let mut seq: Vec<u32> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).collect();
        let mut i = 0;
        while i < seq.len() {
            let v = seq[i];
            i += 1;
            for &w in &edges.succ[v as usize] {
                indeg[w as usize] -= 1;
                if indeg[w as usize] == 0 {
                    seq.push(w);
                }
            }
        }
        let order = TopoOrder::from_sequence(&seq).map_err(|e| {
            ChannelListError::Cyclic(format!("the dependency graph could not be ordered: {e}"))
        })?;
        Ok(Self {
            vls,
            edges,
            order,
            added: 0,
            max_vl_used: report.max_vl,
            vls_used: report.vls_used,
            cached_sl_walks: false,
            journal: None,
        })
    }

    /// Whether the list holds walks of SLs hosts may have cached from an
    /// update that moved flows to other SLs ([`ChannelList::prune_to`]
    /// keeps such a list whole).
    pub fn holds_cached_sl_walks(&self) -> bool {
        self.cached_sl_walks
    }

    pub(crate) fn mark_cached_sl_walks(&mut self) {
        self.cached_sl_walks = true;
    }

    /// Keeps only the dependencies of `routing` (tables for `f`, the same
    /// numbering), in the list's order as it stands. Once an update is in
    /// force the old tables' dependencies and those of its mixes no longer
    /// run; they only narrow the next reroute's choices. Keeping the order
    /// (rather than ordering the remaining dependencies afresh) keeps the
    /// turns earlier reroutes made legal where they were: the order is
    /// still a topological one, since the dependencies of the tables in
    /// force are among those the list held. When one is not (tables the
    /// list never saw), the list is ordered afresh. A list that holds
    /// walks of cached SLs ([`ChannelList::holds_cached_sl_walks`]) stays
    /// as it is: returns whether the list was pruned.
    pub fn prune_to(&mut self, f: &Fabric, routing: &Routing) -> Result<bool, ChannelListError> {
        if self.cached_sl_walks {
            return Ok(false);
        }
        let (report, cdg) = verify_with_cdg(f, routing);
        if let Some(desc) = report.describe_cycle(f) {
            return Err(ChannelListError::Cyclic(desc));
        }
        // The new tables' dependencies in the list's numbering, when they
        // fit it and go up its order; else the list is ordered afresh.
        let kept = (cdg.vls <= self.vls && self.fits(f.num_slots()))
            .then(|| Edges::of(&cdg, f.num_slots(), self.vls))
            .filter(|e| {
                e.succ
                    .iter()
                    .enumerate()
                    .all(|(x, ys)| ys.iter().all(|&y| self.order.precedes(x as Vertex, y)))
            });
        let Some(edges) = kept else {
            *self = Self::from_cdg(f, routing, &report, &cdg)?;
            return Ok(true);
        };
        self.edges = edges;
        self.added = 0;
        self.max_vl_used = report.max_vl;
        self.vls_used = report.vls_used;
        Ok(true)
    }

    /// VLs per channel the list has room for.
    pub fn vls(&self) -> usize {
        self.vls
    }

    /// Highest VL the routing used on switch-to-switch links.
    pub fn max_vl_used(&self) -> u8 {
        self.max_vl_used
    }

    /// VLs the routing used on switch-to-switch links.
    pub fn vls_used(&self) -> u32 {
        self.vls_used
    }

    /// Vertices (channels times VLs).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether the list was built for a fabric with `slots` ports (as many
    /// slots, so the same vertex numbering).
    pub fn fits(&self, slots: usize) -> bool {
        self.order.len() == slots * self.vls
    }

    #[inline]
    pub fn vertex(&self, slot: Slot, vl: u8) -> Vertex {
        slot * self.vls as u32 + vl as u32
    }

    /// Dependencies in the list.
    pub fn num_edges(&self) -> usize {
        self.edges.succ.iter().map(Vec::len).sum()
    }

    /// Dependencies added since the list was built.
    pub fn added(&self) -> u64 {
        self.added
    }

    /// Added edges that moved channels in the list.
    pub fn reorders(&self) -> u64 {
        self.order.reorders()
    }

    /// The channels with a dependency into `v`.
    pub fn preds(&self, v: Vertex) -> &[Vertex] {
        &self.edges.pred[v as usize]
    }

    /// The channels `v` has a dependency into.
    pub fn succs(&self, v: Vertex) -> &[Vertex] {
        &self.edges.succ[v as usize]
    }

    pub fn has_edge(&self, a: Vertex, b: Vertex) -> bool {
        self.edges.succ[a as usize].contains(&b)
    }

    /// Whether `a -> b` goes up the list as it stands (a legal turn).
    #[inline]
    pub fn goes_up(&self, a: Vertex, b: Vertex) -> bool {
        self.order.precedes(a, b)
    }

    /// Whether adding `a -> b` keeps the dependencies acyclic, without
    /// changing the list: the list could be reordered to admit it.
    pub fn admits(&mut self, a: Vertex, b: Vertex) -> bool {
        self.order.admits(&self.edges, a, b)
    }

    /// Adds `a -> b`, reordering the list when it goes down; refuses (and
    /// changes nothing) when it would close a cycle. Returns whether the
    /// edge is new.
    pub fn add(&mut self, a: Vertex, b: Vertex) -> Result<bool, Vertex> {
        if self.has_edge(a, b) {
            return Ok(false);
        }
        self.order.try_add_edge(&self.edges, a, b).map_err(|_| a)?;
        self.edges.succ[a as usize].push(b);
        self.edges.pred[b as usize].push(a);
        self.added += 1;
        if let Some(j) = &mut self.journal {
            j.push((a, b));
        }
        Ok(true)
    }

    /// Starts recording the edges added (a no-op when recording).
    pub(crate) fn journal_start(&mut self) {
        self.journal.get_or_insert_with(Vec::new);
    }

    /// Edges recorded so far: a mark [`ChannelList::undo_to`] returns to.
    pub(crate) fn journal_len(&self) -> usize {
        self.journal.as_ref().map_or(0, Vec::len)
    }

    /// Withdraws the edges recorded after `mark` (the order stays valid:
    /// removing edges never breaks it).
    pub(crate) fn undo_to(&mut self, mark: usize) {
        let undone = match &mut self.journal {
            Some(j) if j.len() > mark => j.split_off(mark),
            _ => return,
        };
        for (a, b) in undone.into_iter().rev() {
            self.remove(a, b);
        }
    }

    /// Stops recording.
    pub(crate) fn journal_stop(&mut self) {
        self.journal = None;
    }

    /// Adds every dependency of `deps` or none: on the first that would
    /// close a cycle the ones added are withdrawn and that one is
    /// returned. Returns how many were new.
    pub fn add_all(&mut self, deps: Vec<(Vertex, Vertex)>) -> Result<u64, (Vertex, Vertex)> {
        let mut added = Vec::new();
        for (a, b) in deps {
            match self.add(a, b) {
                Ok(true) => added.push((a, b)),
                Ok(false) => {}
                Err(_) => {
                    for &(x, y) in added.iter().rev() {
                        self.remove(x, y);
                    }
                    if let Some(j) = &mut self.journal {
                        j.truncate(j.len().saturating_sub(added.len()));
                    }
                    return Err((a, b));
                }
            }
        }
        Ok(added.len() as u64)
    }

    /// Withdraws every dependency into and out of the channels of `slot`
    /// (a link that is down carries none).
    pub fn isolate(&mut self, slot: Slot) {
        for vl in 0..self.vls as u8 {
            let v = self.vertex(slot, vl);
            for w in std::mem::take(&mut self.edges.succ[v as usize]) {
                if let Some(i) = self.edges.pred[w as usize].iter().position(|&x| x == v) {
                    self.edges.pred[w as usize].swap_remove(i);
                }
            }
            for w in std::mem::take(&mut self.edges.pred[v as usize]) {
                if let Some(i) = self.edges.succ[w as usize].iter().position(|&x| x == v) {
                    self.edges.succ[w as usize].swap_remove(i);
                }
            }
        }
    }

    /// Withdraws `a -> b` (an edge [`ChannelList::add`] reported new):
    /// removing edges never invalidates the order.
    pub fn remove(&mut self, a: Vertex, b: Vertex) {
        if let Some(i) = self.edges.succ[a as usize].iter().position(|&x| x == b) {
            self.edges.succ[a as usize].swap_remove(i);
        }
        if let Some(i) = self.edges.pred[b as usize].iter().position(|&x| x == a) {
            self.edges.pred[b as usize].swap_remove(i);
        }
        self.added = self.added.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::{EngineKind, EngineOptions};

    /// A 4x4 mesh routed XY (`dor`), its tables and their list.
    fn xy_mesh() -> (Fabric, Routing, ChannelList) {
        let f = generate(&Topology::Mesh {
            dims: vec![4, 4],
            torus: false,
            hosts: 1,
        })
        .expect("mesh");
        let r = EngineKind::Dor
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let (list, _) = ChannelList::build(&f, &r).expect("list");
        (f, r, list)
    }

    /// Undoing to a mark withdraws exactly the edges added after it,
    /// those an `add_all` refused included once.
    #[test]
    fn undo_to_a_mark_withdraws_what_came_after() {
        let (_, _, mut list) = xy_mesh();
        let free: Vec<(Vertex, Vertex)> = (0..list.len() as u32)
            .flat_map(|a| (0..list.len() as u32).map(move |b| (a, b)))
            .filter(|&(a, b)| a != b && list.goes_up(a, b) && !list.has_edge(a, b))
            .take(3)
            .collect();
        assert_eq!(free.len(), 3);
        list.journal_start();
        assert_eq!(list.add(free[0].0, free[0].1), Ok(true));
        let mark = list.journal_len();
        let (edges, added) = (list.num_edges(), list.added());
        assert_eq!(list.add(free[1].0, free[1].1), Ok(true));
        // The second edge of this batch closes a cycle with the first: the
        // batch is refused, and the journal keeps nothing of it.
        let (a, b) = free[2];
        assert!(list.add_all(vec![(a, b), (b, a)]).is_err());
        assert_eq!(list.journal_len(), mark + 1);
        list.undo_to(mark);
        assert_eq!((list.num_edges(), list.added()), (edges, added));
        assert!(list.has_edge(free[0].0, free[0].1));
        assert!(!list.has_edge(free[1].0, free[1].1));
        list.undo_to(0);
        assert!(!list.has_edge(free[0].0, free[0].1));
        list.journal_stop();
        assert_eq!(list.journal_len(), 0);
    }

    /// A list that holds walks of SLs hosts may have cached is never
    /// pruned; one that does not loses every dependency the tables lack.
    #[test]
    fn prune_keeps_a_list_with_cached_sl_walks_whole() {
        let (f, r, mut list) = xy_mesh();
        let own = list.num_edges();
        // A dependency no table holds, between two channels already in
        // that order.
        let (a, b) = (0..list.len() as u32)
            .flat_map(|a| (0..list.len() as u32).map(move |b| (a, b)))
            .find(|&(a, b)| a != b && list.goes_up(a, b) && !list.has_edge(a, b))
            .expect("a free pair");
        assert_eq!(list.add(a, b), Ok(true));
        let mut marked = list.clone();
        marked.mark_cached_sl_walks();
        assert_eq!(marked.prune_to(&f, &r), Ok(false));
        assert_eq!(marked.num_edges(), own + 1);
        assert_eq!(list.prune_to(&f, &r), Ok(true));
        assert_eq!(list.num_edges(), own);
    }
}
