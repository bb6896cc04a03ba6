//! Standard output that ends the program quietly when its reader goes away (`redlease scan |
//! head`): no panic, no message, exit 141 as a program killed by SIGPIPE would give the shell.
//!
//! `status`, `scan` and `completions` exit at once. `servers` and `demo` must stop their nodes
//! first: for them ([`defer_exit`]) the output is dropped from then on and [`closed`] resolves,
//! which ends their work the way Ctrl-C does. Any other write error says so once, with exit 74
//! (`EX_IOERR`).

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tokio::sync::Notify;

/// Exit status after a broken pipe on stdout: 128 + SIGPIPE, as the shell reports a program
/// the signal killed.
pub(crate) const EXIT_PIPE: u8 = 141;
/// Exit status after another error writing stdout (`EX_IOERR`).
pub(crate) const EXIT_IOERR: u8 = 74;

/// Whether a closed stdout waits for [`closed`] instead of exiting at once.
static DEFER: AtomicBool = AtomicBool::new(false);
/// The exit status once stdout failed; 0 while it works.
static FAILED: AtomicU8 = AtomicU8::new(0);
static CLOSED: Notify = Notify::const_new();

/// From now on a failed stdout does not exit: [`closed`] resolves instead.
pub(crate) fn defer_exit() {
    DEFER.store(true, Ordering::Relaxed);
}

/// Resolves with the exit status once stdout has failed (after [`defer_exit`]).
pub(crate) async fn closed() -> u8 {
    loop {
        let notified = CLOSED.notified();
        match FAILED.load(Ordering::Relaxed) {
            0 => notified.await,
            code => return code,
        }
    }
}

/// Stdout, as a writer that never fails: see the module docs.
#[derive(Debug)]
pub(crate) struct Stdout;

impl Stdout {
    fn failed(e: &io::Error) {
        let code = if e.kind() == io::ErrorKind::BrokenPipe { EXIT_PIPE } else { EXIT_IOERR };
        if code == EXIT_IOERR && FAILED.load(Ordering::Relaxed) == 0 {
            crate::warn(&format!("cannot write to stdout: {e}"));
        }
        if !DEFER.load(Ordering::Relaxed) {
            std::process::exit(code.into());
        }
        let _ = FAILED.compare_exchange(0, code, Ordering::Relaxed, Ordering::Relaxed);
        CLOSED.notify_one();
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if FAILED.load(Ordering::Relaxed) != 0 {
            return Ok(buf.len());
        }
        io::stdout().write(buf).or_else(|e| {
            Self::failed(&e);
            Ok(buf.len())
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        if FAILED.load(Ordering::Relaxed) == 0 {
            if let Err(e) = io::stdout().flush() {
                Self::failed(&e);
            }
        }
        Ok(())
    }
}

/// Write a line on stdout; see the module docs.
pub(crate) fn line(args: fmt::Arguments<'_>) {
    let _ = writeln!(Stdout, "{args}");
}

/// `println!` through [`Stdout`].
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
