//! The multi-subnet manifest: a small TOML file that names one
//! ibnetdiscover file per subnet and its subnet prefix. Routers appear in
//! every subnet file they join, as router nodes with the same node GUID and
//! only their ports in that subnet linked; the optional `[[router]]`
//! entries state which port sits in which subnet and are checked against
//! the files.
//!
//! ```toml
//! [[subnet]]
//! name = "subnet0"
//! prefix = "0xfec0000000000001"
//! topology = "subnet0.net"      # relative to the manifest
//! engine = "ftree"              # optional: this subnet's routing engine
//!
//! [[router]]
//! name = "router0"
//! guid = "0x0004000000000000"
//! ports = [[1, "subnet0"], [2, "subnet1"]]
//! ```

use crate::error::{Error, ParseError};
use crate::formats::{ibnetdiscover, parse_hex_u64, read_file};
use crate::multi::{MultiFabric, Subnet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    subnet: Vec<SubnetEntry>,
    #[serde(default)]
    router: Vec<RouterEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubnetEntry {
    name: Spanned<String>,
    prefix: Spanned<String>,
    topology: Spanned<String>,
    #[serde(default)]
    engine: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouterEntry {
    #[serde(default)]
    name: Option<String>,
    guid: Spanned<String>,
    ports: Spanned<Vec<(u8, String)>>,
}

/// A loaded manifest: the fabric and the topology file of each subnet.
pub struct Manifest {
    pub fabric: MultiFabric,
    pub files: Vec<PathBuf>,
    /// Each subnet's routing engine when the manifest names one.
    pub engines: Vec<Option<crate::routing::EngineKind>>,
}

fn line_of(text: &str, span: Range<usize>) -> usize {
    // Bytes, not a str slice: a span is not trusted to fall on a character
    // boundary.
    let before = &text.as_bytes()[..span.start.min(text.len())];
    before.iter().filter(|&&b| b == b'\n').count() + 1
}

/// Reads a manifest and the topology files it names.
pub fn read(path: &Path) -> Result<Manifest, Error> {
    parse(&read_file(path)?, path)
}

/// Parses manifest text; `path` names it in errors, and topology files are
/// read from disk relative to its directory.
pub fn parse(text: &str, path: &Path) -> Result<Manifest, Error> {
    parse_with(text, path, |topo| topo.is_file().then(|| read_file(topo)))
}

/// Parses manifest text, taking each topology file's text from `topology`
/// (given the path relative to `path`'s directory; `None` when there is no
/// such file), so manifests can be checked without touching the disk.
pub fn parse_with(
    text: &str,
    path: &Path,
    mut topology: impl FnMut(&Path) -> Option<Result<String, Error>>,
) -> Result<Manifest, Error> {
    let at = |span: Range<usize>, cause: String| -> Error {
        ParseError::new(path, line_of(text, span), cause).into()
    };
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s));
        // toml gives some syntax errors (a control character in a comment)
        // no message at all.
        let cause = match e.message().trim() {
            "" => "invalid TOML syntax",
            m => m,
        };
        Error::from(ParseError::new(path, line, cause))
    })?;
    let hex = |v: &Spanned<String>, what: &str| {
        parse_hex_u64(v.get_ref()).ok_or_else(|| {
            at(
                v.span(),
                format!(
                    "{what} '{}' is not a 64-bit hex number (0x...)",
                    v.get_ref()
                ),
            )
        })
    };
    if file.subnet.is_empty() {
        return Err(ParseError::new(path, 1, "no [[subnet]] entries").into());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut subnets = Vec::with_capacity(file.subnet.len());
    let mut files = Vec::with_capacity(file.subnet.len());
    let mut engines = Vec::with_capacity(file.subnet.len());
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for s in &file.subnet {
        let prefix = hex(&s.prefix, "prefix")?;
        // Names become directory and file names in outputs.
        let name = s.name.get_ref();
        if name.is_empty()
            || name.starts_with('.')
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(at(
                s.name.span(),
                format!(
                    "subnet name '{name}': use letters, digits, '-', '_' and '.', not starting with '.'"
                ),
            ));
        }
        if names
            .insert(s.name.get_ref().clone(), subnets.len())
            .is_some()
        {
            return Err(at(
                s.name.span(),
                format!("subnet name '{}' appears twice", s.name.get_ref()),
            ));
        }
        let topo = dir.join(s.topology.get_ref());
        let Some(topo_text) = topology(&topo) else {
            return Err(at(
                s.topology.span(),
                format!("topology file {} does not exist", topo.display()),
            ));
        };
        engines.push(
            s.engine
                .as_ref()
                .map(|e| {
                    e.get_ref()
                        .parse::<crate::routing::EngineKind>()
                        .map_err(|why| at(e.span(), why.to_string()))
                })
                .transpose()?,
        );
        let mut fabric = ibnetdiscover::parse(&topo_text?, &topo)?;
        fabric.subnet_prefix = prefix;
        subnets.push(Subnet {
            name: s.name.get_ref().clone(),
            prefix,
            fabric,
        });
        files.push(topo);
    }
    let m = MultiFabric::from_subnets(subnets).map_err(|e| at(0..0, e.to_string()))?;
    for r in &file.router {
        let guid = hex(&r.guid, "router GUID")?;
        let label = r.name.clone().unwrap_or_else(|| r.guid.get_ref().clone());
        let found = m.routers.iter().find(|x| x.guid == guid).ok_or_else(|| {
            at(
                r.guid.span(),
                format!("router '{label}' ({guid:#018x}) is in no subnet's topology file"),
            )
        })?;
        for (port, subnet) in r.ports.get_ref() {
            let want = *names.get(subnet).ok_or_else(|| {
                at(
                    r.ports.span(),
                    format!("router '{label}' port {port}: no subnet named '{subnet}'"),
                )
            })?;
            match found.ports.iter().find(|p| p.port == *port) {
                Some(p) if p.subnet == want => {}
                Some(p) => {
                    return Err(at(
                        r.ports.span(),
                        format!(
                            "router '{label}' port {port} is linked in '{}', not '{subnet}'",
                            m.subnets[p.subnet].name
                        ),
                    ));
                }
                None => {
                    return Err(at(
                        r.ports.span(),
                        format!("router '{label}' port {port} is linked in no subnet's file"),
                    ));
                }
            }
        }
    }
    Ok(Manifest {
        fabric: m,
        files,
        engines,
    })
}

#[derive(Serialize)]
struct OutFile<'a> {
    subnet: Vec<OutSubnet<'a>>,
    router: Vec<OutRouter<'a>>,
}

#[derive(Serialize)]
struct OutSubnet<'a> {
    name: &'a str,
    prefix: String,
    topology: String,
}

#[derive(Serialize)]
struct OutRouter<'a> {
    name: &'a str,
    guid: String,
    ports: Vec<(u8, &'a str)>,
}

/// Writes every subnet's topology as `<name>.net` into `dir` and the
/// manifest as `dir/manifest.toml`; returns the manifest's path.
pub fn write(m: &MultiFabric, dir: &Path) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut out = OutFile {
        subnet: Vec::new(),
        router: Vec::new(),
    };
    for s in &m.subnets {
        let file = format!("{}.net", s.name);
        super::write_file(&dir.join(&file), &ibnetdiscover::write(&s.fabric))?;
        out.subnet.push(OutSubnet {
            name: &s.name,
            prefix: format!("{:#018x}", s.prefix),
            topology: file,
        });
    }
    for r in &m.routers {
        out.router.push(OutRouter {
            name: &r.name,
            guid: format!("{:#018x}", r.guid),
            ports: r
                .ports
                .iter()
                .map(|p| (p.port, m.subnets[p.subnet].name.as_str()))
                .collect(),
        });
    }
    let body = toml::to_string(&out).map_err(|e| Error::Invalid(e.to_string()))?;
    let p = dir.join("manifest.toml");
    super::write_file(
        &p,
        &format!("# ibfabric multi-subnet manifest: one ibnetdiscover file per subnet.\n{body}"),
    )?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi::fat_tree_subnets;

    #[test]
    fn a_written_manifest_reads_back_into_the_same_fabric() {
        let m = fat_tree_subnets(3, 2, 2, 2, 2).expect("generates");
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(&m, dir.path()).expect("writes");
        let back = read(&p).expect("reads").fabric;
        assert_eq!(back.subnets.len(), 3);
        for (a, b) in m.subnets.iter().zip(&back.subnets) {
            assert_eq!(a.prefix, b.prefix);
            assert_eq!(a.fabric.num_cas(), b.fabric.num_cas());
        }
        assert_eq!(back.routers.len(), m.routers.len());
        for (a, b) in m.routers.iter().zip(&back.routers) {
            assert_eq!(a.guid, b.guid);
            assert_eq!(a.ports, b.ports);
        }
    }

    #[test]
    fn toml_errors_without_a_message_still_give_a_cause() {
        // toml reports a control character in a comment with an empty message.
        let text = "[[subnet]]\nname = \"a\"\n# bad \u{17} comment\n";
        let e = parse_with(text, Path::new("m.toml"), |_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(e, "m.toml:3: invalid TOML syntax");
    }

    #[test]
    fn topology_files_can_come_from_memory() {
        let m = fat_tree_subnets(2, 1, 1, 1, 1).expect("generates");
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(&m, dir.path()).expect("writes");
        let text = std::fs::read_to_string(&p).expect("reads");
        let mut asked = Vec::new();
        let back = parse_with(&text, Path::new("/nowhere/m.toml"), |topo| {
            asked.push(topo.to_path_buf());
            let name = topo.file_name()?;
            Some(std::fs::read_to_string(dir.path().join(name)).map_err(|e| Error::io(topo, e)))
        })
        .expect("parses");
        assert_eq!(
            asked,
            [
                Path::new("/nowhere/subnet0.net"),
                Path::new("/nowhere/subnet1.net")
            ]
        );
        assert_eq!(back.files, asked);
        assert_eq!(back.fabric.routers.len(), m.routers.len());
    }

    #[test]
    fn bad_manifests_name_the_line() {
        let m = fat_tree_subnets(2, 1, 1, 1, 1).expect("generates");
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(&m, dir.path()).expect("writes");
        let text = std::fs::read_to_string(&p).expect("reads");
        let cases = [
            (
                text.replace("0xfec0000000000002", "0xnothex"),
                "not a 64-bit hex",
            ),
            (text.replace("subnet1.net", "missing.net"), "does not exist"),
            (
                text.replace("[1, \"subnet0\"]", "[1, \"subnet1\"]"),
                "linked in 'subnet0', not 'subnet1'",
            ),
            (text.replace("prefix", "prefx"), "unknown field"),
            (
                text.replace("name = \"subnet1\"", "name = \"../escape\""),
                "subnet name '../escape'",
            ),
            (
                text.replace(
                    "topology = \"subnet0.net\"",
                    "topology = \"subnet0.net\"\nengine = \"nosuch\"",
                ),
                "nosuch",
            ),
        ];
        for (bad, want) in cases {
            std::fs::write(&p, &bad).expect("writes");
            let e = read(&p).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("manifest.toml:") && e.contains(want), "{e}");
        }
    }
}
