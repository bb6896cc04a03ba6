//! The health view: every node's state, round trip and last error, and how many more nodes
//! may fail before locking stops.
//!
//! `cargo run -p redlease-tokio --example health -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`

use std::time::Duration;

use redlease_tokio::{Client, Config, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls = (7000..7003).map(|port| format!("redis://127.0.0.1:{port}")).collect();
    }
    let client = Client::with_config(Config::from_urls(&urls)?).await?;
    // A few locks, so that the nodes have round-trip figures.
    for _ in 0..10 {
        let _ = client.try_lock("health:probe", Duration::from_secs(1)).await.map(drop);
    }
    let health = client.health().await?;
    println!("{health}");
    if health.misconfigured() {
        eprintln!("a node refuses us for a configuration reason: fix it, retrying will not");
    }
    if !health.can_lock() {
        std::process::exit(69);
    }
    Ok(())
}
