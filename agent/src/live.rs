//! Reading a running fabric through infiniband-diags: the topology as
//! `ibnetdiscover` sees it, the LFTs the switches hold (`dump_lfts`), every
//! switch's and CA's SL-to-VL tables (`smpquery sl2vl`), and the SL the
//! subnet manager answers in PathRecords (`ibfabric-pathrecord-sl`, built
//! with the OpenSM plugin). The outputs are kept as the tools print them,
//! in files `fabric::formats` reads, so `ibfabric verify` can check them
//! and [`fabric::audit::compare`] can hold them against what was written.

use fabric::model::{Fabric, NONE, NodeKind};
use fabric::tables::Routing;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const TOPOLOGY: &str = "ibnetdiscover.txt";
pub const LFTS: &str = "dump_lfts.txt";
pub const SL2VL: &str = "sl2vl.txt";
pub const PATH_SL: &str = "pathrecords.txt";

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("running {tool}: {source} (is infiniband-diags installed and on PATH?)")]
    Spawn {
        tool: String,
        source: std::io::Error,
    },
    #[error("{tool} failed ({status}): {stderr}")]
    Tool {
        tool: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error(transparent)]
    Fabric(#[from] fabric::error::Error),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Which local port the tools speak through, and where the PathRecord
/// reader is.
#[derive(Clone, Debug, Default)]
pub struct Diags {
    /// `-C`: the local CA name; the tools' default when `None`.
    pub ca: Option<String>,
    /// `-P`: the local port number.
    pub port: Option<u8>,
    /// `ibfabric-pathrecord-sl`; looked up on PATH when `None`.
    pub pathrecord_tool: Option<PathBuf>,
    /// `ibfabric-sl2vl-read` (every table in one process); looked up on
    /// PATH when `None`, and without it one `smpquery sl2vl` per port.
    pub sl2vl_tool: Option<PathBuf>,
    /// PathRecords per source: `None` asks every ordered pair of CAs
    /// (hosts squared), `Some(k)` each source's next `k` CAs in GUID order
    /// (a sample that still reaches every destination `k` times).
    pub path_sample: Option<usize>,
}

/// What was read back, as files in one directory and as tables.
pub struct ReadBack {
    pub dir: PathBuf,
    pub fabric: Fabric,
    pub routing: Routing,
    /// How many tool runs the read-back took.
    pub queries: usize,
}

impl Diags {
    /// A diag tool, or one of ours, speaking through the configured port.
    fn cmd(&self, tool: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(tool);
        if let Some(ca) = &self.ca {
            c.args(["-C", ca]);
        }
        if let Some(p) = self.port {
            c.args(["-P", &p.to_string()]);
        }
        c.stdin(Stdio::null());
        c
    }

    fn run(&self, mut c: Command, tool: &str, input: Option<&[u8]>) -> Result<Vec<u8>, LiveError> {
        let spawn = |e| LiveError::Spawn {
            tool: tool.to_string(),
            source: e,
        };
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            c.stdin(Stdio::piped());
        }
        let mut child = c.spawn().map_err(spawn)?;
        // Fed from another thread: a tool that answers while it reads fills
        // its stdout pipe, and a writer that waited for it would never
        // read it.
        let feeder = match (input, child.stdin.take()) {
            (Some(data), Some(mut stdin)) => {
                let data = data.to_vec();
                Some(std::thread::spawn(move || {
                    use std::io::Write;
                    stdin.write_all(&data)
                }))
            }
            _ => None,
        };
        let out = child.wait_with_output().map_err(spawn)?;
        if let Some(f) = feeder {
            match f.join() {
                Ok(r) => r.map_err(spawn)?,
                Err(_) => {
                    return Err(spawn(std::io::Error::other(
                        "the thread feeding the tool panicked",
                    )));
                }
            }
        }
        if !out.status.success() {
            return Err(LiveError::Tool {
                tool: tool.to_string(),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// The topology as the fabric reports it now.
    pub fn discover(&self) -> Result<String, LiveError> {
        let out = self.run(self.cmd("ibnetdiscover"), "ibnetdiscover", None)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Reads the topology and the switches' forwarding tables only: what
    /// confirms a drain stage. Its SL-to-VL tables and path SLs are the
    /// ones in force (or, in a recompute's second drain stage, carry no
    /// data: every end port is dropped), and end ports it drops cannot be
    /// asked by LID anyway.
    pub fn read_back_lfts(&self, dir: &Path) -> Result<ReadBack, LiveError> {
        let (f, lfts) = self.topology_and_lfts(dir)?;
        Ok(ReadBack {
            dir: dir.to_path_buf(),
            routing: Routing {
                lfts: fabric::formats::lft::read(&f, &lfts)?,
                sl2vl: None,
                path_sl: None,
                vls_needed: None,
            },
            fabric: f,
            queries: 2,
        })
    }

    fn topology_and_lfts(&self, dir: &Path) -> Result<(Fabric, PathBuf), LiveError> {
        std::fs::create_dir_all(dir).map_err(|e| LiveError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let write = |name: &str, bytes: &[u8]| save(dir, name, bytes);
        let topo = write(TOPOLOGY, self.discover()?.as_bytes())?;
        let f = fabric::formats::ibnetdiscover::read_with_lmc(&topo)?;
        let lfts = write(LFTS, &self.run(self.cmd("dump_lfts"), "dump_lfts", None)?)?;
        Ok((f, lfts))
    }

    /// Reads topology and tables into `dir` and parses them.
    pub fn read_back(&self, dir: &Path) -> Result<ReadBack, LiveError> {
        let write = |name: &str, bytes: &[u8]| save(dir, name, bytes);
        let (f, lfts) = self.topology_and_lfts(dir)?;
        let mut queries = 2;

        // One query per switch out port (it lists every in port) and one
        // per CA port: in one process when the reader is there.
        let mut ports = Vec::new();
        for n in 0..f.num_nodes() as u32 {
            if f.kind(n) == NodeKind::Switch {
                for out in 1..=f.num_ports(n) {
                    if f.remote(f.slot(n, out)) != NONE {
                        ports.push((f.switch_lid(n), Some((out, f.num_ports(n)))));
                    }
                }
            } else {
                for s in f.port_slots(n) {
                    if f.remote(s) != NONE && f.lid_of_slot(s) != 0 {
                        ports.push((f.lid_of_slot(s), None));
                    }
                }
            }
        }
        let reader = self
            .sl2vl_tool
            .clone()
            .unwrap_or_else(|| PathBuf::from("ibfabric-sl2vl-read"));
        let input: String = ports
            .iter()
            .map(|(lid, sw)| match sw {
                Some((out, np)) => format!("{lid} switch {out} {np}\n"),
                None => format!("{lid} ca\n"),
            })
            .collect();
        let c = self.cmd(&reader);
        let sl2vl = match self.run(c, &reader.display().to_string(), Some(input.as_bytes())) {
            Ok(out) => {
                queries += 1;
                out
            }
            Err(LiveError::Spawn { source, .. })
                if self.sl2vl_tool.is_none() && source.kind() == std::io::ErrorKind::NotFound =>
            {
                tracing::debug!("no ibfabric-sl2vl-read on PATH: one smpquery per port");
                let mut all = Vec::new();
                for (lid, sw) in &ports {
                    let mut c = self.cmd("smpquery");
                    c.args(["sl2vl", &lid.to_string()]);
                    if let Some((out, _)) = sw {
                        c.arg(out.to_string());
                    }
                    all.extend(self.run(c, "smpquery sl2vl", None)?);
                    queries += 1;
                }
                all
            }
            Err(e) => return Err(e),
        };
        let sl2vl = write(SL2VL, &sl2vl)?;

        let (input, lids) = self.path_queries(&f);
        let tool = self
            .pathrecord_tool
            .clone()
            .unwrap_or_else(|| PathBuf::from("ibfabric-pathrecord-sl"));
        let mut c = self.cmd(&tool);
        if lids {
            c.arg("--lids");
        }
        let records = self.run(c, &tool.display().to_string(), Some(input.as_bytes()))?;
        queries += 1;
        let path_sl = write(PATH_SL, &records)?;

        let routing = Routing {
            lfts: fabric::formats::lft::read(&f, &lfts)?,
            sl2vl: Some(fabric::formats::sl2vl::read(&f, &sl2vl)?),
            path_sl: fabric::formats::pathsl::read_optional(&f, &path_sl)?,
            vls_needed: None,
        };
        Ok(ReadBack {
            dir: dir.to_path_buf(),
            fabric: f,
            routing,
            queries,
        })
    }

    /// What the PathRecord reader is asked: ordered pairs of CA port GUIDs
    /// (every pair, or each source's next `path_sample` in GUID order).
    /// With LMC the SL may differ between two LIDs of the same ports, so
    /// every LID of the source is asked toward every LID of the
    /// destination, by LID (`true`: the reader's `--lids` mode).
    fn path_queries(&self, f: &Fabric) -> (String, bool) {
        let mut cas: Vec<(u64, fabric::model::Slot)> = f
            .endports()
            .iter()
            .filter(|&&s| f.kind(f.node_of(s)) == NodeKind::Ca)
            .map(|&s| (f.port_guid(s), s))
            .collect();
        cas.sort_unstable();
        let n = cas.len();
        if self.path_sample.is_none() && f.max_lmc() == 0 {
            let all = cas.iter().map(|(g, _)| format!("0x{g:016x}\n")).collect();
            return (all, false);
        }
        // Each source's next `k` CAs in GUID order; every ordered pair
        // when no sample is asked (k = n - 1).
        let k = self.path_sample.unwrap_or(n).min(n.saturating_sub(1));
        let pairs = (0..n).flat_map(move |i| (1..=k).map(move |j| (i, (i + j) % n)));
        if f.max_lmc() == 0 {
            let text = pairs
                .map(|(i, j)| format!("0x{:016x} 0x{:016x}\n", cas[i].0, cas[j].0))
                .collect();
            return (text, false);
        }
        let mut text = String::new();
        for (i, j) in pairs {
            for sl in f.lids_of_slot(cas[i].1) {
                for dl in f.lids_of_slot(cas[j].1) {
                    text.push_str(&format!("{sl} {dl}\n"));
                }
            }
        }
        (text, true)
    }
}

/// Writes one read-back file, crash-safe like every file ibfabric writes:
/// `verify` may read these while a later read-back replaces them.
fn save(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, LiveError> {
    let p = dir.join(name);
    fabric::fsio::write_bytes(&p, bytes, fabric::fsio::Options::default())
        .map_err(fabric::Error::from)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::generate::{Topology, generate, with_lmc};

    /// Every ordered pair of CAs when no sample is asked: by GUID at LMC 0
    /// (the reader pairs them), by every LID pair with LMC, each once.
    #[test]
    fn path_queries_ask_every_pair_once() {
        let f0 = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("topology");
        let n = f0.num_cas();
        let d = Diags::default();
        let (guids, lids) = d.path_queries(&f0);
        assert!(!lids);
        assert_eq!(guids.lines().count(), n);
        let f = with_lmc(&f0, 1).expect("LMC");
        let (text, lids) = d.path_queries(&f);
        assert!(lids);
        let pairs: std::collections::HashSet<&str> = text.lines().collect();
        assert_eq!(text.lines().count(), n * (n - 1) * 4);
        assert_eq!(pairs.len(), n * (n - 1) * 4);
        let sampled = Diags {
            path_sample: Some(2),
            ..Diags::default()
        };
        assert_eq!(sampled.path_queries(&f).0.lines().count(), n * 2 * 4);
        assert_eq!(sampled.path_queries(&f0).0.lines().count(), n * 2);
    }
}
