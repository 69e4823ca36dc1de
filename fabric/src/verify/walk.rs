//! The walks: every source toward one destination through the LFT column
//! and the path SLs, recording the channel dependencies, the broken pairs
//! and the longest route.

use super::classes::Class;
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

/// Records a fault for every member of a class but `d`. Members are by
/// LID, so only the first [`EXAMPLES`] can be among the examples a report
/// keeps; the others are counted.
fn record_members(
    ctx: &Ctx,
    st: &mut Scratch,
    members: &[u32],
    d: Slot,
    dlid: u16,
    fault: &PairFault,
) {
    let mut named = 0;
    for &k in members {
        let h = ctx.hosts[k as usize];
        if h == d {
            continue;
        }
        if named == EXAMPLES {
            st.broken += 1;
            continue;
        }
        named += 1;
        record(st, ctx.host_info[k as usize].0, dlid, 1, fault.clone());
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

/// Walks every source toward LID `dlid` of port `d` (stamp `tag`). Sources
/// are taken switch by switch so the first LFT lookup is shared, and class
/// by class ([`super::classes`]): one walk stands for every host of a class.
pub(super) fn route_to(
    ctx: &Ctx,
    st: &mut Scratch,
    tag: u32,
    (d, dlid): (Slot, u16),
    col: &[u8],
    sl_col: &[u8],
) {
    let f = ctx.f;
    let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
    // The switch the destination hangs on: only its classes hold `d`.
    let d_switch = f.switch_index(f.node_of(f.remote(d))).unwrap_or(u32::MAX);
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
            let classes = ctx.classes.of_switch(si);
            if classes.is_empty() {
                continue;
            }
            let sw = f.switches()[si as usize];
            // Router-to-router pairs are transit through this subnet, which the
            // inter-subnet check owns; every pair with a CA end is checked here.
            let skip = |c: &Class| (d_router && c.router) || only.is_some_and(|r| c.router != r);
            let out = col[si as usize];
            let o = ctx.sw_slot0[si as usize] + out as Slot;
            let first = if out == NO_PATH || out == 0 || out > ctx.sw_ports[si as usize] {
                Err(PairFault::NoRoute {
                    switch: f.desc(sw).to_string(),
                })
            } else if ctx.hops[o as usize].remote == NONE {
                Err(PairFault::DeadPort {
                    switch: f.desc(sw).to_string(),
                    port: out,
                })
            } else {
                Ok(o)
            };
            memo.clear();
            for c in classes.iter().filter(|c| !skip(c)) {
                let members = ctx.classes.members(c);
                let o = match &first {
                    Ok(o) => *o,
                    Err(fault) => {
                        record_members(ctx, st, members, d, dlid, fault);
                        continue;
                    }
                };
                let sl = if c.row == u32::MAX {
                    0
                } else {
                    sl_col.get(c.row as usize).copied().unwrap_or(SL_NONE)
                };
                if sl == SL_NONE || sl as usize >= NUM_SLS {
                    record_members(ctx, st, members, d, dlid, &PairFault::NoSl);
                    continue;
                }
                if si == d_switch && members.iter().all(|&k| ctx.hosts[k as usize] == d) {
                    continue;
                }
                st.sl_mask |= 1 << sl;
                let vo = ctx.r.switch_vl(si, c.in_port, out, sl);
                // Classes of one switch that share (SL, first VL) share the walk.
                let res = match memo.iter().find(|m| m.0 == sl && m.1 == vo) {
                    Some(m) => m.2.clone(),
                    None => {
                        let r = walk(ctx, st, tag, d, col, o, vo, sl);
                        memo.push((sl, vo, r.clone()));
                        r
                    }
                };
                match res {
                    Ok(hops) => st.max_hops = st.max_hops.max(hops),
                    Err(fault) => record_members(ctx, st, members, d, dlid, &fault),
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
                1 << f.lmc(h),
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
        let h = ctx.hops[c as usize];
        if h.remote == d {
            break Ok(0);
        }
        if h.switch == NONE {
            break Err(PairFault::Misdelivered {
                at: f.desc(f.node_of(h.remote)).to_string(),
            });
        }
        let swi = h.switch;
        let node = || f.switches()[swi as usize];
        if h.s2s {
            st.vl_mask |= 1 << vc.min(15);
            let key = c as usize * sls + st.sl_dense[sl as usize & 15] as usize;
            if let Some(pk) = prev_key {
                st.succ[pk] = pack_succ(h.port, vc);
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
                        switch: f.desc(node()).to_string(),
                    }),
                    BROKEN_ROUTE => Err(PairFault::NoRoute {
                        switch: f.desc(node()).to_string(),
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
        let out = col[swi as usize];
        if out == NO_PATH || out == 0 || out > ctx.sw_ports[swi as usize] {
            break Err(PairFault::NoRoute {
                switch: f.desc(node()).to_string(),
            });
        }
        let o2 = ctx.sw_slot0[swi as usize] + out as Slot;
        let h2 = ctx.hops[o2 as usize];
        if h2.remote == NONE {
            break Err(PairFault::DeadPort {
                switch: f.desc(node()).to_string(),
                port: out,
            });
        }
        let vo2 = ctx.r.switch_vl(swi, h.remote_port, out, sl);
        if h.s2s && h2.s2s {
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
