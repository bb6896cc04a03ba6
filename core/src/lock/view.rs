//! What the caller sees of a lock: its snapshot, and its line in the health view.

use super::{Phase, Record};
use crate::event::{LockId, LockInfo, LockState};
use crate::health::{LockHealth, LockShape};

impl Record {
    /// The lock in the health view; `None` when free.
    pub(crate) fn health(&self, lock: LockId) -> Option<LockHealth> {
        let info = self.info()?;
        let (resources, shape) = if self.permits.on() {
            let shape = LockShape::Semaphore {
                limit: u32::from(self.permits.limit),
                permits: u32::from(self.permits.want),
                held: self.permits.held().to_vec(),
            };
            (vec![self.permits.name.clone()], shape)
        } else {
            let keys = self.keys.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
            (keys, if self.shared { LockShape::Shared } else { LockShape::Exclusive })
        };
        let token = String::from_utf8_lossy(&self.token);
        Some(LockHealth {
            lock,
            resources,
            shape,
            state: info.state,
            valid_until: info.valid_until,
            fence: info.fence,
            lost: info.lost,
            token_prefix: token.chars().take(8).collect(),
        })
    }

    /// A snapshot for [`Engine::lock_info`](crate::Engine::lock_info); `None` when free.
    pub(crate) fn info(&self) -> Option<LockInfo> {
        let state = match &self.phase {
            Phase::Free | Phase::Draining { .. } => return None,
            Phase::Acquiring { .. } | Phase::Fencing { .. } | Phase::RetryWait { .. } => LockState::Acquiring,
            Phase::Held(_) => LockState::Held,
            Phase::Extending { .. } => LockState::Extending,
            Phase::Releasing { .. } => LockState::Releasing,
        };
        let hold = self.hold();
        Some(LockInfo {
            state,
            valid_until: hold.map(|h| h.valid_until),
            fence: hold.and_then(|h| h.fence),
            lost: hold.is_some_and(|h| h.lost),
            attempts: self.tries.made,
        })
    }
}
