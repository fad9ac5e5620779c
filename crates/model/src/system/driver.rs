//! The coordinator's own steps on the state as pure functions (begin, the prepares sent, the
//! decision, the staged commit's put, the completes sent), a crash, expiry, and [`settled`].

use twopc_core::rules::{self, AfterLostSwap, Recovery};
use twopc_core::status::{Decision, TxStatus};

use crate::participant::Variant;
use crate::state::{Clock, Coordinator, State, Tx};

use super::swap;

/// Every transaction ended and no item is locked or reserved.
pub fn settled<const TXS: usize, const ITEMS: usize>(state: &State<TXS, ITEMS>) -> bool {
    state.txs.iter().all(|t| t.has_ended())
        && state
            .items
            .iter()
            .all(|i| i.lock.is_none() && !i.is_reserved())
}

/// What the sweeper does with a record ([`rules::recovery`]), if it picks it up: it reads only
/// overdue records (`TxLog::overdue`: written, past the deadline), or, with
/// [`Variant::RecoveryIgnoresDeadline`], any record, as overdue (its clock runs ahead).
pub(super) fn overdue_recovery<const TXS: usize, const ITEMS: usize>(
    state: &State<TXS, ITEMS>,
    t: Tx,
    variant: Variant,
) -> Option<Recovery> {
    let tx = state.tx(t);
    let overdue = tx.deadline_passed() || !variant.recovery_waits_for_deadline();
    match tx.record {
        Some(status) if overdue => Some(rules::recovery(status, true)),
        _ => None,
    }
}

pub(super) fn begin<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if tx.coordinator != Coordinator::Idle {
        return state;
    }
    if tx.record.is_none() {
        tx.record = Some(TxStatus::Preparing);
        tx.coordinator = Coordinator::Begun;
    } else {
        // Someone recorded it first (a resolver's `create_aborted`): replay, nothing to do.
        tx.coordinator = Coordinator::Finished;
    }
    state
}

pub(super) fn send_prepares<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if tx.coordinator == Coordinator::Begun {
        tx.coordinator = Coordinator::Preparing {
            yes: [false; ITEMS],
        };
        // The participant checks the deadline on arrival, which is after this send: prepares
        // sent past the deadline are all refused, as if never sent. Prepares sent in time may
        // pass the check and land at any later moment.
        tx.prepares_in_flight = !tx.deadline_passed();
    }
    state
}

/// The coordinator's decision swap: `Commit` only where [`rules::decision`] from the yes votes
/// received is `Commit`; `Abort` at any time (a reply lost or late is a no, so whatever landed,
/// the rule may have decided from fewer yes votes: `Abort`). A lost swap follows
/// [`rules::after_lost_decide`].
pub(super) fn decide<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
    decision: Decision,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    let (yes, from) = match tx.coordinator {
        Coordinator::Preparing { yes } => (yes, TxStatus::Preparing),
        // The stager decides once its put is acknowledged (it waits for the put's reply as for
        // the votes); having answered "committed", it only makes that explicit.
        Coordinator::Staging {
            yes,
            acked: true,
            answered,
        } if !(answered && decision == Decision::Abort) => (yes, TxStatus::Staging),
        _ => return state,
    };
    if decision == Decision::Commit && rules::decision(yes.into_iter()) != Decision::Commit {
        return state;
    }
    let staged = from == TxStatus::Staging;
    tx.coordinator = match swap(tx.record, from, TxStatus::deciding(decision)) {
        Ok(status) => {
            tx.record = Some(status);
            if staged {
                answer_as(tx, decision);
            }
            Coordinator::Decided(decision)
        }
        // Lost the race (a resolver or the sweeper aborted us past our deadline; a helper or
        // recoverer decided a STAGING record).
        Err(found) => match rules::after_lost_decide(found) {
            // Follow the record; a terminal one is returned as it is (`Coordinator::complete`).
            AfterLostSwap::Follow(followed) => {
                if staged {
                    answer_as(tx, followed);
                }
                if found.is_some_and(TxStatus::is_terminal) {
                    Coordinator::Finished
                } else {
                    Coordinator::Decided(followed)
                }
            }
            // Still undecided after a failed swap, or the record vanished.
            AfterLostSwap::Fatal => Coordinator::Crashed,
        },
    };
    state
}

/// Ghost: a staged coordinator answers the client with `decision`.
pub(super) fn answer_as<const ITEMS: usize>(
    tx: &mut crate::state::TxState<ITEMS>,
    decision: Decision,
) {
    match decision {
        Decision::Commit => tx.answered_commit = true,
        Decision::Abort => tx.answered_abort = true,
    }
}

/// The record put lands if no record exists (`attribute_not_exists`); the stager, if alive and
/// still waiting, learns it is the stager (`keyed`: and only now sends its prepares). A put
/// refused because a record exists (a resolver's
/// `ABORTED`, for a transaction whose locks expired before its put landed) makes the stager
/// follow that record.
pub(super) fn deliver_stage<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
    keyed: bool,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if !tx.staged {
        return state;
    }
    let Some(found) = tx.record else {
        tx.record = Some(TxStatus::Staging);
        if let Coordinator::Staging {
            yes,
            acked: false,
            answered,
        } = tx.coordinator
        {
            tx.coordinator = Coordinator::Staging {
                yes,
                acked: true,
                answered,
            };
            // A keyed request's stager sends its prepares once its put landed (checked at
            // the participant against the deadline).
            if keyed {
                tx.prepares_in_flight = !tx.deadline_passed();
            }
        }
        return state;
    };
    if let Coordinator::Staging { acked: false, .. } = tx.coordinator {
        tx.coordinator = match found.decision() {
            Some(d) => {
                answer_as(tx, d);
                if found.is_terminal() {
                    Coordinator::Finished
                } else {
                    Coordinator::Decided(d)
                }
            }
            None => Coordinator::Crashed,
        };
    }
    state
}

/// [`super::Action::Abandon`]: a stager whose put was neither acknowledged nor refused (no
/// record) gives up on it: `ABORTING`, conditional on no record, then the abort's completion
/// like any decided coordinator's. It answered nothing (it had no acknowledgement): the client
/// hears the failure, not an outcome.
pub(super) fn abandon<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if let (
        Coordinator::Staging {
            acked: false,
            answered: false,
            ..
        },
        None,
    ) = (tx.coordinator, tx.record)
    {
        tx.record = Some(TxStatus::Aborting);
        tx.coordinator = Coordinator::Decided(Decision::Abort);
    }
    state
}

pub(super) fn send_completes<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if let Coordinator::Decided(d) = tx.coordinator {
        tx.coordinator = Coordinator::Completing(d);
        tx.completes_in_flight = Some(d);
    }
    state
}

pub(super) fn crash<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if !matches!(tx.coordinator, Coordinator::Finished) {
        tx.coordinator = Coordinator::Crashed;
    }
    state
}

pub(super) fn expire<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    // A deadline exists once the record is written, or a staged coordinator sent its prepares
    // (their locks expire at it, whether the record put lands or not).
    if tx.record.is_some() || tx.staged {
        tx.clock = Clock::PastDeadline;
    }
    state
}
