//! The one place the `paddock:job` WIT bindings are generated, and the host
//! side of every imported interface. Guest-visible failures are WIT results;
//! nothing here traps on a guest's behalf.

use super::limits::{GuestLimits, MemoryLimiter};
use super::services::{AttemptServices, StopSignal};
use super::wasi::{WasiSetup, WasiState};
use std::sync::Arc;

// Host calls that wait on the database or a downstream are async: the
// guest runs on a fiber that is suspended while they wait, so an attempt
// never needs a thread of its own. The rest are plain calls on the fiber.
wasmtime::component::bindgen!({
    path: "../wit",
    world: "job",
    imports: {
        "paddock:job/checkpoint.load": async,
        "paddock:job/checkpoint.save": async,
        "paddock:job/effects.invoke": async,
        "paddock:job/effects.query": async,
    },
    exports: { default: async },
});

use paddock::job::{checkpoint, context, effects, log, types};

/// The per-store state of one attempt.
pub struct GuestState {
    pub(super) invocation: context::Invocation,
    pub(super) services: Arc<dyn AttemptServices>,
    pub(super) limiter: MemoryLimiter,
    pub(super) stop: Arc<StopSignal>,
    pub(super) log: JobLog,
    pub(super) wasi: WasiState,
    pub(super) caps: crate::model::caps::OutputCaps,
    /// Set when the guest handed the host something over a size cap: the
    /// attempt ends as `output_too_large` at the next epoch tick, whatever
    /// the guest does next.
    pub(super) too_large: Option<String>,
    /// Epoch ticks seen: every [`SCRATCH_CHECK_TICKS`]th one checks the
    /// scratch directory's size.
    pub(super) ticks: u32,
    /// Host calls so far, each charged [`HOST_CALL_FUEL`] against the
    /// fuel wasm has left (checked at every epoch tick).
    pub(super) host_calls: u64,
}

/// The fuel one host call costs the guest (wasm fuel counts only wasm
/// instructions): a guest spinning on a cheap host call (`poll`, `log`)
/// runs out of fuel like one spinning in wasm, instead of holding its
/// thread until its deadline. 10,000: about what the wasm of a call's
/// host time would cost (a `poll` takes ~2.5 µs in `benches/hostile`);
/// a thousand log lines cost 10⁷ of the default 10¹⁰, a million 10¹⁰.
pub const HOST_CALL_FUEL: u64 = 10_000;

/// How often (in epoch ticks, 5 ms each) a running guest's scratch
/// directory is measured: a guest can overshoot its grant by what it
/// writes in that time, and is then stopped.
pub(super) const SCRATCH_CHECK_TICKS: u32 = 20;

impl GuestState {
    pub(super) fn new(
        invocation: context::Invocation,
        services: Arc<dyn AttemptServices>,
        limits: &GuestLimits,
        stop: Arc<StopSignal>,
        memory: Arc<super::limits::MemoryGauge>,
    ) -> Self {
        let wasi = WasiState::new(WasiSetup {
            grants: limits.grants.clone(),
            trigger_id: invocation.trigger_id.clone(),
            scheduled_at: since_epoch(&invocation.scheduled_at),
            output_cap: limits.caps.log as usize,
        });
        Self {
            log: JobLog::new(limits.caps.log as usize),
            invocation,
            services,
            limiter: MemoryLimiter::new(limits, memory),
            stop,
            wasi,
            caps: limits.caps,
            too_large: None,
            ticks: 0,
            host_calls: 0,
        }
    }

    /// Refuse `what` of `size` bytes over `cap`: note it (the attempt ends
    /// as `output_too_large`) and return the message.
    fn over_cap(&mut self, what: &str, size: usize, cap: u64) -> Result<(), String> {
        crate::model::caps::OutputCaps::check(what, size, cap).inspect_err(|message| {
            self.too_large.get_or_insert_with(|| message.clone());
        })
    }

    /// The stop signal wins over whatever the services say.
    fn control_with(&self, from_services: types::Control) -> types::Control {
        match self.stop.control() {
            types::Control::Proceed => from_services,
            stopping => stopping,
        }
    }
}

/// An RFC 3339 time as time since the Unix epoch (zero if unreadable).
fn since_epoch(rfc3339: &str) -> std::time::Duration {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
        .map(std::time::Duration::from_millis)
        .unwrap_or_default()
}

impl wasmtime_wasi::WasiView for GuestState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        self.wasi.view()
    }
}

/// The attempt's job log: bounded by the group's log cap, so a chatty
/// guest cannot eat the host's memory or the database.
pub(super) struct JobLog {
    text: String,
    dropped: usize,
    cap: usize,
}

impl JobLog {
    fn new(cap: usize) -> Self {
        Self {
            text: String::new(),
            dropped: 0,
            cap,
        }
    }

    fn push(&mut self, level: log::Level, message: &str) {
        let level = match level {
            log::Level::Trace => "trace",
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
        };
        if self.text.len() + message.len() + 10 > self.cap {
            self.dropped += 1;
            return;
        }
        self.text.push_str(level);
        self.text.push_str(": ");
        self.text.push_str(message);
        self.text.push('\n');
    }

    /// The log, then what the guest wrote to stdout/stderr, within the
    /// cap.
    pub(super) fn into_text(mut self, output: &str) -> String {
        for line in output.lines() {
            if self.text.len() + line.len() + 1 > self.cap {
                self.dropped += 1;
            } else {
                self.text.push_str(line);
                self.text.push('\n');
            }
        }
        if self.dropped > 0 {
            format!("{}[{} more lines dropped]\n", self.text, self.dropped)
        } else {
            self.text
        }
    }
}

impl types::Host for GuestState {}

impl context::Host for GuestState {
    fn current(&mut self) -> context::Invocation {
        self.host_calls += 1;
        self.invocation.clone()
    }

    fn poll(&mut self) -> types::Control {
        self.host_calls += 1;
        let answer = self.services.control();
        self.control_with(answer)
    }
}

impl checkpoint::Host for GuestState {
    async fn load(&mut self) -> Option<Vec<u8>> {
        self.host_calls += 1;
        self.services.load_checkpoint().await
    }

    async fn save(&mut self, state: Vec<u8>) -> types::Control {
        self.host_calls += 1;
        // A shutdown still lets a guest that reaches a safe point save it.
        if self.stop.gate_closed() {
            return types::Control::LeaseLost;
        }
        if self
            .over_cap("a checkpoint", state.len(), self.caps.checkpoint)
            .is_err()
        {
            return types::Control::CancelRequested;
        }
        let answer = self.services.save_checkpoint(state).await;
        self.control_with(answer)
    }
}

impl effects::Host for GuestState {
    async fn invoke(
        &mut self,
        request: effects::Request,
    ) -> Result<effects::Outcome, effects::EffectError> {
        self.host_calls += 1;
        if self.stop.interrupting().is_some() {
            return Err(effects::EffectError::LeaseLost);
        }
        self.over_cap(
            "an effect's payload",
            request.payload.len(),
            self.caps.effect_payload,
        )
        .map_err(effects::EffectError::Invalid)?;
        let outcome = self.services.invoke_effect(request).await?;
        self.response_within_cap(outcome)
    }

    async fn query(
        &mut self,
        connector: String,
        idempotency_key: String,
    ) -> Result<Option<effects::Outcome>, effects::EffectError> {
        self.host_calls += 1;
        match self
            .services
            .query_effect(&connector, &idempotency_key)
            .await?
        {
            Some(outcome) => self.response_within_cap(outcome).map(Some),
            None => Ok(None),
        }
    }
}

impl GuestState {
    /// A response body over the group's cap is not handed to the guest.
    fn response_within_cap(
        &mut self,
        outcome: effects::Outcome,
    ) -> Result<effects::Outcome, effects::EffectError> {
        if let effects::Outcome::Done(body) | effects::Outcome::Replayed(body) = &outcome {
            self.over_cap(
                "an effect's response",
                body.len(),
                self.caps.effect_response,
            )
            .map_err(effects::EffectError::Invalid)?;
        }
        Ok(outcome)
    }
}

impl log::Host for GuestState {
    fn log(&mut self, level: log::Level, message: String) {
        self.host_calls += 1;
        tracing::debug!(target: "paddock::guest", job = %crate::model::text::Esc(&self.invocation.job_id), "{}", crate::model::text::Esc(&message));
        self.log.push(level, &message);
    }
}
