//! The questions the protocol hands to a person, and the guest's answers
//! that name them.

use crate::sandbox::wit::effects::{EffectError, Outcome};

/// What kind of question an exception ticket asks a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketKind {
    /// It may or may not have happened, and the host cannot find out.
    UnknownOutcome,
    /// The downstream's record under our key is for another operation.
    EvidenceConflict,
    /// A non-idempotent downstream's sends are spent; any may have
    /// half-happened.
    BudgetExhausted,
    /// One key, two sets of params.
    KeyConflict,
}

impl TicketKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TicketKind::UnknownOutcome => "unknown_outcome",
            TicketKind::EvidenceConflict => "evidence_conflict",
            TicketKind::BudgetExhausted => "budget_exhausted",
            TicketKind::KeyConflict => "key_conflict",
        }
    }

    /// What a person may do about it (`paddock exceptions resolve`).
    pub fn allowed_actions(self) -> Vec<&'static str> {
        match self {
            TicketKind::UnknownOutcome | TicketKind::EvidenceConflict => {
                vec!["mark_succeeded", "mark_failed", "resend"]
            }
            TicketKind::BudgetExhausted => vec!["resend", "mark_failed"],
            TicketKind::KeyConflict => vec!["dismiss"],
        }
    }
}

/// An exception ticket to open. The store keeps one open ticket per kind
/// and subject; its evidence is gathered when it is opened.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketRequest {
    pub kind: TicketKind,
    pub subject: String,
    /// What the protocol saw, beside the trigger, attempts and effect.
    pub detail: serde_json::Value,
}

/// A guest's answer that names the exception ticket opened for it.
#[derive(Debug)]
pub struct Ticketed {
    pub ticket: TicketRequest,
    reply: TicketReply,
}

/// The guest-visible shape of a ticketed answer, with its text up to the
/// ticket's name.
#[derive(Debug)]
pub(super) enum TicketReply {
    Unknown(String),
    KeyConflict(String),
    BudgetExhausted(String),
}

impl Ticketed {
    pub(super) fn new(
        kind: TicketKind,
        subject: String,
        detail: serde_json::Value,
        reply: TicketReply,
    ) -> Self {
        Self {
            ticket: TicketRequest {
                kind,
                subject,
                detail,
            },
            reply,
        }
    }

    /// The guest's answer once the ticket is open (`None`: it could not be
    /// written, and the text says so).
    pub fn reply(self, ticket: Option<i64>) -> Result<Outcome, EffectError> {
        let named = |lead: String| {
            format!(
                "{lead}exception ticket {}",
                ticket.map_or("not written".into(), |t| t.to_string())
            )
        };
        match self.reply {
            TicketReply::Unknown(lead) => Ok(Outcome::Unknown(named(lead))),
            TicketReply::KeyConflict(lead) => Err(EffectError::KeyConflict(named(lead))),
            TicketReply::BudgetExhausted(lead) => Err(EffectError::BudgetExhausted(named(lead))),
        }
    }
}

/// What the guest is told: now, or once a ticket is open.
#[derive(Debug)]
pub enum Reply {
    Now(Result<Outcome, EffectError>),
    Ticketed(Ticketed),
}
