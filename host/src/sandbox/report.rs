//! How a run ended, classified into the domain's [`RunResult`] so people
//! and the retry policy can tell a guest's own failure from a limit it hit
//! and from the host stopping it.

use super::bindings::GuestState;
use super::limits::GuestLimits;
use super::wit::types::{ErrorClass as WitErrorClass, JobError};
use crate::model::caps::{OutputCaps, prefix};
use crate::model::{ErrorClass, RunResult, StopReason, TrapKind};
use wasmtime::Trap;

/// The error the epoch callback raises to stop a guest.
#[derive(Debug, thiserror::Error)]
pub(super) enum Interrupted {
    #[error("wall-clock deadline exceeded")]
    Deadline,
    #[error("stopped by the host: {0:?}")]
    Stopped(StopReason),
    #[error("the guest handed the host something over a size cap")]
    TooLarge,
    #[error("fuel exhausted, host calls included")]
    OutOfFuel,
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
    state: &GuestState,
    limits: &GuestLimits,
) -> RunResult {
    let trapped = |kind: TrapKind, message: String| RunResult::Trapped { kind, message };
    // Over a cap once is over for good, whatever the guest returned after.
    if let Some(message) = &state.too_large {
        return trapped(TrapKind::OutputTooLarge, message.clone());
    }
    let error = match outcome {
        Ok(returned) => return within_caps(returned, limits),
        Err(error) => error,
    };
    let limiter = &state.limiter;
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
            Interrupted::TooLarge => unreachable!("too_large is checked first"),
            Interrupted::OutOfFuel => trapped(
                TrapKind::FuelExhausted,
                format!(
                    "fuel of {} exhausted ({} of it by {} host calls)",
                    limits.fuel,
                    state.host_calls * super::bindings::HOST_CALL_FUEL,
                    state.host_calls
                ),
            ),
        };
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return trapped(
            TrapKind::GuestTrap,
            format!(
                "the guest called exit({}) instead of returning from `run`",
                exit.0
            ),
        );
    }
    if let Some(refused) = refused_call(&error, limits) {
        return refused;
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
    if limiter.table_denied() {
        return trapped(
            TrapKind::MemoryLimit,
            format!("table limit of {} elements reached", limits.table_elements),
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

/// A call the host refused on the guest's behalf: over the per-call copy
/// limit, or into `wasi:http`.
fn refused_call(error: &wasmtime::Error, limits: &GuestLimits) -> Option<RunResult> {
    let trapped = |kind: TrapKind, message: String| RunResult::Trapped { kind, message };
    let text = format!("{error:#}");
    // Wasmtime's per-call copy limit (`set_hostcall_fuel`, set from the
    // caps): the guest handed over more than any cap allows in one call.
    if text.contains("too much data is being copied between the host and the guest") {
        return Some(trapped(
            TrapKind::OutputTooLarge,
            format!(
                "the guest handed the host more than {} bytes in one call, over every size cap \
                 of its group (refused before it was copied)",
                limits.caps.per_call_bytes()
            ),
        ));
    }
    // `wasi:http` is linked as traps (sandbox/wasi.rs): calling it is
    // asking for a capability no group can grant.
    if let Some(import) = text
        .split("unknown import: `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
    {
        return Some(trapped(
            TrapKind::NotGranted,
            format!(
                "the guest called {import}, which is never granted: network goes only through \
                 connectors (paddock:job/effects)"
            ),
        ));
    }
    None
}

/// What `run` returned, unless it is over the group's caps.
fn within_caps(returned: Result<Vec<u8>, JobError>, limits: &GuestLimits) -> RunResult {
    let caps = &limits.caps;
    let too_large = |message: String| RunResult::Trapped {
        kind: TrapKind::OutputTooLarge,
        message,
    };
    match returned {
        Ok(output) => match OutputCaps::check("the result", output.len(), caps.result) {
            Ok(()) => RunResult::Output(output),
            Err(message) => too_large(message),
        },
        Err(e) => match OutputCaps::check("the error message", e.message.len(), caps.error) {
            Ok(()) => RunResult::JobFailed {
                class: error_class(e.class),
                message: e.message,
            },
            Err(message) => too_large(format!("{message}; it began: {}", prefix(&e.message, 200))),
        },
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
