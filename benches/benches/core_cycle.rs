//! The engine's CPU cost: one lock+unlock cycle through `redlease_core::Engine`, replies
//! from memory, for N ∈ {1, 3, 5, 7, 9} nodes.
//!
//! A cycle is what a driver does for one lock and one unlock: `acquire`, flush every node,
//! re-arm the timer, feed each node's reply (`+OK`, then `:1` to the release), take the
//! event; no sockets and no clock reads (simulated time advances 100 µs a step). With a
//! counting global allocator, it prints the best of five timed batches in ns, and the
//! allocations and bytes per cycle (`cargo bench -p redlease-benches --bench core_cycle`).

// The counting allocator implements `GlobalAlloc`, an unsafe trait: it forwards to `System`
// and bumps two counters. Unsafe code stays denied everywhere else.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use redlease_core::{Config, Engine, Event, LockOptions, NodeConfig, NodeId};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: both methods forward to `System` with the caller's arguments unchanged, so the
// contract is `System`'s (the default `realloc` and `alloc_zeroed` go through `alloc`).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as u64, Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const NS: [usize; 5] = [1, 3, 5, 7, 9];
/// A real token's length: 40 hex characters.
const TOKEN: &[u8] = b"3f6c2a9e41b87d05c9e2f1a6b3d8047e5a1c9f20";

/// An engine over `n` nodes, every link up and past its handshake.
struct Cycle {
    engine: Engine,
    n: u16,
    now: Instant,
    options: LockOptions,
}

impl Cycle {
    fn new(n: u16) -> Self {
        let mut config = Config::new((0..n).map(|i| NodeConfig::new("127.0.0.1", 7000 + i)).collect());
        config.client_name = None;
        let mut engine = Engine::new(config).expect("valid config");
        let now = Instant::now();
        for node in (0..n).map(NodeId) {
            engine.handle_connected(now, node);
            flush(&mut engine, node);
            // The lock format check, `HELLO 3`, then the script loads.
            engine.handle_data(now, node, b"$1\r\n2\r\n%1\r\n$5\r\nproto\r\n:3\r\n");
            for sha in redlease_core::script_digests() {
                engine.handle_data(now, node, format!("${}\r\n{sha}\r\n", sha.len()).as_bytes());
            }
        }
        while engine.poll_event().is_some() {}
        Cycle { engine, n, now, options: LockOptions::new("orders:42", Duration::from_secs(10)) }
    }

    /// One lock and one unlock, as a driver runs them.
    fn run(&mut self) {
        let (e, nodes) = (&mut self.engine, (0..self.n).map(NodeId));
        let lock = e.acquire(self.now, &self.options, TOKEN).expect("valid request");
        for (step, reply) in [(0, &b"+OK\r\n"[..]), (1, b":1\r\n")] {
            if step == 1 {
                e.release(self.now, lock).expect("held");
            }
            nodes.clone().for_each(|node| flush(e, node));
            black_box(e.poll_timeout());
            self.now += Duration::from_micros(100);
            nodes.clone().for_each(|node| e.handle_data(self.now, node, reply));
            black_box(e.poll_timeout());
            match e.poll_event() {
                Some(Event::Acquired { lock: l, .. } | Event::Released { lock: l, .. }) if l == lock => {}
                other => panic!("step {step}: unexpected {other:?}"),
            }
            self.now += Duration::from_micros(100);
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

/// The best of five timed batches (the machine is shared and noisy), and allocations and bytes
/// per cycle over them; fewer cycles when run as a test.
fn table(cycles: u64) {
    println!("\ncore_cycle: one lock+unlock through the engine, replies from memory\n");
    println!("|  N | ns/cycle | ns/cycle/node | allocs/cycle | bytes/cycle |\n|---:|---:|---:|---:|---:|");
    for n in NS {
        let mut c = Cycle::new(n as u16);
        (0..cycles / 100).for_each(|_| c.run());
        let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
        let best = (0..5)
            .map(|_| {
                let t = Instant::now();
                (0..cycles / 5).for_each(|_| c.run());
                t.elapsed().as_nanos() as f64 / (cycles / 5) as f64
            })
            .fold(f64::INFINITY, f64::min);
        let per = |counter: &AtomicU64, start: u64| (counter.load(Relaxed) - start) as f64 / cycles as f64;
        let (allocs, bytes) = (per(&ALLOCS, a0), per(&BYTES, b0));
        println!("| {n:>2} | {best:>8.0} | {:>13.0} | {allocs:>12.2} | {bytes:>11.1} |", best / n as f64);
    }
    println!();
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    table(if bench { 200_000 } else { 1_000 });
}
