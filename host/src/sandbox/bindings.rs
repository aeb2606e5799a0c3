//! The one place the `paddock:job` WIT bindings are generated, and the host
//! side of every imported interface. Guest-visible failures are WIT results;
//! nothing here traps on a guest's behalf.

use super::limits::{GuestLimits, MemoryLimiter};
use super::services::{AttemptServices, StopSignal};
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
}

impl GuestState {
    pub(super) fn new(
        invocation: context::Invocation,
        services: Arc<dyn AttemptServices>,
        limits: &GuestLimits,
        stop: Arc<StopSignal>,
        memory: Arc<super::limits::MemoryGauge>,
    ) -> Self {
        Self {
            invocation,
            services,
            limiter: MemoryLimiter::new(limits, memory),
            stop,
            log: JobLog::default(),
        }
    }

    /// The stop signal wins over whatever the services say.
    fn control_with(&self, from_services: types::Control) -> types::Control {
        match self.stop.control() {
            types::Control::Proceed => from_services,
            stopping => stopping,
        }
    }
}

/// The attempt's job log: bounded, so a chatty guest cannot eat the host's
/// memory or the database.
#[derive(Default)]
pub(super) struct JobLog {
    text: String,
    dropped: usize,
}

impl JobLog {
    const MAX_BYTES: usize = 64 * 1024;

    fn push(&mut self, level: log::Level, message: &str) {
        let level = match level {
            log::Level::Trace => "trace",
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
        };
        if self.text.len() + message.len() + 10 > Self::MAX_BYTES {
            self.dropped += 1;
            return;
        }
        self.text.push_str(level);
        self.text.push_str(": ");
        self.text.push_str(message);
        self.text.push('\n');
    }

    pub(super) fn into_text(self) -> String {
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
        self.invocation.clone()
    }

    fn poll(&mut self) -> types::Control {
        let answer = self.services.control();
        self.control_with(answer)
    }
}

impl checkpoint::Host for GuestState {
    async fn load(&mut self) -> Option<Vec<u8>> {
        self.services.load_checkpoint().await
    }

    async fn save(&mut self, state: Vec<u8>) -> types::Control {
        // A shutdown still lets a guest that reaches a safe point save it.
        if self.stop.gate_closed() {
            return types::Control::LeaseLost;
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
        if self.stop.interrupting().is_some() {
            return Err(effects::EffectError::LeaseLost);
        }
        self.services.invoke_effect(request).await
    }

    async fn query(
        &mut self,
        connector: String,
        idempotency_key: String,
    ) -> Result<Option<effects::Outcome>, effects::EffectError> {
        self.services
            .query_effect(&connector, &idempotency_key)
            .await
    }
}

impl log::Host for GuestState {
    fn log(&mut self, level: log::Level, message: String) {
        tracing::debug!(target: "paddock::guest", job = %self.invocation.job_id, "{message}");
        self.log.push(level, &message);
    }
}
