//! `ibfabric`: the one user-facing binary. It parses the command line and
//! dispatches; each command lives in `cmd/`, the work in the libraries.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ibfabric",
    version,
    about = "Deadlock-free routing for InfiniBand subnets: generate topologies, route, verify",
    long_about = "ibfabric computes and verifies routing tables for InfiniBand subnets.\n\n\
        Topologies are read in the ibnetdiscover grammar (what `ibnetdiscover` prints and \
        `ibsim` reads). Tables are written as a compact table set (ibfabric-lfts.bin, \
        ibfabric-sl2vl.bin, ibfabric-pathsl.bin and their manifest ibfabric-tables.txt; \
        docs/table-set-format.md), which the ibfabric OpenSM plugin programs; \
        `--opensm-dump` also writes OpenSM's own files: opensm-lfts.dump (load with \
        `opensm -R file -U FILE`), opensm-sl2vl.dump and path-sl.txt.\n\n\
        Every table ibfabric writes has been checked by the verifier, which rebuilds the \
        channel dependency graph from the tables alone.\n\n\
        Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) or pass -v for more.",
    after_help = cmd::exit::HELP
)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log format on stderr: text (coloured only on a terminal) or json (one
    /// object per line, for journald or a log shipper).
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a topology file (ibnetdiscover grammar, loadable by ibsim).
    Gen(cmd::generate::GenArgs),
    /// Print counts, diameter and radix of a topology file.
    Info(cmd::info::InfoArgs),
    /// Route a topology with an engine, verify the result, write OpenSM files.
    Route(cmd::route::RouteArgs),
    /// Route a multi-subnet fabric (manifest): every subnet, the inter-subnet
    /// routes, a whole-fabric deadlock check; write tables and mapping files.
    RouteMulti(cmd::route_multi::RouteMultiArgs),
    /// Verify tables against a topology: connectivity, loops, deadlock freedom.
    Verify(cmd::verify::VerifyArgs),
    /// After a link or switch fault, reroute only the broken flows with the
    /// VLs in force (dynamic quick reconfiguration) and write the new set,
    /// with a drain stage first when the one-step update is not safe.
    Reroute(cmd::reroute::RerouteArgs),
    /// How many successive random link faults a routing survives with
    /// dynamic quick reconfiguration: the DQR paper's tolerance curve, per k.
    DqrCurve(cmd::dqr_curve::DqrCurveArgs),
    /// Read the tables a running fabric holds (diags tools through the local
    /// port), verify them, and compare them with a written table set.
    Audit(cmd::audit::AuditArgs),
    /// List the routing engines.
    Engines(cmd::engines::EnginesArgs),
    /// Run a subnet agent: route and verify the subnet, report to the controller, answer path queries.
    Agent(cmd::runtime::ConfigArgs),
    /// Run a controller: collect subnet reports, compute inter-subnet routes, push tables.
    Controller(cmd::runtime::ConfigArgs),
    /// Run a router's firmware side: hold egress tables, answer forwarding queries.
    Router(cmd::runtime::ConfigArgs),
    /// Run a worker: compute parts of verification jobs for `verify --workers`.
    Worker(cmd::runtime::ConfigArgs),
    /// Generate a multi-subnet fabric and run controller, agents and routers in one process.
    Demo(cmd::demo::DemoArgs),
    /// Simulate traffic over inter-subnet routes (packet level by default, flow level with
    /// `--model flow`): HPCC rings, uniform traffic.
    Sim(cmd::sim::SimArgs),
    /// Load-test one routed table set on the packet model: saturating uniform traffic, a share
    /// of it to the set's multicast groups; exits 3 when the fabric deadlocks, with the cycle.
    Load(cmd::load::LoadArgs),
    /// Make a CA and per-service certificates for mutual TLS between the services.
    Certs(cmd::certs::CertsArgs),
    /// Ask the controllers (and routers) what they hold: leader, term,
    /// subnets, versions published and held, and what lags.
    Status(cmd::status::StatusArgs),
    /// Remove a subnet from the controllers' view (an operator's act): its
    /// report, its claims and its mapping.
    Forget(cmd::forget::ForgetArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::docs::CompletionsArgs),
    /// Write man pages (ibfabric.1 and one per command) into a directory.
    Man(cmd::docs::ManArgs),
}

/// `println!` panics when stdout cannot be written (`> /dev/full`, a
/// closed pipe of a service command): that is an error of the output, said
/// in one line with exit 1, not a crash report.
fn exit_on_output_errors() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            eprintln!("ibfabric: cannot write the output: {why}");
            std::process::exit(cmd::exit::ERROR);
        }
        default(info);
    }));
}

fn main() {
    exit_on_output_errors();
    let cli = Cli::parse();
    // Commands that print for pipes end quietly when the reader goes
    // (`ibfabric gen ... -o - | head`), as Unix filters do. Services,
    // commands that feed child processes and commands that talk to other
    // processes over sockets (workers, services) keep Rust's default
    // (ignored, seen as an error on write): a closed peer must not kill
    // them, and a socket write to a peer that died (vectored writes carry
    // no MSG_NOSIGNAL) would end them silently.
    let quiet_on_pipe = match &cli.cmd {
        Cmd::Route(a) => !a.uses_network(),
        Cmd::Verify(a) => !a.uses_network(),
        Cmd::Gen(_)
        | Cmd::Info(_)
        | Cmd::RouteMulti(_)
        | Cmd::Reroute(_)
        | Cmd::DqrCurve(_)
        | Cmd::Engines(_)
        | Cmd::Sim(_)
        | Cmd::Load(_)
        | Cmd::Certs(_)
        | Cmd::Completions(_)
        | Cmd::Man(_) => true,
        _ => false,
    };
    if quiet_on_pipe {
        // SAFETY: setting a signal disposition before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        // Colour only for a person at a terminal, not into journald or a file.
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => fmt.json().with_ansi(false).init(),
    }
    if matches!(
        cli.cmd,
        Cmd::Agent(_) | Cmd::Controller(_) | Cmd::Router(_) | Cmd::Worker(_)
    ) {
        // Services hold a descriptor per client connection: the default
        // soft limit (1,024) is what a few hundred clients use up.
        let n = proto::listen::raise_fd_limit();
        tracing::debug!(open_files = n, "open-file limit");
    }
    let res = match cli.cmd {
        Cmd::Gen(a) => cmd::generate::run(a),
        Cmd::Info(a) => cmd::info::run(a),
        Cmd::Route(a) => cmd::route::run(a),
        Cmd::RouteMulti(a) => cmd::route_multi::run(a),
        Cmd::Verify(a) => cmd::verify::run(a),
        Cmd::Reroute(a) => cmd::reroute::run(a),
        Cmd::DqrCurve(a) => cmd::dqr_curve::run(a),
        Cmd::Audit(a) => cmd::audit::run(a),
        Cmd::Agent(a) => cmd::agent::run(a),
        Cmd::Controller(a) => cmd::controller::run(a),
        Cmd::Router(a) => cmd::router::run(a),
        Cmd::Worker(a) => cmd::worker::run(a),
        Cmd::Demo(a) => cmd::demo::run(a),
        Cmd::Sim(a) => cmd::sim::run(a),
        Cmd::Load(a) => cmd::load::run(a),
        Cmd::Certs(a) => cmd::certs::run(a),
        Cmd::Engines(a) => cmd::engines::run(a),
        Cmd::Status(a) => cmd::status::run(a),
        Cmd::Forget(a) => cmd::forget::run(a),
        Cmd::Completions(a) => cmd::docs::completions(a, <Cli as clap::CommandFactory>::command()),
        Cmd::Man(a) => cmd::docs::man(a, <Cli as clap::CommandFactory>::command()),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {}", cmd::error_text(&e));
            std::process::exit(cmd::exit::code_of(&e));
        }
    }
}
