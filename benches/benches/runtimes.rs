//! The cross-runtime latency/throughput benchmark (issue 6).
//!
//! `cargo bench -p redlease-benches --bench runtimes` runs the full benchmark (about ten
//! minutes on two cores) and writes `docs/benchmarks.md` with its charts;
//! `cargo test -p redlease-benches --bench runtimes` (and `cargo test --workspace
//! --all-targets` in CI) runs the quick mode: a few seconds, every subject and scenario,
//! tables printed, nothing written. `--help` lists the options.
//!
//! The subjects are redlease's adapters, the hand-written floors, and two peers from
//! crates.io (here, because they are dev-dependencies): `rslock` and `redlock`.

#[path = "runtimes/peers.rs"]
mod peers;

use std::path::Path;
use std::process::ExitCode;

use redlease_benches::machine::Machine;
use redlease_benches::plan::USAGE;
use redlease_benches::{Mode, Options, adapters, floor, floor_io, floor_wake, report, runner};

fn main() -> ExitCode {
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if opts.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    for arg in &opts.ignored {
        eprintln!("note: ignoring the argument {arg:?} (see --help)");
    }
    match opts.mode {
        Mode::Quick => eprintln!(
            "runtimes benchmark, quick mode (a smoke test: tiny counts, nothing written; \
             `cargo bench -p redlease-benches --bench runtimes` runs the full benchmark)"
        ),
        Mode::Full => eprintln!(
            "runtimes benchmark, full run ({})",
            if opts.writes_docs() { "writes docs/benchmarks.md and its charts" } else { "tables only" }
        ),
    }
    let mut subjects = adapters::subjects();
    subjects.extend(floor::subjects());
    subjects.extend(floor_io::subjects());
    subjects.extend(floor_wake::subjects());
    subjects.extend(peers::subjects());

    let results = match runner::run(&opts, &subjects) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("\n{}", report::targets_section(&results));
    eprintln!("done in {:.0} s", results.elapsed.as_secs_f64());

    if opts.writes_docs() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        match report::write_docs(&results, &Machine::describe(), &dir) {
            Ok(files) => {
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            }
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let failures = results.failures();
    if !failures.is_empty() {
        eprintln!("{} measurement(s) failed:", failures.len());
        for f in &failures {
            eprintln!("  {f}");
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
