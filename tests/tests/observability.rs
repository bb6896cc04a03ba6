//! What the clients tell the world, captured: a `tracing` subscriber sees acquire spans with
//! per-node votes and one loud line per change of a node's state; a `metrics` recorder sees
//! the documented metrics move. Real `redis-server` nodes; the tokio client and the blocking
//! mio client.
//!
//! One subscriber and one recorder are installed for the whole binary (the drivers run on
//! threads of their own); each test tells its records apart by resource and by node address.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redlease_core::{Config, LockOptions};
use redlease_tests::Servers;
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// A closed span: its name, fields, and its parent's name.
#[derive(Clone, Debug)]
struct SpanRecord {
    name: &'static str,
    fields: HashMap<String, String>,
    parent: Option<&'static str>,
}

/// An event: its level, message and fields, and the span it is in (name and resource).
#[derive(Clone, Debug)]
struct EventRecord {
    level: Level,
    fields: HashMap<String, String>,
    span: Option<(&'static str, String)>,
}

#[derive(Default)]
struct Captured {
    spans: Vec<SpanRecord>,
    events: Vec<EventRecord>,
}

/// Fields as text.
struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// A layer that keeps every closed span and every event.
struct Capture(Arc<Mutex<Captured>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        if let Some(span) = ctx.span(id) {
            let parent = span.parent().map(|p| p.name());
            span.extensions_mut().insert(SpanRecord { name: attrs.metadata().name(), fields, parent });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(record) = span.extensions_mut().get_mut::<SpanRecord>() {
                values.record(&mut Fields(&mut record.fields));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(record) = ctx.span(&id).and_then(|s| s.extensions().get::<SpanRecord>().cloned()) {
            self.0.lock().unwrap().spans.push(record);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let span = ctx.event_span(event).map(|s| {
            let resource = s.extensions().get::<SpanRecord>().and_then(|r| r.fields.get("resource").cloned());
            (s.name(), resource.unwrap_or_default())
        });
        self.0.lock().unwrap().events.push(EventRecord { level: *event.metadata().level(), fields, span });
    }
}

/// The binary's subscriber and recorder, installed once.
fn capture() -> &'static (Arc<Mutex<Captured>>, Snapshotter) {
    static CAPTURE: OnceLock<(Arc<Mutex<Captured>>, Snapshotter)> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let captured = Arc::new(Mutex::new(Captured::default()));
        let subscriber = Registry::default().with(Capture(Arc::clone(&captured)));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder");
        (captured, snapshotter)
    })
}

fn spans(name: &str, resource: &str) -> Vec<SpanRecord> {
    let captured = capture().0.lock().unwrap();
    captured
        .spans
        .iter()
        .filter(|s| s.name == name && s.fields.get("resource").is_some_and(|r| r == resource))
        .cloned()
        .collect()
}

/// Events at `level` whose message contains `text`.
fn events(level: Level, text: &str) -> Vec<EventRecord> {
    let captured = capture().0.lock().unwrap();
    captured
        .events
        .iter()
        .filter(|e| e.level == level && e.fields.get("message").is_some_and(|m| m.contains(text)))
        .cloned()
        .collect()
}

/// Every series seen so far, by name and labels. A snapshot of the debugging recorder
/// drains it (counters and gauges read 0 afterwards, histograms lose their samples), so the
/// snapshots are added up here: counters and histogram sample counts are summed; a gauge keeps
/// its first value and then its last non-zero one (a 0 after a snapshot may only be the drain).
fn series() -> Vec<(SeriesId, f64)> {
    static SEEN: OnceLock<Mutex<HashMap<SeriesId, f64>>> = OnceLock::new();
    let mut seen = SEEN.get_or_init(Default::default).lock().unwrap();
    for (key, _, _, value) in capture().1.snapshot().into_vec() {
        let key = key.key();
        let labels = key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
        let id = (key.name().to_owned(), labels);
        match value {
            DebugValue::Counter(c) => *seen.entry(id).or_insert(0.0) += c as f64,
            DebugValue::Histogram(h) => *seen.entry(id).or_insert(0.0) += h.len() as f64,
            DebugValue::Gauge(g) => {
                let g = g.into_inner();
                match seen.get_mut(&id) {
                    Some(v) if g != 0.0 => *v = g,
                    Some(_) => {}
                    None => {
                        seen.insert(id, g);
                    }
                }
            }
        }
    }
    seen.iter().map(|(id, v)| (id.clone(), *v)).collect()
}

/// A metric's name and its labels.
type SeriesId = (String, Vec<(String, String)>);

/// The value of metric `name` whose labels contain every `(key, value)` of `labels` (a node
/// label is its address with the scheme and user: a substring matches), summed over the
/// matching series; `None` if there is none.
fn metric(name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for ((n, ls), v) in series() {
        if n == name && labels.iter().all(|(k, want)| ls.iter().any(|(lk, lv)| lk == k && lv.contains(want))) {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Three ACL servers whose node 0 gets a wrong password: it refuses us, the others serve.
fn one_misconfigured() -> (Servers, Config, String) {
    let servers = Servers::builder().nodes(3).acl_user("alice", "s3cret").start();
    let (user, pass) = servers.credentials().unwrap();
    let urls: Vec<String> = servers
        .addrs()
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 0 { format!("redis://{user}:wrong@{a}") } else { format!("redis://{user}:{pass}@{a}") })
        .collect();
    let config = Config::from_urls(&urls).unwrap().reconnect(Duration::from_millis(10), Duration::from_millis(50));
    let bad = servers.addrs()[0].to_string();
    (servers, config, bad)
}

/// Every metric recorded so far is in the table of the `redlease::monitor` docs, with each of
/// its labels.
fn assert_labels_documented() {
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../client/src/monitor.rs")).unwrap();
    let table: HashMap<&str, Vec<&str>> = source
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `redlease_"))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let name = cells[0].trim_end_matches('`');
            (name, cells[2].split(", ").map(|l| l.trim_matches('`')).collect())
        })
        .collect();
    for ((name, labels), _) in series() {
        let documented =
            table.get(&name["redlease_".len()..]).unwrap_or_else(|| panic!("{name} is not in the docs' table"));
        for (label, _) in &labels {
            assert!(documented.contains(&label.as_str()), "{name}'s label {label} is not in the docs' table");
        }
    }
}

/// What every client must show, whatever its runtime: `lock` runs `n` lock+release cycles of
/// `resource` on servers whose node 0 refuses the password.
fn check(resource: &str, servers: &Servers, bad: &str, n: usize, cycles: impl FnOnce(usize)) {
    capture();
    cycles(n);
    // The acquire spans: one per lock, with the outcome, the attempts and each node's vote.
    let acquires = spans("redlease.acquire", resource);
    assert_eq!(acquires.len(), n, "{acquires:?}");
    for s in &acquires {
        assert_eq!(s.fields.get("outcome").map(String::as_str), Some("acquired"), "{s:?}");
        let votes = s.fields.get("votes").expect("votes recorded");
        assert!(votes.contains("#0 misconfigured") || votes.contains("#0 pending"), "{votes}");
        assert!(votes.contains("#1 granted") || votes.contains("#2 granted"), "{votes}");
        assert!(s.fields.contains_key("duration_ms") && s.fields.contains_key("attempts"), "{s:?}");
    }
    assert_eq!(spans("redlease.release", resource).len(), n);

    // The misconfigured node: one ERROR for the change of state, however many reconnect
    // attempts and locks there were; every attempt counted.
    let failures =
        || metric("redlease_node_failures_total", &[("node", bad), ("kind", "misconfigured")]).unwrap_or(0.0);
    assert!(eventually(Duration::from_secs(10), || failures() >= 3.0), "failures counted: {}", failures());
    let errors: Vec<_> = events(Level::ERROR, bad)
        .into_iter()
        .filter(|e| e.fields.get("message").is_some_and(|m| m.contains("AUTH")))
        .collect();
    assert_eq!(errors.len(), 1, "one ERROR per change of state, not per attempt or lock: {errors:?}");
    assert_eq!(errors[0].fields.get("fault_tolerance").map(String::as_str), Some("0"), "{errors:?}");
    assert!(!errors[0].fields.values().any(|v| v.contains("wrong") || v.contains("s3cret")), "{errors:?}");

    // The documented metrics moved.
    let acquired = metric("redlease_acquisitions_total", &[("outcome", "acquired")]).unwrap_or(0.0);
    assert!(acquired >= n as f64, "{acquired}");
    assert!(metric("redlease_acquire_seconds", &[("outcome", "acquired")]).unwrap_or(0.0) >= n as f64);
    assert!(metric("redlease_releases_total", &[("outcome", "released")]).unwrap_or(0.0) >= n as f64);
    assert_labels_documented();
    assert!(metric("redlease_hold_seconds", &[]).unwrap_or(0.0) >= n as f64);
    let good = servers.addrs()[1].to_string();
    assert_eq!(metric("redlease_node_up", &[("node", good.as_str())]), Some(1.0));
    assert_eq!(metric("redlease_node_up", &[("node", bad)]), Some(0.0));
    assert!(metric("redlease_node_rtt_seconds", &[("node", good.as_str())]).is_some_and(|s| s > 0.0));
    assert!(metric("redlease_fault_tolerance", &[]).is_some());
}

#[test]
fn tokio_client_traces_and_counts() {
    let (servers, config, bad) = one_misconfigured();
    check("obs:tokio", &servers, &bad, 5, |n| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let client = redlease_tokio::Client::with_config(config).await.unwrap();
            for _ in 0..n {
                let guard = client.lock_with(LockOptions::new("obs:tokio", Duration::from_secs(10))).await.unwrap();
                guard.release().await.unwrap();
            }
            // Let the reconnect attempts to the misconfigured node go on for a while.
            tokio::time::sleep(Duration::from_millis(300)).await;
            // The gauges are read while the client is open: closing it sets them to 0.
            series();
            client.close().await;
        });
    });
}

#[test]
fn a_semaphores_acquisition_shows_its_limit_permits_held_and_kind() {
    let servers = Servers::start(3);
    capture();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let held = rt.block_on(async {
        let client = redlease_tokio::Client::connect(servers.urls()).await.unwrap();
        let options = LockOptions::new("obs:sem", Duration::from_secs(10)).semaphore(4).permits(2);
        let guard = client.lock_with(options).await.unwrap();
        let held = guard.permits().to_vec();
        guard.release().await.unwrap();
        client.close().await;
        held
    });
    let acquires = spans("redlease.acquire", "obs:sem");
    assert_eq!(acquires.len(), 1, "{acquires:?}");
    let field = |k: &str| acquires[0].fields.get(k).cloned().unwrap_or_default();
    assert_eq!((field("limit").as_str(), field("permits").as_str()), ("4", "2"), "{acquires:?}");
    assert_eq!(field("held"), format!("{held:?}"), "{acquires:?}");
    let semaphores = metric("redlease_acquisitions_total", &[("outcome", "acquired"), ("kind", "semaphore")]);
    assert!(semaphores.unwrap_or(0.0) >= 1.0, "{semaphores:?}");
}

#[test]
fn blocking_mio_client_traces_and_counts() {
    let (servers, config, bad) = one_misconfigured();
    check("obs:mio", &servers, &bad, 5, |n| {
        let client = redlease_mio::Client::with_config(config).unwrap();
        for _ in 0..n {
            let guard = client.lock_with(LockOptions::new("obs:mio", Duration::from_secs(10))).unwrap();
            guard.release().unwrap();
        }
        client.run_for(Duration::from_millis(300)).unwrap();
        series();
        client.close();
    });
}

/// A node whose ACL allows no pub/sub channel (Redis 7's default for a new ACL user) cannot
/// announce releases: its waiters poll it. The health view says so with the server's reason,
/// one INFO line says so once, releases still work there (the script's `PUBLISH` is a
/// `pcall`), and a waiter still gets the lock.
#[test]
fn a_node_refusing_wake_ups_is_polled_and_says_why() {
    capture();
    let servers = Servers::start(3);
    let mut admin = servers.node(0).conn().unwrap();
    admin.ok(&["ACL", "SETUSER", "nopush", "on", ">pw", "~*", "resetchannels", "+@all"]).unwrap();
    let urls: Vec<String> = servers
        .addrs()
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 0 { format!("redis://nopush:pw@{a}") } else { format!("redis://{a}") })
        .collect();
    let polled = servers.addrs()[0].to_string();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let config = Config::from_urls(&urls).unwrap().require_all(true);
        let client = redlease_tokio::Client::with_config(config).await.unwrap();
        let opts = || LockOptions::new("obs:polled", Duration::from_secs(10));
        let held = client.lock_with(opts()).await.unwrap();
        // A waiter subscribes to the lock's channel on every node; node 0 refuses.
        let waiter = {
            let client = client.clone();
            tokio::spawn(async move { client.lock_with(opts().wait(Duration::from_secs(10))).await })
        };
        let mut health = client.health().await.unwrap();
        for _ in 0..100 {
            if health.nodes[0].polled_because().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            health = client.health().await.unwrap();
        }
        let reason = health.nodes[0].polled_because().unwrap_or_else(|| panic!("node 0 is polled: {health}"));
        assert!(reason.contains("SUBSCRIBE") && reason.contains("NOPERM"), "{reason}");
        assert!(health.nodes[1].polled_because().is_none() && health.nodes[2].polled_because().is_none());
        assert!(health.to_string().lines().next().unwrap().contains("waiters poll: SUBSCRIBE refused"), "{health}");
        assert!(health.all_ready() && health.fault_tolerance() == 1, "{health}");

        let report = held.release().await.unwrap();
        assert!(report.deleted >= 2 && report.failed == 0, "{report:?}");
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("the waiter is not stuck");
        got.unwrap().unwrap().release().await.unwrap();
        client.close().await;
    });
    // Node 0 deleted the keys although its `PUBLISH` was refused.
    assert!(eventually(Duration::from_secs(2), || servers.lock_keys().is_empty()), "{:?}", servers.lock_keys());
    let lines = events(Level::INFO, "waiters poll this node");
    let ours: Vec<_> = lines.iter().filter(|e| e.fields.get("addr").is_some_and(|a| a.contains(&polled))).collect();
    assert_eq!(ours.len(), 1, "one line for the change, not one per lock: {lines:?}");
    assert!(ours[0].fields.get("reason").is_some_and(|r| r.contains("NOPERM")), "{ours:?}");
}

/// The spans of `resource`'s operations, by name, each with its parent's name: every one a
/// child of the caller's `http_request` span (or of the `with_lock` span around it), and the
/// outcome events inside the operation's span.
fn check_parents(resource: &str) {
    let parents = |name: &str| {
        let mut p: Vec<_> = spans(name, resource).into_iter().map(|s| s.parent.unwrap_or("(root)")).collect();
        p.sort_unstable();
        p
    };
    assert_eq!(parents("redlease.acquire"), ["http_request", "redlease.with_lock"]);
    assert_eq!(parents("redlease.with_lock"), ["http_request"]);
    let named = |s: &SpanRecord| s.fields.get("client").is_some_and(|c| c.starts_with("client-"));
    assert!(spans("redlease.acquire", resource).iter().all(named), "each span names its client");
    assert_eq!(parents("redlease.extend"), ["http_request"]);
    assert_eq!(parents("redlease.release"), ["http_request", "redlease.with_lock"]);
    let inside = |text: &str, span: &'static str| {
        let captured = capture().0.lock().unwrap();
        let in_span = |e: &&EventRecord| e.span.as_ref().is_some_and(|(n, r)| *n == span && r == resource);
        let said = |e: &&EventRecord| e.fields.get("message").is_some_and(|m| m.starts_with(text));
        captured.events.iter().filter(in_span).filter(said).count()
    };
    assert_eq!(inside("lock acquired", "redlease.acquire"), 2);
    assert_eq!(inside("lock extended", "redlease.extend"), 1);
    assert_eq!(inside("lock released", "redlease.release"), 2);
}

#[test]
fn tokio_operation_spans_are_children_of_the_callers_span() {
    capture();
    let servers = Servers::start(3);
    let config = Config::from_urls(servers.urls()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let client = redlease_tokio::Client::with_config(config).await.unwrap();
        let request = async {
            let opts = || LockOptions::new("obs:parent:tokio", Duration::from_secs(10));
            let mut guard = client.lock_with(opts()).await.unwrap();
            guard.extend(Duration::from_secs(10)).await.unwrap();
            guard.release().await.unwrap();
            client.with_lock(opts(), |_| async {}).await.unwrap();
        };
        request.instrument(tracing::info_span!("http_request")).await;
        client.close().await;
    });
    check_parents("obs:parent:tokio");
}

#[test]
fn blocking_mio_operation_spans_are_children_of_the_callers_span() {
    capture();
    let servers = Servers::start(3);
    let client = redlease_mio::Client::with_config(Config::from_urls(servers.urls()).unwrap()).unwrap();
    tracing::info_span!("http_request").in_scope(|| {
        let opts = || LockOptions::new("obs:parent:mio", Duration::from_secs(10));
        let mut guard = client.lock_with(opts()).unwrap();
        guard.extend(Duration::from_secs(10)).unwrap();
        guard.release().unwrap();
        client.with_lock(opts(), |_| ()).unwrap();
    });
    client.close();
    check_parents("obs:parent:mio");
}

/// An `io::Write` into a shared buffer, for a `fmt` subscriber.
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a `fmt` subscriber prints while `run` runs on this thread: a plain
/// `tracing_subscriber::fmt()` (level INFO), or with the filter the docs show,
/// `info,redlease=debug`.
fn fmt_output(redlease_debug: bool, run: impl FnOnce()) -> String {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let buf = Arc::clone(&buf);
        move || Buf(Arc::clone(&buf))
    };
    if redlease_debug {
        let filter: Targets = "info,redlease=debug".parse().unwrap();
        let subscriber = Registry::default().with(tracing_subscriber::fmt::layer().with_writer(writer)).with(filter);
        tracing::subscriber::with_default(subscriber, run);
    } else {
        tracing::subscriber::with_default(tracing_subscriber::fmt().with_writer(writer).finish(), run);
    }
    String::from_utf8(buf.lock().unwrap().clone()).unwrap()
}

/// A plain `fmt` subscriber shows a lost lock (WARN) and nothing of healthy locking; with
/// `info,redlease=debug` it shows every outcome with each node's vote, inside the caller's span.
#[test]
fn a_fmt_subscriber_shows_lock_activity() {
    let servers = Servers::start(3);
    let urls = servers.urls();
    // A current-thread runtime: the driver runs on this thread, where the subscriber is.
    let cycle = |resource: &'static str, lose: bool| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let client = redlease_tokio::Client::with_config(Config::from_urls(&urls).unwrap()).await.unwrap();
            let request = async {
                let mut guard = client.lock(resource, Duration::from_secs(10)).await.unwrap();
                // Refused: held (by this client's guard).
                client.try_lock(resource, Duration::from_secs(10)).await.map(drop).unwrap_err();
                if lose {
                    for (i, key, _) in servers.lock_keys() {
                        servers.node(i).conn().unwrap().del(&key).unwrap();
                    }
                    guard.extend(Duration::from_secs(10)).await.unwrap_err();
                }
                let _ = guard.release().await;
            };
            request.instrument(tracing::info_span!("http_request")).await;
            client.close().await;
        });
    };
    let plain = fmt_output(false, || cycle("obs:fmt:lost", true));
    assert!(plain.contains("WARN") && plain.contains("lock lost"), "{plain}");
    assert!(!plain.contains("lock acquired") && !plain.contains("lock released"), "{plain}");
    let debug = fmt_output(true, || cycle("obs:fmt:debug", false));
    let acquired = debug.lines().find(|l| l.contains("lock acquired")).unwrap_or_else(|| panic!("{debug}"));
    assert!(acquired.contains("http_request:redlease.acquire{"), "{acquired}");
    assert!(acquired.contains("votes=\"#0 ") && acquired.matches(" granted").count() >= 2, "{acquired}");
    assert!(debug.lines().any(|l| l.contains("redlease.release{") && l.contains("lock released")), "{debug}");
    assert!(debug.lines().any(|l| l.contains("lock not acquired")), "{debug}");
    // Each field once per line (the outcome is the span's), and durations to the microsecond.
    for line in debug.lines().filter(|l| l.contains("redlease.")) {
        assert!(line.matches("outcome=").count() <= 1, "{line}");
        for value in line.split("duration_ms=").skip(1) {
            let number = value.split(|c: char| c != '.' && !c.is_ascii_digit()).next().unwrap();
            let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
            assert!(!number.is_empty() && decimals <= 3, "{line}");
        }
    }
}

/// A recorder that keeps each counter's and gauge's current value (the debugging recorder
/// drains gauges on every snapshot, so a gauge set to 0 could not be told from a drained one).
#[derive(Default)]
struct Values(Mutex<HashMap<SeriesId, Arc<AtomicU64>>>);

impl Values {
    fn cell(&self, key: &metrics::Key) -> Arc<AtomicU64> {
        let labels = key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
        Arc::clone(self.0.lock().unwrap().entry((key.name().to_owned(), labels)).or_default())
    }

    /// The value of gauge `name` for `client` (and, with `node`, the node at that address).
    fn gauge(&self, name: &str, client: &str, node: Option<&str>) -> Option<f64> {
        let label = |ls: &[(String, String)], k: &str| ls.iter().find(|(lk, _)| lk == k).map(|(_, v)| v.clone());
        let values = self.0.lock().unwrap();
        let mut found = values.iter().filter(|((n, ls), _)| {
            n == name
                && label(ls, "client").as_deref() == Some(client)
                && node.is_none_or(|a| label(ls, "node").is_some_and(|v| v.contains(a)))
        });
        let value = found.next().map(|(_, v)| f64::from_bits(v.load(Ordering::SeqCst)));
        assert!(found.next().is_none(), "one series of {name} for {client} {node:?}");
        value
    }

    /// Every `client` label seen on a series of `name`.
    fn clients(&self, name: &str) -> Vec<String> {
        let values = self.0.lock().unwrap();
        let mut clients: Vec<String> = values
            .keys()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, ls)| ls.iter().filter(|(k, _)| k == "client").map(|(_, v)| v.clone()))
            .collect();
        clients.sort_unstable();
        clients.dedup();
        clients
    }
}

impl metrics::Recorder for Values {
    fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}

    fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}

    fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.cell(key))
    }

    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.cell(key))
    }

    fn register_histogram(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// Two clients in one process, a tokio one named `obs-a` and a blocking mio one with the
/// default name: every series carries its client's name, and a closed client's gauges read 0
/// while the other's stay live. (A recorder of this thread only: both clients run here.)
#[test]
fn two_clients_keep_their_series_apart_and_a_closed_one_reads_zero() {
    let servers = Servers::start(3);
    let urls = servers.urls();
    let addrs: Vec<String> = servers.addrs().iter().map(ToString::to_string).collect();
    let values = Values::default();
    metrics::with_local_recorder(&values, || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let config = Config::from_urls(&urls).unwrap().name("obs-a");
            let a = redlease_tokio::Client::with_config(config).await.unwrap();
            let b = redlease_mio::Client::with_config(Config::from_urls(&urls).unwrap()).unwrap();
            // Both returned once a quorum was ready; every node's gauges are checked below. (The
            // blocking client's links move on while its loop is driven.)
            redlease_tests::all_ready(|| a.health(), tokio::time::sleep).await;
            let b_health = || std::future::ready(b.run_for(Duration::from_millis(10)).map(|()| b.health()));
            redlease_tests::all_ready(b_health, |_| std::future::ready(())).await;
            a.lock("obs:two:a", Duration::from_secs(10)).await.unwrap().release().await.unwrap();
            b.lock("obs:two:b", Duration::from_secs(10)).unwrap().release().unwrap();
            let clients = values.clients("redlease_acquisitions_total");
            assert_eq!(clients.len(), 2, "{clients:?}");
            assert_eq!(clients[1], "obs-a");
            let b_name = clients[0].clone();
            assert!(b_name.starts_with("client-"), "{b_name}");
            for client in [&b_name, "obs-a"] {
                for name in ["redlease_node_up", "redlease_fault_tolerance", "redlease_node_rtt_seconds"] {
                    assert_eq!(values.clients(name), clients, "{name}");
                }
                for addr in &addrs {
                    assert_eq!(values.gauge("redlease_node_up", client, Some(addr)), Some(1.0), "{client} {addr}");
                }
                assert_eq!(values.gauge("redlease_fault_tolerance", client, None), Some(1.0), "{client}");
            }

            a.close().await;
            for addr in &addrs {
                assert_eq!(values.gauge("redlease_node_up", "obs-a", Some(addr)), Some(0.0), "closed: {addr}");
                assert_eq!(values.gauge("redlease_node_rtt_seconds", "obs-a", Some(addr)), Some(0.0));
                assert_eq!(values.gauge("redlease_node_up", &b_name, Some(addr)), Some(1.0), "open: {addr}");
            }
            assert_eq!(values.gauge("redlease_fault_tolerance", "obs-a", None), Some(0.0));
            assert_eq!(values.gauge("redlease_fault_tolerance", &b_name, None), Some(1.0));
            b.close();
            assert_eq!(values.gauge("redlease_fault_tolerance", &b_name, None), Some(0.0));
            assert_eq!(values.gauge("redlease_node_up", &b_name, Some(&addrs[0])), Some(0.0));
        });
    });
}
