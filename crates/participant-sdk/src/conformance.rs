//! The conformance kit: the messages a participant meets in production, played against it
//! in-process, with every hook call counted. A participant's own test suite calls
//! [`check_all`] with a factory of its [`Subject`] (its hooks, a store, a payload its `reserve`
//! accepts and one it refuses as `invalid`); each check is also public, to name it in a test.
//!
//! The kit plays the coordinator: it writes the transaction's record in an in-memory log,
//! sends prepare, commit and abort (duplicated, reordered, late, concurrent, interrupted) and
//! moves a [`ManualClock`]. A check panics with what it expected: every check asserts the
//! answers and how often each hook was called for the transaction.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::Notify;
use twopc_core::ids::TxId;
use twopc_core::memory::MemoryTxLog;
use twopc_core::message::{CompleteReply, CompleteRequest, PrepareReply, PrepareRequest};
use twopc_core::op::Operation;
use twopc_core::ports::{Clock, ManualClock, SystemClock, TxLog};
use twopc_core::record::{TxRecord, Vote, VoteReason};
use twopc_core::status::TxStatus;

use crate::hooks::{Call, HookError, Hooks, Reservation};
use crate::participant::{Error, Resolved, SdkConfig, SdkParticipant};
use crate::store::{MemoryStates, StateStore};

/// The participant under test.
pub struct Subject<H, S = MemoryStates> {
    /// Its hooks.
    pub hooks: H,
    /// Where its state is kept.
    pub store: S,
    /// A payload its `reserve` holds.
    pub valid: Value,
    /// A payload its `reserve` refuses as `invalid`.
    pub invalid: Value,
}

/// A hook, to count its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    /// `reserve`.
    Reserve,
    /// `confirm`.
    Confirm,
    /// `cancel`.
    Cancel,
}

/// Where an injected failure strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    /// The call fails before reaching the service's hook.
    Before,
    /// The service's hook acts, then its answer is lost.
    After,
    /// The call never returns (the process died inside it): the kit is told it began.
    Stall,
    /// The call waits inside until the kit releases it: the kit is told it began.
    Hold,
}

type Calls = Arc<Mutex<BTreeMap<(TxId, Hook), u32>>>;

/// The subject's hooks as the kit sees them: each call counted, and, where a check asks, a
/// failure injected, the call held inside until the kit releases it, or cut off there as a
/// crash would.
#[derive(Clone)]
pub struct Counted<H> {
    inner: H,
    calls: Calls,
    fail: Arc<Mutex<Option<(Hook, Fail)>>>,
    stalled: Arc<Notify>,
    release: Arc<Notify>,
}

impl<H: Hooks> Counted<H> {
    async fn around<T>(
        &self,
        hook: Hook,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, HookError>>,
    ) -> Result<T, HookError> {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry((call.tx_id.clone(), hook)).or_default() += 1;
        }
        let fail = self
            .fail
            .lock()
            .ok()
            .and_then(|mut f| f.take_if(|(h, _)| *h == hook))
            .map(|(_, at)| at);
        let lost = || HookError::new(format!("{hook:?} failed (injected by the kit)"));
        match fail {
            Some(Fail::Stall) => {
                self.stalled.notify_one();
                std::future::pending().await
            }
            Some(Fail::Hold) => {
                self.stalled.notify_one();
                self.release.notified().await;
                inner.await
            }
            Some(Fail::Before) => Err(lost()),
            Some(Fail::After) => inner.await.and(Err(lost())),
            None => inner.await,
        }
    }
}

impl<H: Hooks> Hooks for Counted<H> {
    async fn reserve(&self, call: Call<'_>) -> Result<Reservation, HookError> {
        self.around(Hook::Reserve, call, self.inner.reserve(call))
            .await
    }

    async fn confirm(&self, call: Call<'_>) -> Result<(), HookError> {
        self.around(Hook::Confirm, call, self.inner.confirm(call))
            .await
    }

    async fn cancel(&self, call: Call<'_>) -> Result<(), HookError> {
        self.around(Hook::Cancel, call, self.inner.cancel(call))
            .await
    }
}

/// How long the kit's transactions have to prepare (ms).
pub const TIMEOUT_MS: u64 = 5_000;

/// One check's world: the subject wired as a participant, the kit's log and clock.
pub struct Kit<H, S> {
    participant: SdkParticipant<Counted<H>, S, MemoryTxLog, ManualClock>,
    calls: Calls,
    fail: Arc<Mutex<Option<(Hook, Fail)>>>,
    stalled: Arc<Notify>,
    release: Arc<Notify>,
    log: MemoryTxLog,
    clock: ManualClock,
    config: SdkConfig,
    valid: Value,
    invalid: Value,
}

/// A transaction the kit plays.
#[derive(Clone, Debug)]
pub struct Tx {
    /// Its id.
    pub id: TxId,
    /// When it began (epoch ms).
    pub began: u64,
    /// Its deadline (epoch ms).
    pub deadline: u64,
}

impl<H: Hooks, S: StateStore> Kit<H, S> {
    /// Wires the subject.
    pub fn new(subject: Subject<H, S>) -> Self {
        let calls = Calls::default();
        let fail = Arc::new(Mutex::new(None));
        let stalled = Arc::new(Notify::new());
        let release = Arc::new(Notify::new());
        let hooks = Counted {
            inner: subject.hooks,
            calls: calls.clone(),
            fail: fail.clone(),
            stalled: stalled.clone(),
            release: release.clone(),
        };
        let log = MemoryTxLog::default();
        let clock = ManualClock::new(SystemClock.now_ms());
        let config = SdkConfig::default();
        let participant = SdkParticipant::new(
            hooks,
            subject.store,
            log.clone(),
            clock.clone(),
            config.clone(),
        );
        Kit {
            participant,
            calls,
            fail,
            stalled,
            release,
            log,
            clock,
            config,
            valid: subject.valid,
            invalid: subject.invalid,
        }
    }

    /// The participant under test.
    pub fn participant(&self) -> &SdkParticipant<Counted<H>, S, MemoryTxLog, ManualClock> {
        &self.participant
    }

    /// A transaction begun now, its record `PREPARING` in the kit's log.
    pub async fn begin(&self) -> Tx {
        let tx = self.unrecorded();
        let mut record = TxRecord::never_began(&tx.id, tx.began);
        record.status = TxStatus::Preparing;
        record.deadline = tx.deadline;
        record.begun_by = "conformance kit".into();
        self.log.create(&record).await.expect("the kit's log");
        tx
    }

    /// A transaction begun now whose record was never written (its coordinator died first).
    pub fn unrecorded(&self) -> Tx {
        let began = self.clock.now_ms();
        Tx {
            id: TxId::random(),
            began,
            deadline: began + TIMEOUT_MS,
        }
    }

    /// Moves the transaction's record as a coordinator deciding would.
    pub async fn decide(&self, tx: &Tx, to: TxStatus) {
        let record = self.log.get(&tx.id).await.expect("log").expect("a record");
        let now = self.clock.now_ms();
        self.log
            .transition(&record, to, None, now)
            .await
            .expect("the kit's log");
    }

    /// The transaction's record's status.
    pub async fn status(&self, tx: &Tx) -> Option<TxStatus> {
        self.log.get(&tx.id).await.expect("log").map(|r| r.status)
    }

    /// Prepare with `payload`.
    pub fn prepare_with(&self, tx: &Tx, payload: Option<Value>) -> PrepareRequest {
        PrepareRequest {
            tx_id: tx.id.clone(),
            deadline: tx.deadline,
            began: tx.began,
            key: [("id".to_owned(), json!(tx.id.as_str()))].into(),
            op: Operation::default(),
            coordinator: "conformance kit".into(),
            payload,
        }
    }

    /// Prepare with the subject's valid payload.
    pub fn prepare(&self, tx: &Tx) -> PrepareRequest {
        self.prepare_with(tx, Some(self.valid.clone()))
    }

    /// Commit or abort.
    pub fn complete(&self, tx: &Tx) -> CompleteRequest {
        CompleteRequest {
            tx_id: tx.id.clone(),
            deadline: tx.deadline,
            began: tx.began,
            key: [("id".to_owned(), json!(tx.id.as_str()))].into(),
            op: Operation::default(),
            prune: None,
            refused: false,
        }
    }

    /// Sends prepare (with the valid payload).
    pub async fn send_prepare(&self, tx: &Tx) -> PrepareReply {
        self.participant
            .prepare(&self.prepare(tx))
            .await
            .expect("prepare answered")
    }

    /// Sends commit.
    pub async fn send_commit(&self, tx: &Tx) -> CompleteReply {
        self.participant
            .commit(&self.complete(tx))
            .await
            .expect("commit answered")
    }

    /// Sends abort.
    pub async fn send_abort(&self, tx: &Tx) -> CompleteReply {
        self.participant
            .abort(&self.complete(tx))
            .await
            .expect("abort answered")
    }

    /// How often the library called `hook` for the transaction.
    pub fn calls(&self, tx: &Tx, hook: Hook) -> u32 {
        self.calls
            .lock()
            .map(|c| c.get(&(tx.id.clone(), hook)).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// The calls of each hook for the transaction: `[reserve, confirm, cancel]`.
    pub fn counts(&self, tx: &Tx) -> [u32; 3] {
        [Hook::Reserve, Hook::Confirm, Hook::Cancel].map(|h| self.calls(tx, h))
    }

    fn fail_next(&self, hook: Hook, at: Fail) {
        if let Ok(mut f) = self.fail.lock() {
            *f = Some((hook, at));
        }
    }
}

fn reason(r: &PrepareReply) -> Option<VoteReason> {
    match &r.vote {
        Vote::Yes { .. } => None,
        Vote::No { reason, .. } => Some(*reason),
    }
}

/// Runs every check, each on a fresh subject from `make`.
pub async fn check_all<H, S, F, Fut>(mut make: F)
where
    H: Hooks,
    S: StateStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = Subject<H, S>>,
{
    crate::__every_check!(__run_checks!(make));
}

/// The kit's checks, named once: `$then!(args; check, check, ...)`.
#[doc(hidden)]
#[macro_export]
macro_rules! __every_check {
    ($then:ident ! ($($args:tt)*)) => {
        $crate::$then!($($args)*;
            prepare_reserves_once_and_a_duplicate_gets_the_same_yes,
            an_invalid_payload_is_a_no_vote_that_holds_nothing,
            commit_confirms_once_and_a_duplicate_is_already_done,
            abort_cancels_once_and_a_duplicate_is_already_done,
            an_abort_before_its_prepare_calls_nothing_and_refuses_the_prepare,
            a_prepare_after_its_transaction_ended_is_refused,
            a_prepare_past_its_deadline_is_refused_and_holds_nothing,
            a_decision_contradicting_the_state_is_a_violation_and_calls_nothing,
            concurrent_duplicates_call_each_hook_once,
            a_failed_hook_is_called_again_by_the_next_message,
            an_interrupted_call_is_taken_over_once_its_claim_expires,
            a_silent_coordinator_is_resolved_by_the_record
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __run_checks {
    ($make:ident; $($check:ident),*) => {
        $($crate::conformance::$check($crate::conformance::Kit::new($make().await)).await;)*
    };
}

/// One `#[tokio::test]` per check of the kit, named after it, each against the [`Subject`]
/// the expression makes (evaluated in an async test, so it may `.await`):
///
/// ```ignore
/// twopc_participant_sdk::conformance_tests!(my_subject().await);
/// ```
///
/// The calling crate needs `tokio` (features `macros`, `rt`) among its dev-dependencies.
#[macro_export]
macro_rules! conformance_tests {
    ($subject:expr) => {
        $crate::__every_check!(__check_tests!($subject));
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __check_tests {
    ($subject:expr; $($check:ident),*) => {
        $(#[tokio::test]
        async fn $check() {
            $crate::conformance::$check($crate::conformance::Kit::new($subject)).await;
        })*
    };
}

/// A duplicated prepare (a transport's retry) answers yes again without calling `reserve`.
pub async fn prepare_reserves_once_and_a_duplicate_gets_the_same_yes<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    for attempt in 1..=2 {
        let r = kit.send_prepare(&tx).await;
        assert!(
            r.vote.is_yes(),
            "prepare #{attempt} of a valid payload: {r:?}"
        );
    }
    assert_eq!(kit.counts(&tx), [1, 0, 0], "reserve, confirm, cancel calls");
}

/// A payload `reserve` cannot read is a `no` vote with reason `invalid`, repeated for a
/// duplicate without another call; the abort that follows calls nothing (nothing was held),
/// and a prepare with no payload at all is refused before any hook.
pub async fn an_invalid_payload_is_a_no_vote_that_holds_nothing<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    let bad = kit.prepare_with(&tx, Some(kit.invalid.clone()));
    for attempt in 1..=2 {
        let r = kit.participant.prepare(&bad).await.expect("prepare");
        assert_eq!(
            reason(&r),
            Some(VoteReason::Invalid),
            "prepare #{attempt}: {r:?}"
        );
    }
    let a = kit.send_abort(&tx).await;
    assert!(a.acknowledged(), "the abort of a refused prepare: {a:?}");
    assert_eq!(kit.counts(&tx), [1, 0, 0], "reserve, confirm, cancel calls");
    let none = kit.begin().await;
    let r = kit
        .participant
        .prepare(&kit.prepare_with(&none, None))
        .await
        .expect("prepare");
    assert_eq!(reason(&r), Some(VoteReason::Invalid), "no payload: {r:?}");
    assert_eq!(kit.counts(&none), [0, 0, 0], "no payload, no call");
}

/// Commit calls `confirm` once; a duplicated commit answers `alreadyDone` without a call.
pub async fn commit_confirms_once_and_a_duplicate_is_already_done<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    assert!(kit.send_prepare(&tx).await.vote.is_yes());
    kit.decide(&tx, TxStatus::Committing).await;
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::Done);
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::AlreadyDone);
    assert_eq!(kit.counts(&tx), [1, 1, 0], "reserve, confirm, cancel calls");
}

/// Abort calls `cancel` once; a duplicated abort answers `alreadyDone` without a call.
pub async fn abort_cancels_once_and_a_duplicate_is_already_done<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    assert!(kit.send_prepare(&tx).await.vote.is_yes());
    kit.decide(&tx, TxStatus::Aborting).await;
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::Done);
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::AlreadyDone);
    assert_eq!(kit.counts(&tx), [1, 0, 1], "reserve, confirm, cancel calls");
}

/// An abort that overtakes its prepare (or replaces it: the prepare was lost) calls nothing
/// (null compensation) and is recorded, so the prepare arriving afterwards is refused
/// (`fenced`) and holds nothing (anti-hanging).
pub async fn an_abort_before_its_prepare_calls_nothing_and_refuses_the_prepare<
    H: Hooks,
    S: StateStore,
>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    kit.decide(&tx, TxStatus::Aborting).await;
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::Done);
    let late = kit.send_prepare(&tx).await;
    assert_eq!(
        reason(&late),
        Some(VoteReason::Fenced),
        "the late prepare: {late:?}"
    );
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::AlreadyDone);
    assert_eq!(kit.counts(&tx), [0, 0, 0], "reserve, confirm, cancel calls");
}

/// A prepare delivered again after its transaction committed or aborted here is refused
/// (`fenced`) without a call: it must not hold anything again.
pub async fn a_prepare_after_its_transaction_ended_is_refused<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    for decision in [TxStatus::Committing, TxStatus::Aborting] {
        let tx = kit.begin().await;
        assert!(kit.send_prepare(&tx).await.vote.is_yes());
        kit.decide(&tx, decision).await;
        let ended = if decision == TxStatus::Committing {
            kit.send_commit(&tx).await
        } else {
            kit.send_abort(&tx).await
        };
        assert_eq!(ended, CompleteReply::Done);
        let late = kit.send_prepare(&tx).await;
        assert_eq!(
            reason(&late),
            Some(VoteReason::Fenced),
            "a prepare after {decision}: {late:?}"
        );
        assert_eq!(
            kit.calls(&tx, Hook::Reserve),
            1,
            "reserve calls after {decision}"
        );
    }
}

/// A prepare that arrives after its deadline votes `expired` and calls nothing; the abort that
/// follows records the transaction.
pub async fn a_prepare_past_its_deadline_is_refused_and_holds_nothing<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    kit.clock.advance(TIMEOUT_MS);
    let r = kit.send_prepare(&tx).await;
    assert_eq!(reason(&r), Some(VoteReason::Expired), "{r:?}");
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::Done);
    assert_eq!(kit.counts(&tx), [0, 0, 0], "reserve, confirm, cancel calls");
}

/// Messages that contradict what this participant did are reported as violations and call
/// nothing: a commit before any prepare, a commit after an abort, an abort after a commit.
pub async fn a_decision_contradicting_the_state_is_a_violation_and_calls_nothing<
    H: Hooks,
    S: StateStore,
>(
    kit: Kit<H, S>,
) {
    let violation = |r: &CompleteReply| matches!(r, CompleteReply::Violation { .. });
    let never = kit.begin().await;
    let r = kit.send_commit(&never).await;
    assert!(violation(&r), "a commit before any prepare: {r:?}");
    assert_eq!(kit.counts(&never), [0, 0, 0]);

    let aborted = kit.begin().await;
    assert!(kit.send_prepare(&aborted).await.vote.is_yes());
    assert_eq!(kit.send_abort(&aborted).await, CompleteReply::Done);
    let r = kit.send_commit(&aborted).await;
    assert!(violation(&r), "a commit after the abort: {r:?}");
    assert_eq!(kit.counts(&aborted), [1, 0, 1]);

    let committed = kit.begin().await;
    assert!(kit.send_prepare(&committed).await.vote.is_yes());
    assert_eq!(kit.send_commit(&committed).await, CompleteReply::Done);
    let r = kit.send_abort(&committed).await;
    assert!(violation(&r), "an abort after the commit: {r:?}");
    assert_eq!(kit.counts(&committed), [1, 1, 0]);
}

/// A copy of a message that arrives while the first is inside its hook does not call the
/// hook again: it finds the first one's claim (a `conflict` vote for prepare, "busy" for commit),
/// and the first finishes as if alone.
pub async fn concurrent_duplicates_call_each_hook_once<H: Hooks, S: StateStore>(kit: Kit<H, S>) {
    let tx = kit.begin().await;
    let req = kit.prepare(&tx);
    kit.fail_next(Hook::Reserve, Fail::Hold);
    let first = kit.participant.prepare(&req);
    tokio::pin!(first);
    tokio::select! {
        r = &mut first => panic!("the held prepare returned: {r:?}"),
        () = kit.stalled.notified() => {}
    }
    let copy = kit.participant.prepare(&req).await.expect("prepare");
    assert_eq!(
        reason(&copy),
        Some(VoteReason::Conflict),
        "the copy: {copy:?}"
    );
    kit.release.notify_one();
    let first = first.await.expect("prepare");
    assert!(first.vote.is_yes(), "the first: {first:?}");
    assert_eq!(kit.counts(&tx), [1, 0, 0], "reserve, confirm, cancel calls");

    kit.decide(&tx, TxStatus::Committing).await;
    let req = kit.complete(&tx);
    kit.fail_next(Hook::Confirm, Fail::Hold);
    let first = kit.participant.commit(&req);
    tokio::pin!(first);
    tokio::select! {
        r = &mut first => panic!("the held commit returned: {r:?}"),
        () = kit.stalled.notified() => {}
    }
    let copy = kit.participant.commit(&req).await;
    assert!(
        matches!(copy, Err(Error::Busy { .. })),
        "the copy: {copy:?}"
    );
    kit.release.notify_one();
    assert_eq!(first.await.expect("commit"), CompleteReply::Done);
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::AlreadyDone);
    assert_eq!(kit.counts(&tx), [1, 1, 0], "reserve, confirm, cancel calls");
}

/// A hook that fails (an error, not an answer) leaves nothing recorded as done: the next
/// commit or abort calls `confirm` or `cancel` again; a failed `reserve` is never called again,
/// its transaction is refused and its abort cancels whatever it may have held.
pub async fn a_failed_hook_is_called_again_by_the_next_message<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    assert!(kit.send_prepare(&tx).await.vote.is_yes());
    kit.decide(&tx, TxStatus::Committing).await;
    kit.fail_next(Hook::Confirm, Fail::Before);
    let r = kit.participant.commit(&kit.complete(&tx)).await;
    assert!(matches!(r, Err(Error::Hook { .. })), "{r:?}");
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::Done);
    assert_eq!(kit.counts(&tx), [1, 2, 0], "reserve, confirm, cancel calls");

    let tx = kit.begin().await;
    kit.fail_next(Hook::Reserve, Fail::After);
    let r = kit.participant.prepare(&kit.prepare(&tx)).await;
    assert!(matches!(r, Err(Error::Hook { .. })), "{r:?}");
    let again = kit.send_prepare(&tx).await;
    assert_eq!(reason(&again), Some(VoteReason::Conflict), "{again:?}");
    kit.decide(&tx, TxStatus::Aborting).await;
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::Done);
    assert_eq!(kit.counts(&tx), [1, 0, 1], "reserve, confirm, cancel calls");
}

/// A call cut off inside the hook (the process died: nothing recorded after it) is taken
/// over only once its claim expired: before, a copy of the message is told the call is under
/// way; after, the hook is called again (hooks are idempotent per transaction for this case).
pub async fn an_interrupted_call_is_taken_over_once_its_claim_expires<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let tx = kit.begin().await;
    assert!(kit.send_prepare(&tx).await.vote.is_yes());
    kit.decide(&tx, TxStatus::Committing).await;
    let req = kit.complete(&tx);
    // The call claims, enters the hook and dies there: dropped as soon as it is inside.
    kit.fail_next(Hook::Confirm, Fail::Stall);
    tokio::select! {
        r = kit.participant.commit(&req) => panic!("the stalled call returned: {r:?}"),
        () = kit.stalled.notified() => {}
    }
    assert_eq!(kit.counts(&tx), [1, 1, 0]);
    let r = kit.participant.commit(&req).await;
    assert!(
        matches!(r, Err(Error::Busy { .. })),
        "within the claim: {r:?}"
    );
    assert_eq!(
        kit.counts(&tx),
        [1, 1, 0],
        "no second call within the claim"
    );
    kit.clock.advance(kit.config.claim_ms);
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::Done);
    assert_eq!(
        kit.counts(&tx),
        [1, 2, 0],
        "taken over once the claim expired"
    );
}

/// A prepared participant whose coordinator went silent follows the transaction's record: it
/// waits while the record may still be decided, aborts the record past its deadline (by
/// compare-and-swap, never deciding alone), rolls a recorded commit forward, and records a
/// transaction whose record never appeared as aborted.
pub async fn a_silent_coordinator_is_resolved_by_the_record<H: Hooks, S: StateStore>(
    kit: Kit<H, S>,
) {
    let undecided = kit.begin().await;
    let committing = kit.begin().await;
    let unrecorded = kit.unrecorded();
    for tx in [&undecided, &committing, &unrecorded] {
        assert!(kit.send_prepare(tx).await.vote.is_yes());
    }
    kit.decide(&committing, TxStatus::Committing).await;
    let p = kit.participant();
    assert_eq!(
        p.resolve(&undecided.id).await.expect("resolve"),
        Resolved::Left
    );
    assert_eq!(
        p.resolve(&unrecorded.id).await.expect("resolve"),
        Resolved::Left
    );
    assert_eq!(
        p.resolve(&committing.id).await.expect("resolve"),
        Resolved::Confirmed,
        "a recorded commit is rolled forward"
    );
    kit.clock.advance(TIMEOUT_MS + 1);
    // The store may hold other transactions (a table shared with other checks): look at ours.
    let ours = [&undecided.id, &committing.id, &unrecorded.id];
    let mine = |swept: Vec<(TxId, Resolved)>| {
        let mut m: Vec<_> = swept
            .into_iter()
            .filter(|(t, _)| ours.contains(&t))
            .collect();
        m.sort();
        m
    };
    let mut want = vec![
        (undecided.id.clone(), Resolved::Cancelled),
        (unrecorded.id.clone(), Resolved::Cancelled),
    ];
    want.sort();
    assert_eq!(
        mine(p.sweep(100).await.expect("sweep")),
        want,
        "past the deadline, both are aborted"
    );
    assert_eq!(kit.status(&undecided).await, Some(TxStatus::Aborting));
    assert_eq!(kit.status(&unrecorded).await, Some(TxStatus::Aborted));
    assert_eq!(kit.counts(&undecided), [1, 0, 1]);
    assert_eq!(kit.counts(&unrecorded), [1, 0, 1]);
    assert_eq!(kit.counts(&committing), [1, 1, 0]);
    // The coordinator (or the sweeper) comes back: its messages find the work done.
    assert_eq!(kit.send_abort(&undecided).await, CompleteReply::AlreadyDone);
    assert_eq!(
        kit.send_commit(&committing).await,
        CompleteReply::AlreadyDone
    );
    assert_eq!(
        mine(p.sweep(100).await.expect("sweep")),
        vec![],
        "nothing left"
    );
}
