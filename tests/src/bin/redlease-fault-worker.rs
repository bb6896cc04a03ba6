//! A worker of the fault suite: see `redlease_tests::faults::worker`. Started by
//! `redlease-faults`, one process per worker, so that one can be stopped with SIGSTOP.

use redlease_tests::faults::worker::{self, WorkerArgs};

fn main() {
    let args = match WorkerArgs::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("redlease-fault-worker: {e}");
            std::process::exit(64);
        }
    };
    if let Err(e) = worker::run(&args) {
        eprintln!("redlease-fault-worker {}: {e}", args.id);
        std::process::exit(1);
    }
}
