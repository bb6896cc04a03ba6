#!/usr/bin/env bash
# Build every published crate (the libraries and the redlease binary of redlease-cli; not the tests, benchmarks
# or dev-dependencies) with the Rust version the manifests declare as `rust-version`, so the
# declaration cannot silently become false. Uses its own target dir (target/msrv).
#
# The toolchain comes from rustup. Where it cannot be installed (no rustup, no network), the
# check says so on stderr and is skipped, unless REDLEASE_MSRV_REQUIRED=1 makes that an error.
# (clippy's incompatible_msrv lint, part of every clippy run, still flags std APIs newer than
# the declared version.)
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
if [ -z "$msrv" ]; then
  echo "msrv: no rust-version in Cargo.toml" >&2
  exit 1
fi
skip() {
  echo "msrv: SKIPPED: $1" >&2
  if [ "${REDLEASE_MSRV_REQUIRED:-0}" = 1 ]; then exit 1; fi
  exit 0
}
command -v rustup >/dev/null 2>&1 || skip "rustup is not installed, so Rust $msrv cannot be fetched"
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
  echo "msrv: installing Rust $msrv (minimal profile) with rustup..." >&2
  timeout 300 rustup toolchain install "$msrv" --profile minimal >&2 ||
    skip "rustup could not install Rust $msrv here"
fi
packages=(redlease-core redlease-client redlease-tokio redlease-smol redlease-mio redlease redlease-servers redlease-cli)
args=()
for p in "${packages[@]}"; do args+=(-p "$p"); done
echo "msrv: cargo +$msrv check --locked ${args[*]}" >&2
CARGO_TARGET_DIR=target/msrv cargo "+$msrv" check --locked "${args[@]}"
echo "msrv: every published crate builds with Rust $msrv" >&2
