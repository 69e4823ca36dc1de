//! The dependency summary on the wire, both ways; what comes in is checked
//! before anything is allocated for it.

use super::{Invalid, lid, port};
use crate::v1;
use fabric::verify::summary::{self as sm, DependencySummary, Leg, Runs, SummaryPort, Vertex};

pub fn summary_to_wire(s: &DependencySummary) -> v1::DependencySummary {
    let runs = |r: &Runs| r.0.iter().flat_map(|&(n, c)| [n, c]).collect();
    // Targets grouped by source and delta coded: most are small numbers,
    // one or two bytes each on the wire.
    let mut edges = s.edges.clone();
    edges.sort_unstable();
    edges.dedup();
    let mut edge_counts = vec![0u32; s.vertices.len()];
    let mut edge_targets = Vec::with_capacity(edges.len());
    let mut prev: Option<(u32, u32)> = None;
    for &(a, b) in &edges {
        if let Some(c) = edge_counts.get_mut(a as usize) {
            *c += 1;
        }
        edge_targets.push(match prev {
            Some((pa, pb)) if pa == a => b - pb,
            _ => b,
        });
        prev = Some((a, b));
    }
    v1::DependencySummary {
        host_lids: s.host_lids.iter().map(|&l| u32::from(l)).collect(),
        ports: s
            .ports
            .iter()
            .map(|p| v1::SummaryPort {
                router_guid: p.router_guid,
                port: u32::from(p.port),
                lid: u32::from(p.lid),
                arrive: runs(&p.arrive),
                depart: runs(&p.depart),
            })
            .collect(),
        channels: s.channels.clone(),
        vertices: s
            .vertices
            .iter()
            .map(|&v| {
                let (kind, index) = match v {
                    Vertex::Enter { port, .. } => (v1::summary_vertex::Kind::Enter, port),
                    Vertex::Leave { port, .. } => (v1::summary_vertex::Kind::Leave, port),
                    Vertex::Inner { channel, .. } => (v1::summary_vertex::Kind::Inner, channel),
                };
                v1::SummaryVertex {
                    kind: kind as i32,
                    index,
                    vl: u32::from(v.vl()),
                }
            })
            .collect(),
        edge_counts,
        edge_targets,
        chains: s
            .chains
            .iter()
            .map(|c| v1::SummaryChain {
                vertices: c.clone(),
            })
            .collect(),
        legs: s
            .legs
            .iter()
            .map(|l| v1::TransitLeg {
                from_port: l.from,
                to_port: l.to,
                vertices: l.path.clone().unwrap_or_default(),
                fault: l.path.as_ref().err().cloned().unwrap_or_default(),
            })
            .collect(),
    }
}

/// Checks and converts the dependency summary of `report`. Refused: sizes
/// over the summary's bounds (checked before anything is allocated for
/// them), LIDs and ports out of range, VL 15 or above, a router port the
/// report does not list, a CA LID that is not one of its end ports, and
/// anything the whole-fabric check could trip on (indices out of range,
/// walks that do not run where their port says).
pub fn summary_from_wire(
    w: &v1::DependencySummary,
    report: &v1::SubnetReport,
) -> Result<DependencySummary, Invalid> {
    check_sizes(w)?;
    let reported: std::collections::HashSet<u32> = report.end_ports.iter().map(|e| e.lid).collect();
    let host_lids = w
        .host_lids
        .iter()
        .map(|&l| {
            if !reported.contains(&l) {
                return Err(Invalid(format!(
                    "dependency summary: CA LID {l} is none of the report's end ports"
                )));
            }
            lid(l, "dependency summary: CA LID")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ports = ports_from_wire(w, report)?;
    let vertices = vertices_from_wire(w)?;
    let edges = edges_from_wire(w)?;
    let chains = w
        .chains
        .iter()
        .enumerate()
        .map(|(i, c)| chain(&c.vertices, &format!("chain {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let legs = w
        .legs
        .iter()
        .enumerate()
        .map(|(i, l)| {
            Ok(Leg {
                from: l.from_port,
                to: l.to_port,
                path: if l.vertices.is_empty() {
                    Err(l.fault.chars().take(sm::MAX_NAME).collect())
                } else {
                    Ok(chain(&l.vertices, &format!("transit leg {i}"))?)
                },
            })
        })
        .collect::<Result<Vec<_>, Invalid>>()?;
    let s = DependencySummary {
        host_lids,
        ports,
        channels: w.channels.clone(),
        vertices,
        edges,
        chains,
        legs,
    };
    s.validate()
        .map_err(|e| Invalid(format!("dependency summary: {e}")))?;
    Ok(s)
}

/// `n` items of `what` within `bound`, or why not.
fn over(what: &str, n: usize, bound: usize) -> Result<(), Invalid> {
    if n > bound {
        Err(Invalid(format!(
            "dependency summary: {n} {what}, the bound is {bound}"
        )))
    } else {
        Ok(())
    }
}

/// The sizes within the summary's bounds, checked before anything is
/// allocated for them.
fn check_sizes(w: &v1::DependencySummary) -> Result<(), Invalid> {
    over("CA LIDs", w.host_lids.len(), sm::MAX_HOSTS)?;
    over("router ports", w.ports.len(), sm::MAX_PORTS)?;
    over("channel names", w.channels.len(), sm::MAX_VERTICES)?;
    over("vertices", w.vertices.len(), sm::MAX_VERTICES)?;
    over("edges", w.edge_targets.len(), sm::MAX_EDGES)?;
    over("chains", w.chains.len(), sm::MAX_CHAINS)?;
    over("transit legs", w.legs.len(), sm::MAX_PORTS * sm::MAX_PORTS)?;
    if w.legs.len() != w.ports.len() * w.ports.len() {
        return Err(Invalid(format!(
            "dependency summary: {} transit legs for {} router ports",
            w.legs.len(),
            w.ports.len()
        )));
    }
    Ok(())
}

fn vl(v: u32, at: &str) -> Result<u8, Invalid> {
    if v <= u32::from(sm::MAX_DATA_VL) {
        Ok(v as u8)
    } else {
        Err(Invalid(format!(
            "dependency summary: {at}: VL {v} (data VLs are 0..=14)"
        )))
    }
}

fn runs(r: &[u32], at: &str) -> Result<Runs, Invalid> {
    over(&format!("{at} run entries"), r.len(), 2 * sm::MAX_RUNS)?;
    if !r.len().is_multiple_of(2) {
        return Err(Invalid(format!("dependency summary: {at}: half a run")));
    }
    Ok(Runs(r.chunks_exact(2).map(|c| (c[0], c[1])).collect()))
}

fn chain(c: &[u32], at: &str) -> Result<Vec<u32>, Invalid> {
    over(&format!("vertices on {at}"), c.len(), sm::MAX_CHAIN_LEN)?;
    Ok(c.to_vec())
}

/// The summary's router ports, each one the report lists.
fn ports_from_wire(
    w: &v1::DependencySummary,
    report: &v1::SubnetReport,
) -> Result<Vec<SummaryPort>, Invalid> {
    w
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let at = format!("router port {i}");
            let known = report.router_ports.iter().any(|r| {
                r.router_guid == p.router_guid && r.port == p.port && r.lid == p.lid
            });
            if !known {
                return Err(Invalid(format!(
                    "dependency summary: router {:#018x} port {} (LID {}) is not among the report's router ports",
                    p.router_guid, p.port, p.lid
                )));
            }
            Ok(SummaryPort {
                router_guid: p.router_guid,
                port: port(p.port, &format!("dependency summary: {at}"))?,
                lid: lid(p.lid, &format!("dependency summary: {at} LID"))?,
                arrive: runs(&p.arrive, &format!("{at} arrivals"))?,
                depart: runs(&p.depart, &format!("{at} departures"))?,
            })
        })
        .collect::<Result<Vec<_>, _>>()
}

fn vertices_from_wire(w: &v1::DependencySummary) -> Result<Vec<Vertex>, Invalid> {
    w.vertices
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let vl = vl(v.vl, &format!("vertex {i}"))?;
            Ok(match v1::summary_vertex::Kind::try_from(v.kind) {
                Ok(v1::summary_vertex::Kind::Enter) => Vertex::Enter { port: v.index, vl },
                Ok(v1::summary_vertex::Kind::Leave) => Vertex::Leave { port: v.index, vl },
                Ok(v1::summary_vertex::Kind::Inner) => Vertex::Inner {
                    channel: v.index,
                    vl,
                },
                Err(_) => {
                    return Err(Invalid(format!(
                        "dependency summary: vertex {i} of unknown kind {}",
                        v.kind
                    )));
                }
            })
        })
        .collect::<Result<Vec<_>, Invalid>>()
}

/// The edges, sent as per-vertex counts and delta-coded targets.
fn edges_from_wire(w: &v1::DependencySummary) -> Result<Vec<(u32, u32)>, Invalid> {
    if w.edge_counts.len() != w.vertices.len() {
        return Err(Invalid(format!(
            "dependency summary: edge counts for {} vertices of {}",
            w.edge_counts.len(),
            w.vertices.len()
        )));
    }
    let mut edges = Vec::with_capacity(w.edge_targets.len());
    let mut targets = w.edge_targets.iter();
    for (a, &n) in w.edge_counts.iter().enumerate() {
        let mut prev: Option<u32> = None;
        for _ in 0..n {
            let Some(&t) = targets.next() else {
                return Err(Invalid(
                    "dependency summary: the edge counts exceed the targets".into(),
                ));
            };
            let b = match prev {
                None => t,
                Some(p) => p.checked_add(t).ok_or_else(|| {
                    Invalid(format!(
                        "dependency summary: an edge from vertex {a} names no vertex"
                    ))
                })?,
            };
            edges.push((a as u32, b));
            prev = Some(b);
        }
    }
    if targets.next().is_some() {
        return Err(Invalid(
            "dependency summary: more edge targets than the counts say".into(),
        ));
    }
    Ok(edges)
}
