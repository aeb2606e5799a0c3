#!/usr/bin/env bash
# The SQL floor of a PostgreSQL job queue on Paddock's schema, measured with
# pgbench (no client work): see benches/floor-sql/README.md.
#
#   bash scripts/bench-floor-sql.sh
#
# Env: PADDOCK_BENCH_DATABASE_URL (admin URL, default
# postgres://postgres@127.0.0.1:5432/postgres), PADDOCK_FLOOR_JOBS (default
# 50000), PADDOCK_FLOOR_ROUNDS (default 3), PADDOCK_FLOOR_CLIENTS (default 4).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
dir="$root/benches/floor-sql"
admin=${PADDOCK_BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
jobs=${PADDOCK_FLOOR_JOBS:-50000}
rounds=${PADDOCK_FLOOR_ROUNDS:-3}
clients=${PADDOCK_FLOOR_CLIENTS:-4}
command -v pgbench >/dev/null || { echo "bench-floor-sql: pgbench is not installed" >&2; exit 1; }
db=paddock_floor_sql_$$
url="${admin%/*}/$db"
psql "$admin" -qc "CREATE DATABASE $db"
trap 'psql "$admin" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1' EXIT
for f in "$root"/migrations/postgres/*.sql; do
  psql "$url" -q -v ON_ERROR_STOP=1 -f "$f" >/dev/null
done
# The jobs' plan rows are not what is measured: triggers go in without them.
psql "$url" -qc "ALTER TABLE triggers DROP CONSTRAINT IF EXISTS triggers_job_id_plan_version_fkey"
reset() {
  psql "$url" -q >/dev/null <<SQL
TRUNCATE attempts, checkpoints, effects, exceptions, triggers CASCADE;
INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, origin,
    scheduled_at, state, next_run_at, created_at, updated_at)
SELECT 'k' || g, 'noop', 1, 't', 'default', 'manual', 0, 'pending', 0, 0, 0
FROM generate_series(1, $jobs) g;
VACUUM ANALYZE triggers; VACUUM ANALYZE attempts; CHECKPOINT;
SQL
}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
hz=$(getconf CLK_TCK)
per_client=$((jobs / 100 / clients))
printf '%-16s %8s %12s %14s\n' script round jobs/s "cpu us/job"
for r in $(seq 1 "$rounds"); do
  for script in same_work graphile_shape; do
    reset
    before=$(busy)
    tps=$(pgbench "$url" -n -c "$clients" -j 2 -t "$per_client" -M prepared \
      -f "$dir/$script.sql" 2>&1 | awk '/^tps/{print $3}')
    after=$(busy)
    done_jobs=$((per_client * clients * 100))
    cpu=$(( (after - before) * 1000000 / hz / done_jobs ))
    printf '%-16s %8s %12.0f %14s\n' "$script" "$r" "$(echo "$tps * 100" | bc -l)" "$cpu"
  done
done
