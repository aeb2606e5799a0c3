#!/usr/bin/env bash
# Print a PostgreSQL URL for the test suite, with a fresh database in it.
#
# PADDOCK_TEST_DATABASE_URL, when set, names the server (its database part
# is replaced by a fresh `paddock_test_<checkout>`). Otherwise the local server at
# 127.0.0.1:5432 is used, started first if it is installed but stopped.
# No server at all is an error: the PostgreSQL half of the suite must run,
# never silently skip.
set -euo pipefail
base=${PADDOCK_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
server=${base%/*}
admin="$server/postgres"

if ! psql "$admin" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    version=$(ls /etc/postgresql | sort -V | tail -1)
    echo "test-postgres: starting the local PostgreSQL $version cluster" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
    for _ in $(seq 1 30); do
      psql "$admin" -qAtc 'SELECT 1' >/dev/null 2>&1 && break
      sleep 1
    done
  fi
fi
psql "$admin" -qAtc 'SELECT 1' >/dev/null 2>&1 || {
  echo "test-postgres: no PostgreSQL at $server (set PADDOCK_TEST_DATABASE_URL)" >&2
  exit 1
}
# One database per checkout: two checkouts testing at once on one server
# (worktrees, a CI run beside a session) must not drop each other's.
db="paddock_test_$(pwd -P | sha1sum | cut -c1-10)"
psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >&2 2>/dev/null
psql "$admin" -qc "CREATE DATABASE $db" >&2
echo "$server/$db"
