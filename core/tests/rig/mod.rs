//! A scripted driver for one engine: connect nodes, read what it sends, answer by hand.

#![allow(dead_code)] // each test binary uses a different part of the rig

use std::time::{Duration, Instant};

use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;
use redlease_core::{Config, Engine, Event, NodeConfig, NodeId};

/// One engine over `n` nodes on a manual clock.
pub(crate) struct Rig {
    pub(crate) engine: Engine,
    pub(crate) t0: Instant,
    pub(crate) n: usize,
}

impl Rig {
    /// An engine over `n` nodes (no client name, default settings), all connected and past
    /// the handshake at `t0`.
    pub(crate) fn new(n: usize) -> Self {
        Self::with(n, |_| {})
    }

    /// Like [`Rig::new`], with the config adjusted first.
    pub(crate) fn with(n: usize, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut rig = Self::unconnected(n, tweak);
        for i in 0..n {
            rig.connect(i);
        }
        rig
    }

    /// An engine over `n` nodes with the config adjusted, no node connected yet.
    pub(crate) fn unconnected(n: usize, tweak: impl FnOnce(&mut Config)) -> Self {
        let nodes = (0..n).map(|i| NodeConfig::new("127.0.0.1", 7000 + i as u16)).collect();
        let mut config = Config::new(nodes);
        config.client_name = None;
        // Wake-ups change when attempts are sent; the tests that want them turn them on.
        config.wake = false;
        tweak(&mut config);
        Rig { engine: Engine::new(config).expect("valid config"), t0: Instant::now(), n }
    }

    /// `t0 + ms`.
    pub(crate) fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// Connect `node` at `t0` and answer its handshake (SCRIPT LOAD digests) whole.
    pub(crate) fn connect(&mut self, node: usize) {
        self.connect_at(self.t0, node);
    }

    /// Connect `node` at `now` and answer its handshake (SCRIPT LOAD digests) whole.
    pub(crate) fn connect_at(&mut self, now: Instant, node: usize) {
        self.engine.handle_connected(now, NodeId(node as u16));
        let sent = self.sent(node);
        let reply = handshake_reply(&sent, ROLE_ONE_REPLICA);
        self.engine.handle_data(now, NodeId(node as u16), &reply);
        // The handshake's end is an event of its own; a connected rig starts without it.
        match self.engine.poll_event() {
            Some(Event::LinkUp { node: n }) if n == NodeId(node as u16) => {}
            other => panic!("expected LinkUp after the handshake, got {other:?}"),
        }
    }

    /// Everything the engine wants to send to `node`, drained.
    pub(crate) fn sent(&mut self, node: usize) -> Vec<u8> {
        let id = NodeId(node as u16);
        let mut out = Vec::new();
        while let Some(b) = self.engine.poll_transmit(id) {
            out.extend_from_slice(b);
            let len = b.len();
            self.engine.advance_transmit(id, len);
        }
        out
    }

    /// Drain every node's output, parsed into commands (per node).
    pub(crate) fn sent_commands(&mut self) -> Vec<Vec<Vec<Vec<u8>>>> {
        (0..self.n).map(|i| commands(&self.sent(i))).collect()
    }

    /// Feed `bytes` from `node` at `now`.
    pub(crate) fn reply(&mut self, now: Instant, node: usize, bytes: &[u8]) {
        self.engine.handle_data(now, NodeId(node as u16), bytes);
    }

    /// All pending events.
    pub(crate) fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.engine.poll_event()).collect()
    }
}

/// Parse a byte stream of RESP commands (arrays of bulk strings).
pub(crate) fn commands(mut bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (frame, used) = decode(bytes).expect("valid RESP").expect("whole commands");
        bytes = &bytes[used..];
        let OwnedFrame::Array(items) = frame else { panic!("a command is an array") };
        out.push(
            items
                .into_iter()
                .map(|f| if let OwnedFrame::BulkString(b) = f { b } else { panic!("bulk args") })
                .collect(),
        );
    }
    out
}

/// `ROLE`'s answer of a primary with one replica online.
pub(crate) const ROLE_ONE_REPLICA: &[u8] =
    b"*3\r\n$6\r\nmaster\r\n:42\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7100\r\n$2\r\n42\r\n";
/// `ROLE`'s answer of a primary without replicas.
pub(crate) const ROLE_NO_REPLICA: &[u8] = b"*3\r\n$6\r\nmaster\r\n:42\r\n*0\r\n";

/// The answers to the handshake `sent` (SCRIPT LOAD digests, the lock format, `role` to
/// `ROLE`, `+OK` to the rest), whole.
pub(crate) fn handshake_reply(sent: &[u8], role: &[u8]) -> Vec<u8> {
    let mut reply = Vec::new();
    for cmd in commands(sent) {
        match cmd[0].to_ascii_uppercase().as_slice() {
            b"SCRIPT" => {
                let i = redlease_core::script_sources()
                    .iter()
                    .position(|s| s.as_bytes() == cmd[2].as_slice())
                    .expect("a known script");
                let sha = redlease_core::script_digests()[i];
                reply.extend_from_slice(format!("${}\r\n{sha}\r\n", sha.len()).as_bytes());
            }
            b"HELLO" => reply.extend_from_slice(b"%1\r\n$5\r\nproto\r\n:3\r\n"),
            // The lock format check.
            b"EVAL" if cmd[3] == b"redlease:format" => {
                let f = redlease_core::LOCK_FORMAT;
                reply.extend_from_slice(format!("${}\r\n{f}\r\n", f.len()).as_bytes());
            }
            b"ROLE" => reply.extend_from_slice(role),
            _ => reply.extend_from_slice(b"+OK\r\n"),
        }
    }
    reply
}
