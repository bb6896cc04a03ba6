//! A program that takes a lock and ends without calling `close()`, the ways real programs
//! end: `redlease-exit-worker RUNTIME WAY KEY URL...` (RUNTIME: `tokio-mt`, `tokio-ct`, `smol`,
//! `mio` or `mio-auto` (auto-extended); WAY: `drop` (drop the guard, return from `main`), `alive` (return with the guard
//! still alive) or `error` (leave `main` through `?` with the guard alive); on tokio also
//! `ctrl-c` (wait for Ctrl-C, then `close()`, as the README shows) and `no-handler` (wait
//! with no handler: SIGINT kills the process)). Prints `held` once the lock is taken; exits
//! 0, or 1 for `error`. Used by `tests/exit.rs`, which checks that no key is left behind.

use std::time::Duration;

/// Long enough that a key left behind is plain to see.
const TTL: Duration = Duration::from_secs(30);

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [runtime, way, key, urls @ ..] = args.as_slice() else {
        eprintln!("usage: redlease-exit-worker tokio-mt|tokio-ct|smol|mio|mio-auto drop|alive|error KEY URL...");
        std::process::exit(64);
    };
    match runtime.as_str() {
        "tokio-mt" => {
            tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(tokio(way, key, urls))
        }
        "tokio-ct" => {
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(tokio(way, key, urls))
        }
        "mio" => mio(way, key, urls, false),
        "mio-auto" => mio(way, key, urls, true),
        "smol" => futures_lite::future::block_on(smol(way, key, urls)),
        other => Err(format!("unknown runtime {other}")),
    }
}

/// What `#[tokio::main]` runs: the runtime is dropped right after this returns.
async fn tokio(way: &str, key: &str, urls: &[String]) -> Result<(), String> {
    let client = redlease_tokio::Client::connect(urls).await.map_err(|e| e.to_string())?;
    let guard = client.lock(key, TTL).await.map_err(|e| e.to_string())?;
    // What `tokio::signal::ctrl_c()` waits for, its handler installed before `held` is said.
    let mut interrupt = match way {
        "ctrl-c" => {
            Some(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).map_err(|e| e.to_string())?)
        }
        _ => None,
    };
    println!("held");
    match (way, interrupt.as_mut()) {
        ("ctrl-c", Some(interrupt)) => {
            interrupt.recv().await;
            client.close().await;
            drop(guard);
            Ok(())
        }
        ("no-handler", _) => std::future::pending().await,
        _ => end(way, guard),
    }
}

async fn smol(way: &str, key: &str, urls: &[String]) -> Result<(), String> {
    let client = redlease_smol::Client::connect(urls).await.map_err(|e| e.to_string())?;
    let guard = client.lock(key, TTL).await.map_err(|e| e.to_string())?;
    println!("held");
    end(way, guard)
}

/// `auto`: with auto-extension, whose thread drives the client's loop.
fn mio(way: &str, key: &str, urls: &[String], auto: bool) -> Result<(), String> {
    let client = redlease_mio::Client::connect(urls).map_err(|e| e.to_string())?;
    let options = redlease_mio::LockOptions::new(key, TTL).auto_extend(auto);
    let guard = client.lock_with(options).map_err(|e| e.to_string())?;
    println!("held");
    end(way, guard)
}

fn end<G>(way: &str, guard: G) -> Result<(), String> {
    match way {
        "drop" => {
            drop(guard);
            Ok(())
        }
        "alive" => {
            let _guard = guard;
            Ok(())
        }
        "error" => {
            let _guard = guard;
            Err::<(), _>("the work failed".to_owned())?;
            Ok(())
        }
        other => Err(format!("unknown way {other}")),
    }
}
