#!/usr/bin/env bash
# Print how many integration tests run on each database.
#
# Every test of tests/all that touches the store runs once per database in
# the same `cargo test` run, named for it (`...::sqlite`, `...::postgres`;
# see tests/all/main.rs); tests that need no database carry neither name.
# Lists the tests (`-- --list`) without running them.
set -euo pipefail
cd "$(dirname "$0")/.."
list=$(cargo test --workspace --test all --quiet -- --list 2>/dev/null | grep ': test$')
total=$(grep -c . <<<"$list")
sqlite=$(grep -c '::sqlite' <<<"$list" || true)
postgres=$(grep -c '::postgres' <<<"$list" || true)
echo "integration tests: $total in all, $sqlite on SQLite, $postgres on PostgreSQL, $((total - sqlite - postgres)) without a database"
