//! What a worker logs: one line per event, `key=value` words, times on `CLOCK_MONOTONIC` in
//! nanoseconds ([`mono_ns`](super::mono_ns)).
//!
//! ```text
//! w=2 c=tokio ev=acquired t=8123456789 start=8123001234 fence=17 until=9111001234 token=5f0e… kind=mutex
//! w=4 c=tokio ev=acquired t=8123456789 start=8123001234 fence=9 until=9111001234 token=0c1d… kind=sem permits=0,2
//! w=4 c=tokio ev=read t=8123999999 end=8124000321 fence=9 accepted=1 fenced=12 plain=12 permit=2
//! ```

use std::collections::HashMap;
use std::fmt;

/// What the fenced store did with a fenced write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fenced {
    /// The fence was at least the last accepted one: written.
    Accepted,
    /// A higher fence had been seen: refused.
    Rejected,
    /// Not attempted: the fenced read had already been refused.
    Skipped,
}

impl Fenced {
    fn as_str(self) -> &'static str {
        match self {
            Fenced::Accepted => "accepted",
            Fenced::Rejected => "rejected",
            Fenced::Skipped => "skipped",
        }
    }

    fn parse(s: &str) -> Option<Fenced> {
        Some(match s {
            "accepted" => Fenced::Accepted,
            "rejected" => Fenced::Rejected,
            "skipped" => Fenced::Skipped,
            _ => return None,
        })
    }
}

/// Which lock a worker takes: the lock shape and, for a reader-writer lock, the side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// A mutex (a plain lock).
    Mutex,
    /// Permits of a semaphore: the hold's permits are in [`Event::Acquired`].
    Semaphore,
    /// A read lock (`shared`): its fencing token is the writer epoch it reads under.
    Read,
    /// The write lock of a reader-writer lock (a plain lock of the same name as the readers').
    Write,
}

impl LockKind {
    /// `mutex`, `sem`, `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Semaphore => "sem",
            LockKind::Read => "read",
            LockKind::Write => "write",
        }
    }

    /// Read what [`as_str`](Self::as_str) writes.
    pub fn parse(s: &str) -> Option<LockKind> {
        Some(match s {
            "mutex" => LockKind::Mutex,
            "sem" => LockKind::Semaphore,
            "read" => LockKind::Read,
            "write" => LockKind::Write,
            _ => return None,
        })
    }

    /// Whether two holds of this kind and `other` exclude each other (for a semaphore: when
    /// they hold a permit in common, which the caller checks). Only readers share; a mutex is the
    /// write lock of its name.
    pub fn excludes(self, other: LockKind) -> bool {
        !(self == LockKind::Read && other == LockKind::Read)
    }
}

/// One event of a worker. Every `t` is when the step began (before the first byte was sent),
/// every `end` when its answer was in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Connected; about to loop.
    Started {
        /// Time.
        t: u64,
    },
    /// `lock_with` failed.
    AcquireFailed {
        /// When `lock_with` was called.
        start: u64,
        /// When it returned.
        t: u64,
        /// The error's kind: `held`, `unreachable`, `too_slow`, `wait:<kind of the last
        /// attempt>` (typed outcomes of the algorithm), or `closed`, `cancelled`, `other`.
        kind: String,
    },
    /// `lock_with` returned a guard.
    Acquired {
        /// When `lock_with` was called.
        start: u64,
        /// When it returned: the holder's window starts here.
        t: u64,
        /// The fencing token.
        fence: u64,
        /// The guard's `valid_until`.
        until: u64,
        /// The lock's token (the value of its keys on the nodes).
        token: String,
        /// Which lock it is.
        kind: LockKind,
        /// A semaphore's permits held (empty for the other kinds).
        permits: Vec<u16>,
    },
    /// The read half of the read-modify-write (fenced read and plain read, one script); a
    /// reader reads twice per hold, at its start and at its end, and writes nothing.
    Read {
        /// Sent.
        t: u64,
        /// Answered.
        end: u64,
        /// The fence presented.
        fence: u64,
        /// Whether the fenced read was accepted (no higher fence seen yet).
        accepted: bool,
        /// The fenced counter (0 if refused).
        fenced: i64,
        /// The plain counter.
        plain: i64,
        /// A semaphore's permit whose counters these are.
        permit: Option<u16>,
    },
    /// The write half: the fenced counter (checked) and the plain counter (unchecked).
    Write {
        /// Sent.
        t: u64,
        /// Answered.
        end: u64,
        /// The fence presented.
        fence: u64,
        /// What the fenced store did.
        fenced: Fenced,
        /// The value written to the plain counter.
        plain: i64,
        /// Whether the lease's lost signal had fired when the write was sent.
        lost: bool,
        /// Whether `valid_until` had passed when the write was sent (by the worker's check).
        expired: bool,
        /// A semaphore's permit whose counters these are.
        permit: Option<u16>,
    },
    /// `release` returned.
    Released {
        /// Called: the holder's window ends here at the latest.
        t: u64,
        /// Returned.
        end: u64,
        /// `released`, `not_held`, `unreachable`, or `error`.
        outcome: String,
        /// Whether the lease's lost signal had fired when `release` was called (after the
        /// write: it tells whether the signal came, only too late).
        lost: bool,
    },
    /// Stopped looping (stdin closed), about to exit.
    Stopped {
        /// Time.
        t: u64,
    },
}

impl Event {
    /// The event's main time (`t`).
    pub fn t(&self) -> u64 {
        match self {
            Event::Started { t }
            | Event::AcquireFailed { t, .. }
            | Event::Acquired { t, .. }
            | Event::Read { t, .. }
            | Event::Write { t, .. }
            | Event::Released { t, .. }
            | Event::Stopped { t } => *t,
        }
    }
}

/// An event and the worker that logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The worker's number in its phase.
    pub worker: usize,
    /// The client the worker drives (`tokio` or `mio`).
    pub client: String,
    /// What happened.
    pub event: Event,
}

fn b(v: bool) -> u8 {
    u8::from(v)
}

fn write_permit(f: &mut fmt::Formatter<'_>, permit: Option<u16>) -> fmt::Result {
    match permit {
        Some(s) => write!(f, " permit={s}"),
        None => Ok(()),
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w={} c={} ", self.worker, self.client)?;
        match &self.event {
            Event::Started { t } => write!(f, "ev=started t={t}"),
            Event::AcquireFailed { start, t, kind } => write!(f, "ev=acquire_failed t={t} start={start} kind={kind}"),
            Event::Acquired { start, t, fence, until, token, kind, permits } => {
                write!(
                    f,
                    "ev=acquired t={t} start={start} fence={fence} until={until} token={token} kind={}",
                    kind.as_str()
                )?;
                if !permits.is_empty() {
                    let permits: Vec<String> = permits.iter().map(u16::to_string).collect();
                    write!(f, " permits={}", permits.join(","))?;
                }
                Ok(())
            }
            Event::Read { t, end, fence, accepted, fenced, plain, permit } => {
                write!(
                    f,
                    "ev=read t={t} end={end} fence={fence} accepted={} fenced={fenced} plain={plain}",
                    b(*accepted)
                )?;
                write_permit(f, *permit)
            }
            Event::Write { t, end, fence, fenced, plain, lost, expired, permit } => {
                write!(
                    f,
                    "ev=write t={t} end={end} fence={fence} fenced={} plain={plain} lost={} expired={}",
                    fenced.as_str(),
                    b(*lost),
                    b(*expired)
                )?;
                write_permit(f, *permit)
            }
            Event::Released { t, end, outcome, lost } => {
                write!(f, "ev=released t={t} end={end} outcome={outcome} lost={}", b(*lost))
            }
            Event::Stopped { t } => write!(f, "ev=stopped t={t}"),
        }
    }
}

impl Record {
    /// Parse a line written by `Display`.
    pub fn parse(line: &str) -> Result<Record, String> {
        let fields: HashMap<&str, &str> = line.split_whitespace().filter_map(|w| w.split_once('=')).collect();
        let text = |k: &str| fields.get(k).copied().ok_or_else(|| format!("no {k}= in {line:?}"));
        let num = |k: &str| text(k)?.parse::<u64>().map_err(|e| format!("{k}= in {line:?}: {e}"));
        let int = |k: &str| text(k)?.parse::<i64>().map_err(|e| format!("{k}= in {line:?}: {e}"));
        let flag = |k: &str| Ok::<bool, String>(text(k)? == "1");
        let permit = || {
            fields.get("permit").map(|v| v.parse::<u16>().map_err(|e| format!("permit= in {line:?}: {e}"))).transpose()
        };
        let event = match text("ev")? {
            "started" => Event::Started { t: num("t")? },
            "acquire_failed" => {
                Event::AcquireFailed { start: num("start")?, t: num("t")?, kind: text("kind")?.to_owned() }
            }
            "acquired" => Event::Acquired {
                start: num("start")?,
                t: num("t")?,
                fence: num("fence")?,
                until: num("until")?,
                token: text("token")?.to_owned(),
                kind: LockKind::parse(text("kind")?).ok_or_else(|| format!("bad kind= in {line:?}"))?,
                permits: match fields.get("permits") {
                    Some(v) => v
                        .split(',')
                        .map(|s| s.parse::<u16>().map_err(|e| format!("permits= in {line:?}: {e}")))
                        .collect::<Result<_, _>>()?,
                    None => Vec::new(),
                },
            },
            "read" => Event::Read {
                t: num("t")?,
                end: num("end")?,
                fence: num("fence")?,
                accepted: flag("accepted")?,
                fenced: int("fenced")?,
                plain: int("plain")?,
                permit: permit()?,
            },
            "write" => Event::Write {
                t: num("t")?,
                end: num("end")?,
                fence: num("fence")?,
                fenced: Fenced::parse(text("fenced")?).ok_or_else(|| format!("bad fenced= in {line:?}"))?,
                plain: int("plain")?,
                lost: flag("lost")?,
                expired: flag("expired")?,
                permit: permit()?,
            },
            "released" => Event::Released {
                t: num("t")?,
                end: num("end")?,
                outcome: text("outcome")?.to_owned(),
                lost: flag("lost")?,
            },
            "stopped" => Event::Stopped { t: num("t")? },
            other => return Err(format!("unknown event {other:?} in {line:?}")),
        };
        Ok(Record { worker: num("w")? as usize, client: text("c")?.to_owned(), event })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_survives_a_round_trip_through_its_line() {
        let events = [
            Event::Started { t: 1 },
            Event::AcquireFailed { start: 1, t: 2, kind: "wait:unreachable".into() },
            Event::Acquired {
                start: 1,
                t: 2,
                fence: 3,
                until: 4,
                token: "ab12".into(),
                kind: LockKind::Mutex,
                permits: vec![],
            },
            Event::Acquired {
                start: 1,
                t: 2,
                fence: 3,
                until: 4,
                token: "ab12".into(),
                kind: LockKind::Semaphore,
                permits: vec![0, 2],
            },
            Event::Acquired {
                start: 1,
                t: 2,
                fence: 0,
                until: 4,
                token: "ab12".into(),
                kind: LockKind::Read,
                permits: vec![],
            },
            Event::Read { t: 1, end: 2, fence: 3, accepted: true, fenced: 5, plain: -1, permit: None },
            Event::Read { t: 1, end: 2, fence: 3, accepted: false, fenced: 0, plain: 4, permit: Some(2) },
            Event::Write {
                t: 1,
                end: 2,
                fence: 3,
                fenced: Fenced::Skipped,
                plain: 7,
                lost: true,
                expired: false,
                permit: None,
            },
            Event::Write {
                t: 1,
                end: 2,
                fence: 3,
                fenced: Fenced::Accepted,
                plain: 7,
                lost: false,
                expired: false,
                permit: Some(1),
            },
            Event::Released { t: 1, end: 2, outcome: "not_held".into(), lost: true },
            Event::Stopped { t: 9 },
        ];
        for event in events {
            let record = Record { worker: 3, client: "mio".into(), event };
            assert_eq!(Record::parse(&record.to_string()), Ok(record.clone()));
        }
        assert!(Record::parse("w=1 c=x ev=nothing t=1").is_err());
        assert!(Record::parse("w=1 c=x ev=acquired t=1").is_err());
    }
}
