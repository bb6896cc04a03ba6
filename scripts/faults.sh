#!/usr/bin/env bash
# The real-fault suite: Redlock on five redis-server nodes, each in a network namespace it
# creates, through partitions (iptables), node pauses, kill -9 and restarts, clock jumps and a
# paused lock holder, with a store that checks fencing tokens. The mutex phases (1 .. 7), then a
# semaphore's (s2 s4 s5 s7: at most its 3 permits at once, one holder per permit, a store that
# keeps the highest fence per permit) and a reader-writer lock's (rw2 rw4 rw5 rw7: no writer
# beside another holder, a store that checks the writer epoch), then a leader election's (e2 e7:
# never two leaders at once, a paused leader's late write refused by the epoch). Prints a table of every phase,
# with what each must show, and exits non-zero when a phase did not show it (exit 77: this
# machine cannot run it; the message says why). Needs root. `--short`: a few seconds per phase (scripts/test.sh runs
# that); `--phase ID` (repeatable): only those phases; `--keep-logs`: keep the workers' logs.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "scripts/faults.sh needs root: it creates network namespaces and iptables rules. Run it as root (sudo scripts/faults.sh)." >&2
  exit 77
fi
scripts/ensure-redis.sh
scripts/ensure-faults.sh || exit 77
export PATH="$PATH:/usr/sbin:/sbin"
# The same selection as the test suite's build (scripts/test.sh), whose features it then
# shares: after it, little or nothing is built again.
cargo build --quiet --workspace --all-targets
exec "${CARGO_TARGET_DIR:-target}/debug/redlease-faults" "$@"
