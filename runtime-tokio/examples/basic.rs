//! Lock, extend, release, and the scoped form, on tokio.
//!
//! Start three Redis servers (e.g. `redis-server --port 7000 --save '' --appendonly no` and
//! the same on 7001 and 7002), then run
//! `cargo run -p redlease-tokio --example basic -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`.

use std::time::Duration;

use redlease_tokio::{Client, Error, LockOptions};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls = (7000..7003).map(|port| format!("redis://127.0.0.1:{port}")).collect();
    }
    let client = Client::connect(&urls).await?;

    // Take the lock (retrying a few times if someone else holds it), extend it, release it.
    let mut guard = client.lock("orders:42", Duration::from_secs(10)).await?;
    println!("locked {} with token {}, valid for {:?}", guard.resource(), guard.token(), guard.remaining());
    let until = guard.extend(Duration::from_secs(10)).await?;
    println!("extended until {until:?}");
    let report = guard.release().await?;
    println!("released: {report:?}");

    // Wait up to two seconds for a lock, with a fencing token for the storage it protects.
    let options = LockOptions::new("orders:42", Duration::from_secs(5)).fencing(true).wait(Duration::from_secs(2));
    let guard = client.lock_with(options).await?;
    println!("fencing token {:?}", guard.fence());
    drop(guard); // released in the background

    // The scoped form takes the same options: the lock is extended automatically while the
    // work runs, the work sees its fencing token and deadline, and it can stop as soon as the
    // lock is lost.
    let options = LockOptions::new("orders:42", Duration::from_secs(3)).fencing(true);
    let outcome = client
        .with_lock(options, |lease| async move {
            println!("working with fencing token {:?}, valid for {:?}", lease.fence(), lease.remaining());
            tokio::select! {
                _ = lease.lost().wait() => "lost the lock: stopped",
                _ = tokio::time::sleep(Duration::from_secs(5)) => "work done under auto-extension",
            }
        })
        .await?;
    println!("{outcome}");
    Ok(())
}
