//! `redlease servers --cluster-mode`: local Redis Clusters in the foreground, one seed URL per
//! cluster in REDLEASE_NODES, every process stopped on Ctrl-C or SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Child;

use common::{alive, redlease, run, signal, spawn_piped, stderr};
use redlease_servers::{RedisConn, Reply};

/// Start `redlease ARGS` and read its output up to the REDLEASE_NODES line: the seed addresses
/// and the pid of every node it printed.
fn start(args: &[&str]) -> (Child, Vec<SocketAddr>, Vec<u32>) {
    let mut child = spawn_piped(args);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pids = Vec::new();
    let seeds = loop {
        let line = lines.next().expect("servers output ended early").unwrap();
        if let Some(pid) = line.rsplit_once("(pid ").and_then(|(_, p)| p.strip_suffix(')')) {
            pids.push(pid.parse().unwrap());
        }
        if let Some(urls) = line.strip_prefix("export REDLEASE_NODES=") {
            break urls.split(',').map(|u| u.strip_prefix("redis://").unwrap().parse().unwrap()).collect();
        }
    };
    // Keep reading (and dropping) the rest, so that the command never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, seeds, pids)
}

/// `CLUSTER INFO` of `addr` as text.
fn cluster_info(addr: SocketAddr) -> String {
    RedisConn::connect(addr, None).unwrap().cmd(&["CLUSTER", "INFO"]).unwrap().as_text().unwrap()
}

/// Per `CLUSTER SLOTS` range of `addr`: its first and last slot, its master's port and how
/// many replicas it lists; sorted.
fn slot_ranges(addr: SocketAddr) -> Vec<(i64, i64, i64, usize)> {
    let reply = RedisConn::connect(addr, None).unwrap().cmd(&["CLUSTER", "SLOTS"]).unwrap();
    let Reply::Array(Some(ranges)) = reply else { panic!("CLUSTER SLOTS: {reply:?}") };
    let mut out: Vec<_> = ranges
        .iter()
        .map(|r| match r {
            Reply::Array(Some(p)) => match (&p[0], &p[1], &p[2]) {
                (Reply::Int(first), Reply::Int(last), Reply::Array(Some(master))) => match master[1] {
                    Reply::Int(port) => (*first, *last, port, p.len() - 3),
                    _ => panic!("{r:?}"),
                },
                _ => panic!("{r:?}"),
            },
            _ => panic!("{r:?}"),
        })
        .collect();
    out.sort();
    out
}

#[test]
fn cluster_mode_starts_a_redis_cluster_and_stops_it_on_ctrl_c() {
    let (mut child, seeds, pids) = start(&["servers", "--cluster-mode", "--masters", "3", "--replicas", "1"]);
    assert_eq!(seeds.len(), 1, "one Redis Cluster, one seed URL");
    assert_eq!(pids.len(), 6, "3 masters and 3 replicas");
    let info = cluster_info(seeds[0]);
    for needle in ["cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:6", "cluster_size:3"] {
        assert!(info.contains(needle), "CLUSTER INFO lacks {needle}: {info}");
    }
    // Three masters cover every slot, in order, each with its replica.
    let ranges = slot_ranges(seeds[0]);
    assert_eq!(ranges.len(), 3, "{ranges:?}");
    assert_eq!((ranges[0].0, ranges[2].1), (0, 16383), "{ranges:?}");
    assert!(ranges.windows(2).all(|w| w[0].1 + 1 == w[1].0), "{ranges:?}");
    assert!(ranges.iter().all(|r| r.3 == 1), "{ranges:?}");
    assert_eq!(ranges[0].2, i64::from(seeds[0].port()), "the seed is the first master");
    assert!(pids.iter().all(|&p| alive(p)));

    signal(child.id(), libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "Ctrl-C is handled (exit 130), not fatal");
    assert!(pids.iter().all(|&p| !alive(p)), "every redis-server is stopped after Ctrl-C");
    assert!(RedisConn::connect(seeds[0], None).is_err(), "the seed still answers");
}

#[test]
fn cluster_mode_with_nodes_starts_that_many_clusters() {
    let (mut child, seeds, pids) =
        start(&["servers", "--cluster-mode", "--nodes", "2", "--masters", "1", "--replicas", "0"]);
    assert_eq!((seeds.len(), pids.len()), (2, 2));
    for seed in &seeds {
        let info = cluster_info(*seed);
        assert!(info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:1"), "{info}");
    }
    signal(child.id(), libc::SIGTERM);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(pids.iter().all(|&p| !alive(p)), "every redis-server is stopped after SIGTERM");
}

#[test]
fn cluster_mode_flags_that_do_not_fit_are_usage_errors() {
    for (args, needle) in [
        (&["servers", "--masters", "2"][..], "--cluster-mode"),
        (&["servers", "--cluster-mode", "--tls"], "--tls"),
        (&["servers", "--cluster-mode", "--masters", "0"], "--masters 0"),
        (&["servers", "--cluster-mode", "--nodes", "0"], "--nodes 0"),
        (&["servers", "--cluster-mode", "-p", "60000"], "65535"),
    ] {
        let out = run(redlease().args(args));
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: expected {needle:?} in {}", stderr(&out));
    }
}
