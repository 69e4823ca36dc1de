//! A fabric in a compact binary form, exact: what a coordinator sends its
//! workers instead of ibnetdiscover text, so that a worker rebuilds the
//! very same model (node order, ports, GUIDs, LIDs) without parsing text.
//!
//! Layout, little-endian: the magic `IBFFAB01`, the subnet prefix (u64),
//! the node count (u32), then per node its kind (u8: 0 switch, 1 CA,
//! 2 router), GUID (u64), port count (u8), description (u16 length, then
//! UTF-8), and per port 0..=count its port GUID (u64), LID (u16) and the
//! global port slot it links to (u32, `u32::MAX` for none). A fabric with
//! LMC above 0 is written as `IBFFAB02`, where each port also carries its
//! LMC (u8) after the LID; one without is written as before. Read back
//! through [`FabricBuilder`], so every rule of the model (unique GUIDs and
//! LIDs, aligned LMC ranges, links that agree at both ends) holds for what
//! it accepts.

use crate::error::ModelError;
use crate::model::{Fabric, FabricBuilder, NONE, NodeId, NodeKind, Slot};

/// The first bytes of every binary fabric without LMC.
pub const MAGIC: &[u8; 8] = b"IBFFAB01";
/// The first bytes of a binary fabric whose ports carry their LMC.
pub const MAGIC_LMC: &[u8; 8] = b"IBFFAB02";

/// Why bytes are not a fabric, with the offset where that shows.
#[derive(Debug, thiserror::Error)]
pub enum FabricBinError {
    #[error("not a binary fabric (the first bytes are not {MAGIC:?} or {MAGIC_LMC:?})")]
    Magic,
    #[error("the binary fabric ends early: {what} at byte {at}")]
    Short { at: usize, what: &'static str },
    #[error("binary fabric, byte {at}: {why}")]
    Bad { at: usize, why: String },
    #[error("binary fabric: {0}")]
    Model(#[from] ModelError),
}

/// Whether `b` holds a binary fabric (as opposed to ibnetdiscover text).
pub fn is_binary(b: &[u8]) -> bool {
    b.starts_with(MAGIC) || b.starts_with(MAGIC_LMC)
}

/// `f` in the binary form.
pub fn write(f: &Fabric) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + f.num_nodes() * 48 + f.num_slots() * 15);
    let lmc = f.max_lmc() > 0;
    out.extend_from_slice(if lmc { MAGIC_LMC } else { MAGIC });
    out.extend_from_slice(&f.subnet_prefix.to_le_bytes());
    out.extend_from_slice(&(f.num_nodes() as u32).to_le_bytes());
    for n in 0..f.num_nodes() as NodeId {
        out.push(match f.kind(n) {
            NodeKind::Switch => 0,
            NodeKind::Ca => 1,
            NodeKind::Router => 2,
        });
        out.extend_from_slice(&f.guid(n).to_le_bytes());
        out.push(f.num_ports(n));
        let desc = f.desc(n).as_bytes();
        // Descriptions come from files whose lines are far shorter; a
        // longer one is cut at a character boundary.
        let mut len = desc.len().min(u16::MAX as usize);
        while !f.desc(n).is_char_boundary(len) {
            len -= 1;
        }
        out.extend_from_slice(&(len as u16).to_le_bytes());
        out.extend_from_slice(&desc[..len]);
        let switch = f.kind(n) == NodeKind::Switch;
        for p in 0..=f.num_ports(n) {
            let s = f.slot(n, p);
            // A switch's one LID sits on port 0, a CA's or router's on its
            // ports.
            let lid = if switch == (p == 0) {
                f.lid_of_slot(s)
            } else {
                0
            };
            out.extend_from_slice(&f.port_guid(s).to_le_bytes());
            out.extend_from_slice(&lid.to_le_bytes());
            if lmc {
                out.push(if lid == 0 { 0 } else { f.lmc(s) });
            }
            out.extend_from_slice(&f.remote(s).to_le_bytes());
        }
    }
    out
}

type Reader<'a> = super::bytes::Reader<'a>;

impl From<super::bytes::Short> for FabricBinError {
    fn from(s: super::bytes::Short) -> Self {
        FabricBinError::Short {
            at: s.at,
            what: s.what,
        }
    }
}

fn bad(at: usize, why: impl Into<String>) -> FabricBinError {
    FabricBinError::Bad {
        at,
        why: why.into(),
    }
}

/// One port as the bytes give it.
struct Port {
    at: usize,
    node: NodeId,
    port: u8,
    guid: u64,
    lid: u16,
    lmc: u8,
    remote: Slot,
}

/// The fabric `b` holds.
pub fn read(b: &[u8]) -> Result<Fabric, FabricBinError> {
    if !is_binary(b) {
        return Err(FabricBinError::Magic);
    }
    let with_lmc = b.starts_with(MAGIC_LMC);
    let mut r = Reader::new(b, MAGIC.len());
    let prefix = r.u64("the subnet prefix")?;
    let nodes = r.u32("the node count")?;
    // Each node takes at least 14 bytes, plus 14 for its port 0: a count
    // the bytes cannot hold is refused before anything is allocated.
    if nodes as usize > b.len() / 28 {
        return Err(bad(
            MAGIC.len() + 8,
            format!("{nodes} nodes in {} bytes", b.len()),
        ));
    }
    let mut fb = FabricBuilder::new();
    fb.subnet_prefix(prefix);
    let mut ports: Vec<Port> = Vec::new();
    for _ in 0..nodes {
        let at = r.at;
        let kind = match r.u8("a node kind")? {
            0 => NodeKind::Switch,
            1 => NodeKind::Ca,
            2 => NodeKind::Router,
            k => return Err(bad(at, format!("node kind {k} (0 switch, 1 CA, 2 router)"))),
        };
        let guid = r.u64("a node GUID")?;
        let nports = r.u8("a port count")?;
        let len = r.u16("a description length")? as usize;
        let at_desc = r.at;
        let desc = std::str::from_utf8(r.take(len, "a description")?)
            .map_err(|e| bad(at_desc, format!("description: {e}")))?;
        let node = fb.add_node(kind, guid, desc, nports);
        for port in 0..=nports {
            let at = r.at;
            let guid = r.u64("a port GUID")?;
            let lid = r.u16("a LID")?;
            let lmc = if with_lmc { r.u8("an LMC")? } else { 0 };
            ports.push(Port {
                at,
                node,
                port,
                guid,
                lid,
                lmc,
                remote: r.u32("a linked port")?,
            });
        }
    }
    if r.at != b.len() {
        return Err(bad(
            r.at,
            format!("{} bytes after the last node", b.len() - r.at),
        ));
    }
    for (s, p) in ports.iter().enumerate() {
        if p.remote != NONE {
            link(&mut fb, &ports, s, p).map_err(|why| bad(p.at, why))?;
        }
        if p.port > 0 {
            fb.set_port_guid(p.node, p.port, p.guid)
                .map_err(|e| bad(p.at, e.to_string()))?;
        }
        let lid_here = if fb.kind(p.node) == NodeKind::Switch {
            p.port == 0
        } else {
            p.port > 0
        };
        match (p.lid, lid_here) {
            (0, _) if p.lmc > 0 => return Err(bad(p.at, format!("LMC {} without a LID", p.lmc))),
            (0, _) => {}
            (l, true) => fb
                .set_lid(p.node, p.port, l)
                .and_then(|()| fb.set_lmc(p.node, p.port, p.lmc))
                .map_err(|e| bad(p.at, e.to_string()))?,
            (l, false) => return Err(bad(p.at, format!("LID {l} on a port that has none"))),
        }
    }
    Ok(fb.build()?)
}

/// Links port `s` to the port its bytes name, once per pair (from the
/// lower slot): both ends must name each other, and port 0 links nothing.
fn link(fb: &mut FabricBuilder, ports: &[Port], s: usize, p: &Port) -> Result<(), String> {
    let Some(q) = ports.get(p.remote as usize) else {
        return Err(format!(
            "a link to port slot {}, of {}",
            p.remote,
            ports.len()
        ));
    };
    if q.remote as usize != s {
        return Err(format!(
            "a link to port slot {} that links to slot {}",
            p.remote, q.remote
        ));
    }
    if s < p.remote as usize {
        fb.connect(p.node, p.port, q.node, q.port)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ibnetdiscover;
    use crate::generate::{Topology, generate};

    fn families() -> Vec<Fabric> {
        let mut out: Vec<Fabric> = [
            Topology::KaryNTree { k: 4, n: 2 },
            Topology::Dragonfly { p: 2, hosts: None },
            Topology::SlimFly { q: 5, hosts: None },
            Topology::Mesh {
                dims: vec![3, 3],
                torus: false,
                hosts: 2,
            },
            Topology::Mesh {
                dims: vec![3, 4],
                torus: true,
                hosts: 1,
            },
        ]
        .iter()
        .map(|t| generate(t).expect("generates"))
        .collect();
        // A fabric read from text, with stated port GUIDs, LIDs, a router
        // and a subnet prefix.
        let text = "switchguid=0x10\nSwitch 3 \"s\" # \"sw\" lid 5\n[1] \"h\"[1](0x21)\n[2] \"r\"[2]\n\n\
                    caguid=0x20\nCa 1 \"h\" # \"host é\"\n[1](0x21) \"s\"[1] # lid 7\n\n\
                    rtguid=0x30\nRt 2 \"r\"\n[2](0x32) \"s\"[2] # lid 9\n";
        let mut f = ibnetdiscover::parse(text, std::path::Path::new("t.net")).expect("parses");
        f.subnet_prefix = 0xfe80_0000_0000_1234;
        out.push(f);
        // With LMC: the other form, each port's LMC kept.
        let lmc = crate::generate::with_lmc(&out[0], 2).expect("LMC");
        out.push(lmc);
        out
    }

    #[test]
    fn every_family_reads_back_as_the_same_fabric() {
        for f in families() {
            let b = write(&f);
            let g = read(&b).expect("reads back");
            assert_eq!(write(&g), b, "the same bytes again");
            assert_eq!(ibnetdiscover::write(&g), ibnetdiscover::write(&f));
            assert_eq!(g.subnet_prefix, f.subnet_prefix);
            assert_eq!(g.max_lid(), f.max_lid());
            assert_eq!(g.endports(), f.endports());
            assert_eq!(g.end_lids(), f.end_lids());
            let magic: &[u8] = if f.max_lmc() > 0 { MAGIC_LMC } else { MAGIC };
            assert!(b.starts_with(magic));
            for s in 0..f.num_slots() as Slot {
                assert_eq!(
                    (g.remote(s), g.lid_of_slot(s), g.port_guid(s)),
                    (f.remote(s), f.lid_of_slot(s), f.port_guid(s)),
                    "slot {s}"
                );
            }
        }
    }

    #[test]
    fn truncated_bytes_are_refused_with_their_offset() {
        let f = &families()[1];
        let b = write(f);
        for cut in 0..b.len() {
            let e = read(&b[..cut]).expect_err("truncated");
            if cut >= MAGIC.len() {
                let s = e.to_string();
                assert!(s.contains("byte"), "cut at {cut}: {s}");
            }
        }
    }

    #[test]
    fn corrupted_bytes_are_refused_not_panicked_on() {
        let f = &families()[5];
        let b = write(f);
        // Every byte changed in turn: read either refuses it or builds a
        // fabric the model accepts (a changed GUID, LID or description).
        for i in 0..b.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut c = b.clone();
                c[i] ^= x;
                if let Ok(g) = read(&c) {
                    assert_eq!(g.num_nodes(), f.num_nodes());
                }
            }
        }
        let mut c = b.clone();
        c.push(0);
        assert!(
            read(&c)
                .expect_err("trailing")
                .to_string()
                .contains("after the last node")
        );
        assert!(matches!(
            read(b"Switch 3").expect_err("text"),
            FabricBinError::Magic
        ));
    }

    #[test]
    fn the_fuzz_seed_is_a_fabric() {
        let b = include_bytes!("../../../fuzz/seeds/fabric_bin/switch-host.bin");
        let f = read(b).expect("the seed reads");
        assert_eq!(
            (f.num_nodes(), f.switches().len(), f.endports().len()),
            (2, 1, 1)
        );
        assert_eq!(write(&f), b.to_vec());
    }

    #[test]
    fn links_must_name_each_other() {
        let f = &families()[5];
        let mut b = write(f);
        // The first node's port 1 link: point it at port 0 of the same node.
        let desc_len = f.desc(0).len();
        let port1 = MAGIC.len() + 8 + 4 + 1 + 8 + 1 + 2 + desc_len + 14;
        b[port1 + 10..port1 + 14].copy_from_slice(&0u32.to_le_bytes());
        let e = read(&b).expect_err("one-sided link").to_string();
        assert!(e.contains(&format!("byte {port1}")), "{e}");
    }
}
