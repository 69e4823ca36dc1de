//! A verification or routing part on the wire and back.

use fabric::load::LoadSums;
use fabric::routing::shard::{RoutePart, RowsPart};
use fabric::verify::{BrokenPair, PairFault, Part};
use proto::v1;

pub fn part_to_wire(p: &Part, seconds: f64) -> v1::VerifyPartReply {
    v1::VerifyPartReply {
        start: p.start as u64,
        end: p.end as u64,
        edges: u64s_to_le(&p.edges),
        broken: p.broken,
        examples: p
            .examples
            .iter()
            .map(|e| v1::BrokenPairWire {
                src_lid: u32::from(e.src_lid),
                dst_lid: u32::from(e.dst_lid),
                fault: serde_json::to_string(&e.fault).unwrap_or_default(),
            })
            .collect(),
        vl_mask: u32::from(p.vl_mask),
        sl_mask: u32::from(p.sl_mask),
        max_hops: p.max_hops,
        seconds,
    }
}

/// Why a reply is not a part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    #[error("the edge bitset is {0} bytes, not whole 64-bit words")]
    Edges(usize),
    #[error("a broken pair names LID {0}, above 65535")]
    Lid(u32),
    #[error("a broken pair's fault is unreadable: {0}")]
    Fault(String),
    #[error("a VL or SL mask is above 16 bits")]
    Mask,
    #[error("the load sums are {0} bytes, not whole 64-bit words")]
    Load(usize),
}

/// 64-bit words as they travel: little-endian, back to back.
pub fn u64s_to_le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The words of `b`, None unless it holds whole words.
pub fn u64s_from_le(b: &[u8]) -> Option<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return None;
    }
    Some(
        b.chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
    )
}

pub fn part_from_wire(r: &v1::VerifyPartReply) -> Result<Part, PartError> {
    let edges = u64s_from_le(&r.edges).ok_or(PartError::Edges(r.edges.len()))?;
    let lid = |x: u32| u16::try_from(x).map_err(|_| PartError::Lid(x));
    let examples = r
        .examples
        .iter()
        .map(|e| {
            Ok(BrokenPair {
                src_lid: lid(e.src_lid)?,
                dst_lid: lid(e.dst_lid)?,
                fault: serde_json::from_str::<PairFault>(&e.fault)
                    .map_err(|x| PartError::Fault(x.to_string()))?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Part {
        start: r.start as usize,
        end: r.end as usize,
        edges,
        broken: r.broken,
        examples,
        vl_mask: u16::try_from(r.vl_mask).map_err(|_| PartError::Mask)?,
        sl_mask: u16::try_from(r.sl_mask).map_err(|_| PartError::Mask)?,
        max_hops: r.max_hops,
    })
}

pub fn route_part_to_wire(p: &RoutePart, seconds: f64) -> v1::RoutePartReply {
    v1::RoutePartReply {
        start: p.start as u64,
        end: p.end as u64,
        next: p.next.clone(),
        load: u64s_to_le(&p.load.per_slot),
        unrouted: p.load.unrouted,
        seconds,
        rows: Vec::new(),
    }
}

/// The part in `r`; the merge checks its sizes against the fabric.
pub fn route_part_from_wire(r: v1::RoutePartReply) -> Result<RoutePart, PartError> {
    let per_slot = u64s_from_le(&r.load).ok_or(PartError::Load(r.load.len()))?;
    Ok(RoutePart {
        start: r.start as usize,
        end: r.end as usize,
        next: r.next,
        load: LoadSums {
            per_slot,
            unrouted: r.unrouted,
        },
    })
}

pub fn rows_part_to_wire(p: &RowsPart, seconds: f64) -> v1::RoutePartReply {
    v1::RoutePartReply {
        start: p.start as u64,
        end: p.end as u64,
        rows: p.rows.clone(),
        seconds,
        ..Default::default()
    }
}

pub fn rows_part_from_wire(r: v1::RoutePartReply) -> RowsPart {
    RowsPart {
        start: r.start as usize,
        end: r.end as usize,
        rows: r.rows,
    }
}
