//! Test support (feature `testing`): a real etcd process on loopback.
//!
//! Each [`EtcdServer`] is its own single-member cluster on free ports with
//! its own data directory, so tests running in parallel do not share
//! state unless they share a server (then they use distinct namespaces,
//! see [`unique_namespace`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Ports are claimed ([`free_port`]) but only bound when etcd starts, so a
/// program that is not one of these tests can still take one first; a few
/// attempts make that harmless.
const START_ATTEMPTS: usize = 4;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Why a test etcd did not come up.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error(
        "etcd is not installed (no `etcd` on PATH and ETCD_BIN unset): \
         run scripts/install-deps.sh, which installs Debian's etcd-server"
    )]
    NotInstalled,
    #[error(
        "ETCD_BIN={} is not a file: point it at etcd, or unset it and \
         run scripts/install-deps.sh, which installs Debian's etcd-server",
        .0.display()
    )]
    NotAFile(PathBuf),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("etcd exited ({status}): {log}")]
    Exited {
        status: std::process::ExitStatus,
        log: String,
    },
    #[error("etcd not healthy on {addr} after {START_TIMEOUT:?}: {log}")]
    Unhealthy { addr: SocketAddr, log: String },
    #[error("etcd did not start after {START_ATTEMPTS} attempts: {0}")]
    GaveUp(Box<EtcdError>),
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> EtcdError {
    move |source| EtcdError::Io { what, source }
}

/// A namespace no other test (in this process or another) uses.
pub fn unique_namespace(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "/ibfabric-test/{test}-{}-{}-{nanos}/",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A running etcd, killed (and its data removed) on drop.
///
/// The process also gets SIGKILL when the thread that started it exits,
/// so a test process that is killed leaves no etcd behind; start it on the
/// thread that owns it (a test's own thread), not from a shared static.
pub struct EtcdServer {
    child: Option<Child>,
    endpoint: String,
    dir: PathBuf,
}

impl EtcdServer {
    /// Starts etcd and waits until it serves requests. Panics with the
    /// reason when it cannot: tests that need etcd must fail, not skip.
    pub fn start() -> Self {
        match Self::try_start() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    pub fn try_start() -> Result<Self, EtcdError> {
        Self::try_start_with(None)
    }

    /// Starts etcd serving clients over TLS only, with client certificates
    /// required (signed by `tls.ca`); `tls.cert` and `tls.key` are the
    /// server's. Panics with the reason when it cannot.
    pub fn start_tls(tls: &ibtls::TlsSettings) -> Self {
        match Self::try_start_with(Some(tls)) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn try_start_with(tls: Option<&ibtls::TlsSettings>) -> Result<Self, EtcdError> {
        let bin = etcd_binary()?;
        let mut attempt = 1;
        loop {
            match Self::start_once(&bin, tls) {
                Ok(s) => return Ok(s),
                Err(e) if attempt >= START_ATTEMPTS => return Err(EtcdError::GaveUp(Box::new(e))),
                Err(_) => attempt += 1,
            }
        }
    }

    fn start_once(bin: &Path, tls: Option<&ibtls::TlsSettings>) -> Result<Self, EtcdError> {
        let client = free_port()?;
        let peer = free_port()?;
        let metrics = free_port()?;
        let dir = std::env::temp_dir().join(format!(
            "ibfabric-etcd-{}-{}-{client}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let log = dir.join("etcd.log");
        let logf =
            std::fs::File::create(&log).map_err(io(format!("creating {}", log.display())))?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let client_url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new(bin);
        cmd.arg("--name")
            .arg("test")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(&client_url)
            .arg("--advertise-client-urls")
            .arg(&client_url)
            .arg("--listen-peer-urls")
            .arg(&peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_url)
            .arg("--initial-cluster")
            .arg(format!("test={peer_url}"))
            .arg("--initial-cluster-state")
            .arg("new")
            // Faster ticks lower etcd's minimum lease TTL (1.5 election
            // timeouts), so tests can use 1 s leader leases.
            .arg("--heartbeat-interval")
            .arg("50")
            .arg("--election-timeout")
            .arg("500")
            .arg("--logger")
            .arg("zap")
            .arg("--log-outputs")
            .arg("stderr")
            .arg("--log-level")
            .arg("warn")
            // Health in plaintext on its own port, whatever the clients use.
            .arg("--listen-metrics-urls")
            .arg(format!("http://127.0.0.1:{metrics}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf);
        if let Some(t) = tls {
            cmd.arg("--cert-file")
                .arg(&t.cert)
                .arg("--key-file")
                .arg(&t.key)
                .arg("--trusted-ca-file")
                .arg(&t.ca)
                .arg("--client-cert-auth");
        }
        die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(io(format!("starting {}", bin.display())))?;
        let mut s = Self {
            child: Some(child),
            endpoint: client_url,
            dir,
        };
        let addr: SocketAddr = ([127, 0, 0, 1], metrics).into();
        let t0 = Instant::now();
        loop {
            if healthy(addr) {
                return Ok(s);
            }
            let exited = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                return Err(EtcdError::Exited {
                    status,
                    log: tail(&log),
                });
            }
            if t0.elapsed() > START_TIMEOUT {
                s.kill();
                return Err(EtcdError::Unhealthy {
                    addr,
                    log: tail(&log),
                });
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The client URL, e.g. `http://127.0.0.1:40123`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn endpoints(&self) -> Vec<String> {
        vec![self.endpoint.clone()]
    }

    /// SIGKILL, as in a crash; the data directory stays until drop.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        tail(&self.dir.join("etcd.log"))
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn etcd_binary() -> Result<PathBuf, EtcdError> {
    if let Some(p) = std::env::var_os("ETCD_BIN") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(EtcdError::NotAFile(p));
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
        .ok_or(EtcdError::NotInstalled)
}

/// A loopback port for a test service to listen on, never handed out
/// twice by this machine's test processes while they may still bind it.
///
/// A port only probed free (bind, release) is not held: a second draw in
/// the same cluster, or a test running beside it, can get it again before
/// the first service binds it, and the loser of that race fails to start
/// (a router that never comes up shows as a control plane that never
/// converges). So every port handed out is remembered in this process and
/// claimed across processes by creating a file named after it; claims
/// older than [`PORT_CLAIM_LIFETIME`] are stale (their test is over). Ports
/// come from below the kernel's ephemeral range, which outgoing connections
/// draw from.
pub fn free_port() -> Result<u16, EtcdError> {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (from, to) = (10_000u16, low.saturating_sub(1));
    let claims = std::env::temp_dir().join("ibfabric-test-ports");
    std::fs::create_dir_all(&claims).map_err(io(format!("creating {}", claims.display())))?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos ^ (u64::from(std::process::id()) << 32) ^ SEQ.fetch_add(1, Ordering::Relaxed);
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed = handed.get_or_insert_with(HashSet::new);
    if to > from + 1_000 {
        for _ in 0..1_000 {
            // xorshift: other processes draw other sequences.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let port = from + (x % u64::from(to - from)) as u16;
            if handed.contains(&port) || !claim_port(&claims, port) {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                handed.insert(port);
                return Ok(port);
            }
        }
    }
    // No room below the ephemeral range: the kernel's choice, unclaimed.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("finding a free loopback port".into()))
}

/// How long a port claimed by [`free_port`] stays claimed: longer than
/// any test runs.
pub const PORT_CLAIM_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// Claims `port` for this process unless a live claim exists.
fn claim_port(dir: &Path, port: u16) -> bool {
    let f = dir.join(port.to_string());
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&f)
            .is_ok()
    };
    if create() {
        return true;
    }
    let stale = std::fs::metadata(&f)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > PORT_CLAIM_LIFETIME);
    // Of two processes finding the same stale claim, one creates it anew.
    stale && std::fs::remove_file(&f).is_ok() && create()
}

/// etcd's /health over plain HTTP/1.1: it answers `"health":"true"` only
/// once the member has a leader and serves requests.
fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let req = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

fn tail(log: &Path) -> String {
    let t = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = t.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the
    // parent; it is all the child runs before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
