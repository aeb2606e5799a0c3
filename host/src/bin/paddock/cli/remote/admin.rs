//! `--server` for the admin commands: tokens, groups, tenants,
//! connectors and their secrets, unit prices — each on its endpoint,
//! printed by the local command's functions.

use super::Client;
use crate::cli::exceptions::{ConnectorCmd, print_connectors, set_record};
use crate::cli::groups::{GroupCmd, TenantCmd, print_grants, print_group, print_set};
use crate::cli::print;
use crate::cli::report::{PriceCmd, price_changes, print_prices};
use crate::cli::secrets::{SecretCmd, print_secrets, read_value};
use crate::cli::tokens::{TokenCmd, print_created, print_revoked, print_tokens};
use anyhow::anyhow;
use paddock::api::wire::{GroupSetResponse, GroupView, TenantRequest, TokenRequest, TokenResponse};
use paddock::model::ResourceGroup;
use paddock::model::group::TenantQuota;
use paddock::model::identity::Role;
use paddock::model::report::Prices;
use paddock::registry::groups_file::GroupSpec;
use paddock::store::{ConnectorRecord, SecretView, TokenView};
use serde::Deserialize;

/// `paddock token ...`
pub async fn token(client: &Client, cmd: TokenCmd) -> anyhow::Result<()> {
    match cmd {
        TokenCmd::Create {
            name,
            role,
            tenant,
            expires,
        } => {
            let role = Role::parse(&role).map_err(|e| anyhow!("--role: {e}"))?;
            let request = TokenRequest {
                name,
                role,
                tenant,
                expires,
            };
            let t: TokenResponse = client
                .send(client.post("/v1/tokens").json(&request))
                .await?;
            print_created(&t.name, role, &t.fingerprint, t.expires_at, &t.token);
        }
        TokenCmd::List => {
            let tokens: Vec<TokenView> = client.send(client.get("/v1/tokens")).await?;
            print_tokens(&tokens);
        }
        TokenCmd::Revoke { name } => {
            let answer: serde_json::Value = client
                .send(client.delete(&format!("/v1/tokens/{}", segment(&name))))
                .await?;
            print_revoked(&name, answer["revoked"].as_bool().unwrap_or(false));
        }
    }
    Ok(())
}

/// `POST /v1/groups`' answer.
#[derive(Deserialize)]
struct Applied {
    groups: Vec<GroupSetResponse>,
    tenants: Vec<TenantQuota>,
}

/// `POST /v1/groups/{name}/grants`' answer.
#[derive(Deserialize)]
struct Grants {
    grants: Vec<String>,
}

/// `paddock group ...`
pub async fn group(client: &Client, cmd: GroupCmd) -> anyhow::Result<()> {
    match cmd {
        GroupCmd::Set {
            name,
            fuel,
            memory,
            deadline,
            concurrency,
            connector_rate,
            service_time,
            db_connections,
            memory_budget,
            working_set,
            aging,
            grants,
            min_share,
            recovery_share,
            ramp_every,
            caps,
        } => {
            let mut spec = GroupSpec {
                name: name.clone(),
                fuel: Some(fuel),
                memory: Some(memory),
                deadline: Some(deadline),
                concurrency: Some(concurrency),
                connector_rate,
                service_time,
                db_connections,
                memory_budget,
                working_set,
                grants,
                aging: Some(aging),
                min_share: Some(min_share),
                recovery_share: Some(recovery_share),
                ramp_every: Some(ramp_every),
                ..GroupSpec::default()
            };
            caps.fill(&mut spec);
            let path = format!("/v1/groups/{}", segment(&name));
            let set: GroupSetResponse = client.send(client.put(&path).json(&spec)).await?;
            print_set(&set.group, set.effective_concurrency, &set.bound_by);
        }
        GroupCmd::Apply { file } => {
            let groups = std::fs::read_to_string(&file)
                .map_err(|e| anyhow!("cannot read '{}': {e}", file.display()))?;
            let applied: Applied = client
                .send(
                    client
                        .post("/v1/groups")
                        .json(&serde_json::json!({ "groups": groups })),
                )
                .await?;
            print::tenants(&applied.tenants);
            for g in applied.groups {
                print_set(&g.group, g.effective_concurrency, &g.bound_by);
            }
        }
        GroupCmd::Grant { name, grants } => grant(client, &name, grants, vec![]).await?,
        GroupCmd::Revoke { name, grants } => grant(client, &name, vec![], grants).await?,
        GroupCmd::Allow { name, tenants } => admit(client, &name, tenants, vec![]).await?,
        GroupCmd::Disallow { name, tenants } => admit(client, &name, vec![], tenants).await?,
        GroupCmd::List => {
            let groups: Vec<ResourceGroup> = client.send(client.get("/v1/groups")).await?;
            print::groups(&groups);
        }
        GroupCmd::Show { name } => {
            let view: GroupView = client
                .send(client.get(&format!("/v1/groups/{}", segment(&name))))
                .await?;
            print_group(&view);
        }
    }
    Ok(())
}

async fn grant(
    client: &Client,
    name: &str,
    add: Vec<String>,
    remove: Vec<String>,
) -> anyhow::Result<()> {
    let path = format!("/v1/groups/{}/grants", segment(name));
    let now: Grants = client
        .send(
            client
                .post(&path)
                .json(&serde_json::json!({ "add": add, "remove": remove })),
        )
        .await?;
    print_grants(name, &now.grants);
    Ok(())
}

/// `group allow` / `group disallow` over the API.
async fn admit(
    client: &Client,
    name: &str,
    allow: Vec<String>,
    disallow: Vec<String>,
) -> anyhow::Result<()> {
    #[derive(serde::Deserialize)]
    struct Admitted {
        tenants: Vec<String>,
    }
    let path = format!("/v1/groups/{}/tenants", segment(name));
    let now: Admitted = client
        .send(
            client
                .post(&path)
                .json(&serde_json::json!({ "allow": allow, "disallow": disallow })),
        )
        .await?;
    crate::cli::groups::print_tenants_of(name, &now.tenants);
    Ok(())
}

/// `paddock tenant ...`
pub async fn tenant(client: &Client, cmd: TenantCmd) -> anyhow::Result<()> {
    match cmd {
        TenantCmd::Set {
            name,
            weight,
            max_in_flight,
            triggers_per_minute,
            fuel_per_hour,
        } => {
            let request = TenantRequest {
                weight,
                max_in_flight,
                triggers_per_minute,
                fuel_per_hour,
            };
            let path = format!("/v1/tenants/{}", segment(&name));
            let set: TenantQuota = client.send(client.put(&path).json(&request)).await?;
            print::tenants(&[set]);
        }
        TenantCmd::List => {
            let tenants: Vec<TenantQuota> = client.send(client.get("/v1/tenants")).await?;
            print::tenants(&tenants);
        }
    }
    Ok(())
}

/// `paddock connector ...`
pub async fn connector(client: &Client, cmd: ConnectorCmd) -> anyhow::Result<()> {
    match cmd {
        set @ ConnectorCmd::Set { .. } => {
            let record = set_record(set)?;
            let path = format!("/v1/connectors/{}", segment(&record.name));
            let _: ConnectorRecord = client.send(client.put(&path).json(&record)).await?;
            println!("connector {} set", record.name);
        }
        ConnectorCmd::List => {
            let connectors: Vec<ConnectorRecord> =
                client.send(client.get("/v1/connectors")).await?;
            // Fingerprints are an admin's to read: another role's list
            // shows none.
            let secrets: Vec<SecretView> = client
                .send(client.get("/v1/connectors/secrets"))
                .await
                .unwrap_or_default();
            print_connectors(&connectors, &secrets);
        }
        ConnectorCmd::Secret(cmd) => secret(client, cmd).await?,
    }
    Ok(())
}

async fn secret(client: &Client, cmd: SecretCmd) -> anyhow::Result<()> {
    match cmd {
        SecretCmd::Set {
            connector,
            header,
            from_env,
            from_file,
        } => {
            // The value is read here, as locally, and goes in the body.
            let value = read_value(from_env, from_file)?;
            let path = format!("/v1/connectors/{}/secret", segment(&connector));
            let set: serde_json::Value = client
                .send(
                    client
                        .put(&path)
                        .json(&serde_json::json!({ "header": header, "value": value })),
                )
                .await?;
            println!(
                "connector {1} secret set: {}",
                set["secret"].as_str().unwrap_or("?"),
                connector
            );
        }
        SecretCmd::Clear { connector } => {
            let path = format!("/v1/connectors/{}/secret", segment(&connector));
            let _: serde_json::Value = client.send(client.delete(&path)).await?;
            println!("connector {0} secret cleared", connector);
        }
        SecretCmd::List => {
            let secrets: Vec<SecretView> =
                client.send(client.get("/v1/connectors/secrets")).await?;
            print_secrets(&secrets);
        }
        // The key file is the server host's: rotating it is a local act.
        SecretCmd::RotateKey => anyhow::bail!(
            "connector secret rotate-key runs on the host that holds the key file \
             (PADDOCK_SECRET_KEY_FILE), without --server"
        ),
    }
    Ok(())
}

/// `paddock price ...`
pub async fn price(client: &Client, cmd: PriceCmd) -> anyhow::Result<()> {
    let prices: Prices = match cmd {
        PriceCmd::Set(args) => {
            client
                .send(client.put("/v1/prices").json(&price_changes(&args)))
                .await?
        }
        PriceCmd::List => client.send(client.get("/v1/prices")).await?,
    };
    print_prices(&prices)
}

/// A name as one path segment (`/` and the like percent-encoded).
pub fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' | b'@' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
