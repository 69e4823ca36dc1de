//! Multi-subnet manifests with their topology files, all from the input:
//! the manifest text, then each topology file, separated by NUL bytes; the
//! k-th file (from 0) is `k.net` next to the manifest. Never a panic; a
//! refusal names the file at fault and its line; what parses is written
//! out and read back to the same subnets and routers.

#![no_main]

use fabric::formats::{ibnetdiscover, manifest};
use ibfabric_fuzz::{assert_located, assert_same_fabric};
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};

fn out_dir() -> PathBuf {
    std::env::temp_dir().join(format!("ibfabric-fuzz-manifest-{}", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let parts: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    let Ok(text) = std::str::from_utf8(parts[0]) else {
        return;
    };
    let dir = Path::new("/fuzz");
    let file = dir.join("manifest.toml");
    let name_of = |k: usize| dir.join(format!("{k}.net"));
    let loaded = manifest::parse_with(text, &file, |p| {
        let k = (1..parts.len()).find(|&k| name_of(k - 1) == p)?;
        Some(
            String::from_utf8(parts[k].to_vec())
                .map_err(|e| fabric::Error::Invalid(format!("{}: {e}", p.display()))),
        )
    });
    let m = match loaded {
        Ok(m) => m,
        Err(fabric::Error::Invalid(_)) => return,
        Err(e) => {
            let at = match &e {
                fabric::Error::Parse(p) => p.file.clone(),
                _ => file.clone(),
            };
            let part = (1..parts.len())
                .find(|&k| name_of(k - 1) == at)
                .map_or(parts[0], |k| parts[k]);
            assert_located(&e, &at.display().to_string(), part);
            return;
        }
    };
    let out = out_dir();
    let written = manifest::write(&m.fabric, &out)
        .unwrap_or_else(|e| panic!("a parsed manifest does not write: {e}"));
    let back = manifest::read(&written)
        .unwrap_or_else(|e| panic!("the written manifest does not read: {e}"))
        .fabric;
    let a = &m.fabric;
    assert_eq!(a.subnets.len(), back.subnets.len());
    for (x, y) in a.subnets.iter().zip(&back.subnets) {
        assert_eq!(x.name, y.name);
        assert_eq!(x.prefix, y.prefix);
        assert_same_fabric(&x.fabric, &y.fabric);
        assert_eq!(
            ibnetdiscover::write(&x.fabric),
            ibnetdiscover::write(&y.fabric)
        );
    }
    assert_eq!(a.routers.len(), back.routers.len());
    for (x, y) in a.routers.iter().zip(&back.routers) {
        assert_eq!((x.guid, &x.name, &x.ports), (y.guid, &y.name, &y.ports));
    }
});
