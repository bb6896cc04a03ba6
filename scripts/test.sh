#!/usr/bin/env bash
# The whole test suite: unit and simulation tests of the core, the conformance suite of every
# adapter against real redis-server processes, the CLI tests, doc tests, the benchmark
# harness in quick mode (it must complete; no speed is asserted), and the real-fault suite in
# its short version where the machine allows it (root: network namespaces, iptables).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc
# The published crates build with the declared rust-version (skipped, loudly, where rustup
# cannot install that toolchain).
scripts/msrv.sh
status=0
scripts/faults.sh --short || status=$?
if [ "$status" = 77 ]; then
  echo "skipped the fault suite (scripts/faults.sh --short): this machine cannot run it, for the reason above" >&2
elif [ "$status" != 0 ]; then
  exit "$status"
fi
