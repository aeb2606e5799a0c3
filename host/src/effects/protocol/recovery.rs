//! The recovery scanner's decisions: what an unresolved effect whose
//! attempt is gone becomes, from what a query by key found.

use super::{TicketKind, TicketRequest, downstream_record};
use crate::effects::classify::{self, Found};
use crate::model::EffectState;
use crate::store::{EffectOutcome, EffectRecord};

/// What the recovery scanner does with one unresolved effect whose attempt
/// is gone. Nothing is ever resent here.
#[derive(Debug)]
pub enum Recovered {
    /// The connector cannot be queried (or is gone): a ticket, and the
    /// record marked `unknown` as it stands.
    Unqueryable {
        ticket: TicketRequest,
        outcome: EffectOutcome,
    },
    /// The downstream's record is for another operation: a ticket; the
    /// record is left as it is.
    EvidenceConflict(TicketRequest),
    /// Applied downstream: mark it succeeded.
    Succeeded(EffectOutcome),
    /// Refused downstream: mark it failed.
    Failed(EffectOutcome),
    /// Never happened: mark it retryable (safe to resend).
    NotFound(EffectOutcome),
    /// The query failed: left for the next scan.
    Undecided(String),
}

/// An unresolved effect on a connector that cannot be queried by key (or
/// is no longer configured).
pub fn recovery_unqueryable(record: &EffectRecord) -> Recovered {
    Recovered::Unqueryable {
        ticket: TicketRequest {
            kind: TicketKind::UnknownOutcome,
            subject: record.idempotency_key.clone(),
            detail: serde_json::json!({
                "why": "found unresolved by recovery; connector cannot be queried by key"
            }),
        },
        outcome: EffectOutcome {
            state: EffectState::Unknown,
            response: record.response.clone(),
            error: record.error.clone(),
            last_status: record.last_status,
            resolved_by: "recovery",
        },
    }
}

/// What the downstream's answer to a query by key means for `record`.
pub fn recovery_found(record: &EffectRecord, found: Found) -> Recovered {
    match found {
        Found::Recorded {
            record: evidence, ..
        } if !classify::evidence_matches(&record.action, &evidence) => {
            Recovered::EvidenceConflict(TicketRequest {
                kind: TicketKind::EvidenceConflict,
                subject: record.idempotency_key.clone(),
                detail: serde_json::json!({ "downstream_record": evidence }),
            })
        }
        Found::Recorded { status, body, .. } if (200..300).contains(&status) => {
            Recovered::Succeeded(downstream_record(status, body, "recovery"))
        }
        Found::Recorded { status, body, .. } => {
            Recovered::Failed(downstream_record(status, body, "recovery"))
        }
        Found::NotFound => Recovered::NotFound(EffectOutcome {
            state: EffectState::Retryable,
            response: None,
            error: Some("not found at the downstream by recovery".into()),
            last_status: Some(404),
            resolved_by: "recovery",
        }),
        Found::Undecided(why) => Recovered::Undecided(why),
    }
}
