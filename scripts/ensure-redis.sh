#!/usr/bin/env bash
# Make sure redis-server is on PATH: install it with apt-get when running as root on Debian/Ubuntu,
# otherwise stop with a message saying exactly what to install.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server not found: installing it with apt-get (Debian package redis-server)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq redis-server >&2
  # The package may start a system-wide server on 6379; the project never uses it.
  if command -v redis-server >/dev/null 2>&1; then
    exit 0
  fi
fi
echo "redis-server not found: install it with 'sudo apt-get install redis-server' (Debian/Ubuntu) and run again." >&2
exit 1
