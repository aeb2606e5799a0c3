//! The domain: Paddock's rules as pure types and functions — no I/O, no
//! database, no clock, no wasmtime. Every plane imports this layer; it
//! imports no plane (checked by `tests/all/layers.rs`).
//!
//! | file | owns |
//! |---|---|
//! | `state.rs` | the trigger state machine: [`TriggerState`], [`Transition`], [`AttemptOutcome`] |
//! | `effect_state.rs` | the effect state machine: [`EffectState`], [`EffectTransition`] |
//! | `attempt.rs` | how an attempt ends: [`RunResult`], [`RunReport`], [`StopReason`], [`decide_end`] |
//! | `run_outcome.rs` | what became of an attempt as the runner reports it: [`RunOutcome`], with the state the database wrote |
//! | `retry.rs` | the retry budget: [`RetryPolicy`], backoff with jitter, budget checks |
//! | `fencing.rs` | leases and their identities: [`FencingToken`], [`ShardGeneration`], [`LeaseRef`], [`Claim`], [`ShardLease`] |
//! | `plan.rs` | plan specs, digests, canonical JSON, plan keys, shards |
//! | `capability.rs` | capability manifests and the checks made against them |
//! | `group.rs` | resource groups, their effective concurrency, tenant quotas |
//! | `admission.rs` | which tenants a resource group admits |
//! | `shares.rs` | groups' minimum shares and the recovery lane's share and ramp |
//! | `audit.rs` | the audit log's hash chain |
//! | `dburl.rs` | database URLs as printed: the password hidden in every form the store accepts |
//! | `gates.rs` | pause, resume and cancel at five scopes: [`gates::GateScope`], their reports, late fires at resume |
//! | `backlog.rs` | a group's backlog, arrival and success rates over a window, the drain ETA |
//! | `report.rs` | `paddock report`: incident classes and auto-closure, cost per correct result, conservation checks |
//! | `origin.rs` | a connector's base URL rule (no user info) and the redaction of a credential echoed in an answer |
//! | `output.rs` | a run's result bytes in JSON: the value, UTF-8 text or base64, and which |
//! | `text.rs` | people's text as printed: control characters escaped ([`text::escape`], [`text::Esc`]) in every CLI printer and log field |
//! | `tickets.rs` | the two-person rule: high-risk actions (ticket resolutions, the global resume), who is a different person, the local command line's approvals |
//! | `trigger_origin.rs` | where a trigger came from: [`TriggerOrigin`] (schedule, manual, backfill) |
//! | `time.rs` | durations written for people; instants as ms since the epoch |
//! | `units.rs` | sizes and durations in flags and files, checked and named |
//! | `bounds.rs` | the documented limit of every number a person sends, one check each |

pub mod admission;
pub mod attempt;
pub mod audit;
pub mod backlog;
pub mod bounds;
pub mod capability;
pub mod caps;
pub mod dburl;
pub mod effect_state;
pub mod envelope;
pub mod fencing;
pub mod gates;
pub mod grants;
pub mod group;
pub mod identity;
pub mod origin;
pub mod output;
pub mod plan;
pub mod report;
pub mod retry;
pub mod review;
pub mod run_outcome;
pub mod secret;
pub mod shares;
pub mod state;
pub mod takeover;
pub mod text;
pub mod tickets;
pub mod time;
pub mod trigger_origin;
pub mod units;

pub use attempt::{
    AttemptEnd, EndDecision, EndInputs, ErrorClass, ReleaseReason, RunReport, RunResult,
    StopReason, TrapKind, decide_end,
};
pub use capability::CapabilityManifest;
pub use effect_state::{EffectState, EffectTransition};
pub use fencing::{Claim, FencingToken, LeaseRef, ShardGeneration, ShardLease};
pub use group::ResourceGroup;
pub use plan::{ApplyOutcome, PlanKey, PlanSpec, canonical_json, plan_key, plan_key_ms, shard_of};
pub use retry::{Budget, RetryPolicy};
pub use run_outcome::RunOutcome;
pub use state::{AttemptOutcome, Transition, TriggerState, after_resolution};
pub use trigger_origin::TriggerOrigin;
