//! Paddock: a host that runs job logic shipped as sandboxed WebAssembly
//! components, under leases and fencing tokens, with every side effect made
//! idempotent by the host.
//!
//! # Layout
//!
//! - [`model`]: the domain — the trigger state machine, how an attempt
//!   ends, retry budgets, fencing tokens and leases, plan specs and keys,
//!   capability manifests, the audit chain. Pure; every plane imports it and
//!   it imports none.
//! - [`registry`]: components (content-addressed, with capability manifests),
//!   jobs and immutable plan versions, resource groups — the admin plane.
//! - [`schedule`]: what should run and when — cron in time zones, DST,
//!   misfire and overlap policies, shards and scan windows (pure logic).
//! - [`lease`]: claiming triggers with a lease and a fencing token,
//!   heartbeats, committing results only under a current token — the
//!   execution plane's control loop.
//! - [`sandbox`]: wasmtime engine, per-group limits (fuel, memory, deadline),
//!   the host side of the WIT interfaces, trap classification.
//! - [`effects`]: the side-effect gateway guests call through (the host side
//!   of `paddock:job/effects`).
//! - [`store`]: the database — the single source of truth — and its
//!   migrations, split into role traits by who uses it (`RunnerStore`,
//!   `SchedulerStore`, `EffectStore`, `ControlStore`, shared `ReadStore`);
//!   every write under a lease is fenced in its own statement. All instants
//!   come from the database clock.
//! - [`observe`]: what operators see of a node — `/metrics` (cluster-wide
//!   figures from the database, per-process ones from the planes) and the
//!   `/healthz` / `/readyz` probes.
//! - [`api`]: the HTTP admin API (`paddock serve --api ADDR`): the
//!   command line's reads and writes for tokens with roles, each team
//!   token held to its tenant in the SQL it runs.
//! - [`node`]: one process's scanner, runner, heartbeats, effect recovery
//!   and wake-ups composed and started together; `paddock serve` and
//!   in-process tests run the same node.
//!
//! The `paddock` command line and the embedded demo are the binary's own
//! modules (`src/bin/paddock/`), over this crate's public API.
//!
//! Layers, lowest first: `model`; `store`, `sandbox`; `schedule`,
//! `effects`; `registry`, `lease`; `observe`, `api`; `node`. A module imports only lower
//! layers (`tests/all/layers.rs`).
//!
//! The database decides every identity; memory only makes things faster.
#![forbid(unsafe_code)]

pub mod api;
pub mod effects;
pub mod lease;
pub mod model;
pub mod node;
pub mod observe;
pub mod registry;
pub mod sandbox;
pub mod schedule;
pub mod store;

pub use store::Store;
