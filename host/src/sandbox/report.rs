//! How a run ended, classified into the domain's [`RunResult`] so people
//! and the retry policy can tell a guest's own failure from a limit it hit
//! and from the host stopping it.

use super::limits::{GuestLimits, MemoryLimiter};
use super::wit::types::{ErrorClass as WitErrorClass, JobError};
use crate::model::{ErrorClass, RunResult, StopReason, TrapKind};
use wasmtime::Trap;

/// The error the epoch callback raises to stop a guest.
#[derive(Debug, thiserror::Error)]
pub(super) enum Interrupted {
    #[error("wall-clock deadline exceeded")]
    Deadline,
    #[error("stopped by the host: {0:?}")]
    Stopped(StopReason),
}

/// The host's view of a guest's error class.
fn error_class(class: WitErrorClass) -> ErrorClass {
    match class {
        WitErrorClass::Transient => ErrorClass::Transient,
        WitErrorClass::Permanent => ErrorClass::Permanent,
        WitErrorClass::Unknown => ErrorClass::Unknown,
        WitErrorClass::InvalidInput => ErrorClass::InvalidInput,
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
                class: error_class(e.class),
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
