//! `redlease run --permits L` (a semaphore: at most L commands at once across machines), and how
//! `status` and `scan` show semaphores, against real redis-server processes.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{nodes, redlease, run, stderr, stdout, wait_until};
use redlease_servers::{Servers, TempDir};

/// No lock key without a TTL on any node. A semaphore's limit (`redlease:sem:{NAME}:limit`)
/// lives without one by design, as the fencing counters do.
fn assert_no_leaks(servers: &Servers) {
    let leaks: Vec<_> = servers
        .lock_keys()
        .into_iter()
        .filter(|(_, key, pttl)| *pttl == -1 && !(key.starts_with("redlease:sem:") && key.ends_with(":limit")))
        .collect();
    assert!(leaks.is_empty(), "lock keys left without a TTL (node, key, pttl): {leaks:?}");
}

/// One mark of the log the commands write: `start` or `end`, when (ns), and the permit held.
#[derive(Debug)]
struct Mark {
    start: bool,
    at: u128,
    permit: u16,
}

fn marks(log: &Path) -> Vec<Mark> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut marks: Vec<Mark> = text
        .lines()
        .map(|l| {
            let parts: Vec<&str> = l.split_whitespace().collect();
            let [what, at, permit] = parts[..] else { panic!("bad line {l:?} in {text}") };
            Mark { start: what == "start", at: at.parse().unwrap(), permit: permit.parse().unwrap() }
        })
        .collect();
    // An end and a start at the same instant did not overlap.
    marks.sort_by_key(|m| (m.at, m.start));
    marks
}

/// Eight workers run two commands each under a semaphore of 3 permits; each command logs its
/// start and end (inside the time its permit is held) and holds the permit 400 ms. Never more
/// than three commands run at once, two at once never hold the same permit, and three at once
/// do happen.
#[test]
fn eight_workers_under_permits_3_run_at_most_three_at_once_and_do_reach_three() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let dir = TempDir::new("redlease-cli-permits").unwrap();
    let log = dir.path().join("log");
    let script = format!(
        "echo start $(date +%s%N) $REDLEASE_PERMIT >> {f}; sleep 0.4; echo end $(date +%s%N) $REDLEASE_PERMIT >> {f}",
        f = log.display()
    );
    let started = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (urls, script) = (urls.clone(), script.clone());
            std::thread::spawn(move || {
                for _ in 0..2 {
                    let out = run(redlease()
                        .args(["run", "-k", "pool", "--permits", "3", "-N", &urls, "-w", "60"])
                        .args(["-c", &script]));
                    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let marks = marks(&log);
    assert_eq!(marks.len(), 32, "{marks:?}");
    let mut running: Vec<u16> = Vec::new();
    let mut most = 0;
    for m in &marks {
        if m.start {
            assert!(m.permit < 3, "permit {} of a semaphore of 3: {marks:?}", m.permit);
            assert!(!running.contains(&m.permit), "two commands held permit {} at once: {marks:?}", m.permit);
            running.push(m.permit);
            most = most.max(running.len());
            assert!(running.len() <= 3, "{} commands ran at once: {marks:?}", running.len());
        } else {
            let at = running.iter().position(|&p| p == m.permit).expect("an end without its start");
            running.remove(at);
        }
    }
    assert_eq!(most, 3, "never three commands at once: {marks:?}");
    eprintln!("16 runs of 400 ms under 3 permits took {:?}", started.elapsed());
    assert_no_leaks(&servers);
}

#[test]
fn a_limit_other_than_the_recorded_one_exits_78_naming_the_nodes_and_both_limits() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    // The first runs record the limit on every node they reach: until each node has it (a run
    // goes ahead once a quorum of nodes is ready).
    wait_until(Duration::from_secs(10), || {
        let out = run(redlease().args(["run", "-k", "pool", "--permits", "3", "-N", &urls, "true"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let limit = |i| servers.node(i).conn().unwrap().get("redlease:sem:{pool}:limit").unwrap();
        (0..3).all(|i| limit(i).as_deref() == Some("3"))
    });
    // Waiting, even without a bound, does not mend it: 78 at once.
    for wait in [["-w", "forever"], ["-w", "30"]] {
        let started = Instant::now();
        let out = run(redlease().args(["run", "-k", "pool", "--permits", "4", "-N", &urls]).args(wait).arg("true"));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(78), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10), "{wait:?} waited: {:?}", started.elapsed());
        assert!(err.contains("has a limit of 3 on nodes #") && err.contains("not --permits 4"), "{err}");
        assert!(err.contains("give --permits 3") && err.contains("redlease:sem:{pool}:limit"), "{err}");
        // The nodes that refused are named: at least a quorum of them.
        let named = servers.urls().iter().filter(|u| err.contains(u.as_str())).count();
        assert!(named >= 2, "{err}");
    }
    // With -n too: misconfigured, not held.
    let out = run(redlease().args(["run", "-k", "pool", "--permits", "2", "-N", &urls, "-n", "true"]));
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    // One node with another limit is a minority: the others still grant, and status says so.
    servers.node(2).conn().unwrap().set("redlease:sem:{pool}:limit", "4").unwrap();
    let out = run(redlease().args(["run", "-k", "pool", "--permits", "3", "-N", &urls, "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&run(redlease().args(["status", "-k", "pool", "-N", &urls])));
    assert!(text.contains("limits differ across nodes (3 on node(s) 0,1; 4 on node(s) 2)"), "{text}");
    assert!(text.contains("pool: semaphore of 3 permits: 0 held, 3 free"), "{text}");
    assert_no_leaks(&servers);
}

/// While `run --permits 3 --take 2` holds two permits: the command sees them in
/// REDLEASE_PERMIT, `status` shows who holds which permit on each node, in text and JSON, and
/// `scan` lists the semaphore apart from the keys without a TTL.
#[test]
fn status_and_scan_show_the_permits_a_run_holds() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let dir = TempDir::new("redlease-cli-permits-status").unwrap();
    let (held, stop) = (dir.path().join("held"), dir.path().join("stop"));
    let script = format!(
        "echo $REDLEASE_PERMIT > {h}.tmp && mv {h}.tmp {h}; while [ ! -e {s} ]; do sleep 0.05; done",
        h = held.display(),
        s = stop.display()
    );
    let holder = redlease()
        .args(["run", "-k", "pool", "--permits", "3", "--take", "2", "-N", &urls, "-v", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || held.exists());
    let permits = std::fs::read_to_string(&held).unwrap().trim().to_owned();
    let numbers: Vec<u16> = permits.split(',').map(|p| p.parse().unwrap()).collect();
    assert!(numbers.len() == 2 && numbers[0] < numbers[1] && numbers[1] < 3, "REDLEASE_PERMIT={permits}");

    let out = run(redlease().args(["status", "-k", "pool", "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    // Three nodes, two permits, the occupancy, the nodes: the free mutex key is not shown. The run
    // went ahead once a quorum of nodes was ready: the third may have been reached or not.
    assert_eq!(lines.len(), 7, "{text}");
    for (i, line) in lines[..3].iter().enumerate() {
        assert!(line.starts_with(&format!("node {i} ")) && line.contains(" reachable "), "{text}");
    }
    let holding = lines[..3].iter().filter(|l| l.ends_with(&format!("limit 3  holds permits {permits}"))).count();
    assert!(holding >= 2, "{text}");
    for (line, permit) in lines[3..5].iter().zip(&numbers) {
        assert!(line.starts_with(&format!("  permit {permit}  held by ")), "{text}");
        assert!(line.contains(&format!(" on {holding} of 3 nodes (quorum 2)  pttl ")), "{text}");
        assert!(line.ends_with("ms  fence 1"), "{text}");
    }
    assert_eq!(lines[5], format!("pool: semaphore of 3 permits: 2 held (permits {permits}), 1 free"), "{text}");
    assert!(lines[6].starts_with("3 of 3 nodes reachable"), "{text}");

    let json = stdout(&run(redlease().args(["status", "-k", "pool", "-N", &urls, "--json"])));
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(json.contains("\"semaphore\":{\"name\":\"pool\",\"limit\":3,\"limits\":["), "{json}");
    assert!(json.contains("],\"held\":2,\"free\":1,\"unknown\":0,\"permits\":[{"), "{json}");
    // The name is held: by the run's permits (a script reading `.held` needs no shape).
    assert!(
        json.contains("\"state\":\"held\",\"held\":true,\"shape\":\"semaphore\",\"holder\":null,\"holders\":[\""),
        "{json}"
    );
    for permit in &numbers {
        let head = format!("{{\"permit\":{permit},\"state\":\"held\",\"holder\":\"");
        let token = &json[json.find(&head).unwrap_or_else(|| panic!("{json}")) + head.len()..][..40];
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{json}");
        assert!(json.contains(&format!("{token}\",\"holder_nodes\":{holding},\"nodes\":[{{\"node\":")), "{json}");
        assert!(json.contains(&format!("\"holders\":[\"{token}\"]")), "one run, its token once: {json}");
        let per_node = format!("\"holder\":\"{token}\",\"waited_for\":false,\"pttl_ms\":");
        assert_eq!(json.matches(&per_node).count(), 2 * holding, "{json}");
    }

    let out = run(redlease().args(["scan", "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "the recorded limit is no leak: {}", stdout(&out));
    let p = &permits;
    let text = stdout(&out);
    let line = text.lines().next().unwrap();
    assert!(line.starts_with("semaphore \"pool\" (limit 3") && line.contains("): node 0 holds "), "{text}");
    assert_eq!(line.matches(&format!("holds permits {p}")).count(), holding, "{text}");
    let json = stdout(&run(redlease().args(["scan", "-N", &urls, "-p", "po*", "--json"])));
    assert!(json.contains("\"semaphores\":[{\"name\":\"pool\",\"nodes\":[{\"node\":0,"), "{json}");
    let permits_json = format!("\"limit\":3,\"permits\":[{p}],\"permits_without_ttl\":[]}}");
    assert_eq!(json.matches(&permits_json).count(), holding, "{json}");
    let json = stdout(&run(redlease().args(["scan", "-N", &urls, "-p", "other*", "--json"])));
    assert!(json.ends_with("\"permits_without_ttl\":0,\"semaphores\":[],\"shared\":[]}\n"), "{json}");

    std::fs::write(&stop, "").unwrap();
    let out = holder.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let verbose = stderr(&out);
    assert!(
        verbose.contains(&format!("acquired permits {permits} of \"pool\" (limit 3) with fencing token 1")),
        "{verbose}"
    );
    assert!(verbose.contains(&format!("REDLEASE_PERMIT={permits}")), "{verbose}");
    let text = stdout(&run(redlease().args(["status", "-k", "pool", "-N", &urls])));
    assert!(text.contains("pool: semaphore of 3 permits: 0 held, 3 free"), "{text}");
    assert_no_leaks(&servers);
}

#[test]
fn scan_reports_a_semaphore_permit_without_a_ttl() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let out = run(redlease().args(["run", "-k", "pool", "--permits", "2", "-N", &urls, "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    servers.node(1).conn().unwrap().set("redlease:sem:{pool}:1", "0123456789abcdef").unwrap();
    let out = run(redlease().args(["scan", "-N", &urls]));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("node 1 ") && text.contains(": semaphore \"pool\" permit 1 has no TTL"), "{text}");
    assert!(text.contains("node 0 holds none; node 1 holds permit 1; node 2 holds none"), "{text}");
    assert!(text.ends_with("1 key(s) without a TTL matching \"*\"\n"), "{text}");
    let json = stdout(&run(redlease().args(["scan", "-N", &urls, "--json"])));
    assert!(json.contains("\"keys_without_ttl\":0,") && json.contains("\"permits_without_ttl\":1,"), "{json}");
    assert!(json.contains("\"permits\":[1],\"permits_without_ttl\":[1]}"), "{json}");
    // status calls the permit's holder a minority, with no TTL.
    let text = stdout(&run(redlease().args(["status", "-k", "pool", "-N", &urls])));
    assert!(text.contains("  permit 1  not held: at most 1 of 3 nodes agree (0123456789ab…), quorum 2"), "{text}");
}

#[test]
fn permits_taken_is_held_elsewhere_and_the_permit_reaches_the_command_only() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let mut holder = redlease()
        .args(["run", "-k", "one", "--permits", "1", "-N", &urls, "--", "sleep", "3"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || {
        stdout(&run(redlease().args(["status", "-k", "one", "-N", &urls, "--json"]))).contains("\"held\":1,\"free\":0,")
    });
    let out = run(redlease().args(["run", "-k", "one", "--permits", "1", "-N", &urls, "-n", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(stderr(&out).contains("could not acquire a permit of \"one\" (limit 1) at once"), "{}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "one", "--permits", "1", "-N", &urls, "-w", "0.3", "-E", "9", "true"]));
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    // The key's mutex is another lock: free.
    let out = run(redlease().args(["run", "-k", "one", "-N", &urls, "-n", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    // The permit, for a semaphore's command; none for a mutex's, whatever redlease inherited.
    let echo = "echo \"${REDLEASE_PERMIT-unset}\"";
    let out = run(redlease().args(["run", "-k", "one", "--permits", "1", "-N", &urls, "-c", echo]));
    assert_eq!(stdout(&out).trim(), "0", "{}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "one", "-N", &urls, "-c", echo]).env("REDLEASE_PERMIT", "5"));
    assert_eq!(stdout(&out).trim(), "unset", "{}", stderr(&out));
    assert_no_leaks(&servers);
}

#[test]
fn permits_usage_errors_exit_64_and_help_documents_them() {
    let n = "redis://127.0.0.1:1";
    let cases: &[(&[&str], &str)] = &[
        (&["run", "-k", "k", "-N", n, "--take", "2", "true"], "--permits"),
        (&["run", "-k", "k", "-N", n, "--permits", "0", "true"], "--permits"),
        (&["run", "-k", "k", "-N", n, "--permits", "1025", "true"], "--permits"),
        (&["run", "-k", "k", "-N", n, "--permits", "x", "true"], "--permits"),
        (&["run", "-k", "k", "-N", n, "--permits", "3", "--take", "4", "true"], "--take 4"),
        (&["run", "-k", "k", "-N", n, "--permits", "3", "--take", "0", "true"], "--take"),
    ];
    for (args, needle) in cases {
        let out = run(redlease().args(*args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: expected {needle:?} in {}", stderr(&out));
    }
    let help = stdout(&run(redlease().args(["run", "--help"])));
    for needle in ["--permits <L>", "--take <M>", "REDLEASE_PERMIT", "Semaphores (--permits L):", "--permits 3"] {
        assert!(help.contains(needle), "run --help lacks {needle:?}: {help}");
    }
    let help = stdout(&run(redlease().args(["status", "--help"])));
    assert!(help.contains("semaphore"), "{help}");
    let help = stdout(&run(redlease().args(["scan", "--help"])));
    assert!(help.contains("redlease:sem:{NAME}:limit"), "{help}");
}
