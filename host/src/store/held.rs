//! Manual handling in the store: an open exception ticket that owns a
//! trigger (`exceptions.trigger_id`) holds it in `manual`, where no claim
//! takes it and no retry time wakes it, until the trigger's last open
//! ticket is resolved (the rule and its diagram: [`crate::model::state`]).
//!
//! - [`HOLD_QUEUED`] ([`Transition::Hold`]): a ticket opened over a queued
//!   trigger holds it, in the ticket's own transaction.
//! - A running trigger is held by its attempt's end: the fenced finish
//!   statements (`runner/commit.rs`, `runner/postgres.rs`) write `manual`
//!   where they would write `retry_wait` or `failed` while
//!   [`ticket_holds!`] is true.
//! - [`RESOLVE_HELD`] ([`Transition::Resolve`]): the resolution's
//!   transaction moves the trigger on once no open ticket holds it any
//!   more; a second resolution finds the ticket resolved and is refused.
//! - `approve` (the misfire policy's `manual`) refuses a held trigger.

use super::dialect::now_ms;
use super::*;
use crate::model::{Transition, TriggerState, after_resolution};
use crate::trigger_state;

/// Whether an open exception ticket owns the `triggers` row of the
/// statement this stands in (`exceptions_open_trigger`, migration 0029).
macro_rules! ticket_holds {
    () => {
        "EXISTS (SELECT 1 FROM exceptions held WHERE held.trigger_id = triggers.id \
         AND held.state = 'open')"
    };
}
pub(crate) use ticket_holds;

/// [`ticket_holds!`] as text, for `store::guards` to read past it (its
/// `state` is the ticket's, not the trigger's).
#[cfg(test)]
pub(in crate::store) const TICKET_HOLDS: &str = ticket_holds!();

/// A ticket opened over a queued trigger holds it (`?` the trigger).
pub(in crate::store) const HOLD_QUEUED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(manual),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state IN (",
    trigger_state!(pending),
    ", ",
    trigger_state!(retry_wait),
    ") RETURNING plan_key"
);

/// The last open ticket holding a trigger was resolved: a new attempt
/// (`pending`, due now; its claim takes token + 1) or `failed` (`?` 1 to
/// fail, twice, then the trigger). Only a held trigger moves: a misfire's
/// `manual` never had a ticket, and no other open ticket may hold it.
pub(in crate::store) const RESOLVE_HELD: &str = concat!(
    "UPDATE triggers SET state = CASE WHEN ? <> 0 THEN ",
    trigger_state!(failed),
    " ELSE ",
    trigger_state!(pending),
    " END, finished_at = CASE WHEN ? <> 0 THEN ",
    now_ms!(),
    " END, next_run_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state = ",
    trigger_state!(manual),
    " AND NOT ",
    ticket_holds!(),
    " RETURNING plan_key"
);

/// An open ticket holding a trigger, as `trigger show` names it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HoldingTicket {
    pub id: i64,
    pub kind: String,
}

impl Store {
    /// Hold `trigger_id` in `manual` if it is queued (inside the
    /// transaction that opened its ticket). Returns the plan key when it
    /// moved.
    pub(in crate::store) async fn hold_queued(
        &self,
        tx: &mut Tx,
        trigger_id: i64,
    ) -> StoreResult<Option<String>> {
        debug_assert!(Transition::Hold.ends_in(TriggerState::Manual));
        Ok(sqlx::query_scalar(self.sql(HOLD_QUEUED))
            .bind(trigger_id)
            .fetch_optional(&mut **tx)
            .await?)
    }

    /// Move `trigger_id` on after a ticket of its was resolved with
    /// `action` (inside the resolution's transaction): the state it moved
    /// to, or `None` when it did not move (not held, or another open
    /// ticket still holds it).
    pub(in crate::store) async fn resolve_held(
        &self,
        tx: &mut Tx,
        trigger_id: i64,
        action: &str,
    ) -> StoreResult<Option<(TriggerState, String)>> {
        let to = after_resolution(action);
        debug_assert!(Transition::Resolve.allows(TriggerState::Manual, to));
        let fail = i64::from(to == TriggerState::Failed);
        let moved: Option<String> = sqlx::query_scalar(self.sql(RESOLVE_HELD))
            .bind(fail)
            .bind(fail)
            .bind(trigger_id)
            .fetch_optional(&mut **tx)
            .await?;
        Ok(moved.map(|plan_key| (to, plan_key)))
    }

    /// The open tickets holding `trigger_id`, oldest first.
    pub async fn tickets_holding(&self, trigger_id: i64) -> StoreResult<Vec<HoldingTicket>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, kind FROM exceptions WHERE trigger_id = ? AND state = 'open' ORDER BY id",
        ))
        .bind(trigger_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// What a `manual` trigger waits for: the open tickets holding it, or
    /// (none) the approval of a fire its misfire policy parked.
    pub(in crate::store) async fn manual_reason(&self, t: &TriggerRecord) -> StoreResult<String> {
        let tickets = self.tickets_holding(t.id).await?;
        Ok(match tickets.as_slice() {
            [] => format!("waits for approval: `paddock trigger approve {}`", t.id),
            [one] => format!(
                "held by exception {0} ({1}) until it is resolved: \
                 `paddock exceptions resolve {0}`",
                one.id, one.kind
            ),
            many => format!(
                "held by exceptions {} until each is resolved: `paddock exceptions resolve`",
                many.iter()
                    .map(|x| format!("{} ({})", x.id, x.kind))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }
}
