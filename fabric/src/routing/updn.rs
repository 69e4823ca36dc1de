//! Up*/Down* (OpenSM `updn`): the switches are put in a total order from
//! one or more root switches; a channel goes *up* when it leads to a switch
//! earlier in the order. With roots given and on trees the order is OpenSM's:
//! BFS distance from the roots, then node GUID. Legal routes climb zero or
//! more up channels and then descend zero or more down channels. Up is a
//! total order, so no cycle of channel dependencies can form: deadlock free
//! with one VL on any connected fabric.
//!
//! **Root choice** (when [`EngineOptions::roots`] is `None`):
//!
//! 1. If the fabric is layered like a tree (see [`tree_levels`]: every link
//!    joins adjacent levels counted up from the switches with end ports, and
//!    every switch below the top level links to the level above), the
//!    top-level switches are the roots, as in OpenSM's fat-tree guess.
//! 2. Otherwise, or when those roots leave two switches with end ports
//!    without a legal route (tops that share no leaf), the root is the
//!    single switch of minimum eccentricity (the graph centre), ties going to
//!    the lowest node GUID, and the order is depth-first from it
//!    ([`dfs_order`]), which spreads load far better than BFS ranks on such
//!    fabrics. One root always connects every pair; OpenSM's updn instead
//!    fails with "no root nodes were found" on tori, Dragonflies and Slim
//!    Flies (given our root, it ranks by BFS).
//!
//! Roots given explicitly (a root GUID file) are used as they are; if they
//! leave switches with end ports without a legal route between them, the
//! engine fails and names such a pair.
//!
//! **Routes.** For each destination switch the engine runs one BFS backwards
//! over the switches. A switch takes a down route when one of its down
//! neighbours at the next smaller distance itself routes down only
//! ("down mode"), otherwise it routes up. An LFT holds one port per
//! destination, so a switch cannot serve packets that already turned down
//! with an up port: committing each switch to one mode keeps every route
//! legal, and a switch gives up a shorter up route only when a down route of
//! equal length exists. On trees the routes are minimal. Among the ports
//! that qualify, end-port LIDs are spread by port load exactly as MinHop
//! does ([`super::minhop::balanced_lfts`]).
//!
//! Between two roots there may be no legal route at all (both are minima of
//! the order); their switch-LID entries stay empty, as OpenSM leaves them
//! without `connect_roots`. Routes between end ports always exist.

use super::minhop::balanced_lfts;
use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::graph::{SwitchGraph, UNREACHABLE};
use crate::model::{Fabric, NONE, NodeId, NodeKind};
use crate::tables::{Lfts, Routing};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct UpDn;

impl RoutingEngine for UpDn {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Updn
    }
    fn description(&self) -> &'static str {
        "Up*/Down* (OpenSM updn): deadlock free with 1 VL on any connected fabric; roots: tree tops or graph centre, or --root-guids"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn uses_roots(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let g = SwitchGraph::new(f);
        let plan = plan(f, &g, Mode::UpDown, opts.roots).map_err(|r| fail("updn", r))?;
        tracing::debug!(
            roots = ?plan.roots.iter().map(|&r| f.desc(f.switches()[r as usize])).collect::<Vec<_>>(),
            "updn roots"
        );
        Ok(Routing::lfts_only(fill(f, &g, &plan, opts)))
    }
}

/// The engine boundary: every reason becomes the crate's routing error,
/// named after the engine that met it.
pub(crate) fn fail(engine: &str, reason: impl std::fmt::Display) -> Error {
    Error::Routing {
        engine: engine.into(),
        reason: reason.to_string(),
    }
}

/// Why no orientation gives legal routes (or the roots asked for are not
/// usable); the engines wrap it with their name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OrientationError {
    #[error("root switches apply to updn only")]
    RootsOnlyForUpdn,
    #[error("the root list is empty")]
    NoRoots,
    #[error("root GUID 0x{guid:016x} is not a node of this fabric")]
    UnknownRoot { guid: u64 },
    #[error("root GUID 0x{guid:016x} is '{node}', which is not a switch")]
    RootNotASwitch { guid: u64, node: String },
    #[error(
        "with the given roots, switch '{from}' has no up*/down* route to switch '{to}' \
         (two switches connect only through a switch above both of them; give one \
         root, or roots above every pair of switches with end ports)"
    )]
    RootsLeavePairApart { from: String, to: String },
    #[error("internal error: switch '{from}' has no route to '{to}' from the graph centre")]
    CentreLeavesPairApart { from: String, to: String },
    #[error("the switch graph is disconnected: '{first}' and '{other}' are not linked by any path")]
    Disconnected { first: String, other: String },
    /// Found while measuring eccentricities, where no switch pair is at hand.
    #[error("the switch graph is disconnected")]
    NoCentre,
    #[error("the fabric has no switches")]
    NoSwitches,
    #[error("some legal route would be longer than {} switch hops", FAR - 1)]
    RouteTooLong,
}

/// Why a fabric is not layered like a tree (see [`tree_levels`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TreeError {
    #[error("the fabric has no switches")]
    NoSwitches,
    #[error("no switch has HCAs or routers attached")]
    NoLeaves,
    #[error("the switch graph is disconnected: switch '{switch}' reaches no switch with HCAs")]
    Disconnected { switch: String },
    #[error(
        "all {switches} switches have HCAs attached; a fat tree has switches without HCAs above its leaf switches"
    )]
    AllLeaves { switches: usize },
    #[error(
        "switches '{a}' and '{b}' both have HCAs and are linked to each other; \
         a fat tree links leaf switches only to the level above"
    )]
    LinkedLeaves { a: String, b: String },
    #[error(
        "switches '{a}' and '{b}' are linked but both at level {level} \
         ({level} hops from the nearest switch with HCAs); a fat tree links only adjacent levels"
    )]
    SameLevel { a: String, b: String, level: u32 },
    #[error(
        "switch '{switch}' at level {level} has no link to level {}, so the leaf switches are not all \
         at the same depth below the top level {height}",
        .level + 1
    )]
    ShortBranch {
        switch: String,
        level: u32,
        height: u32,
    },
}

/// The root switches Up*/Down* uses on `f`: the given GUIDs, or the
/// automatic choice described in the module docs.
pub fn selected_roots(f: &Fabric, roots: Option<&[u64]>) -> Result<Vec<NodeId>> {
    let g = SwitchGraph::new(f);
    let plan = plan(f, &g, Mode::UpDown, roots).map_err(|r| fail("updn", r))?;
    Ok(plan
        .roots
        .iter()
        .map(|&r| f.switches()[r as usize])
        .collect())
}

/// Which way legal routes turn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// Up* then down*, ranks counted from the roots.
    UpDown,
    /// Down* then up*, ranks counted from the switches with end ports.
    DownUp,
}

/// Per-switch state toward one destination switch: hop count in the low
/// seven bits ([`FAR`] = no legal route) and [`DOWN`] when the switch's
/// route goes down only.
pub(crate) const DOWN: u8 = 0x80;
pub(crate) const FAR: u8 = 0x7F;
pub(crate) const HOPS: u8 = 0x7F;

/// An orientation and the route states it gives.
pub(crate) struct Orientation {
    /// Place of each switch index in the total order; a channel a -> b is up
    /// (in the valley sense the states use) when `pos[b] < pos[a]`.
    pub pos: Vec<u32>,
    /// `states[b * n + t]`: state of switch b toward destination switch t.
    pub states: Vec<u8>,
    /// Switch indices the ranking started from.
    pub roots: Vec<u32>,
}

impl Orientation {
    #[inline]
    pub(crate) fn state(&self, n: usize, b: u32, t: u32) -> u8 {
        self.states[b as usize * n + t as usize]
    }
}

/// Builds the orientation for `mode` and computes the route states; the
/// caller wraps the error with its engine name.
pub(crate) fn plan(
    f: &Fabric,
    g: &SwitchGraph,
    mode: Mode,
    roots: Option<&[u64]>,
) -> Result<Orientation, OrientationError> {
    let n = g.len();
    if n == 0 {
        return Ok(Orientation {
            pos: Vec::new(),
            states: Vec::new(),
            roots: Vec::new(),
        });
    }
    check_connected(f, g)?;
    let leaves = leaf_flags(f, n);
    if let Some(guids) = roots {
        if mode != Mode::UpDown {
            return Err(OrientationError::RootsOnlyForUpdn);
        }
        let rs = root_indices(f, guids)?;
        let p = orient_from_roots(f, g, rs)?;
        if let Some((a, t)) = unreachable_pair(&p, &leaves, n) {
            return Err(OrientationError::RootsLeavePairApart {
                from: f.desc(f.switches()[a as usize]).to_string(),
                to: f.desc(f.switches()[t as usize]).to_string(),
            });
        }
        return Ok(p);
    }
    let first = match mode {
        Mode::UpDown => match tree_levels(f, g) {
            Ok(lv) => {
                let tops: Vec<u32> = (0..n as u32)
                    .filter(|&i| lv.level[i as usize] == lv.height)
                    .collect();
                Some(orient_from_roots(f, g, tops)?)
            }
            Err(_) => None,
        },
        Mode::DownUp => {
            let sources: Vec<u32> = (0..n as u32).filter(|&i| leaves[i as usize]).collect();
            if sources.is_empty() {
                None
            } else {
                let rank = bfs_ranks(g, &sources);
                // The core climbs toward smaller keys; DnUp first moves away
                // from the leaves, so the key runs backwards: higher rank,
                // then higher GUID, comes first.
                let pos = order_by(n, |i| {
                    (
                        u32::MAX - rank[i as usize],
                        !f.guid(f.switches()[i as usize]),
                    )
                });
                Some(with_states(g, pos, sources)?)
            }
        }
    };
    if let Some(p) = first {
        if unreachable_pair(&p, &leaves, n).is_none() {
            return Ok(p);
        }
        tracing::debug!(
            ?mode,
            "the first ranking leaves switches with end ports apart; ranking from the graph centre"
        );
    }
    let c = centre(f, g)?;
    let p = match mode {
        Mode::UpDown => with_states(g, dfs_order(g, c), vec![c])?,
        Mode::DownUp => {
            // Ranks counted down from the centre: down* runs toward it and
            // up* away from it, so every pair meets there at the latest.
            let dist = bfs_ranks(g, &[c]);
            let pos = order_by(n, |i| (dist[i as usize], !f.guid(f.switches()[i as usize])));
            with_states(g, pos, vec![c])?
        }
    };
    match unreachable_pair(&p, &leaves, n) {
        None => Ok(p),
        Some((a, t)) => Err(OrientationError::CentreLeavesPairApart {
            from: f.desc(f.switches()[a as usize]).to_string(),
            to: f.desc(f.switches()[t as usize]).to_string(),
        }),
    }
}

/// Up*/Down* orientation: rank = hops from the nearest root, ties to the
/// lower GUID, which is "up".
pub(crate) fn orient_from_roots(
    f: &Fabric,
    g: &SwitchGraph,
    roots: Vec<u32>,
) -> Result<Orientation, OrientationError> {
    let rank = bfs_ranks(g, &roots);
    let pos = order_by(g.len(), |i| {
        (rank[i as usize], f.guid(f.switches()[i as usize]))
    });
    with_states(g, pos, roots)
}

fn with_states(
    g: &SwitchGraph,
    pos: Vec<u32>,
    roots: Vec<u32>,
) -> Result<Orientation, OrientationError> {
    let by_dest = route_states(g, &pos)?;
    Ok(Orientation {
        states: transpose(&by_dest, g.len()),
        pos,
        roots,
    })
}

/// Places of switch indices `0..n` sorted by `key` (smallest first).
fn order_by<K: Ord>(n: usize, key: impl Fn(u32) -> K) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..n as u32).collect();
    idx.sort_by_key(|&i| key(i));
    let mut pos = vec![0u32; n];
    for (p, &i) in idx.iter().enumerate() {
        pos[i as usize] = p as u32;
    }
    pos
}

/// Depth-first positions from `root`: the order Up*/Down* uses on fabrics
/// that are not trees. A BFS ranking there sends every route that cannot
/// turn down in time through the few links around the root (on a Dragonfly
/// p=4, 16.5x the mean load on one global link into the root's group); a
/// depth-first order, as Sancho, Robles and Duato proposed for irregular
/// networks, orients most links along long chains, so far more minimal
/// routes stay legal (4.2x the mean there). The next switch visited is
/// the unvisited neighbour of the current one with the most visited
/// neighbours (ties to the lower index), which keeps the chains close to
/// what is already ordered and the routes short (random regular graph:
/// 5 hops against 12 for plain port order). Every switch's DFS parent
/// comes earlier, so every switch climbs to the root and every pair has a
/// legal route.
fn dfs_order(g: &SwitchGraph, root: u32) -> Vec<u32> {
    let n = g.len();
    let mut pos = vec![u32::MAX; n];
    let mut next = 0u32;
    let mut stack: Vec<u32> = vec![root];
    pos[root as usize] = next;
    next += 1;
    while let Some(&u) = stack.last() {
        let best = g
            .neighbours(u)
            .iter()
            .map(|&(v, _)| v)
            .filter(|&v| pos[v as usize] == u32::MAX)
            .max_by_key(|&v| {
                let visited = g
                    .neighbours(v)
                    .iter()
                    .filter(|&&(y, _)| pos[y as usize] != u32::MAX)
                    .count();
                (visited, std::cmp::Reverse(v))
            });
        match best {
            Some(v) => {
                pos[v as usize] = next;
                next += 1;
                stack.push(v);
            }
            None => {
                stack.pop();
            }
        }
    }
    pos
}

/// Hops from the nearest of `sources` (`u32::MAX` = unreachable).
pub(crate) fn bfs_ranks(g: &SwitchGraph, sources: &[u32]) -> Vec<u32> {
    let mut rank = vec![u32::MAX; g.len()];
    let mut queue = Vec::with_capacity(g.len());
    for &s in sources {
        if rank[s as usize] == u32::MAX {
            rank[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for &(v, _) in g.neighbours(u) {
            if rank[v as usize] == u32::MAX {
                rank[v as usize] = rank[u as usize] + 1;
                queue.push(v);
            }
        }
    }
    rank
}

/// Per switch index: whether end ports hang off it.
/// Switches with CAs attached. Router ports do not make a leaf: in a
/// multi-subnet fabric routers sit on top of a subnet's tree, where they
/// take the place of the next level's switches.
pub(crate) fn leaf_flags(f: &Fabric, n: usize) -> Vec<bool> {
    let mut leaves = vec![false; n];
    for &e in f.endports() {
        let r = f.remote(e);
        if r != NONE && f.kind(f.node_of(e)) == NodeKind::Ca {
            if let Some(si) = f.switch_index(f.node_of(r)) {
                leaves[si as usize] = true;
            }
        }
    }
    leaves
}

fn check_connected(f: &Fabric, g: &SwitchGraph) -> Result<(), OrientationError> {
    let rank = bfs_ranks(g, &[0]);
    match rank.iter().position(|&r| r == u32::MAX) {
        None => Ok(()),
        Some(i) => Err(OrientationError::Disconnected {
            first: f.desc(f.switches()[0]).to_string(),
            other: f.desc(f.switches()[i]).to_string(),
        }),
    }
}

fn root_indices(f: &Fabric, guids: &[u64]) -> Result<Vec<u32>, OrientationError> {
    if guids.is_empty() {
        return Err(OrientationError::NoRoots);
    }
    guids
        .iter()
        .map(|&guid| {
            let n = f
                .find_node_by_guid(guid)
                .ok_or(OrientationError::UnknownRoot { guid })?;
            f.switch_index(n)
                .ok_or_else(|| OrientationError::RootNotASwitch {
                    guid,
                    node: f.desc(n).to_string(),
                })
        })
        .collect()
}

/// The switch of minimum eccentricity, ties to the lowest GUID.
fn centre(f: &Fabric, g: &SwitchGraph) -> Result<u32, OrientationError> {
    let n = g.len();
    let ecc: Vec<u8> = (0..n as u32)
        .into_par_iter()
        .map_init(
            || (vec![0u8; n], Vec::new()),
            |(d, q), i| {
                g.bfs_into(i, d, q);
                d.iter().copied().max().unwrap_or(0)
            },
        )
        .collect();
    if ecc.contains(&UNREACHABLE) {
        return Err(OrientationError::NoCentre);
    }
    (0..n as u32)
        .min_by_key(|&i| (ecc[i as usize], f.guid(f.switches()[i as usize])))
        .ok_or(OrientationError::NoSwitches)
}

/// A pair of switches with end ports (source, destination) that has no
/// legal route, if any.
pub(crate) fn unreachable_pair(p: &Orientation, leaves: &[bool], n: usize) -> Option<(u32, u32)> {
    let ls: Vec<u32> = (0..n as u32).filter(|&i| leaves[i as usize]).collect();
    ls.par_iter().find_map_any(|&a| {
        ls.iter()
            .find(|&&t| p.state(n, a, t) & HOPS == FAR)
            .map(|&t| (a, t))
    })
}

/// Route states per destination switch (row t, one byte per switch), from
/// one backwards BFS each. A switch discovered at distance k+1 from a
/// neighbour at k may always climb to it; it may descend to it only when
/// that neighbour routes down only, and then becomes a down-mode switch
/// itself. FIFO order finishes every distance-k switch before any switch at
/// k+1 is expanded, so the mode of each switch is final when it is read.
fn route_states(g: &SwitchGraph, pos: &[u32]) -> Result<Vec<u8>, OrientationError> {
    let n = g.len();
    let mut m = vec![FAR; n * n];
    let too_long = AtomicBool::new(false);
    m.par_chunks_mut(n)
        .enumerate()
        .for_each_init(Vec::new, |queue: &mut Vec<u32>, (t, row)| {
            queue.clear();
            row[t] = DOWN;
            queue.push(t as u32);
            let mut head = 0;
            while head < queue.len() {
                let b = queue[head];
                head += 1;
                let sb = row[b as usize];
                let k = sb & HOPS;
                if k + 1 >= FAR {
                    too_long.store(true, Ordering::Relaxed);
                    break;
                }
                for &(a, _) in g.neighbours(b) {
                    let down = pos[b as usize] > pos[a as usize];
                    if down && sb & DOWN == 0 {
                        continue;
                    }
                    let sa = &mut row[a as usize];
                    if *sa == FAR {
                        *sa = k + 1;
                        queue.push(a);
                    }
                    if down && *sa & HOPS == k + 1 {
                        *sa |= DOWN;
                    }
                }
            }
        });
    if too_long.load(Ordering::Relaxed) {
        return Err(OrientationError::RouteTooLong);
    }
    Ok(m)
}

/// Row-major `n x n` transpose, in tiles so both sides stay in cache.
fn transpose(m: &[u8], n: usize) -> Vec<u8> {
    const T: usize = 64;
    let mut out = vec![0u8; n * n];
    out.par_chunks_mut((T * n).max(1))
        .enumerate()
        .for_each(|(bi, block)| {
            let r0 = bi * T;
            let rows = block.len() / n.max(1);
            for c0 in (0..n).step_by(T) {
                for r in 0..rows {
                    for c in c0..(c0 + T).min(n) {
                        block[r * n + c] = m[c * n + r0 + r];
                    }
                }
            }
        });
    out
}

/// Calls `keep(neighbour, port)` for each port of switch index `a` that
/// continues a legal route toward switch `t`, in ascending port order.
#[inline]
pub(crate) fn legal_ports(
    f: &Fabric,
    g: &SwitchGraph,
    p: &Orientation,
    a: u32,
    t: u32,
    mut keep: impl FnMut(u32, u8),
) {
    let n = g.len();
    let s = p.state(n, a, t);
    let k = s & HOPS;
    if k == FAR || k == 0 {
        return;
    }
    let pa = p.pos[a as usize];
    for &(nb, slot) in g.neighbours(a) {
        let x = p.state(n, nb, t);
        let ok = if s & DOWN != 0 {
            p.pos[nb as usize] > pa && x == (k - 1) | DOWN
        } else {
            p.pos[nb as usize] < pa && x & HOPS == k - 1
        };
        if ok {
            keep(nb, f.port_of(slot));
        }
    }
}

/// LFTs from a plan, balanced like MinHop.
pub(crate) fn fill(f: &Fabric, g: &SwitchGraph, p: &Orientation, opts: &EngineOptions) -> Lfts {
    if g.is_empty() {
        return Lfts::for_fabric(f);
    }
    balanced_lfts(f, g, opts, |a, t, out| {
        legal_ports(f, g, p, a, t, |_, port| out.push(port))
    })
}

/// Levels of a tree-like fabric: `level[i]` = hops from switch index `i` to
/// the nearest switch with end ports; `height` = the top level.
#[derive(Debug, Clone)]
pub(crate) struct Levels {
    pub level: Vec<u32>,
    pub height: u32,
}

/// Checks that the fabric is layered like a (fat) tree and returns its
/// levels; the error says why it is not. Layered means: some switch has end
/// ports (level 0), some has none, every switch-to-switch link joins two
/// adjacent levels, and every switch below the top level links to the level
/// above, so every leaf switch sits exactly `height` levels below the top.
pub(crate) fn tree_levels(f: &Fabric, g: &SwitchGraph) -> Result<Levels, TreeError> {
    let n = g.len();
    if n == 0 {
        return Err(TreeError::NoSwitches);
    }
    let leaves = leaf_flags(f, n);
    let sources: Vec<u32> = (0..n as u32).filter(|&i| leaves[i as usize]).collect();
    if sources.is_empty() {
        return Err(TreeError::NoLeaves);
    }
    let level = bfs_ranks(g, &sources);
    let desc = |i: u32| f.desc(f.switches()[i as usize]).to_string();
    if let Some(i) = level.iter().position(|&l| l == u32::MAX) {
        return Err(TreeError::Disconnected {
            switch: desc(i as u32),
        });
    }
    let height = level.iter().copied().max().unwrap_or(0);
    if height == 0 {
        return Err(TreeError::AllLeaves { switches: n });
    }
    for a in 0..n as u32 {
        let la = level[a as usize];
        let mut has_up = false;
        for &(b, _) in g.neighbours(a) {
            let lb = level[b as usize];
            if lb == la && a < b {
                return Err(if la == 0 {
                    TreeError::LinkedLeaves {
                        a: desc(a),
                        b: desc(b),
                    }
                } else {
                    TreeError::SameLevel {
                        a: desc(a),
                        b: desc(b),
                        level: la,
                    }
                });
            }
            has_up |= lb == la + 1;
        }
        if la < height && !has_up {
            return Err(TreeError::ShortBranch {
                switch: desc(a),
                level: la,
                height,
            });
        }
    }
    Ok(Levels { level, height })
}
