//! No password ever shows: not in `--help`, not in any error, whether it came by flag, by
//! `REDLEASE_NODES` or inside any kind of URL, and not in the environment of the command.

mod common;

use common::{nodes, redlease, run, stderr, stdout};
use redlease_servers::Servers;

const SECRET: &str = "hunter2s3cret";

fn assert_hidden(what: &str, out: &std::process::Output) {
    for (stream, text) in [("stdout", stdout(out)), ("stderr", stderr(out))] {
        assert!(!text.contains(SECRET), "{what}: the password shows on {stream}:\n{text}");
    }
}

#[test]
fn help_never_shows_the_value_of_redlease_nodes() {
    let env = format!("redis://alice:{SECRET}@127.0.0.1:7000,redis://:{SECRET}@127.0.0.1:7001");
    let helps: &[&[&str]] = &[
        &["--help"],
        &["-h"],
        &["help", "run"],
        &["run", "--help"],
        &["run", "-h"],
        &["status", "--help"],
        &["scan", "--help"],
        &["servers", "--help"],
        &["cluster", "--help"],
        &["demo", "--help"],
        &["completions", "--help"],
    ];
    for args in helps {
        let out = run(redlease().env("REDLEASE_NODES", &env).args(*args));
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_hidden(&format!("{args:?}"), &out);
    }
    let out = run(redlease().env("REDLEASE_NODES", &env).args(["run", "--help"]));
    assert!(stdout(&out).contains("[env: REDLEASE_NODES]"), "the variable is still named: {}", stdout(&out));
    // Completion scripts neither.
    for shell in ["bash", "zsh", "fish"] {
        let out = run(redlease().env("REDLEASE_NODES", &env).args(["completions", shell]));
        assert_hidden(shell, &out);
    }
}

#[test]
fn usage_errors_never_show_a_password_from_a_flag_the_environment_or_any_url() {
    let urls = [
        // rediss:// and redis+unix:// are valid schemes: a bad port, a relative socket path.
        format!("rediss://alice:{SECRET}@127.0.0.1:x"),
        format!("http://alice:{SECRET}@127.0.0.1:7000"),
        format!("redis+unix://:{SECRET}@tmp/redis.sock"),
        format!("redis+unix:///tmp/redis.sock?db=x&pass={SECRET}"),
        format!("alice:{SECRET}@127.0.0.1:7000"),
        format!("{SECRET}@127.0.0.1:7000"),
        format!("redis:/alice:{SECRET}@127.0.0.1:7000"),
        format!("redis://alice:{SECRET}@127.0.0.1:x"),
        format!("redis://alice:{SECRET}@127.0.0.1:7000/db"),
        format!("redis://alice:{SECRET}/more@127.0.0.1:7000"),
        format!("redis://127.0.0.1:7000,redis://alice:{SECRET}@127.0.0.1:0"),
    ];
    for url in &urls {
        // By flag, for each command that takes nodes.
        for args in [
            vec!["run", "-k", "k", "-N", url, "true"],
            vec!["run", "--key", "k", "--nodes", url, "--", "true"],
            vec!["status", "-k", "k", "-N", url],
            vec!["scan", "-N", url],
            vec!["scan", "-N", url, "--json"],
        ] {
            let out = run(redlease().args(&args));
            assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("--nodes"), "{args:?}: {}", stderr(&out));
            assert_hidden(&format!("{args:?}"), &out);
        }
        // By environment.
        for args in [vec!["run", "-k", "k", "true"], vec!["status", "-k", "k"], vec!["scan"]] {
            let out = run(redlease().env("REDLEASE_NODES", url).args(&args));
            assert_eq!(out.status.code(), Some(64), "{args:?} with {url}: {}", stderr(&out));
            assert_hidden(&format!("REDLEASE_NODES {args:?}"), &out);
        }
    }
    // Errors clap reports itself quote the arguments they reject: a URL given where no URL
    // was expected (the -N forgotten), or next to another bad flag.
    let url = format!("redis://alice:{SECRET}@127.0.0.1:7000");
    for args in [
        vec!["status", &url],
        vec!["scan", &url],
        vec!["status", "-k", "k", "-N", &url, "--bogus"],
        vec!["run", "-k", "k", "-N", &url, "-E", "300", "true"],
        vec!["run", "-k", "k", "-N", &url, "-w", "soon", "true"],
        vec!["run", "-N", &url, "true"],
        vec![&url],
    ] {
        let out = run(redlease().args(&args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert_hidden(&format!("{args:?}"), &out);
    }
}

#[test]
fn runtime_errors_never_show_a_password() {
    // Nodes that do not answer, with a password in their URLs.
    let down = format!("redis://alice:{SECRET}@127.0.0.1:1,redis://:{SECRET}@127.0.0.1:2,redis://{SECRET}@127.0.0.1:3");
    for args in [
        vec!["run", "-k", "k", "-N", &down, "-n", "true"],
        vec!["run", "-k", "k", "-N", &down, "-w", "0.3", "true"],
        vec!["status", "-k", "k", "-N", &down],
        vec!["status", "-k", "k", "-N", &down, "--json"],
        vec!["scan", "-N", &down],
        vec!["scan", "-N", &down, "--json"],
    ] {
        let out = run(redlease().args(&args));
        assert_eq!(out.status.code(), Some(69), "{args:?}: {}{}", stdout(&out), stderr(&out));
        assert_hidden(&format!("{args:?}"), &out);
    }
}

#[test]
fn a_wrong_or_right_password_on_real_nodes_never_shows() {
    let servers = Servers::builder().nodes(3).acl_user("alice", SECRET).start();
    // Right password: the lock works, and nothing prints it.
    let urls = nodes(&servers);
    assert!(urls.contains(SECRET));
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-c", "env"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_hidden("run with the right password (the command's environment included)", &out);
    // Nodes with a password in REDLEASE_NODES: the command does not inherit them.
    let out = run(redlease().env("REDLEASE_NODES", &urls).args(["run", "-k", "job", "-c", "env"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).contains("REDLEASE_NODES="), "{}", stdout(&out));
    assert_hidden("run with REDLEASE_NODES holding a password (the command's environment)", &out);
    for args in [vec!["status", "-k", "job", "-N", &urls], vec!["status", "-k", "job", "-N", &urls, "--json"]] {
        let out = run(redlease().args(&args));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("redis://alice@127.0.0.1:"), "{}", stdout(&out));
        assert_hidden(&format!("{args:?}"), &out);
    }
    let out = run(redlease().env("REDLEASE_NODES", &urls).args(["scan", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_hidden("scan", &out);

    // Wrong password: `run` says misconfigured (78), `status` and `scan` that no quorum
    // answered (69), and neither password shows.
    let wrong_secret = format!("{SECRET}-wrong");
    let wrong = urls.replace(SECRET, &wrong_secret);
    for (args, code) in [
        (vec!["run", "-k", "job", "-N", &wrong, "-n", "true"], 78),
        (vec!["status", "-k", "job", "-N", &wrong, "--json"], 69),
        (vec!["scan", "-N", &wrong], 69),
    ] {
        let out = run(redlease().args(&args));
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}{}", stdout(&out), stderr(&out));
        assert_hidden(&format!("{args:?}"), &out);
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!all.contains("wrong"), "{args:?}: the wrong password shows: {all}");
    }
}
