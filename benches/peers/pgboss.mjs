// pg-boss draining N pre-inserted no-op jobs.
//
//   node pgboss.mjs --url postgres://postgres@127.0.0.1:5432/postgres --jobs 10000 [--mode fetch|work]
//
// Fresh database, pg-boss started (schema installed), one standard queue,
// N jobs inserted with the batch `insert` API, ANALYZE, then 4 workers each
// taking 100 jobs at a time (see README.md for why these settings):
//
//   --mode fetch (default): 4 concurrent loops of `fetch(batchSize 100)` then
//     `complete(queue, jobs)` — the documented manual-worker API, settling
//     each job against the attempt fetched exactly as `work()` does. Measured
//     faster than `work()` on this workload.
//   --mode work: `work()` with localConcurrency 4, batchSize 100,
//     pollingIntervalSeconds 0.5 (the minimum) and burstWhenBatchFull.
//
// Timed from the first fetch / the call to `work()` until all N jobs are in
// state `completed`. Prints `PEER pg-boss <N> <jobs_per_s>` on stdout
// (`PEER pg-boss-work ...` with --mode work).
import { connect, freshDatabase, log, now, parseArgs, printResult, rate, runMain, waitUntil } from './common.mjs';

const { PgBoss } = await import('pg-boss');

const opts = parseArgs({
  mode: 'fetch', // fetch: fetch()+complete() loops; work: work()
  workers: 4, // localConcurrency: polling workers for the queue in this process
  batchSize: 100, // jobs per fetch, handed to the handler as one batch
  pollSeconds: 0.5, // pollingIntervalSeconds; 0.5 is the minimum pg-boss accepts
  poolMax: 10, // pg pool size (pg-boss's default, and >= workers + the supervisor's needs)
  insertBatch: 10000, // jobs per insert() call
  stallMs: 30000,
});
const N = opts.jobs;
if (!['fetch', 'work'].includes(opts.mode)) {
  console.error(`--mode must be fetch or work, got ${opts.mode}`);
  process.exit(2);
}
const SYSTEM = opts.mode === 'work' ? 'pg-boss-work' : 'pg-boss';
const QUEUE = 'noop';
const SCHEMA = 'pgboss';

let db;
let client;
let boss;

await runMain(
  async () => {
    db = await freshDatabase(opts.url, 'pgboss');
    log(`${SYSTEM}: database ${db.name}, ${N} jobs`);

    boss = new PgBoss({ connectionString: db.url, schema: SCHEMA, max: opts.poolMax });
    let bossError = null;
    boss.on('error', (e) => {
      bossError ??= e;
      log(`[pg-boss error] ${e?.message ?? e}`);
    });
    boss.on('warning', (w) => log(`[pg-boss warning] ${w?.message ?? JSON.stringify(w)}`));

    let t = now();
    await boss.start();
    await boss.createQueue(QUEUE);
    log(`  start + queue    ${(now() - t).toFixed(0)} ms`);
    t = now();
    for (let done = 0; done < N; ) {
      const k = Math.min(opts.insertBatch, N - done);
      const jobs = new Array(k);
      for (let i = 0; i < k; i++) jobs[i] = { data: {} };
      await boss.insert(QUEUE, jobs);
      done += k;
    }
    log(`  insert           ${(now() - t).toFixed(0)} ms (${rate(N, now() - t).toFixed(0)} jobs/s via insert)`);

    client = await connect(db.url);
    const states = async () => {
      const { rows } = await client.query(`SELECT state::text AS state, count(*)::int AS n FROM ${SCHEMA}.job WHERE name = $1 GROUP BY state`, [QUEUE]);
      return Object.fromEntries(rows.map((r) => [r.state, r.n]));
    };
    await client.query('ANALYZE');
    const before = await states();
    if ((before.created ?? 0) !== N) throw new Error(`expected ${N} created jobs, found ${JSON.stringify(before)}`);

    const handled = new Set();
    let firstFetch = null;
    const workOptions = {
      localConcurrency: opts.workers,
      batchSize: opts.batchSize,
      pollingIntervalSeconds: opts.pollSeconds,
      // Fetch again at once while fetches come back full, instead of
      // sleeping out the polling interval after every batch.
      burstWhenBatchFull: true,
    };

    // fetch mode: the same shape as work() without its per-batch machinery
    // (wip events, handler timeout race, telemetry spans): each loop fetches
    // a batch, "runs" it, completes it fenced by the fetched attempts, and
    // when a fetch comes back empty waits out the polling interval like an
    // idle work() worker would.
    let stopLoops = false;
    let loopError = null;
    const loop = async () => {
      while (!stopLoops && handled.size < N) {
        const jobs = await boss.fetch(QUEUE, { batchSize: opts.batchSize });
        firstFetch ??= now();
        if (jobs.length === 0) {
          await new Promise((r) => setTimeout(r, opts.pollSeconds * 1000));
          continue;
        }
        for (const j of jobs) handled.add(j.id);
        await boss.complete(QUEUE, jobs);
      }
    };

    const t0 = now();
    let loops = [];
    if (opts.mode === 'work') {
      await boss.work(QUEUE, workOptions, async (jobs) => {
        firstFetch ??= now();
        for (const j of jobs) handled.add(j.id);
      });
    } else {
      loops = Array.from({ length: opts.workers }, () =>
        loop().catch((e) => {
          loopError ??= e;
        }),
      );
    }
    const tUp = now();

    // The handler has seen every job; pg-boss completes a batch after its
    // handler resolves, so poll the table only once the handler saw them all.
    let last = {};
    await waitUntil(
      async () => {
        if (bossError || loopError) return true;
        if (handled.size < N) return false;
        last = await states();
        return (last.completed ?? 0) >= N;
      },
      { intervalMs: 2, stallMs: opts.stallMs, progress: () => handled.size, what: `${N} jobs to complete` },
    );
    const t1 = now();
    if (bossError) throw bossError;
    if (loopError) throw loopError;

    if (opts.mode === 'work') await boss.offWork(QUEUE);
    stopLoops = true;
    await Promise.all(loops);
    const after = await states();
    if (handled.size !== N || (after.completed ?? 0) !== N) {
      throw new Error(`incomplete: handler saw ${handled.size}/${N}, states ${JSON.stringify(after)}`);
    }
    // The database's own view: first job started -> last job completed.
    const { rows: [w] } = await client.query(
      `SELECT extract(epoch FROM max(completed_on) - min(started_on)) * 1000 AS ms FROM ${SCHEMA}.job WHERE name = $1`,
      [QUEUE],
    );

    const r = rate(N, t1 - t0);
    if (opts.mode === 'work') log(`  work() returned  ${(tUp - t0).toFixed(0)} ms`);
    log(`  drain            ${(t1 - t0).toFixed(0)} ms from ${opts.mode === 'work' ? 'work()' : 'first fetch() call'} -> ${r.toFixed(0)} jobs/s`);
    log(`  first fetch -> all completed ${(t1 - firstFetch).toFixed(0)} ms -> ${rate(N, t1 - firstFetch).toFixed(0)} jobs/s`);
    log(`  db clock: min(started_on) -> max(completed_on) ${Number(w.ms).toFixed(0)} ms -> ${rate(N, Number(w.ms)).toFixed(0)} jobs/s`);
    log(
      opts.mode === 'work'
        ? `  config: work() ${JSON.stringify(workOptions)}, pool max ${opts.poolMax}`
        : `  config: ${opts.workers} x fetch({ batchSize: ${opts.batchSize} }) + complete(jobs) loops, idle poll ${opts.pollSeconds} s, pool max ${opts.poolMax}`,
    );
    printResult(SYSTEM, N, r);
  },
  async () => {
    if (boss) await boss.stop({ graceful: false, close: true }).catch((e) => log(`boss.stop: ${e.message}`));
    if (client) await client.end().catch(() => {});
    if (db) await db.drop();
  },
);
