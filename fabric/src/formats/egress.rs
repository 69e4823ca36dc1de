//! `router-egress.txt`: the routers' egress tables as text, for operators
//! to read and diff (routers themselves receive them over gRPC).
//!
//! ```text
//! router 0x0004000000000000
//!   context ingress *
//!     fe80:0000:0000:0002:0002:c903:0000:0011 next-lid 0x0011 ports 3,4 hash
//!     prefix 0xfe80000000000003 next-lid 0x0021 ports 7 first
//! ```
//! `ingress *` is a context for packets from any port; `hash` picks a port
//! by source and next LID (ISSR), `first` takes the first.

use crate::intersubnet::{Choice, Match, RouterTable};
use std::fmt::Write as _;

pub fn write(tables: &[RouterTable]) -> String {
    let mut s = String::from(
        "# ibfabric router egress tables: <destination GID | prefix P> next-lid <LID> ports <egress ports> <hash | first>\n",
    );
    for t in tables {
        // Writing into a String cannot fail.
        let _ = writeln!(s, "router {:#018x}", t.router_guid);
        for c in &t.contexts {
            let ingress = if c.ingress_ports.is_empty() {
                "*".to_string()
            } else {
                join(&c.ingress_ports)
            };
            let _ = writeln!(s, "  context ingress {ingress}");
            for r in &c.rules {
                let what = match r.matches {
                    Match::Gid(g) => super::mapping::gid_text(g),
                    Match::Prefix(p) => format!("prefix {p:#018x}"),
                };
                let choice = match r.choice {
                    Choice::Hash => "hash",
                    Choice::First => "first",
                };
                let _ = writeln!(
                    s,
                    "    {what} next-lid {:#06x} ports {} {choice}",
                    r.next_lid,
                    join(&r.ports)
                );
            }
        }
    }
    s
}

fn join(v: &[u8]) -> String {
    v.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}
