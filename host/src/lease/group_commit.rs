//! Group commit for attempt ends. Attempts that finish while a commit is in
//! flight are queued and committed together in the next transaction, so a
//! busy runner pays one durable write per batch instead of one per attempt,
//! and an idle one pays no added latency (nothing waits for a batch to
//! fill). Fencing is unchanged: every trigger transition in the batch is
//! still checked against its own token in its own statement, and a stale
//! one is refused alone (see [`RunnerStore::attempt_finish_batch`]).
//!
//! Up to `in_flight` batches are committed at once. On PostgreSQL a commit
//! is one round trip that mostly waits — on the network and on the WAL
//! flush — so a second and third batch keep the server busy meanwhile
//! (batches touch disjoint attempts, and each end is fenced on its own,
//! so their order does not matter). SQLite has one writer: one at a time.

use crate::model::{AttemptEnd, LeaseRef, TriggerState};
use crate::store::{RunnerStore, StoreResult};
use std::sync::Arc;
use std::sync::OnceLock;
use tokio::sync::{Semaphore, mpsc, oneshot};

struct Pending {
    lease: LeaseRef,
    end: AttemptEnd,
    reply: oneshot::Sender<StoreResult<TriggerState>>,
}

/// The queue in front of [`RunnerStore::attempt_finish_batch`]. Cheap to share;
/// its task starts on first use, on the caller's runtime — for a runner,
/// the guest runtime its attempts finish on, so a commit's replies wake
/// their attempts without a hop between threads (committing from the main
/// runtime instead measured 5-10% slower on `benches/throughput`) — and
/// stops when the queue is dropped.
pub struct CommitQueue {
    store: Arc<dyn RunnerStore>,
    max_batch: usize,
    in_flight: usize,
    sender: OnceLock<mpsc::UnboundedSender<Pending>>,
}

impl CommitQueue {
    /// Batches of at most `max_batch` ends, at most `in_flight` of them
    /// committing at once.
    pub fn new(store: Arc<dyn RunnerStore>, max_batch: usize, in_flight: usize) -> Self {
        Self {
            store,
            max_batch: max_batch.max(1),
            in_flight: in_flight.max(1),
            sender: OnceLock::new(),
        }
    }

    /// Commit how an attempt ended, together with whatever else is waiting;
    /// the state the database wrote.
    pub async fn finish(&self, lease: &LeaseRef, end: &AttemptEnd) -> StoreResult<TriggerState> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            lease: lease.clone(),
            end: end.clone(),
            reply,
        };
        match self.sender().send(pending) {
            Ok(()) => match answer.await {
                Ok(result) => result,
                // The committer is gone (runtime shutting down): commit alone.
                Err(_) => self.store.attempt_finish(lease, end).await,
            },
            Err(_) => self.store.attempt_finish(lease, end).await,
        }
    }

    fn sender(&self) -> &mpsc::UnboundedSender<Pending> {
        self.sender.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(commit_loop(
                self.store.clone(),
                rx,
                self.max_batch,
                self.in_flight,
            ));
            tx
        })
    }
}

async fn commit_loop(
    store: Arc<dyn RunnerStore>,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    max_batch: usize,
    in_flight: usize,
) {
    let permits = Arc::new(Semaphore::new(in_flight));
    loop {
        // Wait for a free commit first: while all are busy, ends pile up
        // in the queue and the next batch is larger.
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .expect("the commit semaphore is never closed");
        let mut batch = Vec::with_capacity(max_batch);
        if rx.recv_many(&mut batch, max_batch).await == 0 {
            break;
        }
        // Let the tasks already runnable on this runtime (attempts about to
        // finish) go first, then take whatever they queued: a zero-time
        // linger. An idle runtime comes straight back; a busy one commits a
        // burst of ends in one batch instead of the first alone and the
        // rest after it.
        if batch.len() < max_batch {
            tokio::task::yield_now().await;
            while batch.len() < max_batch {
                match rx.try_recv() {
                    Ok(pending) => batch.push(pending),
                    Err(_) => break,
                }
            }
        }
        let store = store.clone();
        tokio::spawn(async move {
            commit(store.as_ref(), batch).await;
            drop(permit);
        });
    }
    // The queue is closed: wait for the commits still in flight.
    let _ = permits.acquire_many(in_flight as u32).await;
}

/// Commit one batch and answer each of its attempts.
async fn commit(store: &dyn RunnerStore, batch: Vec<Pending>) {
    let ends: Vec<(LeaseRef, AttemptEnd)> = batch
        .iter()
        .map(|p| (p.lease.clone(), p.end.clone()))
        .collect();
    match store.attempt_finish_batch(&ends).await {
        Ok(results) => {
            for (pending, result) in batch.into_iter().zip(results) {
                let _ = pending.reply.send(result);
            }
        }
        // The batch failed as a whole (the database, not a token): commit
        // one by one so each attempt gets its own answer.
        Err(e) => {
            tracing::warn!(error = %crate::model::text::Esc(&e), size = batch.len(), "group commit failed; committing one by one");
            for pending in batch {
                let result = store.attempt_finish(&pending.lease, &pending.end).await;
                let _ = pending.reply.send(result);
            }
        }
    }
}
