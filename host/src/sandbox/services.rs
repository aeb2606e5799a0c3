//! What a running guest may ask of the host, as a trait the execution plane
//! implements with fenced database writes (and the benchmark with nothing).
//! Also the stop signal the runner uses to interrupt a guest.

use super::wit::effects::{EffectError, Outcome, Request};
use super::wit::types::Control;
pub use crate::model::StopReason;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The future of one host call that waits on I/O. Boxed so the trait stays
/// object-safe (the runner hands the sandbox an `Arc<dyn AttemptServices>`).
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The host's side of one attempt. Calls that touch the database or a
/// downstream are async: the guest's fiber is suspended while they wait, and
/// the runtime thread runs other attempts meanwhile. `control` is called at
/// every safe point and must be cheap.
pub trait AttemptServices: Send + Sync {
    /// The answer to `context.poll`.
    fn control(&self) -> Control;
    /// The last checkpoint saved for this trigger, by any attempt.
    fn load_checkpoint(&self) -> HostFuture<'_, Option<Vec<u8>>>;
    /// A fenced checkpoint write; `LeaseLost` when the token is stale.
    fn save_checkpoint(&self, state: Vec<u8>) -> HostFuture<'_, Control>;
    /// Perform (or replay) one effect.
    fn invoke_effect(&self, request: Request) -> HostFuture<'_, Result<Outcome, EffectError>>;
    /// What became of an effect, by key.
    fn query_effect<'a>(
        &'a self,
        connector: &'a str,
        key: &'a str,
    ) -> HostFuture<'a, Result<Option<Outcome>, EffectError>>;
}

/// Services for a guest that has nothing behind it: no checkpoints, no
/// effects. Used by benchmarks and `component` dry runs.
pub struct NoServices;

impl AttemptServices for NoServices {
    fn control(&self) -> Control {
        Control::Proceed
    }
    fn load_checkpoint(&self) -> HostFuture<'_, Option<Vec<u8>>> {
        Box::pin(async { None })
    }
    fn save_checkpoint(&self, _state: Vec<u8>) -> HostFuture<'_, Control> {
        Box::pin(async { Control::Proceed })
    }
    fn invoke_effect(&self, request: Request) -> HostFuture<'_, Result<Outcome, EffectError>> {
        Box::pin(async move { Err(EffectError::NotGranted(request.connector)) })
    }
    fn query_effect<'a>(
        &'a self,
        connector: &'a str,
        _key: &'a str,
    ) -> HostFuture<'a, Result<Option<Outcome>, EffectError>> {
        Box::pin(async move { Err(EffectError::NotGranted(connector.to_string())) })
    }
}

/// Set by the runner (heartbeat failures, pause, cancel), read by the guest's
/// host calls and by the epoch callback. Also remembers when the commit gate
/// closed, so the runner can tell how long a guest took to stop after its
/// lease was lost (`paddock_lost_lease_stop_seconds`).
#[derive(Debug, Default)]
pub struct StopSignal(AtomicU8, OnceLock<Instant>);

impl StopSignal {
    pub fn request(&self, reason: StopReason) {
        if reason == StopReason::LeaseLost {
            self.1.get_or_init(Instant::now);
        }
        let code = match reason {
            StopReason::Pause => 1,
            StopReason::Cancel => 2,
            StopReason::Shutdown => 3,
            StopReason::LeaseLost => 4,
        };
        // Keep the most severe reason: lease-lost beats shutdown beats
        // cancel beats pause.
        self.0.fetch_max(code, Ordering::SeqCst);
    }

    pub fn reason(&self) -> Option<StopReason> {
        match self.0.load(Ordering::SeqCst) {
            1 => Some(StopReason::Pause),
            2 => Some(StopReason::Cancel),
            3 => Some(StopReason::Shutdown),
            4 => Some(StopReason::LeaseLost),
            _ => None,
        }
    }

    /// A reason that must interrupt the guest now, not at its next host call.
    pub fn interrupting(&self) -> Option<StopReason> {
        self.reason()
            .filter(|r| matches!(r, StopReason::LeaseLost | StopReason::Shutdown))
    }

    /// Whether the commit gate is closed: this attempt's result must not
    /// count (a shutdown interrupts the guest but leaves the gate open).
    pub fn gate_closed(&self) -> bool {
        self.reason() == Some(StopReason::LeaseLost)
    }

    /// How long ago the commit gate closed (the lease was lost), if it did.
    pub fn lease_lost_for(&self) -> Option<Duration> {
        self.1.get().map(Instant::elapsed)
    }

    /// The control answer for the guest's next safe point.
    pub fn control(&self) -> Control {
        match self.reason() {
            None => Control::Proceed,
            Some(StopReason::Pause | StopReason::Shutdown) => Control::PauseRequested,
            Some(StopReason::Cancel) => Control::CancelRequested,
            Some(StopReason::LeaseLost) => Control::LeaseLost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_severe_stop_reason_wins() {
        let s = StopSignal::default();
        assert_eq!(s.reason(), None);
        s.request(StopReason::LeaseLost);
        s.request(StopReason::Pause);
        assert_eq!(s.reason(), Some(StopReason::LeaseLost));
        assert_eq!(s.interrupting(), Some(StopReason::LeaseLost));
    }

    #[test]
    fn pause_is_answered_at_a_safe_point_not_forced() {
        let s = StopSignal::default();
        s.request(StopReason::Pause);
        assert_eq!(s.interrupting(), None);
        assert!(matches!(s.control(), Control::PauseRequested));
    }

    #[test]
    fn a_shutdown_interrupts_without_closing_the_gate_and_lease_lost_beats_it() {
        let s = StopSignal::default();
        s.request(StopReason::Pause);
        s.request(StopReason::Shutdown);
        assert_eq!(s.interrupting(), Some(StopReason::Shutdown));
        assert!(!s.gate_closed());
        assert_eq!(s.lease_lost_for(), None);
        s.request(StopReason::LeaseLost);
        assert!(s.gate_closed());
        assert!(s.lease_lost_for().is_some());
    }
}
