//! Migrations keep what is stored: a database created by an older Paddock
//! opens with the newest one and loses no row, no id and no state.

/// SQLite's 0008 rebuilds `triggers` (a CHECK cannot be altered in place);
/// only SQLite rebuilds tables, so the test lives here, named for it.
mod sqlite {
    use paddock::store::Store;
    use sqlx::migrate::Migrator;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use std::borrow::Cow;
    use std::path::Path;

    /// A database in `dir` as the migrations before `version` left it,
    /// with `seed`'s rows, then opened by this Paddock (every migration
    /// run, `version` among them).
    async fn opened_after(dir: &Path, version: i64, seed: &str) -> Store {
        let file = dir.join("old.db");
        let old = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&file)
                    .create_if_missing(true),
            )
            .await
            .unwrap();
        let mut migrator = Migrator::new(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../migrations/sqlite"
        )))
        .await
        .unwrap();
        assert!(
            migrator.migrations.iter().any(|m| m.version == version),
            "the test is about {version:04}"
        );
        migrator.migrations = Cow::Owned(
            migrator
                .migrations
                .iter()
                .filter(|m| m.version < version)
                .cloned()
                .collect(),
        );
        migrator.run(&old).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(seed.to_string()))
            .execute(&old)
            .await
            .unwrap();
        old.close().await;
        Store::open(&format!("sqlite://{}", file.display()))
            .await
            .unwrap()
    }

    /// The indexes on `triggers` a rebuild must re-create: those 0018 made
    /// again, then 0022's and 0030's.
    const REBUILT: [&str; 9] = [
        "triggers_job",
        "triggers_pending",
        "triggers_recovery",
        "triggers_manual",
        "triggers_running",
        "triggers_parked",
        "triggers_paused",
        "triggers_request",
        "triggers_backfill_waiting",
    ];

    /// The names of the indexes on `triggers`, each of `expected` among
    /// them.
    async fn trigger_indexes(store: &Store, expected: &[&str]) -> Vec<(String,)> {
        indexes_on(store, "triggers", expected).await
    }

    /// The names of the indexes on `table`, each of `expected` among them.
    async fn indexes_on(store: &Store, table: &str, expected: &[&str]) -> Vec<(String,)> {
        let indexes: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? \
             AND name NOT LIKE 'sqlite_autoindex%' ORDER BY name",
        )
        .bind(table)
        .fetch_all(store.pool())
        .await
        .unwrap();
        for index in expected {
            assert!(
                indexes.iter().any(|(name,)| name == index),
                "{index} is re-created: {indexes:?}"
            );
        }
        indexes
    }

    /// The rows a user of 0007 has: three triggers, and a fourth deleted, so
    /// the AUTOINCREMENT sequence is ahead of the largest id.
    const SEED: &str = "
        INSERT INTO resource_groups (name, fuel_per_attempt, memory_bytes, deadline_ms,
            max_concurrency, created_at, updated_at) VALUES ('g', 1, 1, 1, 1, 0, 0);
        INSERT INTO components (digest, size_bytes, bytes, manifest, pushed_by, pushed_at)
        VALUES ('c', 0, x'', '{}', 'test', 0);
        INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at)
        VALUES ('j', 't', 1, 0, 0);
        INSERT INTO plan_versions (job_id, version, digest, spec, component_digest,
            resource_group, created_by, created_at) VALUES ('j', 1, 'd', '{}', 'c', 'g', 'test', 0);
        INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, resource_group,
            origin, scheduled_at, state, next_run_at, fencing_token, attempts,
            created_at, updated_at)
        VALUES (1, 'j@1@v1', 'j', 1, 't', 'g', 'manual', 1, 'succeeded', 1, 1, 1, 1, 1),
               (2, 'j@2@v1', 'j', 1, 't', 'g', 'manual', 2, 'running', 2, 7, 3, 2, 2),
               (3, 'j@3@v1', 'j', 1, 't', 'g', 'manual', 3, 'pending', 3, 0, 0, 3, 3),
               (4, 'j@4@v1', 'j', 1, 't', 'g', 'manual', 4, 'pending', 4, 0, 0, 4, 4);
        DELETE FROM triggers WHERE id = 4;";

    #[tokio::test]
    async fn a_0007_database_opens_with_every_row_id_and_state_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened_after(dir.path(), 8, SEED).await;
        let rows: Vec<(i64, String, i64, i64)> =
            sqlx::query_as("SELECT id, state, fencing_token, attempts FROM triggers ORDER BY id")
                .fetch_all(store.pool())
                .await
                .unwrap();
        assert_eq!(
            rows,
            vec![
                (1, "succeeded".into(), 1, 1),
                (2, "running".into(), 7, 3),
                (3, "pending".into(), 0, 0),
            ]
        );
        let sequence: (i64,) =
            sqlx::query_as("SELECT seq FROM sqlite_sequence WHERE name = 'triggers'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(sequence.0, 4, "a deleted id is never handed out again");

        let unknown_state = sqlx::query("UPDATE triggers SET state = 'done' WHERE id = 3")
            .execute(store.pool())
            .await
            .expect_err("the CHECK survives the rebuild");
        assert!(
            unknown_state
                .to_string()
                .contains("CHECK constraint failed"),
            "{unknown_state}"
        );
        // Every index made since 0008, re-created by 0018's rebuild (but
        // `triggers_succeeded`, which 0024 replaced with `success_counts`).
        let indexes = trigger_indexes(&store, &REBUILT[..7]).await;
        assert!(
            !indexes.iter().any(|(name,)| name == "triggers_succeeded"),
            "0024 dropped triggers_succeeded: {indexes:?}"
        );
        // 0018's state is known to the CHECK.
        sqlx::query("UPDATE triggers SET state = 'paused' WHERE id = 3")
            .execute(store.pool())
            .await
            .unwrap();
    }

    /// The rows a user of 0033 has that 0034 re-keys by tenant: a job
    /// with a plan, a schedule, a skipped fire time, two triggers (one
    /// deleted, so the sequence is ahead) and a closed job gate.
    const SEED_0033: &str = "
        INSERT INTO resource_groups (name, fuel_per_attempt, memory_bytes, deadline_ms,
            max_concurrency, created_at, updated_at) VALUES ('g', 1, 1, 1, 1, 0, 0);
        INSERT INTO components (digest, size_bytes, bytes, manifest, pushed_by, pushed_at)
        VALUES ('c', 0, x'', '{}', 'test', 0);
        INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at)
        VALUES ('nightly', 'acme', 1, 0, 0);
        INSERT INTO plan_versions (job_id, version, digest, spec, component_digest,
            resource_group, created_by, created_at, job_type)
        VALUES ('nightly', 1, 'd', '{}', 'c', 'g', 'test', 0, 'report');
        INSERT INTO job_schedules (job_id, plan_version, shard, spec, tenant, resource_group,
            priority, active_from, updated_at) VALUES ('nightly', 1, 0, '{}', 'acme', 'g', 0, 0, 0);
        INSERT INTO skipped_fires (job_id, plan_version, scheduled_at, reason, recorded_at)
        VALUES ('nightly', 1, 5, 'misfire_skip', 5);
        INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, resource_group,
            origin, scheduled_at, state, next_run_at, fencing_token, attempts, request_key,
            created_at, updated_at)
        VALUES (7, 'nightly@1@v1', 'nightly', 1, 'acme', 'g', 'manual', 1, 'running', 1, 3, 2,
                'deploy-1', 1, 1),
               (8, 'nightly@2@v1', 'nightly', 1, 'acme', 'g', 'manual', 2, 'pending', 2, 0, 0,
                NULL, 2, 2);
        DELETE FROM triggers WHERE id = 8;
        INSERT INTO gates (kind, value, reason, closed_by, closed_at)
        VALUES ('job', 'nightly', 'maintenance', 'ops', 1);";

    #[tokio::test]
    async fn a_0033_database_keys_jobs_by_tenant_and_keeps_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened_after(dir.path(), 34, SEED_0033).await;
        let pool = store.pool();
        let one = |sql: &'static str| async move {
            sqlx::query_as::<_, (String,)>(sql)
                .fetch_one(pool)
                .await
                .unwrap()
                .0
        };
        assert_eq!(one("SELECT tenant FROM plan_versions").await, "acme");
        assert_eq!(one("SELECT job_type FROM plan_versions").await, "report");
        assert_eq!(one("SELECT tenant FROM skipped_fires").await, "acme");
        assert_eq!(one("SELECT tenant FROM job_schedules").await, "acme");
        assert_eq!(
            one("SELECT value FROM gates WHERE kind = 'job'").await,
            "acme/nightly",
            "a job gate names the job with its tenant"
        );
        let kept: (i64, String, i64, i64, Option<String>) =
            sqlx::query_as("SELECT id, state, fencing_token, attempts, request_key FROM triggers")
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!(kept, (7, "running".into(), 3, 2, Some("deploy-1".into())));
        let sequence: (i64,) =
            sqlx::query_as("SELECT seq FROM sqlite_sequence WHERE name = 'triggers'")
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!(sequence.0, 8, "a deleted id is never handed out again");

        // Another tenant's job of the same id, with the same plan key, is
        // another job; the same tenant's second one is still refused.
        sqlx::raw_sql(
            "INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at)
             VALUES ('nightly', 'globex', 1, 0, 0);
             INSERT INTO plan_versions (tenant, job_id, version, digest, spec, component_digest,
                 resource_group, created_by, created_at)
             VALUES ('globex', 'nightly', 1, 'd', '{}', 'c', 'g', 'test', 0);
             INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group,
                 origin, scheduled_at, state, next_run_at, created_at, updated_at)
             VALUES ('nightly@1@v1', 'nightly', 1, 'globex', 'g', 'manual', 1, 'pending', 1, 1, 1);",
        )
        .execute(pool)
        .await
        .unwrap();
        let twice = sqlx::query(
            "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group,
                 origin, scheduled_at, state, next_run_at, created_at, updated_at)
             VALUES ('nightly@1@v1', 'nightly', 1, 'acme', 'g', 'manual', 1, 'pending', 1, 1, 1)",
        )
        .execute(pool)
        .await
        .expect_err("a plan key is unique within its tenant");
        assert!(twice.to_string().contains("UNIQUE"), "{twice}");
        let orphan = sqlx::query(
            "INSERT INTO triggers (plan_key, job_id, plan_version, tenant, resource_group,
                 origin, scheduled_at, state, next_run_at, created_at, updated_at)
             VALUES ('nightly@9@v1', 'nightly', 1, 'initech', 'g', 'manual', 9, 'pending', 9, 1, 1)",
        )
        .execute(pool)
        .await
        .expect_err("a trigger's plan is its own tenant's");
        assert!(orphan.to_string().contains("FOREIGN KEY"), "{orphan}");
        trigger_indexes(&store, &REBUILT).await;
    }

    /// A 0037 database's effects: two, one deleted so the sequence is
    /// ahead of the largest id.
    const SEED_0037: &str = "
        INSERT INTO resource_groups (name, fuel_per_attempt, memory_bytes, deadline_ms,
            max_concurrency, created_at, updated_at) VALUES ('g', 1, 1, 1, 1, 0, 0);
        INSERT INTO components (digest, size_bytes, bytes, manifest, pushed_by, pushed_at)
        VALUES ('c', 0, x'', '{}', 'test', 0);
        INSERT INTO jobs (job_id, tenant, latest_version, created_at, updated_at)
        VALUES ('nightly', 'acme', 1, 0, 0);
        INSERT INTO plan_versions (tenant, job_id, version, digest, spec, component_digest,
            resource_group, created_by, created_at, job_type)
        VALUES ('acme', 'nightly', 1, 'd', '{}', 'c', 'g', 'test', 0, 'report');
        INSERT INTO triggers (id, plan_key, job_id, plan_version, tenant, resource_group,
            origin, scheduled_at, state, next_run_at, created_at, updated_at)
        VALUES (4, 'nightly@1@v1', 'nightly', 1, 'acme', 'g', 'manual', 1, 'succeeded', 1, 1, 1);
        INSERT INTO effects (id, tenant, idempotency_key, downstream_key, trigger_id, connector,
            action, params_digest, request_id, fencing_token, state, sends, unknown_at,
            resolved_by, created_at, updated_at)
        VALUES (3, 'acme', 'k-3', 'acme/k-3', 4, 'ledger', 'RES-1/charge', 'd', 'r', 2,
                'succeeded', 2, 7, 'query', 1, 9),
               (5, 'acme', 'k-5', 'acme/k-5', 4, 'ledger', 'RES-1/charge', 'd', 'r', 2,
                'unknown', 1, 8, NULL, 1, 9);
        DELETE FROM effects WHERE id = 5;";

    #[tokio::test]
    async fn a_0037_database_refuses_an_effect_state_outside_the_machine_and_keeps_every_effect() {
        let dir = tempfile::tempdir().unwrap();
        let store = opened_after(dir.path(), 38, SEED_0037).await;
        let pool = store.pool();
        let kept: (i64, String, String, i64, Option<i64>, Option<String>) = sqlx::query_as(
            "SELECT id, idempotency_key, state, sends, unknown_at, resolved_by FROM effects",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(
            kept,
            (
                3,
                "k-3".into(),
                "succeeded".into(),
                2,
                Some(7),
                Some("query".into())
            )
        );
        let sequence: (i64,) =
            sqlx::query_as("SELECT seq FROM sqlite_sequence WHERE name = 'effects'")
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!(sequence.0, 5, "a deleted id is never handed out again");
        let bogus = sqlx::query("UPDATE effects SET state = 'compensated' WHERE id = 3")
            .execute(pool)
            .await
            .expect_err("a state outside the machine is refused");
        assert!(bogus.to_string().contains("effects_state_known"), "{bogus}");
        let indexes = indexes_on(
            &store,
            "effects",
            &["effects_compensates", "effects_state", "effects_trigger"],
        )
        .await;
        assert_eq!(indexes.len(), 3, "{indexes:?}");
    }
}
