#!/usr/bin/env bash
# Takeover latency after a SIGKILL, on PostgreSQL, with real processes:
# two `paddock serve` (A and B) on a fresh database; each round, a trigger
# of the `burn` guest (it computes until stopped) is claimed by A, A is
# SIGKILLed, and the time from the kill to the start of B's attempt is read
# off the database clock. Prints each round and the median and p99.
#
#   bash scripts/bench-takeover.sh LEASE ROUNDS [PADDOCK_BINARY]
#   bash scripts/bench-takeover.sh 30s 20
#
# Needs the guests built (scripts/build-guests.sh) and a PostgreSQL server
# (scripts/test-postgres.sh finds one).
set -euo pipefail
lease=${1:?lease, e.g. 30s}; rounds=${2:?rounds}
root=$(cd "$(dirname "$0")/.." && pwd)
paddock=${3:-$root/target/debug/paddock}
base=$(bash "$root/scripts/test-postgres.sh")
db="paddock_takeover_$$"
server=${base%/*}
psql "$server/postgres" -qAtc "CREATE DATABASE $db" >/dev/null
url="$server/$db"
work=$(mktemp -d)
cleanup() {
  kill -9 ${a:-} ${b:-} 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$server/postgres" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export PADDOCK_DATABASE_URL=$url
"$paddock" group set default --deadline 1h --concurrency 64 >/dev/null
digest=$("$paddock" component push "$root/target/guests/burn.wasm" | grep -o 'sha256:[0-9a-f]*' | head -1)
cat >"$work/job.toml" <<TOML
id = "burner"
tenant = "bench"
component = "$digest"
[params]
spin = true
[retry]
max_attempts = 100
TOML
"$paddock" job apply "$work/job.toml" >/dev/null
flags=(--lease "$lease" --poll 100ms --concurrency 32)
sql() { psql "$url" -qAtc "$1"; }
now_ms="CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
"$paddock" serve --runner-id B "${flags[@]}" >"$work/B.log" 2>&1 & b=$!
latencies=()
for round in $(seq 1 "$rounds"); do
  kill -STOP "$b"
  "$paddock" serve --runner-id "A$round" "${flags[@]}" >"$work/A.log" 2>&1 & a=$!
  id=$("$paddock" trigger run burner | grep -o 'trigger [0-9]*' | head -1 | awk '{print $2}')
  until [ "$(sql "SELECT count(*) FROM triggers WHERE id = $id AND lease_owner = 'A$round'")" = 1 ]; do sleep 0.05; done
  kill -CONT "$b"
  sleep 0.5
  killed=$(sql "SELECT $now_ms"); kill -9 "$a"; wait "$a" 2>/dev/null || true
  until [ "$(sql "SELECT count(*) FROM attempts WHERE trigger_id = $id AND runner_id = 'B'")" = 1 ]; do sleep 0.02; done
  started=$(sql "SELECT started_at FROM attempts WHERE trigger_id = $id AND runner_id = 'B'")
  ms=$((started - killed))
  latencies+=("$ms")
  echo "round $round: taken over after $ms ms (lease $lease)"
  "$paddock" trigger cancel "$id" --reason "bench round over" >/dev/null 2>&1 || true
done
printf '%s\n' "${latencies[@]}" | sort -n >"$work/sorted"
n=${#latencies[@]}
p50=$(sed -n "$(( (n + 1) / 2 ))p" "$work/sorted")
p99=$(sed -n "$(( (n * 99 + 99) / 100 ))p" "$work/sorted")
echo "RESULT takeover lease=$lease rounds=$n p50_ms=$p50 p99_ms=$p99"
