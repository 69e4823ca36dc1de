//! The compact table set: exact round trips on every generator family and
//! engine, the same tables as the text export, and refusals of damaged
//! bytes that name the file and the offset.

use fabric::formats::compact::{lft, pathsl, sl2vl};
use fabric::formats::{self, Export, ibnetdiscover, tableset};
use fabric::generate::{Topology, generate};
use fabric::routing::{self, EngineOptions};
use fabric::tables::Routing;
use fabric::verify::{Policy, accept};
use fabric::{Error, Fabric};
use std::path::Path;

fn families() -> Vec<(Fabric, &'static str)> {
    [
        (Topology::KaryNTree { k: 4, n: 2 }, "updn"),
        (Topology::Dragonfly { p: 2, hosts: None }, "dfdn"),
        (Topology::Dragonfly { p: 3, hosts: None }, "nue"),
        (Topology::SlimFly { q: 5, hosts: None }, "dfsssp"),
        (
            Topology::Mesh {
                dims: vec![3, 4],
                torus: true,
                hosts: 1,
            },
            "lash",
        ),
        (
            Topology::Mesh {
                dims: vec![3, 3],
                torus: false,
                hosts: 2,
            },
            "minhop",
        ),
    ]
    .into_iter()
    .map(|(t, e)| (generate(&t).expect("generates"), e))
    .collect()
}

fn route(f: &Fabric, engine: &str) -> Routing {
    routing::by_name(engine)
        .expect("engine")
        .route(f, &EngineOptions::default())
        .expect("routes")
}

#[test]
fn every_family_and_engine_reads_back_as_the_same_tables() {
    for (f, engine) in families() {
        let r = route(&f, engine);
        let p = Path::new("t.bin");
        let back = lft::parse(&f, &lft::write(&f, &r.lfts, false), p).expect("lfts");
        assert_eq!(back, r.lfts, "{engine}: LFTs");
        if let Some(t) = &r.sl2vl {
            let b = sl2vl::write(&f, t).expect("sl2vl");
            assert_eq!(
                &sl2vl::parse(&f, &b, p).expect("sl2vl"),
                t,
                "{engine}: SL-to-VL"
            );
        }
        if let Some(t) = &r.path_sl {
            let b = pathsl::write(t).expect("path SLs");
            assert_eq!(
                &pathsl::parse(&f, &b, p).expect("path SLs"),
                t,
                "{engine}: path SLs"
            );
        }
    }
}

/// A set written with the export holds both forms; both read back as the
/// same routing, and a reader takes the compact one.
#[test]
fn the_text_export_and_the_compact_set_hold_the_same_routing() {
    for (f, engine) in families() {
        let r = route(&f, engine);
        let e = routing::by_name(engine).expect("engine");
        let v = accept(&f, e.as_ref(), r.clone(), Policy::AllowCycles).expect("verified");
        let dir = tempfile::tempdir().expect("tmp");
        let both = Export { opensm_dump: true };
        formats::write_routing(&f, &v, dir.path(), both).expect("writes");
        let set = tableset::check_dir(dir.path()).expect("manifest");
        let compact = tableset::read_checked(&f, dir.path(), &set).expect("reads");
        let names: Vec<&str> = set.files.iter().map(|e| e.name.as_str()).collect();
        assert!(names.contains(&formats::LFTS_FILE), "{names:?}");
        let text_only = tableset::TableSet {
            files: set
                .files
                .iter()
                .filter(|e| !e.name.starts_with("ibfabric-"))
                .cloned()
                .collect(),
            ..set.clone()
        };
        let text = tableset::read_checked(&f, dir.path(), &text_only).expect("reads text");
        // A checked set of an earlier release (text files only) reads in
        // one pass as well, to the same tables.
        let old = tempfile::tempdir().expect("tmp");
        for e in &text_only.files {
            std::fs::copy(dir.path().join(&e.name), old.path().join(&e.name)).expect("copies");
        }
        std::fs::write(
            old.path().join(tableset::MANIFEST_FILE),
            tableset::write(&text_only),
        )
        .expect("manifest");
        let (m0, old_once) = tableset::read_set_with_manifest(&f, old.path()).expect("reads old");
        assert_eq!(m0.files, text_only.files, "{engine}");
        assert_eq!(
            (&old_once.lfts, &old_once.sl2vl, &old_once.path_sl),
            (&text.lfts, &text.sl2vl, &text.path_sl),
            "{engine}"
        );
        // One pass (digest and parse from the same bytes) reads what the
        // two passes read, and the manifest they checked.
        let (m1, once) = tableset::read_set_with_manifest(&f, dir.path()).expect("reads once");
        assert_eq!(m1.files, set.files, "{engine}");
        assert_eq!(
            (&once.lfts, &once.sl2vl, &once.path_sl),
            (&compact.lfts, &compact.sl2vl, &compact.path_sl),
            "{engine}"
        );
        assert_eq!(compact.lfts, r.lfts, "{engine}");
        assert_eq!(text.lfts, r.lfts, "{engine}");
        assert_eq!(compact.path_sl, r.path_sl, "{engine}");
        // The text dump holds linked ports only; the compact file all.
        if let (Some(a), Some(b)) = (&compact.sl2vl, &text.sl2vl) {
            for &s in f.endports() {
                assert_eq!(a.port_row(s), b.port_row(s), "{engine}");
            }
        }
        // Without the export, the text files of the earlier set go.
        formats::write_routing(&f, &v, dir.path(), Export::default()).expect("writes");
        assert!(!dir.path().join(formats::LFTS_FILE).exists());
        let set = tableset::check_dir(dir.path()).expect("manifest");
        assert_eq!(
            tableset::read_checked(&f, dir.path(), &set)
                .expect("reads")
                .lfts,
            r.lfts
        );
    }
}

/// Like OpenSM's file loader, a set taken under another LID assignment
/// applies to the same ports.
#[test]
fn lfts_follow_their_ports_to_new_lids() {
    let text = "switchguid=0x10\nSwitch 3 \"s\" # \"sw\" lid 5\n[1] \"h\"[1](0x21)\n[2] \"g\"[1](0x31)\n\n\
                caguid=0x20\nCa 1 \"h\" # \"h\"\n[1](0x21) \"s\"[1] # lid 7\n\n\
                caguid=0x30\nCa 1 \"g\" # \"g\"\n[1](0x31) \"s\"[2] # lid 9\n";
    let f = ibnetdiscover::parse(text, Path::new("a.net")).expect("parses");
    let swapped = text.replace("lid 7", "lid 8").replace("lid 9", "lid 7");
    let g = ibnetdiscover::parse(&swapped, Path::new("b.net")).expect("parses");
    let r = route(&f, "minhop");
    let back = lft::parse(&g, &lft::write(&f, &r.lfts, false), Path::new("x")).expect("reads");
    let (h, k) = (f.endports()[0], f.endports()[1]);
    for s in [h, k] {
        assert_eq!(
            back.get(0, g.lid_of_slot(s)),
            r.lfts.get(0, f.lid_of_slot(s))
        );
    }
}

/// The offset an error names, checked to be a located binary error.
fn offset_of(e: &Error, file: &Path, len: usize) -> u64 {
    match e {
        Error::Binary(b) => {
            assert_eq!(b.file, file, "{e}");
            assert!(b.offset <= len as u64, "{e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("{}: offset ", file.display()))
            );
            b.offset
        }
        other => panic!("not located: {other}"),
    }
}

type Parse = dyn Fn(&Fabric, &[u8], &Path) -> Result<(), Error>;

fn files(f: &Fabric, r: &Routing) -> Vec<(Vec<u8>, Box<Parse>)> {
    vec![
        (
            lft::write(f, &r.lfts, false),
            Box::new(|f, b, p| lft::parse(f, b, p).map(|_| ())),
        ),
        (
            sl2vl::write(f, r.sl2vl.as_ref().expect("VLs")).expect("writes"),
            Box::new(|f, b, p| sl2vl::parse(f, b, p).map(|_| ())),
        ),
        (
            pathsl::write(r.path_sl.as_ref().expect("SLs")).expect("writes"),
            Box::new(|f, b, p| pathsl::parse(f, b, p).map(|_| ())),
        ),
    ]
}

#[test]
fn every_truncation_and_a_trailing_byte_are_refused_at_their_offset() {
    let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("generates");
    let r = route(&f, "lash");
    let p = Path::new("cut.bin");
    for (bytes, parse) in files(&f, &r) {
        parse(&f, &bytes, p).expect("whole file");
        for cut in 0..bytes.len() {
            let e = parse(&f, &bytes[..cut], p).expect_err("truncated");
            assert!(offset_of(&e, p, cut) <= cut as u64);
        }
        let mut long = bytes.clone();
        long.push(0);
        let e = parse(&f, &long, p).expect_err("trailing byte");
        assert_eq!(offset_of(&e, p, long.len()), bytes.len() as u64, "{e}");
    }
}

#[test]
fn corrupted_bytes_are_refused_or_read_never_panicked_on() {
    let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("generates");
    let r = route(&f, "lash");
    let p = Path::new("bad.bin");
    let mut refused = 0;
    for (bytes, parse) in files(&f, &r) {
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                if let Err(e) = parse(&f, &b, p) {
                    offset_of(&e, p, b.len());
                    refused += 1;
                }
            }
        }
        let mut magic = bytes.clone();
        magic[3] = b'X';
        let e = parse(&f, &magic, p).expect_err("bad magic");
        assert_eq!(offset_of(&e, p, magic.len()), 0);
    }
    assert!(refused > 0);
}

/// The fuzz target's seeds are valid files of the fixed subnet the target
/// reads against (`IBFABRIC_WRITE_SEEDS=1` writes them anew).
#[test]
fn the_fuzz_seeds_read_against_the_fixed_subnet() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let text = std::fs::read_to_string(root.join("fixed.net")).expect("fixed.net");
    let f = ibnetdiscover::parse(&text, Path::new("fixed.net")).expect("parses");
    let r = route(&f, "lash");
    let seeds = root.join("seeds/compact");
    let want: Vec<(&str, Vec<u8>)> = files(&f, &r)
        .into_iter()
        .zip(["lfts", "sl2vl", "pathsl"])
        .enumerate()
        .map(|(k, ((b, _), name))| (name, [vec![k as u8], b].concat()))
        .collect();
    if std::env::var_os("IBFABRIC_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(&seeds).expect("mkdir");
        for (name, b) in &want {
            std::fs::write(seeds.join(format!("{name}.bin")), b).expect("write");
        }
    }
    for (k, ((_, parse), name)) in files(&f, &r)
        .into_iter()
        .zip(["lfts", "sl2vl", "pathsl"])
        .enumerate()
    {
        let b = std::fs::read(seeds.join(format!("{name}.bin"))).expect("seed");
        assert_eq!(b[0] as usize % 3, k, "{name}: the selector byte");
        parse(&f, &b[1..], Path::new(name)).expect("the seed reads");
    }
}
