//! Instantiate-and-run latency of the trivial guest (`noop`: one host call,
//! returns "ok") through Paddock's path — `Sandbox::run` with per-attempt
//! store, memory limiter, fuel, epoch deadline callback, the guest on a
//! fiber, and result classification — next to raw wasmtime
//! `InstancePre::instantiate` + call on an engine with the same
//! configuration (pooling allocator, fuel, epochs), called on a fiber
//! (`call_async`, what Paddock does) and synchronously, and on a minimal one
//! (pooling allocator only, synchronous), measured in the same run,
//! interleaved so machine noise hits all four alike.
//!
//! Paddock's engine links WASI 0.2 (deny-by-default) for every component;
//! `noop` imports none of it, so the Paddock row is "WASI linked, nothing
//! granted" against raw engines without WASI.
//!
//! Then the Python and JavaScript effector jobs (componentize-py,
//! componentize-js; one `effects.query` host call): component size, cold
//! compile (empty code cache), a restart (a new engine on the filled
//! on-disk cache, keyed by content and engine settings), the first run and
//! the p50 of later runs.
//!
//! Run: `cargo bench --bench instantiate` (after `bash scripts/build-guests.sh`).
//! Env: `PADDOCK_BENCH_RUNS` (default 20000).

use paddock::sandbox::{GuestLimits, NoServices, Sandbox, SandboxConfig, StopSignal};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Store};

mod raw {
    wasmtime::component::bindgen!({ path: "../wit", world: "job" });
    use self::paddock::job::{checkpoint, context, effects, log, types};

    /// The least a host can do to satisfy the imports.
    pub struct State;
    impl types::Host for State {}
    impl context::Host for State {
        fn current(&mut self) -> context::Invocation {
            context::Invocation {
                job_id: String::new(),
                tenant: String::new(),
                trigger_id: String::new(),
                plan_key: String::new(),
                plan_version: 1,
                scheduled_at: String::new(),
                attempt: 1,
                params: "{}".into(),
            }
        }
        fn poll(&mut self) -> types::Control {
            types::Control::Proceed
        }
    }
    impl checkpoint::Host for State {
        fn load(&mut self) -> Option<Vec<u8>> {
            None
        }
        fn save(&mut self, _: Vec<u8>) -> types::Control {
            types::Control::Proceed
        }
    }
    impl effects::Host for State {
        fn invoke(
            &mut self,
            r: effects::Request,
        ) -> Result<effects::Outcome, effects::EffectError> {
            Err(effects::EffectError::NotGranted(r.connector))
        }
        fn query(
            &mut self,
            c: String,
            _: String,
        ) -> Result<Option<effects::Outcome>, effects::EffectError> {
            Err(effects::EffectError::NotGranted(c))
        }
    }
    impl log::Host for State {
        fn log(&mut self, _: log::Level, _: String) {}
    }
}

/// The same guest bindings with `run` called on a fiber.
mod raw_async {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "job",
        exports: { default: async },
        with: { "paddock:job": super::raw::paddock::job },
    });
}

fn engine(fuel_and_epochs: bool) -> Engine {
    let mut config = Config::new();
    config.wasm_component_model(true);
    if fuel_and_epochs {
        config.consume_fuel(true).epoch_interruption(true);
    }
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(
        paddock::sandbox::pooling(128, 1 << 30),
    ));
    Engine::new(&config).unwrap()
}

fn raw_pre(engine: &Engine, bytes: &[u8]) -> raw::JobPre<raw::State> {
    let component = Component::new(engine, bytes).unwrap();
    let mut linker = Linker::new(engine);
    raw::Job::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).unwrap();
    raw::JobPre::new(linker.instantiate_pre(&component).unwrap()).unwrap()
}

fn raw_run(engine: &Engine, pre: &raw::JobPre<raw::State>, fuel_and_epochs: bool) {
    let mut store = Store::new(engine, raw::State);
    if fuel_and_epochs {
        store.set_fuel(u64::MAX / 2).unwrap();
        store.set_epoch_deadline(1_000_000);
    }
    let job = pre.instantiate(&mut store).unwrap();
    let out = job.call_run(&mut store).unwrap();
    assert_eq!(out.unwrap(), b"ok");
}

fn raw_async_pre(engine: &Engine, bytes: &[u8]) -> raw_async::JobPre<raw::State> {
    let component = Component::new(engine, bytes).unwrap();
    let mut linker = Linker::new(engine);
    raw_async::Job::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).unwrap();
    raw_async::JobPre::new(linker.instantiate_pre(&component).unwrap()).unwrap()
}

async fn raw_async_run(engine: &Engine, pre: &raw_async::JobPre<raw::State>) {
    let mut store = Store::new(engine, raw::State);
    store.set_fuel(u64::MAX / 2).unwrap();
    store.set_epoch_deadline(1_000_000);
    let job = pre.instantiate_async(&mut store).await.unwrap();
    let out = job.call_run(&mut store).await.unwrap();
    assert_eq!(out.unwrap(), b"ok");
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    (
        at(0.50),
        at(0.99),
        samples.iter().sum::<Duration>().as_secs_f64() * 1e6 / samples.len() as f64,
    )
}

fn main() {
    let runs: usize = std::env::var("PADDOCK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/guests/noop.wasm");
    let bytes = std::fs::read(path).expect("build the guests first: bash scripts/build-guests.sh");

    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let prepared = sandbox.prepare("noop", &bytes).unwrap();
    let limits = GuestLimits::default();
    let invocation = paddock::sandbox::wit::context::Invocation {
        job_id: "noop".into(),
        tenant: "bench".into(),
        trigger_id: "1".into(),
        plan_key: "noop@2027-01-01T00:00:00Z@v1".into(),
        plan_version: 1,
        scheduled_at: "2027-01-01T00:00:00Z".into(),
        attempt: 1,
        params: "{}".into(),
    };
    let services: Arc<dyn paddock::sandbox::AttemptServices> = Arc::new(NoServices);
    // The guest runs on a fiber polled by this (current-thread) runtime, as
    // in the runner, minus the other attempts.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let paddock_run = || {
        let report = rt.block_on(sandbox.run(
            &prepared,
            invocation.clone(),
            &limits,
            services.clone(),
            Arc::new(StopSignal::default()),
        ));
        assert!(
            matches!(report.result, paddock::sandbox::RunResult::Output(_)),
            "{:?}",
            report.result
        );
    };

    let same_engine = engine(true);
    let same_pre = raw_pre(&same_engine, &bytes);
    let fiber_pre = raw_async_pre(&same_engine, &bytes);
    let min_engine = engine(false);
    let min_pre = raw_pre(&min_engine, &bytes);

    // Warm up every path (page faults, pool slots, caches).
    for _ in 0..500 {
        paddock_run();
        rt.block_on(raw_async_run(&same_engine, &fiber_pre));
        raw_run(&same_engine, &same_pre, true);
        raw_run(&min_engine, &min_pre, false);
    }
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for _ in 0..runs {
        let t = Instant::now();
        paddock_run();
        samples[0].push(t.elapsed());
        let t = Instant::now();
        rt.block_on(raw_async_run(&same_engine, &fiber_pre));
        samples[1].push(t.elapsed());
        let t = Instant::now();
        raw_run(&same_engine, &same_pre, true);
        samples[2].push(t.elapsed());
        let t = Instant::now();
        raw_run(&min_engine, &min_pre, false);
        samples[3].push(t.elapsed());
    }
    let [p, f, s, m] = samples.map(percentiles);
    println!("instantiate-and-run of the noop guest, {runs} runs each, interleaved (µs)");
    println!("{:<52} {:>8} {:>8} {:>8}", "path", "p50", "p99", "mean");
    for (name, (p50, p99, mean)) in [
        ("paddock Sandbox::run (fiber)", p),
        ("raw InstancePre, fiber (pooling + fuel + epochs)", f),
        ("raw InstancePre, sync (pooling + fuel + epochs)", s),
        ("raw InstancePre, sync (pooling only)", m),
    ] {
        println!("{name:<52} {p50:>8.2} {p99:>8.2} {mean:>8.2}");
    }
    println!(
        "ratio paddock / raw fiber, same config: p50 {:.2}x  p99 {:.2}x",
        p.0 / f.0,
        p.1 / f.1
    );
    println!(
        "ratio paddock / raw sync, same config:  p50 {:.2}x  p99 {:.2}x",
        p.0 / s.0,
        p.1 / s.1
    );
    println!(
        "ratio paddock / raw sync, pooling only: p50 {:.2}x  p99 {:.2}x",
        p.0 / m.0,
        p.1 / m.1
    );
    println!();
    println!(
        "{:<12} {:>10} {:>12} {:>12} {:>11} {:>11}",
        "component", "size MB", "cold ms", "restart ms", "first ms", "p50 ms"
    );
    for name in ["py_effector", "js_effector"] {
        foreign(&rt, name, &limits, &invocation, &services);
    }
}

/// Cold start and steady state of a component from a standard toolchain.
fn foreign(
    rt: &tokio::runtime::Runtime,
    name: &str,
    limits: &GuestLimits,
    invocation: &paddock::sandbox::wit::context::Invocation,
    services: &Arc<dyn paddock::sandbox::AttemptServices>,
) {
    let path = format!(
        "{}/../target/guests/{name}.wasm",
        env!("CARGO_MANIFEST_DIR")
    );
    let Ok(bytes) = std::fs::read(&path) else {
        println!("{name:<12} not built (bash scripts/build-foreign-guests.sh)");
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let config = || SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let t = Instant::now();
    Sandbox::new(config())
        .unwrap()
        .prepare(name, &bytes)
        .unwrap();
    let cold = t.elapsed();
    let sandbox = Sandbox::new(config()).unwrap();
    let t = Instant::now();
    let prepared = sandbox.prepare(name, &bytes).unwrap();
    let restart = t.elapsed();
    let mut invocation = invocation.clone();
    invocation.params = r#"{"connector":"x","action":"a","key":"k","mode":"query"}"#.into();
    let run = || {
        let t = Instant::now();
        rt.block_on(sandbox.run(
            &prepared,
            invocation.clone(),
            limits,
            services.clone(),
            Arc::new(StopSignal::default()),
        ));
        t.elapsed()
    };
    let first = run();
    let later: Vec<Duration> = (0..50).map(|_| run()).collect();
    let (p50, _, _) = percentiles(later);
    println!(
        "{name:<12} {:>10.1} {:>12.0} {:>12.0} {:>11.1} {:>11.2}",
        bytes.len() as f64 / 1e6,
        ms(cold),
        ms(restart),
        ms(first),
        p50 / 1e3
    );
}
