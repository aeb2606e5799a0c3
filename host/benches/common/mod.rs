//! Helpers the process benchmarks share (`throughput`, `takeover`).

use std::path::PathBuf;

/// An environment variable parsed as `T`, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn guest(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/guests")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/build-guests.sh` first",
        path.display()
    );
    path
}

/// `url` with its database name replaced by `db` (query string kept).
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{db}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}
/// Used by `throughput` only; the other benches that share `common` do not.
#[allow(dead_code)]
pub mod meter;
/// Used by `throughput` and `claim_plans`.
#[allow(dead_code)]
pub mod pg;

/// Register the benches' job: `bench`, the no-op guest, in the `default`
/// group — whose configured concurrency is raised to its limit, out of the way, so the
/// benches measure the host and not the group limit (the claim still
/// counts each group's room, as in production).
#[allow(dead_code)]
pub async fn register_bench_job(
    store: &paddock::store::Store,
    sandbox: &std::sync::Arc<paddock::sandbox::Sandbox>,
) {
    let registry = paddock::registry::Registry::new(store.clone(), sandbox.clone());
    let mut group = paddock::store::ReadStore::group_get(store, "default")
        .await
        .unwrap()
        .expect("the default group");
    group.max_concurrency = paddock::model::bounds::CONCURRENCY.max;
    registry.group_put(group, "bench").await.unwrap();
    registry
        .job_apply(
            &format!(
                "id = \"bench\"\ntenant = \"t\"\ncomponent = \"{}\"\n",
                guest("noop").display()
            ),
            std::path::Path::new("."),
            "bench",
        )
        .await
        .unwrap();
}
