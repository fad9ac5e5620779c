//! The listing of unfinished transactions (`DynamoTxLog::pending`, behind `GET
//! /transactions?status=pending`) against DynamoDB Local: every non-terminal status, oldest
//! deadline first, pages that neither skip nor repeat across the index's shards and its ties.

use twopc_core::ids::TxId;
use twopc_core::ports::{Swapped, TxLog};
use twopc_core::record::TxRecord;
use twopc_core::status::TxStatus;
use twopc_dynamo::DynamoTxLog;
use twopc_dynamo::txlog::PendingCursor;
use twopc_tests::World;

const NOW: u64 = 1_900_000_000_000;

fn record(deadline: u64, status: TxStatus) -> TxRecord {
    let mut r = TxRecord::never_began(&TxId::random(), deadline - 5_000);
    r.status = status;
    r.deadline = deadline;
    r.begun_by = "pending-test".into();
    r
}

/// Every page from the start, `limit` at a time: the ids in order, and the number of pages.
async fn all_pages(log: &DynamoTxLog, overdue_at: Option<u64>, limit: usize) -> (Vec<TxId>, usize) {
    let (mut ids, mut pages, mut after): (Vec<TxId>, usize, Option<PendingCursor>) =
        (vec![], 0, None);
    loop {
        let page = log
            .pending(after.as_ref(), overdue_at, limit)
            .await
            .expect("a page");
        assert!(page.records.len() <= limit, "a page holds at most limit");
        ids.extend(page.records.iter().map(|r| r.tx_id.clone()));
        pages += 1;
        match page.next {
            Some(next) => after = Some(next),
            None => return (ids, pages),
        }
    }
}

#[tokio::test]
async fn pending_lists_every_unfinished_status_oldest_deadline_first_in_pages() {
    // GIVEN records in every unfinished status (a staged commit in flight among them), three
    // sharing one deadline, and two finished ones.
    let w = World::new().await;
    let mut unfinished = vec![
        record(NOW - 300, TxStatus::Preparing),
        record(NOW - 200, TxStatus::Staging),
        record(NOW - 100, TxStatus::Preparing),
        record(NOW - 100, TxStatus::Staging),
        record(NOW - 100, TxStatus::Preparing),
        record(NOW + 100, TxStatus::Preparing),
        record(NOW + 200, TxStatus::Staging),
    ];
    for r in &unfinished {
        w.log.create(r).await.expect("create");
    }
    // Moved on by compare-and-swap, as the coordinator moves them: decided but not finished...
    let (committing, aborting) = (&unfinished[2].clone(), &unfinished[5].clone());
    for (r, to) in [
        (committing, TxStatus::Committing),
        (aborting, TxStatus::Aborting),
    ] {
        assert!(matches!(
            w.log.transition(r, to, Some(&[]), NOW).await.expect("swap"),
            Swapped::Done(_)
        ));
    }
    // ...and finished.
    for (decision, to) in [
        (TxStatus::Committing, TxStatus::Committed),
        (TxStatus::Aborting, TxStatus::Aborted),
    ] {
        let r = record(NOW - 400, TxStatus::Preparing);
        w.log.create(&r).await.expect("create");
        let decided = match w.log.transition(&r, decision, Some(&[]), NOW).await {
            Ok(Swapped::Done(d)) => *d,
            other => panic!("{other:?}"),
        };
        w.log
            .transition(&decided, to, None, NOW)
            .await
            .expect("finish");
    }
    unfinished.sort_by(|a, b| (a.deadline, &a.tx_id).cmp(&(b.deadline, &b.tx_id)));
    let want: Vec<TxId> = unfinished.iter().map(|r| r.tx_id.clone()).collect();

    // WHEN listed in one page, THEN every unfinished one, in (deadline, id) order.
    let page = w.log.pending(None, None, 100).await.expect("page");
    let ids: Vec<TxId> = page.records.iter().map(|r| r.tx_id.clone()).collect();
    assert_eq!(ids, want);
    assert!(page.next.is_none(), "one page holds them all");
    let statuses: Vec<TxStatus> = page.records.iter().map(|r| r.status).collect();
    for s in [
        TxStatus::Preparing,
        TxStatus::Staging,
        TxStatus::Committing,
        TxStatus::Aborting,
    ] {
        assert!(statuses.contains(&s), "{s} is listed: {statuses:?}");
    }

    // WHEN paged 1, 2 and 3 at a time, THEN the same list: nothing skipped or repeated across
    // shards and across the three-way tie.
    for limit in [1, 2, 3] {
        let (ids, pages) = all_pages(&w.log, None, limit).await;
        assert_eq!(ids, want, "limit {limit}");
        assert_eq!(pages, want.len().div_ceil(limit), "limit {limit}: pages");
    }

    // WHEN only overdue ones are asked for, THEN those whose deadline passed, paged alike.
    let overdue: Vec<TxId> = unfinished
        .iter()
        .filter(|r| r.deadline < NOW)
        .map(|r| r.tx_id.clone())
        .collect();
    assert_eq!(overdue.len(), 5);
    for limit in [2, 100] {
        assert_eq!(all_pages(&w.log, Some(NOW), limit).await.0, overdue);
    }
}

#[test]
fn a_cursor_reads_back_its_own_text_and_nothing_else() {
    let c = PendingCursor {
        deadline: NOW,
        tx_id: TxId::random(),
    };
    assert_eq!(PendingCursor::parse(&c.token()), Some(c.clone()));
    for bad in [
        "",
        "1900000000000",
        "x.y",
        &format!("-1.{}", c.tx_id),
        &c.tx_id.to_string(),
    ] {
        assert_eq!(PendingCursor::parse(bad), None, "{bad:?}");
    }
}

#[tokio::test]
async fn a_cursor_past_the_overdue_bound_continues_with_an_empty_page() {
    // GIVEN an overdue record and a live one.
    let w = World::new().await;
    let (overdue, live) = (
        record(NOW - 100, TxStatus::Preparing),
        record(NOW + 100, TxStatus::Preparing),
    );
    for r in [&overdue, &live] {
        w.log.create(r).await.expect("create");
    }
    // WHEN the overdue listing is continued from a well-formed cursor whose deadline lies at or
    // past its bound (a cursor of the full listing, or one kept until it no longer applies):
    // the range it asks for is empty, and DynamoDB would refuse it as written (BETWEEN with its
    // lower bound above its upper).
    for deadline in [NOW, NOW + 100, u64::MAX] {
        let cursor = PendingCursor {
            deadline,
            tx_id: TxId::random(),
        };
        let page = w
            .log
            .pending(Some(&cursor), Some(NOW), 10)
            .await
            .expect("an answer, not an error");
        // THEN an empty last page.
        assert!(page.records.is_empty() && page.next.is_none(), "{deadline}");
    }
    // AND a cursor just before the bound still reaches the overdue record.
    let cursor = PendingCursor {
        deadline: NOW - 101,
        tx_id: TxId::random(),
    };
    let page = w
        .log
        .pending(Some(&cursor), Some(NOW), 10)
        .await
        .expect("a page");
    let ids: Vec<TxId> = page.records.iter().map(|r| r.tx_id.clone()).collect();
    assert_eq!(ids, vec![overdue.tx_id.clone()]);
}
