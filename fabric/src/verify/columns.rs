//! The walks toward a range of destinations, from the LFT and path-SL
//! columns they read (what a worker's part holds): alike destinations
//! walked once (`alike.rs`), in parallel over destinations.

use super::*;

/// Walks every source toward the destination LIDs `range` (indices into
/// `f.end_lids()`), setting the dependencies found in `ctx`.
pub(super) fn walk_range(ctx: &Ctx, range: std::ops::Range<usize>) -> Walked {
    let (cols, sl_cols) = part_columns(ctx.f, ctx.r, range.clone());
    walk_columns(ctx, range, &cols, &sl_cols)
}

/// The LFT and path-SL columns the walks toward destination LIDs `range`
/// (indices into `f.end_lids()`) read:
/// per destination, one LFT entry per switch, then one SL per path-SL
/// row. A part needs nothing else of those tables.
pub fn part_columns(
    f: &Fabric,
    routing: &Routing,
    range: std::ops::Range<usize>,
) -> (Vec<u8>, Vec<u8>) {
    let lids: Vec<u16> = f.end_lids()[range].iter().map(|&(_, l)| l).collect();
    let cols = routing.lfts.lid_columns(&lids);
    let sl_cols = routing
        .path_sl
        .as_ref()
        .map(|p| p.columns(&lids))
        .unwrap_or_default();
    (cols, sl_cols)
}

/// [`walk_range`] over columns given ([`part_columns`]).
pub(super) fn walk_columns(
    ctx: &Ctx,
    range: std::ops::Range<usize>,
    cols: &[u8],
    sl_cols: &[u8],
) -> Walked {
    let dests = &ctx.f.end_lids()[range.clone()];
    let rep = alike::representatives(ctx, dests, cols, sl_cols, ctx.sl_rows);
    let firsts: Vec<usize> = (0..dests.len()).filter(|&i| rep[i] == i).collect();
    let (walked, broken) = walk_list(ctx, range.start, &firsts, cols, sl_cols);
    // The destinations a broken one stood for are walked on their own:
    // their broken pairs name them.
    let mut again = vec![false; dests.len()];
    for i in broken {
        again[i] = true;
    }
    let rest: Vec<usize> = (0..dests.len())
        .filter(|&i| rep[i] != i && again[rep[i]])
        .collect();
    let (mut more, _) = walk_list(ctx, range.start, &rest, cols, sl_cols);
    // The SLs of the pairs from a representative to those it stood for.
    let nr = ctx.sl_rows;
    for i in (0..dests.len()).filter(|&i| rep[i] != i && !again[rep[i]]) {
        let sl_col = sl_cols.get(i * nr..(i + 1) * nr).unwrap_or(&[]);
        more.sl_mask |= alike::sls_between(ctx, sl_col, dests[rep[i]].0).unwrap_or(0);
    }
    walked.merge(more)
}

/// Walks toward the destinations `list` (indices into the range that
/// begins at `start`); also returns those with a broken pair.
fn walk_list(
    ctx: &Ctx,
    start: usize,
    list: &[usize],
    cols: &[u8],
    sl_cols: &[u8],
) -> (Walked, Vec<usize>) {
    let f = ctx.f;
    let n_slots = f.num_slots();
    let dests = &f.end_lids()[start..];
    let (sl_dense, sls) = dense_sls(sl_cols);
    let nsw = f.switches().len();
    let nr = ctx.sl_rows;
    list.par_iter()
        .fold(
            || {
                let st = Scratch {
                    sls,
                    sl_dense,
                    stamp: vec![0; n_slots * sls],
                    info: vec![0; n_slots * sls],
                    succ: vec![NO_SUCC; n_slots * sls],
                    stack: Vec::new(),
                    broken: 0,
                    examples: Vec::new(),
                    local: false,
                    vl_mask: 0,
                    sl_mask: 0,
                    max_hops: 0,
                };
                (st, Vec::new())
            },
            |(mut st, mut broken), &di| {
                let sl_col = sl_cols.get(di * nr..(di + 1) * nr).unwrap_or(&[]);
                let before = st.broken;
                // Stamps are unique per destination across ranges too.
                route_to(
                    ctx,
                    &mut st,
                    (start + di) as u32 + 1,
                    dests[di],
                    &cols[di * nsw..(di + 1) * nsw],
                    sl_col,
                );
                if st.broken != before {
                    broken.push(di);
                }
                (st, broken)
            },
        )
        .map(|(st, broken)| {
            let w = Walked {
                broken: st.broken,
                examples: st.examples,
                vl_mask: st.vl_mask,
                sl_mask: st.sl_mask,
                max_hops: st.max_hops,
            };
            (w, broken)
        })
        .reduce(
            || (Walked::default(), Vec::new()),
            |(a, mut x), (b, y)| {
                x.extend(y);
                (a.merge(b), x)
            },
        )
}

/// A dense number per SL that `sl_cols` holds, and SL 0 (the SL of a
/// source without a path-SL row); SLs above 15 are never walked.
fn dense_sls(sl_cols: &[u8]) -> ([u8; NUM_SLS], usize) {
    let mut seen = [false; 256];
    for &b in sl_cols {
        seen[b as usize] = true;
    }
    seen[0] = true;
    let mut dense = [0u8; NUM_SLS];
    let mut n = 0;
    for sl in 0..NUM_SLS {
        if seen[sl] {
            dense[sl] = n as u8;
            n += 1;
        }
    }
    (dense, n)
}
