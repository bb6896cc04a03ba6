//! CPU cost of the sans-IO core: one lock+unlock cycle through the engine, replies supplied
//! from memory, for N ∈ {1, 3, 5, 7, 9} nodes.
//!
//! A cycle is what a driver does for one `lock` and one `unlock`: `acquire`, flush every
//! node (`poll_transmit`/`advance_transmit`), re-arm the timer (`poll_timeout`), feed each
//! node's reply (`handle_data`: `+OK` to the acquire's `SET NX PX`, `:1` to the release
//! script), take the `Acquired` event; then the same for `release` and `Released`. No
//! sockets and no clock reads: simulated time advances 100 µs per step, as it would between a
//! request and its reply.
//!
//! Before criterion's timing runs, a separate pass counts heap allocations per cycle with a
//! counting global allocator and prints a table (ns/cycle from a plain timed loop, allocations
//! and bytes per cycle). Target at N = 5: at most 1 µs and 2 allocations per cycle, with a
//! flat per-node cost as N grows.
//!
//! ```text
//! cargo bench -p redlease-benches --bench core_cycle
//! ```

// The counting allocator below has to implement `GlobalAlloc`, an unsafe trait; it only
// forwards to `System` and bumps two counters. Unsafe code stays denied everywhere else.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use redlease_core::{Config, Engine, Event, LockOptions, NodeConfig, NodeId};

/// Counts allocations (and reallocations, which allocate) and the bytes asked for.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is exactly `System`'s; the counters have no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(new_size as u64, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const NS: [usize; 5] = [1, 3, 5, 7, 9];
const RESOURCE: &str = "orders:42";
/// A realistic token: 40 hex characters.
const TOKEN: &[u8] = b"3f6c2a9e41b87d05c9e2f1a6b3d8047e5a1c9f20";

/// An engine over `n` nodes, every link connected and past its handshake.
struct Cycle {
    engine: Engine,
    n: usize,
    now: Instant,
    /// The lock's options, built once (as a caller that locks the same resource would).
    options: LockOptions,
}

impl Cycle {
    fn new(n: usize) -> Self {
        let nodes = (0..n).map(|i| NodeConfig::new("127.0.0.1", 7000 + i as u16)).collect();
        let mut config = Config::new(nodes);
        config.client_name = None;
        let mut engine = Engine::new(config).expect("valid config");
        let now = Instant::now();
        let digests = redlease_core::script_digests();
        for i in 0..n {
            let node = NodeId(i as u16);
            engine.handle_connected(now, node);
            flush(&mut engine, node);
            // `HELLO 3` (wake-ups on release are on by default), then the five script loads.
            engine.handle_data(now, node, b"%1\r\n$5\r\nproto\r\n:3\r\n");
            for sha in digests {
                engine.handle_data(now, node, format!("${}\r\n{sha}\r\n", sha.len()).as_bytes());
            }
        }
        // Each node's `LinkUp`.
        while engine.poll_event().is_some() {}
        Cycle { engine, n, now, options: LockOptions::new(RESOURCE, Duration::from_secs(10)) }
    }

    /// One lock and one unlock, as a driver would run them.
    fn run(&mut self) {
        const STEP: Duration = Duration::from_micros(100);
        let e = &mut self.engine;
        let lock = e.acquire(self.now, &self.options, TOKEN).expect("valid request");
        for i in 0..self.n {
            flush(e, NodeId(i as u16));
        }
        black_box(e.poll_timeout());
        self.now += STEP;
        for i in 0..self.n {
            e.handle_data(self.now, NodeId(i as u16), b"+OK\r\n");
        }
        match e.poll_event() {
            Some(Event::Acquired { lock: l, .. }) if l == lock => {}
            other => panic!("expected Acquired, got {other:?}"),
        }
        black_box(e.poll_timeout());
        self.now += STEP;
        e.release(self.now, lock).expect("held");
        for i in 0..self.n {
            flush(e, NodeId(i as u16));
        }
        black_box(e.poll_timeout());
        self.now += STEP;
        for i in 0..self.n {
            e.handle_data(self.now, NodeId(i as u16), b":1\r\n");
        }
        black_box(e.poll_timeout());
        self.now += STEP;
        match e.poll_event() {
            Some(Event::Released { lock: l, report }) if l == lock => {
                black_box(report);
            }
            other => panic!("expected Released, got {other:?}"),
        }
    }
}

/// Write everything the engine has for `node` (the "socket" takes it all).
fn flush(e: &mut Engine, node: NodeId) {
    while let Some(bytes) = e.poll_transmit(node) {
        let len = black_box(bytes).len();
        e.advance_transmit(node, len);
    }
}

/// The separate measurement pass: allocations and bytes per cycle, and a plain timing.
fn table() {
    const WARMUP: u64 = 2_000;
    const CYCLES: u64 = 200_000;
    println!();
    println!("core_cycle: one lock+unlock through the engine, replies from memory");
    println!(
        "{:>3} | {:>10} | {:>14} | {:>12} | {:>13}",
        "N", "ns/cycle", "ns/cycle/node", "allocs/cycle", "bytes/cycle"
    );
    println!("{:-<3}-+-{:-<10}-+-{:-<14}-+-{:-<12}-+-{:-<13}", "", "", "", "", "");
    for n in NS {
        let mut c = Cycle::new(n);
        for _ in 0..WARMUP {
            c.run();
        }
        let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
        for _ in 0..CYCLES {
            c.run();
        }
        let allocs = (ALLOCS.load(Relaxed) - a0) as f64 / CYCLES as f64;
        let bytes = (BYTES.load(Relaxed) - b0) as f64 / CYCLES as f64;
        // Best of five timed batches: the machine is shared and noisy.
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..CYCLES / 5 {
                c.run();
            }
            best = best.min(t.elapsed().as_nanos() as f64 / (CYCLES / 5) as f64);
        }
        println!("{n:>3} | {best:>10.0} | {:>14.0} | {allocs:>12.2} | {bytes:>13.1}", best / n as f64);
    }
    println!();
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("core_cycle");
    for n in NS {
        let mut cycle = Cycle::new(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| b.iter(|| cycle.run()));
    }
    group.finish();
}

fn main() {
    table();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
