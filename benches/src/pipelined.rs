//! floor-pipelined, the ceiling of the lockers scenario: one socket per node shared by every
//! locker, lockstep. Each phase writes every locker's command to a node in one write and
//! reads all of that node's replies: what a client that batched perfectly would cost.

use std::time::Instant;

use crate::floor::{MioSocks, connect};
use crate::plan::{Plan, Scenario, Shape};
use crate::subject::{Info, Load, Subject};
use crate::usage::Usage;

/// The pipelined ceiling.
#[derive(Debug)]
pub struct Pipelined;

impl Subject for Pipelined {
    fn info(&self) -> &Info {
        const INFO: Info =
            Info { name: "floor-pipelined", partner: "", scenarios: &[Scenario::Lockers], shape: Shape::Mutex };
        &INFO
    }

    fn lockers(&self, urls: &[String], plan: &Plan, lockers: usize) -> Result<Load, String> {
        let (streams, mut nodes) = connect(urls)?;
        let mut socks = MioSocks::new(streams)?;
        let keys: Vec<String> = (0..lockers).map(|i| format!("bench:own:{i}")).collect();
        let mut tokens = vec![[0u8; 40]; lockers];
        let (q, all_in) = (nodes.quorum(), |n: &crate::floor::Nodes| n.inbox.iter().all(|b| b.votes.len() >= lockers));
        let mut granted = vec![false; lockers];
        let (opens, mut window, mut load) = (Instant::now() + plan.load.warmup, None, Load::default());
        loop {
            let t0 = Instant::now();
            nodes.out.clear();
            for (key, token) in keys.iter().zip(&mut tokens) {
                *token = nodes.token();
                nodes.set(key.as_bytes(), token);
            }
            socks.round(&mut nodes, all_in)?;
            for (j, g) in granted.iter_mut().enumerate() {
                *g = nodes.inbox.iter().filter(|b| b.votes[j]).count() >= q;
            }
            nodes.out.clear();
            for (key, token) in keys.iter().zip(&tokens) {
                nodes.release(key.as_bytes(), token);
            }
            socks.round(&mut nodes, all_in)?;
            let (took, now) = (t0.elapsed(), Instant::now());
            if window.is_some() {
                for (j, granted) in granted.iter().enumerate() {
                    let released = nodes.inbox.iter().filter(|b| b.votes[j]).count() >= q;
                    load.count(if *granted && released { Ok(took) } else { Err(format!("locker {j} failed")) });
                }
            }
            match window {
                None if now >= opens => window = Some((now, Usage::now())),
                Some((at, start)) if now >= at + plan.load.length => {
                    return Ok(Load { elapsed: now - at, usage: Usage::since(start), ..load });
                }
                _ => {}
            }
        }
    }
}
