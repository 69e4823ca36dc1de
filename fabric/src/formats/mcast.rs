//! Multicast files: the groups (`ibfabric-mcast-groups.txt`) and the
//! forwarding tables in the form OpenSM dumps them (`opensm.mcfdbs`, what
//! `dump_mcast_routes` writes; `ibfabric-mfts.txt` in a table set).
//!
//! Groups, one per line, `#` starts a comment:
//!
//! ```text
//! # MLID  SL    members: port GUIDs, or "all" (every CA and router port)
//! 0xC000 sl=0 all
//! 0xC001 sl=3 0x0002c90300000101 0x0002c90300000202
//! ```
//!
//! The plan reserved trees follow (`ibfabric-mcast-tree.txt`): the SL and
//! VL multicast has to itself and the spanning tree, parents first, each
//! switch with its parent, the parent's port down and its own port up.
//! The OpenSM plugin builds the tree of every group members join from it.
//!
//! ```text
//! ibfabric-mcast-tree 1
//! sl 15
//! vl 7
//! switch 0x0002c90000000001 root
//! switch 0x0002c90000000002 parent 0x0002c90000000001 down 3 up 1
//! end
//! ```
//!
//! Forwarding tables, a block per switch that forwards some MLID:
//!
//! ```text
//! Switch 0x0002c90000000001
//! LID    : Out Port(s)
//! 0xC000 : 0x001  0x002
//! ```

use super::parse_hex_u64;
use crate::error::{Error, ParseError};
use crate::mcast::tree::SpanningTree;
use crate::mcast::{Group, MAX_MLID, MIN_MLID, Mfts, PortMask, TreePlan, all_members};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

fn perr(file: &Path, line: usize, cause: String) -> Error {
    Error::Parse(ParseError::new(file, line, cause))
}

fn parse_mlid(w: &str) -> Result<u16, String> {
    let v = parse_hex_u64(w).ok_or_else(|| format!("bad MLID '{w}' (hex, 0xC000-0xFFFE)"))?;
    if !(MIN_MLID as u64..=MAX_MLID as u64).contains(&v) {
        return Err(format!(
            "MLID {w} outside the multicast range 0xC000-0xFFFE"
        ));
    }
    Ok(v as u16)
}

/// Reads a groups file against `f`: members must be end ports of `f`.
pub fn parse_groups(f: &Fabric, text: &str, file: &Path) -> Result<Vec<Group>, Error> {
    let by_guid = f.port_guid_index();
    let mut groups = Vec::new();
    let mut mlids = HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut w = line.split_whitespace();
        let mlid = parse_mlid(w.next().unwrap_or("")).map_err(|c| perr(file, ln, c))?;
        if !mlids.insert(mlid) {
            return Err(perr(file, ln, format!("MLID 0x{mlid:04X} is listed twice")));
        }
        let slw = w.next().unwrap_or("");
        let sl = slw
            .strip_prefix("sl=")
            .and_then(|v| v.parse::<u8>().ok())
            .filter(|&s| s < 16)
            .ok_or_else(|| perr(file, ln, format!("expected 'sl=N' (0-15), got '{slw}'")))?;
        let mut members: Vec<Slot> = Vec::new();
        for m in w {
            if m == "all" {
                members.extend(all_members(f));
                continue;
            }
            let g = parse_hex_u64(m).ok_or_else(|| {
                perr(file, ln, format!("bad member '{m}' (a port GUID or 'all')"))
            })?;
            let s = *by_guid.get(&g).ok_or_else(|| {
                perr(
                    file,
                    ln,
                    format!("port GUID 0x{g:016x} is not in the topology"),
                )
            })?;
            if f.kind(f.node_of(s)) == NodeKind::Switch {
                return Err(perr(
                    file,
                    ln,
                    format!("port GUID 0x{g:016x} is a switch's: members are CA or router ports"),
                ));
            }
            members.push(s);
        }
        members.sort_unstable();
        members.dedup();
        if members.is_empty() {
            return Err(perr(file, ln, format!("group 0x{mlid:04X} has no members")));
        }
        groups.push(Group { mlid, sl, members });
    }
    Ok(groups)
}

/// Writes groups in the form [`parse_groups`] reads (`all` where a group
/// holds every end port).
pub fn write_groups(f: &Fabric, groups: &[Group]) -> String {
    let mut all = all_members(f);
    all.sort_unstable();
    let mut out = String::from("# MLID  SL  members (port GUIDs, or all)\n");
    for g in groups {
        let _ = write!(out, "0x{:04X} sl={}", g.mlid, g.sl);
        if !all.is_empty() && g.members == all {
            out.push_str(" all");
        } else {
            for &m in &g.members {
                let _ = write!(out, " 0x{:016x}", f.port_guid(m));
            }
        }
        out.push('\n');
    }
    out
}

/// Reads forwarding tables in OpenSM's `opensm.mcfdbs` form, or as
/// infiniband-diags print them from the switches (`ibroute -M`, or
/// `dump_mfts` for every switch), which is how a running fabric's trees
/// are read back.
pub fn parse_mfts(f: &Fabric, text: &str, file: &Path) -> Result<Mfts, Error> {
    if text.trim_start().starts_with("Multicast mlids") {
        return parse_ibroute(f, text, file);
    }
    let mut t = Mfts::default();
    let mut current: Option<u32> = None;
    let mut done: HashSet<u32> = HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("LID") {
            continue;
        }
        if let Some(g) = line.strip_prefix("Switch ") {
            let guid = parse_hex_u64(g.trim())
                .ok_or_else(|| perr(file, ln, format!("bad switch GUID '{}'", g.trim())))?;
            current = Some(new_switch(f, guid, &mut done).map_err(|c| perr(file, ln, c))?);
            continue;
        }
        let sw =
            current.ok_or_else(|| perr(file, ln, "an entry before any 'Switch' line".into()))?;
        let (m, ports) = line
            .split_once(':')
            .ok_or_else(|| perr(file, ln, format!("expected 'MLID : ports', got '{line}'")))?;
        let mlid = parse_mlid(m.trim()).map_err(|c| perr(file, ln, c))?;
        if t.ports(mlid, sw).is_some() {
            return Err(perr(
                file,
                ln,
                format!("MLID 0x{mlid:04X} is listed twice here"),
            ));
        }
        let np = f.num_ports(f.switches()[sw as usize]);
        let mut mask = PortMask::default();
        for p in ports.split_whitespace() {
            let v = parse_hex_u64(p)
                .filter(|&v| v <= np as u64)
                .ok_or_else(|| perr(file, ln, format!("bad port '{p}' (the switch has {np})")))?;
            mask.insert(v as u8);
        }
        if mask.is_empty() {
            return Err(perr(file, ln, format!("MLID 0x{mlid:04X} has no port")));
        }
        t.set(mlid, sw, mask);
    }
    Ok(t)
}

/// The switch index of a block's header, refused if it is no switch of
/// `f` or had a block already.
fn new_switch(f: &Fabric, guid: u64, done: &mut HashSet<u32>) -> Result<u32, String> {
    let sw = f
        .find_node_by_guid(guid)
        .and_then(|n| f.switch_index(n))
        .ok_or_else(|| format!("0x{guid:016x} is not a switch of the topology"))?;
    if !done.insert(sw) {
        return Err(format!("switch 0x{guid:016x} is listed twice"));
    }
    Ok(sw)
}

/// `ibroute -M` blocks: a header naming the switch by GUID, a `Ports:`
/// line whose digits give each port's column, then one line per MLID with
/// an `x` in the column of every port of its entry.
fn parse_ibroute(f: &Fabric, text: &str, file: &Path) -> Result<Mfts, Error> {
    let mut t = Mfts::default();
    let mut sw: Option<u32> = None;
    let mut cols: Vec<usize> = Vec::new();
    let mut done: HashSet<u32> = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let ln = i + 1;
        let trimmed = line.trim();
        if trimmed.starts_with("Multicast mlids") {
            let guid = trimmed
                .split_once(" guid ")
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(parse_hex_u64)
                .ok_or_else(|| perr(file, ln, "no 'guid 0x...' in the switch header".into()))?;
            sw = Some(new_switch(f, guid, &mut done).map_err(|c| perr(file, ln, c))?);
            cols.clear();
        } else if let Some(at) = line.find("Ports:") {
            // Each digit after "Ports:" is the ones digit of the next port.
            cols = line
                .char_indices()
                .skip_while(|&(k, _)| k < at + 6)
                .filter(|(_, c)| c.is_ascii_digit())
                .map(|(k, _)| k)
                .collect();
        } else if trimmed.starts_with("0x") || trimmed.starts_with("0X") {
            let s = sw.ok_or_else(|| perr(file, ln, "an entry before any switch header".into()))?;
            if cols.is_empty() {
                return Err(perr(file, ln, "an entry before the 'Ports:' line".into()));
            }
            let m = trimmed.split_whitespace().next().unwrap_or("");
            let mlid = parse_mlid(m).map_err(|c| perr(file, ln, c))?;
            let np = f.num_ports(f.switches()[s as usize]) as usize;
            let start = line.find(m).unwrap_or(0) + m.len();
            let mask = ibroute_mask(line, start, &cols, np).map_err(|c| perr(file, ln, c))?;
            if mask.is_empty() {
                return Err(perr(file, ln, format!("MLID 0x{mlid:04X} has no port")));
            }
            if t.ports(mlid, s).is_some() {
                return Err(perr(
                    file,
                    ln,
                    format!("MLID 0x{mlid:04X} is listed twice here"),
                ));
            }
            t.set(mlid, s, mask);
        }
        // "MLid" and "N valid mlids dumped" carry nothing.
    }
    Ok(t)
}

/// The ports marked `x` in `line` after byte `start`, by the columns of
/// the `Ports:` digits (byte offsets in the line, as `cols` are).
fn ibroute_mask(line: &str, start: usize, cols: &[usize], np: usize) -> Result<PortMask, String> {
    let mut mask = PortMask::default();
    for (k, c) in line[start..].char_indices().map(|(k, c)| (k + start, c)) {
        match c {
            ' ' => {}
            'x' => {
                let port = cols.iter().position(|&x| x == k).filter(|&p| p <= np);
                let port = port
                    .ok_or_else(|| format!("an 'x' at column {k} under no port of the switch"))?;
                mask.insert(port as u8);
            }
            other => return Err(format!("unexpected '{other}' in the port mask")),
        }
    }
    Ok(mask)
}

/// Writes forwarding tables as OpenSM's `dump_mcast_routes` does: switches
/// in node-GUID order, MLIDs ascending.
pub fn write_mfts(f: &Fabric, t: &Mfts) -> String {
    let mut per_switch: Vec<Vec<(u16, PortMask)>> = vec![Vec::new(); f.switches().len()];
    for (&mlid, e) in &t.entries {
        for &(sw, m) in e {
            if let Some(v) = per_switch.get_mut(sw as usize) {
                v.push((mlid, m));
            }
        }
    }
    let mut order: Vec<usize> = (0..per_switch.len()).collect();
    order.sort_by_key(|&i| f.guid(f.switches()[i]));
    let mut out = String::new();
    for i in order {
        if per_switch[i].is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "\nSwitch 0x{:016x}\nLID    : Out Port(s)\n",
            f.guid(f.switches()[i])
        );
        for (mlid, m) in &per_switch[i] {
            let _ = write!(out, "0x{mlid:04X} :");
            for p in m.iter() {
                let _ = write!(out, " 0x{p:03X} ");
            }
            out.push('\n');
        }
    }
    out
}

const TREE_HEADER: &str = "ibfabric-mcast-tree 1";

/// Writes a reserved trees' plan in the form [`parse_tree`] reads.
pub fn write_tree(f: &Fabric, plan: &TreePlan) -> String {
    let t = &plan.tree;
    let guid = |si: u32| f.guid(f.switches()[si as usize]);
    let mut out = format!(
        "# every multicast group's tree is the part of this spanning tree that joins\n\
         # its members' switches; every group on SL {}, which goes to VL {} alone\n\
         {TREE_HEADER}\nsl {}\nvl {}\n",
        plan.sl, plan.vl, plan.sl, plan.vl
    );
    for &v in &t.order {
        let p = t.parent[v as usize];
        if p == NONE {
            let _ = writeln!(out, "switch 0x{:016x} root", guid(v));
        } else {
            let s = t.down[v as usize];
            let _ = writeln!(
                out,
                "switch 0x{:016x} parent 0x{:016x} down {} up {}",
                guid(v),
                guid(p),
                f.port_of(s),
                f.port_of(f.remote(s))
            );
        }
    }
    out.push_str("end\n");
    out
}

/// Reads a plan against `f`: every switch once, its parent listed before
/// it, the ports a link of `f` between the two; an `end` line last (a
/// truncated file has none).
pub fn parse_tree(f: &Fabric, text: &str, file: &Path) -> Result<TreePlan, Error> {
    let n = f.switches().len();
    let mut parent = vec![NONE; n];
    let mut down = vec![NONE; n];
    let mut listed = vec![false; n];
    let mut order = Vec::new();
    let (mut sl, mut vl, mut root) = (None, None, None);
    let mut header = false;
    let mut ended = false;
    let mut last = 0;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        last = ln;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let e = |c: String| perr(file, ln, c);
        if ended {
            return Err(e("text after 'end'".into()));
        }
        if !header {
            if line != TREE_HEADER {
                return Err(e(format!("expected '{TREE_HEADER}', got '{line}'")));
            }
            header = true;
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |v: &str, max: u8| v.parse::<u8>().ok().filter(|&x| x <= max);
        match w.as_slice() {
            ["sl", v] if sl.is_none() => {
                sl = Some(num(v, 15).ok_or_else(|| e(format!("bad SL '{v}'")))?)
            }
            ["vl", v] if vl.is_none() => {
                vl = Some(num(v, 14).ok_or_else(|| e(format!("bad VL '{v}'")))?)
            }
            ["end"] => ended = true,
            ["switch", g, rest @ ..] => {
                let sw = switch_of(f, g).map_err(e)?;
                if listed[sw as usize] {
                    return Err(e(format!("switch {g} is listed twice")));
                }
                match rest {
                    ["root"] if root.is_none() => root = Some(sw),
                    ["parent", pg, "down", dp, "up", up] => {
                        let (p, s) = tree_link(f, &listed, (g, sw), pg, dp, up).map_err(e)?;
                        down[sw as usize] = s;
                        parent[sw as usize] = p;
                    }
                    _ => {
                        return Err(e(format!(
                            "expected 'root' or 'parent GUID down P up Q', got '{line}'"
                        )));
                    }
                }
                listed[sw as usize] = true;
                order.push(sw);
            }
            _ => return Err(e(format!("unexpected line '{line}'"))),
        }
    }
    let at_end = |c: &str| perr(file, last.max(1), c.to_string());
    if !ended {
        return Err(at_end("no 'end' line: the file is truncated"));
    }
    let (Some(sl), Some(vl), Some(root)) = (sl, vl, root) else {
        return Err(at_end("the plan needs 'sl', 'vl' and a root switch"));
    };
    Ok(TreePlan {
        tree: SpanningTree {
            root,
            parent,
            down,
            order,
        },
        sl,
        vl,
    })
}

/// A plan line's link from parent `pg` (already listed) port `dp` down to
/// `child` (its GUID text and switch index) port `up`: the parent's index
/// and the slot the link leaves it by, if `f` has that link.
fn tree_link(
    f: &Fabric,
    listed: &[bool],
    (g, sw): (&str, u32),
    pg: &str,
    dp: &str,
    up: &str,
) -> Result<(u32, Slot), String> {
    let p = switch_of(f, pg)?;
    if !listed[p as usize] {
        return Err(format!("parent {pg} is not listed before {g}"));
    }
    let pn = f.switches()[p as usize];
    let dp = dp
        .parse::<u8>()
        .ok()
        .filter(|&x| x > 0 && x <= f.num_ports(pn));
    let s = dp.map(|d| f.slot(pn, d)).filter(|&s| {
        let r = f.remote(s);
        r != NONE
            && f.node_of(r) == f.switches()[sw as usize]
            && up.parse::<u8>().ok() == Some(f.port_of(r))
    });
    let s = s.ok_or_else(|| format!("no link from {pg} port {dp:?} to {g} port {up}"))?;
    Ok((p, s))
}

fn switch_of(f: &Fabric, g: &str) -> Result<u32, String> {
    parse_hex_u64(g)
        .and_then(|v| f.find_node_by_guid(v))
        .and_then(|nd| f.switch_index(nd))
        .ok_or_else(|| format!("{g} is not a switch of the topology"))
}
