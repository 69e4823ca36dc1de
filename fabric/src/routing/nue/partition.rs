//! Which destinations each layer routes: connected regions of switches of
//! balanced LID counts, and the order a layer takes their LIDs in.

use super::net::Net;
use crate::model::NONE;
use std::cmp::Reverse;
use std::collections::VecDeque;

/// One LID to route, or an end port and its switch's LID sharing a tree.
#[derive(Clone, Copy)]
pub(super) struct Dest {
    pub(super) switch: u32,
    pub(super) lid: u16,
    /// Port of `switch` that delivers `lid` (0 for the switch itself).
    pub(super) port: u8,
    /// The switch's own LID when it follows this tree (0 = none).
    pub(super) switch_lid: u16,
}

impl Dest {
    pub(super) fn end_port(&self) -> bool {
        self.port != 0
    }
}

/// A layer's destinations: the `j`-th end port of every member switch
/// before any `(j + 1)`-th, so consecutive Dijkstras target different
/// switches and loads build up evenly; switches without end ports last.
pub(super) fn layer_dests(
    members: &[u32],
    ports_of: &[Vec<(u16, u8)>],
    switch_lid: &[u16],
) -> Vec<Dest> {
    let mut dests = Vec::new();
    let most = members
        .iter()
        .map(|&s| ports_of[s as usize].len())
        .max()
        .unwrap_or(0);
    for j in 0..most {
        for &s in members {
            if let Some(&(lid, port)) = ports_of[s as usize].get(j) {
                dests.push(Dest {
                    switch: s,
                    lid,
                    port,
                    switch_lid: if j == 0 { switch_lid[s as usize] } else { 0 },
                });
            }
        }
    }
    for &s in members {
        if ports_of[s as usize].is_empty() && switch_lid[s as usize] != 0 {
            dests.push(Dest {
                switch: s,
                lid: switch_lid[s as usize],
                port: 0,
                switch_lid: 0,
            });
        }
    }
    dests
}

/// Splits the switches into `k` connected regions of similar weight: seeds
/// as far apart as BFS finds them, then the lightest region that can still
/// grow claims the next switch of its breadth-first frontier.
pub(super) fn partition(net: &Net, weight: &[u64], k: usize) -> Vec<u32> {
    let n = net.nsw;
    let mut layer_of = vec![NONE; n];
    if n == 0 || k == 0 {
        return layer_of;
    }
    let mut dist = vec![0u32; n];
    let mut tmp = vec![0u32; n];
    let mut queue = Vec::new();
    net.bfs(0, &mut dist, &mut queue);
    let farthest = |d: &[u32]| (0..n).max_by_key(|&v| (d[v], Reverse(v))).unwrap_or(0) as u32;
    let mut seeds = vec![farthest(&dist)];
    net.bfs(seeds[0], &mut dist, &mut queue);
    while seeds.len() < k {
        let s = farthest(&dist);
        if dist[s as usize] == 0 {
            break;
        }
        seeds.push(s);
        net.bfs(s, &mut tmp, &mut queue);
        for (d, &t) in dist.iter_mut().zip(&tmp) {
            *d = (*d).min(t);
        }
    }
    let mut load = vec![0u64; seeds.len()];
    let mut frontier: Vec<VecDeque<u32>> = vec![VecDeque::new(); seeds.len()];
    let claim =
        |r: usize, v: u32, layer_of: &mut [u32], load: &mut [u64], fr: &mut VecDeque<u32>| {
            layer_of[v as usize] = r as u32;
            load[r] += weight[v as usize];
            for c in net.outs(v) {
                let y = net.head[c as usize];
                if layer_of[y as usize] == NONE {
                    fr.push_back(y);
                }
            }
        };
    for (r, &s) in seeds.iter().enumerate() {
        claim(r, s, &mut layer_of, &mut load, &mut frontier[r]);
    }
    let mut left = n - seeds.len();
    while left > 0 {
        let mut best: Option<usize> = None;
        for r in 0..seeds.len() {
            while let Some(&v) = frontier[r].front() {
                if layer_of[v as usize] == NONE {
                    break;
                }
                frontier[r].pop_front();
            }
            if !frontier[r].is_empty() && best.is_none_or(|b| load[r] < load[b]) {
                best = Some(r);
            }
        }
        let Some(r) = best else { break };
        if let Some(v) = frontier[r].pop_front() {
            claim(r, v, &mut layer_of, &mut load, &mut frontier[r]);
            left -= 1;
        }
    }
    layer_of
}
