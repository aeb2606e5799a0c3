// Shared plumbing for the peer drivers (graphile.mjs, pgboss.mjs): argument
// parsing, a throwaway database per run, waiting with a stall guard, and the
// one machine-readable result line.
//
// Import this module FIRST and statically; import the queue libraries
// dynamically afterwards. graphile-worker 0.18 and pg-boss 12 need Node >= 22
// while the machine may only have Node 20, so on an older Node this module
// re-runs the driver under the Node 22 pinned in package.json
// (node_modules/.bin/node, installed by `npm ci`) before anything else loads.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const HERE = dirname(fileURLToPath(import.meta.url));
const MIN_NODE_MAJOR = 22;

if (Number(process.versions.node.split('.')[0]) < MIN_NODE_MAJOR) {
  const pinned = join(HERE, 'node_modules', '.bin', 'node');
  if (!existsSync(pinned) || process.env.PEERS_REEXEC === '1') {
    console.error(
      `peers: Node ${process.versions.node} is too old (graphile-worker 0.18 / pg-boss 12 need >= ${MIN_NODE_MAJOR}); ` +
        `run \`npm ci\` in ${HERE} to get the pinned Node 22, or use bash scripts/bench-peers.sh`,
    );
    process.exit(2);
  }
  const r = spawnSync(pinned, process.argv.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, PEERS_REEXEC: '1' },
  });
  process.exit(r.status ?? 1);
}

const { default: pg } = await import('pg');
export { pg };

export const now = () => performance.now();

/** stderr, human-readable. stdout carries only the PEER line. */
export function log(...args) {
  console.error(...args);
}

/**
 * `--url URL --jobs N [--name value ...]`; numbers are parsed when the default
 * is a number. Unknown flags are an error so a typo does not silently bench
 * the default.
 */
export function parseArgs(defaults) {
  const out = { url: process.env.PADDOCK_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', jobs: 10000, ...defaults };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) usage(`unexpected argument ${argv[i]}`, out);
    const key = m[1].replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (key === 'help') usage(null, out);
    if (!(key in out)) usage(`unknown flag --${m[1]}`, out);
    const raw = m[2] ?? argv[++i];
    if (raw === undefined) usage(`--${m[1]} needs a value`, out);
    if (typeof out[key] === 'number') {
      const v = Number(raw);
      if (!Number.isFinite(v)) usage(`--${m[1]} needs a number, got ${raw}`, out);
      out[key] = v;
    } else {
      out[key] = raw;
    }
  }
  if (!Number.isInteger(out.jobs) || out.jobs < 1) usage('--jobs must be a positive integer', out);
  return out;
}

function usage(err, defaults) {
  if (err) console.error(`error: ${err}`);
  const flags = Object.entries(defaults)
    .map(([k, v]) => `--${k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} (default ${v})`)
    .join(' ');
  console.error(`usage: node ${process.argv[1].split('/').pop()} ${flags}`);
  process.exit(err ? 2 : 0);
}

/** `url` with its database part replaced by `db`. */
export function withDatabase(url, db) {
  const u = new URL(url);
  u.pathname = '/' + db;
  return u.toString();
}

/**
 * A fresh database `peers_bench_<label>_<pid>` on the server of `adminUrl`
 * (dropped first if a previous run left it). `drop()` removes it, forcing out
 * any connection still open; it is also run on SIGINT/SIGTERM.
 */
export async function freshDatabase(adminUrl, label) {
  const name = `peers_bench_${label}_${process.pid}`;
  const admin = async (sql) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin(`CREATE DATABASE ${name}`);
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  };
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.once(sig, () => {
      log(`peers: ${sig}, dropping ${name}`);
      drop().finally(() => process.exit(130));
    });
  }
  return { name, url: withDatabase(adminUrl, name), drop };
}

/** One client on `url` for the driver's own bookkeeping queries. */
export async function connect(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  return c;
}

/**
 * Resolve once `check()` returns true. `progress()` (a number that grows as
 * work gets done) must move at least every `stallMs`, else reject — a
 * wedged queue fails the run instead of hanging it.
 */
export async function waitUntil(check, { intervalMs = 5, stallMs = 30000, progress = () => 0, what = 'condition' } = {}) {
  let last = progress();
  let lastMove = now();
  for (;;) {
    if (await check()) return;
    const p = progress();
    if (p !== last) {
      last = p;
      lastMove = now();
    } else if (now() - lastMove > stallMs) {
      throw new Error(`no progress for ${stallMs} ms waiting for ${what} (progress ${p})`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export const rate = (n, ms) => n / (ms / 1000);
export const fmtRate = (r) => r.toFixed(0);

/** The one stdout line the comparison script reads. */
export function printResult(system, n, jobsPerSec) {
  process.stdout.write(`PEER ${system} ${n} ${fmtRate(jobsPerSec)}\n`);
}

/** Run `main`, turn any error into exit 1 (after `cleanup`). */
export async function runMain(main, cleanup) {
  let code = 0;
  try {
    await main();
  } catch (e) {
    log(`FAILED: ${e?.stack ?? e}`);
    code = 1;
  }
  try {
    await cleanup?.();
  } catch (e) {
    log(`cleanup failed: ${e?.stack ?? e}`);
    code = code || 1;
  }
  // Libraries may leave timers or sockets behind after stop(); do not wait on them.
  process.exit(code);
}
