//! The walks: every source toward one destination through the LFT column
//! and the path SLs, recording the channel dependencies, the broken pairs
//! and the longest route.

use super::*;

/// Outcome of one walk: switch-to-switch hops to the destination, or a fault.
type Walk = Result<u32, PairFault>;

/// Broken pairs a report names: the first ones by (source, destination)
/// LID, whatever order the walks ran in, so that any split of the work
/// names the same ones.
const EXAMPLES: usize = 16;

fn record(st: &mut Scratch, slid: u16, dlid: u16, count: u64, fault: PairFault) {
    st.broken += count;
    let e = BrokenPair {
        src_lid: slid,
        dst_lid: dlid,
        fault,
    };
    if st.examples.len() < EXAMPLES {
        st.examples.push(e);
    } else if let Some((i, last)) = st
        .examples
        .iter()
        .enumerate()
        .max_by_key(|(_, x)| (x.src_lid, x.dst_lid))
    {
        if (slid, dlid) < (last.src_lid, last.dst_lid) {
            st.examples[i] = e;
        }
    }
}

/// The first [`EXAMPLES`] of two example lists, by (source, destination).
pub(super) fn keep_first(mut a: Vec<BrokenPair>, b: Vec<BrokenPair>) -> Vec<BrokenPair> {
    a.extend(b);
    a.sort_by_key(|e| (e.src_lid, e.dst_lid));
    a.dedup_by_key(|e| (e.src_lid, e.dst_lid));
    a.truncate(EXAMPLES);
    a
}

/// Walks every source toward destination port `d` (stamp `tag`). Sources
/// are taken switch by switch so the first LFT lookup is shared; when the
/// tables carry no SLs and no VLs every host of a switch takes the same
/// route, and one walk stands for all of them.
pub(super) fn route_to(ctx: &Ctx, st: &mut Scratch, tag: u32, d: Slot, col: &[u8], sl_col: &[u8]) {
    let f = ctx.f;
    let dlid = f.lid_of_slot(d);
    let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
    let sl2vl = ctx.r.sl2vl.as_ref();
    let uniform = sl2vl.is_none() && ctx.r.path_sl.is_none();
    let mut memo: Vec<(u8, u8, Walk)> = Vec::new();
    // When a summary is wanted, the CAs toward a CA go first and alone, so
    // the states they leave behind carry CA-to-CA edges only; the router
    // ports follow. Each pass: (sources that are router ports or not, or
    // all; whether the edges are CA-to-CA ones).
    let passes: &[(Option<bool>, bool)] = if ctx.local.is_some() && !d_router {
        &[(Some(false), true), (Some(true), false)]
    } else {
        &[(None, false)]
    };
    for &(only, local) in passes {
        st.local = local;
        // The router ports' pass visits only the switches they sit on.
        let switches = if only == Some(true) {
            &ctx.router_switches[..]
        } else {
            &ctx.switch_ids[..]
        };
        for &si in switches {
            let hosts = &ctx.hosts
                [ctx.host_off[si as usize] as usize..ctx.host_off[si as usize + 1] as usize];
            if hosts.is_empty() {
                continue;
            }
            let sw = f.switches()[si as usize];
            let base = ctx.host_off[si as usize] as usize;
            // Router-to-router pairs are transit through this subnet, which the
            // inter-subnet check owns; every pair with a CA end is checked here.
            let skip = |k: usize| {
                hosts[k] == d
                    || (d_router && ctx.host_router[base + k])
                    || only.is_some_and(|r| ctx.host_router[base + k] != r)
            };
            let others = (0..hosts.len()).filter(|&k| !skip(k)).count() as u64;
            if others == 0 {
                continue;
            }
            let out = col[si as usize];
            let first = if out == NO_PATH || out == 0 || out > f.num_ports(sw) {
                Err(PairFault::NoRoute {
                    switch: f.desc(sw).to_string(),
                })
            } else if f.remote(f.slot(sw, out)) == NONE {
                Err(PairFault::DeadPort {
                    switch: f.desc(sw).to_string(),
                    port: out,
                })
            } else {
                Ok(f.slot(sw, out))
            };
            let o = match first {
                Ok(o) => o,
                Err(fault) => {
                    let src = (0..hosts.len())
                        .find(|&k| !skip(k))
                        .map_or(0, |k| f.lid_of_slot(hosts[k]));
                    record(st, src, dlid, others, fault);
                    continue;
                }
            };
            memo.clear();
            for k in 0..hosts.len() {
                if skip(k) {
                    continue;
                }
                let (slid, in_port, row) = ctx.host_info[base + k];
                let sl = if row == u32::MAX {
                    0
                } else {
                    sl_col.get(row as usize).copied().unwrap_or(SL_NONE)
                };
                if sl == SL_NONE || sl as usize >= NUM_SLS {
                    record(st, slid, dlid, 1, PairFault::NoSl);
                    continue;
                }
                st.sl_mask |= 1 << sl;
                let vo = match sl2vl {
                    Some(t) => t.switch_vl(si, in_port, out, sl),
                    None => 0,
                };
                // Hosts of one switch that share (SL, first VL) share the walk.
                let res = match memo.iter().find(|m| m.0 == sl && m.1 == vo) {
                    Some(m) => m.2.clone(),
                    None => {
                        let r = walk(ctx, st, tag, d, col, o, vo, sl);
                        memo.push((sl, vo, r.clone()));
                        r
                    }
                };
                let count = if uniform { others } else { 1 };
                match res {
                    Ok(hops) => st.max_hops = st.max_hops.max(hops),
                    Err(fault) => record(st, slid, dlid, count, fault),
                }
                if uniform {
                    break;
                }
            }
        }
    }
    // End ports linked straight to another end port (no switch between).
    for &h in &ctx.direct {
        if h != d && f.remote(h) != d {
            record(
                st,
                f.lid_of_slot(h),
                dlid,
                1,
                PairFault::Misdelivered {
                    at: f.desc(f.node_of(f.remote(h))).to_string(),
                },
            );
        }
    }
}

pub(super) const NO_SUCC: u16 = u16::MAX;

/// Follows the route from channel `o` (entered on VL `vo`) with SL `sl`.
#[allow(clippy::too_many_arguments)]
fn walk(
    ctx: &Ctx,
    st: &mut Scratch,
    tag: u32,
    d: Slot,
    col: &[u8],
    o: Slot,
    vo: u8,
    sl: u8,
) -> Walk {
    let f = ctx.f;
    let sls = st.sls;
    let mut c = o;
    let mut vc = vo;
    let mut prev_key: Option<usize> = None;
    st.stack.clear();
    let res: Walk = loop {
        let r = f.remote(c);
        if r == d {
            break Ok(0);
        }
        let node = f.node_of(r);
        let Some(swi) = f.switch_index(node) else {
            break Err(PairFault::Misdelivered {
                at: f.desc(node).to_string(),
            });
        };
        let c_s2s = ctx.is_s2s[c as usize];
        if c_s2s {
            st.vl_mask |= 1 << vc.min(15);
            let key = c as usize * sls + if sls == 1 { 0 } else { sl as usize };
            if let Some(pk) = prev_key {
                st.succ[pk] = pack_succ(f.port_of(c), vc);
            }
            if st.stamp[key] == tag {
                // Known state: its continuation is done; only the edge out of
                // this (channel, VL) may be new.
                let s = st.succ[key];
                if s != NO_SUCC {
                    ctx.add_edge(c, (s >> 4) as u8, vc, (s & 15) as u8, st.local);
                }
                break match st.info[key] {
                    IN_PROGRESS | BROKEN_LOOP => Err(PairFault::Loop {
                        switch: f.desc(node).to_string(),
                    }),
                    BROKEN_ROUTE => Err(PairFault::NoRoute {
                        switch: f.desc(node).to_string(),
                    }),
                    h => Ok(h),
                };
            }
            st.stamp[key] = tag;
            st.info[key] = IN_PROGRESS;
            st.succ[key] = NO_SUCC;
            st.stack.push(key);
            prev_key = Some(key);
        } else {
            prev_key = None;
        }
        let inp = f.port_of(r);
        let out = col[swi as usize];
        if out == NO_PATH || out == 0 || out > f.num_ports(node) {
            break Err(PairFault::NoRoute {
                switch: f.desc(node).to_string(),
            });
        }
        let o2 = f.slot(node, out);
        if f.remote(o2) == NONE {
            break Err(PairFault::DeadPort {
                switch: f.desc(node).to_string(),
                port: out,
            });
        }
        let vo2 = ctx.r.switch_vl(swi, inp, out, sl);
        if c_s2s && ctx.is_s2s[o2 as usize] {
            ctx.add_edge(c, out, vc, vo2, st.local);
        }
        c = o2;
        vc = vo2;
    };
    match res {
        Ok(mut h) => {
            while let Some(k) = st.stack.pop() {
                h += 1;
                st.info[k] = h;
            }
            Ok(h)
        }
        Err(fault) => {
            let mark = if matches!(fault, PairFault::Loop { .. }) {
                BROKEN_LOOP
            } else {
                BROKEN_ROUTE
            };
            while let Some(k) = st.stack.pop() {
                st.info[k] = mark;
            }
            Err(fault)
        }
    }
}

#[inline]
fn pack_succ(out_port: u8, vl: u8) -> u16 {
    ((out_port as u16) << 4) | (vl as u16 & 15)
}
