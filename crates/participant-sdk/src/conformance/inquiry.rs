//! The checks of the staged commit's inquiry (`inquire`, `docs/protocol.md`, "The staged
//! commit"): a recoverer asks every participant of an abandoned `STAGING` transaction whether it
//! holds it, and with `prevent` makes sure that one which does not never will. An answer of
//! `prevented` must be final and `held` must stay true, or a recoverer could abort what its
//! coordinator already answered "committed".

use twopc_core::message::{CompleteReply, InquireRequest, PrepareRequest};
use twopc_core::record::VoteReason;
use twopc_core::rules::Inquiry::{Committed, Held, Open, Prevented};
use twopc_core::status::TxStatus;

use super::checks::reason;
use super::{Fail, Kit, Step, UnderTest};

/// A prevent that arrives before the transaction's prepare (the prepare was slow, or lost)
/// answers `prevented` and makes it so for good: the prepare arriving afterwards is refused
/// (`fenced`) and holds nothing, and the abort that recovery then sends releases nothing. A
/// read-only inquiry before it answers `open` and changes nothing.
pub async fn a_prevent_before_its_prepare_refuses_the_prepare<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin().await;
    assert_eq!(
        kit.send_inquire(&tx, false).await,
        Open,
        "a read-only inquiry before any prepare"
    );
    kit.expect(&tx, 0, 0, [0, 0, 0], "after a read-only inquiry")
        .await;
    assert_eq!(kit.send_inquire(&tx, true).await, Prevented, "the prevent");
    assert_eq!(
        kit.send_inquire(&tx, true).await,
        Prevented,
        "a duplicate of the prevent"
    );
    assert_eq!(
        kit.send_inquire(&tx, false).await,
        Prevented,
        "a read-only inquiry after the prevent: a prevent is final"
    );
    let late = kit.send_prepare(&tx).await;
    assert_eq!(
        reason(&late),
        Some(VoteReason::Fenced),
        "the prepare after the prevent: {late:?}"
    );
    kit.expect(
        &tx,
        0,
        0,
        [0, 0, 0],
        "after the prevent and the late prepare",
    )
    .await;
    // Recovery found a participant prevented: it aborts the record, then every participant.
    kit.decide(&tx, TxStatus::Aborting).await;
    let a = kit.send_abort(&tx).await;
    assert!(a.acknowledged(), "the abort after the prevent: {a:?}");
    assert_eq!(
        kit.send_inquire(&tx, false).await,
        Prevented,
        "after the abort"
    );
    kit.expect(&tx, 0, 0, [0, 0, 0], "after the abort").await;
}

/// An inquiry of a prepared transaction answers `held`, with or without `prevent`, and changes
/// nothing: the hold stays (a duplicate prepare still votes yes) and the commit that follows
/// applies once. After the commit, inquiries answer `committed`.
pub async fn an_inquiry_of_a_held_transaction_leaves_it_held_and_committable<P: UnderTest>(
    kit: Kit<P>,
) {
    let tx = kit.begin().await;
    assert!(
        kit.send_prepare(&tx).await.vote.is_yes(),
        "the prepare of a valid entry"
    );
    assert_eq!(kit.send_inquire(&tx, false).await, Held, "read-only");
    assert_eq!(kit.send_inquire(&tx, true).await, Held, "with prevent");
    kit.expect(&tx, 1, 0, [1, 0, 0], "after both inquiries")
        .await;
    let again = kit.send_prepare(&tx).await;
    assert!(
        again.vote.is_yes(),
        "a duplicate prepare after the inquiries: {again:?}"
    );
    kit.decide(&tx, TxStatus::Committing).await;
    assert_eq!(
        kit.send_commit(&tx).await,
        CompleteReply::Done,
        "the commit"
    );
    kit.expect(&tx, 0, 1, [1, 1, 0], "after the commit").await;
    assert_eq!(kit.send_inquire(&tx, false).await, Committed, "read-only");
    assert_eq!(kit.send_inquire(&tx, true).await, Committed, "with prevent");
    kit.expect(&tx, 0, 1, [1, 1, 0], "after inquiries of the committed one")
        .await;
}

/// A prevent that arrives while the prepare's work is still deciding (a `reserve` hook still
/// running; the item's conditional write not yet sent) answers `prevented`, and the work's late
/// result never lands: the prepare votes no (`fenced`) and whatever the work held is released
/// (a `reserve` that said yes is cancelled, once). Before the prevent, a read-only inquiry
/// cannot tell (`open`).
pub async fn a_prevent_during_the_prepare_keeps_its_late_result_from_holding<P: UnderTest>(
    kit: Kit<P>,
) {
    let tx = kit.begin().await;
    let req = kit.prepare(&tx);
    kit.arm(Step::Prepare, Fail::Hold);
    let first = kit.subject().prepare(&req);
    tokio::pin!(first);
    tokio::select! {
        r = &mut first => panic!("the held prepare returned: {r:?}"),
        () = kit.inside() => {}
    }
    assert_eq!(
        kit.send_inquire(&tx, false).await,
        Open,
        "a read-only inquiry while the prepare's work decides"
    );
    assert_eq!(
        kit.send_inquire(&tx, true).await,
        Prevented,
        "a prevent while the prepare's work decides"
    );
    kit.release();
    let late = first.await.expect("prepare");
    assert_eq!(
        reason(&late),
        Some(VoteReason::Fenced),
        "the prepare whose work finished after the prevent: {late:?}"
    );
    kit.expect(&tx, 0, 0, [1, 0, 1], "after the late result")
        .await;
    assert_eq!(
        kit.send_inquire(&tx, false).await,
        Prevented,
        "a prevent is final"
    );
    kit.decide(&tx, TxStatus::Aborting).await;
    let a = kit.send_abort(&tx).await;
    assert!(a.acknowledged(), "the abort after the prevent: {a:?}");
    kit.expect(
        &tx,
        0,
        0,
        [1, 0, 1],
        "after the abort: nothing cancelled twice",
    )
    .await;
}

/// One participant reached under two service names (two functions over one store, or one table
/// reached `direct` and through a function) gets one prepare per name, each naming its `part`
/// of the request; with the same payload under both, the second is no retry of the first: a
/// `no`, `invalid`, holding nothing more. An inquiry about the other part finds no evidence of
/// it (`prevented`, nothing written); about the held part, `held`. A prepare naming no part (an
/// older coordinator) is compared as before: a retry.
pub async fn a_prepare_of_another_part_of_its_request_is_no_retry<P: UnderTest>(kit: Kit<P>) {
    let tx = kit.begin().await;
    let part = |p| PrepareRequest {
        part: Some(p),
        ..kit.prepare(&tx)
    };
    let first = kit
        .subject
        .prepare(&part(0))
        .await
        .expect("prepare answered");
    assert!(first.vote.is_yes(), "the prepare of part 0: {first:?}");
    let other = kit
        .subject
        .prepare(&part(1))
        .await
        .expect("prepare answered");
    assert_eq!(
        reason(&other),
        Some(VoteReason::Invalid),
        "part 1, the same payload, taken for a retry of part 0: {other:?}"
    );
    let again = kit
        .subject
        .prepare(&part(0))
        .await
        .expect("prepare answered");
    assert!(again.vote.is_yes(), "a duplicate of part 0: {again:?}");
    kit.expect(&tx, 1, 0, [1, 0, 0], "after both parts' prepares")
        .await;
    let ask = |p, prevent| InquireRequest {
        part: Some(p),
        ..kit.inquiry(&tx, prevent)
    };
    for prevent in [false, true] {
        let answer = kit.subject.inquire(&ask(1, prevent)).await;
        let answer = answer.expect("inquire answered").inquiry;
        assert_eq!(answer, Prevented, "part 1 (prevent: {prevent})");
    }
    let answer = kit.subject.inquire(&ask(0, false)).await;
    assert_eq!(answer.expect("inquire answered").inquiry, Held, "part 0");
    kit.expect(&tx, 1, 0, [1, 0, 0], "after the inquiries")
        .await;
}
