//! The runtimes benchmark: every redlease adapter against the quorum floors, the pipelined
//! ceiling and two peers, on real `redis-server` processes.
//!
//! `cargo bench -p redlease-benches --bench runtimes` is the full run; `cargo test` runs it
//! in quick mode (tiny counts, every subject and scenario; fails if a measurement does not
//! complete, never on a speed). `-- --help` lists the options. The peers live here because
//! they are dev-dependencies.

#[path = "runtimes/peers.rs"]
mod peers;

use std::process::ExitCode;

use redlease_benches::plan::{Options, USAGE};
use redlease_benches::{adapters, floor, run};

fn main() -> ExitCode {
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(opts) if opts.help => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    for arg in &opts.ignored {
        eprintln!("note: ignoring {arg:?} (see --help)");
    }
    if !opts.full {
        eprintln!(
            "quick mode: a smoke test with tiny counts; `cargo bench -p redlease-benches --bench runtimes` measures"
        );
    }
    let mut subjects = adapters::subjects();
    subjects.extend(floor::subjects());
    subjects.extend(peers::subjects());
    match run::run(&opts, &subjects) {
        Ok(failures) if failures.is_empty() => ExitCode::SUCCESS,
        Ok(failures) => {
            eprintln!("{} measurement(s) failed:", failures.len());
            failures.iter().for_each(|f| eprintln!("  {f}"));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
