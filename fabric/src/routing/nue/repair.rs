//! The local repair tried before an impasse falls back to the escape paths.

use super::layer::{Scratch, admit};
use super::net::{Net, Turns, UNUSED, USED};
use crate::graph::level_order::LevelOrder;

/// Local repair of an impasse (after Nue's local backtracking): an
/// unreached switch `u` joins through a reached neighbour `x` that moves
/// to another out channel `x -> y`, if the turns into and out of that
/// channel, including those of every switch already routed through `x`,
/// keep the CDG acyclic and `y` does not route through `x`. Returns whether
/// a switch joined; the caller resumes the Dijkstra from it.
pub(super) fn repair(
    net: &Net,
    turns: &mut Turns,
    order: &mut LevelOrder,
    s: &mut Scratch,
    (t, pass, ds, hop): (u32, u32, u32, u64),
    w: &dyn Fn(u32) -> u64,
) -> bool {
    for u in 0..net.nsw as u32 {
        if s.seen[u as usize] == pass {
            continue;
        }
        s.cands.clear();
        for c in net.outs(u) {
            let x = net.head[c as usize];
            if s.seen[x as usize] != pass || x == t || s.fixed[x as usize] == ds {
                continue;
            }
            for b in net.outs(x) {
                let y = net.head[b as usize];
                if b != s.out[x as usize] && s.seen[y as usize] == pass {
                    s.cands.push((s.dist[y as usize] + w(b) + w(c), c, b));
                }
            }
        }
        s.cands.sort_unstable();
        for i in 0..s.cands.len() {
            let (_, c, b) = s.cands[i];
            let x = net.head[c as usize];
            let y = net.head[b as usize];
            let mut v = y;
            let mut via_x = false;
            while v != t {
                if v == x {
                    via_x = true;
                    break;
                }
                v = net.head[s.out[v as usize] as usize];
            }
            if via_x {
                continue;
            }
            s.tentative.clear();
            let blocked_before = s.blocked_now.len();
            let mut ok = admit(net, turns, order, s, pass, c, b)
                && (y == t || admit(net, turns, order, s, pass, b, s.out[y as usize]));
            for o in net.outs(x) {
                if !ok {
                    break;
                }
                let z = net.rev[o as usize];
                let zt = net.tail[z as usize];
                if s.seen[zt as usize] == pass && s.out[zt as usize] == z {
                    ok = admit(net, turns, order, s, pass, z, b);
                }
            }
            if !ok {
                // A refusal judged with this attempt's own turns in place
                // may not hold without them.
                for &tid in s.tentative.iter().chain(&s.blocked_now[blocked_before..]) {
                    turns.set(net, tid as usize, UNUSED);
                }
                s.blocked_now.truncate(blocked_before);
                continue;
            }
            // Turns only the old channel of x needed, if this destination
            // added them, leave the CDG again.
            let old = s.out[x as usize];
            let oy = net.head[old as usize];
            let mut drop = |tid: usize| {
                if s.astamp[tid] == pass && turns[tid] == USED {
                    turns.set(net, tid, UNUSED);
                }
            };
            if oy != t {
                drop(net.turn(old, s.out[oy as usize]));
            }
            for o in net.outs(x) {
                let z = net.rev[o as usize];
                let zt = net.tail[z as usize];
                if s.seen[zt as usize] == pass && s.out[zt as usize] == z {
                    drop(net.turn(z, old));
                }
            }
            s.out[x as usize] = b;
            s.dist[x as usize] = s.dist[y as usize] + w(b);
            s.seen[u as usize] = pass;
            s.dist[u as usize] = s.dist[x as usize] + w(c);
            s.out[u as usize] = c;
            s.settled.push(u);
            s.relax(net, u, pass, hop);
            s.rerouted = true;
            return true;
        }
    }
    false
}
