//! A verification cut into parts, what workers compute: the walks toward
//! a range of destinations ([`verify_part`], or [`verify_part_columns`]
//! from the columns those walks read), and the merge of the parts into the
//! report one process gives ([`merge_parts`]: dependencies united, counts
//! summed, examples the first by LID, the cycle searched once).

use super::*;

/// One shard of a verification: the walks toward a range of destinations
/// (indices into `f.end_lids()`), what a worker computes and sends back.
/// [`merge_parts`] of parts that cover every destination once gives the
/// report [`verify`] gives, whatever the ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub start: usize,
    pub end: usize,
    /// The dependencies found, as the verifier's edge bitset.
    pub edges: Vec<u64>,
    pub broken: u64,
    pub examples: Vec<BrokenPair>,
    pub vl_mask: u16,
    pub sl_mask: u16,
    pub max_hops: u32,
}

/// Why parts could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("the parts cover destinations {covered:?} of 0..{total}: each must be covered once")]
    Coverage {
        covered: Vec<(usize, usize)>,
        total: usize,
    },
    #[error(
        "part {start}..{end} comes with {lft} LFT and {sl} path-SL column bytes; it needs {want_lft} and {want_sl}"
    )]
    Columns {
        start: usize,
        end: usize,
        lft: usize,
        sl: usize,
        want_lft: usize,
        want_sl: usize,
    },
    #[error("part {start}..{end} carries {got} bitset words, the fabric and tables need {want}")]
    Shape {
        start: usize,
        end: usize,
        got: usize,
        want: usize,
    },
}

/// Verifies the walks toward destination LIDs `range` only: one shard.
pub fn verify_part(f: &Fabric, routing: &Routing, range: std::ops::Range<usize>) -> Part {
    let n = f.end_lids().len();
    let range = range.start.min(n)..range.end.min(n);
    let ctx = context(f, routing, false);
    let w = walk_range(&ctx, range.clone());
    part_of(&ctx, range, w)
}

/// A part from the dependencies the walks set in `ctx` and what they found.
fn part_of(ctx: &Ctx, range: std::ops::Range<usize>, w: Walked) -> Part {
    Part {
        start: range.start,
        end: range.end,
        edges: ctx
            .edges
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect(),
        broken: w.broken,
        examples: w.examples,
        vl_mask: w.vl_mask,
        sl_mask: w.sl_mask,
        max_hops: w.max_hops,
    }
}

/// [`verify_part`] from the part's columns ([`part_columns`]) rather than
/// `routing`'s LFTs and path-SL rows, which may then be empty: what a
/// worker holding only the fabric, the SL-to-VL tables and the path-SL
/// row map computes.
pub fn verify_part_columns(
    f: &Fabric,
    routing: &Routing,
    range: std::ops::Range<usize>,
    cols: &[u8],
    sl_cols: &[u8],
) -> Result<Part, MergeError> {
    let n = f.end_lids().len();
    let nsw = f.switches().len();
    let ctx = context(f, routing, false);
    let k = range.end.saturating_sub(range.start);
    if range.start > range.end
        || range.end > n
        || cols.len() != k * nsw
        || sl_cols.len() != k * ctx.sl_rows
    {
        return Err(MergeError::Columns {
            start: range.start,
            end: range.end,
            lft: cols.len(),
            sl: sl_cols.len(),
            want_lft: k * nsw,
            want_sl: k * ctx.sl_rows,
        });
    }
    let w = walk_columns(&ctx, range.clone(), cols, sl_cols);
    Ok(part_of(&ctx, range, w))
}

/// The report of the whole verification from its parts: dependencies
/// united, counts summed, the cycle searched once in the united graph.
pub fn merge_parts(f: &Fabric, routing: &Routing, parts: &[Part]) -> Result<Report, MergeError> {
    let total = f.end_lids().len();
    let mut covered: Vec<(usize, usize)> = parts.iter().map(|p| (p.start, p.end)).collect();
    covered.sort_unstable();
    let mut at = 0;
    for &(a, b) in &covered {
        if a != at || b < a {
            return Err(MergeError::Coverage { covered, total });
        }
        at = b;
    }
    if at != total {
        return Err(MergeError::Coverage { covered, total });
    }
    let ctx = context(f, routing, false);
    let want = ctx.edges.len();
    let mut walked = Walked::default();
    for p in parts {
        if p.edges.len() != want {
            return Err(MergeError::Shape {
                start: p.start,
                end: p.end,
                got: p.edges.len(),
                want,
            });
        }
        for (w, &x) in ctx.edges.iter().zip(&p.edges) {
            w.fetch_or(x, Ordering::Relaxed);
        }
        walked = walked.merge(Walked {
            broken: p.broken,
            examples: p.examples.clone(),
            vl_mask: p.vl_mask,
            sl_mask: p.sl_mask,
            max_hops: p.max_hops,
        });
    }
    Ok(finish(&ctx, walked, false).0)
}
