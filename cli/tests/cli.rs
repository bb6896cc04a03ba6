//! The `redlease` command against real redis-server processes: flags and exit codes, the
//! shared-counter run, status and scan output (text and JSON), completions, the servers command
//! and the demo. Signals and secrets have their own files.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{nodes, redlease, run, signal, spawn_piped, stderr, stdout, wait_until};
use redlease_servers::{RedisConn, Servers};

#[test]
fn usage_errors_exit_64_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--key", "k", "--", "true"], "no nodes configured"),
        (&["run", "--key", "k", "--nodes", "http://h:1", "--", "true"], "--nodes"),
        (&["run", "--key", "k", "--nodes", "redis://h:0", "--", "true"], "port"),
        (&["run", "--key", "k", "--nodes", "redis://127.0.0.1:1", "--ttl", "10x", "--", "true"], "--ttl"),
        (&["run", "--key", "k", "--nodes", "redis://127.0.0.1:1", "--wait", "soon", "--", "true"], "--wait"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-w", "5x", "true"], "--wait"),
        (&["run", "--key", "k", "--nodes", "redis://127.0.0.1:1", "--ttl", "0s", "--", "true"], "--ttl"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-t", "0", "true"], "--ttl"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "--grace=-1", "true"], "--grace"),
        (&["run", "--key", "k", "--nodes", "redis://127.0.0.1:1"], "CMD"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-E", "256", "true"], "--conflict-exit-code"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-E", "x", "true"], "--conflict-exit-code"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-n", "-w", "5", "true"], "--nonblock"),
        (&["run", "-k", "k", "-N", "redis://127.0.0.1:1", "-c", "true", "--", "true"], "--command"),
        (&["run", "-k", "", "-N", "redis://127.0.0.1:1", "true"], "--key"),
        (&["status", "--key", "k"], "no nodes configured"),
        (&["status", "-N", "redis://127.0.0.1:1"], "--key"),
        (&["scan", "--nodes", "redis://h:x"], "--nodes"),
        (&["completions", "tcsh"], "tcsh"),
        (&["completions"], "SHELL"),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, needle) in cases {
        let out = run(redlease().args(*args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: expected {needle:?} in {}", stderr(&out));
    }
}

#[test]
fn help_and_version() {
    let out = run(redlease().arg("--version"));
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).starts_with("redlease "));
    for sub in ["demo", "servers", "run", "status", "scan", "completions"] {
        let out = run(redlease().args([sub, "--help"]));
        assert_eq!(out.status.code(), Some(0), "{sub}");
        let help = stdout(&out);
        assert!(help.contains("Example") && help.contains(&format!("redlease {sub}")), "{sub} --help: {help}");
    }
    // `cluster` is an alias of `servers`, and the help names `servers`.
    let alias = run(redlease().args(["cluster", "--help"]));
    assert_eq!(alias.status.code(), Some(0), "{}", stderr(&alias));
    assert_eq!(stdout(&alias), stdout(&run(redlease().args(["servers", "--help"]))));
    // The short and long flags of run, as in flock(1).
    let help = stdout(&run(redlease().args(["run", "--help"])));
    for flag in [
        "-k, --key",
        "-N, --nodes",
        "-t, --ttl",
        "-w, --wait",
        "--timeout",
        "-n, --nonblock",
        "-E, --conflict-exit-code",
        "-g, --grace",
        "-c, --command",
    ] {
        assert!(help.contains(flag), "run --help lacks {flag}: {help}");
    }
    // Top-level help points at the exit codes.
    let top = stdout(&run(redlease().arg("--help")));
    assert!(top.contains("69 nodes unreachable") && top.contains("75 lock held"), "{top}");
    let short = stdout(&run(redlease().args(["run", "-h"])));
    assert!(short.contains("Exit status:") && short.contains("69 nodes unreachable"), "{short}");
}

#[test]
fn run_help_is_a_manual_that_explains_every_exit_code() {
    let out = run(redlease().args(["run", "--help"]));
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    let section = help.split("Exit status:").nth(1).unwrap_or_else(|| panic!("no exit status section: {help}"));
    for code in ["0-255", "128+N", "64 ", "69 ", "70 ", "71 ", "75 ", "126 ", "127 "] {
        assert!(section.contains(&format!("  {code}")), "run --help does not explain exit {code}: {section}");
    }
    for topic in ["Examples:", "Environment:", "REDLEASE_FENCE", "Signals:", "SIGKILL", "parent-death", "--grace"] {
        assert!(help.contains(topic), "run --help lacks {topic}");
    }
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = run(redlease().args(["completions", shell]));
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.contains("redlease") && script.contains("nonblock"), "{shell}: {script}");
    }
}

#[test]
fn run_passes_env_and_exit_status() {
    let servers = Servers::start(3);
    let out = run(redlease().args(["run", "--key", "job", "--nodes", &nodes(&servers), "--"]).args([
        "sh",
        "-c",
        "echo \"$REDLEASE_KEY $REDLEASE_FENCE\"; exit 3",
    ]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let line = stdout(&out);
    let mut parts = line.split_whitespace();
    assert_eq!(parts.next(), Some("job"));
    let fence: u64 = parts.next().and_then(|f| f.parse().ok()).expect("REDLEASE_FENCE is a number");
    assert!(fence >= 1);
    // Released afterwards: the key is gone everywhere.
    for node in servers.nodes() {
        assert_eq!(node.conn().unwrap().get("job").unwrap(), None);
    }
    // A command that cannot be started: 127, and the lock is released.
    let out = run(redlease().args(["run", "--key", "job", "--nodes", &nodes(&servers), "--", "/nonexistent/cmd"]));
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    // One that cannot be executed: 126.
    let out = run(redlease().args(["run", "-k", "job", "-N", &nodes(&servers), "/"]));
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    servers.assert_no_leaks();
}

#[test]
fn run_takes_the_command_without_dashes_or_as_a_shell_line() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    // As flock(1): the command follows the options, and its own flags are its own.
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "sh", "-c", "echo \"$REDLEASE_KEY\"; exit 4"]));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "job");
    // -c: one command line for sh -c.
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-c", "echo \"$REDLEASE_FENCE\" && exit 6"]));
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stdout(&out).trim().parse::<u64>().is_ok(), "{}", stdout(&out));
    // Bare numbers are seconds, units still work, --timeout is --wait.
    for wait in [["-w", "5"], ["-w", "0.5"], ["--timeout", "2s"], ["--wait", "1500ms"]] {
        let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-t", "3"]).args(wait).args(["true"]));
        assert_eq!(out.status.code(), Some(0), "{wait:?}: {}", stderr(&out));
    }
    servers.assert_no_leaks();
}

/// Node URLs without a password are passed on, for the `redlease` a script runs; with a
/// password they are not (`secrets.rs`).
#[test]
fn the_command_inherits_node_urls_without_a_password() {
    let servers = Servers::start(3);
    let out = run(redlease().env("REDLEASE_NODES", nodes(&servers)).args([
        "run",
        "-k",
        "env",
        "-c",
        "echo \"nodes=${REDLEASE_NODES-unset} key=$REDLEASE_KEY\"",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("nodes={} key=env", nodes(&servers)));
}

#[test]
fn held_by_someone_else_and_nodes_unreachable_have_distinct_exit_codes() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let mut holder =
        redlease().args(["run", "-k", "busy", "-N", &urls, "--", "sleep", "5"]).stdin(Stdio::null()).spawn().unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("busy").unwrap().is_some());
    // -n: one attempt, exit 75 at once.
    let started = Instant::now();
    let out = run(redlease().args(["run", "-k", "busy", "-N", &urls, "-n", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("held by another client"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(4), "-n waited: {:?}", started.elapsed());
    // -E N replaces 75, with -n and with a wait bound.
    let out = run(redlease().args(["run", "-k", "busy", "-N", &urls, "-n", "-E", "9", "true"]));
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let out =
        run(redlease().args(["run", "-k", "busy", "-N", &urls, "-w", "0.3", "--conflict-exit-code", "0", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("could not acquire \"busy\""), "{}", stderr(&out));
    assert_eq!(holder.wait().unwrap().code(), Some(0));

    // No quorum of nodes answers: 69, whatever -E says.
    let down = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
    let out = run(redlease().args(["run", "-k", "busy", "-N", down, "-n", "-E", "9", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(stderr(&out).contains("nodes unreachable"), "{}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "busy", "-N", down, "-w", "0.5", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    // Two of three nodes down: no quorum either.
    servers.node(1).kill();
    servers.node(2).kill();
    let out = run(redlease().args(["run", "-k", "busy", "-N", &urls, "-w", "0.5", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
}

#[test]
fn not_acquired_within_wait_exits_75() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let mut holder = redlease()
        .args(["run", "--key", "busy", "--nodes", &urls, "--", "sleep", "3"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("busy").unwrap().is_some());
    let out = run(redlease().args(["run", "--key", "busy", "--nodes", &urls, "--wait", "300ms", "--", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("could not acquire \"busy\""), "{}", stderr(&out));
    assert!(stderr(&out).contains("held by another client"), "{}", stderr(&out));
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    servers.assert_no_leaks();
}

#[test]
fn lost_lock_terminates_the_command_and_exits_70() {
    let servers = Servers::start(3);
    let started = Instant::now();
    let child = redlease()
        .args(["run", "--key", "fragile", "--ttl", "1s", "--grace", "2s", "--nodes", &nodes(&servers), "--"])
        .args(["sh", "-c", "trap 'echo got-term; kill $! 2>/dev/null; exit 0' TERM; sleep 30 & wait"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("fragile").unwrap().is_some());
    // Someone deletes the lock everywhere: the next extension is refused by a majority.
    for node in servers.nodes() {
        node.conn().unwrap().del("fragile").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(70), "{}", stderr(&out));
    assert!(stderr(&out).contains("lock on \"fragile\" lost"), "{}", stderr(&out));
    assert!(stdout(&out).contains("got-term"), "the command did not get SIGTERM: {}", stdout(&out));
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let servers = Servers::start(3);
    let started = Instant::now();
    let child = redlease()
        .args(["run", "--key", "stubborn", "--ttl", "1s", "--grace", "500ms", "--nodes", &nodes(&servers), "--"])
        // SIGTERM stays ignored across exec, so only the SIGKILL after --grace ends it.
        .args(["sh", "-c", "trap '' TERM; exec sleep 30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || servers.node(0).conn().unwrap().get("stubborn").unwrap().is_some());
    for node in servers.nodes() {
        node.conn().unwrap().del("stubborn").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(70), "{}", stderr(&out));
    assert!(stderr(&out).contains("lock on \"stubborn\" lost"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20), "the command outlived its grace: {:?}", started.elapsed());
}

#[test]
fn eight_processes_increment_a_shared_counter_to_200() {
    let servers = Servers::start(5);
    let urls = nodes(&servers);
    let dir = redlease_servers::TempDir::new("redlease-cli-counter").unwrap();
    let file = dir.path().join("counter");
    std::fs::write(&file, "0").unwrap();
    let script = format!("n=$(cat {f}); sleep 0.005; echo $((n + 1)) > {f}", f = file.display());
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (urls, script) = (urls.clone(), script.clone());
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let out = run(redlease()
                        .args(["run", "--key", "counter", "--nodes", &urls, "--wait", "60s", "--"])
                        .args(["sh", "-c", &script]));
                    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "200");
    servers.assert_no_leaks();
}

/// Four workers contend for one key, each run holding it 150 ms, each waiting at most 5 s:
/// waiters are woken on release, so none gives up, and the lock passes from one command to the
/// next without sitting out a retry delay (the median gap is printed, not asserted: timing
/// belongs to the benchmarks).
#[test]
fn four_workers_waiting_5s_for_a_150ms_hold_never_give_up() {
    let servers = Servers::start(5);
    let urls = nodes(&servers);
    let dir = redlease_servers::TempDir::new("redlease-cli-handoff").unwrap();
    let log = dir.path().join("log");
    let script =
        format!("echo start $(date +%s%N) >> {f}; sleep 0.15; echo end $(date +%s%N) >> {f}", f = log.display());
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (urls, script) = (urls.clone(), script.clone());
            std::thread::spawn(move || {
                let mut gave_up = 0;
                for _ in 0..10 {
                    let out = run(redlease().args(["run", "-k", "handoff", "-N", &urls, "-w", "5", "-c", &script]));
                    match out.status.code() {
                        Some(0) => {}
                        Some(75) => gave_up += 1,
                        _ => panic!("{}", stderr(&out)),
                    }
                }
                gave_up
            })
        })
        .collect();
    let gave_up: i32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(gave_up, 0, "runs that gave up after waiting 5 s");
    // The runs never overlapped, and how long the lock sat idle between them.
    let text = std::fs::read_to_string(&log).unwrap();
    let marks: Vec<(&str, u64)> = text
        .lines()
        .map(|l| {
            let (what, at) = l.split_once(' ').unwrap();
            (what, at.parse().unwrap())
        })
        .collect();
    assert_eq!(marks.len(), 80, "{text}");
    let mut gaps = Vec::new();
    for pair in marks.chunks(2) {
        assert_eq!((pair[0].0, pair[1].0), ("start", "end"), "two commands overlapped: {text}");
    }
    for w in marks.windows(2).filter(|w| w[0].0 == "end") {
        gaps.push(w[1].1 - w[0].1);
    }
    gaps.sort_unstable();
    eprintln!(
        "idle between one command's end and the next one's start: median {:.1} ms, max {:.1} ms over {} handoffs",
        gaps[gaps.len() / 2] as f64 / 1e6,
        gaps[gaps.len() - 1] as f64 / 1e6,
        gaps.len()
    );
    servers.assert_no_leaks();
}

#[test]
fn status_and_scan_report_a_known_state() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let token = "0123456789abcdef0123456789abcdef01234567";
    // Node 1's value carries the mark a refused waiter leaves: `token:`.
    for (node, value) in servers.nodes()[..2].iter().zip([token.to_owned(), format!("{token}:")]) {
        node.conn().unwrap().set_px("report", &value, Duration::from_secs(60)).unwrap();
    }
    servers.node(2).kill();
    let out = run(redlease().args(["status", "--key", "report", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].starts_with("node 0 ") && lines[0].contains("held by 0123456789ab…") && lines[0].contains("pttl ")
    );
    assert!(lines[1].contains("held by 0123456789ab…") && lines[1].ends_with("waited for"), "{text}");
    assert!(!lines[0].contains("waited for"), "{text}");
    assert!(lines[2].starts_with("node 2 ") && lines[2].contains("unreachable"), "{text}");
    assert!(lines[3].contains("held by 0123456789ab… on 2 of 3 nodes (quorum 2)"), "{text}");
    assert!(lines[0].contains(" rtt ") && lines[1].contains(" rtt "), "{text}");
    assert_eq!(lines[4], "2 of 3 nodes reachable, quorum 2: 0 more may fail before locking stops", "{text}");
    servers.node(2).restart(false);

    // scan: clean (TTL keys and fence counters only) → 0; a key without TTL → 1 naming it.
    servers.node(1).conn().unwrap().set("redlease:fence:report", "7").unwrap();
    let out = run(redlease().args(["scan", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("no keys without a TTL"), "{}", stdout(&out));
    servers.node(1).conn().unwrap().set("orphan", "x").unwrap();
    let out = run(redlease().args(["scan", "--nodes", &urls, "--pattern", "*"]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("node 1 ") && stdout(&out).contains("orphan has no TTL"), "{}", stdout(&out));
    let out = run(redlease().args(["scan", "--nodes", &urls, "--pattern", "rep*"]));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run(redlease().args(["scan", "--nodes", &urls, "--pattern", "orph*", "--json"]));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let json = stdout(&out);
    assert!(json.starts_with("{\"pattern\":\"orph*\",\"keys_without_ttl\":1,\"unreachable\":0,\"nodes\":["), "{json}");
    assert!(json.contains("{\"node\":1,\"url\":\"redis://127.0.0.1:"), "{json}");
    assert!(json.contains("\"reachable\":true,\"keys_without_ttl\":[\"orphan\"]}"), "{json}");
    assert_eq!(json.lines().count(), 1, "{json}");
    // A node down: 69 when nothing leaked, and the JSON says which node.
    servers.node(1).conn().unwrap().del("orphan").unwrap();
    servers.node(0).kill();
    let out = run(redlease().args(["scan", "--nodes", &urls, "--json"]));
    assert_eq!(out.status.code(), Some(69), "{}", stdout(&out));
    let json = stdout(&out);
    assert!(json.contains("\"unreachable\":1") && json.contains("{\"node\":0,"), "{json}");
    assert!(json.contains("\"reachable\":false,\"error\":\""), "{json}");
}

#[test]
fn status_json_and_its_exit_code_follow_the_quorum() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let token = "0123456789abcdef0123456789abcdef01234567";
    for node in &servers.nodes()[..2] {
        let mut conn = node.conn().unwrap();
        conn.set_px("report", token, Duration::from_secs(60)).unwrap();
        conn.set("redlease:fence:report", "12").unwrap();
    }
    let out = run(redlease().args(["status", "--key", "report", "--nodes", &urls, "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(
        json.starts_with(&format!(
            "{{\"key\":\"report\",\"quorum\":2,\"reachable\":3,\"fault_tolerance\":1,\"state\":\"held\",\"held\":true,\"shape\":\"exclusive\",\"holder\":\"{token}\",\"holders\":[\"{token}\"],\"holder_nodes\":2,\"nodes\":[{{\"node\":0,"
        )),
        "{json}"
    );
    assert!(
        json.contains(&format!(
            "\"reachable\":true,\"holder\":\"{token}\",\"shared\":false,\"waited_for\":false,\"pttl_ms\":"
        )),
        "{json}"
    );
    assert!(json.contains("\"fence\":12,\"rtt_ms\":"), "{json}");
    assert!(
        json.contains("{\"node\":2,")
            && json.contains(
                "\"holder\":null,\"shared\":false,\"waited_for\":false,\"pttl_ms\":null,\"fence\":null,\"rtt_ms\":"
            ),
        "{json}"
    );
    // The table shows the fencing counter too.
    let text = stdout(&run(redlease().args(["status", "--key", "report", "--nodes", &urls])));
    assert!(text.lines().next().unwrap().ends_with("fence 12"), "{text}");
    assert!(text.lines().last().unwrap().ends_with("1 more may fail before locking stops"), "{text}");
    // Two of three nodes down: no quorum is reachable, exit 69 (a health check).
    servers.node(0).kill();
    servers.node(1).kill();
    let out = run(redlease().args(["status", "--key", "report", "--nodes", &urls, "--json"]));
    assert_eq!(out.status.code(), Some(69), "{}", stdout(&out));
    let json = stdout(&out);
    assert!(json.contains("\"reachable\":1,\"fault_tolerance\":0,\"state\":\"unknown\",\"held\":null"), "{json}");
    assert!(json.contains("\"reachable\":false,\"fault\":\"unreachable\",\"error\":"), "{json}");
    let out = run(redlease().args(["status", "--key", "report", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(69));
    assert!(stdout(&out).contains("no quorum (2) is reachable"), "{}", stdout(&out));
}

#[test]
fn servers_prints_urls_and_stops_on_ctrl_c() {
    let mut child = spawn_piped(&["servers", "--nodes", "3"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let export = loop {
        let line = lines.next().expect("servers output ended early").unwrap();
        if let Some(urls) = line.strip_prefix("export REDLEASE_NODES=") {
            break urls.to_owned();
        }
    };
    let addrs: Vec<std::net::SocketAddr> =
        export.split(',').map(|u| u.strip_prefix("redis://").unwrap().parse().unwrap()).collect();
    assert_eq!(addrs.len(), 3);
    for a in &addrs {
        assert!(RedisConn::connect(*a, None).unwrap().ping().unwrap());
    }
    signal(child.id(), libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "Ctrl-C is handled (exit 130), not fatal");
    for a in &addrs {
        assert!(RedisConn::connect(*a, None).is_err(), "{a} still answers after Ctrl-C");
    }
}

#[test]
fn cluster_sentinel_prints_sentinel_urls_and_stops_every_process_on_ctrl_c() {
    let mut child = spawn_piped(&["cluster", "--sentinel", "--nodes", "1"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut data = Vec::new();
    let export = loop {
        let line = lines.next().expect("servers output ended early").unwrap();
        for role in ["primary: ", "replica: "] {
            if let Some(url) = line.trim().strip_prefix(role) {
                data.push(url.split(' ').next().unwrap().strip_prefix("redis://").unwrap().to_owned());
            }
        }
        if let Some(urls) = line.strip_prefix("export REDLEASE_NODES=") {
            break urls.to_owned();
        }
    };
    let rest = export.strip_prefix("redis+sentinel://").expect(&export);
    let (hosts, service) = rest.split_once('/').unwrap();
    assert_eq!(service, "redlease-0?min_replicas=1");
    let sentinels: Vec<std::net::SocketAddr> = hosts.split(',').map(|h| h.parse().unwrap()).collect();
    assert_eq!((sentinels.len(), data.len()), (3, 2), "{export} {data:?}");
    for s in &sentinels {
        let reply = RedisConn::connect(*s, None).unwrap().cmd(&["SENTINEL", "get-master-addr-by-name", "redlease-0"]);
        let named = match reply.unwrap() {
            redlease_servers::Reply::Array(Some(parts)) => {
                parts.iter().filter_map(redlease_servers::Reply::as_text).collect::<Vec<_>>().join(":")
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(named, data[0], "sentinel {s} names the primary");
    }
    // The printed URL works for run and status, which show what the sentinels say.
    let out = run(redlease().args(["run", "-k", "sentinel-run", "-N", &export, "-w", "5", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(redlease().args(["status", "-k", "sentinel-run", "-N", &export]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains(&format!("Sentinel service \"redlease-0\": master {}", data[0])), "{text}");
    let out = run(redlease().args(["status", "-k", "sentinel-run", "--json", "-N", &export]));
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(json.contains(&format!("\"sentinel\":{{\"service\":\"redlease-0\",\"master\":\"{}\"", data[0])), "{json}");
    let out = run(redlease().args(["scan", "-N", &export]));
    assert_eq!(out.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    for a in sentinels.iter().chain(&data.iter().map(|d| d.parse().unwrap()).collect::<Vec<_>>()) {
        assert!(RedisConn::connect(*a, None).is_err(), "{a} still answers after Ctrl-C");
    }
}

#[test]
fn servers_with_replicas_prints_urls_whose_grants_wait_for_them() {
    let mut child = spawn_piped(&["servers", "--nodes", "1", "--replicas", "1"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut replica = None;
    let export = loop {
        let line = lines.next().expect("servers output ended early").unwrap();
        if let Some(url) = line.trim().strip_prefix("replica: ") {
            replica = url.split(' ').next().map(str::to_owned);
        }
        if let Some(urls) = line.strip_prefix("export REDLEASE_NODES=") {
            break urls.to_owned();
        }
    };
    assert!(export.ends_with("?min_replicas=1"), "{export}");
    let replica = replica.expect("the replica's URL is printed");
    // A run over that node: its lock key is on the replica while the command runs.
    let probe = format!("redis-cli -u {replica} GET replicated-run");
    let out = run(redlease().args(["run", "-k", "replicated-run", "--nodes", &export, "--", "sh", "-c", &probe]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim().len(), 40, "the replica holds the run's token: {}", stdout(&out));
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

/// The URLs and the CA file TLS servers print (`export REDLEASE_NODES=`, `REDLEASE_TLS_CA=`),
/// read from their output `lines` (which stay open: the servers print on).
#[cfg(feature = "tls")]
fn urls_and_ca(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> (String, String) {
    let (mut urls, mut ca) = (None, None);
    while urls.is_none() || ca.is_none() {
        let line = lines.next().expect("servers output ended early").unwrap();
        if let Some(u) = line.strip_prefix("export REDLEASE_NODES=") {
            urls = Some(u.to_owned());
        }
        if let Some(c) = line.strip_prefix("export REDLEASE_TLS_CA=") {
            ca = Some(c.to_owned());
        }
    }
    (urls.unwrap(), ca.unwrap())
}

/// `servers --tls -p PORT`, run as a user runs it: the printed rediss:// URLs are on PORT and
/// the ports after it, and a run locks over them, trusting the printed CA.
#[cfg(feature = "tls")]
#[test]
fn servers_with_tls_and_a_port_locks_over_the_printed_urls() {
    let base = common::free_ports(3);
    let mut child = spawn_piped(&["servers", "--tls", "--nodes", "3", "-p", &base.to_string()]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (urls, ca) = urls_and_ca(&mut lines);
    let expected: Vec<String> = (0..3).map(|i| format!("rediss://127.0.0.1:{}", base + i)).collect();
    assert_eq!(urls, expected.join(","));
    let out =
        run(redlease().args(["run", "-k", "tls-launch", "-N", &urls, "-w", "5", "true"]).env("REDLEASE_TLS_CA", &ca));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

/// `cluster --sentinel --tls`: the printed URLs are `rediss+sentinel://`, the sentinels they
/// name answer only over TLS there, and a run locks through them, trusting the printed CA.
#[cfg(feature = "tls")]
#[test]
fn cluster_sentinel_with_tls_locks_over_the_printed_rediss_sentinel_urls() {
    let mut child = spawn_piped(&["cluster", "--sentinel", "--tls", "--nodes", "1"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (urls, ca) = urls_and_ca(&mut lines);
    assert!(urls.starts_with("rediss+sentinel://") && urls.ends_with("/redlease-0?min_replicas=1"), "{urls}");
    let out =
        run(redlease().args(["run", "-k", "tls-sentinel", "-N", &urls, "-w", "5", "true"]).env("REDLEASE_TLS_CA", &ca));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

/// `servers --replicas 1 -p PORT`: the nodes on PORT and after, then their replicas, as
/// `--help` says.
#[test]
fn servers_with_replicas_and_a_port_puts_the_replicas_after_the_nodes() {
    let base = common::free_ports(4);
    let mut child = spawn_piped(&["servers", "--nodes", "2", "--replicas", "1", "-p", &base.to_string()]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    loop {
        let line = lines.next().expect("servers output ended early").unwrap();
        if line.starts_with("export REDLEASE_NODES=") {
            break;
        }
        if let Some(url) = line.split_whitespace().find(|w| w.starts_with("redis://")) {
            printed.push(url.to_owned());
        }
    }
    let expected = [base, base + 2, base + 1, base + 3].map(|p| format!("redis://127.0.0.1:{p}"));
    assert_eq!(printed, expected, "node 0, its replica, node 1, its replica");
    signal(child.id(), libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

/// Nodes whose URLs ask grants to wait for a replica they do not have: `run` fails at once
/// with 78, naming min_replicas and the replica count; `status` shows each node misconfigured
/// with the numbers and exits 69 (no quorum usable).
#[test]
fn nodes_without_the_replicas_their_urls_ask_for_are_misconfigured() {
    let servers = Servers::start(3);
    let urls: Vec<String> = servers.urls().iter().map(|u| format!("{u}?min_replicas=1")).collect();
    let urls = urls.join(",");
    let started = Instant::now();
    let out = run(redlease().args(["run", "-k", "no-replica", "-N", &urls, "-w", "10", "true"]));
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("min_replicas=1, but the primary has 0 replica(s) online"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "at once, not after -w: {:?}", started.elapsed());
    let out = run(redlease().args(["status", "-k", "no-replica", "-N", &urls]));
    assert_eq!(out.status.code(), Some(69), "{}", stdout(&out));
    let text = stdout(&out);
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("MISCONFIGURED") && first.contains("min_replicas=1, but the primary has 0 replica(s) online"),
        "{text}"
    );
    let out = run(redlease().args(["status", "-k", "no-replica", "-N", &urls, "--json"]));
    assert!(stdout(&out).contains("\"fault\":\"misconfigured\""), "{}", stdout(&out));
}

/// Nodes that want a password, and URLs without one: 78 at once, saying that authentication
/// is required and where the password goes.
#[test]
fn a_missing_password_says_authentication_is_required() {
    let servers = Servers::builder().nodes(3).acl_user("default", "s3cret").start();
    let urls: Vec<String> = servers.addrs().iter().map(|a| format!("redis://{a}")).collect();
    let out = run(redlease().args(["run", "-k", "k", "-N", &urls.join(","), "true"]));
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("authentication required") && err.contains("give one in its URL"), "{err}");
    assert!(!err.contains("lock format check failed"), "{err}");
}

#[test]
fn demo_runs_to_completion() {
    let started = Instant::now();
    let out = run(&mut redlease());
    assert_eq!(out.status.code(), Some(64), "no subcommand is a usage error");
    let out = run(redlease().arg("demo"));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    for needle in ["act 1", "act 2", "act 3", "act 4", "nodes unreachable", "overlapping holders: 0", "summary"] {
        assert!(text.contains(needle), "demo output lacks {needle:?}:\n{text}");
    }
    assert!(started.elapsed() < Duration::from_secs(60), "demo took {:?}", started.elapsed());
}

#[test]
fn status_tells_a_refused_password_from_a_down_node() {
    let servers = Servers::builder().nodes(3).acl_user("alice", "s3cret").start();
    let (user, pass) = servers.credentials().unwrap();
    let addrs = servers.addrs();
    let urls = format!(
        "redis://{user}:wrong-one@{},redis://{user}:{pass}@{},redis://{user}:{pass}@{}",
        addrs[0], addrs[1], addrs[2]
    );
    let out = run(redlease().args(["status", "--key", "k", "--nodes", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().next().unwrap().contains("MISCONFIGURED"), "{text}");
    assert!(text.contains("2 of 3 nodes reachable, quorum 2: 0 more may fail"), "{text}");
    assert!(!text.contains("wrong-one") && !text.contains(pass), "{text}");
    servers.node(2).kill();
    let out = run(redlease().args(["status", "--key", "k", "--nodes", &urls, "--json"]));
    assert_eq!(out.status.code(), Some(69), "{}", stdout(&out));
    let json = stdout(&out);
    assert!(json.contains("{\"node\":0,") && json.contains("\"fault\":\"misconfigured\""), "{json}");
    assert!(json.contains("{\"node\":2,") && json.contains("\"fault\":\"unreachable\""), "{json}");
    assert!(!json.contains("wrong-one") && !json.contains(pass), "{json}");
}

/// `run` over TLS: with `--tls-ca` (or `REDLEASE_TLS_CA`) it locks; without, the nodes'
/// certificates do not verify, a misconfiguration: it exits 78 at once, naming the reason.
#[cfg(feature = "tls")]
#[test]
fn run_over_tls_with_the_ca_given_by_flag_or_env() {
    let servers = Servers::builder().nodes(3).listen(redlease_servers::Listen::Tls).start();
    let urls = servers.urls().join(",");
    let ca = servers.tls().unwrap().ca.display().to_string();
    let out = run(redlease().args(["run", "-k", "tls", "-N", &urls, "--tls-ca", &ca, "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "tls", "-N", &urls, "true"]).env("REDLEASE_TLS_CA", &ca));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "tls", "-N", &urls, "-w", "1", "true"]));
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("UnknownIssuer") && stderr(&out).contains("--tls-ca"), "{}", stderr(&out));
    servers.assert_no_leaks();
}

/// `status` and `scan` take the URLs `run` takes: over TLS (trusting `--tls-ca`, and saying
/// why a node does not verify without it), mutual TLS (`--tls-cert`/`--tls-key`) and Unix
/// sockets, they see what a plain-TCP look at the same nodes sees. Built without the `tls`
/// feature, the Unix sockets alone.
#[test]
fn status_and_scan_over_tls_and_unix_sockets() {
    use redlease_servers::Listen;
    #[cfg(feature = "tls")]
    let listens = [Listen::Tls, Listen::TlsClientAuth, Listen::Unix];
    #[cfg(not(feature = "tls"))]
    let listens = [Listen::Unix];
    for listen in listens {
        let servers = Servers::builder().nodes(3).listen(listen).start();
        let urls = servers.urls().join(",");
        // A holder's key on every node, with no TTL: status names the holder, scan the leak.
        for node in servers.nodes() {
            node.conn().unwrap().set("inspected", "0123456789abcdef").unwrap();
        }
        #[allow(unused_mut)]
        let mut tls: Vec<String> = Vec::new();
        #[cfg(feature = "tls")]
        if let Some(files) = servers.tls() {
            tls = vec!["--tls-ca".to_owned(), files.ca.display().to_string()];
            if listen == Listen::TlsClientAuth {
                let (cert, key) = (files.client_cert.display(), files.client_key.display());
                tls.extend(["--tls-cert".to_owned(), cert.to_string(), "--tls-key".to_owned(), key.to_string()]);
            }
        }
        let out = run(redlease().args(["status", "-k", "inspected", "-N", &urls]).args(&tls));
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "[{listen:?}] {text}{}", stderr(&out));
        assert!(text.contains("inspected: held by 0123456789ab… on 3 of 3 nodes"), "[{listen:?}] {text}");
        assert_eq!(text.matches("NO TTL (leak)").count(), 3, "[{listen:?}] {text}");
        let out = run(redlease().args(["scan", "-N", &urls, "--json"]).args(&tls));
        let json = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "[{listen:?}] {json}{}", stderr(&out));
        assert!(json.contains("\"keys_without_ttl\":3,\"unreachable\":0"), "[{listen:?}] {json}");
        if listen == Listen::Tls {
            // Without the CA, the nodes' certificates do not verify: each is misconfigured, and
            // the reason says so and names the flag.
            let out = run(redlease().args(["status", "-k", "inspected", "-N", &urls]));
            let text = stdout(&out);
            assert_eq!(out.status.code(), Some(69), "{text}{}", stderr(&out));
            let refused = "MISCONFIGURED  (TLS handshake failed: invalid peer certificate: UnknownIssuer: trust";
            assert_eq!(text.matches(refused).count(), 3, "{text}");
            assert_eq!(text.matches("--tls-ca or REDLEASE_TLS_CA").count(), 3, "{text}");
            // A CA file that does not exist is bad usage, named.
            let out = run(redlease().args(["scan", "-N", &urls, "--tls-ca", "/nonexistent/ca.pem"]));
            assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
            assert!(stderr(&out).contains("/nonexistent/ca.pem"), "{}", stderr(&out));
        }
        for node in servers.nodes() {
            node.conn().unwrap().del("inspected").unwrap();
        }
        servers.assert_no_leaks();
    }
}
