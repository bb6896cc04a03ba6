//! Lock a resource across three Redis masters on tokio, with a fencing token.
//!
//! `cargo run -p redlease --example tokio -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`
use std::time::Duration;

use redlease::LockOptions;
use redlease::tokio::Client;

#[tokio::main]
async fn main() -> Result<(), redlease::Error> {
    let nodes: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::connect(&nodes).await?;

    // Wait up to 5 s for the lock; it expires by itself after 10 s unless extended.
    let options = LockOptions::new("orders:42", Duration::from_secs(10)).wait(Duration::from_secs(5)).fencing(true);
    let guard = client.lock_with(options).await?;
    println!("held until {:?}, fencing token {:?}", guard.valid_until(), guard.fence());
    // Ctrl-C (SIGINT) would end the process at once, its lock held until the TTL runs out:
    // stop the work on it instead, and let close() release the lock.
    tokio::select! {
        // ... work, passing guard.fence() to the store you protect ...
        () = tokio::time::sleep(Duration::from_secs(1)) => drop(guard.release().await?),
        _ = tokio::signal::ctrl_c() => eprintln!("interrupted: releasing the lock"),
    }

    client.close().await; // releases whatever is still held, then disconnects
    Ok(())
}
