//! The blocking client: lock, extend, release; a scoped lock under auto-extension.
//!
//! ```text
//! cargo run -p redlease-mio --example blocking -- \
//!     redis://127.0.0.1:7000 redis://127.0.0.1:7001 redis://127.0.0.1:7002
//! ```

use std::time::{Duration, Instant};

use redlease_mio::{Client, Error, LockOptions};

fn main() -> Result<(), Error> {
    let urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        eprintln!("usage: blocking redis://host:port ...");
        std::process::exit(2);
    }
    let client = Client::connect(&urls)?;

    // Explicit guard.
    let mut guard = client.lock("redlease:example:blocking", Duration::from_secs(5))?;
    println!("held, token {}, valid for {:?}", guard.token(), guard.valid_until() - Instant::now());
    let until = guard.extend(Duration::from_secs(10))?;
    println!("extended, valid for {:?}", until - Instant::now());
    let report = guard.release()?;
    println!("released: {report:?}");

    // A fenced lock with a wait bound.
    let options = LockOptions::new("redlease:example:blocking", Duration::from_secs(5))
        .fencing(true)
        .wait(Duration::from_secs(10));
    let guard = client.lock_with(options)?;
    println!("fencing token {:?}", guard.fence());
    drop(guard); // released in the background

    // Scoped, with the same options: 2 s of work under a 1 s TTL, kept alive by a helper
    // thread; the work sees the fencing token for the store it writes to.
    let options = LockOptions::new("redlease:example:blocking", Duration::from_secs(1)).fencing(true);
    let steps = client.with_lock(options, |lease| {
        println!("working with fencing token {:?}", lease.fence());
        let mut steps = 0;
        for _ in 0..20 {
            if lease.is_lost() {
                println!("lost the lock: stopping");
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            steps += 1;
        }
        steps
    })?;
    println!("did {steps} steps under the lock");
    Ok(())
}
