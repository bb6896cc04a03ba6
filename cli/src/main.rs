//! `redlease`: a Redlock distributed lock on the command line.
//!
//! - `redlease run -k KEY CMD…` — like `flock(1)`, across machines;
//! - `redlease elect -k NAME CMD…` / `redlease leader -k NAME` — leader election;
//! - `redlease status -k KEY` / `redlease scan` — inspect the nodes (`--json` for scripts);
//! - `redlease servers` — start local nodes (or Redis Clusters) in the foreground;
//! - `redlease demo` — locks over 5 local nodes, with faults, in under a minute;
//! - `redlease completions SHELL` — shell completions.

mod acquire;
mod connect;
mod demo;
mod duration;
mod elect;
mod help;
mod inspect;
mod out;
mod permits;
mod ready;
mod redis_cluster;
mod reentry;
mod run;
mod say;
mod secret;
mod sentinel;
mod signals;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand};
use help::{COMPLETIONS_HELP, EXIT_SUMMARY, RUN_EXIT_SUMMARY, RUN_MANUAL};
use redlease_core::MAX_PERMITS;
pub(crate) use say::warn;

/// Exit status for bad usage: no nodes, bad URL, bad duration or flag (BSD `EX_USAGE`).
pub(crate) const EXIT_USAGE: u8 = 64;
/// Exit status when no quorum of nodes answered: down, timed out, refused our login
/// (`EX_UNAVAILABLE`).
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// Exit status when the lock was lost while the command ran (`EX_SOFTWARE`).
pub(crate) const EXIT_LOST: u8 = 70;
/// Exit status when the operating system refused something (`EX_OSERR`).
pub(crate) const EXIT_OSERR: u8 = 71;
/// Exit status when nodes refuse us for a configuration reason (a wrong password or user, an
/// ACL, a database) and no quorum is left: retrying does not help (`EX_CONFIG`).
pub(crate) const EXIT_CONFIG: u8 = 78;
/// Default exit status when the lock is held by someone else (`EX_TEMPFAIL`); `-E` changes it.
pub(crate) const EXIT_CONFLICT: u8 = 75;

#[derive(Parser, Debug)]
#[command(
    name = "redlease",
    version,
    about = "Redlock distributed locks over independent Redis nodes: flock(1) across machines",
    after_help = EXIT_SUMMARY
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a command while holding a lock, like flock(1) across machines.
    ///
    /// Example: redlease run -k backup -t 10s -w 30 ./backup.sh
    ///
    /// The command sees REDLEASE_KEY and REDLEASE_FENCE (the fencing token). The lock is extended
    /// while it runs and released when it exits; redlease exits with the command's status.
    /// With -s (as flock -s), a read lock of KEY: runs with -s overlap one another, and a run
    /// without it (the write lock, -x) excludes them and is excluded by them; the command's
    /// REDLEASE_FENCE is then the writer epoch (the fencing token of KEY's last writer).
    /// With --permits L, KEY names a semaphore: at most L commands run at once under it, across
    /// every machine, and the command sees its permit (0 to L-1) in REDLEASE_PERMIT.
    /// A run of KEY started by the command (at any depth) on the same nodes re-enters the lock
    /// at once, with the same REDLEASE_FENCE, instead of waiting for it; --no-reentry turns
    /// that off.
    /// Exit 75 (or -E N): held by someone else (every permit taken). Exit 69: nodes unreachable.
    /// Exit 78: nodes misconfigured (or they record another --permits limit for KEY). Exit 70:
    /// lock lost while running. Exit 64: bad usage. `--help` (not -h) shows the whole manual.
    #[command(after_help = RUN_EXIT_SUMMARY, after_long_help = RUN_MANUAL)]
    Run(RunCli),
    /// Run a command only while this process leads an election; stand by until then.
    ///
    /// Example: redlease elect -k scheduler --value 10.0.0.7:8080 -- ./scheduler
    ///
    /// redlease campaigns for NAME (waiting in line, without a bound, while another candidate
    /// leads), then runs the command with REDLEASE_ELECTION and REDLEASE_EPOCH (the leadership's
    /// fencing token: larger than every earlier leader's), keeping the leadership extended.
    /// The command never outlives it: signals are passed on, a lost leadership stops it
    /// (SIGTERM, SIGKILL after --grace; exit 70), and on Linux the kernel kills it if redlease
    /// dies. When it exits, redlease resigns (the next candidate in line leads at once) and
    /// exits with its status. Exit 69: nodes unreachable; 78: misconfigured; 64: bad usage.
    Elect(ElectCli),
    /// Print who leads an election: its value and epoch, one line (or --json); exit 3 when
    /// nobody leads.
    ///
    /// Example: redlease leader -k scheduler --json
    ///
    /// The leader is the candidate a quorum of the nodes hold. During a handover there is a
    /// moment without one (exit 3), and for about one round trip before the new leader starts
    /// its command the epoch shown can still be its predecessor's. Exit 69 when no quorum of
    /// nodes answered, 64 on bad usage.
    Leader {
        /// The election's name.
        #[arg(short, long)]
        key: String,
        #[command(flatten)]
        nodes: NodesArg,
        /// One JSON object on stdout: {"election":NAME,"leader":{"value":V,"epoch":N}} or
        /// {"election":NAME,"leader":null}.
        #[arg(long)]
        json: bool,
    },
    /// Show, per node, whether it is reachable, who holds the key, its PTTL and fencing counter,
    /// and whether a waiter was refused by that holder ("waited for"); for a key readers share
    /// (run -s), each node's readers; for a semaphore (run --permits), its limit and who holds
    /// each permit.
    ///
    /// Example: redlease status -k backup --json
    ///
    /// The --json object's top level says whether the name is held, whatever its shape:
    /// "state" (held, not_held, unknown), "held" (true, false, null when unknown), "shape"
    /// (exclusive: a lock or write lock; shared: readers; semaphore: at least one permit held;
    /// null), "holder" (the exclusive holder's token, else null) and "holders" (every token
    /// that holds it on a quorum of nodes: the holder, the readers, the permits' holders).
    /// Each node's "holder" is a token or null; "shared" is true where readers hold the key.
    ///
    /// While readers hold the key (its value is :readers on a node, or :readers:TOKEN while one
    /// reader holds it alone), each node's line says how
    /// many, and whether a writer waits there (no new reader joins it then), followed by a line per
    /// reader: its token and the time it has left on that node's clock. The last line says how
    /// many readers hold the key on a quorum of nodes. With --json the object's "readers" member
    /// says the same (null when no node holds the key for readers).
    ///
    /// When the nodes record a semaphore of the name, status shows its occupancy: each node's
    /// limit and permits, then each permit held somewhere (holder, nodes, shortest PTTL, fencing
    /// counter) and how many permits are held and free. The key's own lines are left out while no
    /// node holds it. With --json the object's "semaphore" member says the same (null when
    /// none is recorded).
    ///
    /// A node that is a Redis Cluster (give one URL of it) is read on the master serving the key's
    /// slot, where the key is stored as {KEY} unless KEY has a hash tag; its line names that master.
    ///
    /// Exit 0 when a quorum of nodes answered, 69 when not (usable as a health check), 64 on
    /// bad usage.
    Status {
        /// The lock key (resource name), or a semaphore's name.
        #[arg(short, long)]
        key: String,
        #[command(flatten)]
        nodes: NodesArg,
        /// One JSON object on stdout instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// List keys with no TTL on any node (a lock leak check), the semaphores, and the keys
    /// readers share.
    ///
    /// Example: redlease scan -p 'jobs:*' --json
    ///
    /// A key held by readers (run -s) is listed with the number of readers that hold it on a
    /// quorum of nodes and on each node ("shared" with --json); its set of readers
    /// (redlease:readers:KEY; none while one reader holds the key alone, as :readers:TOKEN) has
    /// a TTL while they hold it, and counts as a leak without one.
    /// Semaphores (run --permits) whose names match the pattern are listed apart, one line per
    /// name: the limit the nodes record and the permits each node holds; a permit without a TTL
    /// is a leak like a key. Fencing counters (redlease:fence:*) and semaphore limits
    /// (redlease:sem:{NAME}:limit) live without a TTL by design and are never reported. Exit 1
    /// if a key without TTL was found, else 69 if a node did not answer, else 0.
    ///
    /// A node that is a Redis Cluster is scanned on every master, its keys listed by name ({KEY} as
    /// KEY, with the key as stored and its master), so that it compares with standalone nodes.
    Scan {
        #[command(flatten)]
        nodes: NodesArg,
        /// Key pattern (Redis glob); it matches semaphores by name, and readers' sets by their key.
        #[arg(short, long, default_value = "*")]
        pattern: String,
        /// One JSON object on stdout instead of the list.
        #[arg(long)]
        json: bool,
    },
    /// Start local redis-server nodes in the foreground and print their URLs; Ctrl-C stops them.
    ///
    /// Example: redlease servers --nodes 5 -p 7000
    ///
    /// With --cluster-mode, each node is a local Redis Cluster instead: --masters masters
    /// (cluster-enabled yes, the 16384 slots split evenly), each with --replicas replicas.
    /// REDLEASE_NODES then lists one seed URL per cluster (its first master): a client finds the
    /// other nodes of a cluster from its seed, and a whole Redis Cluster counts as one node of
    /// the Redlock. Plain TCP only.
    ///
    /// Example: redlease servers --cluster-mode --masters 3 --replicas 1
    ///
    /// With --sentinel, each node is a primary with --replicas replicas [default: 1], watched
    /// by one group of --sentinels sentinels (redis-server --sentinel, down-after-milliseconds
    /// 1000), each node a service of its own (redlease-0, redlease-1, ...). REDLEASE_NODES then
    /// lists one redis+sentinel://SENTINELS/SERVICE?min_replicas=1 URL per node; with --tls,
    /// rediss+sentinel:// (TLS to the sentinels and the data nodes, which replicate over TLS).
    ///
    /// Example: redlease servers --sentinel --nodes 3
    #[command(alias = "cluster")]
    Servers {
        /// Number of nodes [default: 5; with --sentinel, 3]; with --cluster-mode, number of Redis
        /// Clusters [default: 1].
        #[arg(long)]
        nodes: Option<usize>,
        /// Port of the first node; the others follow it (default: free ports): the nodes
        /// first (with --tls, their TLS ports), then the replicas, node by node. With
        /// --cluster-mode, the masters come first, then the replicas; each cluster bus listens
        /// on its node's port + 10000.
        #[arg(short, long)]
        port: Option<u16>,
        /// Listen with TLS too (a generated CA; its files are printed), and print rediss:// URLs
        /// (with --sentinel, rediss+sentinel://).
        #[arg(long, conflicts_with = "cluster_mode")]
        tls: bool,
        /// Persist with appendonly yes + appendfsync always (safe restarts).
        #[arg(long)]
        persist: bool,
        /// Give each node this many replicas [default: 0], and print URLs whose grants wait for
        /// one of them (?min_replicas=1). Plain TCP only. With --cluster-mode, the replicas of
        /// each master [default: 1] (the seed URLs get no ?min_replicas).
        #[arg(long)]
        replicas: Option<usize>,
        /// Start local Redis Clusters (redis-server --cluster-enabled yes) instead of
        /// standalone nodes, and print one seed URL per cluster.
        #[arg(long)]
        cluster_mode: bool,
        /// Masters of each Redis Cluster [default: 3] (with --cluster-mode).
        #[arg(long, requires = "cluster_mode")]
        masters: Option<usize>,
        /// Start Sentinel-managed nodes (a primary with replicas each, watched by sentinels)
        /// and print one redis+sentinel:// URL per node.
        #[arg(long, conflicts_with = "cluster_mode")]
        sentinel: bool,
        /// Sentinels watching the nodes [default: 3] (with --sentinel).
        #[arg(long, requires = "sentinel")]
        sentinels: Option<usize>,
    },
    /// Show locks at work on 5 local nodes, with node failures, then clean up.
    ///
    /// Example: redlease demo
    Demo {
        /// Workers contending for the lock.
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Run the nodes with TLS (a generated CA) and lock over rediss://.
        #[arg(long)]
        tls: bool,
    },
    /// Print a completion script for a shell.
    #[command(long_about = COMPLETIONS_HELP)]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The options of `redlease run`.
#[derive(Args, Debug)]
struct RunCli {
    /// The lock key (resource name); with --permits, the semaphore's name.
    #[arg(short, long)]
    key: String,
    #[command(flatten)]
    nodes: NodesArg,
    /// A semaphore of L permits named KEY instead of the key's lock: at most L commands run at
    /// once, across every machine (each run holds one permit; the command sees which one in
    /// REDLEASE_PERMIT). Every run of KEY must give the same L.
    #[arg(long, value_name = "L", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PERMITS)))]
    permits: Option<u32>,
    /// With --permits: take M of the permits at once, all or nothing (default 1).
    #[arg(long, value_name = "M", requires = "permits", value_parser = clap::value_parser!(u32).range(1..))]
    take: Option<u32>,
    /// A read lock of KEY, as flock -s: runs with -s share KEY and overlap one another; a run
    /// without -s excludes them. The command's REDLEASE_FENCE is the writer epoch it reads
    /// under: the fencing token of KEY's last writer (0 before any), the same for every reader.
    #[arg(short, long, overrides_with = "exclusive", conflicts_with = "permits")]
    shared: bool,
    /// The write lock of KEY, as flock -x (the default): excludes every other run of KEY, with
    /// -s or not. The last of -s and -x given wins.
    #[arg(short = 'x', long, visible_short_alias = 'e', overrides_with = "shared")]
    exclusive: bool,
    /// Do not re-enter: wait for KEY even under a run of KEY, and do not let runs under this
    /// one re-enter its lock. By default a run of KEY's write lock started
    /// by the command of another (at any depth) on the same nodes takes the lock at once, as a
    /// second hold of the same owner, instead of waiting for it.
    #[arg(long)]
    no_reentry: bool,
    /// Time to live of the lock on the nodes; extended about every TTL/3 while the command runs.
    #[arg(short, long, default_value = "10s", value_parser = duration::parse, value_name = "DURATION")]
    ttl: Duration,
    /// Wait up to this long for the lock (seconds, or 500ms, 2m, 1d, ...), then exit 75 (or -E N).
    /// `forever` (or `inf`): no bound; 0: one attempt, like -n.
    #[arg(
        short,
        long,
        visible_alias = "timeout",
        default_value = "30",
        value_parser = duration::parse_bound,
        value_name = "SECONDS",
        conflicts_with = "nonblock"
    )]
    wait: duration::Bound,
    /// Wait up to this long for a quorum of nodes to answer (default: the connect timeout, 1s),
    /// then exit 69; `forever` (or `inf`): no bound. Nodes refusing our password still exit 78 at once.
    #[arg(long, value_parser = duration::parse_bound, value_name = "DURATION")]
    wait_nodes: Option<duration::Bound>,
    /// Say nothing on stderr about expected outcomes (the lock held by someone else, a signal
    /// passed on), as flock(1); errors still print.
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// Say each step on stderr: the nodes connected, the lock (or permits) and its fencing
    /// token, the command's status, the release.
    #[arg(short, long)]
    verbose: bool,
    /// Make one attempt and exit 75 (or -E N) at once if someone else holds the lock.
    #[arg(short, long)]
    nonblock: bool,
    /// Exit status when the lock is held by someone else, 0 to 255 (flock(1) uses 1).
    #[arg(short = 'E', long, default_value_t = EXIT_CONFLICT, value_name = "N", value_parser = exit_status)]
    conflict_exit_code: u8,
    /// After a signal passed on or a lost lock: how long the command has to exit before SIGKILL.
    #[arg(short, long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    grace: Duration,
    /// Run this command line with `sh -c` (as flock -c does), instead of CMD.
    #[arg(short = 'c', long = "command", value_name = "STRING", conflicts_with = "argv")]
    shell_command: Option<String>,
    /// The command and its arguments (after `--` if the command starts with a dash).
    #[arg(trailing_var_arg = true, value_name = "CMD", required_unless_present = "shell_command")]
    argv: Vec<String>,
}

/// The options of `redlease elect`.
#[derive(Args, Debug)]
struct ElectCli {
    /// The election's name (no '{' or '}': it is the hash tag of the election's keys).
    #[arg(short, long)]
    key: String,
    #[command(flatten)]
    nodes: NodesArg,
    /// Time to live of the leadership: a leader that stops is replaced within about this long.
    #[arg(short, long, default_value = "10s", value_parser = duration::parse, value_name = "DURATION")]
    ttl: Duration,
    /// This candidate's value, which `redlease leader` shows while it leads (an id or an
    /// address; at most 512 bytes) [default: HOST:PID].
    #[arg(long, value_name = "V")]
    value: Option<String>,
    /// Wait up to this long for a quorum of nodes to answer (default: the connect timeout, 1s),
    /// then exit 69; `forever` (or `inf`): no bound.
    #[arg(long, value_parser = duration::parse_bound, value_name = "DURATION")]
    wait_nodes: Option<duration::Bound>,
    /// Say nothing on stderr about expected outcomes, as flock(1); errors still print.
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// Say each step on stderr: standing by, leading in which epoch, the command's status.
    #[arg(short, long)]
    verbose: bool,
    /// After a signal passed on or a lost leadership: how long the command has to exit before
    /// SIGKILL.
    #[arg(short, long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    grace: Duration,
    /// The command and its arguments (after `--` if the command starts with a dash).
    #[arg(trailing_var_arg = true, value_name = "CMD", required = true)]
    argv: Vec<String>,
}

impl ElectCli {
    /// What `elect` was asked to do; sets how much it says on stderr.
    fn into_args(self) -> elect::ElectArgs {
        say::set(match (self.quiet, self.verbose) {
            (true, _) => say::Verbosity::Quiet,
            (_, true) => say::Verbosity::Verbose,
            _ => say::Verbosity::Normal,
        });
        elect::ElectArgs {
            name: self.key,
            tls: self.nodes.tls(),
            key_prefix: self.nodes.key_prefix.clone(),
            nodes: self.nodes.nodes,
            ttl: self.ttl,
            value: self.value,
            wait_nodes: self.wait_nodes,
            grace: self.grace,
            argv: self.argv,
        }
    }
}

impl RunCli {
    /// What `run` was asked to do; sets how much it says on stderr.
    fn into_run_args(self) -> Result<run::RunArgs, Usage> {
        say::set(match (self.quiet, self.verbose) {
            (true, _) => say::Verbosity::Quiet,
            (_, true) => say::Verbosity::Verbose,
            _ => say::Verbosity::Normal,
        });
        let argv = match self.shell_command {
            Some(line) => vec!["sh".to_owned(), "-c".to_owned(), line],
            None => self.argv,
        };
        Ok(run::RunArgs {
            key: self.key,
            tls: self.nodes.tls(),
            key_prefix: self.nodes.key_prefix.clone(),
            nodes: self.nodes.nodes,
            ttl: self.ttl,
            wait: (!self.nonblock).then_some(self.wait),
            wait_nodes: self.wait_nodes,
            conflict_exit_code: self.conflict_exit_code,
            grace: self.grace,
            semaphore: permits::Semaphore::of(self.permits, self.take)?,
            // The last of -s and -x wins: at most one of them is set.
            shared: self.shared && !self.exclusive,
            reentry: !self.no_reentry,
            argv,
        })
    }
}

/// The nodes, from `--nodes` or `REDLEASE_NODES`. The value is never shown in `--help`.
#[derive(Args, Debug)]
struct NodesArg {
    /// The nodes (see the help text).
    #[arg(
        short = 'N',
        long,
        env = "REDLEASE_NODES",
        hide_env_values = true,
        value_name = "URLS",
        help = "Nodes as comma-separated redis://[user:pass@]host:port[/db] URLs (rediss:// for TLS, redis+unix:///path for a Unix socket, redis+sentinel://host:port,host:port/SERVICE for a master named by Redis Sentinel: an item without scheme:// continues the sentinel URL's host list)"
    )]
    nodes: Option<String>,
    /// CA certificates (PEM) to trust for rediss:// nodes, instead of the Web PKI roots.
    #[arg(long, env = "REDLEASE_TLS_CA", value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) for rediss:// nodes that require one (with --tls-key).
    #[arg(long, env = "REDLEASE_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM) (with --tls-cert).
    #[arg(long, env = "REDLEASE_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Prefix of every lock key on the nodes, as the library's Config::key_prefix (programs
    /// sharing one Redis): KEY is the key PREFIX+KEY, and scan's pattern PREFIX+PATTERN.
    #[arg(long, env = "REDLEASE_KEY_PREFIX", value_name = "PREFIX", default_value = "")]
    key_prefix: String,
}

impl NodesArg {
    /// The TLS settings of the flags.
    fn tls(&self) -> redlease_core::TlsSettings {
        let mut tls = redlease_core::TlsSettings::new();
        if let Some(ca) = &self.tls_ca {
            tls = tls.ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            tls = tls.client_cert_file(cert, key);
        }
        tls
    }
}

/// Parse an exit status for `-E`: a number from 0 to 255.
fn exit_status(s: &str) -> Result<u8, String> {
    s.trim().parse().map_err(|_| format!("{s:?} is not an exit status: give a number from 0 to 255 (flock(1) uses 1)"))
}

/// A usage error: printed with the `redlease:` prefix, exit 64.
#[derive(Debug)]
pub(crate) struct Usage(pub String);

/// Parse `--nodes` / `REDLEASE_NODES` into URLs, checking each one.
pub(crate) fn node_urls(nodes: Option<&str>) -> Result<Vec<redlease_core::NodeConfig>, Usage> {
    let raw = nodes.map(str::trim).filter(|s| !s.is_empty()).ok_or_else(|| {
        Usage("no nodes configured: pass --nodes redis://host:port,... or set REDLEASE_NODES".to_owned())
    })?;
    redlease_core::split_node_list(raw)
        .iter()
        .map(|u| redlease_core::NodeConfig::from_url(u).map_err(|e| Usage(format!("--nodes: {e}"))))
        .collect()
}

/// Run `work` until it finishes, SIGINT/SIGTERM arrives or stdout closes. The handlers are
/// installed before `work` starts anything, so an early Ctrl-C still drops (and so stops) every
/// local node the work started instead of killing the process with the nodes left running.
/// Exit 130 when interrupted, 141 when stdout's reader went away.
async fn until_interrupted(work: impl std::future::Future<Output = Result<u8, Usage>>) -> Result<u8, Usage> {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return Err(Usage("cannot install the SIGINT/SIGTERM handlers".into()));
    };
    out::defer_exit();
    tokio::select! {
        result = work => result,
        _ = int.recv() => Ok(130),
        _ = term.recv() => Ok(130),
        code = out::closed() => Ok(code),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
            if matches!(e.kind(), DisplayHelp | DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // clap quotes the arguments it rejects, which may be URLs with passwords.
            let _ = write!(std::io::stderr(), "{}", secret::scrub(&e.render().to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Cmd::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "redlease", &mut out::Stdout);
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            warn(&format!("cannot start the async runtime: {e}"));
            return ExitCode::from(EXIT_OSERR);
        }
    };
    // `block_on` runs the future on this, the main thread. `run` spawns its command from it,
    // and must: the parent-death signal fires when the spawning *thread* ends.
    let result = runtime.block_on(async move {
        match cli.command {
            Cmd::Demo { workers, tls } => until_interrupted(demo::run(workers, tls)).await,
            Cmd::Servers { nodes, port, persist, tls, replicas, sentinels, sentinel: true, .. } => {
                let shape = sentinel::Shape {
                    nodes: nodes.unwrap_or(3),
                    replicas: replicas.unwrap_or(1),
                    sentinels: sentinels.unwrap_or(3),
                    port,
                    persist,
                    tls,
                };
                until_interrupted(sentinel::start(shape)).await
            }
            Cmd::Servers { nodes, port, persist, tls, replicas, cluster_mode: false, .. } => {
                until_interrupted(inspect::servers(nodes.unwrap_or(5), port, persist, tls, replicas.unwrap_or(0))).await
            }
            Cmd::Servers { nodes, port, persist, replicas, masters, cluster_mode: true, .. } => {
                let shape = redis_cluster::Shape {
                    clusters: nodes.unwrap_or(1),
                    masters: masters.unwrap_or(3),
                    replicas: replicas.unwrap_or(1),
                    port,
                    persist,
                };
                until_interrupted(redis_cluster::start(shape)).await
            }
            Cmd::Run(args) => run::run(args.into_run_args()?).await,
            Cmd::Elect(args) => elect::elect(args.into_args()).await,
            Cmd::Leader { key, nodes, json } => {
                elect::leader(&key, nodes.nodes.as_deref(), nodes.tls(), &nodes.key_prefix, json).await
            }
            Cmd::Status { key, nodes, json } => {
                inspect::status(&nodes.key_prefix, &key, nodes.nodes.as_deref(), nodes.tls(), json)
            }
            Cmd::Scan { nodes, pattern, json } => {
                inspect::scan(nodes.nodes.as_deref(), nodes.tls(), &nodes.key_prefix, &pattern, json)
            }
            Cmd::Completions { .. } => Ok(0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Usage(msg)) => {
            warn(&msg);
            ExitCode::from(EXIT_USAGE)
        }
    }
}
