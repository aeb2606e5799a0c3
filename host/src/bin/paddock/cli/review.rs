//! What a security reviewer runs: `paddock audit capabilities` (every
//! component, its imports judged against the grants of each group that
//! runs it, its users and the connectors it reaches) and `paddock
//! component diff A B` (what a new version adds or drops).

use super::Host;
use anyhow::Context;
use paddock::model::CapabilityManifest;
use paddock::model::review::{ManifestDiff, diff as manifest_diff};
use paddock::registry::report::{self, ComponentReport, TenantGrants};
use paddock::store::prelude::*;

/// `paddock audit capabilities [--format text|json] [--by component|tenant]`
pub async fn capabilities(host: &Host, format: &str, by: &str) -> anyhow::Result<()> {
    format_ok(format)?;
    if by_tenant(by)? {
        print_tenant_grants(&report::tenant_grants(&host.store).await?, format)
    } else {
        print_capabilities(&report::capabilities(&host.store).await?, format)
    }
}

/// `--by`: true for `tenant`, false for `component`.
pub fn by_tenant(by: &str) -> anyhow::Result<bool> {
    match by {
        "tenant" => Ok(true),
        "component" => Ok(false),
        other => anyhow::bail!("--by must be component or tenant, not '{other}'"),
    }
}

/// What each tenant's jobs may be granted, group by group.
pub fn print_tenant_grants(reports: &[TenantGrants], format: &str) -> anyhow::Result<()> {
    if format == "json" {
        super::print::json(&reports)?;
        return Ok(());
    }
    for t in reports {
        let who = if t.tenant == "*" {
            "every tenant (*)".to_string()
        } else {
            format!("tenant {}", t.tenant)
        };
        if t.groups.is_empty() {
            println!(
                "{0}: admitted to no group (its jobs cannot be applied)",
                who
            );
            continue;
        }
        println!("{0}:", who);
        for g in &t.groups {
            let grants = if g.grants.is_empty() {
                "no grants".to_string()
            } else {
                g.grants.join(", ")
            };
            println!(
                "  group {0} (admitted {1}): {2}",
                g.group, g.admitted, grants
            );
            for (connector, credential) in &g.credentials {
                let shown = credential.as_deref().unwrap_or("no credential");
                println!("    connector {0}: {1}", connector, shown);
            }
        }
    }
    Ok(())
}

/// `--format`: text or json.
pub fn format_ok(format: &str) -> anyhow::Result<()> {
    if !matches!(format, "text" | "json") {
        anyhow::bail!("--format must be text or json, not '{format}'");
    }
    Ok(())
}

/// The capability report, from the database or `GET /v1/capabilities`.
pub fn print_capabilities(reports: &[ComponentReport], format: &str) -> anyhow::Result<()> {
    match format {
        "json" => super::print::json(&reports)?,
        "text" => reports.iter().for_each(print_component),
        other => anyhow::bail!("--format must be text or json, not '{other}'"),
    }
    Ok(())
}

fn print_component(c: &ComponentReport) {
    println!(
        "component sha256:{}  ({:.1} MB, pushed by {} at {})",
        c.digest,
        c.size_bytes as f64 / 1e6,
        c.pushed_by,
        c.pushed_at
    );
    if c.used_by.is_empty() {
        println!("  used by: no job (imports judged against no group)");
    }
    for u in &c.used_by {
        println!(
            "  used by: job {} v{} (tenant {}, group {}){}",
            u.job,
            u.version,
            u.tenant,
            u.group,
            if u.latest { ", latest" } else { "" }
        );
    }
    println!("  imports ({}):", c.imports.len());
    for i in &c.imports {
        if i.in_groups.is_empty() {
            println!("    {}", i.name);
        }
        for (group, v) in &i.in_groups {
            println!(
                "    {:<44} [{3}] {} {}",
                i.name,
                if v.granted { "GRANTED" } else { "denied " },
                v.why,
                group
            );
        }
    }
    println!("  exports: {}", c.exports.join(", "));
    for r in &c.connectors {
        println!(
            "  connector {} (job {}/{}, group {}): {}, {}, {}",
            r.connector,
            r.tenant,
            r.job,
            r.group,
            if r.granted { "granted" } else { "NOT granted" },
            if r.configured {
                "configured"
            } else {
                "not configured"
            },
            r.secret
                .as_deref()
                .map_or("no credential".to_string(), |s| format!("credential {s}"))
        );
    }
    println!();
}

/// `paddock component diff A B`: what B adds or drops relative to A.
pub async fn diff(host: &Host, a: &str, b: &str) -> anyhow::Result<()> {
    let (a, old) = manifest_of(host, a).await?;
    let (b, new) = manifest_of(host, b).await?;
    print_diff(&a, &b, &manifest_diff(&old, &new));
    Ok(())
}

/// What B adds or drops, from the database or `GET
/// /v1/components/{a}/diff/{b}`.
pub fn print_diff(a: &str, b: &str, d: &ManifestDiff) {
    println!("sha256:{0} → sha256:{1}", a, b);
    if d.is_empty() {
        println!("  the same capabilities");
        return;
    }
    for name in &d.imports_added {
        println!("  + import {0}", name);
    }
    for name in &d.imports_removed {
        println!("  - import {0}", name);
    }
    for (name, changes) in &d.imports_changed {
        println!("  ~ import {1}: {}", changes.join(" "), name);
    }
    for name in &d.exports_added {
        println!("  + export {0}", name);
    }
    for name in &d.exports_removed {
        println!("  - export {0}", name);
    }
}

/// A stored component by digest or a unique prefix of one (8+ hex digits).
async fn manifest_of(host: &Host, digest: &str) -> anyhow::Result<(String, CapabilityManifest)> {
    let digest = digest.trim_start_matches("sha256:");
    if digest.len() < 8 {
        anyhow::bail!("'{digest}': give at least 8 hex digits of a component digest");
    }
    let matches: Vec<_> = host
        .store
        .components_list()
        .await?
        .into_iter()
        .filter(|c| c.digest.starts_with(digest))
        .collect();
    let component = match matches.as_slice() {
        [one] => one,
        [] => anyhow::bail!("no component sha256:{digest}"),
        _ => anyhow::bail!(
            "sha256:{digest} matches {} components; give more digits",
            matches.len()
        ),
    };
    let manifest = serde_json::from_str(&component.manifest)
        .with_context(|| format!("stored manifest of sha256:{} unreadable", component.digest))?;
    Ok((component.digest.clone(), manifest))
}
