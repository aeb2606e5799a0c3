//! The state changes people make on one trigger, as statements
//! (`store::guards` checks each against its transition).

use super::super::dialect::now_ms;
use super::super::held::ticket_holds;
use crate::trigger_state;

/// A person's cancel of a trigger that has not started
/// ([`crate::model::Transition::CancelUnstarted`]).
pub(in crate::store) const CANCEL_UNSTARTED: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(cancelled),
    ", error_class = 'cancelled', error_message = 'cancelled before it ran', finished_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state IN (",
    trigger_state!(pending),
    ", ",
    trigger_state!(retry_wait),
    ", ",
    trigger_state!(manual),
    ", ",
    trigger_state!(paused),
    ")"
);

/// A person's approval of a trigger the misfire policy parked
/// ([`crate::model::Transition::Approve`]); a trigger an open exception
/// ticket holds waits for the ticket's resolution instead.
pub(in crate::store) const APPROVE: &str = concat!(
    "UPDATE triggers SET state = ",
    trigger_state!(pending),
    ", next_run_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ? AND state = ",
    trigger_state!(manual),
    " AND NOT ",
    ticket_holds!(),
    " RETURNING plan_key"
);
