//! `paddock connector secret set|clear|list|rotate-key`: connector
//! credentials. The value is read from an environment variable, a file or
//! stdin — never from the command line, where `ps` and shell history would
//! keep it — and no command prints it: only its header and keyed
//! fingerprint. Values are sealed at rest under the host key in
//! `PADDOCK_SECRET_KEY_FILE`; `rotate-key` replaces that key.

use super::Host;
use anyhow::Context;
use clap::Subcommand;
use paddock::model::secret::ConnectorSecret;
use paddock::model::time::{from_millis, rfc3339};
use paddock::store::SecretView;
use paddock::store::prelude::*;
use std::io::Read;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum SecretCmd {
    /// Set or rotate a connector's credential (audited, by fingerprint).
    /// Without --header it is a bearer token (`Authorization: Bearer …`).
    /// The value comes from --from-env, --from-file, or stdin.
    Set {
        connector: String,
        /// Send the value as this header as is (e.g. x-api-key).
        #[arg(long)]
        header: Option<String>,
        /// Read the value from this environment variable.
        #[arg(long, conflicts_with = "from_file")]
        from_env: Option<String>,
        /// Read the value from this file (one line).
        #[arg(long)]
        from_file: Option<PathBuf>,
    },
    /// Remove a connector's credential (audited).
    Clear { connector: String },
    /// Every connector credential: header, fingerprint, who set it, when.
    List,
    /// Replace the host key that seals every secret (the file named by
    /// PADDOCK_SECRET_KEY_FILE): all secrets are re-sealed under a new key
    /// in one transaction, audited; their fingerprints change with the key.
    RotateKey,
}

pub async fn secret(host: &Host, cmd: SecretCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        SecretCmd::Set {
            connector,
            header,
            from_env,
            from_file,
        } => {
            let value = read_value(from_env, from_file)?;
            let secret = match header {
                Some(header) => ConnectorSecret::header(&header, value.trim()),
                None => ConnectorSecret::bearer(&value),
            }
            .map_err(anyhow::Error::msg)?;
            let fingerprint = host
                .store
                .connector_secret_set(&connector, Some(&secret), actor)
                .await?
                .unwrap_or_default();
            println!(
                "connector {0} secret set: {1} ({2})",
                connector, secret, fingerprint
            );
        }
        SecretCmd::Clear { connector } => {
            host.store
                .connector_secret_set(&connector, None, actor)
                .await?;
            println!("connector {0} secret cleared", connector);
        }
        SecretCmd::List => print_secrets(&host.store.connector_secrets().await?),
        SecretCmd::RotateKey => {
            let rotation = host.store.secrets_rotate_key(actor).await?;
            let file = host.store.secret_key_config().key_file.clone();
            println!(
                "host key rotated: {0} secret(s) re-sealed under key {1} in {2}",
                rotation.secrets,
                rotation.key_id,
                file.map_or("?".into(), |f| f.display().to_string())
            );
        }
    }
    Ok(())
}

/// `connector secret list`, from the database or `GET /v1/connectors/secrets`.
pub fn print_secrets(secrets: &[SecretView]) {
    println!(
        "{:<16} {:<16} {:<21} {:<12} set at",
        "connector", "header", "fingerprint", "set by"
    );
    for s in secrets {
        println!(
            "{:<16} {:<16} {:<21} {:<12} {}",
            s.connector,
            s.header,
            s.fingerprint,
            s.set_by,
            rfc3339(from_millis(s.set_at))
        );
    }
}

/// The secret's value from `--from-env`, `--from-file` or stdin (its first line).
pub fn read_value(from_env: Option<String>, from_file: Option<PathBuf>) -> anyhow::Result<String> {
    if let Some(var) = from_env {
        return std::env::var(&var)
            .with_context(|| format!("environment variable {var} is not set (or not UTF-8)"));
    }
    if let Some(path) = from_file {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read '{}'", path.display()))?;
        return Ok(text.lines().next().unwrap_or_default().to_string());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the secret from stdin")?;
    Ok(text.lines().next().unwrap_or_default().to_string())
}
