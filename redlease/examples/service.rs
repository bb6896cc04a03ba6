//! A service that does its work under a lock, batch after batch, and stops cleanly: Ctrl-C
//! (SIGINT) or SIGTERM ends the work in progress and `close()` releases the lock at once,
//! where a process killed by the signal would leave it held until its TTL ran out.
//!
//! `cargo run -p redlease --example service -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`
use std::time::Duration;

use redlease::LockOptions;
use redlease::tokio::Client;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> Result<(), redlease::Error> {
    let nodes: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::connect(&nodes).await?;
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        result = serve(&client) => result?,
        _ = tokio::signal::ctrl_c() => eprintln!("interrupted: releasing the lock"),
        _ = terminate.recv() => eprintln!("terminated: releasing the lock"),
    }
    client.close().await; // releases whatever is still held, then disconnects
    Ok(())
}

/// Batch after batch, each under the lock (waiting as long as another instance holds it),
/// kept extended while the batch runs.
async fn serve(client: &Client) -> Result<(), redlease::Error> {
    loop {
        let options = LockOptions::new("reports:nightly", Duration::from_secs(10)).fencing(true).wait_forever();
        client
            .with_lock(options, |lease| async move {
                println!("batch under fencing token {:?}", lease.fence());
                tokio::select! {
                    // ... the batch, passing lease.fence() to the store it writes to ...
                    () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = lease.lost().wait() => eprintln!("lost the lock: batch stopped"),
                }
            })
            .await?;
    }
}
