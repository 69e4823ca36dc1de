//! The topology grammar `ibnetdiscover` prints and `ibsim` reads.
//!
//! ```text
//! switchguid=0x2000000000009(2000000000009)
//! Switch  5 "S-0002000000000009"   # "s2_2" base port 0 lid 10 lmc 0
//! [1]     "S-0002000000000003"[2]  # "s0_2" lid 4 4xQDR
//! [5]     "H-0001000000000090"[1](1000000000091)  # "h2_2_0" lid 18 4xQDR
//!
//! caguid=0x1000000000090
//! Ca      1 "H-0001000000000090"   # "h2_2_0"
//! [1](1000000000091)  "S-0002000000000009"[5]  # lid 18 lmc 0 "s2_2" lid 10 4xQDR
//! ```
//! The quoted word after the node type is the node's id (what port lines
//! name); the quoted word at the start of a header comment, when present, is
//! the node description, else the id is. Existing LIDs come from a switch
//! header's `lid N` and from a CA/router port line comment that starts with
//! `lid N` (then usually `lmc M`); other `lid` words name the remote side and
//! are ignored. Nodes without a GUID line get `0x0003000000000000 + ordinal`.
//!
//! Refused, with the line, because the tables would be wrong: a LID that is
//! not a number or outside 1..=0xBFFF, an LMC other than 0 (one LID per port
//! is modelled), a LID given twice, LID 0 (unassigned) in a file that gives
//! other ports LIDs, a node GUID used twice, a port GUID shared by two
//! addressable ports (switches answer to their node GUID) or stated
//! differently by the two ends of a link.

use crate::error::{Error, ParseError};
use crate::model::{Fabric, FabricBuilder, MAX_UNICAST_LID, NONE, NodeId, NodeKind};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

struct PendingLink {
    line: usize,
    node: NodeId,
    port: u8,
    remote_id: String,
    remote_port: u8,
    remote_guid: Option<u64>,
}

/// Splits `"quoted" rest` into (quoted, rest).
fn take_quoted(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let s = s.strip_prefix('"')?;
    let end = s.find('"')?;
    Some((&s[..end], &s[end + 1..]))
}

/// Splits `[N]rest` into (N, rest).
fn take_port(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start().strip_prefix('[')?;
    let end = s.find(']')?;
    Some((&s[..end], &s[end + 1..]))
}

/// Splits `(hex)rest` into (hex, rest) when the text starts with '('.
fn is_diag_error(line: &str) -> bool {
    line.starts_with("ibwarn:")
        || line.starts_with("ibpanic:")
        || line.starts_with("ibnetdiscover:")
        || line.split_once(';').is_some_and(|(head, _)| {
            head.ends_with(|c: char| c.is_ascii_digit()) && head.contains(".c:")
        })
}

fn take_paren(s: &str) -> (Option<&str>, &str) {
    if let Some(r) = s.strip_prefix('(') {
        if let Some(end) = r.find(')') {
            return (Some(&r[..end]), &r[end + 1..]);
        }
    }
    (None, s)
}

/// The LID at `words[at]` (the word after `lid`) and the LMC after it (0
/// when not given). An LMC above 0 is refused unless `allow_lmc`: routing
/// and verification read one LID per port, and a port with 2^LMC LIDs owns
/// LIDs they would hand to other ports.
fn lid_at(words: &[&str], at: usize, allow_lmc: bool) -> Result<(u16, u8), String> {
    let w = words
        .get(at)
        .ok_or_else(|| "'lid' without a value".to_string())?;
    let lid: u64 = w
        .parse()
        .map_err(|_| format!("bad LID '{w}' (expected a decimal number)"))?;
    if lid > MAX_UNICAST_LID as u64 {
        return Err(format!(
            "LID {lid} is outside the unicast range 1..={MAX_UNICAST_LID}"
        ));
    }
    let mut lmc = 0;
    if words.get(at + 1) == Some(&"lmc") {
        match words.get(at + 2).map(|m| m.parse::<u8>()) {
            Some(Ok(0)) => {}
            Some(Ok(m)) if m <= 7 && allow_lmc => lmc = m,
            Some(Ok(m)) if m <= 7 => {
                return Err(format!(
                    "LMC {m}: the port has {} LIDs, and this command reads one LID per port \
                     (`ibfabric info`, `route` and `verify` read every LID)",
                    1u32 << m
                ));
            }
            _ => return Err("bad LMC after the LID".to_string()),
        }
    }
    if lmc > 0 && !lid.is_multiple_of(1 << lmc) {
        return Err(format!(
            "LID {lid} with LMC {lmc} is not a multiple of {}: a port's LIDs start aligned",
            1u32 << lmc
        ));
    }
    if lid + (1 << lmc) - 1 > MAX_UNICAST_LID as u64 {
        return Err(format!(
            "LIDs {lid}..={} (LMC {lmc}) reach past the unicast range",
            lid + (1 << lmc) - 1
        ));
    }
    Ok((lid as u16, lmc))
}

/// Parses ibnetdiscover text; `file` is only used in error messages.
/// A port with LMC above 0 is refused (one LID per port).
pub fn parse(text: &str, file: &Path) -> Result<Fabric, Error> {
    parse_as(text, file, false)
}

/// [`parse`], keeping ports' LMC: for the readers that count every LID
/// of a port (`info`, and `route` and `verify`, whose engines route and
/// whose verifier walks every LID; an engine that routes one LID per port
/// is refused by name, `routing::check_lmc`).
pub fn parse_with_lmc(text: &str, file: &Path) -> Result<Fabric, Error> {
    parse_as(text, file, true)
}

/// [`read`], keeping ports' LMC ([`parse_with_lmc`]).
pub fn read_with_lmc(path: &Path) -> Result<Fabric, Error> {
    let text = super::read_file(path)?;
    parse_with_lmc(&text, path)
}

fn parse_as(text: &str, file: &Path, allow_lmc: bool) -> Result<Fabric, Error> {
    let mut p = Parser::new(file);
    p.allow_lmc = allow_lmc;
    // Editors on some systems save a byte-order mark in front.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        p.line(i + 1, raw)?;
    }
    p.link()?;
    p.check_lids()?;
    p.check_port_guids()?;
    p.b.build().map_err(|e| Error::Model {
        file: file.to_path_buf(),
        source: e,
    })
}

/// The parse so far: the nodes and ports built, the links waiting for
/// their far end, and what the checks of the whole file need (the line
/// where each GUID, LID and port GUID was stated).
struct Parser<'f> {
    file: &'f Path,
    b: FabricBuilder,
    ids: HashMap<String, NodeId>,
    node_line: Vec<usize>,
    id_of: Vec<String>,
    links: Vec<PendingLink>,
    pending_guid: Option<u64>,
    current: Option<NodeId>,
    seen_ports: Vec<bool>,
    auto_guid: u64,
    // The builder finds duplicate GUIDs and LIDs only for the whole file;
    // found here, they get the line of their second use.
    guid_line: HashMap<u64, usize>,
    lid_line: HashMap<u16, usize>,
    allow_lmc: bool,
    // The first explicit LID 0 and the first real LID: LID 0 is a port the
    // subnet manager has not configured, fine in a subnet without one (all
    // LIDs assigned here) but not beside assigned LIDs, where the LID given
    // to it here would be one the port does not have.
    first_zero_lid: Option<usize>,
    first_lid: Option<usize>,
    // Port GUIDs stated in the file, with their line: a CA's own port line
    // and the switch line at the other end of its link must agree.
    stated_guid: HashMap<(NodeId, u8), (u64, usize)>,
}

impl<'f> Parser<'f> {
    fn new(file: &'f Path) -> Self {
        Self {
            file,
            b: FabricBuilder::new(),
            ids: HashMap::new(),
            node_line: Vec::new(),
            id_of: Vec::new(),
            links: Vec::new(),
            pending_guid: None,
            current: None,
            seen_ports: Vec::new(),
            auto_guid: 0x0003_0000_0000_0000u64,
            guid_line: HashMap::new(),
            lid_line: HashMap::new(),
            allow_lmc: false,
            first_zero_lid: None,
            first_lid: None,
            stated_guid: HashMap::new(),
        }
    }

    fn err(&self, line: usize, cause: String) -> Error {
        Error::Parse(ParseError::new(self.file, line, cause))
    }

    fn claim_lid(&mut self, lid: u16, ln: usize) -> Result<(), Error> {
        match self.lid_line.insert(lid, ln) {
            Some(first) => Err(self.err(
                ln,
                format!("LID {lid} is assigned twice (first on line {first})"),
            )),
            None => Ok(()),
        }
    }

    /// One line of the file.
    fn line(&mut self, ln: usize, raw: &str) -> Result<(), Error> {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        // `ibnetdiscover -g` groups nodes under chassis headers; the nodes
        // that follow are what we model.
        if line == "Non-Chassis Nodes"
            || line.starts_with("Hostname:")
            || (line.starts_with("Chassis ") && !line.contains('"'))
        {
            return Ok(());
        }
        // The tools' error messages (`src/query_smp.c:195; ...`, `ibwarn:`)
        // land here when stderr went into the file: a MAD went unanswered,
        // so the discovery may be incomplete.
        if is_diag_error(line) {
            return Err(self.err(
                ln,
                format!(
                    "an error message of ibnetdiscover ('{}'): the discovery may be incomplete; \
                     run it again and keep stderr out of the topology file",
                    line.chars().take(80).collect::<String>()
                ),
            ));
        }
        if let Some((key, value)) = line.split_once('=') {
            if !key.contains(char::is_whitespace) && !key.starts_with('[') {
                return self.assignment(ln, key, value);
            }
        }
        let (body, comment) = match line.find('#') {
            Some(p) => (&line[..p], Some(line[p + 1..].trim())),
            None => (line, None),
        };
        if body.trim_start().starts_with('[') {
            self.port_line(ln, body, comment)
        } else {
            self.node_header(ln, body, comment)
        }
    }

    /// `key=value`: a GUID for the next node header; vendid, devid,
    /// sysimgguid and the like carry nothing we model.
    fn assignment(&mut self, ln: usize, key: &str, value: &str) -> Result<(), Error> {
        if let "switchguid" | "caguid" | "rtguid" = key {
            // `-g` may follow with "\t# <chassis> Spine 1 Chip 1".
            let v = value
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()
                .unwrap_or("");
            let g = super::parse_hex_u64(v)
                .ok_or_else(|| self.err(ln, format!("bad GUID '{value}' in {key}")))?;
            self.pending_guid = Some(g);
        }
        Ok(())
    }

    /// `[N](guid) "remote"[M](guid)  # comment`: a port of the current
    /// node and its link.
    fn port_line(&mut self, ln: usize, body: &str, comment: Option<&str>) -> Result<(), Error> {
        let err = |cause: String| self.err(ln, cause);
        let node = self
            .current
            .ok_or_else(|| err("port line before any node header".into()))?;
        let (pstr, rest) =
            take_port(body).ok_or_else(|| err("malformed local port '[N]'".into()))?;
        let port: u8 = pstr
            .trim()
            .parse()
            .map_err(|_| err(format!("bad port number '{pstr}'")))?;
        if port == 0 || port > self.b.num_ports(node) {
            return Err(err(format!(
                "port {port} out of range 1..={} for this node",
                self.b.num_ports(node)
            )));
        }
        if std::mem::replace(&mut self.seen_ports[port as usize], true) {
            return Err(self.err(ln, format!("port {port} listed twice for this node")));
        }
        let (local_guid, mut rest) = take_paren(rest);
        if let Some(g) = local_guid {
            let g = super::parse_hex_u64(g)
                .ok_or_else(|| self.err(ln, format!("bad port GUID '({g})'")))?;
            self.b
                .set_port_guid(node, port, g)
                .map_err(|e| self.err(ln, e.to_string()))?;
            self.stated_guid.insert((node, port), (g, ln));
        }
        let err = |cause: String| self.err(ln, cause);
        // ibnetdiscover may print "[ext N]" after the local port.
        if rest.trim_start().starts_with("[ext") {
            if let Some((_, r)) = take_port(rest) {
                rest = r;
            }
        }
        let (rid, rest) =
            take_quoted(rest).ok_or_else(|| err("expected the remote node id in quotes".into()))?;
        let (rport, rest) =
            take_port(rest).ok_or_else(|| err("expected the remote port '[N]'".into()))?;
        let remote_port: u8 = rport
            .trim()
            .parse()
            .map_err(|_| err(format!("bad remote port number '{rport}'")))?;
        // ... and "[ext N]" after the remote port.
        let rest = match rest.trim_start().starts_with("[ext") {
            true => take_port(rest).map(|(_, r)| r).unwrap_or(rest),
            false => rest,
        };
        let (rguid, _) = take_paren(rest.trim_start());
        let remote_guid = match rguid {
            Some(g) => Some(
                super::parse_hex_u64(g)
                    .ok_or_else(|| err(format!("bad remote port GUID '({g})'")))?,
            ),
            None => None,
        };
        if self.b.kind(node) != NodeKind::Switch {
            self.ca_port_lid(ln, node, port, comment)?;
        }
        self.links.push(PendingLink {
            line: ln,
            node,
            port,
            remote_id: rid.to_string(),
            remote_port,
            remote_guid,
        });
        Ok(())
    }

    /// A CA's or router's port LID, from the port line's `# lid N` comment.
    fn ca_port_lid(
        &mut self,
        ln: usize,
        node: NodeId,
        port: u8,
        comment: Option<&str>,
    ) -> Result<(), Error> {
        let Some(c) = comment else { return Ok(()) };
        let words: Vec<&str> = c.split_whitespace().collect();
        if words.first() != Some(&"lid") {
            return Ok(());
        }
        let (lid, lmc) = lid_at(&words, 1, self.allow_lmc).map_err(|e| self.err(ln, e))?;
        if lid == 0 {
            self.first_zero_lid.get_or_insert(ln);
            return Ok(());
        }
        self.b
            .set_lid(node, port, lid)
            .and_then(|()| self.b.set_lmc(node, port, lmc))
            .map_err(|e| self.err(ln, e.to_string()))?;
        for l in lid..=lid + ((1u16 << lmc) - 1) {
            self.claim_lid(l, ln)?;
        }
        self.first_lid.get_or_insert(ln);
        Ok(())
    }

    /// Node header: `<Type> <nports> "<id>" [# comment]`.
    fn node_header(&mut self, ln: usize, body: &str, comment: Option<&str>) -> Result<(), Error> {
        let err = |cause: String| self.err(ln, cause);
        let mut parts = body.split_whitespace();
        let kind = match parts.next() {
            Some("Switch") => NodeKind::Switch,
            Some("Ca") | Some("Hca") => NodeKind::Ca,
            Some("Rt") => NodeKind::Router,
            Some(w) => return Err(err(format!("unknown line starting with '{w}'"))),
            None => return Ok(()),
        };
        let nstr = parts
            .next()
            .ok_or_else(|| err("missing port count".into()))?;
        let nports: u32 = nstr
            .parse()
            .map_err(|_| err(format!("bad port count '{nstr}'")))?;
        if nports == 0 || nports > 254 {
            return Err(err(format!("port count {nports} out of range 1..=254")));
        }
        let (id, _) = body
            .find('"')
            .and_then(|q| take_quoted(&body[q..]))
            .ok_or_else(|| err("expected the node id in quotes".into()))?;
        if id.is_empty() {
            return Err(err("empty node id".into()));
        }
        let (desc, lid) = match comment {
            Some(c) => {
                let (d, rest) = match take_quoted(c) {
                    Some((d, r)) => (d.to_string(), r),
                    None => (id.to_string(), c),
                };
                let words: Vec<&str> = rest.split_whitespace().collect();
                let lid = match words.iter().position(|w| *w == "lid") {
                    Some(i) if kind == NodeKind::Switch => {
                        Some(lid_at(&words, i + 1, self.allow_lmc).map_err(err)?)
                    }
                    _ => None,
                };
                (d, lid)
            }
            None => (id.to_string(), None),
        };
        let guid = match self.pending_guid.take() {
            Some(g) => g,
            None => {
                self.auto_guid += 1;
                self.auto_guid
            }
        };
        if let Some(first) = self.guid_line.insert(guid, ln) {
            return Err(self.err(
                ln,
                format!("GUID 0x{guid:016x} is used twice (first on line {first})"),
            ));
        }
        let node = self.b.add_node(kind, guid, desc, nports as u8);
        match lid {
            Some((0, _)) => {
                self.first_zero_lid.get_or_insert(ln);
            }
            Some((l, lmc)) => {
                self.b
                    .set_lid(node, 0, l)
                    .and_then(|()| self.b.set_lmc(node, 0, lmc))
                    .map_err(|e| self.err(ln, e.to_string()))?;
                for x in l..=l + ((1u16 << lmc) - 1) {
                    self.claim_lid(x, ln)?;
                }
                self.first_lid.get_or_insert(ln);
            }
            None => {}
        }
        if self.ids.insert(id.to_string(), node).is_some() {
            return Err(self.err(ln, format!("node id \"{id}\" defined twice")));
        }
        self.node_line.push(ln);
        self.id_of.push(id.to_string());
        self.seen_ports = vec![false; nports as usize + 1];
        self.current = Some(node);
        Ok(())
    }

    /// Connects every port line's link to its far end, now that every
    /// node is known; a port GUID stated at both ends must agree.
    fn link(&mut self) -> Result<(), Error> {
        for l in std::mem::take(&mut self.links) {
            let rnode = *self.ids.get(&l.remote_id).ok_or_else(|| {
                self.err(
                    l.line,
                    format!("link to undefined node \"{}\"", l.remote_id),
                )
            })?;
            self.b
                .connect(l.node, l.port, rnode, l.remote_port)
                .map_err(|e| self.err(l.line, e.to_string()))?;
            let Some(g) = l.remote_guid else { continue };
            if self.b.kind(rnode) == NodeKind::Switch {
                continue;
            }
            match self.stated_guid.get(&(rnode, l.remote_port)) {
                Some(&(before, at)) if before != g => {
                    return Err(self.err(
                        l.line,
                        format!(
                            "port GUID 0x{g:016x} for \"{}\"[{}] contradicts 0x{before:016x} on line {at}",
                            l.remote_id, l.remote_port
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    self.b
                        .set_port_guid(rnode, l.remote_port, g)
                        .map_err(|e| self.err(l.line, e.to_string()))?;
                    self.stated_guid.insert((rnode, l.remote_port), (g, l.line));
                }
            }
        }
        Ok(())
    }

    fn check_lids(&self) -> Result<(), Error> {
        if let (Some(zero), Some(set)) = (self.first_zero_lid, self.first_lid) {
            return Err(self.err(
                zero,
                format!(
                    "LID 0 (no LID assigned) beside assigned LIDs (line {set}): ibfabric would give this port a LID it does not have; rediscover once the subnet manager has configured every port, or give no LIDs at all"
                ),
            ));
        }
        Ok(())
    }

    /// Readers find a port's tables by its GUID: two ports with one GUID
    /// would get each other's. Checked here for the line of the second.
    fn check_port_guids(&self) -> Result<(), Error> {
        let mut port_lines: Vec<(usize, u64, NodeId, u8)> = Vec::new();
        for node in 0..self.b.num_nodes() as NodeId {
            for (port, guid) in self.b.addressable_ports(node) {
                let line = self
                    .stated_guid
                    .get(&(node, port))
                    .map_or(self.node_line[node as usize], |&(_, l)| l);
                port_lines.push((line, guid, node, port));
            }
        }
        port_lines.sort_unstable();
        let mut port_owner: HashMap<u64, (usize, NodeId, u8)> = HashMap::new();
        for &(line, guid, node, port) in &port_lines {
            if let Some(&(first, n0, p0)) = port_owner.get(&guid) {
                let name = |n: NodeId, p: u8| match self.b.kind(n) {
                    NodeKind::Switch => format!("switch \"{}\"", self.id_of[n as usize]),
                    _ => format!("\"{}\"[{p}]", self.id_of[n as usize]),
                };
                return Err(self.err(
                    line,
                    format!(
                        "port GUID 0x{guid:016x} of {} is already the port GUID of {} (line {first})",
                        name(node, port),
                        name(n0, p0)
                    ),
                ));
            }
            port_owner.insert(guid, (line, node, port));
        }
        Ok(())
    }
}

/// Reads and parses a topology file.
pub fn read(path: &Path) -> Result<Fabric, Error> {
    let text = super::read_file(path)?;
    parse(&text, path)
}

/// Node ids for writing: the description when it is safe for ibsim (no
/// quote, '#' or '@', unique, short, not the fallback id of any node), else
/// the ibnetdiscover-style `S-<guid>`.
fn node_ids(f: &Fabric) -> Vec<String> {
    let mut count: HashMap<&str, u32> = HashMap::new();
    for n in 0..f.num_nodes() as NodeId {
        *count.entry(f.desc(n)).or_default() += 1;
    }
    let fallback: Vec<String> = (0..f.num_nodes() as NodeId)
        .map(|n| {
            let p = match f.kind(n) {
                NodeKind::Switch => "S",
                NodeKind::Ca => "H",
                NodeKind::Router => "R",
            };
            format!("{p}-{:016x}", f.guid(n))
        })
        .collect();
    // A description spelling another node's fallback id would give two
    // nodes one id.
    let reserved: HashSet<&str> = fallback.iter().map(String::as_str).collect();
    (0..f.num_nodes() as NodeId)
        .zip(fallback.iter())
        .map(|(n, fb)| {
            let d = f.desc(n);
            let safe = !d.is_empty()
                && d.len() <= 64
                && count.get(d) == Some(&1)
                && !reserved.contains(d)
                && !d.contains(['"', '#', '@', '[', ']', '(', ')'])
                && !d.chars().any(char::is_whitespace);
            if safe { d.to_string() } else { fb.clone() }
        })
        .collect()
}

/// Writes the fabric in ibnetdiscover grammar (loadable by ibsim), with the
/// LIDs of the model in the comments so that a re-read keeps them.
pub fn write(f: &Fabric) -> String {
    let ids = node_ids(f);
    let mut out = String::with_capacity(f.num_slots() * 64);
    for n in 0..f.num_nodes() as NodeId {
        let kind = f.kind(n);
        let (gkey, tname) = match kind {
            NodeKind::Switch => ("switchguid", "Switch"),
            NodeKind::Ca => ("caguid", "Ca"),
            NodeKind::Router => ("rtguid", "Rt"),
        };
        let desc = f.desc(n).replace('"', "'");
        let _ = writeln!(out, "{gkey}=0x{:016x}", f.guid(n));
        if kind == NodeKind::Switch {
            let _ = writeln!(
                out,
                "{tname}\t{} \"{}\"\t\t# \"{desc}\" base port 0 lid {} lmc {}",
                f.num_ports(n),
                ids[n as usize],
                f.switch_lid(n),
                f.lmc(f.slot(n, 0))
            );
        } else {
            let _ = writeln!(
                out,
                "{tname}\t{} \"{}\"\t\t# \"{desc}\"",
                f.num_ports(n),
                ids[n as usize]
            );
        }
        for s in f.port_slots(n) {
            let r = f.remote(s);
            if r == NONE {
                continue;
            }
            let rn = f.node_of(r);
            let rport = f.port_of(r);
            let rdesc = f.desc(rn).replace('"', "'");
            let rguid = if f.kind(rn) == NodeKind::Switch {
                String::new()
            } else {
                format!("({:x})", f.port_guid(r))
            };
            if kind == NodeKind::Switch {
                let _ = writeln!(
                    out,
                    "[{}]\t\"{}\"[{rport}]{rguid}\t\t# \"{rdesc}\" lid {} 4xQDR",
                    f.port_of(s),
                    ids[rn as usize],
                    f.lid_of_slot(r)
                );
            } else {
                let _ = writeln!(
                    out,
                    "[{}]({:x})\t\"{}\"[{rport}]{rguid}\t\t# lid {} lmc {} \"{rdesc}\" lid {} 4xQDR",
                    f.port_of(s),
                    f.port_guid(s),
                    ids[rn as usize],
                    f.lid_of_slot(s),
                    f.lmc(s),
                    f.lid_of_slot(r)
                );
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        parse(text, Path::new("t.net"))
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn a_guid_used_twice_is_refused_at_its_second_line() {
        let text = "switchguid=0x10\nSwitch 1 \"a\"\nswitchguid=0x10\nSwitch 1 \"b\"\n";
        assert_eq!(
            refused(text),
            "t.net:4: GUID 0x0000000000000010 is used twice (first on line 2)"
        );
    }

    #[test]
    fn a_lid_assigned_twice_is_refused_at_its_second_line() {
        let switches = "\
Switch 2 \"a\"  # \"a\" base port 0 lid 7 lmc 0
[1] \"h\"[1]
Switch 1 \"b\"  # \"b\" base port 0 lid 7 lmc 0
Ca 1 \"h\"
[1] \"a\"[1]  # lid 3 lmc 0
";
        assert_eq!(
            refused(switches),
            "t.net:3: LID 7 is assigned twice (first on line 1)"
        );
        let ca = "\
Switch 2 \"a\"  # \"a\" base port 0 lid 3 lmc 0
[1] \"h\"[1]
Ca 1 \"h\"
[1] \"a\"[1]  # lid 3 lmc 0
";
        assert_eq!(
            refused(ca),
            "t.net:4: LID 3 is assigned twice (first on line 1)"
        );
    }

    /// One switch, two CAs; `{g0}`, `{g1}` their port GUIDs, `{l0}`,
    /// `{l1}` the CA port comments, `{sw}` the switch header's comment.
    fn two_cas(g0: &str, g1: &str, l0: &str, l1: &str, sw: &str) -> String {
        format!(
            "\
switchguid=0x20
Switch 2 \"s\"  # \"s\" {sw}
[1] \"h0\"[1]
[2] \"h1\"[1]
caguid=0x10
Ca 1 \"h0\"
[1]({g0}) \"s\"[1]  # {l0}
caguid=0x30
Ca 1 \"h1\"
[1]({g1}) \"s\"[2]  # {l1}
"
        )
    }

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_are_read() {
        let text = two_cas("11", "31", "lid 2 lmc 0", "lid 3 lmc 0", "lid 1 lmc 0");
        let plain = parse(&text, Path::new("t.net")).expect("plain");
        let dos = format!("\u{feff}{}", text.replace('\n', "\r\n"));
        let f = parse(&dos, Path::new("t.net")).expect("BOM and CRLF");
        assert_eq!(f.num_nodes(), plain.num_nodes());
        assert_eq!(f.num_links(), plain.num_links());
        // A mark anywhere else is still an unknown line.
        assert!(refused(&format!("{text}\u{feff}x\n")).contains("unknown line"));
    }

    #[test]
    fn two_cas_with_one_port_guid_are_refused_at_the_second() {
        let text = two_cas("11", "11", "lid 2 lmc 0", "lid 3 lmc 0", "lid 1 lmc 0");
        assert_eq!(
            refused(&text),
            "t.net:10: port GUID 0x0000000000000011 of \"h1\"[1] is already the port GUID of \"h0\"[1] (line 7)"
        );
        // A CA port answering to a switch's GUID shadows the switch.
        let text = two_cas("20", "31", "lid 2 lmc 0", "lid 3 lmc 0", "lid 1 lmc 0");
        assert_eq!(
            refused(&text),
            "t.net:7: port GUID 0x0000000000000020 of \"h0\"[1] is already the port GUID of switch \"s\" (line 2)"
        );
        // A CA port may answer to its own node GUID (ConnectX does).
        parse(
            &two_cas("10", "30", "lid 2 lmc 0", "lid 3 lmc 0", "lid 1 lmc 0"),
            Path::new("t.net"),
        )
        .expect("parses");
    }

    #[test]
    fn the_two_ends_of_a_link_must_agree_on_the_port_guid() {
        let text = "\
switchguid=0x20
Switch 1 \"s\"
[1] \"h0\"[1](99)
caguid=0x10
Ca 1 \"h0\"
[1](11) \"s\"[1]
";
        assert_eq!(
            refused(text),
            "t.net:3: port GUID 0x0000000000000099 for \"h0\"[1] contradicts 0x0000000000000011 on line 6"
        );
    }

    #[test]
    fn unparsable_or_out_of_range_lids_and_lmcs_are_refused() {
        let sw = |c: &str| refused(&two_cas("11", "31", "lid 2 lmc 0", "lid 3 lmc 0", c));
        assert_eq!(
            sw("base port 0 lid x7 lmc 0"),
            "t.net:2: bad LID 'x7' (expected a decimal number)"
        );
        assert_eq!(
            sw("base port 0 lid 70000 lmc 0"),
            "t.net:2: LID 70000 is outside the unicast range 1..=49151"
        );
        assert_eq!(
            sw("base port 0 lid 1 lmc 2"),
            "t.net:2: LMC 2: the port has 4 LIDs, and this command reads one LID per port (`ibfabric info`, `route` and `verify` read every LID)"
        );
        let ca = |c: &str| refused(&two_cas("11", "31", "lid 2 lmc 0", c, "lid 1 lmc 0"));
        assert_eq!(
            ca("lid 49152 lmc 0"),
            "t.net:10: LID 49152 is outside the unicast range 1..=49151"
        );
        assert_eq!(
            ca("lid 3x lmc 0"),
            "t.net:10: bad LID '3x' (expected a decimal number)"
        );
        assert_eq!(ca("lid"), "t.net:10: 'lid' without a value");
        assert_eq!(ca("lid 3 lmc one"), "t.net:10: bad LMC after the LID");
        assert_eq!(ca("lid 3 lmc 8"), "t.net:10: bad LMC after the LID");
        // Without an LMC the LID still counts.
        let f = parse(
            &two_cas("11", "31", "lid 2 lmc 0", "lid 9", "lid 1 lmc 0"),
            Path::new("t.net"),
        )
        .expect("parses");
        assert_eq!(f.lid_owner(9).map(|s| f.port_guid(s)), Some(0x31));
    }

    #[test]
    fn lid_0_is_refused_only_beside_assigned_lids() {
        let text = two_cas("11", "31", "lid 2 lmc 0", "lid 0 lmc 0", "lid 1 lmc 0");
        let e = refused(&text);
        assert!(
            e.starts_with("t.net:10: LID 0 (no LID assigned) beside assigned LIDs (line 2)"),
            "{e}"
        );
        let text = two_cas("11", "31", "lid 0 lmc 0", "lid 3 lmc 0", "lid 0 lmc 0");
        assert!(refused(&text).starts_with("t.net:2: LID 0"));
        // A subnet no subnet manager has configured yet: all LIDs assigned here.
        let text = two_cas("11", "31", "lid 0 lmc 0", "lid 0 lmc 0", "lid 0 lmc 0");
        let f = parse(&text, Path::new("t.net")).expect("parses");
        assert_eq!(f.max_lid(), 3);
    }

    #[test]
    fn a_description_spelling_another_nodes_id_does_not_take_it() {
        // Node "b" has no usable description, so it is written as
        // S-<its guid>; node "a" is described by exactly that string.
        let text = "\
switchguid=0x100
Switch 1 \"a\"  # \"S-0000000000000200\"
switchguid=0x200
Switch 1 \"b\"  # \"two words\"
";
        let f = parse(text, Path::new("t.net")).expect("parses");
        let written = write(&f);
        let back = parse(&written, Path::new("w.net")).expect("re-reads");
        assert_eq!(back.desc(0), "S-0000000000000200");
        assert_eq!(back.desc(1), "two words");
        assert_eq!(write(&back), written);
    }
}
