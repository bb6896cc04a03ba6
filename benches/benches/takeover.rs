//! Leader election: how long after a leader resigns, and after its process is killed with
//! SIGKILL, the candidate waiting in line leads (p50 and p99, against the TTL), on three local
//! `redis-server` nodes with the tokio client.
//!
//! `cargo bench -p redlease-benches --bench takeover`: 200 resigns and 30 kills with a 1 s TTL;
//! `cargo test` runs 5 and 2 (it fails if a takeover does not happen, never on a speed). The
//! leader that is killed is this program run again as a child process: it campaigns, prints its
//! epoch and sleeps, its client keeping the leadership extended.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redlease_benches::stats::{Hist, dur};
use redlease_servers::{Reply, Servers};
use redlease_tokio::{Client, ElectionOptions};

/// Set in the child: the node URLs it campaigns on.
const LEADER: &str = "REDLEASE_TAKEOVER_LEADER";
const TTL: Duration = Duration::from_secs(1);
const NAME: &str = "takeover";

/// A campaign that fails, rather than hangs, if no takeover comes.
fn options(value: &str) -> ElectionOptions {
    ElectionOptions::new(NAME, value).ttl(TTL).wait(Duration::from_secs(30))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime")
}

fn main() {
    if let Ok(urls) = std::env::var(LEADER) {
        return runtime().block_on(async {
            let client = Client::connect(urls.split(',')).await.expect("connect");
            let leadership = client.campaign(options("killed")).await.expect("campaign");
            println!("{}", leadership.epoch());
            std::future::pending::<()>().await
        });
    }
    let full = std::env::args().any(|a| a == "--bench");
    let (resigns, kills) = if full { (200, 30) } else { (5, 2) };
    let servers = Servers::start(3);
    let urls = servers.urls();
    // Until the candidate is queued on every node (at most 10 s): the leader's release then
    // names it.
    let queued = || {
        let queue = format!("redlease:queue:redlease:elect:{{{NAME}}}");
        let len = |n: &redlease_servers::Node| n.conn().ok()?.cmd(&["LLEN", &queue]).ok();
        let until = Instant::now() + Duration::from_secs(10);
        while !servers.nodes().iter().all(|n| matches!(len(n), Some(Reply::Int(1..)))) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let (resigned, killed) = runtime().block_on(async {
        let leader = Client::connect(&urls).await.expect("connect");
        let next = Client::connect(&urls).await.expect("connect");
        let mut resigned = Hist::default();
        for _ in 0..resigns {
            let leadership = leader.campaign(options("leader")).await.expect("campaign");
            let waiting = tokio::spawn({
                let next = next.clone();
                async move { next.campaign(options("next")).await }
            });
            tokio::task::block_in_place(queued);
            let t0 = Instant::now();
            leadership.resign().await.expect("resign");
            let took = waiting.await.expect("task").expect("the next candidate leads");
            resigned.record(t0.elapsed());
            took.resign().await.expect("resign");
        }
        let mut killed = Hist::default();
        for i in 0..kills {
            let exe = std::env::current_exe().expect("this program");
            let mut child =
                Command::new(exe).env(LEADER, urls.join(",")).stdout(Stdio::piped()).spawn().expect("spawn");
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("its epoch");
            let waiting = tokio::spawn({
                let next = next.clone();
                async move { next.campaign(options("next")).await }
            });
            tokio::task::block_in_place(queued);
            // Kill at a different point of its extension cycle (every TTL / 3) each time.
            tokio::time::sleep(TTL / 3 * (i % 7) / 7).await;
            let t0 = Instant::now();
            child.kill().expect("SIGKILL");
            let took = waiting.await.expect("task").expect("the next candidate leads");
            killed.record(t0.elapsed());
            assert!(took.epoch() > line.trim().parse().expect("an epoch"), "epochs go up");
            took.resign().await.expect("resign");
            let _ = child.wait();
        }
        (resigned, killed)
    });
    println!("takeover, 3 nodes, tokio, TTL {}:", dur(Some(TTL)));
    println!("| after | samples | p50 | p99 | p50 / TTL | p99 / TTL |");
    println!("|---|---|---|---|---|---|");
    for (what, h) in [("resign", &resigned), ("kill -9", &killed)] {
        let frac = |d: Option<Duration>| d.map_or(0.0, |p| p.as_secs_f64() / TTL.as_secs_f64());
        let (p50, p99) = (h.p50(), h.p99());
        println!("| {what} | {} | {} | {} | {:.3} | {:.3} |", h.count(), dur(p50), dur(p99), frac(p50), frac(p99));
    }
}
