//! `redlease run` under a `redlease run` of the same key on the same nodes re-enters its lock
//! (at once, with the enclosing run's fencing token) instead of waiting for itself;
//! `--no-reentry` turns that off; another key, or a run that is not under one, waits as
//! before; a nested run whose enclosing run is gone stops its command. Against real
//! redis-server processes.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{alive, holder, nodes, redlease, run, signal, stderr, stdout, wait_until};
use redlease_servers::{Servers, TempDir};

/// The redlease binary, for the commands that run it again.
const BIN: &str = env!("CARGO_BIN_EXE_redlease");

/// Every node's value of `key` (`None` where it is not set).
fn values(servers: &Servers, key: &str) -> Vec<Option<String>> {
    servers.nodes().iter().map(|n| n.conn().unwrap().get(key).unwrap()).collect()
}

#[test]
fn a_nested_run_of_the_same_key_reenters_with_the_outer_token_and_the_lock_ends_with_the_outer() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    // The inner run makes one attempt: only a re-entry gets the lock while the outer holds it.
    let inner = format!("{BIN} run -k deploy -N {urls} -n -c 'echo inner $REDLEASE_FENCE'");
    let script = format!("echo outer $REDLEASE_FENCE; {inner}; echo after $?");
    let out = run(redlease().args(["run", "-k", "deploy", "-N", &urls, "-w", "5", "-c", &script]));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let token = |who: &str| text.lines().find_map(|l| l.strip_prefix(who).map(str::to_owned));
    let outer = token("outer ").unwrap_or_else(|| panic!("{text}"));
    assert_eq!(token("inner "), Some(outer.clone()), "the inner run has the outer run's token: {text}");
    assert_eq!(token("after ").as_deref(), Some("0"), "{text}");
    assert!(outer.parse::<u64>().is_ok_and(|t| t > 0), "{text}");
    // Both holds released: the key is free on every node.
    assert!(values(&servers, "deploy").iter().all(Option::is_none), "{:?}", values(&servers, "deploy"));
    servers.assert_no_leaks();
}

/// The way a shell user runs it: nodes in `REDLEASE_NODES`, the nested run given nothing but
/// its key. Nodes without a password stay in the command's environment (with a password they
/// are taken out, and a nested run is given its nodes: `secrets.rs`).
#[test]
fn a_nested_run_finds_the_nodes_in_the_environment_the_outer_run_passed_on() {
    let servers = Servers::start(3);
    let script = format!("{BIN} run -k deploy -n -c 'echo inner $REDLEASE_FENCE'; echo after $?");
    let out = run(redlease().env("REDLEASE_NODES", nodes(&servers)).args(["run", "-k", "deploy", "-c", &script]));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("inner ") && text.contains("after 0"), "the nested run re-entered: {text}");
    servers.assert_no_leaks();
}

#[test]
fn no_reentry_waits_for_the_enclosing_run_and_so_does_another_key_or_a_run_outside() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let nested = |outer: &[&str], inner: &str| {
        let script = format!("{BIN} run -k deploy -N {urls} -n {inner} -c true; echo inner $?");
        let mut args = vec!["run", "-k", "deploy", "-N", &urls, "-w", "5"];
        args.extend(outer);
        args.extend(["-c", &script]);
        let out = run(redlease().args(&args));
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    // --no-reentry on the inner run, or on the outer one: the inner run is refused (75).
    assert_eq!(nested(&[], "--no-reentry").trim(), "inner 75");
    assert_eq!(nested(&["--no-reentry"], "").trim(), "inner 75");
    // The same key on other nodes (a subset is another Redlock) is another lock: refused too,
    // since those nodes hold the outer run's key.
    let two = servers.urls()[..2].join(",");
    let script = format!("{BIN} run -k deploy -N {two} -n -c true; echo inner $?");
    let out = run(redlease().args(["run", "-k", "deploy", "-N", &urls, "-c", &script]));
    assert_eq!(stdout(&out).trim(), "inner 75", "{}", stderr(&out));
    // Another key under the run: a lock of its own.
    let script = format!("{BIN} run -k other -N {urls} -n -c 'echo inner $REDLEASE_KEY'");
    let out = run(redlease().args(["run", "-k", "deploy", "-N", &urls, "-c", &script]));
    assert_eq!(stdout(&out).trim(), "inner other", "{}", stderr(&out));
    // A run outside, even one that sets the variables of another run's lock by hand, waits.
    let dir = TempDir::new("redlease-cli-reentry").unwrap();
    let mut outer = holder(&urls, "deploy", &[], dir.path(), "held");
    wait_until(Duration::from_secs(10), || dir.path().join("held").exists());
    let out = run(redlease().args(["run", "-k", "deploy", "-N", &urls, "-n", "true"]));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let forged = run(redlease()
        .args(["run", "-k", "deploy", "-N", &urls, "-n", "true"])
        .env("REDLEASE_OWNER", "run-0")
        .env("REDLEASE_SCOPE", "deploy@0")
        .env("REDLEASE_OWNER_PID", "1"));
    assert_eq!(forged.status.code(), Some(75), "{}", stderr(&forged));
    std::fs::write(dir.path().join("stop"), b"").unwrap();
    assert!(outer.wait().unwrap().success());
    servers.assert_no_leaks();
}

#[test]
fn a_nested_run_stops_its_command_once_the_enclosing_run_is_gone() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let dir = TempDir::new("redlease-cli-reentry-gone").unwrap();
    let d = dir.path().display();
    // The nested run goes to the background (its shell, the outer run's command, waits for it):
    // killing the outer run kills that shell, and leaves the nested run running.
    let inner = format!("{BIN} run -k deploy -N {urls} -n -g 1 -c 'touch {d}/inner; while :; do sleep 0.05; done'");
    let script = format!("{inner} & echo $! > {d}/pid; wait");
    let mut outer = redlease()
        .args(["run", "-k", "deploy", "-N", &urls, "-t", "3s", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || dir.path().join("inner").exists());
    let pid: u32 = std::fs::read_to_string(dir.path().join("pid")).unwrap().trim().parse().unwrap();
    assert!(alive(pid));
    signal(outer.id(), libc::SIGKILL);
    let _ = outer.wait();
    // The nested run notices, stops its command and ends (exit 70, as for a lost lock).
    wait_until(Duration::from_secs(10), || !alive(pid));
    // Its hold is gone: what is left is the outer run's, which expires with its TTL.
    wait_until(Duration::from_secs(10), || values(&servers, "deploy").iter().all(Option::is_none));
    servers.assert_no_leaks();
}

#[test]
fn run_help_explains_reentry_and_its_variables() {
    let help = stdout(&run(redlease().args(["run", "--help"])));
    for topic in ["Re-entry:", "--no-reentry", "REDLEASE_OWNER", "REDLEASE_SCOPE", "REDLEASE_OWNER_PID"] {
        assert!(help.contains(topic), "run --help lacks {topic}: {help}");
    }
    let short = stdout(&run(redlease().args(["run", "-h"])));
    assert!(short.contains("--no-reentry"), "{short}");
}
