//! What one simulated run looks like, drawn from its seed: topology, timings, workload knobs
//! and the fault plan.

use std::time::Duration;

use redlease_core::Retry;
use redlease_core::cluster::hash_slot;

use super::node::{Auth, Clock, MS, ReplicaPlan, Time};
use super::rng::Rng;
use super::script::Script;
use super::world::ELECTION_KEY;

/// Microsecond of simulated time.
pub(crate) const US: Time = 1_000;

/// The family of setups a run draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Profile {
    /// Everything Redlock tolerates: delays, reordering across nodes, broken connections,
    /// paused nodes and clients, partitions, crashes that keep the data, script flushes,
    /// clock offsets, skew and jumps within the drift margin.
    Safe,
    /// UNSAFE: one node's clock jumps forward by far more than the drift margin.
    ClockJump,
    /// UNSAFE: a node crashes and comes back at once without its data.
    RestartEmpty,
    /// The crashes of `RestartEmpty`, but the data survives (`appendfsync always`): safe.
    RestartKeepData,
    /// The crashes of `RestartEmpty`, but the node stays down longer than any TTL: safe
    /// for mutual exclusion (fencing is off: the counters do not survive either).
    DelayedRestart,
}

/// An injected fault, applied at its time.
#[derive(Clone, Debug)]
pub(crate) enum Fault {
    /// The node stops processing (SIGSTOP); input waits in its kernel buffers.
    PauseNode { node: usize, dur: Time },
    /// The node crashes; `keep`: with its data; restarts after `down`.
    Crash { node: usize, keep: bool, down: Time },
    /// Every connection to the node breaks and new ones fail, for `dur`.
    Partition { node: usize, dur: Time },
    /// The node's clock jumps forward.
    ClockJump { node: usize, by: Time },
    /// Someone runs `SCRIPT FLUSH` on the node.
    ScriptFlush { node: usize },
    /// The client stops (a long GC pause); its input waits.
    PauseClient { client: usize, dur: Time },
    /// A Redis Cluster node moves `slot` from its owner to another master (chosen then): the
    /// owner migrates it, the other imports it, `moves` keys go over one at a time within
    /// `window`, then the rest, and the slot is the other master's; the remaining masters
    /// learn it `gossip` later. With `pingpong`, the new owner still points back at the old
    /// one for that long (a stale `MOVED`, so requests bounce between the two).
    Migrate { node: usize, slot: u16, window: Time, moves: u32, gossip: Time, pingpong: Option<Time> },
    /// The owner of `slot` on a cluster node answers a stale `MOVED` to another master for
    /// `dur`, whatever it holds. (Not a stale `ASK`: a source asks only for keys it no longer
    /// has, and one sent for a key it has would let the importing master create a second copy.)
    Stale { node: usize, slot: u16, dur: Time },
    /// A Sentinel-managed node's primary dies: the sentinels promote a replica with what it
    /// has (the writes since its last sync are lost), and the old primary comes back `down`
    /// later as a replica of the new one.
    Failover { node: usize, down: Time },
}

/// A Redlock node that is a Redis Cluster: how many masters, and which of them serves each
/// slot in play at the start (the others are split evenly).
#[derive(Clone, Debug)]
pub(crate) struct ClusterPlan {
    pub(crate) masters: usize,
    pub(crate) hot: Vec<(u16, usize)>,
    /// Servers older than Redis 7: no `CLUSTER SHARDS` (the map is read with `CLUSTER
    /// SLOTS`), no sharded pub/sub (waiters poll them).
    pub(crate) old: bool,
}

/// A Redlock node that is Sentinel-managed: how many replicas its primary has, how far they
/// lag (they sync every `lag.0` to `lag.1`), how late each of its three sentinels learns of a
/// failover (up to `learn`), and whether the node's grants wait for a replica (`min_replicas`).
#[derive(Clone, Debug)]
pub(crate) struct SentinelPlan {
    pub(crate) replicas: usize,
    pub(crate) lag: (Time, Time),
    pub(crate) learn: Time,
    pub(crate) min_replicas: bool,
}

/// Everything about one run.
#[derive(Clone, Debug)]
pub(crate) struct Scenario {
    pub(crate) seed: u64,
    pub(crate) profile: Profile,
    pub(crate) nodes: usize,
    pub(crate) clients: usize,
    /// Resource names in play (`r0`, `r1`, ...).
    pub(crate) resources: usize,
    /// Locks may cover two resources at once.
    pub(crate) multi: bool,
    /// Range of lock TTLs, in whole milliseconds.
    pub(crate) ttl_ms: (u64, u64),
    pub(crate) node_timeout: Time,
    /// One-way network delay range.
    pub(crate) delay: (Time, Time),
    /// Per-message chance (‰) of a slow delivery, and how slow.
    pub(crate) slow_per_mille: u64,
    pub(crate) slow: Time,
    /// Per-chunk chance (‰) that the connection breaks instead of delivering.
    pub(crate) drop_per_mille: u64,
    pub(crate) retry: Retry,
    pub(crate) fencing: bool,
    pub(crate) auto_extend: bool,
    pub(crate) extends: bool,
    pub(crate) cancels: bool,
    /// Pause between a client's locks.
    pub(crate) think: (Time, Time),
    pub(crate) auth: Option<Auth>,
    pub(crate) db: u32,
    pub(crate) client_name: bool,
    pub(crate) clocks: Vec<Clock>,
    pub(crate) faults: Vec<(Time, Fault)>,
    /// From here on: no faults, no broken connections; client 0 vanishes while holding.
    pub(crate) calm_at: Time,
    /// The engines' liveness bound for connections (and connect timeout), when the run sets
    /// one: a node stalled longer than this has its connections recycled.
    pub(crate) liveness: Option<Time>,
    /// The engines wake waiters on release (RESP3 pub/sub), and the longest random delay
    /// before a woken waiter retries.
    pub(crate) wake: bool,
    pub(crate) wake_stagger: Duration,
    /// Nodes that refuse `HELLO 3` (an old Redis): their waiters poll.
    pub(crate) resp2: Vec<bool>,
    /// Per-message chance (‰) that a node drops a release message without breaking the
    /// connection (the fallback retry must still hand the lock over).
    pub(crate) publish_loss_per_mille: u64,
    /// Semaphore runs: the limit of each resource name, every lock a semaphore's (empty:
    /// mutexes).
    pub(crate) limits: Vec<u32>,
    /// Per-lock chance (‰) that a semaphore lock takes more than one permit (of 2 to its
    /// limit, when the limit is above 1).
    pub(crate) multi_permit_per_mille: u64,
    /// Reader-writer runs: per-lock chance (‰) of a read lock (0: no read locks), and of a
    /// write lock being downgraded while held.
    pub(crate) read_per_mille: u64,
    pub(crate) downgrade_per_mille: u64,
    /// Re-entry runs: per-lock chance (‰) that a client from the third on takes its lock
    /// re-entrant: clients 2 and 3 as the owner they share (`o1`: two engines whose holds of
    /// one owner may overlap), the others each as an owner of its own (0: none re-entrant).
    pub(crate) reentry_per_mille: u64,
    /// Which nodes are Redis Clusters (empty: none).
    pub(crate) clusters: Vec<Option<ClusterPlan>>,
    /// Which nodes' grants wait for a replica (`WAIT`), and how it answers (empty: none).
    pub(crate) replicas: Vec<Option<ReplicaPlan>>,
    /// Which nodes are Sentinel-managed (empty: none).
    pub(crate) sentinels: Vec<Option<SentinelPlan>>,
    /// UNSAFE: a migrating slot's keys are dropped instead of moved (the new owner starts
    /// empty, as after a failover to a replica that never had them).
    pub(crate) lossy_migration: bool,
    /// The clients' roles, when they are set in advance (see [`Script`]; `None`: each client
    /// draws its every move from the seed).
    pub(crate) script: Option<Script>,
    /// Election runs: every acquisition is a campaign in the election `e0` (fenced,
    /// auto-extended, waiting), and an observer reads the nodes as the run goes.
    pub(crate) election: bool,
}

impl Scenario {
    /// Draw a run of `profile` from `seed`.
    pub(crate) fn generate(seed: u64, profile: Profile) -> Self {
        let mut rng = Rng::new(seed);
        let safe = profile == Profile::Safe;
        let nodes = if safe { rng.pick(&[1, 2, 3, 3, 3, 4, 5, 5]) } else { 3 };
        let clients = if safe { rng.range(2, 4) as usize } else { 3 };
        let resources = if safe { rng.range(1, 2) as usize } else { 1 };
        let multi = resources > 1 && rng.chance(500);
        let ttl_ms = if safe { (rng.range(6, 12), rng.range(12, 24)) } else { (10, 20) };
        let node_timeout = rng.range(1, 4) * MS;
        let delay = (20 * US, rng.range(200, 700) * US);
        let (slow_per_mille, slow) = if rng.chance(400) { (rng.range(5, 40), rng.range(2, 6) * MS) } else { (0, 0) };
        let drop_per_mille = if rng.chance(500) { 0 } else { rng.range(2, 15) };
        let retry = Retry::new(
            rng.range(1, 4) as u32,
            Duration::from_micros(200),
            Duration::from_micros(rng.range(1_000, 5_000)),
        );
        // Drawn in every profile so that sibling profiles share the rest of the plan.
        let fencing = rng.chance(600) && profile != Profile::DelayedRestart;
        let auto_extend = rng.chance(300);
        let extends = rng.chance(400);
        let cancels = rng.chance(200);
        let think = (0, rng.range(200, 2_000) * US);
        let auth = match rng.below(8) {
            0 | 1 => Some(Auth { user: Some("locker".into()), password: "s3cret".into() }),
            2 => Some(Auth { user: None, password: "pw".into() }),
            _ => None,
        };
        let db = if rng.chance(250) { rng.range(1, 15) as u32 } else { 0 };
        let client_name = rng.chance(500);
        let clocks = (0..nodes)
            .map(|_| {
                let offset = rng.range(0, 2_000) as i64 * MS as i64 - 1_000 * MS as i64;
                let skew = rng.range(0, 1_000) as i64 - 500;
                Clock::new(offset, skew)
            })
            .collect();
        let calm_at = rng.range(20, 40) * MS;
        let mut faults = Vec::new();
        // A fault of length `dur` that ends before the calm phase, or none.
        let at = |rng: &mut Rng, dur: Time| -> Option<Time> {
            let last = calm_at.checked_sub(dur + MS)?;
            (last > MS).then(|| rng.range(MS, last))
        };
        let node = |rng: &mut Rng| rng.below(nodes as u64) as usize;
        match profile {
            Profile::Safe => {
                for _ in 0..rng.range(0, 2) {
                    let dur = rng.range(200, 20_000) * US;
                    if let Some(t) = at(&mut rng, dur) {
                        faults.push((t, Fault::PauseNode { node: node(&mut rng), dur }));
                    }
                }
                for _ in 0..rng.range(0, 2) {
                    let dur = rng.range(500, 10_000) * US;
                    if let Some(t) = at(&mut rng, dur) {
                        faults.push((t, Fault::Partition { node: node(&mut rng), dur }));
                    }
                }
                if rng.chance(300) {
                    let down = rng.range(500, 10_000) * US;
                    if let Some(t) = at(&mut rng, down) {
                        faults.push((t, Fault::Crash { node: node(&mut rng), keep: true, down }));
                    }
                }
                if !fencing && rng.chance(300) {
                    // Delayed restart: down longer than any key can live (extensions included).
                    let down = 3 * ttl_ms.1 * MS;
                    if let Some(t) = at(&mut rng, down) {
                        faults.push((t, Fault::Crash { node: node(&mut rng), keep: false, down }));
                    }
                }
                if rng.chance(200) {
                    if let Some(t) = at(&mut rng, 0) {
                        faults.push((t, Fault::ScriptFlush { node: node(&mut rng) }));
                    }
                }
                if rng.chance(200) {
                    let dur = rng.range(500, 15_000) * US;
                    if let Some(t) = at(&mut rng, dur) {
                        faults.push((t, Fault::PauseClient { client: rng.below(clients as u64) as usize, dur }));
                    }
                }
                if rng.chance(200) {
                    // A small jump, well inside the drift margin (2 ms + 1% of the TTL), which
                    // also has to absorb Redis' whole-millisecond expiry and the clock skew.
                    if let Some(t) = at(&mut rng, 0) {
                        faults.push((t, Fault::ClockJump { node: node(&mut rng), by: rng.range(0, 500) * US }));
                    }
                }
            }
            Profile::ClockJump => {
                let by = rng.range(ttl_ms.0 / 2, ttl_ms.1) * MS;
                if let Some(t) = at(&mut rng, 0) {
                    faults.push((t, Fault::ClockJump { node: node(&mut rng), by }));
                }
            }
            Profile::RestartEmpty | Profile::RestartKeepData | Profile::DelayedRestart => {
                for _ in 0..rng.range(1, 3) {
                    let quick = rng.range(200, 2_000) * US;
                    let (keep, down) = match profile {
                        Profile::RestartEmpty => (false, quick),
                        Profile::RestartKeepData => (true, quick),
                        _ => (false, 3 * ttl_ms.1 * MS),
                    };
                    if let Some(t) = at(&mut rng, down) {
                        faults.push((t, Fault::Crash { node: node(&mut rng), keep, down }));
                    }
                }
            }
        }
        faults.sort_by_key(|f| f.0);
        // Drawn last: the rest of each seed's plan does not depend on them.
        let wake = !rng.chance(200);
        let resp2 = (0..nodes).map(|_| rng.chance(150)).collect();
        let publish_loss_per_mille = if rng.chance(500) { 0 } else { rng.range(50, 500) };
        Scenario {
            seed,
            profile,
            nodes,
            clients,
            resources,
            multi,
            ttl_ms,
            node_timeout,
            delay,
            slow_per_mille,
            slow,
            drop_per_mille,
            retry,
            fencing,
            auto_extend,
            extends,
            cancels,
            think,
            auth,
            db,
            client_name,
            clocks,
            faults,
            calm_at,
            liveness: None,
            wake,
            wake_stagger: Duration::from_micros(200),
            resp2,
            publish_loss_per_mille,
            limits: Vec::new(),
            multi_permit_per_mille: 0,
            read_per_mille: 0,
            downgrade_per_mille: 0,
            reentry_per_mille: 0,
            clusters: Vec::new(),
            replicas: Vec::new(),
            sentinels: Vec::new(),
            lossy_migration: false,
            script: None,
            election: false,
        }
    }

    /// The run of [`generate`](Self::generate) (or of any family), where some nodes' grants
    /// wait for a replica: each node at random, at least one, with `WAIT` answers that are
    /// late, too few, errors, or lost with the connection. Drawn with a generator of its own,
    /// so the rest of the seed's plan stays what it was.
    pub(crate) fn with_replicas(mut self) -> Self {
        let mut rng = Rng::new(self.seed ^ 0x0E91_1CA5);
        let plan = |rng: &mut Rng| ReplicaPlan {
            short_per_mille: rng.pick(&[0, 20, 80]),
            error_per_mille: rng.pick(&[0, 10, 40]),
            lost_per_mille: if self.profile == Profile::Safe { rng.pick(&[0, 10, 30]) } else { 0 },
            late_per_mille: rng.pick(&[0, 200, 500]),
            late: rng.range(200, 3_000) * US,
        };
        let mut replicas: Vec<Option<ReplicaPlan>> =
            (0..self.nodes).map(|_| rng.chance(500).then(|| plan(&mut rng))).collect();
        if replicas.iter().all(Option::is_none) {
            let n = rng.below(self.nodes as u64) as usize;
            replicas[n] = Some(plan(&mut rng));
        }
        self.replicas = replicas;
        // `WAIT`'s timeout (1 ms) must be below the node timeout.
        self.node_timeout = self.node_timeout.max(2 * MS);
        self
    }

    /// [`with_replicas`](Self::with_replicas) over the family of `seed % 3`: mutexes,
    /// semaphores or reader-writer locks; one seed in four on Redis Cluster nodes (the seed's
    /// [`clusters`](Self::clusters) run).
    pub(crate) fn replicated(seed: u64, profile: Profile) -> Self {
        if seed % 4 == 3 {
            return Self::clusters(seed, profile).with_replicas();
        }
        match seed % 3 {
            0 => Self::generate(seed, profile),
            1 => Self::semaphores(seed, profile),
            _ => Self::rwlocks(seed, profile),
        }
        .with_replicas()
    }

    /// Draw a semaphore run of `profile` from `seed`: the faults, timings and knobs of
    /// [`generate`](Self::generate)'s run, but every lock is a semaphore's, of a limit of 1 to
    /// 4 per resource name, some taking several permits at once, and there are one or two
    /// clients more than the largest limit (up to six), so that permits are contended.
    pub(crate) fn semaphores(seed: u64, profile: Profile) -> Self {
        let mut sc = Self::generate(seed, profile);
        let mut rng = Rng::new(seed ^ 0x5E3A_F0E5);
        sc.limits = (0..sc.resources).map(|_| rng.range(1, 4) as u32).collect();
        let most = sc.limits.iter().copied().max().unwrap_or(1) as usize;
        sc.clients = sc.clients.max((most + rng.range(1, 2) as usize).min(6));
        sc.multi = false;
        sc.multi_permit_per_mille = rng.pick(&[0, 200, 400]);
        sc
    }

    /// Draw a reader-writer run of `profile` from `seed`: the faults, timings and knobs of
    /// [`generate`](Self::generate)'s run, every lock of one resource, a read lock (shared)
    /// or a write lock (the plain lock of the name) at random, some write locks downgraded
    /// while held, and three to five clients, so that readers share and writers contend.
    pub(crate) fn rwlocks(seed: u64, profile: Profile) -> Self {
        let mut sc = Self::generate(seed, profile);
        let mut rng = Rng::new(seed ^ 0x2E4D_10C5);
        sc.multi = false;
        sc.clients = sc.clients.max(rng.range(3, 5) as usize);
        sc.read_per_mille = rng.pick(&[400, 600, 800]);
        sc.downgrade_per_mille = rng.pick(&[0, 250, 500]);
        sc
    }

    /// Draw a re-entry run of `profile` from `seed`: the faults, timings and knobs of
    /// [`generate`](Self::generate)'s run, every lock of one resource, at least four clients, of
    /// which those from the third on take many of their locks re-entrant, two of them as one
    /// owner (see [`reentry_per_mille`](Self::reentry_per_mille)); clients 0 and 1 take plain
    /// locks of the same names.
    pub(crate) fn reentrant(seed: u64, profile: Profile) -> Self {
        let mut sc = Self::generate(seed, profile);
        let mut rng = Rng::new(seed ^ 0x5EE7_12A1);
        sc.multi = false;
        sc.clients = sc.clients.max(4);
        sc.reentry_per_mille = rng.pick(&[500, 800]);
        sc
    }

    /// The re-entry run of `seed` where some nodes' grants wait for a replica
    /// ([`with_replicas`](Self::with_replicas)).
    pub(crate) fn reentrant_replicated(seed: u64, profile: Profile) -> Self {
        Self::reentrant(seed, profile).with_replicas()
    }

    /// The re-entry run of `seed` over Sentinel-managed nodes whose grants wait for a replica
    /// ([`sentinels`](Self::sentinels)): failovers promote replicas that copied the owner's key
    /// and holds at a lag.
    pub(crate) fn reentrant_sentinels(seed: u64, profile: Profile) -> Self {
        Self::reentrant(seed, profile).with_sentinels(true)
    }

    /// The mutex run of Redis Cluster nodes of [`clusters`](Self::clusters) (its seed
    /// `3 × seed`), with the clients of [`reentrant`](Self::reentrant).
    pub(crate) fn reentrant_clusters(seed: u64, profile: Profile) -> Self {
        let mut sc = Self::clusters(seed.wrapping_mul(3), profile);
        let mut rng = Rng::new(seed ^ 0x5EE7_12A1);
        sc.clients = sc.clients.max(4);
        sc.reentry_per_mille = rng.pick(&[500, 800]);
        sc
    }

    /// Draw a run of Redis Cluster nodes of `profile` from `seed`: the mutex, semaphore or
    /// reader-writer run of the seed (by `seed % 3`), where some nodes (at least one, possibly
    /// all) are Redis Clusters of 2 or 3 masters. Each cluster starts with the slots in play
    /// (the resources' and the lock format key's) on masters drawn at random, and within the
    /// fault phase migrates them between masters (one at a time) and injects stale redirects.
    /// Locks take one resource (two resources hash to two slots, which a cluster refuses),
    /// and nodes use database 0 (the only one a cluster has).
    pub(crate) fn clusters(seed: u64, profile: Profile) -> Self {
        let sc = match seed % 3 {
            0 => Self::generate(seed, profile),
            1 => Self::semaphores(seed, profile),
            _ => Self::rwlocks(seed, profile),
        };
        Self::clustered(sc)
    }

    /// `sc` over Redis Cluster nodes, as [`clusters`](Self::clusters) makes them.
    fn clustered(mut sc: Self) -> Self {
        let seed = sc.seed;
        let mut rng = Rng::new(seed ^ 0xC1_05E7);
        sc.multi = false;
        sc.db = 0;
        let hot: Vec<u16> = (0..sc.resources)
            .map(|r| if sc.election { hash_slot(ELECTION_KEY) } else { hash_slot(format!("r{r}").as_bytes()) })
            .chain([hash_slot(b"redlease:format")])
            .collect();
        let mut clusters: Vec<Option<ClusterPlan>> = (0..sc.nodes)
            .map(|_| {
                rng.chance(600).then(|| {
                    let masters = rng.range(2, 3) as usize;
                    let hot = hot.iter().map(|&s| (s, rng.below(masters as u64) as usize)).collect();
                    ClusterPlan { masters, hot, old: false }
                })
            })
            .collect();
        if clusters.iter().all(Option::is_none) {
            let n = rng.below(sc.nodes as u64) as usize;
            let masters = rng.range(2, 3) as usize;
            clusters[n] = Some(ClusterPlan {
                masters,
                hot: hot.iter().map(|&s| (s, rng.below(masters as u64) as usize)).collect(),
                old: false,
            });
        }
        // One cluster in four is of older servers (drawn without the generator: the runs
        // stay the same otherwise).
        for (node, plan) in clusters.iter_mut().enumerate() {
            if let Some(plan) = plan {
                plan.old = (seed / 3 + node as u64) % 4 == 0;
            }
        }
        let calm_at = sc.calm_at;
        for (node, _) in clusters.iter().enumerate().filter(|(_, c)| c.is_some()) {
            for _ in 0..rng.range(1, 4) {
                // Mostly the resources' slots (the format key's is read at handshakes only).
                let slot =
                    if rng.chance(850) { hot[rng.below(sc.resources as u64) as usize] } else { hot[sc.resources] };
                let window = rng.range(300, 8_000) * US;
                let gossip = rng.range(0, 3_000) * US;
                let pingpong = rng.chance(400).then(|| rng.range(300, 4_000) * US);
                let moves = rng.range(0, 3) as u32;
                let span = window + gossip.max(pingpong.unwrap_or(0)) + MS;
                if let Some(last) = calm_at.checked_sub(span).filter(|&l| l > 0) {
                    let t = rng.range(0, last);
                    sc.faults.push((t, Fault::Migrate { node, slot, window, moves, gossip, pingpong }));
                }
            }
            for _ in 0..rng.range(0, 3) {
                let slot = hot[rng.below(sc.resources as u64) as usize];
                let dur = rng.range(200, 4_000) * US;
                if let Some(last) = calm_at.checked_sub(dur + MS).filter(|&l| l > 0) {
                    let t = rng.range(0, last);
                    sc.faults.push((t, Fault::Stale { node, slot, dur }));
                }
            }
        }
        sc.faults.sort_by_key(|f| f.0);
        sc.clusters = clusters;
        sc
    }

    /// Draw an election run of `profile` from `seed`: [`generate`](Self::generate)'s faults,
    /// timings and knobs, but every acquisition is a campaign (fenced, auto-extended, waiting)
    /// in one election, whose leaders resign after a while; no node restarts without its data
    /// in a safe run (the epochs are the fence counters, which must survive). By `seed % 4`:
    /// standalone nodes, Sentinel-managed nodes that fail over, nodes whose grants wait for a
    /// replica ([`with_replicas`](Self::with_replicas)), Redis Cluster nodes whose grants wait
    /// for a replica.
    pub(crate) fn elections(seed: u64, profile: Profile) -> Self {
        let mut sc = Self::generate(seed, profile);
        sc.election = true;
        sc.fencing = true;
        sc.auto_extend = true;
        sc.multi = false;
        sc.resources = 1;
        if profile == Profile::Safe {
            sc.faults.retain(|(_, f)| !matches!(f, Fault::Crash { keep: false, .. }));
        }
        match seed % 4 {
            1 => sc.with_sentinels(true),
            2 => sc.with_replicas(),
            3 => Self::clustered(sc).with_replicas(),
            _ => sc,
        }
    }

    /// The run of [`clusters`](Self::clusters), but a migration drops the slot's keys instead
    /// of moving them (UNSAFE).
    pub(crate) fn lossy_clusters(seed: u64, profile: Profile) -> Self {
        Self { lossy_migration: true, ..Self::clusters(seed, profile) }
    }

    /// Draw a run of Sentinel-managed nodes of `profile` from `seed`: the mutex, semaphore or
    /// reader-writer run of the seed (by `seed % 3`), where some nodes (at least one, possibly
    /// all) are a primary with one or two replicas and three sentinels, whose grants wait for a
    /// replica. Each fails over once or twice within the fault phase.
    pub(crate) fn sentinels(seed: u64, profile: Profile) -> Self {
        Self::sentinel_nodes(seed, profile, true)
    }

    /// The runs of [`sentinels`](Self::sentinels), but grants do not wait for a replica
    /// (UNSAFE: a failover can promote a replica that never had a grant).
    pub(crate) fn unreplicated_sentinels(seed: u64, profile: Profile) -> Self {
        Self::sentinel_nodes(seed, profile, false)
    }

    fn sentinel_nodes(seed: u64, profile: Profile, min_replicas: bool) -> Self {
        let sc = match seed % 3 {
            0 => Self::generate(seed, profile),
            1 => Self::semaphores(seed, profile),
            _ => Self::rwlocks(seed, profile),
        };
        sc.with_sentinels(min_replicas)
    }

    /// `self` over Sentinel-managed nodes (some of its nodes, at least one), as
    /// [`sentinels`](Self::sentinels) makes them.
    fn with_sentinels(self, min_replicas: bool) -> Self {
        let seed = self.seed;
        let mut sc = self;
        let mut rng = Rng::new(seed ^ 0x5E47_1E15);
        let plan = |rng: &mut Rng| SentinelPlan {
            replicas: rng.range(1, 2) as usize,
            // Without `WAIT`, replicas that lag further lose more grants in a failover.
            lag: (200 * US, rng.range(500, 4_000) * US * if min_replicas { 1 } else { 3 }),
            learn: rng.range(0, 3_000) * US,
            min_replicas,
        };
        let mut sentinels: Vec<Option<SentinelPlan>> =
            (0..sc.nodes).map(|_| rng.chance(600).then(|| plan(&mut rng))).collect();
        if sentinels.iter().all(Option::is_none) {
            let n = rng.below(sc.nodes as u64) as usize;
            sentinels[n] = Some(plan(&mut rng));
        }
        for node in (0..sc.nodes).filter(|&n| sentinels[n].is_some()) {
            for _ in 0..rng.range(1, 2) {
                let down = rng.range(500, 8_000) * US;
                if let Some(last) = sc.calm_at.checked_sub(down + MS).filter(|&l| l > MS) {
                    let t = rng.range(MS, last);
                    sc.faults.push((t, Fault::Failover { node, down }));
                }
            }
        }
        sc.faults.sort_by_key(|f| f.0);
        sc.sentinels = sentinels;
        // `WAIT`'s timeout (1 ms) must be below the node timeout.
        sc.node_timeout = sc.node_timeout.max(2 * MS);
        sc
    }

    /// How long the end of a run leaves the engines to finish what they were doing once the
    /// workload stops (their cancellations and releases answered, by the slowest network).
    pub(crate) fn drain(&self) -> Time {
        20 * MS + 4 * self.delay.1.max(self.slow) + 2 * self.node_timeout
    }

    /// How long the end of a run leaves the engines once the workload stops: the
    /// [`drain`](Self::drain), on Redis Cluster nodes the tries of a cleanup a migrating slot
    /// answers `TRYAGAIN` (sent again up to 5 times, 10 ms later and doubling), and in re-entry
    /// runs the longest a key a missed release left can live.
    pub(crate) fn wind_down(&self) -> Time {
        let again = if self.clusters.iter().any(Option::is_some) { 320 * MS } else { 0 };
        // A node that missed a re-entrant hold's release keeps the owner's key as long as the
        // owner's other holds keep it, then for the longest TTL one of them set (twice a TTL
        // after an extension).
        let kept = if self.reentry_per_mille > 0 { 2 * self.ttl_ms.1 * MS } else { 0 };
        self.drain() + again + kept
    }

    /// How long after a holder vanishes another client must have the lock: the longest a
    /// key can live (a TTL, or twice it after an extension in flight), plus a few rounds of
    /// retry, think time, node timeout and network delay.
    pub(crate) fn liveness_bound(&self) -> Time {
        let max_delay = self.delay.1.max(self.slow);
        let round = self.node_timeout + (self.retry.max_delay.as_nanos() as Time).max(self.think.1) + 4 * max_delay;
        2 * self.ttl_ms.1 * MS + max_delay + 8 * round + 5 * MS
    }
}
