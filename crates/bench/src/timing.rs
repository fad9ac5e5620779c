//! A timing breakdown of the coordinator's steps, taken at its ports: the coordinator is generic
//! over its transaction log and transport, so the bench wraps both (no change to the core) and
//! adds up the wall time each step takes. At concurrency 1 this is the latency breakdown of a
//! transaction: begin, prepare (per participant, sent together), decide, commit (per
//! participant, together), finalize. Each call also runs in its step's
//! [`crate::capacity::in_step`], so the capacity units it spends are charged to that step.
//!
//! The injected-latency cells ([`crate::inject`]) also record how long each item stays held,
//! from its prepare's `yes` to its release's acknowledgement ([`Holds`]), and put a Lambda
//! invoke's hop before every participant call ([`HopTransport`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use twopc_core::ids::TxId;
use twopc_core::message::{
    CompleteReply, CompleteRequest, InquireReply, InquireRequest, PrepareReply, PrepareRequest,
};
use twopc_core::ports::{Created, PortError, Swapped, Transport, TransportError, TxLog};
use twopc_core::record::{Target, TxRecord, Vote};
use twopc_core::status::TxStatus;

use crate::capacity::in_step;

/// The steps told apart.
pub const STEPS: [&str; 8] = [
    "begin (PutItem)",
    "prepare (UpdateItem)",
    "decide (UpdateItem)",
    "commit (UpdateItem)",
    "abort",
    "finalize (UpdateItem)",
    "read record (GetItem)",
    "other",
];

#[derive(Debug, Default)]
struct Slots {
    calls: [AtomicU64; STEPS.len()],
    nanos: [AtomicU64; STEPS.len()],
}

/// Shared counters of the wrappers.
#[derive(Clone, Debug, Default)]
pub struct StepTimes(Arc<Slots>);

/// Calls and total wall time per step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Steps {
    /// Calls per step ([`STEPS`] order).
    pub calls: [u64; STEPS.len()],
    /// Wall time per step.
    pub total: [Duration; STEPS.len()],
}

impl StepTimes {
    fn add(&self, step: usize, started: Instant) {
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.calls[step].fetch_add(1, Ordering::Relaxed);
        self.0.nanos[step].fetch_add(ns, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> Steps {
        let mut s = Steps::default();
        for i in 0..STEPS.len() {
            s.calls[i] = self.0.calls[i].load(Ordering::Relaxed);
            s.total[i] = Duration::from_nanos(self.0.nanos[i].load(Ordering::Relaxed));
        }
        s
    }
}

impl Steps {
    /// `self - earlier`.
    pub fn since(&self, earlier: &Steps) -> Steps {
        let mut s = Steps::default();
        for i in 0..STEPS.len() {
            s.calls[i] = self.calls[i].saturating_sub(earlier.calls[i]);
            s.total[i] = self.total[i].saturating_sub(earlier.total[i]);
        }
        s
    }

    /// `self + other`.
    pub fn plus(&self, other: &Steps) -> Steps {
        let mut s = *self;
        for i in 0..STEPS.len() {
            s.calls[i] += other.calls[i];
            s.total[i] += other.total[i];
        }
        s
    }

    /// Mean wall time of one call of step `i`.
    pub fn mean(&self, i: usize) -> Option<Duration> {
        u32::try_from(self.calls[i])
            .ok()
            .filter(|n| *n > 0)
            .map(|n| self.total[i] / n)
    }
}

/// A [`TxLog`] that times its calls.
#[derive(Clone, Debug)]
pub struct TimedLog<L> {
    inner: L,
    times: StepTimes,
}

impl<L> TimedLog<L> {
    /// Wraps `inner`.
    pub fn new(inner: L, times: StepTimes) -> Self {
        TimedLog { inner, times }
    }
}

impl<L: TxLog> TxLog for TimedLog<L> {
    async fn create(&self, record: &TxRecord) -> Result<Created, PortError> {
        let t = Instant::now();
        let r = in_step(0, self.inner.create(record)).await;
        self.times.add(0, t);
        r
    }

    async fn get(&self, tx: &TxId) -> Result<Option<TxRecord>, PortError> {
        let t = Instant::now();
        let r = in_step(6, self.inner.get(tx)).await;
        self.times.add(6, t);
        r
    }

    async fn transition(
        &self,
        record: &TxRecord,
        to: TxStatus,
        votes: Option<&[Vote]>,
        now: u64,
    ) -> Result<Swapped, PortError> {
        let t = Instant::now();
        let step = if to.is_terminal() { 5 } else { 2 };
        let r = in_step(step, self.inner.transition(record, to, votes, now)).await;
        self.times.add(step, t);
        r
    }

    async fn create_aborted(&self, tx: &TxId, now: u64) -> Result<Created, PortError> {
        let t = Instant::now();
        let r = in_step(7, self.inner.create_aborted(tx, now)).await;
        self.times.add(7, t);
        r
    }

    async fn overdue(&self, now: u64, limit: usize) -> Result<Vec<TxRecord>, PortError> {
        self.inner.overdue(now, limit).await
    }

    async fn oldest_pending_deadline(&self) -> Result<Option<u64>, PortError> {
        self.inner.oldest_pending_deadline().await
    }

    async fn note_failed_attempt(
        &self,
        tx: &TxId,
        retry_after: u64,
        now: u64,
    ) -> Result<(), PortError> {
        self.inner.note_failed_attempt(tx, retry_after, now).await
    }

    async fn ask_recovery(&self, tx: &TxId, now: u64) -> Result<bool, PortError> {
        self.inner.ask_recovery(tx, now).await
    }
}

/// How long items stayed held: from the moment a participant's `yes` vote was back at the
/// coordinator to the moment its release (commit or abort) was acknowledged, per item. Clones
/// share the record.
#[derive(Clone, Debug, Default)]
pub struct Holds(Arc<Mutex<HoldsInner>>);

#[derive(Debug, Default)]
struct HoldsInner {
    /// Items held now, by transaction and item, since when (tokio's clock, which tests pause).
    open: HashMap<(TxId, String), tokio::time::Instant>,
    /// Hold times of released items, in release order.
    closed: Vec<Duration>,
}

impl Holds {
    fn item(req_tx: &TxId, target: &Target, key: &impl std::fmt::Debug) -> (TxId, String) {
        (req_tx.clone(), format!("{target:?}/{key:?}"))
    }

    fn held(&self, item: (TxId, String), at: tokio::time::Instant) {
        let mut h = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        h.open.insert(item, at);
    }

    fn released(&self, item: &(TxId, String), at: tokio::time::Instant) {
        let mut h = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(since) = h.open.remove(item) {
            h.closed.push(at.saturating_duration_since(since));
        }
    }

    /// Hold times recorded so far (count them before and after a window to take its share).
    pub fn released_count(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
            .len()
    }

    /// The hold times recorded after the first `from`.
    pub fn since(&self, from: usize) -> Vec<Duration> {
        let h = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        h.closed
            .get(from..)
            .map_or_else(Vec::new, <[Duration]>::to_vec)
    }

    /// Items held now (a prepare's `yes` not yet followed by an acknowledged release).
    pub fn open(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .len()
    }
}

/// A [`Transport`] that times its calls (and records holds, if given [`Holds`]).
#[derive(Clone, Debug)]
pub struct TimedTransport<T> {
    inner: T,
    times: StepTimes,
    holds: Option<Holds>,
}

impl<T> TimedTransport<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, times: StepTimes) -> Self {
        TimedTransport {
            inner,
            times,
            holds: None,
        }
    }

    /// Records each item's hold into `holds`.
    pub fn with_holds(self, holds: Option<Holds>) -> Self {
        TimedTransport { holds, ..self }
    }

    fn release(
        &self,
        req: &CompleteRequest,
        target: &Target,
        reply: &Result<CompleteReply, TransportError>,
    ) {
        if let (Some(holds), Ok(reply)) = (&self.holds, reply)
            && reply.acknowledged()
        {
            holds.released(
                &Holds::item(&req.tx_id, target, &req.key),
                tokio::time::Instant::now(),
            );
        }
    }
}

impl<T: Transport> Transport for TimedTransport<T> {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        let t = Instant::now();
        let r = in_step(1, self.inner.prepare(target, req)).await;
        self.times.add(1, t);
        if let (Some(holds), Ok(reply)) = (&self.holds, &r)
            && reply.vote.is_yes()
        {
            holds.held(
                Holds::item(&req.tx_id, target, &req.key),
                tokio::time::Instant::now(),
            );
        }
        r
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        let t = Instant::now();
        let r = in_step(3, self.inner.commit(target, req)).await;
        self.times.add(3, t);
        self.release(req, target, &r);
        r
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        let t = Instant::now();
        let r = in_step(4, self.inner.abort(target, req)).await;
        self.times.add(4, t);
        self.release(req, target, &r);
        r
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        // Recovery only (no bench transaction is left STAGING): not a step of the table.
        self.inner.inquire(target, req).await
    }
}

/// A [`Transport`] that waits `hop` before every call: a Lambda invoke of the `lambda`
/// transport, in the injected-latency cells (zero: the `direct` transport as it is).
#[derive(Clone, Debug)]
pub struct HopTransport<T> {
    inner: T,
    hop: Duration,
}

impl<T> HopTransport<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, hop: Duration) -> Self {
        HopTransport { inner, hop }
    }

    async fn hop(&self) {
        if !self.hop.is_zero() {
            tokio::time::sleep(self.hop).await;
        }
    }
}

impl<T: Transport> Transport for HopTransport<T> {
    async fn prepare(
        &self,
        target: &Target,
        req: &PrepareRequest,
    ) -> Result<PrepareReply, TransportError> {
        self.hop().await;
        self.inner.prepare(target, req).await
    }

    async fn commit(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.hop().await;
        self.inner.commit(target, req).await
    }

    async fn abort(
        &self,
        target: &Target,
        req: &CompleteRequest,
    ) -> Result<CompleteReply, TransportError> {
        self.hop().await;
        self.inner.abort(target, req).await
    }

    async fn inquire(
        &self,
        target: &Target,
        req: &InquireRequest,
    ) -> Result<InquireReply, TransportError> {
        self.hop().await;
        self.inner.inquire(target, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use twopc_core::op::{Mode, Operation};

    /// A participant that votes (yes or no) after 3 ms and acknowledges a release after 2 ms.
    struct Fake {
        yes: bool,
    }

    impl Transport for Fake {
        async fn prepare(
            &self,
            _target: &Target,
            _req: &PrepareRequest,
        ) -> Result<PrepareReply, TransportError> {
            tokio::time::sleep(Duration::from_millis(3)).await;
            Ok(if self.yes {
                PrepareReply {
                    vote: Vote::Yes {
                        mode: Mode::Exclusive,
                    },
                    prune: None,
                }
            } else {
                PrepareReply::no(twopc_core::record::VoteReason::Conflict, "busy")
            })
        }

        async fn commit(
            &self,
            _target: &Target,
            _req: &CompleteRequest,
        ) -> Result<CompleteReply, TransportError> {
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok(CompleteReply::Done)
        }

        async fn abort(
            &self,
            target: &Target,
            req: &CompleteRequest,
        ) -> Result<CompleteReply, TransportError> {
            self.commit(target, req).await
        }

        async fn inquire(
            &self,
            _target: &Target,
            _req: &InquireRequest,
        ) -> Result<InquireReply, TransportError> {
            Ok(InquireReply {
                inquiry: twopc_core::rules::Inquiry::Held,
            })
        }
    }

    fn requests(tx: &TxId) -> (Target, PrepareRequest, CompleteRequest) {
        let key = [("id".to_owned(), serde_json::json!("acct-00001"))].into();
        let target = Target::Direct {
            table: "accounts".into(),
        };
        let prepare = PrepareRequest {
            tx_id: tx.clone(),
            deadline: 0,
            began: 0,
            key,
            op: Operation::default(),
            coordinator: "test".into(),
            payload: None,
        };
        let complete = CompleteRequest {
            tx_id: tx.clone(),
            deadline: 0,
            began: 0,
            key: prepare.key.clone(),
            op: Operation::default(),
            prune: None,
            refused: false,
        };
        (target, prepare, complete)
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_is_held_from_its_yes_to_its_acknowledged_release_hops_included() {
        // GIVEN a timed transport recording holds over a 5 ms hop to a participant voting yes
        let holds = Holds::default();
        let hop = Duration::from_millis(5);
        let transport = TimedTransport::new(
            HopTransport::new(Fake { yes: true }, hop),
            StepTimes::default(),
        )
        .with_holds(Some(holds.clone()));
        let tx = TxId::random();
        let (target, prepare, complete) = requests(&tx);

        // WHEN the item is prepared, 20 ms pass (the decision), and it is committed
        transport.prepare(&target, &prepare).await.expect("voted");
        assert_eq!(holds.open(), 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        transport.commit(&target, &complete).await.expect("done");

        // THEN its hold ran from the yes back here to the commit acknowledged: 20 + 5 + 2 ms
        assert_eq!(holds.since(0), vec![Duration::from_millis(27)]);
        assert_eq!(holds.open(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_no_vote_holds_nothing() {
        let holds = Holds::default();
        let transport = TimedTransport::new(
            HopTransport::new(Fake { yes: false }, Duration::ZERO),
            StepTimes::default(),
        )
        .with_holds(Some(holds.clone()));
        let (target, prepare, complete) = requests(&TxId::random());
        transport.prepare(&target, &prepare).await.expect("voted");
        transport.abort(&target, &complete).await.expect("done");
        assert_eq!(holds.open(), 0);
        assert_eq!(holds.released_count(), 0);
    }
}
