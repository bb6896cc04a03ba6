//! A semaphore and a reader-writer lock on tokio.
//!
//! `cargo run -p redlease --example semaphore_and_rwlock -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`
use std::time::Duration;

use redlease::LockOptions;
use redlease::tokio::Client;

#[tokio::main]
async fn main() -> Result<(), redlease::Error> {
    let nodes: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::connect(&nodes).await?;
    let ttl = Duration::from_secs(10);

    // At most 4 holders of "exports" at once, across every client and machine.
    let permit = client.lock_with(LockOptions::new("exports", ttl).semaphore(4)).await?;
    println!("permit {:?}", permit.permits());
    permit.release().await?;

    // Many readers or one writer; the write lock is the plain lock of the name.
    let reader = client.lock_with(LockOptions::new("catalog", ttl).shared(true)).await?;
    reader.release().await?;
    let mut writer = client.lock("catalog", ttl).await?; // waits for the readers
    writer.downgrade().await?; // now a reader, atomically
    writer.release().await?;

    client.close().await;
    Ok(())
}
