//! OpenSM 3.3.23's SSSP (`osm_ucast_dfsssp.c`, engines `sssp` and
//! `dfsssp`) step for step, so that the same fabric gets the same tables,
//! port for port (checked against OpenSM on ibsim: BENCHMARKS.md):
//! - switches in the order of OpenSM's switch table, a map keyed by the
//!   node GUID in network byte order (on x86: ascending byte-swapped GUID);
//!   each switch's links in its port order;
//! - every switch-to-switch link starts at weight P^2, P the CA ports and
//!   switches (so that routes stay minimal in hops), a CA's own link at 1;
//! - destinations: switches stably sorted by attached end ports (port 0
//!   counted, largest first), each switch's end ports by port, every LID of
//!   a port; then the switches' own LIDs, in the same order;
//! - one Dijkstra per LID, rooted at the destination, on a 4-ary heap with
//!   complib's exact tie rules (equal keys never overtake on the way up;
//!   on the way down the last of equal children is taken), relaxing with a
//!   strict `<`: among equal-cost parents the one settled first wins;
//! - after every LID, each switch adds its end-port count to the weight of
//!   every link on its route (the link as its parent holds it).
//!
//! Two departures, neither of which changes a table where OpenSM's engine
//! completes: distances have no 2^31 cap (OpenSM's INF stops its SSSP near
//! the LID limit: past Dragonfly p=8 it cannot route at all), and router
//! ports, which OpenSM skips, are routed after every other LID.
//!
//! A heap per LID costs several times the layered search of [`super::sssp`]
//! (Dragonfly p=6: 0.67 s against 0.10 s), so [`super::sssp`] runs it only
//! on small fabrics, as one of the routings it picks from.

use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{Lfts, NO_PATH};

const INF: u64 = u64::MAX;
/// No link (a vertex not reached, or the root).
const NO_LINK: u32 = u32::MAX;

/// The graph as OpenSM's SSSP holds it: vertex 0 is the destination CA of
/// the current run, vertices 1..=n the switches in OpenSM's order.
struct Graph {
    /// Switch index (in `f.switches()`) of vertex v (1..=n) at v - 1.
    switch_of: Vec<u32>,
    /// Links of vertex v: `off[v]..off[v + 1]`; the last link (index
    /// `ca_link`) belongs to vertex 0 and is set per run.
    off: Vec<u32>,
    from: Vec<u32>,
    to: Vec<u32>,
    /// The port on the `to` side: what `to` forwards by toward `from`.
    to_port: Vec<u8>,
    weight: Vec<u64>,
    ca_link: u32,
    /// End ports behind each vertex, port 0 counted (OpenSM's `num_hca`).
    num_hca: Vec<u64>,
}

impl Graph {
    fn new(f: &Fabric) -> (Self, Vec<u32>) {
        let sw = f.switches();
        let n = sw.len();
        let mut by_guid: Vec<u32> = (0..n as u32).collect();
        by_guid.sort_by_key(|&i| (f.guid(sw[i as usize]).swap_bytes(), i));
        let mut vertex = vec![0u32; n];
        for (k, &i) in by_guid.iter().enumerate() {
            vertex[i as usize] = k as u32 + 1;
        }
        // P: CA ports and switches (their port 0), as OpenSM counts its
        // port table.
        let p = f
            .endports()
            .iter()
            .filter(|&&s| f.kind(f.node_of(s)) == NodeKind::Ca)
            .count() as u64
            + n as u64;
        let p2 = p.saturating_mul(p).max(1);
        let mut g = Graph {
            switch_of: by_guid.clone(),
            off: vec![0, 0],
            from: Vec::new(),
            to: Vec::new(),
            to_port: Vec::new(),
            weight: Vec::new(),
            ca_link: 0,
            num_hca: vec![0; n + 1],
        };
        for (k, &i) in by_guid.iter().enumerate() {
            let v = k as u32 + 1;
            let node = sw[i as usize];
            g.num_hca[v as usize] = 1;
            for s in f.port_slots(node) {
                let r = f.remote(s);
                if r == NONE {
                    continue;
                }
                let rn = f.node_of(r);
                match f.switch_index(rn) {
                    None => g.num_hca[v as usize] += 1,
                    Some(ri) if rn == node || ri == i => {}
                    Some(ri) => {
                        g.from.push(v);
                        g.to.push(vertex[ri as usize]);
                        g.to_port.push(f.port_of(r));
                        g.weight.push(p2);
                    }
                }
            }
            g.off.push(g.from.len() as u32);
        }
        g.ca_link = g.from.len() as u32;
        g.from.push(0);
        g.to.push(0);
        g.to_port.push(NO_PATH);
        g.weight.push(1);
        (g, vertex)
    }

    fn links(&self, v: u32) -> std::ops::Range<u32> {
        if v == 0 {
            self.ca_link..self.ca_link + 1
        } else {
            self.off[v as usize]..self.off[v as usize + 1]
        }
    }
}

/// complib's `cl_heap` with branching factor 4, keyed by distance, with
/// its exact moves: the order of equal keys decides between equal-cost
/// routes, so it is reproduced, not just a min-heap.
struct Heap {
    key: Vec<u64>,
    item: Vec<u32>,
    /// Heap index of each vertex.
    pos: Vec<u32>,
}

impl Heap {
    const D: usize = 4;

    fn new(vertices: usize) -> Self {
        Self {
            key: Vec::with_capacity(vertices),
            item: Vec::with_capacity(vertices),
            pos: vec![0; vertices],
        }
    }

    fn place(&mut self, at: usize, key: u64, item: u32) {
        self.key[at] = key;
        self.item[at] = item;
        self.pos[item as usize] = at as u32;
    }

    fn insert(&mut self, key: u64, item: u32) {
        self.key.push(key);
        self.item.push(item);
        let at = self.key.len() - 1;
        self.pos[item as usize] = at as u32;
        self.up(at);
    }

    /// `heap_up`: moves while strictly smaller than the parent.
    fn up(&mut self, index: usize) {
        if index == 0 {
            return;
        }
        let (k, it) = (self.key[index], self.item[index]);
        let mut child = index;
        let mut moved = false;
        loop {
            let parent = (child - 1) / Self::D;
            if k < self.key[parent] {
                let (pk, pi) = (self.key[parent], self.item[parent]);
                self.place(child, pk, pi);
                child = parent;
                moved = true;
            } else {
                break;
            }
            if child == 0 {
                break;
            }
        }
        if moved {
            self.place(child, k, it);
        }
    }

    /// `heap_down`: the smallest child, the last of equal ones; moves while
    /// strictly larger than it.
    fn down(&mut self, index: usize) {
        let size = self.key.len();
        let (k, it) = (self.key[index], self.item[index]);
        let mut parent = index;
        let mut moved = false;
        while parent * Self::D + 1 < size {
            let first = parent * Self::D + 1;
            let mut swap = first;
            let end = (first + Self::D).min(size);
            for child in first + 1..end {
                if self.key[child] <= self.key[swap] {
                    swap = child;
                }
            }
            if k > self.key[swap] {
                let (ck, ci) = (self.key[swap], self.item[swap]);
                self.place(parent, ck, ci);
                parent = swap;
                moved = true;
            } else {
                break;
            }
        }
        if moved {
            self.place(parent, k, it);
        }
    }

    /// `cl_heap_modify_key`.
    fn set_key(&mut self, item: u32, key: u64) {
        let at = self.pos[item as usize] as usize;
        let old = self.key[at];
        self.key[at] = key;
        if key < old {
            self.up(at);
        } else if key > old {
            self.down(at);
        }
    }

    /// `cl_heap_extract_root`: the last element to the root, then down.
    fn pop(&mut self) -> Option<u32> {
        let size = self.key.len();
        if size == 0 {
            return None;
        }
        let root = self.item[0];
        let (lk, li) = (self.key[size - 1], self.item[size - 1]);
        self.key.pop();
        self.item.pop();
        if size > 1 {
            self.place(0, lk, li);
            self.down(0);
        }
        Some(root)
    }
}

/// OpenSM's SSSP tables for `f`.
pub fn opensm_sssp_lfts(f: &Fabric) -> Lfts {
    let mut lfts = Lfts::for_fabric(f);
    let n = f.switches().len();
    if n == 0 {
        return lfts;
    }
    let (mut g, vertex) = Graph::new(f);
    let sw = f.switches();
    // Each switch's own LIDs go out of port 0.
    for (si, &node) in sw.iter().enumerate() {
        let lid = f.switch_lid(node) as usize;
        if let Some(e) = lfts.row_mut(si as u32).get_mut(lid) {
            *e = 0;
        }
    }
    let mut lids_of: std::collections::HashMap<Slot, Vec<u16>> = Default::default();
    for lid in 1..=f.max_lid() {
        if let Some(s) = f.lid_owner(lid) {
            lids_of.entry(s).or_default().push(lid);
        }
    }

    // Destination order.
    let mut sw_list: Vec<u32> = (1..=n as u32).collect();
    sw_list.sort_by_key(|&v| std::cmp::Reverse(g.num_hca[v as usize]));
    let mut cas: Vec<Slot> = Vec::new();
    let mut routers: Vec<Slot> = Vec::new();
    for &v in &sw_list {
        let node = sw[g.switch_of[v as usize - 1] as usize];
        for s in f.port_slots(node) {
            let r = f.remote(s);
            if r == NONE || f.switch_index(f.node_of(r)).is_some() {
                continue;
            }
            match f.kind(f.node_of(r)) {
                NodeKind::Ca => cas.push(r),
                _ => routers.push(r),
            }
        }
    }
    // (destination slot, its switch's vertex, the switch's port to it);
    // a switch LID has the port NO_PATH.
    let mut dests: Vec<(Slot, u32, u8)> = cas
        .iter()
        .map(|&d| {
            let at = f.remote(d);
            (d, vertex_of(f, &vertex, at), f.port_of(at))
        })
        .collect();
    dests.extend(sw_list.iter().map(|&v| {
        let node = sw[g.switch_of[v as usize - 1] as usize];
        (f.slot(node, 0), v, NO_PATH)
    }));
    dests.extend(routers.iter().map(|&d| {
        let at = f.remote(d);
        (d, vertex_of(f, &vertex, at), f.port_of(at))
    }));

    let vertices = n + 1;
    let mut heap = Heap::new(vertices);
    let mut dist = vec![INF; vertices];
    let mut used = vec![NO_LINK; vertices];
    let mut done = vec![false; vertices];
    for &(d, dv, port) in &dests {
        let lids: &[u16] = match lids_of.get(&d) {
            Some(l) => l,
            None => continue,
        };
        for &lid in lids {
            heap.key.clear();
            heap.item.clear();
            for v in 1..vertices as u32 {
                dist[v as usize] = INF;
                used[v as usize] = NO_LINK;
                done[v as usize] = false;
                heap.insert(INF, v);
            }
            let root = if port == NO_PATH {
                dv
            } else {
                // The destination CA: vertex 0, one link to its switch.
                let l = g.ca_link as usize;
                g.to[l] = dv;
                g.to_port[l] = port;
                g.weight[l] = 1;
                dist[0] = INF;
                used[0] = NO_LINK;
                done[0] = false;
                heap.insert(INF, 0);
                0
            };
            dist[root as usize] = 0;
            done[root as usize] = true;
            heap.set_key(root, 0);
            while let Some(cur) = heap.pop() {
                done[cur as usize] = true;
                let dc = dist[cur as usize];
                if dc == INF {
                    continue;
                }
                for l in g.links(cur) {
                    let to = g.to[l as usize] as usize;
                    let c = dc.saturating_add(g.weight[l as usize]);
                    if !done[to] && c < dist[to] {
                        used[to] = l;
                        dist[to] = c;
                        heap.set_key(to as u32, c);
                    }
                }
            }
            for (v, &l) in used.iter().enumerate().skip(1) {
                if l != NO_LINK {
                    lfts.set(g.switch_of[v - 1], lid, g.to_port[l as usize]);
                }
            }
            // Each switch's end ports follow its route: its links get
            // heavier for the destinations to come.
            for v in 1..vertices {
                if used[v] == NO_LINK {
                    continue;
                }
                let add = g.num_hca[v];
                let mut j = v;
                while used[j] != NO_LINK {
                    let l = used[j] as usize;
                    g.weight[l] += add;
                    j = g.from[l] as usize;
                }
            }
        }
    }
    lfts
}

fn vertex_of(f: &Fabric, vertex: &[u32], at: Slot) -> u32 {
    f.switch_index(f.node_of(at))
        .map_or(0, |si| vertex[si as usize])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};

    #[test]
    fn busiest_links_are_opensms() {
        // OpenSM 3.3.23's sssp on the same generated files (BENCHMARKS.md,
        // link load side by side): the tables are OpenSM's, so the busiest
        // link carries what OpenSM's does.
        for (t, max) in [
            (Topology::Dragonfly { p: 4, hosts: None }, 1560),
            (
                Topology::Mesh {
                    dims: vec![4, 4, 4],
                    torus: true,
                    hosts: 1,
                },
                58,
            ),
            (Topology::SlimFly { q: 7, hosts: None }, 756),
        ] {
            let f = generate(&t).expect("topology");
            let lfts = opensm_sssp_lfts(&f);
            let l = crate::load::link_load(&f, &lfts);
            assert_eq!((l.unrouted, l.max), (0, max), "{t:?}");
        }
    }

    #[test]
    fn the_heap_keeps_complibs_order_of_equal_keys() {
        // Five equal keys: inserting never reorders them. A smaller key
        // rises to the root; popping it puts the last element at the root,
        // where it stays (its equal children are not smaller).
        let mut h = Heap::new(6);
        for v in 0..5 {
            h.insert(7, v);
        }
        assert_eq!(h.item, vec![0, 1, 2, 3, 4]);
        h.set_key(3, 1);
        assert_eq!(h.item[0], 3);
        assert_eq!(h.pop(), Some(3));
        assert_eq!(h.item, vec![4, 1, 2, 0]);
        let order: Vec<u32> = std::iter::from_fn(|| h.pop()).collect();
        assert_eq!(order, vec![4, 0, 2, 1]);
    }
}
