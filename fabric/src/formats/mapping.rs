//! The mapping file of the ISSR/ISFR paper (Code 1): which local router
//! port a subnet's hosts use for each remote destination.
//!
//! ```text
//! # comments
//! fe80:0000:0000:0002:0002:c903:0000:0011 0x0002c90300a00001
//! fe80:0000:0000:0002:0002:c903:0000:0012 0x0002c90300b00001
//! fe80:0000:0000:0002:0002:c903:0000:0012 0x0002c90300a00002
//! #default route
//! * 0x0002c90300a00001
//! * 0x0002c90300b00001
//! ```
//!
//! One line per route: the destination port GID, then the GUID of the
//! local router port that takes it. A destination listed again is backed
//! up by the later line (used when the earlier router port is gone). `*`
//! lines are the default routes, in order of preference, for destinations
//! without a line. GIDs are written in the full eight-group notation that
//! `ibstat` and `saquery` print; the reader also takes the compressed IPv6
//! form (`fe80::2:2:c903:0:11`) and `0x<prefix>:0x<guid>`.
//!
//! A file names router ports by GUID only: reading resolves each to its
//! LID in the subnet's own router ports. A line naming a router port the
//! subnet lacks right now is kept with LID 0 and a warning: backup and
//! default lines exist for routers that are down, and an agent restarted
//! during such an outage must still start. A file where no line names a
//! present router port, a malformed line, or a destination inside the
//! subnet itself is refused with its line.

use super::Lines;
use crate::error::{Error, ParseError};
use crate::intersubnet::{Gid, MapEntry, Mapping, RouterPortView};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;

/// The GID in the eight-group notation (`fe80:0000:...:0011`).
pub fn gid_text(g: Gid) -> String {
    let v = ((g.prefix as u128) << 64) | g.guid as u128;
    let groups: Vec<String> = (0..8)
        .rev()
        .map(|i| format!("{:04x}", (v >> (16 * i)) as u16))
        .collect();
    groups.join(":")
}

/// Reads a GID in the eight-group or compressed IPv6 notation, or as
/// `0x<prefix>:0x<guid>` (how ibfabric's logs print one).
pub fn parse_gid(s: &str) -> Option<Gid> {
    if let Some((p, g)) = s.split_once(':').filter(|(p, _)| p.starts_with("0x")) {
        return Some(Gid {
            prefix: super::parse_hex_u64(p)?,
            guid: g
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())?,
        });
    }
    let v = u128::from(s.parse::<std::net::Ipv6Addr>().ok()?);
    Some(Gid {
        prefix: (v >> 64) as u64,
        guid: v as u64,
    })
}

pub fn write(m: &Mapping) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail; the text is ASCII.
    let _ = write_to(m, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub fn write_to(m: &Mapping, w: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        w,
        "# ibfabric mapping file: <destination GID> <local router port GUID>"
    )?;
    writeln!(
        w,
        "# subnet {:#018x}; a destination listed again is a backup route; '*' = default route",
        m.prefix
    )?;
    for e in &m.entries {
        writeln!(w, "{} {:#018x}", gid_text(e.dest), e.router_port_guid)?;
    }
    if !m.defaults.is_empty() {
        writeln!(w, "#default route")?;
        for g in &m.defaults {
            writeln!(w, "* {g:#018x}")?;
        }
    }
    Ok(())
}

/// Reads the mapping file of the subnet `prefix`, whose router ports are
/// `router_ports`.
pub fn parse(
    input: impl BufRead,
    file: &Path,
    prefix: u64,
    router_ports: &[RouterPortView],
) -> Result<Mapping, Error> {
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let lid_of: HashMap<u64, u16> = router_ports.iter().map(|p| (p.port_guid, p.lid)).collect();
    let mut m = Mapping {
        prefix,
        entries: Vec::new(),
        defaults: Vec::new(),
    };
    let mut lines = Lines::new(input, file);
    // The first line naming an absent router port, for the error when no
    // line names a present one.
    let mut first_absent: Option<(usize, u64)> = None;
    let mut resolved = 0usize;
    while let Some((ln, line)) = lines.next_line()? {
        let mut f = line.split_whitespace();
        let (Some(dest), Some(port), None) = (f.next(), f.next(), f.next()) else {
            return Err(err(
                ln,
                "expected '<destination GID> <router port GUID>' or '* <router port GUID>'".into(),
            ));
        };
        let guid = super::parse_hex_u64(port)
            .filter(|_| port.starts_with("0x"))
            .ok_or_else(|| {
                err(
                    ln,
                    format!("bad router port GUID '{port}' (expected 0x<hex>)"),
                )
            })?;
        let lid = match lid_of.get(&guid) {
            Some(&lid) => {
                resolved += 1;
                lid
            }
            None => {
                tracing::warn!(
                    file = %file.display(),
                    line = ln,
                    "{guid:#018x} is not a router port of subnet {prefix:#018x} now; line kept for when it is"
                );
                first_absent.get_or_insert((ln, guid));
                0
            }
        };
        if dest == "*" {
            m.defaults.push(guid);
            continue;
        }
        let d = parse_gid(dest).ok_or_else(|| {
            err(
                ln,
                format!("bad destination GID '{dest}' (expected e.g. fe80:0000:0000:0002:0002:c903:0000:0011)"),
            )
        })?;
        if d.prefix == prefix {
            return Err(err(
                ln,
                format!(
                    "destination {} is in this subnet ({prefix:#018x}); local routes come from the LFTs",
                    gid_text(d)
                ),
            ));
        }
        m.entries.push(MapEntry {
            dest: d,
            router_port_guid: guid,
            router_port_lid: lid,
        });
    }
    if let (0, Some((ln, guid))) = (resolved, first_absent) {
        return Err(err(
            ln,
            format!(
                "{guid:#018x} is not a router port of subnet {prefix:#018x}, and no line of the file names one that is"
            ),
        ));
    }
    Ok(m)
}

/// Reads a mapping file from disk.
pub fn read(path: &Path, prefix: u64, router_ports: &[RouterPortView]) -> Result<Mapping, Error> {
    parse(super::open_file(path)?, path, prefix, router_ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: u64 = 0xfe80_0000_0000_0001;
    const REMOTE: u64 = 0xfe80_0000_0000_0002;
    const A1: u64 = 0x0002_c903_00a0_0001;
    const A2: u64 = 0x0002_c903_00a0_0002;
    const B1: u64 = 0x0002_c903_00b0_0001;
    const B2: u64 = 0x0002_c903_00b0_0002;

    fn ports() -> Vec<RouterPortView> {
        [
            (0xa, 1, A1, 40),
            (0xa, 2, A2, 41),
            (0xb, 1, B1, 50),
            (0xb, 2, B2, 51),
        ]
        .into_iter()
        .map(|(router_guid, port, port_guid, lid)| RouterPortView {
            router_guid,
            port,
            port_guid,
            lid,
            switch_guid: 0,
            primary_lids: Vec::new(),
        })
        .collect()
    }

    fn dst(i: u64) -> Gid {
        Gid {
            prefix: REMOTE,
            guid: 0x0002_c903_0000_0010 + i,
        }
    }

    /// The paper's Code 1: four destinations over two ports on each of two
    /// routers, then two default routes.
    const CODE1: &str = "\
dst1-gid A1
dst2-gid B1
dst3-gid A2
dst4-gid B2
#default route
* A1
* B1
";

    fn code1() -> String {
        let mut t = CODE1.to_string();
        for i in 1..=4 {
            t = t.replace(&format!("dst{i}-gid"), &gid_text(dst(i)));
        }
        for (n, g) in [("A1", A1), ("A2", A2), ("B1", B1), ("B2", B2)] {
            t = t.replace(n, &format!("{g:#018x}"));
        }
        t
    }

    fn parse_str(t: &str) -> Result<Mapping, Error> {
        parse(t.as_bytes(), Path::new("map.txt"), LOCAL, &ports())
    }

    #[test]
    fn reads_the_papers_example_and_writes_it_back_exactly() {
        let m = parse_str(&code1()).expect("parses");
        let want: Vec<(Gid, u64, u16)> = vec![
            (dst(1), A1, 40),
            (dst(2), B1, 50),
            (dst(3), A2, 41),
            (dst(4), B2, 51),
        ];
        let got: Vec<(Gid, u64, u16)> = m
            .entries
            .iter()
            .map(|e| (e.dest, e.router_port_guid, e.router_port_lid))
            .collect();
        assert_eq!(got, want);
        assert_eq!(m.defaults, vec![A1, B1]);
        let text = write(&m);
        // The routes are the paper's lines, in its order, after our header.
        let body: Vec<&str> = text.lines().filter(|l| !l.starts_with("# ")).collect();
        assert_eq!(body.join("\n") + "\n", code1());
        assert_eq!(parse_str(&text).expect("re-reads"), m);
        assert_eq!(write(&parse_str(&text).expect("re-reads")), text);
    }

    #[test]
    fn backups_keep_their_order_and_other_gid_notations_read() {
        let t = format!(
            "fe80::2:2:c903:0:11 {A1:#x}\n{:#018x}:{:#018x} {B1:#x}\n",
            REMOTE,
            dst(1).guid
        );
        let m = parse_str(&t).expect("parses");
        assert_eq!(m.entries.len(), 2);
        assert!(m.entries.iter().all(|e| e.dest == dst(1)));
        assert_eq!(m.entries[0].router_port_guid, A1);
        assert_eq!(m.entries[1].router_port_guid, B1);
        assert!(m.defaults.is_empty());
    }

    #[test]
    fn lines_for_absent_router_ports_are_kept_for_when_they_return() {
        let t = format!(
            "{d} 0x00000000000000ab\n{d} {A1:#x}\n* 0x00000000000000ab\n* {B1:#x}\n",
            d = gid_text(dst(1))
        );
        let m = parse_str(&t).expect("parses");
        assert_eq!(m.entries.len(), 2);
        assert_eq!(
            (m.entries[0].router_port_guid, m.entries[0].router_port_lid),
            (0xab, 0)
        );
        assert_eq!(m.entries[1].router_port_lid, 40);
        assert_eq!(m.defaults, vec![0xab, B1]);
    }

    #[test]
    fn errors_name_the_line_and_the_cause() {
        let bad = [
            (
                format!("{} {A1:#x}\nnot-a-gid {A1:#x}\n", gid_text(dst(1))),
                2,
                "bad destination GID",
            ),
            (
                format!("{} 0xdead\n", gid_text(dst(1))),
                1,
                "not a router port",
            ),
            (format!("* {A1:#x} extra\n"), 1, "expected"),
            (
                format!("{} A1\n", gid_text(dst(1))),
                1,
                "bad router port GUID",
            ),
            (
                format!(
                    "# c\n{} {A1:#x}\n",
                    gid_text(Gid {
                        prefix: LOCAL,
                        guid: 5
                    })
                ),
                2,
                "in this subnet",
            ),
        ];
        for (text, line, cause) in bad {
            let e = parse_str(&text).expect_err(&text).to_string();
            assert!(e.contains(&format!("map.txt:{line}:")), "{e}");
            assert!(e.contains(cause), "{e}");
        }
    }
}
