//! Lock, extend, release, and the scoped form, under smol.
//!
//! Start three Redis servers (e.g. `redis-server --port 7000 --save '' --appendonly no` and
//! the same on 7001 and 7002), then run
//! `cargo run -p redlease-smol --example smol -- redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002`.

use std::time::Duration;

use futures_lite::future;
use redlease_smol::{Client, Config, Error, LockOptions};

fn main() -> Result<(), Error> {
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls = (7000..7003).map(|port| format!("redis://127.0.0.1:{port}")).collect();
    }
    smol::block_on(async {
        // The driver runs on smol's executor, next to our tasks.
        let (client, driver) = Client::with_driver(Config::from_urls(&urls)?).await?;
        smol::spawn(driver).detach();

        let mut guard = client.lock("orders:42", Duration::from_secs(10)).await?;
        println!("locked {} with token {}, valid for {:?}", guard.resource(), guard.token(), guard.remaining());
        guard.extend(Duration::from_secs(10)).await?;
        println!("released: {:?}", guard.release().await?);

        // Many tasks share one client (and one connection per node).
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let client = client.clone();
                smol::spawn(async move {
                    let guard = client
                        .lock_with(LockOptions::new("orders:42", Duration::from_secs(5)).wait(Duration::from_secs(5)))
                        .await?;
                    println!("task {i} holds the lock");
                    smol::Timer::after(Duration::from_millis(20)).await;
                    guard.release().await.map(|_| ())
                })
            })
            .collect();
        for task in tasks {
            task.await?;
        }

        // The scoped form takes the same options: auto-extension while the work runs, the
        // fencing token and deadline for the work, and a signal if the lock is lost.
        let outcome = client
            .with_lock(LockOptions::new("orders:42", Duration::from_secs(3)).fencing(true), |lease| async move {
                println!("working with fencing token {:?}, valid for {:?}", lease.fence(), lease.remaining());
                let work = async {
                    smol::Timer::after(Duration::from_secs(4)).await;
                    "work done under auto-extension"
                };
                future::or(work, async {
                    lease.lost().wait().await;
                    "lost the lock: stopped"
                })
                .await
            })
            .await?;
        println!("{outcome}");
        Ok(())
    })
}
