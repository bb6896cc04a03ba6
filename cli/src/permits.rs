//! `redlease run --permits L`: the command runs under one (or `--take M`) of the L permits of a
//! semaphore named by the key, a distributed `sem(1)`. What `run` needs beyond the mutex: the
//! checks of the flags, how the lock is named in messages, and the message of a limit that
//! does not match the one the nodes recorded.

use std::fmt;

use redlease_tokio::{AcquireError, Error, Vote};

use crate::Usage;

/// The prefix of a semaphore's keys, after the key prefix: `redlease:sem:{NAME}:0` .. `:L-1`
/// (the permits) and `redlease:sem:{NAME}:limit` (the limit, recorded without a TTL).
pub(crate) const SEM_PREFIX: &str = "redlease:sem:";

/// A semaphore's limit and how many of its permits to take at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Semaphore {
    /// `--permits L`.
    pub(crate) limit: u32,
    /// `--take M` (1 without it).
    pub(crate) take: u32,
}

impl Semaphore {
    /// `--permits` and `--take` as given; `None` without `--permits` (a mutex).
    pub(crate) fn of(limit: Option<u32>, take: Option<u32>) -> Result<Option<Self>, Usage> {
        let Some(limit) = limit else { return Ok(None) };
        let take = take.unwrap_or(1);
        if take > limit {
            return Err(Usage(format!(
                "--take {take} is more than --permits {limit}: a run takes at most every permit there is"
            )));
        }
        Ok(Some(Semaphore { limit, take }))
    }
}

/// The key of the limit a semaphore records on each node.
pub(crate) fn limit_key(key_prefix: &str, name: &str) -> String {
    format!("{key_prefix}{SEM_PREFIX}{{{name}}}:limit")
}

/// The key of permit `permit` of a semaphore.
pub(crate) fn permit_key(key_prefix: &str, name: &str, permit: u32) -> String {
    format!("{key_prefix}{SEM_PREFIX}{{{name}}}:{permit}")
}

/// Permit numbers as the command sees them in `REDLEASE_PERMIT`: `2`, or `0,2`.
pub(crate) fn permit_list(permits: &[u16]) -> String {
    permits.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
}

/// What a run locks, for messages: `"backup"` (its write lock), `a read lock on "backup"`, or
/// `a permit of "exports" (limit 3)`.
pub(crate) struct Named<'a> {
    pub(crate) key: &'a str,
    pub(crate) semaphore: Option<Semaphore>,
    /// `--shared`: a read lock of the key.
    pub(crate) shared: bool,
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.semaphore {
            None if self.shared => write!(f, "a read lock on {:?}", self.key),
            None => write!(f, "{:?}", self.key),
            Some(Semaphore { limit, take: 1 }) => write!(f, "a permit of {:?} (limit {limit})", self.key),
            Some(Semaphore { limit, take }) => write!(f, "{take} permits of {:?} (limit {limit})", self.key),
        }
    }
}

/// When nodes refused the acquisition because they recorded another limit for the semaphore
/// (`WRONGLIMIT`): what to tell the user, naming each such node, its limit and ours, and how
/// to mend it.
pub(crate) fn wrong_limit(e: &Error, key_prefix: &str, name: &str, asked: u32) -> Option<String> {
    let votes = match e {
        Error::Acquire(AcquireError::Misconfigured { votes, .. }) => votes,
        Error::Acquire(AcquireError::WaitTimeout { last, .. }) => match &**last {
            AcquireError::Misconfigured { votes, .. } => votes,
            _ => return None,
        },
        _ => return None,
    };
    let node = |i: usize| votes.addr(i).map_or_else(|| format!("#{i}"), |a| format!("#{i} ({a})"));
    // (recorded limit, the nodes that have it); and the other nodes that failed, and how.
    let mut recorded: Vec<(String, Vec<String>)> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    for (i, vote) in votes.iter().enumerate() {
        let limit = match vote {
            Vote::Misconfigured(m) => recorded_limit(m),
            _ => None,
        };
        match (limit, vote) {
            (Some(limit), _) => match recorded.iter_mut().find(|(l, _)| *l == limit) {
                Some((_, nodes)) => nodes.push(node(i)),
                None => recorded.push((limit, vec![node(i)])),
            },
            (None, Vote::Down) => others.push(format!("{}: down", node(i))),
            (None, Vote::TimedOut) => others.push(format!("{}: timed out", node(i))),
            (None, Vote::Error(m) | Vote::Misconfigured(m)) => others.push(format!("{}: {m}", node(i))),
            (None, Vote::Unreplicated { acked, wanted }) => {
                others.push(format!("{}: {acked} of {wanted} replicas acknowledged the grant", node(i)))
            }
            (None, _) => {}
        }
    }
    // The limit most of them recorded first.
    recorded.sort_by_key(|(_, nodes)| std::cmp::Reverse(nodes.len()));
    let usual = recorded.first()?.0.clone();
    let on: Vec<String> = recorded
        .iter()
        .map(|(limit, nodes)| {
            let which = if nodes.len() == 1 { "node" } else { "nodes" };
            format!("a limit of {limit} on {which} {}", nodes.join(", "))
        })
        .collect();
    let others = if others.is_empty() { String::new() } else { format!(" (other nodes: {})", others.join("; ")) };
    Some(format!(
        "the semaphore {name:?} has {}, not --permits {asked}: give --permits {usual}, or, to change the limit, \
         stop every holder and delete {} on every node{others}",
        on.join("; "),
        limit_key(key_prefix, name)
    ))
}

/// The limit in a node's `WRONGLIMIT the semaphore has L permits on this node, ...`.
fn recorded_limit(message: &str) -> Option<String> {
    let rest = message.strip_prefix("WRONGLIMIT")?;
    let after = rest.split_once(" has ")?.1;
    let limit: String = after.chars().take_while(char::is_ascii_digit).collect();
    (!limit.is_empty()).then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_a_node_recorded_is_read_from_its_refusal() {
        let m = "WRONGLIMIT the semaphore has 3 permits on this node, the client asks for a limit of 4";
        assert_eq!(recorded_limit(m).as_deref(), Some("3"));
        assert_eq!(recorded_limit("NOPERM this user has no permissions"), None);
        assert_eq!(recorded_limit("WRONGLIMIT garbled"), None);
    }

    #[test]
    fn flags_and_names() {
        assert_eq!(Semaphore::of(None, None).unwrap(), None);
        assert_eq!(Semaphore::of(Some(3), None).unwrap(), Some(Semaphore { limit: 3, take: 1 }));
        assert!(Semaphore::of(Some(3), Some(4)).unwrap_err().0.contains("--take 4"));
        assert_eq!(limit_key("app:", "jobs"), "app:redlease:sem:{jobs}:limit");
        assert_eq!(permit_key("", "jobs", 2), "redlease:sem:{jobs}:2");
        assert_eq!(permit_list(&[0, 2]), "0,2");
        let sem = Some(Semaphore { limit: 3, take: 2 });
        assert_eq!(Named { key: "jobs", semaphore: sem, shared: false }.to_string(), "2 permits of \"jobs\" (limit 3)");
        assert_eq!(Named { key: "jobs", semaphore: None, shared: false }.to_string(), "\"jobs\"");
        assert_eq!(Named { key: "jobs", semaphore: None, shared: true }.to_string(), "a read lock on \"jobs\"");
    }
}
