//! `redlease status` and `redlease scan` on a key that readers share (`run -s`): while readers
//! hold a key, its value is [`READERS_VALUE`] and the readers are the members of the sorted set
//! [`READERS_PREFIX`] + key, each scored by its expiry on the node's clock (ms since the epoch).

use std::collections::BTreeMap;
use std::io;

use redlease_core::{READERS_PREFIX, READERS_VALUE};
use redlease_servers::{RedisConn, Reply};

use super::fault::Fault;
use super::json;
use super::link::{Hit, Open};
use super::verdict::Verdict;

/// One reader of a key on one node.
pub(super) struct Reader {
    pub(super) token: String,
    /// Its expiry minus the node's `TIME`, in ms.
    pub(super) left_ms: i64,
}

/// The name of the sorted set of `key`'s readers (`key` as the node stores it).
pub(super) fn set_of(key: &str) -> String {
    format!("{READERS_PREFIX}{key}")
}

/// Whether a lock key's holder (its value without the waited-for mark) is the readers.
pub(super) fn is_readers(holder: Option<&str>) -> bool {
    holder == Some(READERS_VALUE)
}

/// The live readers in the sorted set `set` on one node, the one expiring last first: its
/// members whose expiry is still ahead of the node's clock (the scripts drop the others at
/// their next call). On a Redis Cluster, `conn` is the master serving `set` (its clock is the
/// one the scripts read).
pub(super) fn read(conn: &mut RedisConn, set: &str) -> io::Result<Vec<Reader>> {
    let now = node_ms(conn)?;
    let members = match conn.checked(&["ZRANGE", set, "0", "-1", "WITHSCORES"])? {
        Reply::Array(Some(items)) => items,
        r => return Err(io::Error::other(format!("ZRANGE: unexpected {r:?}"))),
    };
    let mut readers: Vec<Reader> = members
        .chunks_exact(2)
        .filter_map(|pair| {
            let token = pair[0].as_text()?;
            let expiry: f64 = pair[1].as_text()?.parse().ok()?;
            Some(Reader { token, left_ms: expiry as i64 - now })
        })
        .filter(|r| r.left_ms > 0)
        .collect();
    readers.sort_by_key(|r| std::cmp::Reverse(r.left_ms));
    Ok(readers)
}

/// The node's clock (`TIME`), in ms since the epoch, as the scripts read it.
fn node_ms(conn: &mut RedisConn) -> io::Result<i64> {
    let reply = conn.checked(&["TIME"])?;
    let parts: Option<Vec<i64>> = match &reply {
        Reply::Array(Some(parts)) => parts.iter().map(|p| p.as_text()?.parse().ok()).collect(),
        _ => None,
    };
    match parts.as_deref() {
        Some([secs, micros]) => Ok(secs * 1000 + micros / 1000),
        _ => Err(io::Error::other(format!("TIME: unexpected {reply:?}"))),
    }
}

/// The tokens that read on at least `quorum` of the nodes (`per_node`: each node's readers),
/// ascending, and how many other tokens read on fewer nodes.
pub(super) fn on_quorum<'a>(per_node: impl Iterator<Item = &'a [Reader]>, quorum: usize) -> (Vec<&'a str>, usize) {
    let mut tokens: Vec<&str> = per_node.flat_map(|readers| readers.iter().map(|r| r.token.as_str())).collect();
    tokens.sort_unstable();
    let counts: Vec<(usize, &str)> = tokens.chunk_by(|a, b| a == b).map(|c| (c.len(), c[0])).collect();
    let held: Vec<&str> = counts.iter().filter(|(n, _)| *n >= quorum).map(|(_, t)| *t).collect();
    let others = counts.len() - held.len();
    (held, others)
}

/// `N reader(s)`.
pub(super) fn count(n: usize) -> String {
    if n == 1 { "1 reader".to_owned() } else { format!("{n} readers") }
}

/// What one node says of a key's readers, for [`summary`] and [`json`].
pub(super) struct OnNode<'a> {
    pub(super) node: usize,
    pub(super) readers: &'a [Reader],
    /// A writer marked the key: no new reader joins on this node until these have left.
    pub(super) writer_waits: bool,
}

/// `status`'s last line on a key a quorum of nodes holds for readers: how many readers hold it
/// (each on a quorum of nodes), and whether a writer waits.
pub(super) fn summary(key: &str, verdict: &Verdict<'_>, count_on: usize, nodes: &[OnNode<'_>]) -> String {
    let (held, others) = on_quorum(nodes.iter().map(|n| n.readers), verdict.quorum);
    let others =
        if others > 0 { format!("; {} more on too few nodes to hold it", count(others)) } else { String::new() };
    let waits = nodes.iter().filter(|n| n.writer_waits).count();
    let waits = match waits {
        0 => String::new(),
        n => format!("; a writer waits on {n} node(s), where no new reader joins"),
    };
    format!(
        "{key}: shared by {} on {count_on} of {} nodes (quorum {}){others}{waits}",
        count(held.len()),
        verdict.nodes,
        verdict.quorum
    )
}

/// `status --json`'s `readers` member: the readers that hold the key on a quorum of nodes, and
/// each node's readers with their time left.
pub(super) fn json(quorum: usize, nodes: &[OnNode<'_>]) -> String {
    let (held, _) = on_quorum(nodes.iter().map(|n| n.readers), quorum);
    let per_node: Vec<String> = nodes
        .iter()
        .map(|n| {
            let readers: Vec<String> = n
                .readers
                .iter()
                .map(|r| format!("{{\"token\":{},\"left_ms\":{}}}", json::string(&r.token), r.left_ms))
                .collect();
            format!(
                "{{\"node\":{},\"count\":{},\"writer_waits\":{},\"readers\":[{}]}}",
                n.node,
                n.readers.len(),
                n.writer_waits,
                readers.join(",")
            )
        })
        .collect();
    let tokens: Vec<String> = held.iter().map(|t| json::string(t)).collect();
    format!(
        "{{\"count\":{},\"tokens\":[{}],\"writer_waits\":{},\"nodes\":[{}]}}",
        held.len(),
        tokens.join(","),
        nodes.iter().any(|n| n.writer_waits),
        per_node.join(",")
    )
}

/// The keys held by readers on one node (`scan`): each readers' set whose lock key matches
/// `pattern`, as its lock key (named as on a standalone node) with the live readers, and the
/// sets without a TTL (leaks, as a lock key would be).
pub(super) fn on_node(open: &mut Open, pattern: &str) -> Result<(Shared, Vec<Hit>), Fault> {
    let mut shared = Shared::new();
    let mut no_ttl = Vec::new();
    for set in open.keys(READERS_PREFIX, pattern)? {
        let pttl = open.on_master(set.master, |c| c.pttl(&set.key))?;
        let readers = open.on_master(set.master, |c| read(c, &set.key))?;
        if let Some(key) = set.name.strip_prefix(READERS_PREFIX) {
            shared.insert(key.to_owned(), readers);
        }
        if pttl == -1 {
            no_ttl.push(set);
        }
    }
    Ok((shared, no_ttl))
}

/// The keys held by readers on one node, each with its live readers.
pub(super) type Shared = BTreeMap<String, Vec<Reader>>;

/// `key` as `scan` lists it: how many readers hold it (each on a quorum of `nodes` nodes), and
/// how many each node that answered has (`on`: the node, its readers of the key).
pub(super) fn scan_line(key: &str, nodes: usize, on: &[(usize, &[Reader])]) -> String {
    let (held, _) = on_quorum(on.iter().map(|(_, r)| *r), nodes / 2 + 1);
    let each: Vec<String> = on
        .iter()
        .map(|(i, readers)| match readers.len() {
            0 => format!("node {i} has none"),
            n => format!("node {i} has {n}"),
        })
        .collect();
    match held.len() {
        0 => format!("{key:?} has readers on too few nodes to hold it ({})", each.join(", ")),
        n => format!("{key:?} shared by {} ({})", count(n), each.join(", ")),
    }
}

/// `scan --json`'s entry of `key` (see [`scan_line`]).
pub(super) fn scan_json(key: &str, nodes: usize, on: &[(usize, &[Reader])]) -> String {
    let (held, _) = on_quorum(on.iter().map(|(_, r)| *r), nodes / 2 + 1);
    let each: Vec<String> = on.iter().map(|(i, r)| format!("{{\"node\":{i},\"readers\":{}}}", r.len())).collect();
    format!("{{\"key\":{},\"readers\":{},\"nodes\":[{}]}}", json::string(key), held.len(), each.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(token: &str) -> Reader {
        Reader { token: token.to_owned(), left_ms: 1000 }
    }

    #[test]
    fn readers_on_a_quorum_of_nodes_hold_the_key() {
        let nodes = [vec![reader("a"), reader("b")], vec![reader("a"), reader("c")], vec![reader("a")]];
        let (held, others) = on_quorum(nodes.iter().map(Vec::as_slice), 2);
        assert_eq!((held, others), (vec!["a"], 2));
        assert!(is_readers(Some(":readers")) && !is_readers(Some("tok")) && !is_readers(None));
        assert_eq!(set_of("app:k"), "redlease:readers:app:k");
        assert_eq!((count(1), count(2)), ("1 reader".to_owned(), "2 readers".to_owned()));
    }
}
