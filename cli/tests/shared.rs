//! `redlease run -s` (a read lock: runs with -s overlap, a run without it excludes them), the
//! writer epoch a reader's command sees, and how `status` and `scan` show readers, against real
//! redis-server processes.

mod common;

use std::path::Path;
use std::process::{Child, Output};
use std::time::Duration;

use common::{holder, nodes, redlease, run, stderr, stdout, wait_until};
use redlease_servers::{Servers, TempDir};

/// One mark of the log the commands write: `start` or `end`, when (ns), and whether the run
/// was a reader (`R`, with -s) or the writer (`W`).
#[derive(Debug)]
struct Mark {
    start: bool,
    at: u128,
    reader: bool,
}

fn marks(log: &Path) -> Vec<Mark> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut marks: Vec<Mark> = text
        .lines()
        .map(|l| {
            let parts: Vec<&str> = l.split_whitespace().collect();
            let [what, at, who] = parts[..] else { panic!("bad line {l:?} in {text}") };
            Mark { start: what == "start", at: at.parse().unwrap(), reader: who == "R" }
        })
        .collect();
    // An end and a start at the same instant did not overlap.
    marks.sort_by_key(|m| (m.at, m.start));
    marks
}

/// A command line that logs its start and end to `log` as `who` and holds the lock 400 ms.
fn logging(log: &Path, who: &str) -> String {
    format!("echo start $(date +%s%N) {who} >> {f}; sleep 0.4; echo end $(date +%s%N) {who} >> {f}", f = log.display())
}

/// The most readers that ran at once; panics if a writer ran with a reader or another writer.
fn most_readers_at_once(marks: &[Mark]) -> usize {
    let (mut readers, mut writer, mut most) = (0usize, false, 0);
    for m in marks {
        match (m.start, m.reader) {
            (true, true) => {
                assert!(!writer, "a reader started while the writer ran: {marks:?}");
                readers += 1;
                most = most.max(readers);
            }
            (true, false) => {
                assert!(!writer && readers == 0, "the writer started while {readers} reader(s) ran: {marks:?}");
                writer = true;
            }
            (false, true) => readers -= 1,
            (false, false) => writer = false,
        }
    }
    most
}

/// Four workers run three `-s` commands each, and once the first has started, a fifth runs two
/// commands without -s; each command logs its start and end (inside the time its lock is held)
/// and holds the lock 400 ms. The readers do run together (at least two at once), the writer's
/// commands never overlap a reader's (neither a writer starting among readers nor readers
/// starting while it runs), and every run gets its lock.
#[test]
fn shared_runs_overlap_and_a_run_without_s_excludes_them() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let dir = TempDir::new("redlease-cli-shared").unwrap();
    let log = dir.path().join("log");
    let spawn = |who: &'static str, times: usize| {
        let (urls, script) = (urls.clone(), logging(&log, who));
        std::thread::spawn(move || {
            for _ in 0..times {
                let mut args = vec!["run", "-k", "catalog", "-N", &urls, "-w", "60"];
                if who == "R" {
                    args.push("-s");
                }
                let out = run(redlease().args(&args).args(["-c", &script]));
                assert_eq!(out.status.code(), Some(0), "{who}: {}", stderr(&out));
            }
        })
    };
    let readers: Vec<_> = (0..4).map(|_| spawn("R", 3)).collect();
    wait_until(Duration::from_secs(20), || std::fs::read_to_string(&log).is_ok_and(|t| t.contains("start")));
    let writer = spawn("W", 2);
    for w in readers.into_iter().chain([writer]) {
        w.join().unwrap();
    }
    let marks = marks(&log);
    assert_eq!(marks.len(), 2 * (4 * 3 + 2), "{marks:?}");
    let most = most_readers_at_once(&marks);
    assert!(most >= 2, "the readers never ran together: {marks:?}");
    let order: String = marks.iter().map(|m| if m.reader { 'R' } else { 'W' }).collect();
    eprintln!("at most {most} readers at once; starts and ends in order: {order}");
    servers.assert_no_leaks();
}

#[test]
#[should_panic(expected = "the writer started while 1 reader(s) ran")]
fn the_check_catches_a_writer_among_readers() {
    let mark = |start, at, reader| Mark { start, at, reader };
    let marks = [mark(true, 1, true), mark(true, 2, true), mark(false, 3, true), mark(true, 4, false)];
    most_readers_at_once(&marks);
}

fn finished(child: Child) -> Output {
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

/// While two `run -s` hold the key: `status` shows each node's readers (how many, each token
/// with its time left) and how many hold it on a quorum, in text and JSON; once a writer waits,
/// it says so and a new reader is refused (75); `scan` lists the key as shared. Afterwards the
/// writer gets the key and nothing is left behind.
#[test]
fn status_and_scan_show_the_readers_while_shared_runs_hold_the_key() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let dir = TempDir::new("redlease-cli-shared-status").unwrap();
    let readers =
        [holder(&urls, "catalog", &["-s"], dir.path(), "r1"), holder(&urls, "catalog", &["-s"], dir.path(), "r2")];
    wait_until(Duration::from_secs(10), || dir.path().join("r1").exists() && dir.path().join("r2").exists());

    let out = run(redlease().args(["status", "-k", "catalog", "-N", &urls]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Each reader went ahead once a quorum of nodes granted: the third may have it or not.
    let holding = text.lines().filter(|l| l.starts_with("node ") && l.contains("  read by 2 readers  pttl ")).count();
    assert!(holding >= 2, "{text}");
    let reader_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("  reader ")).collect();
    assert!(reader_lines.len() >= 2 * holding, "{text}");
    for line in &reader_lines {
        let rest = &line["  reader ".len()..];
        let (token, left) = rest.split_once("…  ").unwrap_or_else(|| panic!("{text}"));
        assert!(token.len() == 12 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{text}");
        let ms: u64 = left.strip_suffix("ms left").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}"));
        assert!(ms > 0 && ms <= 10_000, "{text}");
    }
    let last = text.lines().rev().nth(1).unwrap_or_default();
    assert!(last.starts_with("catalog: shared by 2 readers on ") && last.ends_with(" of 3 nodes (quorum 2)"), "{text}");
    assert!(!text.contains("writer waits"), "{text}");

    let json = stdout(&run(redlease().args(["status", "-k", "catalog", "-N", &urls, "--json"])));
    assert_eq!(json.lines().count(), 1, "{json}");
    // Held by readers: no writer's token, the readers' own, never the internal value.
    assert!(
        json.contains("\"state\":\"held\",\"held\":true,\"shape\":\"shared\",\"holder\":null,\"holders\":[\""),
        "{json}"
    );
    assert!(!json.contains("\":readers\"") && json.matches("\"holder\":null,\"shared\":true,").count() >= 2, "{json}");
    assert!(json.contains("\"semaphore\":null,\"readers\":{\"count\":2,\"tokens\":[\""), "{json}");
    assert!(json.contains("\"writer_waits\":false,\"nodes\":[{\"node\":"), "{json}");
    assert!(json.matches("\"count\":2,\"writer_waits\":false,\"readers\":[{\"token\":\"").count() >= 2, "{json}");
    assert!(json.matches("\"left_ms\":").count() >= 4, "{json}");

    let out = run(redlease().args(["scan", "-N", &urls]));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "a readers' set with a TTL is no leak: {text}");
    assert!(text.starts_with("\"catalog\" shared by 2 readers (node 0 has "), "{text}");
    let json = stdout(&run(redlease().args(["scan", "-N", &urls, "-p", "cat*", "--json"])));
    assert!(
        json.contains("\"keys_without_ttl\":0,") && json.contains("\"shared\":[{\"key\":\"catalog\",\"readers\":2,"),
        "{json}"
    );

    // A writer waits: status says so, and no new reader joins meanwhile.
    let writer = holder(&urls, "catalog", &["-w", "60"], dir.path(), "w");
    wait_until(Duration::from_secs(10), || {
        stdout(&run(redlease().args(["status", "-k", "catalog", "-N", &urls, "--json"])))
            .contains("\"writer_waits\":true")
    });
    let text = stdout(&run(redlease().args(["status", "-k", "catalog", "-N", &urls])));
    assert!(text.contains("  a writer waits") && text.contains("; a writer waits on "), "{text}");
    let out = run(redlease().args(["run", "-k", "catalog", "-N", &urls, "-s", "-n", "true"]));
    assert_eq!(out.status.code(), Some(75), "a reader joined while a writer waited: {}", stderr(&out));
    assert!(stderr(&out).contains("could not acquire a read lock on \"catalog\" at once"), "{}", stderr(&out));
    assert!(!dir.path().join("w").exists(), "the writer ran among the readers");

    std::fs::write(dir.path().join("stop"), "").unwrap();
    for r in readers {
        finished(r);
    }
    finished(writer);
    let json = stdout(&run(redlease().args(["status", "-k", "catalog", "-N", &urls, "--json"])));
    assert!(json.contains("\"state\":\"not_held\"") && json.ends_with("\"readers\":null}\n"), "{json}");
    servers.assert_no_leaks();
}

/// A `run -s` alone holds the key as a sole reader (`:readers:TOKEN`, no readers' set):
/// `status` and `scan` still show it as one reader, never the internal value.
#[test]
fn status_and_scan_show_a_sole_reader() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let dir = TempDir::new("redlease-cli-sole-reader").unwrap();
    let reader = holder(&urls, "shelf", &["-s"], dir.path(), "r1");
    wait_until(Duration::from_secs(10), || dir.path().join("r1").exists());
    let text = stdout(&run(redlease().args(["status", "-k", "shelf", "-N", &urls])));
    let holding = text.lines().filter(|l| l.starts_with("node ") && l.contains("  read by 1 reader  pttl ")).count();
    assert!(holding >= 2 && !text.contains(":readers"), "{text}");
    assert!(text.contains("shelf: shared by 1 reader on "), "{text}");
    let json = stdout(&run(redlease().args(["status", "-k", "shelf", "-N", &urls, "--json"])));
    assert!(
        json.contains("\"shape\":\"shared\",\"holder\":null,\"holders\":[\"") && !json.contains(":readers"),
        "{json}"
    );
    let text = stdout(&run(redlease().args(["scan", "-N", &urls])));
    assert!(text.starts_with("\"shelf\" shared by 1 reader "), "{text}");
    std::fs::write(dir.path().join("stop"), "").unwrap();
    finished(reader);
    servers.assert_no_leaks();
}

#[test]
fn scan_reports_a_readers_set_without_a_ttl() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let mut conn = servers.node(1).conn().unwrap();
    conn.checked(&["ZADD", "redlease:readers:app:orphan", "99999999999999", "0123456789abcdef"]).unwrap();
    for pattern in ["*", "orph*"] {
        let out = run(redlease().args(["scan", "-N", &urls, "--key-prefix", "app:", "-p", pattern]));
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{pattern}: {text}");
        assert!(text.contains("node 1 ") && text.contains(": redlease:readers:app:orphan has no TTL\n"), "{text}");
        let line =
            "\"app:orphan\" has readers on too few nodes to hold it (node 0 has none, node 1 has 1, node 2 has none)";
        assert!(text.contains(line), "{text}");
        assert!(text.ends_with(&format!("1 key(s) without a TTL matching \"app:{pattern}\"\n")), "{text}");
    }
    let json = stdout(&run(redlease().args(["scan", "-N", &urls, "--json"])));
    assert!(json.contains("\"keys_without_ttl\":[\"redlease:readers:app:orphan\"]"), "{json}");
    // With a TTL, as readers leave it, it is no leak.
    conn.checked(&["PEXPIRE", "redlease:readers:app:orphan", "60000"]).unwrap();
    let out = run(redlease().args(["scan", "-N", &urls, "--key-prefix", "app:"]));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// A reader's command sees the writer epoch in REDLEASE_FENCE: the fencing token of the key's
/// last writer (0 before any), the same for every reader under it, below the next writer's.
/// -s and -x: the last one given wins; a reader is refused while a writer holds the key.
#[test]
fn a_readers_fence_is_the_writer_epoch_and_the_last_of_s_and_x_wins() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let fence = |flags: &[&str]| -> u64 {
        let out = run(redlease()
            .args(["run", "-k", "epoch", "-N", &urls, "-v"])
            .args(flags)
            .args(["-c", "echo $REDLEASE_FENCE"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out).trim().parse().unwrap_or_else(|_| panic!("{}", stdout(&out)))
    };
    assert_eq!(fence(&["-s"]), 0);
    let first = fence(&[]);
    assert!(first >= 1);
    assert_eq!((fence(&["-s"]), fence(&["--shared"])), (first, first));
    let second = fence(&["-x"]);
    assert!(second > first, "{second} after {first}");
    assert_eq!(fence(&["-s"]), second);
    let out = run(redlease().args(["run", "-k", "epoch", "-N", &urls, "-s", "-v", "true"]));
    let verbose = stderr(&out);
    assert!(verbose.contains(&format!("acquired a read lock on \"epoch\" under writer epoch {second} ")), "{verbose}");
    assert!(verbose.contains("release of a read lock on \"epoch\": released ("), "{verbose}");

    let dir = TempDir::new("redlease-cli-shared-flags").unwrap();
    let reader = holder(&urls, "catalog", &["-s"], dir.path(), "r");
    wait_until(Duration::from_secs(10), || dir.path().join("r").exists());
    let try_lock =
        |flags: &[&str]| run(redlease().args(["run", "-k", "catalog", "-N", &urls, "-n"]).args(flags).arg("true"));
    for flags in [&["-s", "-x"][..], &["-s", "-e"], &["-x"], &[]] {
        assert_eq!(try_lock(flags).status.code(), Some(75), "{flags:?} ran among the readers");
    }
    assert_eq!(try_lock(&["-x", "-s"]).status.code(), Some(0), "a second reader was refused");
    std::fs::write(dir.path().join("stop"), "").unwrap();
    finished(reader);
    // A writer holds it: a reader is refused, with the conflict code it was given.
    std::fs::remove_file(dir.path().join("stop")).unwrap();
    let writer = holder(&urls, "catalog", &[], dir.path(), "w");
    wait_until(Duration::from_secs(10), || dir.path().join("w").exists());
    let out = try_lock(&["-s", "-E", "9"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stderr(&out).contains("could not acquire a read lock on \"catalog\" at once"), "{}", stderr(&out));
    std::fs::write(dir.path().join("stop"), "").unwrap();
    finished(writer);
    servers.assert_no_leaks();
}

#[test]
fn shared_usage_errors_exit_64_and_help_documents_it() {
    let n = "redis://127.0.0.1:1";
    for args in [
        &["run", "-k", "k", "-N", n, "-s", "--permits", "3", "true"][..],
        &["run", "-k", "k", "-N", n, "--permits", "3", "--shared", "true"],
    ] {
        let out = run(redlease().args(args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains("--shared") && err.contains("--permits"), "{args:?}: {err}");
    }
    let help = stdout(&run(redlease().args(["run", "--help"])));
    for needle in ["-s, --shared", "-x, --exclusive", "writer epoch", "Read and write locks (-s, -x):", " -s ./"] {
        assert!(help.contains(needle), "run --help lacks {needle:?}: {help}");
    }
    let help = stdout(&run(redlease().args(["run", "-h"])));
    assert!(help.contains("-s, --shared") && help.contains("writer epoch"), "{help}");
    let help = stdout(&run(redlease().args(["status", "--help"])));
    assert!(help.contains("readers"), "{help}");
    let help = stdout(&run(redlease().args(["scan", "--help"])));
    assert!(help.contains("redlease:readers:KEY"), "{help}");
}
