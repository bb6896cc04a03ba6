//! The runtimes benchmark: every redlease adapter against the quorum floors, the pipelined
//! ceiling and two peers, on real `redis-server` processes.
//!
//! `cargo bench -p redlease-benches --bench runtimes` is the full run; `cargo test` runs it
//! with tiny counts (every subject and scenario; it fails if a measurement does not complete,
//! never on a speed). `-- --help` lists the options. The peers are dev-dependencies, hence
//! here.

#[path = "runtimes/peers.rs"]
mod peers;

use std::process::ExitCode;

use redlease_benches::plan::{Options, USAGE};
use redlease_benches::{adapters, floor, run};

fn main() -> ExitCode {
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(opts) if !opts.help => opts,
        Ok(_) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    opts.ignored.iter().for_each(|arg| eprintln!("note: ignoring {arg:?} (see --help)"));
    // In table order: the adapters, the floors and the ceiling, the peers.
    let subjects: Vec<_> = [adapters::subjects(), floor::subjects(), peers::subjects()].into_iter().flatten().collect();
    match run::run(&opts, &subjects) {
        Ok(failures) if failures.is_empty() => ExitCode::SUCCESS,
        Ok(failures) => {
            eprintln!("{} measurement(s) failed:\n  {}", failures.len(), failures.join("\n  "));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
