#!/usr/bin/env bash
# The whole test suite: unit and simulation tests of the core, the conformance suite of every
# adapter against real redis-server processes, the CLI tests, doc tests, and the benchmark
# harness in quick mode (it must complete; no speed is asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc
# The published crates build with the declared rust-version (skipped, loudly, where rustup
# cannot install that toolchain).
scripts/msrv.sh
