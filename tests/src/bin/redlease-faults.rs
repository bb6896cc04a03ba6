//! The real-fault suite: `redlease-faults [--short] [--phase ID]... [--workers N] [--keep-logs]`.
//!
//! Needs root (network namespaces, iptables), `ip`, `iptables`, `gcc` and `redis-server`;
//! `scripts/faults.sh` installs what is missing. Prints the table of every phase; exits 0 when
//! every phase showed what it must, 1 when one did not, 77 when the machine does not allow
//! the suite (the message says why).

use std::path::PathBuf;

use redlease_tests::faults::suite::{self, Options, SuiteError};
use redlease_tests::faults::sys;

const USAGE: &str = "usage: redlease-faults [--short] [--phase ID]... [--workers N] [--keep-logs]";

fn main() {
    let mut options = Options {
        short: false,
        only: Vec::new(),
        workers: 4,
        worker_bin: PathBuf::new(),
        log_dir: std::env::temp_dir().join(format!("redlease-faults-{}", std::process::id())),
    };
    let mut keep_logs = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--short" => options.short = true,
            "--keep-logs" => keep_logs = true,
            "--phase" => options.only.push(args.next().unwrap_or_else(|| usage("--phase needs an id"))),
            "--workers" => {
                options.workers = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n >= 2)
                    .unwrap_or_else(|| usage("--workers needs a number of at least 2"));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let known: Vec<&str> = suite::phases().iter().map(|p| p.id).collect();
    if let Some(bad) = options.only.iter().find(|id| !known.contains(&id.as_str())) {
        usage(&format!("no phase {bad:?}; the phases are {}", known.join(", ")));
    }
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("cannot find this program's path: {e}")));
    options.worker_bin = exe.with_file_name("redlease-fault-worker");
    sys::catch_interrupts();

    let results = match suite::run(&options) {
        Ok(results) => results,
        Err(SuiteError::Unsupported(why)) => {
            eprintln!("the fault suite cannot run on this machine: {why}");
            std::process::exit(77);
        }
        Err(SuiteError::Setup(why)) => {
            eprintln!("the fault suite failed to set up or was stopped: {why}");
            eprintln!("logs: {}", options.log_dir.display());
            std::process::exit(1);
        }
    };
    println!("{}", suite::table(&results));
    let failed = results.iter().filter(|r| !r.passed()).count();
    if failed > 0 || keep_logs {
        println!("worker logs: {}", options.log_dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&options.log_dir);
    }
    if failed > 0 {
        println!("{failed} phase(s) broke their expectations");
        std::process::exit(1);
    }
    println!("every phase showed what it must");
}

fn usage(msg: &str) -> ! {
    eprintln!("redlease-faults: {msg}\n{USAGE}");
    std::process::exit(64);
}

fn fail(msg: &str) -> ! {
    eprintln!("redlease-faults: {msg}");
    std::process::exit(1);
}
