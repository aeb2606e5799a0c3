//! In-memory fault injection, driven by the admin endpoints.
//!
//! A *rule* (`POST /admin/faults`) has a scope and one or more effects:
//!
//! | field | when | effect |
//! |---|---|---|
//! | `latency_ms` | before anything is decided | sleep, then handle normally |
//! | `error_rate` + `error_status` | before anything is decided | answer `error_status` (default 503) with probability `error_rate` (default 1.0); nothing is committed |
//! | `drop_response_after_commit: N` | after a *new operation row* was committed | close the connection with a TCP reset instead of answering, for the next N such requests |
//! | `delay_response_ms` | after the storage step, any outcome | sleep, then answer |
//!
//! `count: n` (or `once: true`, meaning `count: 1`) bounds how many times
//! *each* of latency, error and delay fires for this rule; without it they fire
//! until `DELETE /admin/faults`. `drop_response_after_commit` is its own count.
//! A rule whose effects are all used up disappears.
//!
//! A *hold* (`POST /admin/hold`) parks matching requests after the pre-apply
//! faults and before the storage transaction until `POST /admin/release`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// Which effect requests a rule applies to. Every field given must match.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// Body of `POST /admin/faults`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub latency_ms: Option<u64>,
    pub error_rate: Option<f64>,
    pub error_status: Option<u16>,
    pub drop_response_after_commit: Option<u64>,
    pub delay_response_ms: Option<u64>,
    pub count: Option<u64>,
    #[serde(default)]
    pub once: bool,
    #[serde(default)]
    pub scope: Scope,
    /// Seed for `error_rate` sampling, for reproducible runs.
    pub seed: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultSpecError {
    #[error(
        "a fault rule needs at least one of latency_ms, error_rate, error_status, drop_response_after_commit, delay_response_ms"
    )]
    Empty,
    #[error("error_rate must be within 0.0..=1.0")]
    Rate,
    #[error("error_status must be within 400..=599")]
    Status,
    #[error("give either once or count, not both")]
    OnceAndCount,
}

/// Identifies the request being considered.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    pub resource: &'a str,
    pub action: &'a str,
    pub idempotency_key: &'a str,
    pub fencing_token: Option<u64>,
}

impl Scope {
    fn matches(&self, r: &RequestInfo<'_>) -> bool {
        self.resource.as_deref().is_none_or(|v| v == r.resource)
            && self.action.as_deref().is_none_or(|v| v == r.action)
            && self
                .idempotency_key
                .as_deref()
                .is_none_or(|v| v == r.idempotency_key)
    }
}

/// A value usable `remaining` more times (`None` = unlimited).
#[derive(Debug, Clone, Copy)]
struct Budgeted<T> {
    value: T,
    remaining: Option<u64>,
}

impl<T: Copy> Budgeted<T> {
    fn available(&self) -> bool {
        self.remaining != Some(0)
    }
    fn take(&mut self) -> Option<T> {
        match self.remaining {
            Some(0) => None,
            Some(n) => {
                self.remaining = Some(n - 1);
                Some(self.value)
            }
            None => Some(self.value),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct ErrorFault {
    rate: f64,
    status: u16,
}

#[derive(Debug)]
struct Rule {
    id: u64,
    scope: Scope,
    latency: Option<Budgeted<Duration>>,
    error: Option<Budgeted<ErrorFault>>,
    drops_remaining: u64,
    delay: Option<Budgeted<Duration>>,
    rng: u64,
}

impl Rule {
    fn exhausted(&self) -> bool {
        !self.latency.is_some_and(|b| b.available())
            && !self.error.is_some_and(|b| b.available())
            && !self.delay.is_some_and(|b| b.available())
            && self.drops_remaining == 0
    }

    fn view(&self) -> RuleView {
        RuleView {
            id: self.id,
            scope: self.scope.clone(),
            latency_ms: self.latency.map(|b| b.value.as_millis() as u64),
            latency_remaining: self.latency.and_then(|b| b.remaining),
            error_rate: self.error.map(|b| b.value.rate),
            error_status: self.error.map(|b| b.value.status),
            errors_remaining: self.error.and_then(|b| b.remaining),
            drop_response_after_commit: self.drops_remaining,
            delay_response_ms: self.delay.map(|b| b.value.as_millis() as u64),
            delay_remaining: self.delay.and_then(|b| b.remaining),
        }
    }
}

/// A rule as shown by `GET /admin/faults` (`*_remaining: null` = unlimited).
#[derive(Debug, Clone, Serialize)]
pub struct RuleView {
    pub id: u64,
    pub scope: Scope,
    pub latency_ms: Option<u64>,
    pub latency_remaining: Option<u64>,
    pub error_rate: Option<f64>,
    pub error_status: Option<u16>,
    pub errors_remaining: Option<u64>,
    pub drop_response_after_commit: u64,
    pub delay_response_ms: Option<u64>,
    pub delay_remaining: Option<u64>,
}

/// Body of `POST /admin/hold`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldSpec {
    /// Hold requests carrying this `Idempotency-Key`...
    pub hold_key: String,
    /// ...and, if given, this `Fencing-Token` (so attempt 77 can be held
    /// while attempt 78 with the same key goes through).
    pub fencing_token: Option<u64>,
}

#[derive(Debug)]
struct Hold {
    key: String,
    fencing_token: Option<u64>,
    open: watch::Sender<bool>,
    waiting: Arc<AtomicU64>,
    held_total: u64,
}

/// A hold as shown by `GET /admin/holds`.
#[derive(Debug, Clone, Serialize)]
pub struct HoldView {
    pub hold_key: String,
    pub fencing_token: Option<u64>,
    /// Requests parked right now.
    pub waiting: u64,
    /// Requests parked since the hold was placed.
    pub held_total: u64,
}

/// A request parked by a hold. Counts as waiting until dropped.
#[derive(Debug)]
pub struct HoldTicket {
    open: watch::Receiver<bool>,
    waiting: Arc<AtomicU64>,
}

impl HoldTicket {
    /// Resolves when the hold is released (or removed).
    pub async fn wait(mut self) {
        // An error means the hold's sender is gone, which also releases.
        let _ = self.open.wait_for(|open| *open).await;
    }
}

impl Drop for HoldTicket {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Injected faults by kind (for `GET /v1/stats`).
#[derive(Debug, Default)]
pub struct FaultCounters {
    pub latency: AtomicU64,
    pub error: AtomicU64,
    pub drop_response: AtomicU64,
    pub delay_response: AtomicU64,
    pub hold: AtomicU64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FaultCountersView {
    pub latency: u64,
    pub error: u64,
    pub drop_response: u64,
    pub delay_response: u64,
    pub hold: u64,
}

/// Faults decided before the storage step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PreApply {
    pub latency: Option<Duration>,
    pub error_status: Option<u16>,
}

/// Faults decided after the storage step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PostStore {
    pub drop_connection: bool,
    pub delay: Option<Duration>,
}

#[derive(Debug, Default)]
struct Inner {
    rules: Vec<Rule>,
    holds: Vec<Hold>,
    next_id: u64,
}

/// The fault-injection state shared by all handlers.
#[derive(Debug, Default)]
pub struct Faults {
    inner: Mutex<Inner>,
    pub counters: FaultCounters,
}

impl Faults {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave it inconsistent in a
        // way that matters for a test service; keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a rule; returns its id.
    pub fn add(&self, spec: FaultSpec) -> Result<RuleView, FaultSpecError> {
        if spec.latency_ms.is_none()
            && spec.error_rate.is_none()
            && spec.error_status.is_none()
            && spec.drop_response_after_commit.is_none()
            && spec.delay_response_ms.is_none()
        {
            return Err(FaultSpecError::Empty);
        }
        if spec.once && spec.count.is_some() {
            return Err(FaultSpecError::OnceAndCount);
        }
        if spec
            .error_rate
            .is_some_and(|r| !(0.0..=1.0).contains(&r) || r.is_nan())
        {
            return Err(FaultSpecError::Rate);
        }
        if spec.error_status.is_some_and(|s| !(400..=599).contains(&s)) {
            return Err(FaultSpecError::Status);
        }
        let remaining = if spec.once { Some(1) } else { spec.count };
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        let error = (spec.error_rate.is_some() || spec.error_status.is_some()).then(|| Budgeted {
            value: ErrorFault {
                rate: spec.error_rate.unwrap_or(1.0),
                status: spec.error_status.unwrap_or(503),
            },
            remaining,
        });
        let seed = spec.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
                ^ id
        });
        let rule = Rule {
            id,
            scope: spec.scope,
            latency: spec.latency_ms.map(|ms| Budgeted {
                value: Duration::from_millis(ms),
                remaining,
            }),
            error,
            drops_remaining: spec.drop_response_after_commit.unwrap_or(0),
            delay: spec.delay_response_ms.map(|ms| Budgeted {
                value: Duration::from_millis(ms),
                remaining,
            }),
            rng: seed,
        };
        let view = rule.view();
        inner.rules.push(rule);
        Ok(view)
    }

    pub fn rules(&self) -> Vec<RuleView> {
        self.lock().rules.iter().map(Rule::view).collect()
    }

    /// Removes every rule and releases every hold. Returns `(rules, holds)`.
    pub fn clear(&self) -> (usize, usize) {
        let mut inner = self.lock();
        let rules = std::mem::take(&mut inner.rules).len();
        let holds = release_holds(&mut inner, None);
        (rules, holds)
    }

    /// Latency and injected error for a request about to be handled.
    pub fn before_apply(&self, req: &RequestInfo<'_>) -> PreApply {
        let mut out = PreApply::default();
        let mut inner = self.lock();
        for rule in inner.rules.iter_mut().filter(|r| r.scope.matches(req)) {
            if let Some(d) = rule.latency.as_mut().and_then(Budgeted::take) {
                out.latency = Some(out.latency.unwrap_or_default() + d);
                self.counters.latency.fetch_add(1, Ordering::Relaxed);
            }
            if out.error_status.is_none()
                && let Some(e) = rule.error.as_mut()
                && e.available()
                && next_unit(&mut rule.rng) < e.value.rate
                && let Some(fault) = e.take()
            {
                out.error_status = Some(fault.status);
                self.counters.error.fetch_add(1, Ordering::Relaxed);
            }
        }
        inner.rules.retain(|r| !r.exhausted());
        out
    }

    /// Faults for a request whose storage step finished. `recorded` is true
    /// when it committed a new operation row (only those can be dropped).
    pub fn after_store(&self, req: &RequestInfo<'_>, recorded: bool) -> PostStore {
        let mut out = PostStore::default();
        let mut inner = self.lock();
        for rule in inner.rules.iter_mut().filter(|r| r.scope.matches(req)) {
            if recorded && !out.drop_connection && rule.drops_remaining > 0 {
                rule.drops_remaining -= 1;
                out.drop_connection = true;
                self.counters.drop_response.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !out.drop_connection {
            for rule in inner.rules.iter_mut().filter(|r| r.scope.matches(req)) {
                if let Some(d) = rule.delay.as_mut().and_then(Budgeted::take) {
                    out.delay = Some(out.delay.unwrap_or_default() + d);
                    self.counters.delay_response.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        inner.rules.retain(|r| !r.exhausted());
        out
    }

    /// Places a hold; a second hold for the same key and token is a no-op.
    pub fn add_hold(&self, spec: HoldSpec) -> HoldView {
        let mut inner = self.lock();
        if let Some(h) = inner
            .holds
            .iter()
            .find(|h| h.key == spec.hold_key && h.fencing_token == spec.fencing_token)
        {
            return hold_view(h);
        }
        let (open, _) = watch::channel(false);
        let hold = Hold {
            key: spec.hold_key,
            fencing_token: spec.fencing_token,
            open,
            waiting: Arc::new(AtomicU64::new(0)),
            held_total: 0,
        };
        let view = hold_view(&hold);
        inner.holds.push(hold);
        view
    }

    pub fn holds(&self) -> Vec<HoldView> {
        self.lock().holds.iter().map(hold_view).collect()
    }

    /// If a hold matches, returns the ticket to wait on.
    pub fn hold_for(&self, req: &RequestInfo<'_>) -> Option<HoldTicket> {
        let mut inner = self.lock();
        let hold = inner.holds.iter_mut().find(|h| {
            h.key == req.idempotency_key
                && h.fencing_token.is_none_or(|t| Some(t) == req.fencing_token)
        })?;
        hold.held_total += 1;
        hold.waiting.fetch_add(1, Ordering::SeqCst);
        self.counters.hold.fetch_add(1, Ordering::Relaxed);
        Some(HoldTicket {
            open: hold.open.subscribe(),
            waiting: hold.waiting.clone(),
        })
    }

    /// Releases the holds for `key` (all holds when `None`). Returns
    /// `(holds removed, requests that were waiting)`.
    pub fn release(&self, key: Option<&str>) -> (usize, u64) {
        let mut inner = self.lock();
        let waiting = inner
            .holds
            .iter()
            .filter(|h| key.is_none_or(|k| k == h.key))
            .map(|h| h.waiting.load(Ordering::SeqCst))
            .sum();
        let holds = release_holds(&mut inner, key);
        (holds, waiting)
    }

    pub fn counters(&self) -> FaultCountersView {
        let c = &self.counters;
        FaultCountersView {
            latency: c.latency.load(Ordering::Relaxed),
            error: c.error.load(Ordering::Relaxed),
            drop_response: c.drop_response.load(Ordering::Relaxed),
            delay_response: c.delay_response.load(Ordering::Relaxed),
            hold: c.hold.load(Ordering::Relaxed),
        }
    }
}

fn release_holds(inner: &mut Inner, key: Option<&str>) -> usize {
    let before = inner.holds.len();
    inner.holds.retain(|h| {
        if key.is_none_or(|k| k == h.key) {
            h.open.send_replace(true);
            false
        } else {
            true
        }
    });
    before - inner.holds.len()
}

fn hold_view(h: &Hold) -> HoldView {
    HoldView {
        hold_key: h.key.clone(),
        fencing_token: h.fencing_token,
        waiting: h.waiting.load(Ordering::SeqCst),
        held_total: h.held_total,
    }
}

/// splitmix64 mapped to `[0, 1)`.
fn next_unit(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(resource: &'a str, key: &'a str, token: Option<u64>) -> RequestInfo<'a> {
        RequestInfo {
            resource,
            action: "reserve",
            idempotency_key: key,
            fencing_token: token,
        }
    }

    #[test]
    fn a_once_error_fires_once_then_the_rule_is_gone() {
        let f = Faults::default();
        f.add(FaultSpec {
            error_status: Some(503),
            once: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(f.before_apply(&req("R", "k", None)).error_status, Some(503));
        assert_eq!(f.before_apply(&req("R", "k", None)).error_status, None);
        assert!(f.rules().is_empty());
    }

    #[test]
    fn scope_limits_a_rule_to_its_resource() {
        let f = Faults::default();
        f.add(FaultSpec {
            latency_ms: Some(10),
            scope: Scope {
                resource: Some("A".into()),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        assert_eq!(f.before_apply(&req("B", "k", None)).latency, None);
        assert_eq!(
            f.before_apply(&req("A", "k", None)).latency,
            Some(Duration::from_millis(10))
        );
    }

    #[test]
    fn drops_apply_only_to_recorded_commits_and_count_down() {
        let f = Faults::default();
        f.add(FaultSpec {
            drop_response_after_commit: Some(2),
            ..Default::default()
        })
        .unwrap();
        let r = req("R", "k", None);
        assert!(!f.after_store(&r, false).drop_connection);
        assert!(f.after_store(&r, true).drop_connection);
        assert!(f.after_store(&r, true).drop_connection);
        assert!(!f.after_store(&r, true).drop_connection);
        assert_eq!(f.counters().drop_response, 2);
    }

    #[test]
    fn a_seeded_error_rate_is_reproducible_and_roughly_right() {
        let run = || {
            let f = Faults::default();
            f.add(FaultSpec {
                error_rate: Some(0.5),
                seed: Some(42),
                ..Default::default()
            })
            .unwrap();
            (0..1000)
                .map(|_| f.before_apply(&req("R", "k", None)).error_status.is_some())
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let errors = a.iter().filter(|e| **e).count();
        assert!((400..600).contains(&errors), "{errors}");
    }

    #[test]
    fn invalid_specs_are_refused() {
        let f = Faults::default();
        let bad = |spec: FaultSpec| f.add(spec).unwrap_err();
        assert_eq!(bad(FaultSpec::default()), FaultSpecError::Empty);
        assert_eq!(
            bad(FaultSpec {
                error_rate: Some(1.5),
                ..Default::default()
            }),
            FaultSpecError::Rate
        );
        assert_eq!(
            bad(FaultSpec {
                error_status: Some(200),
                ..Default::default()
            }),
            FaultSpecError::Status
        );
        assert_eq!(
            bad(FaultSpec {
                latency_ms: Some(1),
                once: true,
                count: Some(2),
                ..Default::default()
            }),
            FaultSpecError::OnceAndCount
        );
    }

    #[tokio::test]
    async fn a_hold_matches_key_and_token_and_release_lets_it_go() {
        let f = Faults::default();
        f.add_hold(HoldSpec {
            hold_key: "K".into(),
            fencing_token: Some(77),
        });
        assert!(f.hold_for(&req("R", "K", Some(78))).is_none());
        assert!(f.hold_for(&req("R", "J", Some(77))).is_none());
        let ticket = f.hold_for(&req("R", "K", Some(77))).unwrap();
        assert_eq!(f.holds()[0].waiting, 1);
        let waiter = tokio::spawn(ticket.wait());
        assert_eq!(f.release(Some("K")), (1, 1));
        waiter.await.unwrap();
        assert!(f.holds().is_empty());
    }
}
