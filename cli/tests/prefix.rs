//! `--key-prefix` (or `REDLEASE_KEY_PREFIX`): `run` locks PREFIX+KEY, as a library client with
//! the same `Config::key_prefix` does, and `status` looks at the same key.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{nodes, redlease, run, stdout, wait_until};
use redlease_servers::Servers;

#[test]
fn run_and_status_use_the_key_prefix() {
    let servers = Servers::start(3);
    let urls = nodes(&servers);
    let mut holder = redlease()
        .args(["run", "-k", "job", "-N", &urls, "--key-prefix", "app1:", "--", "sleep", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = |prefix: Option<&str>| {
        let mut cmd = redlease();
        cmd.args(["status", "-k", "job", "-N", &urls, "--json"]);
        if let Some(p) = prefix {
            cmd.env("REDLEASE_KEY_PREFIX", p);
        }
        stdout(&run(&mut cmd)).contains("\"state\":\"held\"")
    };
    wait_until(Duration::from_secs(10), || held(Some("app1:")));
    assert!(!held(None), "the key without the prefix is free");
    let mut conn = servers.node(0).conn().unwrap();
    assert!(conn.get("app1:job").unwrap().is_some() && conn.get("job").unwrap().is_none());
    assert!(holder.wait().unwrap().success());
    // scan looks under the prefix only.
    conn.set("app1:leak", "x").unwrap();
    conn.set("other:leak", "x").unwrap();
    let out = run(redlease().args(["scan", "-p", "*", "-N", &urls, "--key-prefix", "app1:"]));
    let text = stdout(&out);
    assert!(text.contains("app1:leak") && !text.contains("other:leak"), "{text}");
    conn.del("app1:leak").unwrap();
    conn.del("other:leak").unwrap();
    servers.assert_no_leaks();
}
