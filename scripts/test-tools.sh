#!/usr/bin/env bash
# Install what the test suite runs beside Paddock and a fresh machine
# lacks: libfaketime's `faketime`, which starts a `paddock serve` whose
# process clock is hours off the database's (`tests/all/clock.rs`).
# Idempotent: a machine that has it installs nothing.
set -euo pipefail
if ! command -v faketime >/dev/null; then
  echo "test-tools: installing faketime (Debian package)" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq faketime >&2
fi
command -v faketime >/dev/null
