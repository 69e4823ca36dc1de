//! Property tests over the file formats: random valid topologies,
//! manifests (with their topology files) and mapping files survive a write
//! and a re-read, and damaged files are refused as `file:line: cause`,
//! never with a panic.

use fabric::formats::{ibnetdiscover, lft, manifest, mapping, pathsl, sl2vl};
use fabric::intersubnet::{Gid, MapEntry, Mapping, RouterPortView};
use fabric::model::{FabricBuilder, NodeKind};
use fabric::multi::{Join, MultiFabric, Subnet, TreeSubnets, Wiring, tree_subnets};
use fabric::routing::{self, EngineOptions};
use fabric::{Error, Fabric, NodeId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

// ------------------------------------------------------------ comparisons

/// Everything the topology format carries. Switch ports other than 0 are
/// addressed by the node GUID, so their own port GUIDs are not compared.
fn assert_same_fabric(a: &Fabric, b: &Fabric) {
    assert_eq!(a.num_nodes(), b.num_nodes(), "node count");
    assert_eq!(a.num_slots(), b.num_slots(), "slot count");
    assert_eq!(a.max_lid(), b.max_lid(), "max LID");
    for n in 0..a.num_nodes() as NodeId {
        assert_eq!(a.kind(n), b.kind(n), "kind of node {n}");
        assert_eq!(a.guid(n), b.guid(n), "GUID of node {n}");
        assert_eq!(a.desc(n), b.desc(n), "description of node {n}");
        assert_eq!(a.num_ports(n), b.num_ports(n), "ports of node {n}");
        for p in 0..=a.num_ports(n) {
            let (sa, sb) = (a.slot(n, p), b.slot(n, p));
            assert_eq!(a.remote(sa), b.remote(sb), "link of node {n} port {p}");
            assert_eq!(
                a.lid_of_slot(sa),
                b.lid_of_slot(sb),
                "LID of node {n} port {p}"
            );
            if a.kind(n) != NodeKind::Switch {
                assert_eq!(
                    a.port_guid(sa),
                    b.port_guid(sb),
                    "GUID of node {n} port {p}"
                );
            }
        }
    }
}

/// A refusal must be a located parse error: the file, a line of `text`
/// (1 for an empty file) and a cause, printed as `file:line: cause`.
fn assert_located(e: &Error, file: &Path, text: &str) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count().max(1);
    match e {
        Error::Parse(p) => {
            prop_assert_eq!(&p.file, file, "{}", e);
            prop_assert!(
                (1..=lines).contains(&p.line),
                "line {} of {}: {}",
                p.line,
                lines,
                e
            );
            prop_assert!(!p.cause.is_empty(), "{}", e);
            let prefix = format!("{}:{}: ", file.display(), p.line);
            prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
            Ok(())
        }
        other => Err(TestCaseError::fail(format!("not located: {other}"))),
    }
}

// ------------------------------------------------------------ damage

/// One edit of a text file, positions taken modulo the text's size.
#[derive(Debug, Clone)]
enum Edit {
    DropLine(usize),
    DupLine(usize),
    SwapLines(usize, usize),
    /// Replaces the k-th whitespace-separated word of a line.
    Word(usize, usize, String),
    Insert(usize, char),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let word = prop_oneof![
        Just(String::new()),
        Just("0".to_string()),
        Just("255".to_string()),
        Just("65535".to_string()),
        Just("4294967296".to_string()),
        Just("0xffffffffffffffff".to_string()),
        Just("\"".to_string()),
        Just("[".to_string()),
        Just("#".to_string()),
        Just(":".to_string()),
        Just("*".to_string()),
        "[ -~]{1,6}",
        "\\PC{1,3}",
    ];
    prop_oneof![
        any::<usize>().prop_map(Edit::DropLine),
        any::<usize>().prop_map(Edit::DupLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<usize>(), any::<usize>(), word).prop_map(|(l, k, w)| Edit::Word(l, k, w)),
        (any::<usize>(), any::<char>()).prop_map(|(p, c)| Edit::Insert(p, c)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn damage(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    for e in edits {
        let n = lines.len().max(1);
        match e {
            Edit::DropLine(i) if lines.len() > 1 => {
                lines.remove(i % n);
            }
            Edit::DupLine(i) if !lines.is_empty() => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
            Edit::Word(i, k, w) if !lines.is_empty() => {
                let line = &mut lines[i % n];
                let mut words: Vec<&str> = line.split_whitespace().collect();
                if !words.is_empty() {
                    let k = k % words.len();
                    words[k] = w;
                    *line = words.join(" ");
                }
            }
            Edit::Insert(p, c) => {
                let mut t = lines.join("\n");
                let mut at = p % (t.len() + 1);
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                t.insert(at, *c);
                lines = t.split('\n').map(str::to_string).collect();
            }
            Edit::Truncate(p) => {
                let mut t = lines.join("\n");
                let mut at = p % (t.len() + 1);
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                t.truncate(at);
                lines = t.split('\n').map(str::to_string).collect();
            }
            _ => {}
        }
    }
    lines.join("\n")
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 1..6)
}

// ------------------------------------------------------------ topologies

#[derive(Debug, Clone)]
enum Desc {
    Text(String),
    /// The id the writer falls back to for another node (`S-<guid>`).
    IdOf(usize),
}

#[derive(Debug, Clone)]
struct NodeSpec {
    kind: NodeKind,
    ports: u8,
    desc: Desc,
    lid: Option<u16>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    let kind = prop_oneof![
        3 => Just(NodeKind::Switch),
        3 => Just(NodeKind::Ca),
        1 => Just(NodeKind::Router),
    ];
    let desc = prop_oneof![
        4 => "[a-z][a-z0-9_]{0,6}".prop_map(Desc::Text),
        2 => "[^\"\n]{0,12}".prop_map(Desc::Text),
        1 => any::<usize>().prop_map(Desc::IdOf),
    ];
    (kind, 1u8..=6, desc, prop::option::of(1u16..=300)).prop_map(|(kind, ports, desc, lid)| {
        NodeSpec {
            kind,
            ports,
            desc,
            lid,
        }
    })
}

/// A random subnet as the topology format can state it: unique node GUIDs,
/// links between free ports, LIDs on switches and linked end ports.
fn fabric_strategy() -> impl Strategy<Value = Fabric> {
    (
        prop::collection::vec(node_spec(), 1..10),
        prop::collection::vec((any::<usize>(), any::<usize>()), 0..24),
        any::<u32>(),
    )
        .prop_map(|(nodes, links, base)| build_fabric(&nodes, &links, base))
}

fn build_fabric(nodes: &[NodeSpec], links: &[(usize, usize)], base: u32) -> Fabric {
    // Node GUIDs 256 apart, so CA port GUIDs (node GUID + port) never meet
    // another node's GUID.
    let guid = |i: usize| ((base as u64) << 16) + ((i as u64 + 1) << 8);
    let mut b = FabricBuilder::new();
    let ids: Vec<NodeId> = nodes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let desc = match &s.desc {
                Desc::Text(t) => t.clone(),
                Desc::IdOf(k) => {
                    let k = k % nodes.len();
                    let p = match nodes[k].kind {
                        NodeKind::Switch => "S",
                        NodeKind::Ca => "H",
                        NodeKind::Router => "R",
                    };
                    format!("{p}-{:016x}", guid(k))
                }
            };
            b.add_node(s.kind, guid(i), desc, s.ports)
        })
        .collect();
    let ports: Vec<(NodeId, u8)> = ids
        .iter()
        .zip(nodes)
        .flat_map(|(&n, s)| (1..=s.ports).map(move |p| (n, p)))
        .collect();
    let mut linked = BTreeSet::new();
    for &(x, y) in links {
        let (a, pa) = ports[x % ports.len()];
        let (c, pc) = ports[y % ports.len()];
        if b.connect(a, pa, c, pc).is_ok() {
            linked.insert((a, pa));
            linked.insert((c, pc));
        }
    }
    let mut used = BTreeSet::new();
    for (&n, s) in ids.iter().zip(nodes) {
        let Some(lid) = s.lid else { continue };
        let port = if s.kind == NodeKind::Switch {
            0
        } else {
            match (1..=s.ports).find(|&p| linked.contains(&(n, p))) {
                Some(p) => p,
                None => continue,
            }
        };
        if used.insert(lid) {
            b.set_lid(n, port, lid).expect("LID in range");
        }
    }
    b.build().expect("unique GUIDs and LIDs")
}

/// A small subnet with tables from a real engine, for the dump formats.
fn routed() -> (Fabric, fabric::tables::Routing) {
    let f = fabric::generate::generate(&fabric::generate::Topology::Mesh {
        dims: vec![3],
        torus: true,
        hosts: 1,
    })
    .expect("generates");
    let r = routing::by_name("lash")
        .expect("engine")
        .route(&f, &EngineOptions::default())
        .expect("routes");
    (f, r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn topologies_round_trip(f in fabric_strategy()) {
        let text = ibnetdiscover::write(&f);
        let back = ibnetdiscover::parse(&text, Path::new("t.net"))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        assert_same_fabric(&f, &back);
        prop_assert_eq!(ibnetdiscover::write(&back), text);
    }

    #[test]
    fn damaged_topologies_are_refused_with_their_line(f in fabric_strategy(), e in edits()) {
        let text = damage(&ibnetdiscover::write(&f), &e);
        let file = Path::new("damaged.net");
        if let Err(err) = ibnetdiscover::parse(&text, file) {
            assert_located(&err, file, &text)?;
        }
    }

    #[test]
    fn damaged_dumps_are_refused_with_their_line(which in 0..3u8, e in edits()) {
        let (f, r) = routed();
        let file = Path::new("damaged.dump");
        let (text, res) = match which {
            0 => {
                let t = damage(&lft::write(&f, &r.lfts), &e);
                let res = lft::parse(&f, t.as_bytes(), file).map(|_| ());
                (t, res)
            }
            1 => {
                let t = damage(&sl2vl::write(&f, r.sl2vl.as_ref().expect("lash sets VLs")), &e);
                let res = sl2vl::parse(&f, &t, file).map(|_| ());
                (t, res)
            }
            _ => {
                let t = damage(&pathsl::write(&f, r.path_sl.as_ref().expect("lash sets SLs")), &e);
                let res = pathsl::parse(&f, t.as_bytes(), file).map(|_| ());
                (t, res)
            }
        };
        if let Err(err) = res {
            assert_located(&err, file, &text)?;
        }
    }
}

// ------------------------------------------------------------ manifests

fn multi_strategy() -> impl Strategy<Value = MultiFabric> {
    let shape = (
        1u32..=3,
        1u32..=3,
        1u32..=2,
        1u32..=2,
        0u32..=3,
        1u32..=2,
        prop_oneof![Just(Wiring::All), Just(Wiring::Stripe)],
        prop_oneof![Just(Join::All), Just(Join::Chain), Just(Join::Ring)],
    );
    let names = prop::collection::btree_set("[A-Za-z0-9_-][A-Za-z0-9_.-]{0,8}", 3);
    let prefixes = prop::collection::btree_set(any::<u64>(), 3);
    (shape, names, prefixes).prop_filter_map(
        "chains and rings need enough routers",
        |(
            (subnets, leaves, spines, hosts, routers, router_links, wiring, join),
            names,
            prefixes,
        )| {
            let m = tree_subnets(&TreeSubnets {
                subnets,
                leaves,
                spines,
                hosts,
                routers,
                router_links,
                wiring,
                join,
            })
            .ok()?;
            let subnets = m
                .subnets
                .into_iter()
                .zip(names.into_iter().zip(prefixes))
                .map(|(s, (name, prefix))| {
                    let mut fabric = s.fabric;
                    fabric.subnet_prefix = prefix;
                    Subnet {
                        name,
                        prefix,
                        fabric,
                    }
                })
                .collect();
            Some(MultiFabric::from_subnets(subnets).expect("distinct prefixes"))
        },
    )
}

fn assert_same_multi(a: &MultiFabric, b: &MultiFabric) {
    assert_eq!(a.subnets.len(), b.subnets.len());
    for (x, y) in a.subnets.iter().zip(&b.subnets) {
        assert_eq!((&x.name, x.prefix), (&y.name, y.prefix));
        assert_eq!(y.fabric.subnet_prefix, y.prefix);
        assert_same_fabric(&x.fabric, &y.fabric);
    }
    assert_eq!(a.routers.len(), b.routers.len());
    for (x, y) in a.routers.iter().zip(&b.routers) {
        assert_eq!((x.guid, &x.name, &x.ports), (y.guid, &y.name, &y.ports));
    }
}

/// The files of a written manifest directory, by path.
fn files_of(dir: &Path) -> BTreeMap<PathBuf, String> {
    std::fs::read_dir(dir)
        .expect("lists")
        .map(|e| {
            let p = e.expect("entry").path();
            let t = std::fs::read_to_string(&p).expect("reads");
            (p, t)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn manifests_round_trip(m in multi_strategy()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = manifest::write(&m, dir.path()).expect("writes");
        assert_same_multi(&m, &manifest::read(&path).expect("reads").fabric);
        // The same files from memory, as `parse_with` takes them.
        let files = files_of(dir.path());
        let loaded = manifest::parse_with(&files[&path], &path, |p| files.get(p).cloned().map(Ok))
            .expect("parses");
        assert_same_multi(&m, &loaded.fabric);
        prop_assert_eq!(loaded.files.len(), m.subnets.len());
    }

    #[test]
    fn damaged_manifests_are_refused_with_their_line(
        m in multi_strategy(),
        e in edits(),
        topology in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = manifest::write(&m, dir.path()).expect("writes");
        let mut files = files_of(dir.path());
        // Damage the manifest or the first subnet's topology file.
        let target = if topology {
            dir.path().join(format!("{}.net", m.subnets[0].name))
        } else {
            path.clone()
        };
        let text = damage(&files[&target], &e);
        files.insert(target.clone(), text);
        let loaded = manifest::parse_with(&files[&path], &path, |p| files.get(p).cloned().map(Ok));
        if let Err(err) = loaded {
            let at = match &err {
                Error::Parse(p) => p.file.clone(),
                _ => path.clone(),
            };
            let Some(text) = files.get(&at) else {
                return Err(TestCaseError::fail(format!("error names no input file: {err}")));
            };
            assert_located(&err, &at, text)?;
        }
    }
}

// ------------------------------------------------------------ mapping files

const LOCAL: u64 = 0xfe80_0000_0000_0001;

fn router_ports() -> impl Strategy<Value = Vec<RouterPortView>> {
    prop::collection::btree_map(any::<u64>(), 1u16..=0xBFFF, 1..6).prop_map(|m| {
        m.into_iter()
            .enumerate()
            .map(|(i, (port_guid, lid))| RouterPortView {
                router_guid: 0x100 + i as u64 / 2,
                port: 1 + (i % 2) as u8,
                port_guid,
                lid,
                switch_guid: 0,
                primary_lids: Vec::new(),
            })
            .collect()
    })
}

/// A mapping over `ports` (by index; an index past the end names a router
/// port that is absent right now) with remote destinations.
fn mapping_strategy() -> impl Strategy<Value = (Vec<RouterPortView>, Mapping)> {
    let dest = (
        any::<u64>().prop_filter("remote", |&p| p != LOCAL),
        any::<u64>(),
    )
        .prop_map(|(prefix, guid)| Gid { prefix, guid });
    (
        router_ports(),
        prop::collection::vec((dest, 0usize..8), 0..12),
        prop::collection::vec(0usize..8, 0..4),
        any::<u64>(),
    )
        .prop_map(|(ports, entries, defaults, absent)| {
            let pick = |i: usize| ports.get(i).map_or((absent, 0), |p| (p.port_guid, p.lid));
            // At least one line must name a present router port.
            let mut m = Mapping {
                prefix: LOCAL,
                entries: entries
                    .into_iter()
                    .map(|(dest, i)| {
                        let (router_port_guid, router_port_lid) = pick(i);
                        MapEntry {
                            dest,
                            router_port_guid,
                            router_port_lid,
                        }
                    })
                    .collect(),
                defaults: defaults.into_iter().map(|i| pick(i).0).collect(),
            };
            m.defaults.push(ports[0].port_guid);
            // An absent GUID that is also present resolves to its LID.
            for e in &mut m.entries {
                if let Some(p) = ports.iter().find(|p| p.port_guid == e.router_port_guid) {
                    e.router_port_lid = p.lid;
                }
            }
            (ports, m)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn mapping_files_round_trip((ports, m) in mapping_strategy()) {
        let text = mapping::write(&m);
        let back = mapping::parse(text.as_bytes(), Path::new("m.map"), LOCAL, &ports)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(mapping::write(&back), text);
    }

    #[test]
    fn gids_read_back_in_every_notation(prefix in any::<u64>(), guid in any::<u64>()) {
        let g = Gid { prefix, guid };
        prop_assert_eq!(mapping::parse_gid(&mapping::gid_text(g)), Some(g));
        let v = ((prefix as u128) << 64) | guid as u128;
        prop_assert_eq!(mapping::parse_gid(&std::net::Ipv6Addr::from(v).to_string()), Some(g));
        prop_assert_eq!(mapping::parse_gid(&format!("{prefix:#x}:{guid:#x}")), Some(g));
    }

    #[test]
    fn damaged_mapping_files_are_refused_with_their_line(
        (ports, m) in mapping_strategy(),
        e in edits(),
    ) {
        let text = damage(&mapping::write(&m), &e);
        let file = Path::new("damaged.map");
        if let Err(err) = mapping::parse(text.as_bytes(), file, LOCAL, &ports) {
            assert_located(&err, file, &text)?;
        }
    }
}
