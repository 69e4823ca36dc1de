//! Exit codes, one meaning each, so scripts can tell a refused input from
//! tables that are unsafe to load.

/// Done, and the tables are what was asked.
pub const OK: i32 = 0;
/// An error: bad input (file, line, cause on stderr), I/O, a refused
/// request.
pub const ERROR: i32 = 1;
// 2 is clap's: a usage error on the command line.
/// The tables checked are unsafe: not deadlock free (a channel dependency
/// cycle, also in a mix of old and new tables) or some pairs unreachable.
pub const UNSAFE: i32 = 3;
/// `audit`: the fabric holds tables other than the set compared.
pub const DIFFERS: i32 = 4;
/// `reroute`: DQR found no path for some flow; a full recompute is needed.
pub const NO_REROUTE: i32 = 5;

/// `status`: the controllers answer, but without a leader, or something
/// lags (a subnet not live, an old version held, the store failing).
pub const DEGRADED: i32 = 6;

/// The table printed at the end of `--help`.
pub const HELP: &str = "\
Exit codes:
  0  done; the tables are deadlock free and connect every pair
  1  error: bad input (file, line and cause on stderr), I/O, refused request
  2  usage error on the command line
  3  the tables are unsafe: not deadlock free (also a mix of old and new
     tables during an update) or some pairs unreachable
  4  audit: the fabric holds tables other than the set compared
  5  reroute: DQR found no path for some flow (run a full recompute)
  6  status: no leader, or something lags (subnet not live, old version
     held, store failing)";

/// An error whose cause is unsafe tables: `main` exits with [`UNSAFE`].
#[derive(Debug)]
pub struct Unsafe(pub String);

impl std::fmt::Display for Unsafe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsafe {}

/// The exit code for an error `run` returned.
pub fn code_of(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<Unsafe>().is_some() {
        UNSAFE
    } else {
        ERROR
    }
}
