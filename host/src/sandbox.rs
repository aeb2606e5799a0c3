//! The sandbox: one wasmtime [`Engine`] (pooling allocator, copy-on-write
//! memory images, fuel, epoch interruption, on-disk compilation cache), the
//! host side of the `paddock:job` WIT interfaces, per-attempt limits from the
//! resource group, and trap classification.
//!
//! Invariants:
//! - a guest can harm only its own attempt: every attempt gets a fresh
//!   `Store` with its own fuel, memory cap and wall-clock deadline, and every
//!   way it can end (output, job error, trap, limit) becomes a [`RunReport`];
//! - a guest never sees its fencing token; host calls go through
//!   [`AttemptServices`], which the execution plane implements with fenced
//!   writes;
//! - a guest whose lease is lost is interrupted at the next epoch tick, even
//!   if it never calls the host;
//! - a run is charged at least the fuel it burnt, however it ended (an
//!   interrupt included), and at most one [`FUEL_SLICE`] more.
//!
//! The sandbox does no database I/O itself.

mod bindings;
mod capabilities;
mod limits;
mod report;
mod services;
mod wasi;

pub use crate::model::{RunReport, RunResult, TrapKind};
pub use bindings::{Job, JobPre, paddock::job as wit};
pub use limits::{GuestLimits, MemoryGauge, MemoryLimiter};
pub use services::{AttemptServices, HostFuture, NoServices, StopReason, StopSignal};

use crate::model::capability::{self, CapabilityManifest};
use bindings::GuestState;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

/// How long one epoch tick lasts: the resolution of wall-clock deadlines and
/// of interrupting a guest whose lease was lost.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Fuel a guest is handed at a time (wasmtime's fuel yield interval; about
/// 5 ms of computation at the default price of 1e9 fuel a CPU-second).
///
/// Compiled wasm keeps its fuel count in a register and stores it only at
/// calls, returns and the end of a slice; an epoch interrupt (deadline,
/// lost lease, drain) or a trap stops it without storing it, so a loop
/// without calls reads as having burnt nothing. Slices bound what can go
/// unstored to one slice: a run that did not return is charged its current
/// slice whole ([`charged_fuel`]), never less than it burnt, at most one
/// slice more.
pub const FUEL_SLICE: u64 = 5_000_000;

/// Host-wide sandbox settings. Every default is listed here.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Instances that may be live at once (pooling allocator slots). Default 128.
    pub max_instances: u32,
    /// The largest memory any one guest may be granted; resource groups
    /// above it are refused. Default 1 GiB.
    pub memory_ceiling_bytes: u64,
    /// Where compiled machine code is cached by content. Default: none.
    pub cache_dir: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            max_instances: 128,
            memory_ceiling_bytes: 1 << 30,
            cache_dir: None,
        }
    }
}

/// Errors at the sandbox boundary (loading components, not running them —
/// a running guest's failures are [`RunResult`]s). Each message is whole
/// (wasmtime's causes are folded in with `{:#}`) and no variant returns a
/// `source()`.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("not a WebAssembly file (the first bytes are not the wasm magic number)")]
    NotWasm,
    #[error(
        "this is a core WebAssembly module, not a component; turn it into a component first \
         (for example with `wasm-tools component new` or the `wit-component` crate)"
    )]
    CoreModule,
    #[error("the component is invalid: {0}")]
    Invalid(String),
    #[error(transparent)]
    Capability(#[from] capability::CapabilityError),
    #[error("the component's imports do not match what the host provides: {0}")]
    Link(String),
    #[error("sandbox set-up failed: {0}")]
    Setup(String),
}

/// A compiled, linked component ready to instantiate many times.
#[derive(Clone)]
pub struct Prepared {
    pre: JobPre<GuestState>,
    pub manifest: Arc<CapabilityManifest>,
}

/// The engine, the linker and the per-digest `InstancePre` cache.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<GuestState>,
    prepared: Mutex<HashMap<String, Prepared>>,
    /// Components compiled here ([`Sandbox::prepare`] that missed the cache).
    compiles: std::sync::atomic::AtomicU64,
    /// The pool's instance slots, one per running guest ([`Sandbox::run`]).
    instances: tokio::sync::Semaphore,
    config: SandboxConfig,
    /// Linear memory its live guests hold (the runner's memory mark).
    memory: Arc<MemoryGauge>,
    _ticker: EpochTicker,
}

/// Core instances and tables a component instance may use in the pool.
pub const CORE_PER_COMPONENT: u32 = 16;

/// The pooling allocator's settings: `max_instances` slots, each memory
/// reserved up to `memory_ceiling_bytes`. A slot's memory is reset for its
/// next instance in place (`PAGEMAP_SCAN` finds the pages the guest
/// touched, `memset` zeroes up to 1 MiB of them) instead of with `madvise`:
/// with thousands of short attempts a second, the `madvise` and the TLB
/// shootdown it sends to every other core were the largest single cost of
/// an attempt (benches/throughput). Kernels without `PAGEMAP_SCAN` (< 6.7)
/// fall back to `madvise`. Public so `benches/instantiate` measures its raw
/// baseline on the same settings.
///
/// A component instance is several core instances and tables (the guest's
/// module, the canonical-ABI shims and fix-ups — three or more for a Rust
/// guest with effects, more for componentize-py and jco output): the pool
/// holds [`CORE_PER_COMPONENT`] of each per slot, so `max_instances`
/// guests fit whatever toolchain built them. (Two per slot let only one
/// `gated` guest in a pool of two run: the second failed to instantiate,
/// a `host_error` that spent retry budget.) Those slots are address space
/// and bookkeeping, not memory: a core instance's is a few KiB of `vmctx`.
pub fn pooling(max_instances: u32, memory_ceiling_bytes: u64) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(max_instances)
        .total_core_instances(max_instances * CORE_PER_COMPONENT)
        .max_core_instances_per_component(CORE_PER_COMPONENT)
        .total_memories(max_instances)
        .total_tables(max_instances * CORE_PER_COMPONENT)
        .max_tables_per_component(CORE_PER_COMPONENT)
        // One fiber stack per attempt in flight (guests run on fibers).
        .total_stacks(max_instances)
        .max_memory_size(memory_ceiling_bytes as usize)
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10)
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> Result<Arc<Self>, SandboxError> {
        let setup = |e: wasmtime::Error| SandboxError::Setup(format!("{e:#}"));
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .memory_init_cow(true);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(
            config.max_instances,
            config.memory_ceiling_bytes,
        )));
        if let Some(dir) = &config.cache_dir {
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir.clone());
            wasm.cache(Some(wasmtime::Cache::new(cache).map_err(setup)?));
        }
        let engine = Engine::new(&wasm).map_err(setup)?;
        let mut linker = Linker::new(&engine);
        Job::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(setup)?;
        let ticker = EpochTicker::start(&engine);
        Ok(Arc::new(Self {
            engine,
            linker,
            prepared: Mutex::new(HashMap::new()),
            compiles: Default::default(),
            instances: tokio::sync::Semaphore::new(config.max_instances as usize),
            config,
            memory: Arc::default(),
            _ticker: ticker,
        }))
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Linear memory its live guests hold now, bytes.
    pub fn memory_in_use(&self) -> u64 {
        self.memory.in_use()
    }

    /// Compile and check a component: it must be a component (not a core
    /// module), import only what the host provides, match the host's types
    /// and export `run`. Returns its capability manifest. Nothing is cached.
    pub fn inspect(&self, bytes: &[u8]) -> Result<(Component, CapabilityManifest), SandboxError> {
        let (component, manifest, _) = self.compile(bytes)?;
        Ok((component, manifest))
    }

    /// [`Sandbox::inspect`], keeping the linked component.
    fn compile(
        &self,
        bytes: &[u8],
    ) -> Result<(Component, CapabilityManifest, JobPre<GuestState>), SandboxError> {
        if !bytes.starts_with(b"\0asm") {
            return Err(SandboxError::NotWasm);
        }
        if wasmparser::Parser::is_core_wasm(bytes) {
            return Err(SandboxError::CoreModule);
        }
        let component = Component::new(&self.engine, bytes)
            .map_err(|e| SandboxError::Invalid(format!("{e:#}")))?;
        let manifest = capabilities::read_manifest(&self.engine, &component);
        capability::check_host_provides(&manifest)?;
        // Type-check every import against the host's definitions.
        let pre = self.link(&component, &manifest)?;
        Ok((component, manifest, pre))
    }

    /// Link a checked component: the host's interfaces and WASI from the
    /// shared linker; `wasi:http` imports, if any, as traps on a copy of it
    /// (calling one ends the attempt as `not_granted`).
    fn link(
        &self,
        component: &Component,
        manifest: &CapabilityManifest,
    ) -> Result<JobPre<GuestState>, SandboxError> {
        let link = |e: wasmtime::Error| SandboxError::Link(format!("{e:#}"));
        let pre = if manifest
            .imports
            .iter()
            .any(|i| capability::is_denied_wasi(&i.name))
        {
            let mut linker = self.linker.clone();
            linker
                .define_unknown_imports_as_traps(component)
                .map_err(link)?;
            linker.instantiate_pre(component).map_err(link)?
        } else {
            self.linker.instantiate_pre(component).map_err(link)?
        };
        JobPre::new(pre).map_err(link)
    }

    /// The prepared component for `digest`, compiling `bytes` on first use.
    pub fn prepare(&self, digest: &str, bytes: &[u8]) -> Result<Prepared, SandboxError> {
        if let Some(p) = self.prepared.lock().expect("prepared cache").get(digest) {
            return Ok(p.clone());
        }
        let (_, manifest, pre) = self.compile(bytes)?;
        self.compiles
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prepared = Prepared {
            pre,
            manifest: Arc::new(manifest),
        };
        self.prepared
            .lock()
            .expect("prepared cache")
            .insert(digest.to_string(), prepared.clone());
        Ok(prepared)
    }

    /// How many components this sandbox compiled (each a miss of its
    /// cache of prepared components).
    pub fn compiles(&self) -> u64 {
        self.compiles.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether `digest` is already compiled and linked in this process.
    pub fn is_prepared(&self, digest: &str) -> bool {
        self.prepared
            .lock()
            .expect("prepared cache")
            .contains_key(digest)
    }

    /// Run one attempt to its end. The guest runs on a fiber on the
    /// caller's task: host calls that wait (checkpoints, effects) suspend
    /// it, and a guest that computes for long yields to the runtime at every
    /// epoch tick ([`EPOCH_TICK`]), so one thread can carry many attempts
    /// and a spinning guest cannot hold its worker.
    pub async fn run(
        &self,
        prepared: &Prepared,
        invocation: wit::context::Invocation,
        limits: &GuestLimits,
        services: Arc<dyn AttemptServices>,
        stop: Arc<StopSignal>,
    ) -> RunReport {
        // One of the pool's instance slots for the whole run: a runner may
        // have more attempts in flight than the pool has slots (attempts
        // waiting on their commit hold no instance), and an attempt that
        // found the pool full would fail to instantiate and spend retry
        // budget on a host limit — so it waits here instead. The wait is
        // not the guest's: its deadline and wall time start after it.
        let _slot = self
            .instances
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let started = Instant::now();
        let deadline = started + limits.deadline;
        let state = GuestState::new(invocation, services, limits, stop, self.memory.clone());
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Fuel is set from the group; `set_fuel` only fails when fuel is
        // disabled in the config, which it never is here.
        let _ = store.set_fuel(limits.fuel);
        // In slices, so that what a stopped guest burnt is known to within
        // one slice (see [`FUEL_SLICE`]); the end of each slice is also a
        // yield to the runtime. Fails only when fuel is disabled or the
        // interval is 0.
        let _ = store.fuel_async_yield_interval(Some(FUEL_SLICE));
        store.set_epoch_deadline(1);
        // Bounds what one host call (or `run`'s return) copies out of the
        // guest: over the caps, refused before the host allocates it.
        store.set_hostcall_fuel(limits.caps.per_call_bytes() as usize);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            state.ticks = state.ticks.wrapping_add(1);
            // Host calls are charged against the fuel wasm has left (set_fuel
            // from this callback would be overwritten by the running code).
            let host_fuel = state.host_calls * bindings::HOST_CALL_FUEL;
            if host_fuel > 0 && host_fuel >= ctx.get_fuel().unwrap_or(0) {
                return Err(wasmtime::Error::new(report::Interrupted::OutOfFuel));
            }
            let state = ctx.data_mut();
            if state.ticks % bindings::SCRATCH_CHECK_TICKS == 0 && state.too_large.is_none() {
                state.too_large = state.wasi.scratch_over_cap();
            }
            if ctx.data().too_large.is_some() {
                return Err(wasmtime::Error::new(report::Interrupted::TooLarge));
            }
            if let Some(reason) = ctx.data().stop.interrupting() {
                return Err(wasmtime::Error::new(report::Interrupted::Stopped(reason)));
            }
            if Instant::now() >= deadline {
                return Err(wasmtime::Error::new(report::Interrupted::Deadline));
            }
            // Let the worker run other tasks (tokio's yield puts this one at
            // the back of the queue, unlike a plain self-wake).
            Ok(wasmtime::UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        });
        let outcome = match prepared.pre.instantiate_async(&mut store).await {
            Ok(job) => job.call_run(&mut store).await,
            Err(e) => Err(e),
        };
        // Read after the run (the interrupt or trap included), from the
        // store; host calls are charged too.
        let host_fuel = store.data().host_calls * bindings::HOST_CALL_FUEL;
        let fuel_used = charged_fuel(
            limits.fuel,
            store.get_fuel().unwrap_or(0),
            outcome.is_ok(),
            host_fuel,
        );
        let mut state = store.into_data();
        if state.too_large.is_none() {
            state.too_large = state.wasi.scratch_over_cap();
        }
        let result = report::classify(outcome, &state, limits);
        RunReport {
            result,
            fuel_used,
            peak_memory_bytes: state.limiter.peak_bytes(),
            wall: started.elapsed(),
            log: {
                let output = state.wasi.output_text();
                state.log.into_text(&output)
            },
        }
    }
}

/// The fuel a run is charged: what the store says it burnt, plus — when it
/// did not return (an interrupt or a trap stopped it mid-slice, with its
/// last stretch unstored) — the rest of its current slice, which is at
/// most [`FUEL_SLICE`] and at most what it had left; plus its host calls.
/// Never more than `granted`.
pub fn charged_fuel(granted: u64, left_as_stored: u64, returned: bool, host_fuel: u64) -> u64 {
    let unstored = if returned {
        0
    } else {
        FUEL_SLICE.min(left_as_stored)
    };
    let left = left_as_stored
        .saturating_sub(unstored)
        .saturating_sub(host_fuel);
    granted.saturating_sub(left)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own;
/// the thread stops when the ticker (owned by the [`Sandbox`]) is dropped.
struct EpochTicker {
    running: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: &Engine) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let flag = running.clone();
        let engine = engine.clone();
        std::thread::Builder::new()
            .name("paddock-epoch".into())
            .spawn(move || {
                while flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn epoch ticker");
        Self { running }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{FUEL_SLICE, charged_fuel};

    #[test]
    fn a_run_that_returned_is_charged_what_the_store_says() {
        assert_eq!(
            charged_fuel(1_000_000_000, 400_000_000, true, 20_000),
            600_020_000
        );
    }

    #[test]
    fn a_stopped_run_is_charged_its_current_slice_whole_never_past_its_grant() {
        // Its last stretch went unstored: the rest of its slice is charged.
        assert_eq!(
            charged_fuel(1_000_000_000, 400_000_000, false, 0),
            600_000_000 + FUEL_SLICE
        );
        // Less than a slice left: at most what was left.
        assert_eq!(charged_fuel(1_000_000_000, 1_000, false, 0), 1_000_000_000);
        assert_eq!(charged_fuel(1_000_000_000, 0, false, 50_000), 1_000_000_000);
    }
}
