//! Runs whose clients' moves are set in advance, on the world's model nodes and network: each
//! client's role (what it asks for and when, how long it holds each grant, whether it asks
//! again, its engine's wake-ups, its connections), the scenario of such a run, and what its
//! acquisitions add up to.
//!
//! Nothing fails in such a run (no fault, no lost message); the world checks it as any other
//! (the checker's rules, the engines' audits, the nodes' leftovers once the workload stops).

use redlease_core::{AcquireError, Config, LockOptions};

use super::checker::{self, Hold};
use super::node::{Clock, Time};
use super::scenario::{Profile, Scenario};
use super::world::{NAMES, Outcome};

/// What one client does, from `start` until the workload stops.
#[derive(Clone, Debug)]
pub(crate) struct Role {
    /// When it first asks.
    pub(crate) start: Time,
    /// What it asks for, over the world's resource names ([`NAMES`]). A semaphore of one name
    /// has one limit in a run.
    pub(crate) options: LockOptions,
    /// How long it holds each grant before it releases (`None`: until the workload stops).
    pub(crate) hold: Option<Time>,
    /// It asks again, at once, when its lock is released or its acquisition failed.
    pub(crate) again: bool,
    /// Its engine wakes waiters on release (`Config::wake`).
    pub(crate) wake: bool,
    /// The nodes refuse `HELLO 3` on its connections, as an old Redis does (it polls).
    pub(crate) resp2: bool,
    /// The nodes it cannot reach: its connections to them never come up.
    pub(crate) unreachable: Vec<usize>,
}

impl Role {
    /// A client that asks for `options` at `start`, holds each grant for `hold`, and asks
    /// again at once; its engine wakes waiters, and it reaches every node over RESP3.
    pub(crate) fn new(start: Time, options: LockOptions, hold: Option<Time>) -> Self {
        Role { start, options, hold, again: true, wake: true, resp2: false, unreachable: Vec::new() }
    }
}

/// The clients of a run (client `c` plays `roles[c]`), and when the workload stops: then
/// acquisitions under way are cancelled, holders release, and the run winds down.
#[derive(Clone, Debug)]
pub(crate) struct Script {
    pub(crate) roles: Vec<Role>,
    pub(crate) stop_at: Time,
}

/// The index in [`NAMES`] of a resource a role names.
fn resource(name: &str) -> usize {
    NAMES.iter().position(|n| *n == name.as_bytes()).unwrap_or_else(|| panic!("{name:?} is none of the world's names"))
}

impl Scenario {
    /// A run of `script` over `nodes` standalone nodes from `seed`: every one-way delay drawn
    /// from `delay`, no fault, clocks that agree, and the engines' defaults (`Config::new`)
    /// but for their seeds and what the roles set. (No calm phase: nobody vanishes.)
    pub(crate) fn scripted(seed: u64, nodes: usize, delay: (Time, Time), script: Script) -> Self {
        let config = Config::new(Vec::new());
        let ttls = script.roles.iter().map(|r| r.options.ttl.as_millis() as u64);
        let ttl_ms = (ttls.clone().min().unwrap_or(0), ttls.max().unwrap_or(0));
        let mut limits: Vec<u32> = Vec::new();
        for options in script.roles.iter().map(|r| &r.options) {
            let Some(limit) = options.limit else { continue };
            let r = resource(&options.resources[0]);
            if limits.len() <= r {
                limits.resize(r + 1, limit);
            }
            assert_eq!(limits[r], limit, "one limit per semaphore in a run");
        }
        Scenario {
            seed,
            profile: Profile::Safe,
            nodes,
            clients: script.roles.len(),
            resources: NAMES.len(),
            multi: false,
            ttl_ms,
            node_timeout: config.node_timeout.as_nanos() as Time,
            delay,
            slow_per_mille: 0,
            slow: 0,
            drop_per_mille: 0,
            retry: config.retry,
            fencing: false,
            auto_extend: false,
            extends: false,
            cancels: false,
            think: (0, 0),
            auth: None,
            db: 0,
            client_name: false,
            clocks: vec![Clock::new(0, 0); nodes],
            faults: Vec::new(),
            calm_at: script.stop_at,
            liveness: None,
            wake: true,
            wake_stagger: config.wake_stagger,
            resp2: vec![false; nodes],
            publish_loss_per_mille: 0,
            limits,
            multi_permit_per_mille: 0,
            read_per_mille: 0,
            downgrade_per_mille: 0,
            reentry_per_mille: 0,
            clusters: Vec::new(),
            replicas: Vec::new(),
            sentinels: Vec::new(),
            lossy_migration: false,
            script: Some(script),
            election: false,
        }
    }

    /// The role of client `c`, in a scripted run.
    pub(crate) fn role(&self, c: usize) -> Option<&Role> {
        self.script.as_ref().map(|s| &s.roles[c])
    }

    /// What client `c`'s role asks for: the options, the resources (indexes into [`NAMES`])
    /// and, for a semaphore, the permits.
    pub(crate) fn scripted_request(&self, c: usize) -> Option<(LockOptions, Vec<usize>, Option<u32>)> {
        let options = self.role(c)?.options.clone();
        let resources = options.resources.iter().map(|r| resource(r)).collect();
        let permits = options.limit.map(|_| options.permits);
        Some((options, resources, permits))
    }
}

impl Outcome {
    /// The holds client `c` was granted, each with how long it waited for it (from its call
    /// to acquire).
    pub(crate) fn grants(&self, c: usize) -> impl Iterator<Item = (&Hold, Time)> {
        self.acquisitions.iter().filter(move |a| a.client == c).filter_map(|a| match a.outcome {
            Some(Ok(h)) => Some((&self.holds[h], self.holds[h].start - a.asked)),
            _ => None,
        })
    }

    /// The acquisitions that failed, other than those cancelled (roles never cancel; the
    /// workload's stop cancels what is under way): the client and the error.
    pub(crate) fn failures(&self) -> impl Iterator<Item = (usize, &AcquireError)> {
        self.acquisitions.iter().filter_map(|a| match &a.outcome {
            Some(Err(AcquireError::Cancelled)) => None,
            Some(Err(e)) => Some((a.client, e)),
            _ => None,
        })
    }

    /// How many read holds began while an earlier read hold of their resources went on.
    pub(crate) fn shared_grants(&self) -> usize {
        // (The holds are in the order they began.)
        let readers: Vec<&Hold> = self.holds.iter().filter(|h| h.shared).collect();
        let during = |h: &Hold, o: &Hold| h.start < o.end && o.resources == h.resources;
        (0..readers.len()).filter(|&i| readers[..i].iter().any(|o| during(readers[i], o))).count()
    }

    /// The most permits of semaphores held at once.
    pub(crate) fn peak_permits(&self) -> u64 {
        let holds: Vec<&Hold> = self.holds.iter().filter(|h| h.semaphore.is_some()).collect();
        checker::peak_permits(&holds).0
    }
}
