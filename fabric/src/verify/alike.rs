//! Destinations whose walks are another's. Most engines route the hosts
//! of one switch alike: their LFT columns agree but at that switch (where
//! each goes to its own port), and so do their path SLs. Every walk toward
//! such a host takes the same channels, with the same VLs, as toward its
//! switch's first such host, and ends at the switch. The verifier walks
//! that first host; the others need only their own entry checked, and are
//! walked in full when the first one has a broken pair (their examples
//! then differ).

use super::Ctx;
use crate::model::{NONE, NodeKind, Slot};

/// Per destination LID of `dests` (whose LFT columns are `cols`, `nsw` bytes
/// each, and path-SL columns `sl_cols`, `nr` bytes each): the index of the
/// destination whose walks stand for its own (itself when none does).
pub(super) fn representatives(
    ctx: &Ctx,
    dests: &[(Slot, u16)],
    cols: &[u8],
    sl_cols: &[u8],
    nr: usize,
) -> Vec<usize> {
    let f = ctx.f;
    let nsw = f.switches().len();
    let col = |i: usize| &cols[i * nsw..(i + 1) * nsw];
    let sl_col = |i: usize| sl_cols.get(i * nr..(i + 1) * nr).unwrap_or(&[]);
    let router = |d: Slot| f.kind(f.node_of(d)) == NodeKind::Router;
    // Per switch index: the representatives found so far on it.
    let mut on_switch: Vec<Vec<usize>> = vec![Vec::new(); nsw];
    let mut rep: Vec<usize> = (0..dests.len()).collect();
    for (i, &(d, _)) in dests.iter().enumerate() {
        let h = ctx.hops[d as usize];
        if h.switch == NONE || !delivers(ctx, h.switch, col(i), d) {
            continue;
        }
        let si = h.switch as usize;
        // The one pair no walk toward `j` stands for: `j` toward `d`, on
        // `j`'s own row (its entry toward itself is no pair).
        let same = |j: usize| {
            let (a, b) = (col(i), col(j));
            router(dests[j].0) == router(d)
                && dests[j].0 != d
                && a[..si] == b[..si]
                && a[si + 1..] == b[si + 1..]
                && sl_col(i) == sl_col(j)
                && sls_between(ctx, sl_col(i), dests[j].0).is_some()
        };
        match on_switch[si].iter().copied().find(|&j| same(j)) {
            Some(j) => rep[i] = j,
            None => on_switch[si].push(i),
        }
    }
    rep
}

/// Whether the entry of switch `si` in `col` leads to `d` itself.
fn delivers(ctx: &Ctx, si: u32, col: &[u8], d: Slot) -> bool {
    let out = col[si as usize];
    out != 0
        && out <= ctx.sw_ports[si as usize]
        && ctx.hops[(ctx.sw_slot0[si as usize] + out as Slot) as usize].remote == d
}

/// The SLs the LIDs of `src` use toward the destination whose path-SL
/// column is `sl_col`, as a mask: `None` when one of them has none (no
/// path, or above 15).
pub(super) fn sls_between(ctx: &Ctx, sl_col: &[u8], src: Slot) -> Option<u16> {
    let mut mask = 0u16;
    for lid in ctx.f.lids_of_slot(src) {
        let row = ctx.r.path_sl.as_ref().and_then(|p| p.row_index(lid));
        let sl = match row {
            None => 0,
            Some(r) => sl_col.get(r as usize).copied()?,
        };
        if sl >= 16 {
            return None;
        }
        mask |= 1 << sl;
    }
    Some(mask)
}
