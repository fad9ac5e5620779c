//! A participant that never answers, and what the default's path rule
//! ([`rules::stages`](twopc_core::rules::stages)) guarantees about it.
//!
//! [`Unanswered`] wraps a model (the same states, the same steps) with one item standing for a
//! custom participant that, from any reachable state on, answers nothing: no message reaches
//! it, and no inquiry of it ever arrives (a recoverer holds no answer of it). One property,
//! [`HEALTHY_ITEMS_FREED`]: the sweeper alone ([`TwoPhaseCommit::sweep_alone`], without every
//! step that needs the dead item) leaves no other item held. [`Unanswered::by_rule`] builds the
//! model the way the coordinator picks a path: the classic path when the participant is not
//! marked `highlyAvailable`, where the property holds; staged with the mark, where it fails
//! (the record cannot be decided without that answer), which is the documented price of the
//! opt-in.

use stateright::{Model, Property};
use twopc_core::rules::{self, PathFacts, Reach};

use crate::participant::{Upkeep, Variant};
use crate::state::{Coordinator, Item, State};
use crate::system::{Action, TwoPhaseCommit};

/// Once the dead participant is gone, the sweeper alone releases every other item.
pub const HEALTHY_ITEMS_FREED: &str = "healthy items freed without the dead participant";

/// A model whose item `dead` stands for a participant that never answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unanswered<const TXS: usize, const ITEMS: usize> {
    /// The protocol, explored as it is.
    pub model: TwoPhaseCommit<TXS, ITEMS>,
    /// The participant that stops answering.
    pub dead: Item,
}

impl<const TXS: usize, const ITEMS: usize> Unanswered<TXS, ITEMS> {
    /// The correct protocol over tables reached `direct` and the custom participant `dead`,
    /// staged or classic as [`rules::stages`] decides for it, marked `highlyAvailable` or not.
    pub fn by_rule(dead: Item, highly_available: bool) -> Self {
        let facts = TwoPhaseCommit::<TXS, ITEMS>::items().map(|i| PathFacts {
            table: i != dead,
            reach: if i == dead {
                Reach::Http
            } else {
                Reach::Direct
            },
            highly_available: i == dead && highly_available,
            ..PathFacts::DIRECT_TABLE
        });
        let model = TwoPhaseCommit::new(Variant::Correct);
        Unanswered {
            model: if rules::stages(facts).is_ok() {
                model.staged()
            } else {
                model
            },
            dead,
        }
    }

    /// Where the sweeper alone takes `state` once `dead` answers nothing: every coordinator
    /// stops, every message in flight is lost, no recoverer holds an answer of `dead`, and the
    /// sweeper's and resolvers' steps but those on `dead` run in rounds until none changes
    /// anything.
    pub fn sweep_without_dead(&self, state: &State<TXS, ITEMS>) -> State<TXS, ITEMS> {
        let mut s = *state;
        for tx in &mut s.txs {
            if tx.coordinator != Coordinator::Finished {
                tx.coordinator = Coordinator::Crashed;
            }
            tx.prepares_in_flight = false;
            tx.completes_in_flight = None;
            tx.inquiry[self.dead.ix()] = None;
        }
        let alive: Vec<Item> = TwoPhaseCommit::<TXS, ITEMS>::items()
            .filter(|i| *i != self.dead)
            .collect();
        let mut steps = vec![];
        for t in TwoPhaseCommit::<TXS, ITEMS>::txs() {
            steps.extend([Action::Expire(t), Action::SweepAbort(t)]);
            steps.extend(
                alive
                    .iter()
                    .map(|&i| Action::Inquire(t, i, true, Upkeep::Plain)),
            );
            steps.push(Action::RecoverDecide(t));
            steps.extend(
                alive
                    .iter()
                    .map(|&i| Action::SweepComplete(t, i, Upkeep::Plain)),
            );
            steps.push(Action::SweepFinalize(t));
        }
        for &i in &alive {
            steps.extend(
                TwoPhaseCommit::<TXS, ITEMS>::txs().map(|t| Action::Resolve(i, t, Upkeep::Plain)),
            );
        }
        for _round in 0..(4 * (TXS + ITEMS) + 4) {
            let before = s;
            for a in &steps {
                s = self.model.step(s, *a);
            }
            if s == before {
                break;
            }
        }
        s
    }
}

fn healthy_items_freed<const TXS: usize, const ITEMS: usize>(
    u: &Unanswered<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    let swept = u.sweep_without_dead(state);
    TwoPhaseCommit::<TXS, ITEMS>::items()
        .filter(|i| *i != u.dead)
        .all(|i| {
            let item = swept.item(i);
            item.lock.is_none() && !item.is_reserved()
        })
}

impl<const TXS: usize, const ITEMS: usize> Model for Unanswered<TXS, ITEMS> {
    type State = State<TXS, ITEMS>;
    type Action = Action;

    fn init_states(&self) -> Vec<Self::State> {
        self.model.init_states()
    }

    fn actions(&self, state: &Self::State, actions: &mut Vec<Self::Action>) {
        self.model.actions(state, actions);
    }

    fn next_state(&self, last_state: &Self::State, action: Self::Action) -> Option<Self::State> {
        self.model.next_state(last_state, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always(HEALTHY_ITEMS_FREED, healthy_items_freed)]
    }
}
