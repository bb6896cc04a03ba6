//! `redlease run` as cron runs it: how fast it fails when the nodes are down or refuse us, what
//! it says on stderr (`-q`, `--verbose`), and the wait bounds cron lines use.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{nodes, redlease, run, stderr, wait_until};
use redlease_cluster::Cluster;

#[test]
fn wait_bounds_take_forever_and_days() {
    let cluster = Cluster::start(3);
    let urls = nodes(&cluster);
    for wait in ["inf", "forever", "1d", "0.5d", "0"] {
        let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-w", wait, "true"]));
        assert_eq!(out.status.code(), Some(0), "-w {wait}: {}", stderr(&out));
    }
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-t", "1d", "-g", "1d", "true"]));
    assert_eq!(out.status.code(), Some(0), "-t 1d: {}", stderr(&out));
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-w", "soon", "true"]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("forever"), "{}", stderr(&out));
    // Without a bound it waits out a holder, however many attempts that takes.
    let mut holder =
        redlease().args(["run", "-k", "job", "-N", &urls, "--", "sleep", "2"]).stdin(Stdio::null()).spawn().unwrap();
    wait_until(Duration::from_secs(10), || cluster.node(0).conn().unwrap().get("job").unwrap().is_some());
    let out = run(redlease().args(["run", "-k", "job", "-N", &urls, "-w", "forever", "true"]));
    assert_eq!(out.status.code(), Some(0), "-w forever: {}", stderr(&out));
    assert_eq!(holder.wait().unwrap().code(), Some(0));
    cluster.assert_no_leaks();
}
