//! `redlease`: a Redlock distributed lock on the command line.
//!
//! - `redlease demo` — locks over a local 5-node cluster, with faults, in under a minute;
//! - `redlease cluster` — start local nodes in the foreground;
//! - `redlease run --key K -- CMD…` — like `flock(1)`, across machines;
//! - `redlease status --key K` / `redlease scan` — inspect the nodes.

mod demo;
mod duration;
mod inspect;
mod run;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Exit status for bad usage: no nodes, bad URL, bad duration (BSD `EX_USAGE`).
pub(crate) const EXIT_USAGE: u8 = 64;
/// Exit status when the lock could not be acquired within `--wait` (`EX_TEMPFAIL`).
pub(crate) const EXIT_NOT_ACQUIRED: u8 = 75;
/// Exit status of `status` and `scan` when nodes do not answer (`EX_UNAVAILABLE`).
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// Exit status when the lock was lost while the command ran (`EX_SOFTWARE`).
pub(crate) const EXIT_LOST: u8 = 70;

#[derive(Parser, Debug)]
#[command(name = "redlease", version, about = "Redlock distributed locks over independent Redis nodes")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Show locks at work on a local 5-node cluster, with node failures, then clean up.
    ///
    /// Example: redlease demo
    Demo {
        /// Workers contending for the lock.
        #[arg(long, default_value_t = 4)]
        workers: usize,
    },
    /// Start local redis-server nodes in the foreground and print their URLs; Ctrl-C stops them.
    ///
    /// Example: redlease cluster --nodes 5 --port 7000
    Cluster {
        /// Number of nodes.
        #[arg(long, default_value_t = 5)]
        nodes: usize,
        /// Port of the first node; the others follow it (default: free ports).
        #[arg(long)]
        port: Option<u16>,
        /// Persist with appendonly yes + appendfsync always (safe restarts).
        #[arg(long)]
        persist: bool,
    },
    /// Run a command while holding a lock, like flock(1) across machines.
    ///
    /// Example: redlease run --key backup --ttl 10s --wait 30s -- ./backup.sh
    ///
    /// The command sees REDLEASE_KEY and REDLEASE_FENCE (the fencing token). The lock is extended
    /// while it runs and released when it exits; redlease exits with the command's status.
    /// Exit 75: not acquired within --wait. Exit 70: lock lost while running (the command got
    /// SIGTERM, then SIGKILL after --grace). Exit 64: bad usage.
    Run {
        #[command(flatten)]
        lock: LockArgs,
        /// Time to live of the lock on the nodes (extended while the command runs).
        #[arg(long, default_value = "10s", value_parser = duration::parse)]
        ttl: Duration,
        /// Give up (exit 75) if the lock is not acquired within this time.
        #[arg(long, default_value = "30s", value_parser = duration::parse)]
        wait: Duration,
        /// After a lost lock, time between SIGTERM and SIGKILL.
        #[arg(long, default_value = "5s", value_parser = duration::parse)]
        grace: Duration,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Show, per node, whether it is reachable, who holds the key, its PTTL and fencing counter.
    ///
    /// Example: REDLEASE_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001 redlease status --key backup --json
    ///
    /// Exit 0 when a quorum of nodes answered, 69 when not (usable as a health check), 64 on
    /// bad usage.
    Status {
        #[command(flatten)]
        lock: LockArgs,
        /// One JSON object on stdout instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Run the cross-runtime benchmark (adapters, floors and peers against 5 local nodes).
    ///
    /// Example: redlease bench --quick
    ///
    /// It runs `cargo bench -p redlease-benches --bench runtimes` in this source tree, which
    /// prints progress and the tables and (except with --quick) writes docs/benchmarks.md.
    Bench {
        /// Arguments for the benchmark runner, e.g. --quick.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<String>,
    },
    /// List keys with no TTL on any node (a lock leak check).
    ///
    /// Example: redlease scan --nodes redis://127.0.0.1:7000 --pattern 'jobs:*' --json
    ///
    /// Fencing counters (redlease:fence:*) live without a TTL by design and are never
    /// reported. Exit 1 if a key without TTL was found, else 69 if a node did not answer,
    /// else 0.
    Scan {
        /// Nodes as comma-separated redis:// URLs (default: $REDLEASE_NODES).
        #[arg(long, env = "REDLEASE_NODES", value_name = "URLS")]
        nodes: Option<String>,
        /// Key pattern (Redis glob).
        #[arg(long, default_value = "*")]
        pattern: String,
        /// One JSON object on stdout instead of the list.
        #[arg(long)]
        json: bool,
    },
}

/// The lock key and the nodes.
#[derive(Args, Debug)]
struct LockArgs {
    /// The lock key (resource name).
    #[arg(long)]
    key: String,
    /// The nodes (see the help text).
    #[arg(
        long,
        env = "REDLEASE_NODES",
        value_name = "URLS",
        help = "Nodes as comma-separated redis://[user:pass@]host:port[/db] URLs (default: $REDLEASE_NODES)"
    )]
    nodes: Option<String>,
}

/// A usage error: printed with the `redlease:` prefix, exit 64.
#[derive(Debug)]
pub(crate) struct Usage(pub String);

/// Parse `--nodes` / `REDLEASE_NODES` into URLs, checking each one.
pub(crate) fn node_urls(nodes: Option<&str>) -> Result<Vec<redlease_core::NodeConfig>, Usage> {
    let raw = nodes.map(str::trim).filter(|s| !s.is_empty()).ok_or_else(|| {
        Usage("no nodes configured: pass --nodes redis://host:port,... or set REDLEASE_NODES".to_owned())
    })?;
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|u| redlease_core::NodeConfig::from_url(u).map_err(|e| Usage(format!("--nodes: {e}"))))
        .collect()
}

/// Run `work` until it finishes or SIGINT/SIGTERM arrives. The handlers are installed before
/// `work` starts anything, so an early Ctrl-C still drops (and so stops) every local node the
/// work started instead of killing the process with the nodes left running. Exit 130 when
/// interrupted.
async fn until_interrupted(work: impl std::future::Future<Output = Result<u8, Usage>>) -> Result<u8, Usage> {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return Err(Usage("cannot install the SIGINT/SIGTERM handlers".into()));
    };
    tokio::select! {
        result = work => result,
        _ = int.recv() => Ok(130),
        _ = term.recv() => Ok(130),
    }
}

/// `redlease bench`: the benchmark runner is a cargo bench target of this source tree (its peers
/// are dev-dependencies), so run it through cargo.
fn bench(args: &[String]) -> Result<u8, Usage> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(std::path::Path::new("."));
    if !root.join("benches/benches/runtimes.rs").exists() {
        return Err(Usage(format!("bench needs the redlease source tree at {}", root.display())));
    }
    let status = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args(["bench", "-q", "-p", "redlease-benches", "--bench", "runtimes", "--"])
        .args(args)
        .status();
    match status {
        Ok(s) => Ok(s.code().map_or(1, |c| c as u8)),
        Err(e) => Err(Usage(format!("cannot run cargo ({e}): bench needs cargo on PATH"))),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind::{DisplayHelp, DisplayHelpOnMissingArgumentOrSubcommand, DisplayVersion};
            let code = match e.kind() {
                DisplayHelp | DisplayVersion => 0,
                DisplayHelpOnMissingArgumentOrSubcommand => EXIT_USAGE,
                _ => EXIT_USAGE,
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("redlease: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Cmd::Demo { workers } => until_interrupted(demo::run(workers)).await,
            Cmd::Cluster { nodes, port, persist } => until_interrupted(inspect::cluster(nodes, port, persist)).await,
            Cmd::Run { lock, ttl, wait, grace, command } => {
                run::run(&lock.key, lock.nodes.as_deref(), ttl, wait, grace, &command).await
            }
            Cmd::Status { lock, json } => inspect::status(&lock.key, lock.nodes.as_deref(), json),
            Cmd::Scan { nodes, pattern, json } => inspect::scan(nodes.as_deref(), &pattern, json),
            Cmd::Bench { args } => bench(&args),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Usage(msg)) => {
            eprintln!("redlease: {msg}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
