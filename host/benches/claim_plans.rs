//! The plans of PostgreSQL's two hot statements — the claim and the group
//! commit (`paddock::store::hot_statements()`) — at several backlog sizes:
//! evidence that their cost stays flat from 1,000 to 1,000,000 pending
//! triggers whatever the statistics say.
//!
//! For each size, in a fresh schema: the migrations run, `autovacuum` is
//! switched off on `triggers` and `attempts` for this benchmark's schema
//! (so no ANALYZE can run behind its back), both tables are analyzed while
//! empty, and both statements are prepared and executed once with
//! `plan_cache_mode = force_generic_plan`, so a generic plan built on the
//! empty tables is cached ("generic@empty"). Then N due `pending` triggers
//! arrive in one `INSERT ... SELECT ... FROM generate_series` (the burst)
//! and two statistics situations are measured:
//!
//! - `burst`: no ANALYZE since the burst — the last one saw empty tables
//!   (no column statistics; the production situation before autovacuum
//!   comes round);
//! - `analyzed`: after `ANALYZE triggers, attempts`.
//!
//! In each: the claim's candidate scan (limit 100; the client chooses the
//! batch from it and claims it by ids, a statement of key lookups) under
//! `EXPLAIN (ANALYZE, BUFFERS)` in a transaction rolled back afterwards (so
//! the backlog does not change), 5 times; then 100 triggers are claimed for
//! real and their group commit is explained the same way. Each statement
//! is measured, in the hot pool's session (`paddock::store::HOT_SESSION`:
//! no sequential or bitmap scans, hash or merge joins or avoidable sorts),
//! as a custom plan, as a generic plan prepared in that situation (the
//! pool's prepared statements switch to it after five runs), and — at
//! `burst` — as the generic plan cached on the empty tables.
//!
//! Printed: one table of size x situation x statement x plan: the median
//! execution time, the median planning time, shared buffers hit+read
//! (the top node plus any data-modifying CTE the query does not read; the
//! foreign-key triggers' reads are not in EXPLAIN's counts), the most rows
//! any one scan of `triggers`/`attempts` produced (index scans stop after
//! their batch; a sequential scan would read the backlog), whether a
//! sequential scan of a hot table appears, the most rows any Sort node
//! took in (the lanes' `row_number()` sorts at most a batch), and the plan
//! shape (legend below the table: every node, in plan order). Then the
//! ratio of the largest size's time to the smallest's (target: ~1x).
//!
//! Run: `cargo bench -p paddock --bench claim_plans` (after
//! `bash scripts/build-guests.sh`). Needs PostgreSQL:
//! `PADDOCK_BENCH_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) is the admin connection; a
//! fresh database is created for the run and dropped at the end.
//! Env: `PADDOCK_PLANS_SIZES` (default `1000 50000 1000000`),
//! `PADDOCK_PLANS_RUNS` (EXPLAIN runs per row, default 5),
//! `PADDOCK_PLANS_VERBOSE=1` (print every plan: the median run of each
//! row). Otherwise one plan of each shape that reads more than a batch (a
//! sequential scan of `triggers`, or a sequential scan of `attempts` or a
//! sort taking in more rows than the claim's lanes hold) is printed.

mod common;
use common::env_or;
use common::pg::Pg;
use paddock::sandbox::{Sandbox, SandboxConfig};
use paddock::store::{HOT_SESSION, Store, hot_statements};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};
use std::sync::Arc;
use std::time::Instant;

/// Triggers per claim (the runner's default batch).
const LIMIT: i64 = 100;
const LEASE_MS: i64 = 30_000;
const OWNER: &str = "plans";
const EXPLAIN: &str = "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT)";
/// The tables that grow with the backlog.
const HOT: [&str; 2] = ["triggers", "attempts"];
/// A Sort taking in more rows than this sorts more than the claim's lanes
/// can hold (retry lane + the two fresh walks, each at most `LIMIT`).
const BACKLOG_SORT: f64 = (3 * LIMIT) as f64;
const CLAIM_TYPES: &str = "bigint, bigint";
const FINISH_TYPES: &str = "bigint[], bigint[], text[], bytea[], text[], text[], bigint[], \
     boolean[], bigint[], text[], bigint[], bigint[], bigint[], text[]";

/// The claim's candidates (its walk of the backlog: what this bench
/// explains as "claim"); the choice is the client's.
fn claim_sql() -> &'static str {
    hot_statements()[0].1
}

/// The claim of a chosen batch, by ids.
fn claim_ids_sql() -> &'static str {
    hot_statements()[1].1
}

fn finish_sql() -> &'static str {
    hot_statements()[2].1
}

// ---- the database ----------------------------------------------------------

/// Migrate the schema at `url` (through `Store::open`) and register the
/// `noop` job as `bench`.
async fn prepare(url: &str, sandbox: &Arc<Sandbox>) {
    let store = Store::open(url).await.unwrap();
    common::register_bench_job(&store, sandbox).await;
    store.close().await;
}

async fn exec(conn: &mut PgConnection, sql: &str) {
    sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

// ---- one plan, parsed ------------------------------------------------------

/// One node of an `EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT)` plan.
#[derive(Default)]
struct Node {
    /// Column where the node's name starts: a child is 6 deeper.
    depth: usize,
    /// As printed, e.g. `Index Scan using triggers_pending on triggers triggers_2`.
    name: String,
    /// Actual rows per loop, and loops.
    rows: f64,
    loops: f64,
    /// Rows removed by filters, per loop.
    removed: f64,
    hit: u64,
    read: u64,
    /// Temporary-file blocks read + written (a sort or hash that spilled).
    temp: u64,
    /// The CTE this node is the root of.
    cte: Option<String>,
}

impl Node {
    /// The relation a scan or a modification is on (`... on <rel> [alias]`).
    fn relation(&self) -> Option<&str> {
        let (_, after) = self.name.rsplit_once(" on ")?;
        after.split_whitespace().next()
    }

    fn on_hot_table(&self) -> bool {
        self.relation().is_some_and(|r| HOT.contains(&r))
    }

    /// The name without the alias: what the shape compares.
    fn kind(&self) -> String {
        match self.name.rsplit_once(" on ") {
            Some((head, after)) => format!(
                "{head} on {}",
                after.split_whitespace().next().unwrap_or("")
            ),
            None => self.name.clone(),
        }
    }
}

struct Plan {
    text: String,
    nodes: Vec<Node>,
    exec_ms: f64,
    plan_ms: f64,
}

fn number_after(s: &str, key: &str) -> Option<f64> {
    let start = s.find(key)? + key.len();
    let rest = &s[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn parse(text: String) -> Plan {
    let mut nodes: Vec<Node> = Vec::new();
    let mut cte = None;
    let mut planning = false;
    let (mut exec_ms, mut plan_ms) = (f64::NAN, 0.0);
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let node = if i == 0 {
            Some((0, trimmed))
        } else {
            trimmed.strip_prefix("->  ").map(|rest| (indent + 4, rest))
        };
        if let Some((depth, rest)) = node {
            let name = rest.split("  (").next().unwrap_or(rest).trim().to_string();
            let (rows, loops) = match rest.find("(actual time=") {
                Some(at) => (
                    number_after(&rest[at..], " rows=").unwrap_or(0.0),
                    number_after(&rest[at..], " loops=").unwrap_or(0.0),
                ),
                None => (0.0, 0.0), // never executed
            };
            nodes.push(Node {
                depth,
                name,
                rows,
                loops,
                cte: cte.take(),
                ..Node::default()
            });
        } else if let Some(v) = trimmed.strip_prefix("Planning Time:") {
            plan_ms = number_after(v, " ").unwrap_or(0.0);
        } else if let Some(v) = trimmed.strip_prefix("Execution Time:") {
            exec_ms = number_after(v, " ").unwrap_or(f64::NAN);
        } else if trimmed == "Planning:" {
            planning = true;
        } else if planning {
            // The planner's own buffers: not the statement's.
        } else if let Some(name) = trimmed.strip_prefix("CTE ") {
            cte = Some(name.trim().to_string());
        } else if let Some(b) = trimmed.strip_prefix("Buffers:") {
            if let Some(n) = nodes.last_mut() {
                let shared = b
                    .split(',')
                    .map(str::trim)
                    .find(|part| part.starts_with("shared"))
                    .unwrap_or("");
                n.hit += number_after(shared, "hit=").unwrap_or(0.0) as u64;
                n.read += number_after(shared, "read=").unwrap_or(0.0) as u64;
                if let Some(temp) = b.split(',').map(str::trim).find(|p| p.starts_with("temp")) {
                    n.temp += number_after(temp, "read=").unwrap_or(0.0) as u64
                        + number_after(temp, "written=").unwrap_or(0.0) as u64;
                }
            }
        } else if trimmed.starts_with("Rows Removed by")
            && let Some(n) = nodes.last_mut()
        {
            n.removed += number_after(trimmed, ": ").unwrap_or(0.0);
        }
    }
    Plan {
        text,
        nodes,
        exec_ms,
        plan_ms,
    }
}

impl Plan {
    /// Shared buffers hit, read, and temporary blocks read + written by the
    /// statement: the top node's (which
    /// include every CTE the query reads) plus the roots of CTEs nothing
    /// reads (data-modifying ones, run to completion after the query).
    fn buffers(&self) -> (u64, u64, u64) {
        let read_ctes: Vec<&str> = self
            .nodes
            .iter()
            .filter_map(|n| n.name.strip_prefix("CTE Scan on "))
            .filter_map(|rest| rest.split_whitespace().next())
            .collect();
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| {
                *i == 0
                    || n.cte
                        .as_deref()
                        .is_some_and(|name| !read_ctes.contains(&name))
            })
            .fold((0, 0, 0), |(h, r, t), (_, n)| {
                (h + n.hit, r + n.read, t + n.temp)
            })
    }

    /// The most rows one scan of a hot table produced (plus those its
    /// filters removed), over all its loops.
    fn hot_rows(&self) -> f64 {
        self.nodes
            .iter()
            .filter(|n| n.name.contains("Scan") && n.on_hot_table())
            .map(|n| (n.rows + n.removed) * n.loops)
            .fold(0.0, f64::max)
    }

    /// Sequential scans of a hot table: (table, rows it produced plus
    /// those its filter removed).
    fn hot_seq_scans(&self) -> Vec<(&str, f64)> {
        self.nodes
            .iter()
            .filter(|n| n.name.contains("Seq Scan on") && n.on_hot_table())
            .map(|n| (n.relation().unwrap_or(""), (n.rows + n.removed) * n.loops))
            .collect()
    }

    /// The seq-scan column: `-`, or the most rows per hot table, e.g.
    /// `triggers 5000`.
    fn seq_column(&self) -> String {
        let seq = self.hot_seq_scans();
        let parts: Vec<String> = HOT
            .iter()
            .filter_map(|t| {
                seq.iter()
                    .filter(|(r, _)| r == t)
                    .map(|(_, rows)| *rows)
                    .reduce(f64::max)
                    .map(|rows| format!("{t} {rows}"))
            })
            .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(", ")
        }
    }

    /// The most rows any Sort took in (its child's output), if any sorts.
    fn sort_in(&self) -> Option<f64> {
        let mut most = None::<f64>;
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name != "Sort" && n.name != "Incremental Sort" {
                continue;
            }
            let child = self.nodes[i + 1..]
                .iter()
                .take_while(|c| c.depth > n.depth)
                .find(|c| c.depth == n.depth + 6);
            let rows = child.map_or(0.0, |c| c.rows * c.loops);
            most = Some(most.map_or(rows, |m| m.max(rows)));
        }
        most
    }

    /// The plan's shape: in plan order, every node that decides what a
    /// statement reads — scans of tables and indexes, joins, sorts,
    /// aggregates, modifications (CTE and subquery scans, `Limit`,
    /// `LockRows`, `Hash`, `Append`, `WindowAgg`, ... left out).
    fn shape(&self) -> String {
        const PLUMBING: [&str; 11] = [
            "CTE Scan on ",
            "Subquery Scan on ",
            "Function Scan on ",
            "Result",
            "Aggregate",
            "Append",
            "Hash",
            "Limit",
            "LockRows",
            "WindowAgg",
            "Materialize",
        ];
        self.nodes
            .iter()
            .map(Node::kind)
            .filter(|k| {
                !PLUMBING.iter().any(|p| {
                    if p.ends_with(' ') {
                        k.starts_with(p)
                    } else {
                        k == p
                    }
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether the plan reads more than a batch: a sequential scan of
    /// `triggers` (the backlog's table), one of `attempts` producing more
    /// than the lanes hold, or a sort of more than that.
    fn suspicious(&self) -> bool {
        self.hot_seq_scans()
            .iter()
            .any(|(t, rows)| *t == "triggers" || *rows > BACKLOG_SORT)
            || self.sort_in().is_some_and(|r| r > BACKLOG_SORT)
    }
}

// ---- running the statements ------------------------------------------------

/// 100 triggers claimed for real: what their group commit needs.
struct Batch {
    ids: Vec<i64>,
    tokens: Vec<i64>,
    attempt_ids: Vec<i64>,
}

impl Batch {
    /// The group commit's arguments as SQL literals, for `EXECUTE`: every
    /// end `succeeded`, as a no-op job's would be.
    fn literals(&self) -> String {
        let n = self.ids.len();
        let list = |v: &[i64]| {
            let items: Vec<String> = v.iter().map(i64::to_string).collect();
            format!("'{{{}}}'", items.join(","))
        };
        let each = |s: &str| format!("'{{{}}}'", vec![s; n].join(","));
        [
            list(&self.ids),
            list(&self.tokens),
            each("succeeded"),
            each("NULL"),
            each("NULL"),
            each("NULL"),
            each("NULL"),
            each("t"),
            list(&self.attempt_ids),
            each("succeeded"),
            each("0"),
            each("0"),
            each("1"),
            each("\"\""),
        ]
        .join(", ")
    }
}

/// What one row of the table runs under `EXPLAIN`.
enum Stmt<'a> {
    /// The claim, its parameters bound (a custom plan).
    Claim,
    /// The group commit of `Batch`, its arrays bound (a custom plan).
    Finish(&'a Batch),
    /// `EXECUTE name(args)` of a prepared statement, under
    /// `plan_cache_mode = force_generic_plan`.
    Execute(String),
}

/// One `EXPLAIN (ANALYZE, BUFFERS)` of `stmt`, in a transaction rolled
/// back afterwards.
async fn explain_once(conn: &mut PgConnection, stmt: &Stmt<'_>) -> Plan {
    let mut tx = conn.begin().await.unwrap();
    let rows = match stmt {
        Stmt::Claim => {
            sqlx::query(AssertSqlSafe(format!("{EXPLAIN} {}", claim_sql())))
                .bind(None::<i64>)
                .bind(LIMIT)
                .fetch_all(&mut *tx)
                .await
        }
        Stmt::Finish(b) => {
            let n = b.ids.len();
            sqlx::query(AssertSqlSafe(format!("{EXPLAIN} {}", finish_sql())))
                .bind(&b.ids)
                .bind(&b.tokens)
                .bind(vec![Some("succeeded".to_string()); n])
                .bind(vec![None::<Vec<u8>>; n])
                .bind(vec![None::<String>; n])
                .bind(vec![None::<String>; n])
                .bind(vec![None::<i64>; n])
                .bind(vec![true; n])
                .bind(&b.attempt_ids)
                .bind(vec![Some("succeeded".to_string()); n])
                .bind(vec![0i64; n])
                .bind(vec![0i64; n])
                .bind(vec![1i64; n])
                .bind(vec![Some(String::new()); n])
                .fetch_all(&mut *tx)
                .await
        }
        Stmt::Execute(e) => {
            sqlx::raw_sql(AssertSqlSafe(format!("{EXPLAIN} {e}")))
                .fetch_all(&mut *tx)
                .await
        }
    }
    .unwrap_or_else(|e| panic!("EXPLAIN failed: {e}"));
    tx.rollback().await.unwrap();
    let text: Vec<String> = rows
        .iter()
        .map(|r| r.get::<String, _>("QUERY PLAN"))
        .collect();
    parse(text.join("\n"))
}

/// One row of the table: `runs` plans of one statement, by execution time.
struct Measured {
    size: usize,
    stats: &'static str,
    statement: &'static str,
    plan: &'static str,
    runs: Vec<Plan>,
}

impl Measured {
    fn median(&self) -> &Plan {
        &self.runs[self.runs.len() / 2]
    }

    fn median_plan_ms(&self) -> f64 {
        let mut v: Vec<f64> = self.runs.iter().map(|p| p.plan_ms).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    fn label(&self) -> String {
        format!(
            "{} pending, {}, {}, {} plan",
            self.size, self.stats, self.statement, self.plan
        )
    }
}

/// The measurements of one size, in table order.
struct Bench<'a> {
    conn: &'a mut PgConnection,
    size: usize,
    runs: usize,
    out: Vec<Measured>,
}

impl Bench<'_> {
    async fn measure(
        &mut self,
        stats: &'static str,
        statement: &'static str,
        plan: &'static str,
        stmt: Stmt<'_>,
    ) {
        let generic = matches!(stmt, Stmt::Execute(_));
        if generic {
            exec(self.conn, "SET plan_cache_mode = force_generic_plan").await;
        }
        let mut runs = Vec::with_capacity(self.runs);
        for _ in 0..self.runs {
            runs.push(explain_once(self.conn, &stmt).await);
        }
        if generic {
            exec(self.conn, "SET plan_cache_mode = force_custom_plan").await;
        }
        runs.sort_by(|a, b| a.exec_ms.total_cmp(&b.exec_ms));
        self.out.push(Measured {
            size: self.size,
            stats,
            statement,
            plan,
            runs,
        });
    }

    /// Claim `LIMIT` triggers for real (committed): the candidates, the
    /// first `LIMIT` of them in (priority, next_run_at, id) order (one
    /// tenant, so the fair-share order), then their claim.
    async fn claim(&mut self) -> Batch {
        let mut tx = self.conn.begin().await.unwrap();
        let candidates = sqlx::query(claim_sql())
            .bind(None::<i64>)
            .bind(LIMIT)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        let now: i64 = candidates[0].get("now");
        // One row per lane's queue, its candidates as arrays.
        let mut order: Vec<(i64, i64, i64)> = candidates
            .iter()
            .flat_map(|r| {
                let (ids, priorities, next_runs): (Vec<i64>, Vec<i64>, Vec<i64>) =
                    (r.get("ids"), r.get("priorities"), r.get("next_runs"));
                priorities
                    .into_iter()
                    .zip(next_runs)
                    .zip(ids)
                    .map(|((p, n), id)| (p, n, id))
            })
            .collect();
        order.sort_unstable();
        let ids: Vec<i64> = order.iter().take(LIMIT as usize).map(|o| o.2).collect();
        let rows = sqlx::query(claim_ids_sql())
            .bind(now)
            .bind(OWNER)
            .bind(LEASE_MS)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(rows.len() as i64, LIMIT.min(self.size as i64));
        let col = |name: &str| rows.iter().map(|r| r.get::<i64, _>(name)).collect();
        Batch {
            ids: col("id"),
            tokens: col("fencing_token"),
            attempt_ids: col("attempt_id"),
        }
    }

    /// Prepare both statements as `<prefix>_claim` and `<prefix>_finish`.
    async fn prepare(&mut self, prefix: &str) {
        exec(
            self.conn,
            &format!("PREPARE {prefix}_claim ({CLAIM_TYPES}) AS {}", claim_sql()),
        )
        .await;
        exec(
            self.conn,
            &format!(
                "PREPARE {prefix}_finish ({FINISH_TYPES}) AS {}",
                finish_sql()
            ),
        )
        .await;
    }

    async fn deallocate(&mut self, prefix: &str) {
        exec(self.conn, &format!("DEALLOCATE {prefix}_claim")).await;
        exec(self.conn, &format!("DEALLOCATE {prefix}_finish")).await;
    }

    /// One statistics situation: claim (custom), claim 100 for real, group
    /// commit (custom), then both as generic plans — freshly prepared, and
    /// those in `cached` (prepared earlier) if any.
    async fn situation(&mut self, stats: &'static str, cached: Option<(&str, &'static str)>) {
        self.measure(stats, "claim", "custom", Stmt::Claim).await;
        let batch = self.claim().await;
        self.measure(stats, "group commit", "custom", Stmt::Finish(&batch))
            .await;
        let claim_args = format!("(NULL, {LIMIT})");
        let finish_args = format!("({})", batch.literals());
        let fresh = format!("g_{stats}");
        self.prepare(&fresh).await;
        let mut generics = vec![(fresh.clone(), "generic")];
        if let Some((prefix, label)) = cached {
            generics.push((prefix.to_string(), label));
        }
        for (prefix, label) in generics {
            self.measure(
                stats,
                "claim",
                label,
                Stmt::Execute(format!("EXECUTE {prefix}_claim{claim_args}")),
            )
            .await;
            self.measure(
                stats,
                "group commit",
                label,
                Stmt::Execute(format!("EXECUTE {prefix}_finish{finish_args}")),
            )
            .await;
        }
        self.deallocate(&fresh).await;
    }
}

/// What the planner knows about `triggers`: pg_class's row and page
/// counts, the pages on disk, and how many columns have statistics.
async fn planner_view(conn: &mut PgConnection) -> String {
    let (reltuples, relpages, pages, columns): (f32, i32, i64, i64) = sqlx::query_as(
        "SELECT c.reltuples, c.relpages, \
             pg_relation_size(c.oid) / current_setting('block_size')::BIGINT, \
             (SELECT count(*) FROM pg_stats s WHERE s.schemaname = current_schema() \
                 AND s.tablename = 'triggers') \
         FROM pg_class c WHERE c.oid = 'triggers'::regclass",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    format!(
        "triggers: pg_class.reltuples={reltuples} relpages={relpages}, {pages} pages on disk, \
         column statistics for {columns} columns"
    )
}

async fn one_size(pg: &Pg, sandbox: &Arc<Sandbox>, size: usize, runs: usize) -> Vec<Measured> {
    let url = pg.schema(&format!("s{size}")).await;
    prepare(&url, sandbox).await;
    let mut conn = PgConnection::connect(&url).await.unwrap();
    // The hot pool's session (`paddock::store::HOT_SESSION`); custom plans
    // unless a row says generic.
    for (name, value) in HOT_SESSION {
        exec(&mut conn, &format!("SET {name} = {value}")).await;
    }
    exec(&mut conn, "SET plan_cache_mode = force_custom_plan").await;
    // No ANALYZE but ours; then the statistics of empty tables. (The ALTER
    // comes first: it invalidates cached plans, the ANALYZE too.)
    exec(
        &mut conn,
        "ALTER TABLE triggers SET (autovacuum_enabled = off); \
         ALTER TABLE attempts SET (autovacuum_enabled = off); \
         ANALYZE triggers; ANALYZE attempts",
    )
    .await;
    let mut bench = Bench {
        conn: &mut conn,
        size,
        runs,
        out: Vec::new(),
    };
    // Generic plans built on the empty tables, kept across the burst.
    bench.prepare("g_empty").await;
    exec(bench.conn, "SET plan_cache_mode = force_generic_plan").await;
    exec(
        bench.conn,
        &format!(
            "BEGIN; EXECUTE g_empty_claim(NULL, {LIMIT}); \
             EXECUTE g_empty_finish({}); ROLLBACK",
            vec!["'{}'"; 14].join(", ")
        ),
    )
    .await;
    exec(bench.conn, "SET plan_cache_mode = force_custom_plan").await;

    let t = Instant::now();
    let inserted = sqlx::query(
        "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group, origin, \
             scheduled_at, params, state, priority, next_run_at, created_at, updated_at) \
         SELECT 'bench@' || g, 'bench', 1, 't', 'default', 'manual', 0, '{}', 'pending', 0, 0, 0, 0 \
         FROM generate_series(1, $1::BIGINT) AS g",
    )
    .bind(size as i64)
    .execute(&mut *bench.conn)
    .await
    .unwrap()
    .rows_affected();
    assert_eq!(inserted as usize, size);
    eprintln!(
        "   {size} pending inserted in {:.1} s; {}",
        t.elapsed().as_secs_f64(),
        planner_view(bench.conn).await
    );
    bench
        .situation("burst", Some(("g_empty", "generic@empty")))
        .await;
    bench.deallocate("g_empty").await;

    exec(bench.conn, "ANALYZE triggers; ANALYZE attempts").await;
    eprintln!("   after ANALYZE: {}", planner_view(bench.conn).await);
    bench.situation("analyzed", None).await;
    let out = bench.out;
    conn.close().await.ok();
    out
}

// ---- the table -------------------------------------------------------------

fn print_table(rows: &[Measured], verbose: bool) {
    let mut shapes: Vec<String> = Vec::new();
    println!();
    println!(
        "EXPLAIN (ANALYZE, BUFFERS) of the PostgreSQL hot statements: a claim's candidate scan \
         (limit {LIMIT}; the batch is chosen by the client) and the group commit of {LIMIT} ends; \
         medians of {} runs, each rolled back",
        rows.first().map_or(0, |r| r.runs.len())
    );
    println!(
        "{:>9} {:<9} {:<13} {:<14} {:>8} {:>8} {:>8} {:>18} {:>9} {:<24} {:>9}  shape(s)",
        "pending",
        "stats",
        "statement",
        "plan",
        "exec ms",
        "(max)",
        "plan ms",
        "buffers",
        "hot rows",
        "seq scan (rows)",
        "sort in",
    );
    // Per shape: the row (largest size first) whose plan is shown for it.
    let mut example: Vec<Option<(&Measured, &Plan)>> = Vec::new();
    for r in rows {
        let p = r.median();
        let (hit, read, temp) = p.buffers();
        let mut seen: Vec<String> = Vec::new();
        for run in &r.runs {
            let shape = run.shape();
            let i = match shapes.iter().position(|s| *s == shape) {
                Some(i) => i,
                None => {
                    shapes.push(shape);
                    example.push(None);
                    shapes.len() - 1
                }
            };
            if example[i].is_none_or(|(e, _)| e.size <= r.size) {
                example[i] = Some((r, run));
            }
            if !seen.contains(&shape_name(i)) {
                seen.push(shape_name(i));
            }
        }
        println!(
            "{:>9} {:<9} {:<13} {:<14} {:>8.3} {:>8.3} {:>8.3} {:>18} {:>9} {:<24} {:>9}  {}",
            r.size,
            r.stats,
            r.statement,
            r.plan,
            p.exec_ms,
            r.runs.last().map_or(f64::NAN, |p| p.exec_ms),
            r.median_plan_ms(),
            if temp == 0 {
                format!("{hit}+{read}")
            } else {
                format!("{hit}+{read} t{temp}")
            },
            p.hot_rows(),
            p.seq_column(),
            match p.sort_in() {
                None => "-".to_string(),
                Some(n) if n > BACKLOG_SORT => format!("{n} !"),
                Some(n) => format!("{n}"),
            },
            seen.join(",")
        );
    }
    println!(
        "exec ms = Execution Time (median; the slowest run next to it); plan ms = Planning Time \
         (for a prepared generic plan: taking it from the plan cache); buffers = shared \
         hit+read (without the foreign-key checks'), tN = N temporary blocks (a spilled sort); hot rows = most rows one scan of \
         triggers/attempts produced; seq scan = Seq Scans of triggers/attempts (most rows); \
         sort in = most rows one Sort took in ('!' = more than {BACKLOG_SORT}, more than the lanes \
         hold); generic@empty = the generic plan cached before the burst, on the empty tables; \
         shape(s) = the shapes of the runs' plans (legend below)"
    );
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.size).collect();
    sizes.dedup();
    let (small, large) = (sizes[0], sizes[sizes.len() - 1]);
    let find = |size: usize, stats: &str, statement: &str, plan: &str| {
        rows.iter().find(|r| {
            r.size == size && r.stats == stats && r.statement == statement && r.plan == plan
        })
    };
    let total = |r: &Measured| {
        let (h, rd, _) = r.median().buffers();
        (h + rd) as f64
    };
    println!();
    println!(
        "median exec ms by backlog, (ratio to {small} pending); buffers: {large} vs {small} \
         pending (target: flat, ~1x):"
    );
    for statement in ["claim", "group commit"] {
        for (stats, plan) in [
            ("burst", "custom"),
            ("analyzed", "custom"),
            ("burst", "generic"),
            ("analyzed", "generic"),
            ("burst", "generic@empty"),
        ] {
            let Some(base) = find(small, stats, statement, plan) else {
                continue;
            };
            let cells: Vec<String> = sizes
                .iter()
                .filter_map(|&n| find(n, stats, statement, plan))
                .map(|r| {
                    let ms = r.median().exec_ms;
                    if r.size == small {
                        format!("{}: {ms:.2}", r.size)
                    } else {
                        format!("{}: {ms:.2} ({:.2}x)", r.size, ms / base.median().exec_ms)
                    }
                })
                .collect();
            let buffers = find(large, stats, statement, plan)
                .map(|r| format!("{:.2}x", total(r) / total(base).max(1.0)))
                .unwrap_or_default();
            println!(
                "  {statement:<13} {stats:<9} {plan:<14} {}   buffers {buffers}",
                cells.join(" | ")
            );
        }
    }
    let ratio = |stats: &str| match (
        find(small, stats, "claim", "custom"),
        find(large, stats, "claim", "custom"),
    ) {
        (Some(a), Some(b)) => format!("{:.2}x", b.median().exec_ms / a.median().exec_ms),
        _ => "-".into(),
    };
    println!(
        "claim, custom plan (the hot pool's), {large} vs {small} pending: {} right after the \
         burst, {} after ANALYZE (target: ~1x)",
        ratio("burst"),
        ratio("analyzed")
    );
    println!();
    println!(
        "plan shapes (in plan order: scans, joins, sorts, aggregates, modifications; aliases dropped):"
    );
    for (i, s) in shapes.iter().enumerate() {
        println!("  {}: {s}", shape_name(i));
    }
    // Whole plans: every row's median run with PADDOCK_PLANS_VERBOSE=1;
    // otherwise one run of each shape that reads more than a batch (from
    // the largest backlog that had it).
    for r in rows {
        if verbose {
            println!();
            println!("-- {} (median run):", r.label());
            println!("{}", r.median().text);
        }
    }
    if !verbose {
        for (i, e) in example.iter().enumerate() {
            if let Some((r, p)) = e.filter(|(_, p)| p.suspicious()) {
                println!();
                println!(
                    "-- shape {} (reads more than a batch), e.g. {}:",
                    shape_name(i),
                    r.label()
                );
                println!("{}", p.text);
            }
        }
    }
}

/// `A`..`Z`, then `S26`, ...
fn shape_name(i: usize) -> String {
    if i < 26 {
        char::from(b'A' + i as u8).to_string()
    } else {
        format!("S{i}")
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<usize> = env_or("PADDOCK_PLANS_SIZES", "1000 50000 1000000".to_string())
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("PADDOCK_PLANS_SIZES: numbers"))
        .collect();
    let runs = env_or("PADDOCK_PLANS_RUNS", 5usize).max(1);
    let verbose = env_or("PADDOCK_PLANS_VERBOSE", 0u8) == 1;
    let admin = std::env::var("PADDOCK_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let total = Instant::now();
    let pg = Pg::create(&admin, "plans").await;
    let mut rows = Vec::new();
    for &size in &sizes {
        eprintln!("-- {size} pending ...");
        rows.extend(one_size(&pg, &sandbox, size, runs).await);
    }
    pg.drop().await;
    print_table(&rows, verbose);
    println!(
        "(autovacuum off on the benchmark's triggers/attempts so that 'burst' stays unanalyzed; \
         2 shared cores: compare ratios, not absolutes; total {:.0} s)",
        total.elapsed().as_secs_f64()
    );
}
