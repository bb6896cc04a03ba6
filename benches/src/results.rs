//! What one run measured: every subject's figures per scenario, and the lookups the report
//! makes in them.

use std::time::{Duration, SystemTime};

use crate::plan::{Plan, Scenario};
use crate::subject::{Contention, Handoff, Role, Sequential, StallLevel, Style, Throughput};

/// One measurement's outcome.
#[derive(Clone, Debug)]
pub struct Entry<T> {
    /// The subject's name.
    pub subject: String,
    /// Lockers (throughput) or nodes (scaling); 0 elsewhere.
    pub point: usize,
    /// The figures, or why there are none.
    pub result: Result<T, String>,
}

/// A subject as the report describes it.
#[derive(Clone, Debug)]
pub struct SubjectInfo {
    /// Short name.
    pub name: String,
    /// One line on what it is.
    pub about: String,
    /// Adapter, floor or peer.
    pub role: Role,
    /// Async or blocking.
    pub style: Style,
    /// The scenarios it takes part in.
    pub scenarios: Vec<Scenario>,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Results {
    /// What was planned.
    pub plan: Plan,
    /// The subjects that ran, in table order.
    pub subjects: Vec<SubjectInfo>,
    /// The scenarios that ran.
    pub scenarios: Vec<Scenario>,
    /// Sequential cycles on `plan.nodes` nodes.
    pub sequential: Vec<Entry<Sequential>>,
    /// Throughput per locker count.
    pub throughput: Vec<Entry<Throughput>>,
    /// Sequential cycles per node count.
    pub scaling: Vec<Entry<Sequential>>,
    /// Acquire latency per number of paused nodes.
    pub stalled: Vec<Entry<Vec<StallLevel>>>,
    /// One key, many lockers.
    pub contention: Vec<Entry<Contention>>,
    /// Lock handoff per contender count.
    pub handoff: Vec<Entry<Handoff>>,
    /// When the run started.
    pub started: SystemTime,
    /// How long it took.
    pub elapsed: Duration,
}

impl Results {
    /// Measurements that produced no figures.
    pub fn failures(&self) -> Vec<String> {
        fn collect<T>(out: &mut Vec<String>, what: &str, list: &[Entry<T>]) {
            for e in list {
                if let Err(why) = &e.result {
                    out.push(format!("{} {what} {}: {why}", e.subject, e.point));
                }
            }
        }
        let mut out = Vec::new();
        collect(&mut out, "sequential", &self.sequential);
        collect(&mut out, "throughput", &self.throughput);
        collect(&mut out, "scaling", &self.scaling);
        collect(&mut out, "stalled", &self.stalled);
        collect(&mut out, "contention", &self.contention);
        collect(&mut out, "handoff", &self.handoff);
        out
    }

    /// The subject called `name`.
    pub fn subject(&self, name: &str) -> Option<&SubjectInfo> {
        self.subjects.iter().find(|s| s.name == name)
    }
}

/// The figures of `subject` at `point` in `list`, if it measured any.
pub fn find<'a, T>(list: &'a [Entry<T>], subject: &str, point: usize) -> Option<&'a T> {
    list.iter().find(|e| e.subject == subject && e.point == point).and_then(|e| e.result.as_ref().ok())
}
