//! Instantiate-and-run latency of the trivial guest (`noop`: one host call,
//! returns "ok") through Paddock's path — `Sandbox::run` with per-attempt
//! store, memory limiter, fuel, epoch deadline callback and result
//! classification — next to raw wasmtime `InstancePre::instantiate` + call
//! on an engine with the same configuration (pooling allocator, fuel,
//! epochs), and on a minimal one (pooling allocator only), measured in the
//! same run, interleaved so machine noise hits all three alike.
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
    let paddock_run = || {
        let report = sandbox.run(
            &prepared,
            invocation.clone(),
            &limits,
            services.clone(),
            Arc::new(StopSignal::default()),
        );
        assert!(
            matches!(report.result, paddock::sandbox::RunResult::Output(_)),
            "{:?}",
            report.result
        );
    };

    let same_engine = engine(true);
    let same_pre = raw_pre(&same_engine, &bytes);
    let min_engine = engine(false);
    let min_pre = raw_pre(&min_engine, &bytes);

    // Warm up every path (page faults, pool slots, caches).
    for _ in 0..500 {
        paddock_run();
        raw_run(&same_engine, &same_pre, true);
        raw_run(&min_engine, &min_pre, false);
    }
    let (mut p, mut s, mut m) = (
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
    );
    for _ in 0..runs {
        let t = Instant::now();
        paddock_run();
        p.push(t.elapsed());
        let t = Instant::now();
        raw_run(&same_engine, &same_pre, true);
        s.push(t.elapsed());
        let t = Instant::now();
        raw_run(&min_engine, &min_pre, false);
        m.push(t.elapsed());
    }
    let (pp50, pp99, pmean) = percentiles(p);
    let (sp50, sp99, smean) = percentiles(s);
    let (mp50, mp99, mmean) = percentiles(m);
    println!("instantiate-and-run of the noop guest, {runs} runs each, interleaved (µs)");
    println!("{:<44} {:>8} {:>8} {:>8}", "path", "p50", "p99", "mean");
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        "paddock Sandbox::run", pp50, pp99, pmean
    );
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        "raw InstancePre (pooling + fuel + epochs)", sp50, sp99, smean
    );
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        "raw InstancePre (pooling only)", mp50, mp99, mmean
    );
    println!(
        "ratio paddock / raw same config: p50 {:.2}x  p99 {:.2}x",
        pp50 / sp50,
        pp99 / sp99
    );
    println!(
        "ratio paddock / raw pooling only: p50 {:.2}x  p99 {:.2}x",
        pp50 / mp50,
        pp99 / mp99
    );
}
