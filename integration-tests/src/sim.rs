//! ibsim + OpenSM on loopback, no IB hardware. Every process is killed by
//! PID when the handle drops, and each simulator gets its own abstract
//! socket name so tests can run in parallel.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const PRELOAD: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// The opensm.conf lines that make OpenSM apply the table set in `tables`
/// through the ibfabric plugin (polled every 200 ms), with no fallback
/// engine when the set cannot be applied.
pub fn plugin_conf(tables: &Path) -> String {
    format!(
        "event_plugin_name ibfabric\n\
         event_plugin_options ibfabric_dir={} ibfabric_poll_ms=200\n\
         routing_engine ibfabric,no_fallback\n",
        tables.display()
    )
}

/// Fails with instructions when the IB tools are not installed.
pub fn require_tools() -> Result<()> {
    let missing: Vec<&str> = ["ibsim", "opensm", "dump_lfts", "ibnetdiscover"]
        .into_iter()
        .filter(|t| {
            !std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(t).exists()))
                .unwrap_or(false)
        })
        .collect();
    if !missing.is_empty() || !Path::new(PRELOAD).exists() {
        bail!(
            "missing IB tools ({}{}): run scripts/test.sh, which installs opensm, ibsim-utils and infiniband-diags",
            missing.join(", "),
            if Path::new(PRELOAD).exists() {
                ""
            } else {
                " libumad2sim.so"
            }
        );
    }
    Ok(())
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running ibsim fabric.
pub struct Sim {
    dir: PathBuf,
    sock: String,
    sim_host: String,
    opensm: Option<Proc>,
    console: Option<std::process::ChildStdin>,
    _ibsim: Proc,
}

fn wait_for(path: &Path, what: &[&str], proc: &mut Child, timeout: Duration) -> Result<String> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for w in what {
            if text.contains(w) {
                return Ok(w.to_string());
            }
        }
        if let Some(st) = proc.try_wait()? {
            bail!(
                "process exited ({st}); {} ends with:\n{}",
                path.display(),
                tail(&text)
            );
        }
        if t0.elapsed() > timeout {
            bail!(
                "timeout after {timeout:?} waiting for {what:?} in {}:\n{}",
                path.display(),
                tail(&text)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

impl Sim {
    /// Starts ibsim on `net` (ibnetdiscover grammar) with a private socket;
    /// `dir` receives logs and is the tools' working directory (umad2sim
    /// creates `./sys-<pid>` there).
    pub fn start(net: &Path, dir: &Path) -> Result<Sim> {
        Self::start_inner(net, dir, false)
    }

    /// [`Sim::start`] with ibsim's console on a pipe, for [`Sim::console`]
    /// (`Unlink`, `ReLink`).
    pub fn start_with_console(net: &Path, dir: &Path) -> Result<Sim> {
        Self::start_inner(net, dir, true)
    }

    /// Sends one command to ibsim's console.
    pub fn console(&mut self, command: &str) -> Result<()> {
        use std::io::Write;
        let c = self
            .console
            .as_mut()
            .context("ibsim was started without its console")?;
        writeln!(c, "{command}")?;
        c.flush()?;
        Ok(())
    }

    fn start_inner(net: &Path, dir: &Path, console: bool) -> Result<Sim> {
        require_tools()?;
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let sock = format!(
            "ibfsim{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let text =
            std::fs::read_to_string(net).with_context(|| format!("reading {}", net.display()))?;
        let (mut nodes, mut switches, mut ports) = (0usize, 0usize, 0usize);
        let mut sim_host = None;
        for l in text.lines() {
            let mut w = l.split_whitespace();
            let kind = w.next().unwrap_or("");
            if matches!(kind, "Switch" | "Ca" | "Hca" | "Rt") {
                nodes += 1;
                ports += w.next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(0) + 1;
                if kind == "Switch" {
                    switches += 1;
                } else if sim_host.is_none() && kind != "Rt" {
                    // The SM sits on a CA: a router's first port may lie in
                    // another subnet's file.
                    sim_host = l.split('"').nth(1).map(String::from);
                }
            }
        }
        let sim_host = sim_host.context("the net has no CA for the SM to attach to")?;
        let log = dir.join("ibsim.log");
        let mut cmd = Command::new("ibsim");
        cmd.arg("-s");
        if !console {
            cmd.arg("-n");
        }
        let mut child = cmd
            .args(["-N", &(nodes * 2 + 64).to_string()])
            .args(["-S", &(switches * 2 + 16).to_string()])
            .args(["-P", &(ports * 2 + 1024).to_string()])
            .arg(net)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(dir)
            .stdin(if console {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(dir.join("ibsim.err"))?)
            .spawn()
            .context("starting ibsim")?;
        let console = child.stdin.take();
        let mut ibsim = Proc(child);
        wait_for(
            &log,
            &["Network simulator ready"],
            &mut ibsim.0,
            Duration::from_secs(30),
        )?;
        Ok(Sim {
            dir: dir.to_path_buf(),
            sock,
            sim_host,
            opensm: None,
            console,
            _ibsim: ibsim,
        })
    }

    /// A command that reaches the simulated fabric as the diag tools do
    /// (the umad2sim preload, this simulator's socket, the SM's CA).
    pub fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        self.tool(prog)
    }

    fn tool(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(prog);
        c.env("LD_PRELOAD", PRELOAD)
            .env("IBSIM_SOCKNAME", &self.sock)
            .env("SIM_HOST", &self.sim_host)
            .env("OSM_CACHE_DIR", self.dir.join("cache"))
            .env("OSM_TMP_DIR", self.dir.join("cache"))
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        c
    }

    /// Starts OpenSM (one sweep) with `conf_extra` appended to its config
    /// and waits for SUBNET UP. Returns the log text.
    pub fn run_opensm(&mut self, conf_extra: &str) -> Result<String> {
        self.run_opensm_with(conf_extra, &[])
    }

    /// [`Sim::run_opensm`] with extra environment (the plugin's directory
    /// in `LD_LIBRARY_PATH`).
    pub fn run_opensm_with(&mut self, conf_extra: &str, env: &[(&str, &Path)]) -> Result<String> {
        std::fs::create_dir_all(self.dir.join("cache"))?;
        let log = self.dir.join("opensm.log");
        let conf = self.dir.join("opensm.conf");
        std::fs::write(
            &conf,
            format!(
                "log_file {}\nlog_flags 0x03\nforce_log_flush TRUE\ndump_files_dir {}\nsweep_interval 0\n{conf_extra}\n",
                log.display(),
                self.dir.display()
            ),
        )?;
        let mut cmd = self.tool("opensm");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .arg("-F")
            .arg(&conf)
            .stdout(std::fs::File::create(self.dir.join("opensm.stdout"))?)
            .stderr(std::fs::File::create(self.dir.join("opensm.stderr"))?)
            .spawn()
            .context("starting opensm")?;
        let mut p = Proc(child);
        let got = wait_for(
            &log,
            &[
                "SUBNET UP",
                "ERRORS DURING INITIALIZATION",
                "No routing engine able",
            ],
            &mut p.0,
            Duration::from_secs(90),
        )?;
        let text = std::fs::read_to_string(&log)?;
        if got != "SUBNET UP" {
            bail!("OpenSM failed ({got}):\n{}", tail(&text));
        }
        self.opensm = Some(p);
        Ok(text)
    }

    /// The running OpenSM's PID (to signal it).
    pub fn opensm_pid(&self) -> Option<u32> {
        self.opensm.as_ref().map(|p| p.0.id())
    }

    /// OpenSM's log so far.
    pub fn opensm_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("opensm.log")).unwrap_or_default()
    }

    /// Waits until OpenSM's log holds `what` `count` times or more.
    pub fn wait_log(&mut self, what: &str, count: usize, timeout: Duration) -> Result<()> {
        let t0 = Instant::now();
        loop {
            if self.opensm_log().matches(what).count() >= count {
                return Ok(());
            }
            if let Some(p) = self.opensm.as_mut() {
                if let Some(st) = p.0.try_wait()? {
                    bail!("OpenSM exited ({st}):\n{}", tail(&self.opensm_log()));
                }
            }
            if t0.elapsed() > timeout {
                bail!(
                    "timeout after {timeout:?} waiting for {count} x '{what}':\n{}",
                    tail(&self.opensm_log())
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops OpenSM; the simulated switches keep what it programmed.
    pub fn stop_opensm(&mut self) {
        self.opensm = None;
    }

    /// Runs an infiniband-diags tool against the simulated fabric.
    pub fn diag(&self, prog: &str, args: &[&str]) -> Result<String> {
        let out = self
            .tool(prog)
            .args(args)
            .output()
            .with_context(|| format!("running {prog}"))?;
        if !out.status.success() {
            bail!(
                "{prog} {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
