//! `paddock token create|list|revoke`: API tokens, made by an admin. The
//! local command line is the bootstrap admin (it holds the database), so
//! these commands need no token; each change is audited under
//! `local:USER` with the token's fingerprint. A token's text is printed
//! once, when created, and kept nowhere (the store has its hash).

use super::Host;
use clap::Subcommand;
use paddock::model::identity::Role;
use paddock::model::time::{from_millis, rfc3339};
use paddock::model::units;
use paddock::store::{NewToken, TokenView};

#[derive(Subcommand)]
pub enum TokenCmd {
    /// Create a token; its text is printed once. Roles: team (needs
    /// --tenant), operator, admin, reviewer.
    Create {
        /// What people type to list and revoke it (never reused), and
        /// whose it is: PERSON or PERSON.LABEL (`alice`, `alice.laptop`).
        /// The two-person rule counts persons: every token of alice's is
        /// alice, so name each token after the one person who holds it.
        #[arg(long)]
        name: String,
        #[arg(long)]
        role: String,
        /// A team token's tenant: it acts on that tenant's work only.
        #[arg(long)]
        tenant: Option<String>,
        /// How long it is valid (e.g. 30d, 12h; at most 366d).
        #[arg(long, default_value = "90d")]
        expires: String,
    },
    /// Every token: name, role, tenant, fingerprint, expiry, revocation.
    List,
    /// Revoke a token (audited); it stops working at once.
    Revoke { name: String },
}

pub async fn token(host: &Host, cmd: TokenCmd, actor: &str) -> anyhow::Result<()> {
    match cmd {
        TokenCmd::Create {
            name,
            role,
            tenant,
            expires,
        } => {
            let role = Role::parse(&role).map_err(|e| anyhow::anyhow!("--role: {e}"))?;
            let valid_for_ms =
                units::parse_millis("--expires", &expires).map_err(anyhow::Error::msg)?;
            let issued = host
                .store
                .token_create(
                    &NewToken {
                        name,
                        role,
                        tenant,
                        valid_for_ms,
                    },
                    actor,
                )
                .await?;
            print_created(
                &issued.name,
                role,
                &issued.fingerprint,
                issued.expires_at,
                &issued.text,
            );
        }
        TokenCmd::List => print_tokens(&host.store.tokens_list().await?),
        TokenCmd::Revoke { name } => {
            print_revoked(&name, host.store.token_revoke(&name, actor).await?)
        }
    }
    Ok(())
}

/// A token just created: the facts on stderr, its text (once) on stdout.
pub fn print_created(name: &str, role: Role, fingerprint: &str, expires_at: i64, text: &str) {
    eprintln!(
        "token {1} ({2}) created, fingerprint {3}, expires {}; \
         this is the only time its text is shown:",
        rfc3339(from_millis(expires_at)),
        name,
        role,
        fingerprint
    );
    println!("{0}", text);
}

pub fn print_revoked(name: &str, revoked: bool) {
    if revoked {
        println!("token {0} revoked", name);
    } else {
        println!("token {0} was already revoked; nothing changed", name);
    }
}

/// `token list`, from the database or `GET /v1/tokens`.
pub fn print_tokens(tokens: &[TokenView]) {
    println!(
        "{:<20} {:<9} {:<12} {:<12} {:<20} {:<20} STATE",
        "NAME", "ROLE", "TENANT", "FINGERPRINT", "CREATED", "EXPIRES"
    );
    for t in tokens {
        let state = match (&t.revoked_by, t.revoked_at) {
            (Some(by), Some(at)) => format!("revoked by {by} at {}", rfc3339(from_millis(at))),
            _ => "active".to_string(),
        };
        println!(
            "{:<20} {:<9} {:<12} {:<12} {:<20} {:<20} {6}",
            t.name,
            t.role,
            t.tenant.as_deref().unwrap_or("-"),
            t.fingerprint,
            rfc3339(from_millis(t.created_at)),
            rfc3339(from_millis(t.expires_at)),
            state
        );
    }
}
