#!/usr/bin/env bash
# The main job: `redlease demo` — locks over 5 local nodes that it starts and stops itself.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
cargo run --release --quiet -p redlease-cli -- demo "$@"
