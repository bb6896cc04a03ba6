//! `redlease scan`: the lock keys left without a TTL on each node (a leak check), the
//! semaphores, their permit keys grouped by name, apart from the mutex keys, and the keys that
//! readers hold. A node that is a Redis Cluster is scanned on every master, its keys named as
//! on a standalone node (`{orders:42}` is `orders:42`), so nodes of both kinds compare.

use std::collections::BTreeMap;

use redlease_core::{FORMAT_KEY, NodeConfig, TlsSettings};
use redlease_servers::{FENCE_PREFIX, Reply};

use super::fault::{Fault, FaultKind};
use super::link::{Hit, Open, glob_literal};
use super::readers::{self, Reader};
use super::{json, open_all};
use crate::out::outln;
use crate::permits::SEM_PREFIX;
use crate::{EXIT_UNAVAILABLE, Usage};

/// What one node holds that matches the pattern.
struct Found {
    /// Mutex keys without a TTL (readers' sets included), by name.
    keys: Vec<Leak>,
    /// The semaphores whose names match, by name.
    semaphores: BTreeMap<String, Semaphore>,
    /// The keys readers hold, with their live readers.
    shared: readers::Shared,
    /// On a Redis Cluster node, its masters' addresses (every one was scanned).
    masters: Option<Vec<String>>,
}

/// A key without a TTL.
struct Leak {
    /// Its name, as a standalone node has it.
    name: String,
    /// On a Redis Cluster node: the key as stored there and the master that has it.
    stored: Option<(String, String)>,
}

/// One semaphore on one node.
#[derive(Default)]
struct Semaphore {
    /// The limit the node records (`None`: none).
    limit: Option<String>,
    /// The permits it has a holder for, ascending.
    held: Vec<u32>,
    /// Those of them without a TTL.
    no_ttl: Vec<u32>,
}

/// Keys without a TTL under `key_prefix` matching `pattern` on any node, and the semaphores
/// whose names match it: exit 1 if a key (a semaphore's permit included) has no TTL, else
/// [`EXIT_UNAVAILABLE`] if a node did not answer, else 0.
pub(crate) fn scan(
    nodes: Option<&str>,
    tls: TlsSettings,
    key_prefix: &str,
    pattern: &str,
    json: bool,
) -> Result<u8, Usage> {
    let (nodes, mut conns) = open_all(nodes, tls)?;
    let prefix = glob_literal(key_prefix);
    let patterns = Patterns {
        keys: format!("{prefix}{pattern}"),
        semaphores: format!("{prefix}{SEM_PREFIX}{{{pattern}}}:*"),
        sem_root: format!("{key_prefix}{SEM_PREFIX}"),
        readers: format!("{prefix}{pattern}"),
    };
    let found: Vec<Result<Found, Fault>> = conns
        .iter_mut()
        .map(|c| match c {
            Ok(open) => found_on(open, &patterns),
            Err(e) => Err(e.clone()),
        })
        .collect();
    let leaks: usize = found.iter().filter_map(|f| f.as_ref().ok()).map(|f| f.keys.len()).sum();
    let permit_leaks: usize =
        found.iter().filter_map(|f| f.as_ref().ok()).flat_map(|f| f.semaphores.values()).map(|s| s.no_ttl.len()).sum();
    let unreachable = found.iter().filter(|f| f.is_err()).count();
    let counts = Counts { leaks, permit_leaks, unreachable };
    if json {
        print_scan_json(&patterns.keys, &nodes, &found, &counts);
    } else {
        print_scan_text(&patterns.keys, &nodes, &found, &counts);
    }
    Ok(if leaks + permit_leaks > 0 {
        1
    } else if unreachable > 0 {
        EXIT_UNAVAILABLE
    } else {
        0
    })
}

/// What a scan looks for.
struct Patterns {
    /// The lock keys: `PREFIX` + the pattern.
    keys: String,
    /// Every key of the semaphores whose names match the pattern.
    semaphores: String,
    /// Where the semaphores' keys start (`PREFIX` + `redlease:sem:`), not a pattern.
    sem_root: String,
    /// The lock keys whose readers' sets (`redlease:readers:` + the key) to look for: `PREFIX`
    /// + the pattern.
    readers: String,
}

/// How many keys have no TTL (mutex keys, semaphore permits) and how many nodes did not answer.
struct Counts {
    leaks: usize,
    permit_leaks: usize,
    unreachable: usize,
}

/// What one node holds that matches: its mutex keys without a TTL (fencing counters, the lock
/// format key and the semaphores' keys left out; the readers' sets of the keys in), its
/// semaphores, and the keys readers hold. Keys are matched and listed by name: on a Redis
/// Cluster node, the form the clients store them in is mapped back.
fn found_on(open: &mut Open, patterns: &Patterns) -> Result<Found, Fault> {
    let mut no_ttl = Vec::new();
    let mut alone = Vec::new();
    for k in open.keys("", &patterns.keys)? {
        if k.name.starts_with(FENCE_PREFIX) || k.name == FORMAT_KEY || k.name.starts_with(&patterns.sem_root) {
            continue;
        }
        let pttl = open.on_master(k.master, |c| c.pttl(&k.key))?;
        if !k.name.starts_with("redlease:") {
            // A lock key a reader holds alone (`:readers:TOKEN`, no readers' set). (`GET` of
            // a key of another type answers an error, not a value.)
            let value = open.on_master(k.master, |c| c.cmd(&["GET", k.key.as_str()]))?;
            let value = if let Reply::Bulk(Some(v)) = value { String::from_utf8(v).ok() } else { None };
            let holder = value.as_deref().map(|v| redlease_core::holder_of(v).0);
            if let Some(token) = holder.and_then(redlease_core::sole_reader) {
                alone.push((k.name.clone(), Reader { token: token.to_owned(), left_ms: pttl }));
            }
        }
        if pttl == -1 {
            no_ttl.push(k);
        }
    }
    let mut semaphores: BTreeMap<String, Semaphore> = BTreeMap::new();
    for k in open.keys("", &patterns.semaphores)? {
        // `{NAME}:limit` or `{NAME}:PERMIT`; a name may hold `}:` itself, the suffix may not.
        let rest = k.name.strip_prefix(&patterns.sem_root).and_then(|r| r.strip_prefix('{'));
        let Some((name, suffix)) = rest.and_then(|r| r.rsplit_once("}:")) else {
            continue;
        };
        let sem = semaphores.entry(name.to_owned()).or_default();
        if suffix == "limit" {
            sem.limit = open.on_master(k.master, |c| c.get(&k.key))?;
        } else if let Ok(permit) = suffix.parse::<u32>() {
            sem.held.push(permit);
            if open.on_master(k.master, |c| c.pttl(&k.key))? == -1 {
                sem.no_ttl.push(permit);
            }
        }
    }
    for sem in semaphores.values_mut() {
        sem.held.sort_unstable();
        sem.no_ttl.sort_unstable();
    }
    let (mut shared, sets) = readers::on_node(open, &patterns.readers)?;
    for (name, reader) in alone {
        shared.entry(name).or_default().push(reader);
    }
    // A pattern that matches the readers' sets themselves finds them twice.
    no_ttl.extend(sets);
    no_ttl.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    no_ttl.dedup_by(|a, b| a.name == b.name);
    let leak = |k: Hit| {
        let stored = open.master_addr(k.master).map(|m| (k.key, m.to_owned()));
        Leak { name: k.name, stored }
    };
    let keys = no_ttl.into_iter().map(leak).collect();
    let masters = open.masters().map(|m| m.into_iter().map(str::to_owned).collect());
    Ok(Found { keys, semaphores, shared, masters })
}

/// Every key that readers hold on some node, ascending.
fn shared_keys(found: &[Result<Found, Fault>]) -> Vec<&str> {
    let mut keys: Vec<&str> =
        found.iter().filter_map(|f| f.as_ref().ok()).flat_map(|f| f.shared.keys().map(String::as_str)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The readers of `key` on each node that answered (none where it has no readers' set).
fn readers_of<'a>(found: &'a [Result<Found, Fault>], key: &str) -> Vec<(usize, &'a [Reader])> {
    let on = |(i, f): (usize, &'a Result<Found, Fault>)| {
        Some((i, f.as_ref().ok()?.shared.get(key).map_or(&[][..], Vec::as_slice)))
    };
    found.iter().enumerate().filter_map(on).collect()
}

/// Every semaphore name any node holds, ascending.
fn names(found: &[Result<Found, Fault>]) -> Vec<&str> {
    let mut names: Vec<&str> =
        found.iter().filter_map(|f| f.as_ref().ok()).flat_map(|f| f.semaphores.keys().map(String::as_str)).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// `scan --json`: one object, with one object per node (its mutex keys without a TTL), then the
/// semaphores, each with what every node that answered holds of it.
fn print_scan_json(pattern: &str, nodes: &[NodeConfig], found: &[Result<Found, Fault>], counts: &Counts) {
    let per_node: Vec<String> = nodes
        .iter()
        .zip(found)
        .enumerate()
        .map(|(i, (node, found))| {
            let head = format!("\"node\":{i},\"url\":{}", json::string(&node.to_string()));
            match found {
                Err(e) => format!(
                    "{{{head},\"reachable\":false,\"error\":{},\"fault\":\"{}\"}}",
                    json::string(e.text()),
                    e.kind().as_str()
                ),
                Ok(found) => {
                    let keys: Vec<String> = found.keys.iter().map(|k| json::string(&k.name)).collect();
                    format!(
                        "{{{head},\"reachable\":true,\"keys_without_ttl\":[{}]{}}}",
                        keys.join(","),
                        cluster_json(found)
                    )
                }
            }
        })
        .collect();
    let numbers = |n: &[u32]| n.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let semaphores: Vec<String> = names(found)
        .into_iter()
        .map(|name| {
            let on_nodes: Vec<String> = found
                .iter()
                .enumerate()
                .filter_map(|(i, f)| Some((i, f.as_ref().ok()?)))
                .map(|(i, f)| {
                    let none = Semaphore::default();
                    let sem = f.semaphores.get(name).unwrap_or(&none);
                    format!(
                        "{{\"node\":{i},\"limit\":{},\"permits\":[{}],\"permits_without_ttl\":[{}]}}",
                        json::opt_number(sem.limit.as_deref().and_then(|l| l.parse::<u32>().ok())),
                        numbers(&sem.held),
                        numbers(&sem.no_ttl)
                    )
                })
                .collect();
            format!("{{\"name\":{},\"nodes\":[{}]}}", json::string(name), on_nodes.join(","))
        })
        .collect();
    let shared: Vec<String> =
        shared_keys(found).into_iter().map(|k| readers::scan_json(k, nodes.len(), &readers_of(found, k))).collect();
    let Counts { leaks, permit_leaks, unreachable } = counts;
    outln!(
        "{{\"pattern\":{},\"keys_without_ttl\":{leaks},\"unreachable\":{unreachable},\"nodes\":[{}],\"permits_without_ttl\":{permit_leaks},\"semaphores\":[{}],\"shared\":[{}]}}",
        json::string(pattern),
        per_node.join(","),
        semaphores.join(","),
        shared.join(",")
    );
}

/// `scan`: a line per key without a TTL or unreachable node, a line per semaphore, then the
/// count.
fn print_scan_text(pattern: &str, nodes: &[NodeConfig], found: &[Result<Found, Fault>], counts: &Counts) {
    for (i, (node, found)) in nodes.iter().zip(found).enumerate() {
        match found {
            Err(e) if e.kind() == FaultKind::Misconfigured => outln!("node {i} {node}: MISCONFIGURED ({e})"),
            Err(e) => outln!("node {i} {node}: unreachable ({e})"),
            Ok(found) => {
                for k in &found.keys {
                    let at = match &k.stored {
                        Some((key, master)) if *key != k.name => format!(" (stored as {key} on master {master})"),
                        Some((_, master)) => format!(" (on master {master})"),
                        None => String::new(),
                    };
                    outln!("node {i} {node}: {} has no TTL{at}", k.name);
                }
                for (name, sem) in &found.semaphores {
                    for permit in &sem.no_ttl {
                        outln!("node {i} {node}: semaphore {name:?} permit {permit} has no TTL");
                    }
                }
            }
        }
    }
    for name in names(found) {
        outln!("{}", semaphore_line(name, found));
    }
    for key in shared_keys(found) {
        outln!("{}", readers::scan_line(key, nodes.len(), &readers_of(found, key)));
    }
    let Counts { leaks, permit_leaks, unreachable } = counts;
    let clusters = clusters_text(found);
    if leaks + permit_leaks > 0 {
        outln!("{} key(s) without a TTL matching {pattern:?}{clusters}", leaks + permit_leaks);
    } else {
        outln!(
            "no keys without a TTL matching {pattern:?} on {} reachable node(s){}{clusters}",
            nodes.len() - unreachable,
            if *unreachable > 0 { format!(" ({unreachable} unreachable)") } else { String::new() }
        );
    }
}

/// The Redis Cluster nodes that answered, for the last line: `; node 0 is a Redis Cluster,
/// its 3 masters scanned`.
fn clusters_text(found: &[Result<Found, Fault>]) -> String {
    let each: Vec<String> = found
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((i, f.as_ref().ok()?.masters.as_ref()?.len())))
        .map(|(i, n)| format!("; node {i} is a Redis Cluster, its {n} master(s) scanned"))
        .collect();
    each.concat()
}

/// `scan --json`'s `cluster` member of a Redis Cluster node: its masters, and each key without a
/// TTL as stored and where (standalone nodes have no such member).
fn cluster_json(found: &Found) -> String {
    let Some(masters) = &found.masters else { return String::new() };
    let masters: Vec<String> = masters.iter().map(|m| json::string(m)).collect();
    let keys: Vec<String> = found
        .keys
        .iter()
        .filter_map(|k| {
            let (key, master) = k.stored.as_ref()?;
            Some(format!(
                "{{\"key\":{},\"stored\":{},\"master\":{}}}",
                json::string(&k.name),
                json::string(key),
                json::string(master)
            ))
        })
        .collect();
    format!(",\"cluster\":{{\"masters\":[{}],\"keys_without_ttl\":[{}]}}", masters.join(","), keys.join(","))
}

/// A semaphore as `scan` lists it: the limit most nodes record (and any other), and the permits
/// each node that answered has a holder for.
fn semaphore_line(name: &str, found: &[Result<Found, Fault>]) -> String {
    let on_nodes: Vec<(usize, Option<&Semaphore>)> =
        found.iter().enumerate().filter_map(|(i, f)| Some((i, f.as_ref().ok()?.semaphores.get(name)))).collect();
    let mut limits: Vec<&str> = on_nodes.iter().filter_map(|(_, s)| (*s)?.limit.as_deref()).collect();
    limits.sort_unstable();
    let limit = limits.chunk_by(|a, b| a == b).map(|c| (c.len(), c[0])).max().map(|(_, l)| l);
    let mut head = match limit {
        Some(l) => format!("semaphore {name:?} (limit {l}"),
        None => format!("semaphore {name:?} (no limit recorded"),
    };
    for (i, sem) in &on_nodes {
        let recorded = sem.and_then(|s| s.limit.as_deref());
        if recorded != limit {
            head.push_str(&format!("; node {i} records {}", recorded.unwrap_or("none")));
        }
    }
    let held: Vec<String> = on_nodes
        .iter()
        .map(|(i, sem)| match sem.map(|s| s.held.as_slice()).unwrap_or_default() {
            [] => format!("node {i} holds none"),
            [permit] => format!("node {i} holds permit {permit}"),
            permits => {
                let permits: Vec<String> = permits.iter().map(u32::to_string).collect();
                format!("node {i} holds permits {}", permits.join(","))
            }
        })
        .collect();
    format!("{head}): {}", held.join("; "))
}
