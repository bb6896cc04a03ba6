//! `redlease elect` runs its command only while it leads, hands over when the command exits,
//! and never lets the command outlive its leadership; `redlease leader` prints who leads (exit 3
//! when nobody does). Real processes, real redis-server nodes.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{nodes, redlease, run, stderr, stdout, wait_until};
use redlease_servers::{Servers, TempDir};

/// Start `redlease elect -k jobs` with `extra` options and `script` as the command (`sh -c`).
fn elect(servers: &Servers, extra: &[&str], script: &str) -> Child {
    redlease()
        .args(["elect", "-k", "jobs", "-N", &nodes(servers)])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redlease elect")
}

/// `redlease leader -k jobs` (with `extra`): exit code and stdout.
fn leader(servers: &Servers, extra: &[&str]) -> (Option<i32>, String) {
    let out = run(redlease().args(["leader", "-k", "jobs", "-N", &nodes(servers)]).args(extra));
    (out.status.code(), stdout(&out))
}

fn read(file: &Path) -> String {
    wait_until(Duration::from_secs(15), || std::fs::read_to_string(file).is_ok_and(|s| s.ends_with('\n')));
    std::fs::read_to_string(file).unwrap().trim().to_owned()
}

/// Candidates queued on every node.
fn queued(servers: &Servers) -> Vec<i64> {
    servers
        .nodes()
        .iter()
        .map(|n| match n.conn().unwrap().cmd(&["LLEN", "redlease:queue:redlease:elect:{jobs}"]) {
            Ok(redlease_servers::Reply::Int(n)) => n,
            other => panic!("LLEN: {other:?}"),
        })
        .collect()
}

#[test]
fn one_leader_runs_the_other_stands_by_and_takes_over_when_the_first_exits() {
    let servers = Servers::start(3);
    assert_eq!(leader(&servers, &[]), (Some(3), String::new()), "nobody leads yet");
    assert_eq!(leader(&servers, &["--json"]), (Some(3), "{\"election\":\"jobs\",\"leader\":null}\n".into()));
    let dir = TempDir::new("redlease-cli-elect").unwrap();
    let d = dir.path().display();
    let command = |who: &str| {
        format!(
            "echo $REDLEASE_ELECTION $REDLEASE_EPOCH > {d}/{who}; while [ ! -e {d}/{who}-go ]; do sleep 0.05; done; exit 4"
        )
    };
    let alpha = elect(&servers, &["--value", "alpha", "-t", "2s"], &command("alpha"));
    let alpha_says = read(&dir.path().join("alpha"));
    let (name, epoch) = alpha_says.split_once(' ').unwrap();
    let first: u64 = epoch.parse().unwrap();
    assert_eq!(name, "jobs");
    assert_eq!(leader(&servers, &[]), (Some(0), format!("alpha {first}\n")));
    assert_eq!(
        leader(&servers, &["--json"]),
        (Some(0), format!("{{\"election\":\"jobs\",\"leader\":{{\"value\":\"alpha\",\"epoch\":{first}}}}}\n"))
    );
    // A second candidate stands by: queued on every node, its command not started.
    let beta = elect(&servers, &["--value", "beta", "-t", "2s"], &command("beta"));
    wait_until(Duration::from_secs(10), || queued(&servers) == vec![1; 3]);
    assert!(!dir.path().join("beta").exists(), "beta's command ran while alpha leads");
    // alpha's command exits: alpha resigns with its status, beta leads with a larger epoch.
    std::fs::write(dir.path().join("alpha-go"), "").unwrap();
    let out = alpha.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let second: u64 = read(&dir.path().join("beta")).split_once(' ').unwrap().1.parse().unwrap();
    assert!(second > first, "epochs {first} then {second}");
    assert_eq!(leader(&servers, &[]), (Some(0), format!("beta {second}\n")));
    std::fs::write(dir.path().join("beta-go"), "").unwrap();
    assert_eq!(beta.wait_with_output().unwrap().status.code(), Some(4));
    assert_eq!(leader(&servers, &[]).0, Some(3), "nobody leads after both resigned");
    servers.assert_no_leaks();
}

#[test]
fn a_lost_leadership_stops_the_command_and_exits_70() {
    let servers = Servers::start(3);
    let dir = TempDir::new("redlease-cli-elect-lost").unwrap();
    let d = dir.path().display();
    let script = format!("trap 'echo TERM > {d}/got; exit 0' TERM; echo $$ > {d}/pid; while :; do sleep 0.05; done");
    let child = elect(&servers, &["-t", "1s", "-g", "5s"], &script);
    read(&dir.path().join("pid"));
    // The leadership is taken away on every node: the next extension is refused.
    for n in servers.nodes() {
        n.conn().unwrap().checked(&["SET", "redlease:elect:{jobs}", "intruder", "PX", "5000"]).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(70), "{}", stderr(&out));
    assert!(dir.path().join("got").exists(), "the command was not stopped with SIGTERM");
    assert!(stderr(&out).contains("the leadership of \"jobs\" lost"), "{}", stderr(&out));
}

#[test]
fn bad_names_and_values_are_usage_errors() {
    let servers = Servers::start(1);
    for (args, says) in [
        (vec!["elect", "-k", "a{b}", "--", "true"], "--key"),
        (vec!["elect", "-k", "jobs", "--value", &"v".repeat(513), "--", "true"], "--value"),
        (vec!["leader", "-k", ""], "--key"),
    ] {
        let out = run(redlease().args(&args).args(["-N", &nodes(&servers)]));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}
