//! The named properties: each a constant naming it (what `stateright` reports) and the pure
//! predicate over a state that checks it. [`TwoPhaseCommit`]'s `Model::properties` lists them.

use twopc_core::item::FenceOutcome;
use twopc_core::rules::Shape;
use twopc_core::status::{Decision, TxStatus};

use crate::state::{Applied, Coordinator, Item, Op, State, Tx, covers};

use super::{TwoPhaseCommit, settled};

/// Property: a transaction is never applied on one item and aborted on another, a transaction
/// whose record says `COMMITTED` has applied on every item, an abort-decided transaction has
/// applied nowhere, and once no step is left, every commit-decided transaction has applied on
/// every item. `docs/protocol.md`, invariant "Atomicity". Per item: an item that applied one of
/// two operations of a transaction naming it twice has applied; that the other one was lost is
/// [`EVERY_OPERATION_APPLIED_ONCE`]'s business.
pub const ATOMICITY: &str = "atomicity";
/// Property: no item applies a transaction's operation more than once. `docs/protocol.md`, invariant
/// "Atomicity" ("applied exactly once") and "The fence".
pub const APPLIED_AT_MOST_ONCE: &str = "no operation applied twice";
/// Property: a transaction whose record says `COMMITTED` applied each of its operations (one a
/// name, two where it names one item twice) exactly once: none lost, none doubled. Issue 35:
/// one item named twice must not commit with one of its operations dropped.
pub const EVERY_OPERATION_APPLIED_ONCE: &str =
    "a committed transaction applied every operation exactly once";
/// Property: an item applies a transaction's operation only if that transaction's record has
/// reached `COMMITTING`. `docs/protocol.md`, "The steps": `COMMITTING` is the commit point.
pub const NO_COMMIT_WITHOUT_DECISION: &str = "no commit without a recorded commit decision";
/// Property: no participant ever answers a commit or abort with a protocol violation (a commit
/// that finds neither its lock nor its fence entry, or an item whose fence contradicts the
/// decision). `docs/protocol.md`, "Commit and abort".
pub const NO_VIOLATION_REPORTED: &str = "no protocol violation reported";
/// Property: a state with no step left has every transaction ended (terminal record, or never
/// begun) and no item locked. `docs/protocol.md`, invariant "No stuck lock". Exact, because every
/// behaviour of the correct model is finite (see `docs/model-check.md`).
pub const EVERY_TRANSACTION_ENDS: &str = "every transaction ends and leaves no lock";
/// Property: from any state, if every coordinator stops for good and every message in flight is
/// lost, the sweeper and the resolvers alone (deadlines passed) end every transaction and free
/// every item. `docs/protocol.md`, "Recovery" and "Records": "The record is alone enough to finish a
/// transaction."
pub const SWEEPER_FINISHES: &str = "the sweeper alone finishes every transaction";
/// Property (`Property::eventually`): every behaviour reaches a state where every transaction
/// ended and no item is locked. Stateright checks `eventually` only along the first path that
/// reaches each state (see `docs/model-check.md`); [`EVERY_TRANSACTION_ENDS`] is the exact form.
pub const EVENTUALLY_ENDS: &str = "eventually every transaction ends";
/// Example wanted: some transaction commits on every item.
pub const CAN_COMMIT: &str = "a transaction can commit";
/// Example wanted: some transaction aborts.
pub const CAN_ABORT: &str = "a transaction can abort";
/// Example wanted: every transaction commits (they can run one after the other).
pub const ALL_CAN_COMMIT: &str = "every transaction can commit";
/// Example wanted: a transaction whose coordinator crashed ends `COMMITTED`: the sweeper or a
/// resolver rolled it forward.
pub const COMMIT_FINISHED_WITHOUT_COORDINATOR: &str =
    "a crashed coordinator's commit is finished without it";
/// Example wanted: a prepare still in flight faces an item that already carries its
/// transaction's fence entry: only the fence keeps it out.
pub const LATE_PREPARE_MEETS_FENCE: &str = "a late prepare meets the fence";
/// Example wanted: a prepare still in flight, of a decided transaction, faces an unlocked item that
/// has no entry for it (pruned, or never written) and whose horizon covers it: only the horizon
/// keeps it out.
pub const LATE_PREPARE_REFUSED_BY_HORIZON: &str = "a late prepare is refused by the horizon";
/// Example wanted: a transaction is still `COMMITTING` (so its commit may be re-driven) on an item
/// that applied it and whose `committed` fence entry has been pruned: the case where a commit
/// finding neither lock nor entry is answered by the horizon.
pub const COMMIT_OUTLIVES_ITS_FENCE_ENTRY: &str =
    "a commit is still being driven after its fence entry was pruned";
/// Example wanted (configurations with a `put`): a committed `put` made its item real.
pub const PUT_CREATES_AN_ITEM: &str = "a put creates an item";
/// Example wanted (configurations with a `delete`): a committed `delete` left a tombstone.
pub const DELETE_LEAVES_A_TOMBSTONE: &str = "a delete leaves a tombstone";
/// Example wanted (configurations with a `put`): a prepare of a `put` still in flight, of a
/// decided transaction, faces a tombstone whose fence entry or horizon covers that transaction:
/// the tombstone, not the item's absence, keeps it out.
pub const LATE_PUT_REFUSED_BY_TOMBSTONE: &str = "a late prepare of a put is refused by a tombstone";
/// Property: an item is locked only by a transaction whose record is not terminal. `docs/protocol.md`,
/// "The fence": a prepare landing after its transaction ended must not "leave a lock behind"
/// (the hanging problem). The correct protocol breaks it where an item is created after an abort
/// found it absent (`docs/model-check.md`, "Creates and deletes").
pub const NO_LOCK_OUTLIVES_ITS_TRANSACTION: &str = "no lock outlives its transaction";

/// Property: no committed value of an item breaks a bound some transaction's operation keeps on
/// it (the floor of its `require gte`): no balance goes negative, however the transactions in
/// flight end. `docs/protocol.md`, "Reservations".
pub const BOUNDS_HOLD: &str = "every committed value respects every bound";
/// Property: the escrow an item stores is what its standing reservations took (issue 45, item
/// 3): a release gives back its hold's debit, so no phantom is left to refuse later debits
/// or let one overdraw.
pub const ESCROW_FOLLOWS_RESERVATIONS: &str = "the stored escrow is the standing reservations'";
/// Property: an item is never locked and reserved at once. `docs/protocol.md`, "Reservations":
/// a lock and reservations exclude each other.
pub const LOCK_EXCLUDES_RESERVATIONS: &str = "a lock and reservations exclude each other";
/// Example wanted (configurations where two transactions reserve one item): two reservations
/// stand on one item at once.
pub const RESERVATIONS_SHARE_AN_ITEM: &str = "two reservations stand on one item";

/// Property (staged commit): no answer is ever contradicted by the record. A transaction
/// answered "committed" is never recorded aborted (nor answered "aborted" too), and one answered
/// "aborted" is never recorded committed. `docs/protocol.md`, "The staged commit".
pub const ANSWER_HONOURED: &str = "an answer is never contradicted by the record";
/// Property (staged commit): once an inquiry prevented a transaction on an item (or found it
/// prevented), that transaction never holds the item again.
pub const PREVENT_IS_FINAL: &str = "a prevent is final";
/// Example wanted (staged commit): a commit is answered while its record is still `STAGING`:
/// one round of writes.
pub const ANSWERED_BEFORE_EXPLICIT: &str = "a commit is answered while its record is STAGING";
/// Example wanted (staged commit): recovery aborts a `STAGING` transaction it prevented.
pub const STAGING_PREVENTED_AND_ABORTED: &str = "recovery prevents and aborts a STAGING record";

pub(super) type M<const TXS: usize, const ITEMS: usize> = TwoPhaseCommit<TXS, ITEMS>;

pub(super) fn atomicity<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    let mut owes_commit = false;
    for t in M::<TXS, ITEMS>::txs() {
        // Applied on an item: one of its operations there, under any of its names.
        let applied = |i: Item| {
            M::<TXS, ITEMS>::items()
                .any(|n| model.at(t, n) == i && state.tx(t).applied[n.ix()].any())
        };
        let touched = || M::<TXS, ITEMS>::items().map(|n| model.at(t, n));
        let applied_any = touched().any(applied);
        let applied_all = touched().all(applied);
        let aborted_any = state
            .items
            .iter()
            .any(|i| i.fence[t.ix()] == Some(FenceOutcome::Aborted));
        let decision = state.tx(t).record.and_then(TxStatus::decision);
        if applied_any && aborted_any {
            return false; // applied on one item, aborted on another
        }
        if decision == Some(Decision::Abort) && applied_any {
            return false;
        }
        if state.tx(t).record == Some(TxStatus::Committed) && !applied_all {
            return false;
        }
        owes_commit |= decision == Some(Decision::Commit) && !applied_all;
    }
    // At the end of a behaviour, a commit decision must have reached every item.
    !(owes_commit && model.is_final(state))
}

pub(super) fn applied_at_most_once<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .all(|t| t.applied.iter().all(|a| *a != Applied::MoreThanOnce))
}

pub(super) fn every_operation_applied_once<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.txs.iter().all(|t| {
        t.record != Some(TxStatus::Committed) || t.applied.iter().all(|a| *a == Applied::Once)
    })
}

pub(super) fn no_commit_without_decision<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.txs.iter().all(|t| {
        let recorded_commit = t.record.and_then(TxStatus::decision) == Some(Decision::Commit);
        recorded_commit || t.applied.iter().all(|a| !a.any())
    })
}

pub(super) fn no_violation_reported<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    !state.violation_reported
}

pub(super) fn every_transaction_ends<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    settled(state) || !model.is_final(state)
}

pub(super) fn sweeper_finishes<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    settled(&model.sweep_alone(state))
}

pub(super) fn eventually_ends<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    settled(state)
}

pub(super) fn committed_everywhere<const TXS: usize, const ITEMS: usize>(
    state: &State<TXS, ITEMS>,
    t: Tx,
) -> bool {
    state.tx(t).record == Some(TxStatus::Committed) && state.tx(t).applied.iter().all(|a| a.any())
}

pub(super) fn can_commit<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| committed_everywhere(state, t))
}

pub(super) fn all_can_commit<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().all(|t| committed_everywhere(state, t))
}

pub(super) fn can_abort<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .any(|t| t.record == Some(TxStatus::Aborted))
}

pub(super) fn commit_finished_without_coordinator<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs()
        .any(|t| state.tx(t).coordinator == Coordinator::Crashed && committed_everywhere(state, t))
}

pub(super) fn late_prepare_meets_fence<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| {
        state.tx(t).prepares_in_flight && state.items.iter().any(|i| i.fence[t.ix()].is_some())
    })
}

pub(super) fn late_prepare_refused_by_horizon<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    model.variant.checks_horizon()
        && M::<TXS, ITEMS>::txs().any(|t| {
            let tx = state.tx(t);
            tx.prepares_in_flight
                && tx.record.and_then(TxStatus::decision).is_some()
                && state
                    .items
                    .iter()
                    .any(|i| i.lock.is_none() && i.fence[t.ix()].is_none() && covers(i.horizon, t))
        })
}

pub(super) fn commit_outlives_its_fence_entry<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    model.variant.fences()
        && M::<TXS, ITEMS>::txs().any(|t| {
            state.tx(t).record == Some(TxStatus::Committing)
                && M::<TXS, ITEMS>::items().any(|n| {
                    state.tx(t).applied[n.ix()].any()
                        && state.item(model.at(t, n)).fence[t.ix()].is_none()
                })
        })
}

/// Whether some item of shape `shape` has applied some transaction's `op`.
pub(super) fn applied_op<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
    op: Op,
    shape: Shape,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| {
        M::<TXS, ITEMS>::items().any(|n| {
            model.op(t, n) == op
                && state.tx(t).applied[n.ix()].any()
                && state.item(model.at(t, n)).shape == shape
        })
    })
}

pub(super) fn put_creates_an_item<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    applied_op(model, state, Op::Put, Shape::Real)
}

pub(super) fn delete_leaves_a_tombstone<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    applied_op(model, state, Op::Delete, Shape::Tombstone)
}

pub(super) fn late_put_refused_by_tombstone<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| {
        let tx = state.tx(t);
        tx.prepares_in_flight
            && tx.record.and_then(TxStatus::decision).is_some()
            && M::<TXS, ITEMS>::items().any(|n| {
                let item = state.item(model.at(t, n));
                model.op(t, n) == Op::Put
                    && item.shape == Shape::Tombstone
                    && (item.fence[t.ix()].is_some() || covers(item.horizon, t))
            })
    })
}

pub(super) fn no_lock_outlives_its_transaction<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.items.iter().all(|i| {
        M::<TXS, ITEMS>::txs()
            .all(|t| !i.held_by(t) || !state.tx(t).record.is_some_and(TxStatus::is_terminal))
    })
}

pub(super) fn bounds_hold<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::items().all(|i| {
        let floor = model.ops_at(i).filter_map(Op::floor).min();
        floor.is_none_or(|f| state.item(i).value >= f)
    })
}

pub(super) fn escrow_follows_reservations<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.items.iter().all(|i| {
        let standing: i8 = (0..TXS)
            .filter(|&u| i.reserved[u])
            .map(|u| i.held_debit[u])
            .sum();
        i.escrow == standing
    })
}

pub(super) fn lock_excludes_reservations<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .items
        .iter()
        .all(|i| i.lock.is_none() || !i.is_reserved())
}

pub(super) fn reservations_share_an_item<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .items
        .iter()
        .any(|i| i.reserved.iter().filter(|r| **r).count() >= 2)
}

pub(super) fn answer_honoured<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.txs.iter().all(|tx| {
        let recorded = tx.record.and_then(TxStatus::decision);
        !(tx.answered_commit && (tx.answered_abort || recorded == Some(Decision::Abort)))
            && !(tx.answered_abort && recorded == Some(Decision::Commit))
    })
}

pub(super) fn prevent_is_final<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().all(|t| {
        M::<TXS, ITEMS>::items()
            .all(|n| !state.tx(t).prevented[n.ix()] || !model.holds(state, t, n))
    })
}

pub(super) fn answered_before_explicit<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .any(|tx| tx.answered_commit && tx.record == Some(TxStatus::Staging))
}

pub(super) fn staging_prevented_and_aborted<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .any(|tx| tx.prevented.iter().any(|p| *p) && tx.record == Some(TxStatus::Aborted))
}
