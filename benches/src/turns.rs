//! Two subjects on one cluster taking turns, a block of sequential cycles each (the paired
//! scenario; the bookkeeping of a turn is in [`crate::seq`]).
//!
//! Measured one after the other, two subjects' p50s differ by the machine's drift between
//! their windows as well as by what they cost: on this shared 2-core host the floor's own code
//! on another runtime reads 0.93–1.07 × the floor from one run to the next. Taking turns in
//! blocks of a few milliseconds puts both under the same spells of noise, so that the ratio
//! of their p50s measures the subjects rather than the moment. Each block's first cycle is run
//! but not recorded: it pays for waking a client that sat idle through the other's block.

use std::sync::{Arc, Condvar, Mutex};

/// Whose turn it is, and who has left.
#[derive(Debug, Default)]
struct State {
    turn: usize,
    gone: [bool; 2],
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// One side of a pair taking turns of `block` cycles: side 0 goes first.
#[derive(Clone, Debug)]
pub struct Turn {
    shared: Arc<Shared>,
    me: usize,
    block: usize,
}

impl Turn {
    /// The two sides of a new pair taking turns of `block` cycles (at least 2: each turn's
    /// first cycle is not recorded).
    pub fn pair(block: usize) -> (Turn, Turn) {
        let (shared, block) = (Arc::new(Shared::default()), block.max(2));
        (Turn { shared: Arc::clone(&shared), me: 0, block }, Turn { shared, me: 1, block })
    }

    /// Which side this is (0 or 1).
    pub fn side(&self) -> usize {
        self.me
    }

    /// Cycles per turn.
    pub fn block(&self) -> usize {
        self.block
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Block until it is this side's turn, or the other side has left.
    pub fn wait(&self) {
        let mut state = self.state();
        while state.turn != self.me && !state.gone[1 - self.me] {
            state = self.shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Hand the turn to the other side.
    pub fn pass(&self) {
        self.state().turn = 1 - self.me;
        self.shared.changed.notify_all();
    }

    /// This side is done (finished or failed): the other side no longer waits for it.
    pub fn leave(&self) {
        let mut state = self.state();
        state.gone[self.me] = true;
        state.turn = 1 - self.me;
        drop(state);
        self.shared.changed.notify_all();
    }
}
