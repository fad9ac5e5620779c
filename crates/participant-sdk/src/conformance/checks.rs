//! The checks. Each states a guarantee in its name and asserts every answer and, after each
//! step, what the transaction left: holds, applied commits and (with hooks) hook calls.

use twopc_core::ids::TxId;
use twopc_core::message::{CompleteReply, PrepareReply};
use twopc_core::op::Operation;
use twopc_core::record::{Vote, VoteReason};
use twopc_core::status::TxStatus;

use super::{Atomicity, Entry, Fail, Failure, Kit, Resolved, Step, TIMEOUT_MS, UnderTest};

pub(super) fn reason(r: &PrepareReply) -> Option<VoteReason> {
    match &r.vote {
        Vote::Yes { .. } => None,
        Vote::No { reason, .. } => Some(*reason),
    }
}

/// A duplicated prepare (a transport's retry) answers yes again and holds nothing more.
pub async fn prepare_reserves_once_and_a_duplicate_gets_the_same_yes<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin().await;
    for attempt in 1..=2 {
        let r = kit.send_prepare(&tx).await;
        assert!(
            r.vote.is_yes(),
            "prepare #{attempt} of a valid entry: {r:?}"
        );
    }
    kit.expect(&tx, 1, 0, [1, 0, 0], "after two prepares").await;
}

/// A request the participant cannot carry out is a `no` vote with reason `invalid`, repeated
/// for a duplicate without another call; the abort that follows releases nothing (nothing was
/// held); a prepare with neither payload nor operation is refused before anything is called.
pub async fn an_invalid_request_is_a_no_vote_that_holds_nothing<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin_invalid().await;
    for attempt in 1..=2 {
        let r = kit.send_prepare(&tx).await;
        assert_eq!(
            reason(&r),
            Some(VoteReason::Invalid),
            "prepare #{attempt}: {r:?}"
        );
    }
    let a = kit.send_abort(&tx).await;
    assert!(a.acknowledged(), "the abort of a refused prepare: {a:?}");
    kit.expect_refused(&tx, "after the refusal and its abort")
        .await;

    let mut empty = kit.begin().await;
    empty.entry = Entry {
        op: Operation::default(),
        payload: None,
        ..empty.entry
    };
    let r = kit.send_prepare(&empty).await;
    assert_eq!(
        reason(&r),
        Some(VoteReason::Invalid),
        "nothing asked: {r:?}"
    );
    kit.expect(&empty, 0, 0, [0, 0, 0], "nothing asked, nothing called")
        .await;
}

/// Commit takes effect once; a duplicated commit answers `alreadyDone` and changes nothing.
pub async fn commit_confirms_once_and_a_duplicate_is_already_done<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin().await;
    assert!(
        kit.send_prepare(&tx).await.vote.is_yes(),
        "the prepare of a valid entry"
    );
    kit.decide(&tx, TxStatus::Committing).await;
    assert_eq!(
        kit.send_commit(&tx).await,
        CompleteReply::Done,
        "the first commit"
    );
    assert_eq!(
        kit.send_commit(&tx).await,
        CompleteReply::AlreadyDone,
        "a duplicate commit"
    );
    kit.expect(&tx, 0, 1, [1, 1, 0], "after two commits").await;
}

/// Abort releases once; a duplicated abort answers `alreadyDone` and changes nothing.
pub async fn abort_cancels_once_and_a_duplicate_is_already_done<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin().await;
    assert!(
        kit.send_prepare(&tx).await.vote.is_yes(),
        "the prepare of a valid entry"
    );
    kit.decide(&tx, TxStatus::Aborting).await;
    assert_eq!(
        kit.send_abort(&tx).await,
        CompleteReply::Done,
        "the first abort"
    );
    assert_eq!(
        kit.send_abort(&tx).await,
        CompleteReply::AlreadyDone,
        "a duplicate abort"
    );
    kit.expect(&tx, 0, 0, [1, 0, 1], "after two aborts").await;
}

/// An abort that overtakes its prepare (or replaces it: the prepare was lost) calls nothing
/// (null compensation) and is recorded, so the prepare arriving afterwards is refused
/// (`fenced`) and holds nothing (anti-hanging).
pub async fn an_abort_before_its_prepare_holds_nothing_and_refuses_the_prepare<P: UnderTest>(
    kit: Kit<P>,
) {
    let tx = kit.begin().await;
    kit.decide(&tx, TxStatus::Aborting).await;
    assert_eq!(
        kit.send_abort(&tx).await,
        CompleteReply::Done,
        "an abort before any prepare"
    );
    let late = kit.send_prepare(&tx).await;
    assert_eq!(
        reason(&late),
        Some(VoteReason::Fenced),
        "the late prepare: {late:?}"
    );
    assert_eq!(
        kit.send_abort(&tx).await,
        CompleteReply::AlreadyDone,
        "a duplicate of that abort"
    );
    kit.expect(
        &tx,
        0,
        0,
        [0, 0, 0],
        "after the abort, the late prepare and a duplicate",
    )
    .await;
}

/// A prepare delivered again after its transaction committed or aborted here is refused
/// (`fenced`) without a call: it must not hold anything again.
pub async fn a_prepare_after_its_transaction_ended_is_refused<P: UnderTest>(kit: Kit<P>) {
    for decision in [TxStatus::Committing, TxStatus::Aborting] {
        let tx = kit.begin().await;
        assert!(kit.send_prepare(&tx).await.vote.is_yes());
        kit.decide(&tx, decision).await;
        let (ended, applied, calls) = if decision == TxStatus::Committing {
            (kit.send_commit(&tx).await, 1, [1, 1, 0])
        } else {
            (kit.send_abort(&tx).await, 0, [1, 0, 1])
        };
        assert_eq!(ended, CompleteReply::Done);
        let late = kit.send_prepare(&tx).await;
        assert_eq!(
            reason(&late),
            Some(VoteReason::Fenced),
            "a prepare after {decision}: {late:?}"
        );
        kit.expect(
            &tx,
            0,
            applied,
            calls,
            &format!("after {decision} and the late prepare"),
        )
        .await;
    }
}

/// A prepare that arrives after its deadline votes `expired` and holds nothing; the abort that
/// follows records the transaction. (The transaction began longer ago than its timeout, so the
/// participant's own clock says so: no clock is moved, and the check plays over HTTP.)
pub async fn a_prepare_past_its_deadline_is_refused_and_holds_nothing<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin_overdue().await;
    let r = kit.send_prepare(&tx).await;
    assert_eq!(reason(&r), Some(VoteReason::Expired), "{r:?}");
    assert_eq!(
        kit.send_abort(&tx).await,
        CompleteReply::Done,
        "the abort after the late prepare"
    );
    kit.expect(&tx, 0, 0, [0, 0, 0], "after the late prepare and its abort")
        .await;
}

/// Messages that contradict what this participant did are reported as violations and change
/// nothing: a commit before any prepare, a commit after an abort, an abort after a commit.
pub async fn a_decision_contradicting_the_state_is_a_violation_and_does_nothing<P: UnderTest>(
    kit: Kit<P>,
) {
    let violation = |r: &CompleteReply| matches!(r, CompleteReply::Violation { .. });
    let never = kit.begin().await;
    let r = kit.send_commit(&never).await;
    assert!(violation(&r), "a commit before any prepare: {r:?}");
    kit.expect(&never, 0, 0, [0, 0, 0], "after a commit with no prepare")
        .await;

    let aborted = kit.begin().await;
    assert!(
        kit.send_prepare(&aborted).await.vote.is_yes(),
        "the prepare of a valid entry"
    );
    assert_eq!(
        kit.send_abort(&aborted).await,
        CompleteReply::Done,
        "its abort"
    );
    let r = kit.send_commit(&aborted).await;
    assert!(violation(&r), "a commit after the abort: {r:?}");
    kit.expect(
        &aborted,
        0,
        0,
        [1, 0, 1],
        "after a commit of an aborted one",
    )
    .await;

    let committed = kit.begin().await;
    assert!(
        kit.send_prepare(&committed).await.vote.is_yes(),
        "the prepare of a valid entry"
    );
    assert_eq!(
        kit.send_commit(&committed).await,
        CompleteReply::Done,
        "its commit"
    );
    let r = kit.send_abort(&committed).await;
    assert!(violation(&r), "an abort after the commit: {r:?}");
    kit.expect(
        &committed,
        0,
        1,
        [1, 1, 0],
        "after an abort of a committed one",
    )
    .await;
}

/// A copy of a message that arrives while the first is inside its work takes effect no more
/// than once. A participant that claims ([`Atomicity::Claimed`]) answers the copy from the
/// claim (a `conflict` vote for prepare, busy for commit) and the first finishes as if alone; a
/// one-write participant lets the copy do the work, and the first, landing after it, finds it
/// done (yes again; `alreadyDone`).
pub async fn concurrent_duplicates_take_effect_once<P: UnderTest>(kit: Kit<P>) {
    let claims = kit.subject().atomicity() != Atomicity::OneWrite;
    let tx = kit.begin().await;
    let req = kit.prepare(&tx);
    kit.arm(Step::Prepare, Fail::Hold);
    let first = kit.subject().prepare(&req);
    tokio::pin!(first);
    tokio::select! {
        r = &mut first => panic!("the held prepare returned: {r:?}"),
        () = kit.inside() => {}
    }
    let copy = kit.subject().prepare(&req).await.expect("prepare");
    if claims {
        assert_eq!(
            reason(&copy),
            Some(VoteReason::Conflict),
            "the copy: {copy:?}"
        );
    } else {
        assert!(copy.vote.is_yes(), "the copy: {copy:?}");
    }
    kit.release();
    let first = first.await.expect("prepare");
    assert!(first.vote.is_yes(), "the first: {first:?}");
    kit.expect(&tx, 1, 0, [1, 0, 0], "after two prepares at once")
        .await;

    kit.decide(&tx, TxStatus::Committing).await;
    let req = kit.complete(&tx);
    kit.arm(Step::Commit, Fail::Hold);
    let first = kit.subject().commit(&req);
    tokio::pin!(first);
    tokio::select! {
        r = &mut first => panic!("the held commit returned: {r:?}"),
        () = kit.inside() => {}
    }
    let copy = kit.subject().commit(&req).await;
    kit.release();
    let first = first.await.expect("commit");
    if claims {
        assert!(matches!(copy, Err(Failure::Busy(_))), "the copy: {copy:?}");
        assert_eq!(first, CompleteReply::Done, "the first");
    } else {
        assert_eq!(copy.expect("commit"), CompleteReply::Done, "the copy");
        assert_eq!(first, CompleteReply::AlreadyDone, "the first");
    }
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::AlreadyDone);
    kit.expect(&tx, 0, 1, [1, 1, 0], "after two commits at once")
        .await;
}

/// Work that fails (an error, not an answer) is made good by the next message: a commit
/// failing before it acts is carried out by the next commit, once. A prepare whose work acted
/// but whose answer was lost holds once: a participant that claims refuses its retry
/// (`conflict`: a failed `reserve` is never called again), a one-write participant finds its
/// hold and answers yes; either way its abort releases it.
pub async fn a_failed_call_is_made_good_by_the_next_message<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin().await;
    assert!(kit.send_prepare(&tx).await.vote.is_yes());
    kit.decide(&tx, TxStatus::Committing).await;
    kit.arm(Step::Commit, Fail::Before);
    let r = kit.subject().commit(&kit.complete(&tx)).await;
    assert!(matches!(r, Err(Failure::Failed(_))), "{r:?}");
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::Done);
    kit.expect(&tx, 0, 1, [1, 2, 0], "after a failed commit and its retry")
        .await;

    let tx = kit.begin().await;
    kit.arm(Step::Prepare, Fail::After);
    let r = kit.subject().prepare(&kit.prepare(&tx)).await;
    assert!(matches!(r, Err(Failure::Failed(_))), "{r:?}");
    let again = kit.send_prepare(&tx).await;
    if kit.subject().atomicity() == Atomicity::OneWrite {
        assert!(again.vote.is_yes(), "the retry finds its hold: {again:?}");
    } else {
        assert_eq!(reason(&again), Some(VoteReason::Conflict), "{again:?}");
    }
    kit.expect(
        &tx,
        1,
        0,
        [1, 0, 0],
        "after a lost prepare answer and its retry",
    )
    .await;
    kit.decide(&tx, TxStatus::Aborting).await;
    assert_eq!(kit.send_abort(&tx).await, CompleteReply::Done);
    kit.expect(&tx, 0, 0, [1, 0, 1], "after the abort").await;
}

/// A call cut off inside its work (the process died: nothing recorded after it) is taken
/// over only once its claim expired: before, a copy of the message is told the call is under
/// way; after, the work is done again (hooks are idempotent per transaction for this case).
/// For participants that claim their calls ([`Atomicity::Claimed`]) only.
pub async fn an_interrupted_call_is_taken_over_once_its_claim_expires<P: UnderTest>(kit: Kit<P>) {
    let Atomicity::Claimed { claim_ms } = kit.subject().atomicity() else {
        panic!("not applicable: this participant makes no claim (see `conformance_tests!`)");
    };
    let tx = kit.begin().await;
    assert!(kit.send_prepare(&tx).await.vote.is_yes());
    kit.decide(&tx, TxStatus::Committing).await;
    let req = kit.complete(&tx);
    // The call claims, enters its work and dies there: dropped as soon as it is inside.
    kit.arm(Step::Commit, Fail::Stall);
    tokio::select! {
        r = kit.subject().commit(&req) => panic!("the stalled call returned: {r:?}"),
        () = kit.inside() => {}
    }
    kit.expect(&tx, 1, 0, [1, 1, 0], "once the call died").await;
    let r = kit.subject().commit(&req).await;
    assert!(
        matches!(r, Err(Failure::Busy(_))),
        "within the claim: {r:?}"
    );
    kit.expect(&tx, 1, 0, [1, 1, 0], "no second call within the claim")
        .await;
    kit.subject().clock().advance(claim_ms);
    assert_eq!(kit.send_commit(&tx).await, CompleteReply::Done);
    kit.expect(&tx, 0, 1, [1, 2, 0], "taken over once the claim expired")
        .await;
}

/// A prepared participant whose coordinator went silent follows the transaction's record: it
/// waits while the record may still be decided, aborts the record past its deadline (by
/// compare-and-swap, never deciding alone), rolls a recorded commit forward, and records a
/// transaction whose record never appeared as aborted.
pub async fn a_silent_coordinator_is_resolved_by_the_record<P: UnderTest>(kit: Kit<P>) {
    let undecided = kit.begin().await;
    let committing = kit.begin().await;
    let unrecorded = kit.unrecorded().await;
    for tx in [&undecided, &committing, &unrecorded] {
        assert!(kit.send_prepare(tx).await.vote.is_yes());
    }
    kit.decide(&committing, TxStatus::Committing).await;
    let p = kit.subject();
    let resolved = |r: Result<Resolved, Failure>| r.expect("resolve");
    assert_eq!(resolved(p.resolve(&undecided).await), Resolved::Left);
    assert_eq!(resolved(p.resolve(&unrecorded).await), Resolved::Left);
    assert_eq!(
        resolved(p.resolve(&committing).await),
        Resolved::Confirmed,
        "a recorded commit is rolled forward"
    );
    p.clock().advance(TIMEOUT_MS + 1);
    // The participant may hold other transactions (a table shared with other checks): ours.
    let ours = [&undecided.id, &committing.id, &unrecorded.id];
    let mine = |swept: Result<Vec<(TxId, Resolved)>, Failure>| {
        let mut m: Vec<_> = swept
            .expect("sweep")
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
        mine(p.sweep().await),
        want,
        "past the deadline, both are aborted"
    );
    assert_eq!(kit.status(&undecided).await, Some(TxStatus::Aborting));
    assert_eq!(kit.status(&unrecorded).await, Some(TxStatus::Aborted));
    kit.expect(&undecided, 0, 0, [1, 0, 1], "the undecided one, swept")
        .await;
    kit.expect(&unrecorded, 0, 0, [1, 0, 1], "the unrecorded one, swept")
        .await;
    kit.expect(
        &committing,
        0,
        1,
        [1, 1, 0],
        "the committing one, rolled forward",
    )
    .await;
    // The coordinator (or the sweeper) comes back: its messages find the work done.
    assert_eq!(kit.send_abort(&undecided).await, CompleteReply::AlreadyDone);
    assert_eq!(
        kit.send_commit(&committing).await,
        CompleteReply::AlreadyDone
    );
    assert_eq!(mine(p.sweep().await), vec![], "nothing left");
}
