//! The same lock from plain threads: the blocking client (feature `mio`).
//!
//! `cargo run -p redlease --example threads -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`
use std::time::Duration;

use redlease::LockOptions;
use redlease::mio::Client;

fn main() -> Result<(), redlease::Error> {
    let nodes: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::connect(&nodes)?;
    let options = LockOptions::new("orders:42", Duration::from_secs(10)).wait(Duration::from_secs(5));
    let written = client.with_lock(options, |lease| {
        // Runs while a helper thread keeps the lock extended.
        format!("wrote under token {}", lease.token())
    })?;
    println!("{written}");
    client.close();
    Ok(())
}
