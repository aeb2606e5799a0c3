//! How an attempt ended, classified so people and the retry policy can tell
//! a guest's own failure from a limit it hit and from the host stopping it.

use super::limits::{GuestLimits, MemoryLimiter};
use super::services::StopReason;
use super::wit::types::{ErrorClass, JobError};
use std::time::Duration;
use wasmtime::Trap;

/// Everything the execution plane records about one run.
#[derive(Debug)]
pub struct RunReport {
    pub result: RunResult,
    pub fuel_used: u64,
    pub peak_memory_bytes: u64,
    pub wall: Duration,
    pub log: String,
}

/// The three ways a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunResult {
    /// `run` returned `ok(output)`.
    Output(Vec<u8>),
    /// `run` returned `err(job-error)`: the guest's own verdict.
    JobFailed { class: ErrorClass, message: String },
    /// The guest did not return: a limit, a trap or the host stopped it.
    Trapped { kind: TrapKind, message: String },
}

/// Why a guest did not return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// Ran out of its group's fuel.
    FuelExhausted,
    /// Tried to grow memory past its group's cap.
    MemoryLimit,
    /// Ran past its group's wall-clock deadline.
    Deadline,
    /// The guest panicked or hit `unreachable`.
    GuestPanic,
    /// Call stack exhausted.
    StackOverflow,
    /// Any other wasm trap (out-of-bounds access, bad cast, ...).
    GuestTrap,
    /// Interrupted because its lease was lost.
    LeaseLost,
    /// Interrupted because the host was shutting down (drain) and the guest
    /// did not reach a safe point in time.
    Drained,
    /// The host failed (a bug or an unavailable dependency), not the guest.
    HostError,
}

impl TrapKind {
    /// The name stored in `error_class` and shown by `trigger show`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrapKind::FuelExhausted => "fuel_exhausted",
            TrapKind::MemoryLimit => "memory_limit",
            TrapKind::Deadline => "deadline_exceeded",
            TrapKind::GuestPanic => "guest_panic",
            TrapKind::StackOverflow => "stack_overflow",
            TrapKind::GuestTrap => "guest_trap",
            TrapKind::LeaseLost => "lease_lost",
            TrapKind::Drained => "drained",
            TrapKind::HostError => "host_error",
        }
    }
}

/// The error the epoch callback raises to stop a guest.
#[derive(Debug, thiserror::Error)]
pub(super) enum Interrupted {
    #[error("wall-clock deadline exceeded")]
    Deadline,
    #[error("stopped by the host: {0:?}")]
    Stopped(StopReason),
}

/// Name of a job-error class as stored.
pub fn error_class_name(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Transient => "transient",
        ErrorClass::Permanent => "permanent",
        ErrorClass::Unknown => "unknown",
        ErrorClass::InvalidInput => "invalid_input",
    }
}

pub(super) fn classify(
    outcome: wasmtime::Result<Result<Vec<u8>, JobError>>,
    limiter: &MemoryLimiter,
    limits: &GuestLimits,
) -> RunResult {
    let error = match outcome {
        Ok(Ok(output)) => return RunResult::Output(output),
        Ok(Err(e)) => {
            return RunResult::JobFailed {
                class: e.class,
                message: e.message,
            };
        }
        Err(error) => error,
    };
    let trapped = |kind: TrapKind, message: String| RunResult::Trapped { kind, message };
    if let Some(interrupted) = error.downcast_ref::<Interrupted>() {
        return match interrupted {
            Interrupted::Deadline => trapped(
                TrapKind::Deadline,
                format!("deadline of {:?} exceeded", limits.deadline),
            ),
            Interrupted::Stopped(StopReason::Shutdown) => trapped(
                TrapKind::Drained,
                "interrupted: the host is shutting down (drain)".into(),
            ),
            Interrupted::Stopped(_) => trapped(
                TrapKind::LeaseLost,
                "interrupted: this attempt lost its lease".into(),
            ),
        };
    }
    // A denied memory growth surfaces as whatever the guest does on
    // allocation failure (usually an abort); the limiter knows the cause.
    if limiter.denied() {
        return trapped(
            TrapKind::MemoryLimit,
            format!(
                "memory limit of {} bytes reached (peak {} bytes)",
                limits.memory_bytes,
                limiter.peak_bytes()
            ),
        );
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => trapped(
            TrapKind::FuelExhausted,
            format!("fuel of {} exhausted", limits.fuel),
        ),
        Some(Trap::Interrupt) => trapped(TrapKind::Deadline, "interrupted at deadline".into()),
        Some(Trap::StackOverflow) => {
            trapped(TrapKind::StackOverflow, "call stack exhausted".into())
        }
        Some(Trap::UnreachableCodeReached) => trapped(
            TrapKind::GuestPanic,
            format!(
                "guest panicked (wasm `unreachable` reached){}",
                backtrace_top(&error)
            ),
        ),
        Some(other) => trapped(TrapKind::GuestTrap, format!("guest trapped: {other}")),
        None => trapped(TrapKind::HostError, format!("{error:#}")),
    }
}

/// The innermost guest frame of a trap's backtrace, if wasmtime kept one,
/// e.g. ` in trap::run`.
fn backtrace_top(error: &wasmtime::Error) -> String {
    error
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .and_then(|bt| {
            bt.frames()
                .iter()
                .find_map(|f| f.func_name().map(str::to_string))
        })
        .map(|name| format!(" in {name}"))
        .unwrap_or_default()
}
