#!/usr/bin/env bash
# Make sure the fault suite's tools are on PATH: ip (iproute2), iptables and gcc (it compiles
# its clock shim). Installs what is missing with apt-get when running as root on
# Debian/Ubuntu; otherwise stops with a message saying exactly what to install.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
if [ ${#missing[@]} = 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "the fault suite needs ${missing[*]}: installing with apt-get..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  if apt-get install -y -qq "${missing[@]}" >&2 \
    && command -v ip >/dev/null 2>&1 && command -v iptables >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1; then
    exit 0
  fi
fi
echo "the fault suite needs ${missing[*]}: install with 'sudo apt-get install ${missing[*]}' (Debian/Ubuntu) and run again." >&2
exit 1
