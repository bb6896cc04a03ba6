//! Leader election and a re-entrant lock on tokio.
//!
//! `cargo run -p redlease --example election_and_reentry -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`
use std::time::Duration;

use redlease::tokio::Client;
use redlease::{ElectionOptions, LockOptions};

#[tokio::main]
async fn main() -> Result<(), redlease::Error> {
    let nodes: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::connect(&nodes).await?;

    // Lead "scheduler" (waiting while another instance leads); observers see the value.
    let leadership = client.campaign(ElectionOptions::new("scheduler", "10.0.0.7:8080")).await?;
    println!("leading with epoch {}", leadership.epoch()); // fence the leader's writes with it
    let leader = client.leader("scheduler").await?; // what any client sees: value and epoch
    println!("{:?}", leader.map(|l| (String::from_utf8_lossy(&l.value).into_owned(), l.epoch)));
    tokio::select! {
        reason = leadership.lost().wait() => eprintln!("leadership lost: {reason:?}"),
        () = tokio::time::sleep(Duration::from_secs(1)) => drop(leadership.resign().await?),
    }
    // One owner (a name any process may use) takes "deploy" again while it holds it.
    let job = LockOptions::new("deploy", Duration::from_secs(30)).reentrant("ci-run-8812");
    let outer = client.lock_with(job.clone()).await?;
    let inner = client.lock_with(job.try_once()).await?; // granted at once
    inner.release().await?;
    outer.release().await?; // free for other owners once the last hold is released

    client.close().await;
    Ok(())
}
