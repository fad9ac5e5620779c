//! The stateright [`Model`]: which steps exist, what each does (a pure function from state to
//! state), and the named properties.
//!
//! A step that would change nothing is not a step ([`Model::next_state`] answers `None`), so a
//! state with no step left is a real end of a behaviour; the liveness properties rely on that.

mod driver;
mod properties;
mod steps;

pub use driver::settled;
use driver::{
    abandon, begin, crash, decide, deliver_stage, expire, overdue_recovery, send_completes,
    send_prepares,
};
pub use properties::{
    ALL_CAN_COMMIT, ANSWER_HONOURED, ANSWERED_BEFORE_EXPLICIT, APPLIED_AT_MOST_ONCE, ATOMICITY,
    BOUNDS_HOLD, CAN_ABORT, CAN_COMMIT, COMMIT_FINISHED_WITHOUT_COORDINATOR,
    COMMIT_OUTLIVES_ITS_FENCE_ENTRY, DELETE_LEAVES_A_TOMBSTONE, ESCROW_FOLLOWS_RESERVATIONS,
    EVENTUALLY_ENDS, EVERY_OPERATION_APPLIED_ONCE, EVERY_TRANSACTION_ENDS,
    LATE_PREPARE_MEETS_FENCE, LATE_PREPARE_REFUSED_BY_HORIZON, LATE_PUT_REFUSED_BY_TOMBSTONE,
    LOCK_EXCLUDES_RESERVATIONS, NO_COMMIT_WITHOUT_DECISION, NO_LOCK_OUTLIVES_ITS_TRANSACTION,
    NO_VIOLATION_REPORTED, PREVENT_IS_FINAL, PUT_CREATES_AN_ITEM, RESERVATIONS_SHARE_AN_ITEM,
    STAGING_PREVENTED_AND_ABORTED, SWEEPER_FINISHES,
};
use properties::{
    all_can_commit, answer_honoured, answered_before_explicit, applied_at_most_once, atomicity,
    bounds_hold, can_abort, can_commit, commit_finished_without_coordinator,
    commit_outlives_its_fence_entry, delete_leaves_a_tombstone, escrow_follows_reservations,
    eventually_ends, every_operation_applied_once, every_transaction_ends,
    late_prepare_meets_fence, late_prepare_refused_by_horizon, late_put_refused_by_tombstone,
    lock_excludes_reservations, no_commit_without_decision, no_lock_outlives_its_transaction,
    no_violation_reported, prevent_is_final, put_creates_an_item, reservations_share_an_item,
    staging_prevented_and_aborted, sweeper_finishes,
};

use stateright::{Model, Property};
use twopc_core::rules::Shape;
use twopc_core::status::{Decision, TxStatus};

use crate::participant::{Upkeep, Variant};
use crate::state::{Coordinator, Env, Item, Op, State, Tx};

/// One step of the system. Each is one DynamoDB request (or a refused conditional one), one
/// message delivery, or the passing of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Coordinator: put the record `PREPARING` (`attribute_not_exists`).
    Begin(Tx),
    /// Coordinator: send prepare to every item at once. A prepare sent before the deadline passes
    /// the participant's deadline check and its write may land at any later moment; one sent
    /// after it is refused everywhere.
    SendPrepares(Tx),
    /// Coordinator: compare-and-swap `PREPARING` → `COMMITTING` (every vote yes) or
    /// `ABORTING` (any time: a missing answer is a no); on a lost swap, follow the record.
    Decide(Tx, Decision),
    /// Coordinator: send commit or abort to every item at once.
    SendCompletes(Tx),
    /// Coordinator: once every item is finished, `COMMITTING` → `COMMITTED` (or `ABORTING` →
    /// `ABORTED`).
    Finalize(Tx),
    /// Coordinator: stop dead, at any point.
    Crash(Tx),
    /// Network: a prepare reaches the item (first copy, a duplicate, or a late one).
    DeliverPrepare(Tx, Item),
    /// Network: a commit or abort reaches the item (first copy, a duplicate, or a late one), with
    /// the fence upkeep its write carries out.
    DeliverComplete(Tx, Item, Upkeep),
    /// Time passes the transaction's deadline (and its locks' `expiresAt`).
    Expire(Tx),
    /// A resolver on an item held (locked or reserved) by a transaction follows the lock rule
    /// one write for that owner: the sweeper walking the lock-expiry index, or a newcomer's
    /// prepare, which also settles a live owner that already decided. A commit or abort it
    /// writes for the owner carries out the upkeep.
    Resolve(Item, Tx, Upkeep),
    /// Sweeper (`Coordinator::recover` on an overdue record): `PREPARING` past deadline →
    /// `ABORTING`.
    SweepAbort(Tx),
    /// Sweeper: send the recorded decision to one item of an overdue decided record, with the
    /// fence upkeep its write carries out.
    SweepComplete(Tx, Item, Upkeep),
    /// Sweeper: finalize an overdue decided record whose items are all finished.
    SweepFinalize(Tx),
    /// Staged coordinator: send the record put (`STAGING`, `attribute_not_exists`) and every
    /// prepare at once. The put may land late, or never.
    Stage(Tx),
    /// Network: the record put lands (only on an absent record); its stager, if alive, learns
    /// the outcome (acknowledged, or refused: then it follows the record it finds).
    DeliverStage(Tx),
    /// Staged coordinator: answer the client "committed" once its put is acknowledged and every
    /// vote is yes (the record may still be `STAGING`).
    Answer(Tx),
    /// A helper (`prevent` false: a replay, a status read; any time) or a recoverer (`prevent`:
    /// past the deadline) asks one item about a transaction whose record it read `STAGING`,
    /// with the upkeep (`Plain`, or `Raise` for a full fence) its prevent write uses.
    Inquire(Tx, Item, bool, Upkeep),
    /// A helper or recoverer decides a `STAGING` record from the latest inquiries
    /// ([`rules::staged_decision`](twopc_core::rules::staged_decision)): every item held → compare-and-swap `COMMITTING` (then it may
    /// answer "committed"); some item prevented, past the deadline → `ABORTING`.
    RecoverDecide(Tx),
    /// A client's retry of a transaction with an idempotency key (the same id), after its
    /// first attempt wrote the record. Correct: the replay writes its record first, the put is
    /// refused, and it follows the record it finds (a helper: [`Action::Inquire`] and
    /// [`Action::RecoverDecide`]), sending no prepare: so this step is none.
    /// [`Variant::FreshBeganReplay`]: it sends every prepare again, with a fresh `began`.
    Replay(Tx),
    /// The record's time-to-live removes it ([`Reuse`]: only its first transaction's, once
    /// ended and past its deadline), so its id may begin again.
    ExpireRecord(Tx),
    /// A step of a transaction meets a former transaction's fence entry under its id on the
    /// item (`former_entry`: the write it is about is refused) and retires it first: the entry
    /// removed, the horizon raised over it (`ParticipantStore::retire`). The second `Tx` is
    /// the entry's. Taken whenever a step of the other transaction under the id may still come
    /// (it began, or has messages in flight): more often than the real code, which retires only
    /// as a write of its own is refused.
    Retire(Item, Tx),
    /// Native transaction (`CommitMode::Auto`, configurations with `native`): before its
    /// coordinator did anything, the record's put (`COMMITTED`) and every item's write in one
    /// all-or-nothing step, each item's write admitted by [`rules::native_write`](twopc_core::rules::native_write) and the
    /// operation's bound. Where the protocol holds an item, nothing happens (the transaction
    /// takes the protocol path: its `Begin` or `Stage` stays possible); where an item refuses,
    /// the record is put `ABORTED`. With heat, an item's live mark makes it give way too
    /// (`NativeStep::Heated`), and the marks the heat rule asks for on the contended items are
    /// kept for its prepares ([`crate::state::TxState::marks`]).
    Native(Tx),
    /// Time ends an item's heat mark (configurations with heat): native writes apply there
    /// again. Once per item, so that marking and cooling cannot cycle.
    Cool(Item),
    /// Staged coordinator whose record put failed (no acknowledgement, no record found) while
    /// its prepares went out: it records the transaction `ABORTING` itself, conditional on no
    /// record (its late put is then refused), and completes the abort
    /// (`Coordinator::abandon`).
    Abandon(Tx),
}

/// One transaction naming one item twice, under two spellings of its key (issue 35: `{"id": 1}`
/// and `{"id": 1.0}` are one item to DynamoDB), its request's duplicate check bypassed. A
/// transaction's names and the items are one index ([`Item`]); every name is placed at the item
/// of its index but `tx`'s name `name`, placed at `item` (so `tx` names `item` twice, as
/// `item` and as `name`, and never touches item `name`, which other transactions may).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Twice {
    /// The transaction.
    pub tx: Tx,
    /// The item it names twice (its first name for it: the same index).
    pub item: Item,
    /// Its second name for it.
    pub name: Item,
    /// Whether the two names carry the same operation (same kind, same content: a prepare of
    /// one meeting the other's hold cannot tell it from a retry by its operation). Otherwise
    /// they differ, even where their kinds are the same (two `Update`s setting different
    /// values).
    pub same: bool,
}

/// An idempotency key used again after its first transaction's record expired: `TxId::
/// for_idempotency_key` names both transactions alike, `first` and then `again` (which began
/// later, so `first < again`). `again` begins only once `first`'s record is gone
/// ([`Action::ExpireRecord`]); before, the same key is a replay, which the model's one
/// submit per transaction leaves out. Both stage sequentially (a keyed request puts its record
/// before its prepares). Items and records tell them apart by `began` (the record's
/// `createdAt`), [`crate::participant::Variant::ReuseMatchesId`] by id alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reuse {
    /// The key's first transaction.
    pub first: Tx,
    /// Its next, once `first`'s record expired.
    pub again: Tx,
}

/// The protocol with `TXS` transactions over `ITEMS` items, every transaction touching every
/// item with the operation `ops` gives it there (one name per item, unless [`Twice`]), every
/// item starting in the shape `initial` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TwoPhaseCommit<const TXS: usize, const ITEMS: usize> {
    /// Which protocol runs.
    pub variant: Variant,
    /// `ops[t][i]`: what transaction `t` does to item `i`.
    pub ops: [[Op; ITEMS]; TXS],
    /// Each item's shape in the initial state (unlocked, empty fence, no horizon).
    pub initial: [Shape; ITEMS],
    /// Each item's number in the initial state ([`ItemState::value`](crate::state::ItemState::value)).
    pub values: [i8; ITEMS],
    /// Whether coordinators run the staged commit (record `STAGING` written with the
    /// prepares) instead of begin-then-prepare.
    pub staged: bool,
    /// Whether a transaction may first try to commit natively ([`Action::Native`]).
    pub native: bool,
    /// Whether items carry heat marks: a native attempt that gives way on a contended item has
    /// its prepare mark it, a live mark turns native writes away, and time ends marks
    /// ([`Action::Cool`]).
    pub heat: bool,
    /// Whether every item starts marked hot (by transactions before the model's), so that a
    /// native attempt may meet a mark no hold explains.
    pub hot_at_start: bool,
    /// A transaction naming one item twice, if any.
    pub twice: Option<Twice>,
    /// An idempotency key's two transactions, if any.
    pub reuse: Option<Reuse>,
}

/// The size the tests check exhaustively: two transactions that both touch the same two items.
pub type TwoByTwo = TwoPhaseCommit<2, 2>;

/// The statuses a compare-and-swap may meet: `Ok(new)` if the record was `from`, else
/// `Err(what it is)` (`TxLog::transition`, `Swapped`).
fn swap(
    record: Option<TxStatus>,
    from: TxStatus,
    to: TxStatus,
) -> Result<TxStatus, Option<TxStatus>> {
    debug_assert!(
        from.can_move_to(to),
        "illegal transition {from:?} -> {to:?}"
    );
    match record {
        Some(status) if status == from => Ok(to),
        other => Err(other),
    }
}

impl<const TXS: usize, const ITEMS: usize> TwoPhaseCommit<TXS, ITEMS> {
    /// The model of `variant` where every transaction updates every item, all of which exist.
    pub const fn new(variant: Variant) -> Self {
        Self::with_ops(variant, [[Op::Update; ITEMS]; TXS], [Shape::Real; ITEMS])
    }

    /// The model of `variant` where transaction `t` applies `ops[t][i]` to item `i`, which
    /// starts as `initial[i]` (not a placeholder: one is always locked).
    pub const fn with_ops(
        variant: Variant,
        ops: [[Op; ITEMS]; TXS],
        initial: [Shape; ITEMS],
    ) -> Self {
        const {
            assert!(TXS >= 1 && TXS <= 8, "model 1 to 8 transactions");
            assert!(ITEMS >= 1 && ITEMS <= 8, "model 1 to 8 items");
        }
        TwoPhaseCommit {
            variant,
            ops,
            initial,
            values: [0; ITEMS],
            staged: false,
            native: false,
            heat: false,
            hot_at_start: false,
            twice: None,
            reuse: None,
        }
    }

    /// The same, with `reuse.again` a later transaction under `reuse.first`'s id.
    pub const fn with_reuse(self, reuse: Reuse) -> Self {
        assert!(
            reuse.first.0 < reuse.again.0,
            "the key's later use began later"
        );
        TwoPhaseCommit {
            reuse: Some(reuse),
            ..self
        }
    }

    /// The other transaction under `tx`'s id, if any.
    pub fn twin(&self, tx: Tx) -> Option<Tx> {
        match self.reuse {
            Some(r) if r.first == tx => Some(r.again),
            Some(r) if r.again == tx => Some(r.first),
            _ => None,
        }
    }

    /// Whether `tx`'s request has an idempotency key (the model's only keyed ones: a
    /// [`Reuse`]'s), which stages sequentially: its prepares sent once its put landed.
    pub fn keyed(&self, tx: Tx) -> bool {
        self.twin(tx).is_some()
    }

    /// What a step reads beside an item in `state`: deadlines, and who shares an id.
    pub fn env(&self, state: &State<TXS, ITEMS>) -> Env<TXS> {
        Env {
            deadline_passed: state.deadlines_passed(),
            twin: std::array::from_fn(|t| self.twin(Tx(t as u8))),
            by_id: self.variant == Variant::ReuseMatchesId,
            ahead: [false; TXS],
        }
    }

    /// The same, with `twice.tx` naming `twice.item` twice (`ops[twice.tx][twice.name]` is the
    /// second name's operation).
    pub const fn with_twice(self, twice: Twice) -> Self {
        TwoPhaseCommit {
            twice: Some(twice),
            ..self
        }
    }

    /// The same, with every transaction trying a native commit first ([`Action::Native`]).
    pub const fn native(self) -> Self {
        TwoPhaseCommit {
            native: true,
            ..self
        }
    }

    /// The same, with heat marks ([`TwoPhaseCommit::heat`]): native transactions that learn and
    /// route around contended items; every item marked at the start if `hot_at_start`.
    pub const fn with_heat(self, hot_at_start: bool) -> Self {
        TwoPhaseCommit {
            native: true,
            heat: true,
            hot_at_start,
            ..self
        }
    }

    /// The same, with every coordinator running the staged commit.
    pub const fn staged(self) -> Self {
        TwoPhaseCommit {
            staged: true,
            ..self
        }
    }

    /// The same, with each item's number starting at `values[i]`.
    pub const fn with_values(self, values: [i8; ITEMS]) -> Self {
        TwoPhaseCommit { values, ..self }
    }

    /// The operation `tx` applies under its name `name`.
    pub fn op(&self, tx: Tx, name: Item) -> Op {
        self.ops[tx.ix()][name.ix()]
    }

    /// The item `tx`'s name `name` is placed at: its own index, but for [`Twice`]'s second name.
    pub fn at(&self, tx: Tx, name: Item) -> Item {
        match self.twice {
            Some(w) if w.tx == tx && w.name == name => w.item,
            _ => name,
        }
    }

    /// Every operation placed at `item`, of every transaction under every name.
    pub fn ops_at(&self, item: Item) -> impl Iterator<Item = Op> + '_ {
        Self::txs().flat_map(move |t| {
            Self::items()
                .filter(move |&n| self.at(t, n) == item)
                .map(move |n| self.op(t, n))
        })
    }

    /// Whether `tx` names some item twice.
    pub fn names_twice(&self, tx: Tx) -> bool {
        self.twice.is_some_and(|w| w.tx == tx)
    }

    /// Whether `tx`'s hold on the item its name `name` is placed at carries another operation
    /// than `name`'s: the fact the variant gives
    /// [`crate::participant::own_hold_with_another_operation`] (`inquiry`: for an inquiry
    /// rather than a prepare).
    pub fn other_op(&self, state: &State<TXS, ITEMS>, tx: Tx, name: Item, inquiry: bool) -> bool {
        let held = state.item(self.at(tx, name)).held_for[tx.ix()];
        let Some(h) = held.filter(|h| *h != name) else {
            return false;
        };
        let same = self.twice.is_some_and(|w| w.same);
        match self.variant {
            Variant::OwnHoldIsRetry => false,
            Variant::InquiryIgnoresOperation if inquiry => false,
            Variant::OwnHoldComparesPart => true,
            // Two names of one transaction on one item are `Twice`'s: `h` and `name`.
            _ => !same || self.op(tx, h) != self.op(tx, name),
        }
    }

    /// Whether `tx` holds the item its name `name` is placed at for that name's operation.
    pub fn holds(&self, state: &State<TXS, ITEMS>, tx: Tx, name: Item) -> bool {
        state.item(self.at(tx, name)).held_for[tx.ix()] == Some(name)
    }

    /// Whether some transaction applies `op` somewhere.
    pub fn has_op(&self, op: Op) -> bool {
        self.ops.iter().flatten().any(|o| *o == op)
    }

    /// Every transaction.
    pub fn txs() -> impl Iterator<Item = Tx> {
        (0..TXS).map(|t| Tx(t as u8))
    }

    /// Every item.
    pub fn items() -> impl Iterator<Item = Item> {
        (0..ITEMS).map(|i| Item(i as u8))
    }

    /// The fence upkeeps a commit or abort may carry out: `Raise` for one sent for `sender` (it
    /// may find no lock), `Prune` of every set of other transactions. A resolver's write
    /// (`sender` `None`: the lock's owner) always holds the lock, so never raises.
    pub fn upkeeps(sender: Option<Tx>) -> impl Iterator<Item = Upkeep> + Clone {
        let others = (1u8..1 << TXS)
            .filter(move |mask| sender.is_none_or(|t| mask & (1 << t.0) == 0))
            .map(Upkeep::Prune);
        let raise = sender.map(|_| Upkeep::Raise);
        [Upkeep::Plain].into_iter().chain(raise).chain(others)
    }

    /// Every step that exists in principle, in a fixed order (stateright replays paths by the
    /// index of the action). Whether it does anything in a state is [`Self::step`]'s business.
    pub fn all_actions() -> impl Iterator<Item = Action> {
        let per_tx = Self::txs().flat_map(|t| {
            [
                Action::Begin(t),
                Action::SendPrepares(t),
                Action::Decide(t, Decision::Commit),
                Action::Decide(t, Decision::Abort),
                Action::SendCompletes(t),
                Action::Finalize(t),
                Action::Crash(t),
                Action::Expire(t),
                Action::SweepAbort(t),
                Action::SweepFinalize(t),
                Action::Stage(t),
                Action::DeliverStage(t),
                Action::Answer(t),
                Action::RecoverDecide(t),
                Action::Replay(t),
                Action::Native(t),
                Action::ExpireRecord(t),
                Action::Abandon(t),
            ]
        });
        let per_tx_item = Self::txs().flat_map(|t| {
            Self::items().flat_map(move |i| {
                let upkeeps = Self::upkeeps(Some(t));
                std::iter::once(Action::DeliverPrepare(t, i))
                    .chain(
                        upkeeps
                            .clone()
                            .map(move |u| Action::DeliverComplete(t, i, u)),
                    )
                    .chain(upkeeps.map(move |u| Action::SweepComplete(t, i, u)))
                    .chain([
                        Action::Inquire(t, i, false, Upkeep::Plain),
                        Action::Inquire(t, i, true, Upkeep::Plain),
                        Action::Inquire(t, i, true, Upkeep::Raise),
                    ])
            })
        });
        let per_item = Self::items().flat_map(|i| {
            Self::txs()
                .flat_map(move |t| Self::upkeeps(None).map(move |u| Action::Resolve(i, t, u)))
                .chain(Self::txs().map(move |t| Action::Retire(i, t)))
                .chain([Action::Cool(i)])
        });
        per_tx.chain(per_tx_item).chain(per_item)
    }

    /// What `action` does to `state`: a pure function. An action that cannot happen in `state`
    /// returns it unchanged.
    pub fn step(&self, state: State<TXS, ITEMS>, action: Action) -> State<TXS, ITEMS> {
        let mut next = self.step_only(state, action);
        // What the inquiries found matters only while the record is STAGING (every decision
        // from them is a compare-and-swap on STAGING): forgotten after, so that states that
        // differ only in it are one.
        for tx in &mut next.txs {
            if tx.record != Some(TxStatus::Staging) {
                tx.inquiry = [None; ITEMS];
            }
        }
        next
    }

    /// The states one step away.
    pub fn successors(
        &self,
        state: &State<TXS, ITEMS>,
    ) -> impl Iterator<Item = State<TXS, ITEMS>> + '_ {
        let state = *state;
        Self::all_actions()
            .map(move |a| self.step(state, a))
            .filter(move |next| *next != state)
    }

    /// Whether no step is left.
    pub fn is_final(&self, state: &State<TXS, ITEMS>) -> bool {
        self.successors(state).next().is_none()
    }

    /// Where the sweeper alone takes `state`: every coordinator stops, every message in flight is
    /// lost, time passes every deadline, and the sweeper's and resolvers' steps run in rounds
    /// until none changes anything (bounded, for the buggy variants).
    pub fn sweep_alone(&self, state: &State<TXS, ITEMS>) -> State<TXS, ITEMS> {
        let mut s = *state;
        for tx in &mut s.txs {
            if tx.coordinator != Coordinator::Finished {
                tx.coordinator = Coordinator::Crashed;
            }
            tx.prepares_in_flight = false;
            tx.completes_in_flight = None;
        }
        let sweeper_steps = || {
            Self::txs()
                .flat_map(|t| {
                    [Action::Expire(t), Action::SweepAbort(t)]
                        .into_iter()
                        .chain(
                            Self::items().map(move |i| Action::Inquire(t, i, true, Upkeep::Plain)),
                        )
                        .chain([Action::RecoverDecide(t)])
                        .chain(
                            Self::items().map(move |i| Action::SweepComplete(t, i, Upkeep::Plain)),
                        )
                        .chain([Action::SweepFinalize(t)])
                })
                .chain(Self::items().flat_map(|i| {
                    Self::txs().flat_map(move |t| {
                        // A participant's commit or abort retires a former transaction's
                        // entry in its way first.
                        [Action::Resolve(i, t, Upkeep::Plain), Action::Retire(i, t)]
                    })
                }))
        };
        for _round in 0..(4 * (TXS + ITEMS) + 4) {
            let before = s;
            for a in sweeper_steps() {
                s = self.step(s, a);
            }
            if s == before {
                break;
            }
        }
        s
    }
}

// ---- properties -------------------------------------------------------------------------------

impl<const TXS: usize, const ITEMS: usize> Model for TwoPhaseCommit<TXS, ITEMS> {
    type State = State<TXS, ITEMS>;
    type Action = Action;

    fn init_states(&self) -> Vec<Self::State> {
        let mut state = State::with_items(self.initial, self.values);
        for item in &mut state.items {
            item.hot = self.hot_at_start;
        }
        vec![state]
    }

    fn actions(&self, _state: &Self::State, actions: &mut Vec<Self::Action>) {
        actions.extend(Self::all_actions());
    }

    fn next_state(&self, last_state: &Self::State, action: Self::Action) -> Option<Self::State> {
        let next = self.step(*last_state, action);
        (next != *last_state).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(ATOMICITY, atomicity),
            Property::always(APPLIED_AT_MOST_ONCE, applied_at_most_once),
            Property::always(EVERY_OPERATION_APPLIED_ONCE, every_operation_applied_once),
            Property::always(NO_COMMIT_WITHOUT_DECISION, no_commit_without_decision),
            Property::always(NO_VIOLATION_REPORTED, no_violation_reported),
            Property::always(
                NO_LOCK_OUTLIVES_ITS_TRANSACTION,
                no_lock_outlives_its_transaction,
            ),
            Property::always(BOUNDS_HOLD, bounds_hold),
            Property::always(LOCK_EXCLUDES_RESERVATIONS, lock_excludes_reservations),
            Property::always(ESCROW_FOLLOWS_RESERVATIONS, escrow_follows_reservations),
            Property::always(EVERY_TRANSACTION_ENDS, every_transaction_ends),
            Property::always(ANSWER_HONOURED, answer_honoured),
            Property::always(PREVENT_IS_FINAL, prevent_is_final),
            Property::always(SWEEPER_FINISHES, sweeper_finishes),
            Property::eventually(EVENTUALLY_ENDS, eventually_ends),
            Property::sometimes(CAN_COMMIT, can_commit),
            Property::sometimes(CAN_ABORT, can_abort),
            Property::sometimes(ALL_CAN_COMMIT, all_can_commit),
            Property::sometimes(
                COMMIT_FINISHED_WITHOUT_COORDINATOR,
                commit_finished_without_coordinator,
            ),
            Property::sometimes(LATE_PREPARE_MEETS_FENCE, late_prepare_meets_fence),
            Property::sometimes(
                LATE_PREPARE_REFUSED_BY_HORIZON,
                late_prepare_refused_by_horizon,
            ),
            Property::sometimes(
                COMMIT_OUTLIVES_ITS_FENCE_ENTRY,
                commit_outlives_its_fence_entry,
            ),
        ];
        properties.extend(self.configuration_examples());
        properties
    }
}

impl<const TXS: usize, const ITEMS: usize> TwoPhaseCommit<TXS, ITEMS> {
    /// Examples that only some configurations can show (stateright reports a `sometimes` with
    /// no example as a failure): creates, deletes, two reservations on one item, the staged
    /// commit.
    fn configuration_examples(&self) -> Vec<Property<Self>> {
        let mut examples = vec![];
        if self.has_op(Op::Put) {
            examples.push(Property::sometimes(
                PUT_CREATES_AN_ITEM,
                put_creates_an_item,
            ));
            examples.push(Property::sometimes(
                LATE_PUT_REFUSED_BY_TOMBSTONE,
                late_put_refused_by_tombstone,
            ));
        }
        if Self::items().any(|i| self.reserving(i) >= 2) {
            examples.push(Property::sometimes(
                RESERVATIONS_SHARE_AN_ITEM,
                reservations_share_an_item,
            ));
        }
        if self.staged {
            examples.push(Property::sometimes(
                ANSWERED_BEFORE_EXPLICIT,
                answered_before_explicit,
            ));
            examples.push(Property::sometimes(
                STAGING_PREVENTED_AND_ABORTED,
                staging_prevented_and_aborted,
            ));
        }
        if self.has_op(Op::Delete) {
            examples.push(Property::sometimes(
                DELETE_LEAVES_A_TOMBSTONE,
                delete_leaves_a_tombstone,
            ));
        }
        examples
    }

    /// How many transactions reserve `item` (a commuting operation under some name there).
    fn reserving(&self, item: Item) -> usize {
        Self::txs()
            .filter(|&t| Self::items().any(|n| self.at(t, n) == item && self.op(t, n).reserves()))
            .count()
    }
}
