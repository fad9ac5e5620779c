//! A participant that never answers (`twopc_model::unanswered`): by the path rule
//! (`rules::stages`), a transaction naming a custom participant not marked `highlyAvailable`
//! takes the classic path, and the sweeper alone frees every other item whatever state it
//! finds; marked, it is staged, and the sweeper cannot (the record waits for that answer).
//! The explored spaces are those of `check.rs`: the same pinned state counts.

use stateright::{Checker, Model};
use twopc_model::state::Item;
use twopc_model::unanswered::{HEALTHY_ITEMS_FREED, Unanswered};

/// `check.rs`'s `CORRECT_2X2_STATES`: the classic model, explored whole.
const CLASSIC_2X2_STATES: usize = 60_989;

#[test]
fn by_default_the_sweeper_frees_the_healthy_items_of_a_participant_that_never_answers() {
    let model = Unanswered::<2, 2>::by_rule(Item(1), false);
    assert!(
        !model.model.staged,
        "a custom participant, not marked: classic"
    );
    let checker = model.checker().spawn_bfs().join();
    assert_eq!(checker.unique_state_count(), CLASSIC_2X2_STATES);
    assert!(
        checker.discovery(HEALTHY_ITEMS_FREED).is_none(),
        "from every reachable state, the sweeper alone frees item 0"
    );
}

#[test]
fn opted_in_a_participant_that_never_answers_keeps_the_healthy_items_held() {
    let model = Unanswered::<2, 2>::by_rule(Item(1), true);
    assert!(model.model.staged, "marked highlyAvailable: staged");
    let checker = model.checker().spawn_bfs().join();
    let path = checker
        .discovery(HEALTHY_ITEMS_FREED)
        .expect("a staged transaction whose inquiry never arrives holds item 0");
    // The counterexample ends in a STAGING record: nobody may decide it without item 1.
    let last = path.last_state();
    let swept = model.sweep_without_dead(last);
    assert!(
        swept
            .txs
            .iter()
            .any(|t| t.record == Some(twopc_core::status::TxStatus::Staging)),
        "{swept:?}"
    );
}
