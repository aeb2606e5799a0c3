//! The embedded demo: a fresh SQLite database, the example components and
//! jobs, one trigger each, a runner until idle, and the table of results.
//! It checks each job ended the way it should and exits non-zero if not,
//! so the demo doubles as a smoke test of a fresh machine.

use super::{Host, print};
use anyhow::Context;
use clap::Args;
use paddock::lease::{Runner, RunnerConfig};
use paddock::model::ResourceGroup;
use paddock::node::{self, NodeConfig};
use paddock::store::prelude::*;
use paddock::store::{NewTrigger, StoreError, TriggerRecord};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct DemoArgs {
    /// Folder of example job manifests.
    #[arg(long, default_value = "examples/jobs")]
    examples: PathBuf,
    /// Folder of built guest components (for the forbidden-import check).
    #[arg(long, default_value = "target/guests")]
    guests: PathBuf,
    /// Database for the demo (default: a fresh SQLite file in a temporary
    /// folder, removed afterwards).
    #[arg(long = "db")]
    db: Option<String>,
}

/// (job, expected trigger state, expected error class)
const EXPECTED: &[(&str, &str, Option<&str>)] = &[
    ("hello", "succeeded", None),
    ("trap", "failed", Some("guest_panic")),
    ("spin", "failed", Some("fuel_exhausted")),
    ("hog", "failed", Some("memory_limit")),
];

pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let dir = tempfile_dir()?;
    let url = args
        .db
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", dir.join("demo.db").display()));
    println!("== Paddock demo on {0}", url);
    let host = Host::open(&url).await?;
    let actor = "demo";

    register(&host, &args, actor).await?;
    let triggers = run_manual_triggers(&host).await?;
    let ticked = run_ticker(&host, &args, &url, actor).await?;

    let entries = host.store.audit_list().await?;
    let verified = paddock::model::audit::verify_chain(&entries);
    println!(
        "== audit log: {} entries, chain {}",
        entries.len(),
        if verified.is_ok() {
            "verified"
        } else {
            "BROKEN"
        }
    );

    let mut ok = verified.is_ok();
    for ((job, state, class), t) in EXPECTED.iter().zip(&triggers) {
        if t.state != *state || t.error_class.as_deref() != *class {
            println!(
                "!! {2}: expected {3} {4:?}, got {} {:?}",
                t.state, t.error_class, job, state, class
            );
            ok = false;
        }
    }
    if ticked < 2 {
        println!(
            "!! ticker: expected at least 2 scheduled runs to succeed, got {0}",
            ticked
        );
        ok = false;
    }
    host.store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{}",
        if ok {
            "== demo OK: every job ended as expected"
        } else {
            "== demo FAILED"
        }
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("paddock-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The demo's group and jobs, and a component the host refuses.
async fn register(host: &Host, args: &DemoArgs, actor: &str) -> anyhow::Result<()> {
    host.registry
        .group_put(
            ResourceGroup {
                name: "tight".into(),
                fuel_per_attempt: 200_000_000,
                memory_bytes: 16 << 20,
                deadline_ms: 5_000,
                max_concurrency: 4,
                grants: "[]".into(),
                caps: Default::default(),
                capacity: Default::default(),
                aging_ms: paddock::model::group::DEFAULT_AGING_MS,
                shares: Default::default(),
            },
            actor,
        )
        .await?;
    // The example jobs' tenant may run in the group (groups admit no
    // tenant until an admin says so).
    host.registry
        .group_tenants("tight", &["demo".into()], &[], actor)
        .await?;
    println!("== resource groups");
    print::groups(&host.store.groups_list().await?);

    println!("== a component importing what the host does not provide is refused");
    let forbidden = args.guests.join("forbidden.wasm");
    match host.registry.component_push_file(&forbidden, actor).await {
        Ok(_) => anyhow::bail!("the forbidden component was accepted"),
        Err(e) => println!("   refused: {0}", e),
    }

    println!("== jobs");
    for (job, _, _) in EXPECTED {
        let path = args.examples.join(format!("{job}.toml"));
        let (id, outcome) = host
            .registry
            .job_apply_file(&path, actor)
            .await
            .with_context(|| format!("applying {}", path.display()))?;
        println!("   {1}: v{} ({2:?})", outcome.version(), id, outcome);
    }
    let (_, again) = host
        .registry
        .job_apply_file(&args.examples.join("hello.toml"), actor)
        .await?;
    println!("   re-applying hello.toml: {0:?} (idempotent)", again);
    Ok(())
}

/// One manual trigger of each example job, run until idle.
async fn run_manual_triggers(host: &Host) -> anyhow::Result<Vec<TriggerRecord>> {
    let mut ids = Vec::new();
    for (job, _, _) in EXPECTED {
        let params = if *job == "hello" {
            serde_json::json!({ "name": "paddock demo" })
        } else {
            serde_json::json!({})
        };
        let (t, _) = host
            .store
            .trigger_create(&NewTrigger::manual(job, params, None).by("demo"))
            .await?;
        ids.push(t.id);
    }
    println!("== running {} triggers", ids.len());
    let runner = Runner::new(
        host.store.clone(),
        host.sandbox.clone(),
        RunnerConfig::default(),
    );
    runner.run_until_idle().await?;

    let mut triggers = Vec::new();
    for id in &ids {
        triggers.push(host.store.trigger_get(*id).await?);
    }
    println!("== results");
    print::trigger_table(&triggers, &host.store).await?;
    Ok(triggers)
}

/// The `ticker` job on a node (scheduler and runner) for three seconds:
/// how many of its scheduled runs succeeded.
async fn run_ticker(host: &Host, args: &DemoArgs, url: &str, actor: &str) -> anyhow::Result<i64> {
    println!("== a scheduled job: scheduler and runner together for 3 seconds");
    let (_, ticker) = host
        .registry
        .job_apply_file(&args.examples.join("ticker.toml"), actor)
        .await?;
    println!("   ticker: v{} fires every second (UTC)", ticker.version());
    // A node, as `paddock serve` runs one, for three seconds.
    let mut config = NodeConfig::new(url).id("demo");
    config.scanner.tick = Duration::from_millis(250);
    config.scanner.lookahead = Duration::from_millis(500);
    config.sandbox.cache_dir = super::cache_dir();
    node::start(config)
        .await?
        .run_until(tokio::time::sleep(Duration::from_secs(3)))
        .await?;
    let ticks: Vec<(String, i64)> = sqlx::query_as(host.store.sql(
        "SELECT state, count(*) FROM triggers WHERE job_id = 'ticker' GROUP BY state ORDER BY state",
    ))
    .fetch_all(host.store.pool())
    .await
    // Through the store's error: sqlx's own text repeats its source.
    .map_err(StoreError::from)?;
    println!("   ticker triggers by state: {0:?}", ticks);
    let ticked = ticks
        .iter()
        .find(|(s, _)| s == "succeeded")
        .map(|(_, n)| *n)
        .unwrap_or(0);
    Ok(ticked)
}
