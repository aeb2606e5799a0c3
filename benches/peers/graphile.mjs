// graphile-worker draining N pre-inserted no-op jobs.
//
//   node graphile.mjs --url postgres://postgres@127.0.0.1:5432/postgres --jobs 10000
//
// Fresh database, schema migrated, N jobs added with the batch `addJobs` API,
// ANALYZE, then one worker pool with graphile-worker's documented
// high-throughput settings (see README.md). Timed from the call to `run()`
// until the jobs table is empty (graphile-worker deletes a job when it
// completes). Prints `PEER graphile-worker <N> <jobs_per_s>` on stdout.
import { connect, freshDatabase, log, now, parseArgs, printResult, rate, runMain, waitUntil } from './common.mjs';

// graphile-worker logs one info line per successful job unless this is set
// (read when the module loads, hence the dynamic import below). A production
// deployment at this rate would not log every job either.
process.env.NO_LOG_SUCCESS = '1';
const { run, makeWorkerUtils, Logger } = await import('graphile-worker');
const { EventEmitter } = await import('node:events');

const opts = parseArgs({
  concurrency: 10, // concurrentJobs
  localQueue: 500, // localQueue.size
  batchDelay: 0, // completeJobBatchDelay and failJobBatchDelay, ms
  insertBatch: 10000, // jobs per addJobs call
  stallMs: 30000,
});
const N = opts.jobs;
const SYSTEM = 'graphile-worker';

// warnings and errors only; info/debug (per-job chatter) dropped.
const logger = new Logger((scope) => (level, message) => {
  if (level === 'error' || level === 'warning') log(`[graphile-worker ${level}] ${message}`);
});

let db;
let client;
let runner;

await runMain(
  async () => {
    db = await freshDatabase(opts.url, 'graphile');
    log(`${SYSTEM}: database ${db.name}, ${N} jobs`);

    const utils = await makeWorkerUtils({ connectionString: db.url, logger });
    let t = now();
    await utils.migrate();
    log(`  migrate          ${(now() - t).toFixed(0)} ms`);
    t = now();
    for (let done = 0; done < N; ) {
      const k = Math.min(opts.insertBatch, N - done);
      const specs = new Array(k);
      for (let i = 0; i < k; i++) specs[i] = { identifier: 'noop', payload: {} };
      await utils.addJobs(specs);
      done += k;
    }
    log(`  insert           ${(now() - t).toFixed(0)} ms (${rate(N, now() - t).toFixed(0)} jobs/s via addJobs)`);
    await utils.release();

    client = await connect(db.url);
    const count = async () => Number((await client.query('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n);
    await client.query('ANALYZE');
    const queued = await count();
    if (queued !== N) throw new Error(`expected ${N} queued jobs, found ${queued}`);

    const events = new EventEmitter();
    const succeeded = new Set();
    let failures = 0;
    let firstStart = null;
    let lastSuccess = null;
    events.on('job:start', () => {
      firstStart ??= now();
    });
    events.on('job:success', ({ job }) => {
      succeeded.add(job.id);
      lastSuccess = now();
    });
    events.on('job:error', ({ job, error }) => {
      failures++;
      log(`  job ${job.id} failed: ${error?.message ?? error}`);
    });

    const t0 = now();
    runner = await run({
      noHandleSignals: true,
      taskList: { noop: async () => {} },
      preset: {
        worker: {
          connectionString: db.url,
          concurrentJobs: opts.concurrency,
          // "10 or concurrentJobs + 2, whichever is larger" (WorkerOptions.maxPoolSize docs)
          maxPoolSize: Math.max(10, opts.concurrency + 2),
          localQueue: { size: opts.localQueue },
          completeJobBatchDelay: opts.batchDelay,
          failJobBatchDelay: opts.batchDelay,
          logger,
          events,
        },
      },
    });
    const tUp = now();

    // Every job reported successful, then the batched completions flushed:
    // the table is empty. Poll the table only once the events say all ran.
    await waitUntil(async () => failures > 0 || (succeeded.size >= N && (await count()) === 0), {
      intervalMs: 2,
      stallMs: opts.stallMs,
      progress: () => succeeded.size,
      what: `${N} jobs to complete`,
    });
    const t1 = now();
    if (failures > 0) throw new Error(`${failures} job attempt(s) failed`);

    await runner.stop();
    runner = null;
    const left = await count();
    if (succeeded.size !== N || left !== 0) {
      throw new Error(`incomplete: ${succeeded.size}/${N} succeeded, ${left} left in the jobs table`);
    }

    const r = rate(N, t1 - t0);
    log(`  run() to ready   ${(tUp - t0).toFixed(0)} ms`);
    log(`  drain            ${(t1 - t0).toFixed(0)} ms from run() -> ${r.toFixed(0)} jobs/s`);
    log(
      `  first job start -> table empty ${(t1 - firstStart).toFixed(0)} ms -> ${rate(N, t1 - firstStart).toFixed(0)} jobs/s` +
        ` (last success ${(t1 - lastSuccess).toFixed(1)} ms before empty)`,
    );
    log(
      `  config: concurrentJobs ${opts.concurrency}, maxPoolSize ${Math.max(10, opts.concurrency + 2)}, ` +
        `localQueue.size ${opts.localQueue}, complete/failJobBatchDelay ${opts.batchDelay} ms`,
    );
    printResult(SYSTEM, N, r);
  },
  async () => {
    if (runner) await runner.stop().catch((e) => log(`runner.stop: ${e.message}`));
    if (client) await client.end().catch(() => {});
    if (db) await db.drop();
  },
);
