//! What redlease writes on stderr, by level: errors always, expected outcomes unless `--quiet`,
//! the steps it takes with `--verbose`. Every message goes through [`scrub`], and a stderr
//! that cannot be written (closed, a broken pipe) is not an error.
//!
//! [`scrub`]: crate::secret::scrub

use std::io::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much redlease says on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verbosity {
    /// Errors only (`--quiet`).
    Quiet = 0,
    /// Errors and expected outcomes: held by someone else, a signal passed on.
    Normal = 1,
    /// Also each step: connected, acquired, the command's status, released (`--verbose`).
    Verbose = 2,
}

static LEVEL: AtomicU8 = AtomicU8::new(Verbosity::Normal as u8);

/// Set how much is said from now on.
pub(crate) fn set(level: Verbosity) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

fn at_least(level: Verbosity) -> bool {
    LEVEL.load(Ordering::Relaxed) >= level as u8
}

fn print(msg: &str) {
    let _ = writeln!(std::io::stderr(), "redlease: {}", crate::secret::scrub(msg));
}

/// An error: printed whatever the level, with the `redlease:` prefix, any password hidden.
pub(crate) fn warn(msg: &str) {
    print(msg);
}

/// An expected outcome (the lock is held by someone else, a signal was passed on): printed
/// unless `--quiet`.
pub(crate) fn note(msg: &str) {
    if at_least(Verbosity::Normal) {
        print(msg);
    }
}

/// A step (connected, acquired, released): printed with `--verbose` only.
pub(crate) fn step(msg: &str) {
    if at_least(Verbosity::Verbose) {
        print(msg);
    }
}
