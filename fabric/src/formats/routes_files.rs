//! The inter-subnet routes on disk, with one writer for the agent (when a
//! mapping is pushed) and `route-multi` (beside every subnet's tables):
//! each subnet's mapping (`ibfabric-mapping.txt`, what the OpenSM plugin
//! answers off-subnet PathRecords from), OpenSM's own prefix routes
//! (`prefix-routes.conf`, where the mapping is one router port per remote
//! prefix) and the routers' egress tables (`router-egress.txt`).

use super::{RoutingFiles, StagedRouting, egress, mapping, prefix_routes};
use crate::error::Error;
use crate::fsio::{self, Options, Staged};
use crate::intersubnet::{InterSubnetRoutes, Mapping};
use crate::model::Fabric;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Each subnet's copy of its inter-subnet mapping.
pub const MAPPING_FILE: &str = "ibfabric-mapping.txt";
/// The routers' egress tables, beside the subnets' directories.
pub const EGRESS_FILE: &str = "router-egress.txt";

/// Files written beside their targets, complete on disk, replaced by
/// [`StagedFiles::commit`]; files of an earlier run that this one does not
/// have are removed then.
#[derive(Default)]
pub struct StagedFiles {
    staged: Vec<Staged>,
    stale: Vec<PathBuf>,
}

impl StagedFiles {
    /// Puts the files in place, then removes the stale ones.
    pub fn commit(self) -> Result<RoutingFiles, Error> {
        let mut out = RoutingFiles::default();
        for s in self.staged {
            out.written.push(s.commit()?);
        }
        for p in self.stale {
            if fsio::remove(&p)? {
                out.removed.push(p);
            }
        }
        Ok(out)
    }

    fn text(&mut self, path: &Path, text: String) -> Result<(), Error> {
        self.staged.push(fsio::stage(path, Options::default(), |w| {
            w.write_all(text.as_bytes())
        })?);
        Ok(())
    }
}

/// Stages a subnet's mapping files in `dir`: the mapping `m` and, where it
/// can say it, OpenSM's prefix routes (warned when a remote prefix is
/// reached through a router with several ports into the subnet, `f` when
/// known). Without a mapping both files of an earlier run are stale: they
/// would tell the subnet's operator of routes that are gone. A mapping
/// that prefix routes cannot say leaves none, rather than routes that
/// contradict it.
pub fn stage_mapping(
    dir: &Path,
    f: Option<&Fabric>,
    m: Option<&Mapping>,
) -> Result<StagedFiles, Error> {
    let mut out = StagedFiles::default();
    let (mp, pr) = (
        dir.join(MAPPING_FILE),
        dir.join(prefix_routes::PREFIX_ROUTES_FILE),
    );
    let Some(m) = m else {
        out.stale.extend([mp, pr]);
        return Ok(out);
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    out.text(&mp, mapping::write(m))?;
    match prefix_routes::from_mapping(m) {
        Ok(t) => {
            if let Some(w) = f.and_then(|f| prefix_routes::ambiguity_warning(f, m)) {
                // A caveat for stock OpenSM (the plugin answers from the
                // mapping): said once per subnet and text, not at every
                // mapping, and not as a fault of a healthy run.
                static SAID: std::sync::Mutex<Vec<(u64, String)>> =
                    std::sync::Mutex::new(Vec::new());
                let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
                if !said.iter().any(|(p, t)| *p == m.prefix && *t == w) {
                    tracing::info!(prefix = format_args!("{:#018x}", m.prefix), "{w}");
                    said.push((m.prefix, w));
                }
            }
            out.text(&pr, t)?;
        }
        Err(e) => {
            tracing::info!("no {}: {e}", pr.display());
            out.stale.push(pr);
        }
    }
    Ok(out)
}

/// One subnet of a multi-subnet fabric to write: its directory, fabric and
/// staged tables.
pub struct SubnetOut<'a> {
    pub dir: PathBuf,
    pub fabric: &'a Fabric,
    pub prefix: u64,
    pub tables: StagedRouting,
}

/// Writes a whole multi-subnet fabric: every subnet's tables and mapping
/// files, and `out/router-egress.txt`. Every file of every subnet is
/// complete on disk before the first one replaces its old version, so an
/// error while writing (a full disk) leaves the previous tables whole, not
/// some subnets new.
pub fn write_fabric(
    out: &Path,
    subnets: Vec<SubnetOut<'_>>,
    routes: &InterSubnetRoutes,
) -> Result<RoutingFiles, Error> {
    let mut others = Vec::new();
    let mut tables = Vec::new();
    for s in subnets {
        let m = routes.mappings.iter().find(|m| m.prefix == s.prefix);
        others.push(stage_mapping(&s.dir, Some(s.fabric), m)?);
        tables.push(s.tables);
    }
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let mut egress_file = StagedFiles::default();
    egress_file.text(&out.join(EGRESS_FILE), egress::write(&routes.routers))?;
    others.push(egress_file);
    let mut done = RoutingFiles::default();
    for t in tables {
        let d = t.commit()?;
        done.written.extend(d.written);
        done.removed.extend(d.removed);
    }
    for o in others {
        let d = o.commit()?;
        done.written.extend(d.written);
        done.removed.extend(d.removed);
    }
    Ok(done)
}
