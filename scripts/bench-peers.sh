#!/usr/bin/env bash
# Paddock's PostgreSQL throughput next to graphile-worker's and pg-boss's, in
# one run, on one machine and one server: each pending size is drained by the
# peers, then by Paddock (`cargo bench --bench throughput`, PostgreSQL
# configurations only), then by the peers again, and one table of medians
# and ratios is printed at the end. See benches/peers/README.md.
#
#   bash scripts/bench-peers.sh
#
# Env:
#   PADDOCK_PEERS_JOBS          pending sizes (default "10000 100000")
#   PADDOCK_PEERS_ROUNDS        peer rounds before and after Paddock's run (default 1)
#   PADDOCK_PEERS_SYSTEMS       peer drivers to run (default "graphile-worker pg-boss";
#                               also "pg-boss-work": pg-boss through work())
#   PADDOCK_BENCH_DATABASE_URL  admin URL of the server (default
#                               postgres://postgres@127.0.0.1:5432/postgres); every
#                               run makes and drops its own database on it
#   PADDOCK_PEERS_PADDOCK_CMD   command run (by bash, from the repo root) instead of
#                               `cargo bench -p paddock --bench throughput`; it gets
#                               PADDOCK_BENCH_ONLY=pg and PADDOCK_BENCH_JOBS_PG=<size>
#                               and its `RESULT <tag> <pending> <jobs/s>` stdout
#                               lines are collected
#   PADDOCK_PEERS_SKIP_PADDOCK  1: peers only
#
# Exit status: non-zero if a peer run (or the Paddock command) failed; the
# table is printed either way. Paddock printing no RESULT lines is not a
# failure: its rows show as missing.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
peers="$root/benches/peers"
sizes=${PADDOCK_PEERS_JOBS:-10000 100000}
rounds=${PADDOCK_PEERS_ROUNDS:-1}
systems=${PADDOCK_PEERS_SYSTEMS:-graphile-worker pg-boss}
url=${PADDOCK_BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
paddock_cmd=${PADDOCK_PEERS_PADDOCK_CMD:-cargo bench -p paddock --bench throughput}
skip_paddock=${PADDOCK_PEERS_SKIP_PADDOCK:-0}

say() { printf 'bench-peers: %s\n' "$*" >&2; }

[[ $rounds =~ ^[1-9][0-9]*$ ]] || { say "PADDOCK_PEERS_ROUNDS must be a positive integer, got '$rounds'"; exit 2; }
for n in $sizes; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { say "PADDOCK_PEERS_JOBS: '$n' is not a positive integer"; exit 2; }
done
for s in $systems; do
  case $s in graphile-worker | pg-boss | pg-boss-work) ;; *) say "PADDOCK_PEERS_SYSTEMS: unknown system '$s'"; exit 2 ;; esac
done
command -v npm >/dev/null || { say "npm not found (Node >= 20 with npm is needed to install the peers)"; exit 2; }
command -v python3 >/dev/null || { say "python3 not found (renders the table)"; exit 2; }

# 1. Dependencies: graphile-worker, pg-boss, and the Node 22 they need (the
# `node` package), pinned in benches/peers/package-lock.json. Reinstalled when
# missing or older than the manifest/lockfile.
stamp="$peers/node_modules/.package-lock.json"
node22="$peers/node_modules/.bin/node"
if [[ ! -f $stamp || ! -x $node22 || $peers/package.json -nt $stamp || ( -f $peers/package-lock.json && $peers/package-lock.json -nt $stamp ) ]]; then
  if [[ -f $peers/package-lock.json ]]; then install=ci; else install=install; fi
  say "npm $install in benches/peers"
  (cd "$peers" && npm "$install" --no-audit --no-fund --loglevel=error >/dev/null) || { say "npm $install failed"; exit 2; }
fi
"$node22" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)' ||
  { say "$node22 is not Node >= 22; delete benches/peers/node_modules and rerun"; exit 2; }

results=$(mktemp -t bench-peers.XXXXXX)
trap 'rm -f "$results"' EXIT
failed=0

# One peer run: its PEER line goes to $results, its details to stderr.
peer() {
  local system=$1 n=$2 script args=() out
  case $system in
    graphile-worker) script=graphile.mjs ;;
    pg-boss) script=pgboss.mjs ;;
    pg-boss-work) script=pgboss.mjs args=(--mode work) ;;
  esac
  say "$system, $n pending"
  if out=$(cd "$peers" && "$node22" "$script" --url "$url" --jobs "$n" "${args[@]}") &&
    grep -q '^PEER ' <<<"$out"; then
    grep '^PEER ' <<<"$out" | tee -a "$results" >&2
  else
    say "$system failed at $n pending"
    echo "FAILED $system $n" >>"$results"
    failed=1
  fi
}

peer_rounds() {
  local n=$1 r s
  for ((r = 1; r <= rounds; r++)); do
    for s in $systems; do peer "$s" "$n"; done
  done
}

for n in $sizes; do
  peer_rounds "$n"
  if [[ $skip_paddock != 1 ]]; then
    say "Paddock, $n pending: $paddock_cmd"
    log=$(mktemp -t bench-peers-paddock.XXXXXX)
    # Its own report goes to the terminal (stderr) as it runs; RESULT lines are kept.
    (cd "$root" && PADDOCK_BENCH_ONLY=pg PADDOCK_BENCH_JOBS_PG=$n PADDOCK_BENCH_DATABASE_URL=$url \
      bash -c "$paddock_cmd") | tee "$log" >&2
    status=${PIPESTATUS[0]}
    grep -E '^RESULT [A-Za-z0-9_]+ [0-9]+ [0-9.]+' "$log" >>"$results"
    if ((status != 0)); then
      say "the Paddock command exited $status"
      echo "FAILED paddock $n" >>"$results"
      failed=1
    elif ! grep -qE '^RESULT ' "$log"; then
      say "the Paddock command printed no RESULT lines: Paddock shows as missing"
    fi
    rm -f "$log"
  fi
  peer_rounds "$n"
done

echo
python3 - "$results" "$sizes" "$systems" "$skip_paddock" <<'PY'
import statistics, sys
from collections import defaultdict

path, sizes, systems, skip_paddock = sys.argv[1], [int(s) for s in sys.argv[2].split()], sys.argv[3].split(), sys.argv[4] == "1"
runs = defaultdict(list)  # (pending, name) -> [jobs/s]
paddock_tags = []
failures = defaultdict(int)  # (pending, name) -> failed runs
for line in open(path):
    f = line.split()
    if len(f) == 3 and f[0] == "FAILED":
        failures[(int(f[2]), f[1])] += 1
        continue
    if len(f) < 4 or f[0] not in ("PEER", "RESULT"):
        continue
    name = f[1] if f[0] == "PEER" else "paddock " + f[1]
    if f[0] == "RESULT" and name not in paddock_tags:
        paddock_tags.append(name)
    runs[(int(f[2]), name)].append(float(f[3]))

# Sizes as asked, then any other pending size a RESULT line reported.
sizes += sorted({n for (n, _) in runs} - set(sizes))

def med(pending, name):
    v = runs.get((pending, name))
    return statistics.median(v) if v else None

peer_cols = [s for s in systems]
header = ["pending", "system / configuration", "runs", "jobs/s", "min..max"] + [f"÷ {p}" for p in peer_cols] + ["note"]
rows = []
for n in sizes:
    names = list(systems) + ([t for t in paddock_tags if (n, t) in runs] or ([] if skip_paddock else ["paddock"]))
    for name in names:
        v = runs.get((n, name))
        bad = failures.get((n, name.split()[0]), 0)
        note = f"{bad} run(s) failed" if bad else ""
        if not v:
            note = note or ("missing: no RESULT lines" if name == "paddock" else "missing")
            rows.append([f"{n}", name, "0", "-", ""] + ["-"] * len(peer_cols) + [note])
            continue
        m = statistics.median(v)
        ratios = []
        for p in peer_cols:
            pm = med(n, p)
            ratios.append(f"{m / pm:.2f}x" if pm else "-")
        rng = f"{min(v):.0f}..{max(v):.0f}" if len(v) > 1 else ""
        rows.append([f"{n}", name, str(len(v)), f"{m:.0f}", rng] + ratios + [note])

widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
right = {0, 2, 3, 4} | set(range(5, len(header) - 1))
def fmt(r):
    return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
print("No-op jobs drained on PostgreSQL: medians over each system's runs (peers: before and after Paddock's);")
print("÷ columns: that row's jobs/s divided by the peer's median at the same pending size.")
print(fmt(header))
print("  ".join("-" * w for w in widths).rstrip())
prev = None
for r in rows:
    if prev is not None and r[0] != prev:
        print()
    prev = r[0]
    print(fmt(r))
PY

if ((failed)); then
  say "some runs failed (see above)"
  exit 1
fi
