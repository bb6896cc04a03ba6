//! The long help texts: the exit-code summaries and the manual of `redlease run`.

/// The exit codes, for `redlease --help`.
pub(crate) const EXIT_SUMMARY: &str = "\
Exit status of `redlease run`: the command's own, or 64 bad usage, 69 nodes unreachable,
70 lock lost while the command ran, 75 lock held by someone else (-E changes it), 78 nodes
misconfigured (a wrong password, an ACL, another --permits limit), 126/127 command not
executable/not found, 128+N killed by signal N. `redlease run --help` explains each. Any
subcommand whose output is closed early (`| head`) stops quietly with 141, as if killed by
SIGPIPE.";

/// The long help of `redlease completions` (not a doc comment: rustdoc reads `[1]` as a link).
pub(crate) const COMPLETIONS_HELP: &str = "\
Print a completion script for a shell.

Example: redlease completions bash > ~/.local/share/bash-completion/completions/redlease

zsh: redlease completions zsh > \"${fpath[1]}/_redlease\"
fish: redlease completions fish > ~/.config/fish/completions/redlease.fish";

/// The exit codes, for `redlease run -h`.
pub(crate) const RUN_EXIT_SUMMARY: &str = "\
Exit status: the command's own; 64 bad usage; 69 nodes unreachable; 70 lock lost while the
command ran; 75 lock held by someone else (-E N changes it); 78 nodes misconfigured (a wrong
password, an ACL, another --permits limit); 126/127 command not executable/not found; 128+N
killed by signal N. `redlease run --help` shows the whole manual.";

/// The man page of `redlease run`, shown by `redlease run --help`.
pub(crate) const RUN_MANUAL: &str = "\
Examples:
  redlease run -k nightly-backup ./backup.sh --full    # wait up to 30 s for the lock
  redlease run -k nightly-backup -n ./backup.sh        # skip the run if someone holds it
  redlease run -k deploy -w 120 -E 0 -c 'make deploy'  # wait 2 min; exit 0 if still held
  */5 * * * * redlease run -k sync -n -q ./sync.sh     # crontab: skip silently if held
  redlease run -k exports --permits 3 ./export.sh      # at most 3 exports at once
  redlease run -k catalog -s ./report.sh               # readers overlap; a run without -s
  redlease run -k catalog ./rebuild-catalog.sh         #   (the writer) excludes them
  redlease run -k deploy ./deploy-all.sh               # its scripts may run
                                                       #   redlease run -k deploy again

Durations: a bare number is seconds (-w 5, -t 0.5); 500ms, 10s, 2m, 1h and 1d are accepted too.
-w forever (or -w inf) waits for the lock without a bound; -w 0 makes one attempt, as -n does.

Environment:
  REDLEASE_NODES   the nodes, when --nodes is not given: comma-separated
                   redis://[user:pass@]host:port[/db] URLs, one per independent Redis
                   master (3 or 5). A master named by Redis Sentinel is
                   redis+sentinel://host:26379,host:26379/SERVICE (an item without
                   scheme:// continues the sentinel URL's host list). Its value is never
                   printed; the command inherits it only if no URL in it holds a password.
  REDLEASE_KEY     (set for the command) the key it runs under.
  REDLEASE_FENCE   (set for the command) the fencing token: a number that strictly increases
                   from one holder of KEY to the next. Give it to the store the lock protects,
                   and have the store refuse writes carrying a smaller token than it has seen
                   (docs/operations.md shows how), so a holder that was paused past its lock
                   cannot overwrite a later holder's work. With --permits it increases from
                   one holder of each permit to the next: keep the highest per permit. With -s
                   it is the writer epoch the command reads under: the fencing token of KEY's
                   last writer (a run without -s), 0 before any; every reader under one writer
                   sees the same number, and the next writer a larger one.
  REDLEASE_PERMIT  (set for the command, with --permits) the permit it holds, 0 to L-1; with
                   --take M, the M permits, ascending, comma-separated (0,2). Two commands
                   running at once never hold the same permit.
  REDLEASE_OWNER, REDLEASE_SCOPE, REDLEASE_OWNER_PID
                   (set for the command of a write lock, unless --no-reentry) who holds the
                   lock, which lock it is (KEY with --key-prefix, and a digest of the nodes'
                   URLs without passwords) and the run's pid: a run under it re-enters by them
                   (see Re-entry). Not secrets, but whoever has them can take the lock while
                   this run holds it.

Messages:
  Errors go to stderr always. Expected outcomes (the lock held by someone else, a signal
  passed on) too, unless -q; a run that goes well prints nothing, as flock(1). --verbose also
  says each step: the nodes connected, the lock and its fencing token, the command's status,
  the release.

The nodes:
  redlease first waits for a quorum of nodes to answer: for the connect timeout (1s), or as
  long as --wait-nodes says (forever: until they come up). -w is how long to wait for the lock
  once they have. Nodes that refuse our password or commands end it at once with 78.

The lock:
  KEY is taken on a quorum (N/2 + 1) of the nodes with a time to live of --ttl, extended about
  every TTL/3 while the command runs, and released when it exits. If redlease cannot extend it
  in time (a majority refused or did not answer), the lock is lost: the command gets SIGTERM,
  then SIGKILL after --grace, and redlease exits 70.

Read and write locks (-s, -x):
  As flock -s and -x. With -s, the command runs under a read lock of KEY: runs with -s share
  KEY and run at once; a run without -s (-x, the default: KEY's write lock) waits until no run
  with -s holds KEY, and runs with -s wait while it does. Writers go first: once a waiting
  writer was refused by the readers, no new reader joins until they have left. Each reader is
  extended, lost and released as above, and expires by its own TTL if its redlease dies. -s
  does not go with --permits. `redlease status -k KEY` shows the readers on each node.

Re-entry:
  A run of KEY's write lock started by the command of another run of KEY (directly, or by a
  script it runs, at any depth), with the same --key-prefix and the same nodes (in any order,
  whatever their passwords), takes the lock at once as a second hold of the same owner, instead
  of waiting for the lock its own caller holds until -w runs out. Its command sees the same
  REDLEASE_FENCE. The lock is free for others once every run holding it has exited; each run
  extends and releases its own hold. A nested run stops its command (SIGTERM, SIGKILL after
  --grace) and exits 70 if the lock is lost, or if the run it re-entered is gone (killed: its
  hold is no longer extended, and the nested run must not keep the lock past it). Only the
  nearest enclosing run can be re-entered: under a run of another key (or -s, or --permits)
  in between, a run of KEY waits. A run that is not under one, another key, other nodes, -s
  and --permits take their lock as any run does.
  --no-reentry turns re-entry off for the run and for the runs under it: they wait.

Semaphores (--permits L):
  KEY names a semaphore of L permits, apart from KEY's lock: at most L commands run at once
  under it, across every machine (a distributed sem). Each permit is a lock of its own, taken,
  extended, lost and released as above; --take M takes M permits at once, all or nothing.
  Every run of KEY must give the same L: the first run records it on each node (it stays
  there, without a TTL), and a run with another L is refused by those nodes and exits 78,
  naming them and both limits. To change L, stop every holder and delete
  redlease:sem:{KEY}:limit on every node. `redlease status -k KEY` shows who holds which permit.

Signals:
  SIGTERM, SIGINT and SIGHUP sent to redlease are passed on to the command (SIGINT only when it
  did not come from the terminal, which sends Ctrl-C to the command itself). redlease keeps
  extending the lock until the command exits, sends it SIGKILL if it is still running --grace
  after the first signal, then releases the lock and exits with the command's status (143
  after SIGTERM, 137 after SIGKILL, ...). A signal that arrives before the command started
  ends redlease with 128 + the signal (129 SIGHUP, 130 SIGINT, 143 SIGTERM).
  If redlease itself dies, even by SIGKILL, the command gets SIGKILL from the kernel at once
  (Linux: the parent-death signal), so it never runs on after the lock expires. Other systems
  have no parent-death signal: there a command whose redlease was SIGKILLed keeps running
  without the lock. Processes the command starts in the background are its own to stop:
  have it exec its last program, or stop its jobs when it gets SIGTERM.

Exit status:
  0-255  the command's own status, when it ran and exited
  128+N  the command was killed by signal N; or redlease got signal N before the command
         started (129 SIGHUP, 130 SIGINT, 143 SIGTERM)
  64     bad usage: no nodes, a bad URL, duration or flag (the message names it)
  69     nodes unreachable: no quorum of nodes answered (down, timed out) within the connect
         timeout (1s) or --wait-nodes, or while waiting for the lock, so nobody can hold it now
  78     nodes misconfigured: nodes refuse us for a configuration reason (a wrong password or
         user, an ACL, a database they do not have, a TLS certificate not trusted: --tls-ca, a
         KEY a Redis Cluster node cannot hash-tag; a URL's ?min_replicas=N on a node with fewer
         replicas online; with --permits, another limit recorded for KEY) and leave no quorum; exits at once, before or while waiting for the lock, since
         retrying does not fix it
  70     the lock was lost while the command ran (it got SIGTERM, then SIGKILL after --grace);
         for a run that re-entered its lock, also when the run it re-entered is gone
  71     the operating system refused something (the random source, a thread)
  75     the lock is held by someone else (with --permits: every permit is taken; with -s:
         a writer holds KEY or waits for it): at once with -n, or when --wait ran out; -E N
         makes this N (flock(1) uses 1)
  126    the command could not be executed
  127    the command was not found
As with flock(1), the command's own status can take any of these values; pick an -E value
that your command does not use if you must tell them apart.";
