//! Claim + complete throughput for no-op Wasm jobs, next to the floor.
//!
//! Paddock: N manual triggers of the `noop` guest are inserted at once and
//! run to `succeeded` — each one a claim (fencing token + 1, lease, attempt
//! row), a sandboxed Wasm run, and a fenced commit of the trigger and its
//! attempt. Jobs/s is N over the database-clock window from the first
//! attempt's `started_at` to the last trigger's `finished_at`, so process
//! start-up is not counted (a short warm-up batch runs first).
//!
//! Floor: the same N triggers, in a fresh schema of the same database,
//! driven by raw SQL doing only the minimal statements in batches of 100.
//! On PostgreSQL, on the native driver, one statement claims a batch
//! (`UPDATE ... fencing_token + 1 ... WHERE id IN (SELECT ... LIMIT 100
//! FOR UPDATE SKIP LOCKED)`) and opens its attempt rows, and one statement
//! completes it — every trigger fenced by its own token, its attempt
//! closed — with 4 workers per Paddock process (as many connections as a
//! Paddock process keeps busy: one claim, three group commits). On SQLite,
//! one worker: a transaction claims and inserts the attempts, a second
//! completes the batch under its tokens and closes the attempts. The
//! floor runs before and after Paddock in each configuration; the ratio
//! is Paddock / mean(floor).
//!
//! After every bulk load the bench runs `ANALYZE` on PostgreSQL, as a
//! production system's autovacuum would (migrations/postgres/0008 asks for
//! it within a minute of a burst). Each PostgreSQL run also prints its cost
//! per job: WAL records and bytes, index entries, heap inserts/updates and
//! HOT updates (`pg_walinspect` over the run's WAL), commits, server and
//! client CPU, how busy the cores were, and so which resource saturated.
//! Lines `RESULT <tag> <pending> <jobs/s>` are for scripts/bench-peers.sh.
//!
//! Configurations: SQLite with an in-process `Runner` and with one `paddock
//! serve`; PostgreSQL with an in-process `Runner`, one and three `paddock
//! serve` processes; and one `paddock serve` again on each database with
//! `--metrics` on and `/metrics` scraped every second (`*_metrics`), for
//! the metrics on / off ratio printed under the table; and the quotas and
//! fair shares on / off ratio (issue 16) of each `*_fair_*` configuration
//! whose plain twin ran too.
//!
//! Run: `cargo bench -p paddock --bench throughput` (after
//! `bash scripts/build-guests.sh`). Needs PostgreSQL:
//! `PADDOCK_BENCH_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) is the admin connection; a
//! fresh database is created for the run and dropped at the end.
//! Env: `PADDOCK_BENCH_JOBS_SQLITE` (default 10000), `PADDOCK_BENCH_JOBS_PG`
//! (pending sizes, default `10000,100000`), `PADDOCK_BENCH_CONCURRENCY` (attempts per process,
//! default 256), `PADDOCK_BENCH_CLAIM` (triggers per claim, default 100 —
//! the floor's batch — or half the slots if less: a runner claims once that
//! many slots are free, and the slots beyond one batch keep guests running
//! while the next claim and the last commit are in the database),
//! `PADDOCK_BENCH_ONLY`
//! (`sqlite`, `pg`, or a configuration's tag prefix: `sq_inproc`,
//! `sq_serve1` (with `sq_serve1_metrics`), `sq_calls`, `pg_inproc`,
//! `pg_serve1` (with `pg_serve1_metrics`), `pg_serve3`, `pg_calls`;
//! `sq_fair_inproc`, `pg_fair_inproc`, `pg_fair_serve1`, `pg_fair_serve3`,
//! `sq_fair_calls64`, `pg_fair_calls64`: the same with quotas and fair
//! shares on, see [`Quotas`]), `PADDOCK_BENCH_TENANTS` (tenants with quotas
//! on, default 4), `PADDOCK_BENCH_LAYOUT` (the order the tenants'
//! triggers are created in: `interleaved`, round robin, the default;
//! `blocks`, each tenant's together; `runs<N>`, round robin by runs of N —
//! each trigger's id reserved as the product reserves it, so on SQLite
//! from its tenant's block, `store/trigger_ids.rs`).

mod common;
use common::env_or;
use common::meter::{Costs, Meter};
use common::pg::Pg;
use paddock::lease::{Runner, RunnerConfig};
use paddock::model::AttemptEnd;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::prelude::*;
use paddock::store::{Dialect, Store, dialect::SQLITE_NOW};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FLOOR_BATCH: usize = 100;
/// Floor workers per Paddock process on PostgreSQL: one per connection a
/// Paddock process keeps busy (one claim and three group commits in
/// flight), so the floor has as many connections as Paddock uses.
const PG_FLOOR_WORKERS: usize = 4;
const WARMUP: usize = 60;

/// Quotas and fair shares in a run. Off: the bench's one tenant in a group
/// no limit binds (`common::register_bench_job`). On: the triggers spread
/// over [`fair_tenants`] tenants of weights 1, 2, 3, ..., each with a max
/// in flight and a fuel quota, in a group whose configured concurrency is
/// the fleet's slots — every limit counted and checked at each claim, the
/// fair-share choice ranking four queues, none of them binding below the
/// runners' own slots (so the two shapes do the same work).
#[derive(Clone, Copy, PartialEq)]
enum Quotas {
    Off,
    On,
}

/// The store-calls breakdown's runs: a claim of one, of 64, and of 64 with
/// quotas and fair shares on (the claim's own cost of them, without the
/// runners' noise).
const CALLS: [(i64, Quotas); 3] = [(1, Quotas::Off), (64, Quotas::Off), (64, Quotas::On)];

/// Tenants of a run with quotas on (`PADDOCK_BENCH_TENANTS`, default 4).
fn fair_tenants() -> usize {
    env_or("PADDOCK_BENCH_TENANTS", 4).max(1)
}

/// The order the tenants' triggers are created in with quotas on
/// (`PADDOCK_BENCH_LAYOUT`): `interleaved` (round robin, the default),
/// `blocks` (one block per tenant), or `runs<N>` (round robin by runs of
/// N). Where they then lie in SQLite's table follows the ids the product
/// hands out (`store/trigger_ids.rs`).
#[derive(Clone, Copy)]
enum Layout {
    Interleaved,
    Blocks,
    Runs(usize),
}

fn layout() -> Layout {
    let v = std::env::var("PADDOCK_BENCH_LAYOUT").unwrap_or_default();
    match v.as_str() {
        "" | "interleaved" => Layout::Interleaved,
        "blocks" => Layout::Blocks,
        _ => match v.strip_prefix("runs").and_then(|n| n.parse::<usize>().ok()) {
            Some(len) if len > 0 => Layout::Runs(len),
            _ => panic!("PADDOCK_BENCH_LAYOUT: expected interleaved, blocks or runs<N>, got {v:?}"),
        },
    }
}

impl Quotas {
    /// The tenant of the `k`-th of `n` triggers created, in the order
    /// [`layout`] says: round robin by default (the harder case for
    /// SQLite, whose claim writes in several places of the table unless
    /// each tenant's ids lie together, docs/architecture.md, issue 16).
    fn tenant(self, k: usize, n: usize) -> String {
        match self {
            Quotas::Off => "t".to_string(),
            Quotas::On => match layout() {
                Layout::Interleaved => format!("t{}", k % fair_tenants()),
                Layout::Blocks => format!("t{}", k * fair_tenants() / n.max(1)),
                Layout::Runs(len) => format!("t{}", (k / len) % fair_tenants()),
            },
        }
    }

    /// The store-calls breakdown's tag for a claim of `batch` on `db`
    /// (`sq`, `pg`): `sq_calls64`, `sq_fair_calls64`, ...
    fn calls_tag(self, db: &str, batch: i64) -> String {
        match self {
            Quotas::Off => format!("{db}_calls{batch}"),
            Quotas::On => format!("{db}_fair_calls{batch}"),
        }
    }

    /// What a configuration's label says of them.
    fn label(self) -> &'static str {
        match self {
            Quotas::Off => "",
            Quotas::On => ", quotas and fair shares on",
        }
    }

    /// Set the quotas up for `slots` slots across the fleet.
    async fn apply(self, store: &Store, sandbox: &Arc<Sandbox>, slots: usize) {
        if self == Quotas::Off {
            return;
        }
        let registry = paddock::registry::Registry::new(store.clone(), sandbox.clone());
        let mut group = store.group_get("default").await.unwrap().unwrap();
        group.max_concurrency = slots as i64;
        registry.group_put(group, "bench").await.unwrap();
        for t in 0..fair_tenants() {
            let mut quota =
                paddock::model::group::TenantQuota::weighted(&format!("t{t}"), t as i64 + 1);
            quota.max_in_flight = Some(slots as i64);
            quota.fuel_per_hour = Some(1 << 50);
            registry.tenant_put(&quota, "bench").await.unwrap();
        }
    }
}

/// Triggers per claim statement for a runner with `slots` slots: the
/// floor's batch (`PADDOCK_BENCH_CLAIM`, default 100), or half the slots if
/// that is less — the runner claims once that many slots are free, so slots
/// beyond the batch keep guests busy while the next claim runs.
fn claim_batch(slots: usize) -> i64 {
    let batch = env_or("PADDOCK_BENCH_CLAIM", FLOOR_BATCH);
    batch.min(slots / 2).max(1) as i64
}

/// A fresh database for one measured run.
enum Db<'a> {
    Sqlite(&'a Path),
    Pg(&'a Pg),
}

impl Db<'_> {
    async fn fresh(&self, run: &str) -> String {
        match self {
            Db::Sqlite(dir) => format!("sqlite://{}", dir.join(format!("{run}.db")).display()),
            Db::Pg(pg) => pg.schema(run).await,
        }
    }
}

/// Open `url`, register the `noop` job.
async fn prepare(url: &str, sandbox: &Arc<Sandbox>) -> Store {
    let store = Store::open(url).await.unwrap();
    if store.dialect() == Dialect::Postgres && !common::meter::install(&store).await {
        eprintln!("   (no pg_walinspect on this server: WAL figures are left out)");
    }
    common::register_bench_job(&store, sandbox).await;
    store
}

/// Insert `n` due manual triggers of job `bench` in one transaction (so they
/// become visible at once). Returns the highest trigger id before them.
async fn insert_triggers(store: &Store, tag: &str, n: usize, quotas: Quotas) -> i64 {
    let before: Option<i64> = sqlx::query_scalar(store.sql("SELECT max(id) FROM triggers"))
        .fetch_one(store.pool())
        .await
        .unwrap();
    let mut tx = store.pool().begin().await.unwrap();
    if store.dialect() == Dialect::Sqlite {
        // Every tenant starts a new block of ids (store/trigger_ids.rs), so
        // this run's triggers all lie above `before`, none in what is left
        // of the warm-up's blocks.
        sqlx::query("DELETE FROM trigger_id_blocks")
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    // Ids as the product hands them out to triggers created one at a time
    // in this order (the manual API's case; a scan's chunk reserves each
    // tenant's at once): on SQLite each tenant's from its own block.
    let mut ids = Vec::with_capacity(n);
    for k in 0..n {
        let tenant = quotas.tenant(k, n);
        ids.push(
            store
                .reserve_trigger_ids(&mut tx, &[(&tenant, 1)])
                .await
                .unwrap()[0],
        );
    }
    let mut i = 0;
    while i < n {
        let rows = (n - i).min(500);
        let sql = store.dialect().multi_row(
            "INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, resource_group, \
             origin, scheduled_at, params, state, priority, next_run_at, created_at, updated_at)",
            &format!(
                "({}, ?, 'bench', 1, ?, 'default', 'manual', 0, '{{}}', 'pending', 0, 0, 0, 0)",
                paddock::store::dialect::SQLITE_NEW_TRIGGER_ID
            ),
            rows,
            "",
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (k, id) in ids.iter().enumerate().skip(i).take(rows) {
            q = q
                .bind(*id)
                .bind(format!("bench@{tag}@{k}"))
                .bind(quotas.tenant(k, n));
        }
        q.execute(&mut *tx).await.unwrap();
        i += rows;
    }
    tx.commit().await.unwrap();
    // What a production system sees once autovacuum has looked at a burst
    // (the hot tables ask it to within a minute: migrations/postgres/0008).
    if store.dialect() == Dialect::Postgres {
        sqlx::query("ANALYZE triggers, attempts")
            .execute(store.pool())
            .await
            .unwrap();
    }
    before.unwrap_or(0)
}

async fn succeeded_after(store: &Store, after: i64) -> i64 {
    sqlx::query_scalar(
        store.sql("SELECT count(*) FROM triggers WHERE id > ? AND state = 'succeeded'"),
    )
    .bind(after)
    .fetch_one(store.pool())
    .await
    .unwrap()
}

/// What one measured run produced, read back from the database.
#[derive(Clone, Copy)]
struct Window {
    jobs: i64,
    attempts: i64,
    /// First claim to last finish, database clock.
    ms: i64,
    wall: Duration,
    /// Claim statements (distinct runner + claim clock among the attempts).
    claims: i64,
    /// PostgreSQL: what the run cost per job.
    costs: Option<Costs>,
}

impl Window {
    fn rate(&self) -> f64 {
        self.jobs as f64 / (self.ms.max(1) as f64 / 1e3)
    }
}

async fn window(store: &Store, after: i64, wall: Duration) -> Window {
    let (first, attempts): (Option<i64>, i64) = sqlx::query_as(
        store.sql("SELECT min(started_at), count(*) FROM attempts WHERE trigger_id > ?"),
    )
    .bind(after)
    .fetch_one(store.pool())
    .await
    .unwrap();
    let (last, jobs): (Option<i64>, i64) = sqlx::query_as(store.sql(
        "SELECT max(finished_at), count(*) FROM triggers WHERE id > ? AND state = 'succeeded'",
    ))
    .bind(after)
    .fetch_one(store.pool())
    .await
    .unwrap();
    let claims: i64 = sqlx::query_scalar(store.sql(
        "SELECT count(*) FROM (SELECT DISTINCT runner_id, started_at FROM attempts \
         WHERE trigger_id > ?) AS c",
    ))
    .bind(after)
    .fetch_one(store.pool())
    .await
    .unwrap();
    Window {
        jobs,
        attempts,
        ms: last.unwrap_or(0) - first.unwrap_or(0),
        wall,
        claims,
        costs: None,
    }
}

// ---- the floor -------------------------------------------------------------

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// One floor worker: claim 100, insert their attempts (one transaction),
/// complete them under their tokens (a second transaction), until nothing
/// is left. Both floors walk the claim index as Paddock does
/// (`triggers_pending`: the bench's one group and tenant, `recovery = 0`
/// spelled as the index's predicate is — without it, since migration
/// 0010, the floor could not use the index and sorted the backlog at
/// every claim, halving its rate).
async fn floor_worker(store: Store, owner: String) -> usize {
    let d = store.dialect();
    let skip = if d == Dialect::Postgres {
        " FOR UPDATE SKIP LOCKED"
    } else {
        ""
    };
    let claim = leak(d.sql_owned(format!(
        "WITH clock (now) AS (SELECT {SQLITE_NOW}) \
         UPDATE triggers SET state = 'running', lease_owner = ?1, \
             lease_until = (SELECT now FROM clock) + ?2, fencing_token = fencing_token + 1, \
             attempts = attempts + 1, updated_at = (SELECT now FROM clock) \
         WHERE id IN (SELECT id FROM triggers WHERE state = 'pending' AND recovery = 0 \
             AND resource_group = 'default' AND tenant = 't' \
             AND next_run_at <= (SELECT now FROM clock) \
             ORDER BY priority, next_run_at, id LIMIT CAST(?3 AS INTEGER){skip}) \
         RETURNING id, fencing_token, attempts, lease_until, updated_at"
    )));
    // All of a batch's fenced completions in one statement, each row
    // checked against its own token (what Paddock's group commit does).
    let complete = leak(d.multi_row(
        &format!(
            "UPDATE triggers SET state = 'succeeded', lease_owner = NULL, lease_until = NULL, \
                 finished_at = {SQLITE_NOW}, updated_at = {SQLITE_NOW} FROM ("
        ),
        "(?, ?)",
        FLOOR_BATCH,
        ") AS v WHERE triggers.id = v.column1 AND triggers.fencing_token = v.column2 \
           AND triggers.state = 'running'",
    ));
    let mut done = 0;
    loop {
        let mut tx = store.pool().begin_with(d.begin_write()).await.unwrap();
        let claimed: Vec<(i64, i64, i64, i64, i64)> = sqlx::query_as(claim)
            .bind(&owner)
            .bind(30_000i64)
            .bind(FLOOR_BATCH as i64)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        if claimed.is_empty() {
            tx.rollback().await.unwrap();
            return done;
        }
        let insert = d.multi_row(
            "INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, started_at, lease_until)",
            "(?, ?, ?, ?, ?, ?)",
            claimed.len(),
            "RETURNING id",
        );
        let mut q = sqlx::query_scalar(sqlx::AssertSqlSafe(insert));
        for (id, token, attempt_no, until, now) in &claimed {
            q = q
                .bind(*id)
                .bind(*attempt_no)
                .bind(&owner)
                .bind(*token)
                .bind(*now)
                .bind(*until);
        }
        let attempt_ids: Vec<i64> = q.fetch_all(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();

        let mut tx = store.pool().begin().await.unwrap();
        let mut q = sqlx::query(complete);
        for (id, token, ..) in &claimed {
            q = q.bind(*id).bind(*token);
        }
        for _ in claimed.len()..FLOOR_BATCH {
            q = q.bind(None::<i64>).bind(None::<i64>);
        }
        let n = q.execute(&mut *tx).await.unwrap().rows_affected();
        assert_eq!(n as usize, claimed.len(), "floor lost a trigger");
        let close = d.sql_owned(format!(
            "UPDATE attempts SET outcome = 'succeeded', ended_at = {SQLITE_NOW} WHERE id IN ({})",
            vec!["?"; attempt_ids.len()].join(", ")
        ));
        let mut q = sqlx::query(sqlx::AssertSqlSafe(close));
        for id in &attempt_ids {
            q = q.bind(*id);
        }
        q.execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        done += claimed.len();
    }
}

/// PostgreSQL's floor worker: the same work as a Paddock claim and group
/// commit, written as tightly as PostgreSQL allows — one statement claims
/// a batch and opens its attempts, one statement moves the batch's
/// triggers each under its own token and closes their attempts — on the
/// native driver.
async fn floor_worker_pg(pool: sqlx::PgPool, owner: String) -> usize {
    const NOW: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
    let claim = leak(format!(
        "WITH claimed AS (UPDATE triggers SET state = 'running', lease_owner = $1, \
             lease_until = {NOW} + $2, fencing_token = fencing_token + 1, \
             attempts = attempts + 1, updated_at = {NOW} \
         WHERE id IN (SELECT id FROM triggers WHERE state = 'pending' AND recovery = 0 \
             AND resource_group = 'default' AND tenant = 't' AND next_run_at <= {NOW} \
             ORDER BY priority, next_run_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) \
         RETURNING id, fencing_token, attempts, lease_until, updated_at), \
         opened AS (INSERT INTO attempts (trigger_id, attempt_no, runner_id, fencing_token, \
             started_at, lease_until) \
         SELECT id, attempts, $1, fencing_token, updated_at, lease_until FROM claimed \
         RETURNING id, trigger_id, fencing_token) \
         SELECT trigger_id, fencing_token, id FROM opened"
    ));
    let complete = leak(format!(
        "WITH ends AS (SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::BIGINT[]) \
             AS e (trigger_id, token, attempt_id)), \
         moved AS (UPDATE triggers SET state = 'succeeded', lease_owner = NULL, \
             lease_until = NULL, finished_at = {NOW}, updated_at = {NOW} FROM ends \
             WHERE triggers.id = ends.trigger_id AND triggers.fencing_token = ends.token \
             AND triggers.state = 'running' RETURNING triggers.id, triggers.fencing_token), \
         closed AS (UPDATE attempts SET outcome = 'succeeded', ended_at = {NOW} \
             FROM ends JOIN moved ON moved.id = ends.trigger_id AND moved.fencing_token = ends.token \
             WHERE attempts.id = ends.attempt_id AND attempts.fencing_token = ends.token) \
         SELECT count(*) FROM moved"
    ));
    let mut done = 0;
    loop {
        let claimed: Vec<(i64, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(claim))
            .bind(&owner)
            .bind(30_000i64)
            .bind(FLOOR_BATCH as i64)
            .fetch_all(&pool)
            .await
            .unwrap();
        if claimed.is_empty() {
            return done;
        }
        let column =
            |i: usize| -> Vec<i64> { claimed.iter().map(|c| [c.0, c.1, c.2][i]).collect() };
        let moved: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(complete))
            .bind(column(0))
            .bind(column(1))
            .bind(column(2))
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(moved as usize, claimed.len(), "floor lost a trigger");
        done += claimed.len();
    }
}

async fn floor(db: &Db<'_>, run: &str, sandbox: &Arc<Sandbox>, n: usize, workers: usize) -> Window {
    let url = db.fresh(run).await;
    let store = prepare(&url, sandbox).await;
    let after = insert_triggers(&store, run, n, Quotas::Off).await;
    let pg = match store.dialect() {
        Dialect::Postgres => Some(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(workers as u32)
                .connect(&url)
                .await
                .unwrap(),
        ),
        Dialect::Sqlite => None,
    };
    let meter = Meter::start(&store, &[]).await;
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let owner = format!("floor-{w}");
        match &pg {
            Some(pool) => tasks.spawn(floor_worker_pg(pool.clone(), owner)),
            None => tasks.spawn(floor_worker(store.clone(), owner)),
        };
    }
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        done += r.unwrap();
    }
    let wall = t.elapsed();
    assert_eq!(done, n);
    let costs = match meter {
        Some(m) => Some(m.end(&store, &[], n as i64).await),
        None => None,
    };
    if let Some(pool) = pg {
        pool.close().await;
    }
    let mut w = window(&store, after, wall).await;
    w.costs = costs;
    store.close().await;
    w
}

// ---- Paddock ---------------------------------------------------------------

/// Paddock with a `Runner` in this process.
async fn in_process(
    db: &Db<'_>,
    run: &str,
    sandbox: &Arc<Sandbox>,
    n: usize,
    concurrency: usize,
    quotas: Quotas,
) -> Window {
    let url = db.fresh(run).await;
    let store = prepare(&url, sandbox).await;
    quotas.apply(&store, sandbox, concurrency).await;
    let runner = Runner::new(
        store.clone(),
        sandbox.clone(),
        RunnerConfig {
            runner_id: "bench".into(),
            lease: Duration::from_secs(30),
            heartbeat_every: Duration::from_millis(7500),
            max_concurrency: concurrency,
            claim_batch: claim_batch(concurrency),
            poll_interval: Duration::from_millis(100),
            ..RunnerConfig::default()
        },
    );
    insert_triggers(&store, &format!("{run}-warm"), WARMUP, quotas).await;
    runner.run_until_idle().await.unwrap();
    let after = insert_triggers(&store, run, n, quotas).await;
    let meter = Meter::start(&store, &[]).await;
    let t = Instant::now();
    runner.run_until_idle().await.unwrap();
    let wall = t.elapsed();
    let costs = match meter {
        Some(m) => Some(m.end(&store, &[], n as i64).await),
        None => None,
    };
    let mut w = window(&store, after, wall).await;
    w.costs = costs;
    store.close().await;
    w
}

/// Paddock's own store calls per job without the sandbox, for the
/// breakdown: `trigger_claim_batch(batch)`, then the claim's ends — one
/// `attempt_finish` for a claim of one, one `attempt_finish_batch` for a
/// larger claim (the runner's group commit at its best) — until nothing is
/// left. Notes the mean time of one claim statement with the whole backlog
/// pending (the first tenth of the claims) and with little left (the last
/// tenth), and the finish time per job.
async fn store_calls(
    db: &Db<'_>,
    run: &str,
    sandbox: &Arc<Sandbox>,
    n: usize,
    batch: i64,
    quotas: Quotas,
    notes: &std::sync::Mutex<Vec<String>>,
) -> Window {
    let url = db.fresh(run).await;
    let store = prepare(&url, sandbox).await;
    quotas.apply(&store, sandbox, batch as usize).await;
    let after = insert_triggers(&store, run, n, quotas).await;
    let end = AttemptEnd::not_run();
    let (mut claim_times, mut finish_total) = (Vec::new(), Duration::ZERO);
    let t = Instant::now();
    loop {
        let c = Instant::now();
        let claims = store
            .trigger_claim_batch("calls", 30_000, batch, None)
            .await
            .unwrap();
        if claims.is_empty() {
            break;
        }
        claim_times.push(c.elapsed());
        let f = Instant::now();
        if batch == 1 {
            for claim in claims {
                store
                    .attempt_finish(&claim.lease("calls"), &end)
                    .await
                    .unwrap();
            }
        } else {
            // The whole claim ends in one group commit: the best case of
            // the runner's commit queue.
            let ends: Vec<_> = claims
                .iter()
                .map(|c| (c.lease("calls"), end.clone()))
                .collect();
            for r in store.attempt_finish_batch(&ends).await.unwrap() {
                r.unwrap();
            }
        }
        finish_total += f.elapsed();
    }
    let w = window(&store, after, t.elapsed()).await;
    let tenth = (claim_times.len() / 10).max(1);
    let mean_ms = |d: &[Duration]| {
        d.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / d.len().max(1) as f64
    };
    notes.lock().unwrap().push(format!(
        "{:<11} {:<14} claim of {batch:>2}: {:>6.2} ms with ~{n} pending, {:>6.2} ms with <{} \
         pending; finish: {:.3} ms per job",
        if store.dialect() == Dialect::Postgres {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        run,
        mean_ms(&claim_times[..tenth]),
        mean_ms(&claim_times[claim_times.len() - tenth..]),
        (n / 10).max(batch as usize),
        finish_total.as_secs_f64() * 1e3 / n.max(1) as f64,
    ));
    store.close().await;
    w
}

/// `paddock serve` processes, killed when dropped.
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free local port for a process's `--metrics` listener.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Scrape every `/metrics` address once a second until aborted (a
/// Prometheus that scrapes 15× more often than its default), failing
/// loudly if a scrape does.
fn scrape_every_second(addrs: Vec<String>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        loop {
            for addr in &addrs {
                let body = client
                    .get(format!("http://{addr}/metrics"))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status());
                if let Err(e) = body {
                    eprintln!("scrape of {addr} failed: {e}");
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

/// Paddock as `procs` `paddock serve` processes against one database; with
/// `metrics`, each serves `/metrics` and is scraped once a second.
#[allow(clippy::too_many_arguments)]
async fn processes(
    db: &Db<'_>,
    run: &str,
    sandbox: &Arc<Sandbox>,
    n: usize,
    procs: usize,
    concurrency: usize,
    metrics: bool,
    quotas: Quotas,
    logs: &Path,
) -> Window {
    let url = db.fresh(run).await;
    let store = prepare(&url, sandbox).await;
    quotas.apply(&store, sandbox, concurrency * procs).await;
    let mut servers = Servers(Vec::new());
    let mut errs = Vec::new();
    let mut metric_addrs = Vec::new();
    for p in 0..procs {
        let err = logs.join(format!("{run}-p{p}.err"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_paddock"));
        command
            .args(["--database-url", &url, "serve", "--runner-id"])
            .arg(format!("{run}-p{p}"));
        if metrics {
            let addr = format!("127.0.0.1:{}", free_port());
            command.args(["--metrics", &addr]);
            metric_addrs.push(addr);
        }
        let child = command
            .args([
                "--lease",
                "30s",
                "--poll",
                "100ms",
                "--concurrency",
                &concurrency.to_string(),
                "--claim-batch",
                &claim_batch(concurrency).to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start paddock serve");
        servers.0.push(child);
        errs.push(err);
    }
    // Ready once each has printed its banner (store open, sandbox built).
    let deadline = Instant::now() + Duration::from_secs(60);
    for err in &errs {
        while !std::fs::read_to_string(err)
            .unwrap_or_default()
            .contains("paddock serve: runner")
        {
            assert!(
                Instant::now() < deadline,
                "paddock serve did not start: {}",
                err.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Warm-up: every process loads and compiles the component once.
    let warm = insert_triggers(&store, &format!("{run}-warm"), WARMUP * procs, quotas).await;
    while succeeded_after(&store, warm).await < (WARMUP * procs) as i64 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let scraper = (!metric_addrs.is_empty()).then(|| scrape_every_second(metric_addrs));
    let after = insert_triggers(&store, run, n, quotas).await;
    let pids: Vec<u32> = servers.0.iter().map(Child::id).collect();
    let meter = Meter::start(&store, &pids).await;
    let t = Instant::now();
    let deadline = t + Duration::from_secs(600);
    loop {
        let done = succeeded_after(&store, after).await;
        if done >= n as i64 {
            break;
        }
        if Instant::now() > deadline {
            eprintln!("{run}: timed out with {done}/{n} succeeded");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let wall = t.elapsed();
    let costs = match meter {
        Some(m) => Some(m.end(&store, &pids, n as i64).await),
        None => None,
    };
    if let Some(scraper) = scraper {
        scraper.abort();
    }
    drop(servers);
    let mut w = window(&store, after, wall).await;
    w.costs = costs;
    store.close().await;
    w
}

// ---- the table -------------------------------------------------------------

struct Row {
    name: String,
    tag: String,
    pending: usize,
    paddock: Window,
    floor: [Window; 2],
}

impl Row {
    fn floor_rate(&self) -> f64 {
        (self.floor[0].rate() + self.floor[1].rate()) / 2.0
    }
}

/// Per job, for every PostgreSQL run: Paddock's and the floor's (first run).
fn print_costs(rows: &[Row]) {
    let measured: Vec<(String, &Costs)> = rows
        .iter()
        .flat_map(|r| {
            [
                (
                    format!("{} @{}", r.tag, r.pending),
                    r.paddock.costs.as_ref(),
                ),
                (
                    format!("{}_floor @{}", r.tag, r.pending),
                    r.floor[0].costs.as_ref(),
                ),
            ]
        })
        .filter_map(|(name, costs)| costs.map(|c| (name, c)))
        .collect();
    if measured.is_empty() {
        return;
    }
    println!();
    println!("PostgreSQL cost per job (WAL from pg_walinspect over the run; CPU from /proc)");
    println!(
        "{:<24} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6} {:>8} {:>9} {:>9} {:>6}  saturated",
        "run",
        "WAL rec",
        "WAL bytes",
        "idx ent",
        "heap ins",
        "heap upd",
        "HOT",
        "commits",
        "server us",
        "client us",
        "busy"
    );
    for (name, c) in measured {
        println!(
            "{:<24} {:>8.1} {:>9.0} {:>8.1} {:>8.2} {:>8.2} {:>6.2} {:>8.3} {:>9.1} {:>9.1} {:>5.0}%  {}",
            name,
            c.wal_records,
            c.wal_bytes,
            c.index_entries,
            c.heap_inserts,
            c.heap_updates,
            c.hot_updates,
            c.commits,
            c.server_cpu_us,
            c.client_cpu_us,
            c.machine_busy * 100.0,
            c.saturated()
        );
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "claim + complete throughput, no-op Wasm jobs (jobs/s over the DB-clock window first claim -> last finish)"
    );
    println!(
        "{:<54} {:>6} {:>9} {:>7} {:>10} {:>8} {:>19} {:>7} {:>9}",
        "configuration",
        "jobs",
        "attempts",
        "claim",
        "Paddock/s",
        "wall s",
        "floor/s (pre/post)",
        "ratio",
        "target"
    );
    for r in rows {
        let ratio = r.paddock.rate() / r.floor_rate();
        println!(
            "{:<54} {:>6} {:>9} {:>7.1} {:>10.0} {:>8.1} {:>9.0}/{:<9.0} {:>6.2}x {:>9}",
            r.name,
            r.paddock.jobs,
            r.paddock.attempts,
            r.paddock.attempts as f64 / r.paddock.claims.max(1) as f64,
            r.paddock.rate(),
            r.paddock.wall.as_secs_f64(),
            r.floor[0].rate(),
            r.floor[1].rate(),
            ratio,
            if ratio >= 0.5 {
                ">=0.5 ok"
            } else {
                "<0.5 MISS"
            }
        );
    }
    print_metrics_cost(rows);
    print_quotas_cost(rows);
}

/// Issue 19's figure: throughput with `/metrics` served and scraped over
/// the same configuration without (target ≥ 0.95×).
fn print_metrics_cost(rows: &[Row]) {
    print_on_off(rows, "metrics", 0.95, |tag| {
        tag.strip_suffix("_metrics").map(str::to_string)
    });
}

/// Issue 16's figure: throughput with quotas and fair shares on over the
/// same configuration with them off (target ≥ 0.9×): `sq_fair_inproc`
/// over `sq_inproc`, `pg_fair_serve1` over `pg_serve1`, ...
fn print_quotas_cost(rows: &[Row]) {
    print_on_off(rows, "quotas and fair shares", 0.9, |tag| {
        tag.contains("_fair_")
            .then(|| tag.replacen("_fair_", "_", 1))
    });
}

/// For each run whose tag `base_of` pairs with another run's (the same
/// configuration with `what` off), the ratio of their throughputs. Both
/// runs' floors are printed above; each run's own floor ratio is the
/// steadier comparison on a shared machine, so both are given.
fn print_on_off(rows: &[Row], what: &str, target: f64, base_of: impl Fn(&str) -> Option<String>) {
    for on in rows {
        let Some(base) = base_of(&on.tag) else {
            continue;
        };
        let Some(off) = rows.iter().find(|r| r.tag == base) else {
            continue;
        };
        let raw = on.paddock.rate() / off.paddock.rate();
        let by_floor =
            (on.paddock.rate() / on.floor_rate()) / (off.paddock.rate() / off.floor_rate());
        println!(
            "{what} on / off ({base}): {raw:.3}x raw, {by_floor:.3}x against each run's floor \
             (target >= {target})"
        );
    }
}

#[allow(clippy::too_many_arguments)]
async fn config<F>(
    rows: &mut Vec<Row>,
    name: String,
    db: &Db<'_>,
    tag: &str,
    sandbox: &Arc<Sandbox>,
    n: usize,
    workers: usize,
    paddock: F,
) where
    F: std::future::Future<Output = Window>,
{
    if !selected(tag) {
        return;
    }
    eprintln!("-- {name}: floor ({workers} worker(s)) ...");
    let f0 = floor(db, &format!("{tag}_{n}_floor_a"), sandbox, n, workers).await;
    eprintln!(
        "   floor {:.0} jobs/s ({} ms); Paddock ...",
        f0.rate(),
        f0.ms
    );
    let p = paddock.await;
    eprintln!(
        "   Paddock {:.0} jobs/s ({} jobs, {} ms); floor again ...",
        p.rate(),
        p.jobs,
        p.ms
    );
    let f1 = floor(db, &format!("{tag}_{n}_floor_b"), sandbox, n, workers).await;
    eprintln!("   floor {:.0} jobs/s", f1.rate());
    // For scripts/bench-peers.sh, which prints Paddock beside the peers.
    println!("RESULT {tag} {n} {:.0}", p.rate());
    println!(
        "RESULT {tag}_floor {n} {:.0}",
        (f0.rate() + f1.rate()) / 2.0
    );
    rows.push(Row {
        name,
        tag: tag.to_string(),
        pending: n,
        paddock: p,
        floor: [f0, f1],
    });
}

/// Whether `PADDOCK_BENCH_ONLY` picks the configuration `tag`: unset, the
/// database (`sqlite`, `pg`) or a prefix of the tag (`sq_inproc`,
/// `pg_serve3`, `sq_calls`, ...).
fn selected(tag: &str) -> bool {
    match std::env::var("PADDOCK_BENCH_ONLY")
        .unwrap_or_default()
        .as_str()
    {
        "" => true,
        "sqlite" => tag.starts_with("sq_"),
        only => tag.starts_with(only) || (only == "pg" && tag.starts_with("pg_")),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n_sqlite = env_or("PADDOCK_BENCH_JOBS_SQLITE", 10000usize);
    let pg_sizes: Vec<usize> = std::env::var("PADDOCK_BENCH_JOBS_PG")
        .unwrap_or_else(|_| "10000,100000".into())
        .split([',', ' '])
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    assert!(!pg_sizes.is_empty(), "PADDOCK_BENCH_JOBS_PG: no size");
    let conc = env_or("PADDOCK_BENCH_CONCURRENCY", 256usize);
    let only = std::env::var("PADDOCK_BENCH_ONLY").unwrap_or_default();
    let admin = std::env::var("PADDOCK_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let mut rows = Vec::new();
    let notes = std::sync::Mutex::new(Vec::new());
    let total = Instant::now();

    if only.is_empty() || only == "sqlite" || only.starts_with("sq_") {
        let db = Db::Sqlite(dir.path());
        config(
            &mut rows,
            format!("SQLite, in-process Runner (conc {conc})"),
            &db,
            "sq_inproc",
            &sandbox,
            n_sqlite,
            1,
            in_process(&db, "sq_inproc", &sandbox, n_sqlite, conc, Quotas::Off),
        )
        .await;
        config(
            &mut rows,
            format!("SQLite, in-process Runner (conc {conc}), quotas and fair shares on"),
            &db,
            "sq_fair_inproc",
            &sandbox,
            n_sqlite,
            1,
            in_process(&db, "sq_fair_inproc", &sandbox, n_sqlite, conc, Quotas::On),
        )
        .await;
        config(
            &mut rows,
            format!("SQLite, 1 x paddock serve (conc {conc})"),
            &db,
            "sq_serve1",
            &sandbox,
            n_sqlite,
            1,
            processes(
                &db,
                "sq_serve1",
                &sandbox,
                n_sqlite,
                1,
                conc,
                false,
                Quotas::Off,
                dir.path(),
            ),
        )
        .await;
        // Issue 19: the same with `/metrics` served and scraped each second.
        config(
            &mut rows,
            format!("SQLite, 1 x paddock serve (conc {conc}), /metrics scraped 1/s"),
            &db,
            "sq_serve1_metrics",
            &sandbox,
            n_sqlite,
            1,
            processes(
                &db,
                "sq_serve1_metrics",
                &sandbox,
                n_sqlite,
                1,
                conc,
                true,
                Quotas::Off,
                dir.path(),
            ),
        )
        .await;
        for (batch, quotas) in CALLS {
            let tag = quotas.calls_tag("sq", batch);
            config(
                &mut rows,
                format!(
                    "SQLite, store calls only: claim {batch} + finish{}",
                    quotas.label()
                ),
                &db,
                &tag,
                &sandbox,
                n_sqlite,
                1,
                store_calls(&db, &tag, &sandbox, n_sqlite, batch, quotas, &notes),
            )
            .await;
        }
    }
    if only.is_empty() || only == "pg" || only.starts_with("pg_") {
        let pg = Pg::create(&admin, "throughput").await;
        let db = Db::Pg(&pg);
        for (i, &n) in pg_sizes.iter().enumerate() {
            config(
                &mut rows,
                format!("PostgreSQL, in-process Runner (conc {conc}), {n} pending"),
                &db,
                "pg_inproc",
                &sandbox,
                n,
                PG_FLOOR_WORKERS,
                in_process(
                    &db,
                    &format!("pg_inproc_{i}"),
                    &sandbox,
                    n,
                    conc,
                    Quotas::Off,
                ),
            )
            .await;
            for procs in [1, 3] {
                let tag = format!("pg_serve{procs}");
                config(
                    &mut rows,
                    format!("PostgreSQL, {procs} x paddock serve (conc {conc}), {n} pending"),
                    &db,
                    &tag,
                    &sandbox,
                    n,
                    PG_FLOOR_WORKERS * procs,
                    processes(
                        &db,
                        &format!("{tag}_{i}"),
                        &sandbox,
                        n,
                        procs,
                        conc,
                        false,
                        Quotas::Off,
                        dir.path(),
                    ),
                )
                .await;
            }
            if i == 0 {
                let tag = "pg_serve1_metrics";
                config(
                    &mut rows,
                    format!("PostgreSQL, 1 x paddock serve (conc {conc}), {n} pending, /metrics scraped 1/s"),
                    &db,
                    tag,
                    &sandbox,
                    n,
                    PG_FLOOR_WORKERS,
                    processes(&db, tag, &sandbox, n, 1, conc, true, Quotas::Off, dir.path()),
                )
                .await;
                config(
                    &mut rows,
                    format!("PostgreSQL, in-process Runner (conc {conc}), {n} pending, quotas and fair shares on"),
                    &db,
                    "pg_fair_inproc",
                    &sandbox,
                    n,
                    PG_FLOOR_WORKERS,
                    in_process(&db, "pg_fair_inproc", &sandbox, n, conc, Quotas::On),
                )
                .await;
                for procs in [1, 3] {
                    let tag = format!("pg_fair_serve{procs}");
                    config(
                        &mut rows,
                        format!("PostgreSQL, {procs} x paddock serve (conc {conc}), {n} pending, quotas and fair shares on"),
                        &db,
                        &tag,
                        &sandbox,
                        n,
                        PG_FLOOR_WORKERS * procs,
                        processes(&db, &tag, &sandbox, n, procs, conc, false, Quotas::On, dir.path()),
                    )
                    .await;
                }
            }
        }
        // The breakdown is per call: 10,000 jobs say it (a claim of one at
        // a time through 100,000 would take minutes).
        let n_pg = pg_sizes[0].min(10_000);
        for (batch, quotas) in CALLS {
            let tag = quotas.calls_tag("pg", batch);
            config(
                &mut rows,
                format!(
                    "PostgreSQL, store calls only: claim {batch} + finish{}",
                    quotas.label()
                ),
                &db,
                &tag,
                &sandbox,
                n_pg,
                1,
                store_calls(&db, &tag, &sandbox, n_pg, batch, quotas, &notes),
            )
            .await;
        }
        pg.drop().await;
    }
    print_table(&rows);
    print_costs(&rows);
    println!(
        "claim = attempts per claim statement (mean). The 'store calls only' rows are a breakdown, \
         not Paddock: Paddock's own claim and finish calls, sequential, no Wasm."
    );
    println!("breakdown (store calls only, sequential, mean per call):");
    for note in notes.lock().unwrap().iter() {
        println!("  {note}");
    }
    println!(
        "floor: raw SQL, batches of {FLOOR_BATCH}. PostgreSQL: one statement claims a batch \
         with its attempts, one completes it (each trigger fenced by its token, attempts closed), \
         {PG_FLOOR_WORKERS} connections per Paddock process; SQLite: a claim + attempts \
         transaction and a completion transaction, one worker. \
         ratio = Paddock / mean(floor pre, post). 2 shared cores: compare ratios, not absolutes. \
         (total {:.0} s)",
        total.elapsed().as_secs_f64()
    );
}
