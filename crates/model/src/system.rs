//! The stateright [`Model`]: which steps exist, what each does (a pure function from state to
//! state), and the named properties.
//!
//! A step that would change nothing is not a step ([`Model::next_state`] answers `None`), so a
//! state with no step left is a real end of a behaviour; the liveness properties rely on that.

use stateright::{Model, Property};
use twopc_core::item::FenceOutcome;
use twopc_core::message::Inquiry;
use twopc_core::rules::{
    self, AfterLostSwap, NativeStep, PrepareStep, Recovery, Resolution, Shape, StagedDecision,
};
use twopc_core::status::{Decision, TxStatus};

use crate::participant::{self, Upkeep, Variant};
use crate::state::{Applied, Clock, Coordinator, Item, ItemState, Op, State, Tx, covers};

/// Property: a transaction is never applied on one item and aborted on another, a transaction
/// whose record says `COMMITTED` has applied on every item, an abort-decided transaction has
/// applied nowhere, and once no step is left, every commit-decided transaction has applied on
/// every item. `docs/protocol.md`, invariant "Atomicity".
pub const ATOMICITY: &str = "atomicity";
/// Property: no item applies a transaction's operation more than once. `docs/protocol.md`, invariant
/// "Atomicity" ("applied exactly once") and "The fence".
pub const APPLIED_AT_MOST_ONCE: &str = "no operation applied twice";
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
    /// ([`rules::staged_decision`]): every item held → compare-and-swap `COMMITTING` (then it may
    /// answer "committed"); some item prevented, past the deadline → `ABORTING`.
    RecoverDecide(Tx),
    /// A client's retry of a transaction with an idempotency key (the same id), after its
    /// first attempt wrote the record. Correct: the replay writes its record first, the put is
    /// refused, and it follows the record it finds (a helper: [`Action::Inquire`] and
    /// [`Action::RecoverDecide`]), sending no prepare: so this step is none.
    /// [`Variant::FreshBeganReplay`]: it sends every prepare again, with a fresh `began`.
    Replay(Tx),
    /// Native transaction (`CommitMode::Auto`, configurations with `native`): before its
    /// coordinator did anything, the record's put (`COMMITTED`) and every item's write in one
    /// all-or-nothing step, each item's write admitted by [`rules::native_write`] and the
    /// operation's bound. Where the protocol holds an item, nothing happens (the transaction
    /// takes the protocol path: its `Begin` or `Stage` stays possible); where an item refuses,
    /// the record is put `ABORTED`.
    Native(Tx),
}

/// The protocol with `TXS` transactions over `ITEMS` items, every transaction touching every
/// item with the operation `ops` gives it there, every item starting in the shape `initial`
/// gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TwoPhaseCommit<const TXS: usize, const ITEMS: usize> {
    /// Which protocol runs.
    pub variant: Variant,
    /// `ops[t][i]`: what transaction `t` does to item `i`.
    pub ops: [[Op; ITEMS]; TXS],
    /// Each item's shape in the initial state (unlocked, empty fence, no horizon).
    pub initial: [Shape; ITEMS],
    /// Each item's number in the initial state ([`ItemState::value`]).
    pub values: [i8; ITEMS],
    /// Whether coordinators run the staged commit (record `STAGING` written with the
    /// prepares) instead of begin-then-prepare.
    pub staged: bool,
    /// Whether a transaction may first try to commit natively ([`Action::Native`]).
    pub native: bool,
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
        }
    }

    /// The same, with every transaction trying a native commit first ([`Action::Native`]).
    pub const fn native(self) -> Self {
        TwoPhaseCommit {
            native: true,
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

    /// What every transaction does to `item`.
    pub fn column(&self, item: Item) -> [Op; TXS] {
        self.ops.map(|row| row[item.ix()])
    }

    /// What `tx` does to `item`.
    pub fn op(&self, tx: Tx, item: Item) -> Op {
        self.ops[tx.ix()][item.ix()]
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

    fn step_only(&self, state: State<TXS, ITEMS>, action: Action) -> State<TXS, ITEMS> {
        match action {
            Action::Begin(t) if !self.staged => begin(state, t),
            Action::Begin(_) => state,
            Action::SendPrepares(t) => send_prepares(state, t),
            Action::Decide(t, d) => decide(state, t, d),
            Action::Stage(t) => self.stage(state, t),
            Action::DeliverStage(t) => deliver_stage(state, t),
            Action::Answer(t) => self.answer(state, t),
            Action::Inquire(t, i, prevent, u) => self.inquire(state, t, i, prevent, u),
            Action::RecoverDecide(t) => self.recover_decide(state, t),
            Action::Replay(t) => self.replay(state, t),
            Action::Native(t) => self.native_commit(state, t),
            Action::SendCompletes(t) => send_completes(state, t),
            Action::Finalize(t) => self.finalize(state, t),
            Action::Crash(t) => crash(state, t),
            Action::DeliverPrepare(t, i) => self.deliver_prepare(state, t, i),
            Action::DeliverComplete(t, i, u) => self.deliver_complete(state, t, i, u),
            Action::Expire(t) => expire(state, t),
            Action::Resolve(i, t, u) => self.resolve(state, i, t, u),
            Action::SweepAbort(t) => self.sweep_abort(state, t),
            Action::SweepComplete(t, i, u) => self.sweep_complete(state, t, i, u),
            Action::SweepFinalize(t) => self.sweep_finalize(state, t),
        }
    }

    /// Whether every item is finished for `tx` under `decision`.
    fn all_finished(&self, state: &State<TXS, ITEMS>, tx: Tx, decision: Decision) -> bool {
        let deadlines = state.deadlines_passed();
        Self::items().all(|i| {
            participant::finished(
                self.variant,
                *state.item(i),
                tx,
                self.op(tx, i),
                decision,
                &deadlines,
            )
        })
    }

    /// Runs commit or abort of `tx` on `item` and records an answer that is not acknowledged
    /// (a violation). An upkeep that does not apply makes it no step (the `Plain` one is the
    /// step).
    fn complete_on(
        &self,
        mut state: State<TXS, ITEMS>,
        tx: Tx,
        item: Item,
        decision: Decision,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        let deadlines = state.deadlines_passed();
        let found = *state.item(item);
        if !participant::upkeep_applies(self.variant, &found, tx, decision, upkeep, &deadlines) {
            return state;
        }
        let op = self.op(tx, item);
        let (after, reply) =
            participant::complete(self.variant, found, tx, op, decision, upkeep, &deadlines);
        *state.item_mut(item) = after;
        if !reply.acknowledged() {
            state.violation_reported = true;
        }
        state
    }

    /// Once every item is finished, the finalize swap; a lost one follows
    /// [`rules::after_lost_finalize`].
    fn finalize(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let Coordinator::Completing(d) = state.tx(t).coordinator else {
            return state;
        };
        if !self.all_finished(&state, t, d) {
            return state;
        }
        let tx = state.tx_mut(t);
        tx.coordinator = match swap(tx.record, TxStatus::deciding(d), TxStatus::finishing(d)) {
            Ok(status) => {
                tx.record = Some(status);
                Coordinator::Finished
            }
            Err(found) => match rules::after_lost_finalize(found, d) {
                // The sweeper finalized first: same outcome.
                AfterLostSwap::Follow(_) => Coordinator::Finished,
                // `Fatal` in `Coordinator::complete`: the coordinator stops.
                AfterLostSwap::Fatal => Coordinator::Crashed,
            },
        };
        state
    }

    fn deliver_prepare(&self, mut state: State<TXS, ITEMS>, t: Tx, i: Item) -> State<TXS, ITEMS> {
        if !state.tx(t).prepares_in_flight {
            return state; // never sent in time
        }
        let deadlines = state.deadlines_passed();
        let ops = self.column(i);
        let fresh = state.tx(t).replayed;
        let (after, step) =
            participant::prepare(self.variant, *state.item(i), t, &ops, &deadlines, fresh);
        *state.item_mut(i) = after;
        // A yes vote is the rule's `Lock`; any refusal is a no.
        if let (
            PrepareStep::Lock,
            Coordinator::Preparing { yes } | Coordinator::Staging { yes, .. },
        ) = (step, &mut state.tx_mut(t).coordinator)
        {
            yes[i.ix()] = true;
        }
        state
    }

    /// [`Action::Native`]: eligible by [`rules::native`] (every item a table reached direct;
    /// no delete), from an idle coordinator and no record; all or nothing.
    fn native_commit(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        if !self.native
            || state.tx(t).coordinator != Coordinator::Idle
            || state.tx(t).record.is_some()
        {
            return state;
        }
        let facts = Self::items().map(|i| rules::NativeFacts {
            table: true,
            direct: true,
            hot: false,
            deletes: self.op(t, i) == Op::Delete,
        });
        if rules::native(facts, 0).is_err() {
            return state;
        }
        let deadlines = state.deadlines_passed();
        let steps = Self::items().map(|i| {
            participant::native_write(self.variant, state.item(i), t, self.op(t, i), &deadlines)
        });
        let (mut apply, mut protocol) = (true, false);
        for step in steps {
            apply &= step == NativeStep::Apply;
            protocol |= step == NativeStep::Protocol;
        }
        if protocol {
            return state; // gives way: the protocol path is next
        }
        if apply {
            for i in Self::items() {
                *state.item_mut(i) = participant::native_apply(*state.item(i), t, self.op(t, i));
            }
        }
        let tx = state.tx_mut(t);
        tx.record = Some(if apply {
            TxStatus::Committed
        } else {
            TxStatus::Aborted
        });
        tx.coordinator = Coordinator::Finished;
        tx.answered_commit |= apply;
        tx.answered_abort |= !apply;
        state
    }

    /// [`Action::Replay`]: only [`Variant::FreshBeganReplay`]'s replay sends anything (every
    /// prepare again, deliverable from now on with a fresh `began`), and only once the record
    /// exists (before, the replay is the first attempt's twin: its put races the first one's).
    fn replay(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        if self.variant == Variant::FreshBeganReplay && tx.record.is_some() && !tx.replayed {
            tx.replayed = true;
            tx.prepares_in_flight = true;
        }
        state
    }

    fn deliver_complete(
        &self,
        state: State<TXS, ITEMS>,
        t: Tx,
        i: Item,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        match state.tx(t).completes_in_flight {
            Some(d) => self.complete_on(state, t, i, d, upkeep),
            None => state,
        }
    }

    /// A resolver settles `owner`'s lock or reservation on item `i` by [`rules::resolve`] from
    /// the owner's record, one write. Past the owner's deadline anyone may (a newcomer's
    /// prepare, or the sweeper walking the lock-expiry index); before it, only a newcomer whose
    /// prepare met the owner, and only if the owner already decided (`OwnerLive` otherwise): the
    /// model lets any other transaction's prepare in flight be that newcomer.
    fn resolve(
        &self,
        mut state: State<TXS, ITEMS>,
        i: Item,
        owner: Tx,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        if !state.item(i).held_by(owner) {
            return state;
        }
        let deadline_passed = state.tx(owner).deadline_passed();
        let newcomer = Self::txs().any(|u| u != owner && state.tx(u).prepares_in_flight);
        if !deadline_passed && !newcomer {
            return state;
        }
        match rules::resolve(state.tx(owner).record, deadline_passed) {
            // Undecided and live: the lock or reservation stands (a newcomer votes conflict).
            Resolution::OwnerLive => {}
            // ResolverAbortsStaging: abort the STAGING owner from this item's point of view.
            Resolution::Recover if self.variant == Variant::ResolverAbortsStaging => {
                state.tx_mut(owner).record = Some(TxStatus::Aborting);
            }
            // STAGING past its deadline: its recovery (`Inquire`, `RecoverDecide`) is the
            // recoverer's; the hold stands meanwhile.
            Resolution::Recover => {}
            // `create_aborted`; the lock goes by `AbortHere` next round.
            Resolution::RecordAborted => state.tx_mut(owner).record = Some(TxStatus::Aborted),
            // The compare-and-swap `PREPARING → ABORTING` (the read folded into the write).
            Resolution::DecideAbort => state.tx_mut(owner).record = Some(TxStatus::Aborting),
            Resolution::RollForward => {
                return self.complete_on(state, owner, i, Decision::Commit, upkeep);
            }
            Resolution::AbortHere => {
                return self.complete_on(state, owner, i, Decision::Abort, upkeep);
            }
            Resolution::DropStale => {
                *state.item_mut(i) =
                    participant::drop_stale_lock(self.variant, *state.item(i), owner);
            }
        }
        state
    }

    /// The sweeper's [`Recovery::Complete`] on one item.
    fn sweep_complete(
        &self,
        state: State<TXS, ITEMS>,
        t: Tx,
        i: Item,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        match overdue_recovery(&state, t) {
            Some(Recovery::Complete(d)) => self.complete_on(state, t, i, d, upkeep),
            _ => state,
        }
    }

    /// The sweeper's [`Recovery::Complete`], its finalize once every item is finished (the
    /// swap always wins: the record is decided and not terminal).
    fn sweep_finalize(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let Some(Recovery::Complete(d)) = overdue_recovery(&state, t) else {
            return state;
        };
        if self.all_finished(&state, t, d) {
            state.tx_mut(t).record = Some(TxStatus::finishing(d));
        }
        state
    }

    /// The sweeper's [`Recovery::DecideAbort`]: the swap `PREPARING → ABORTING` (which wins:
    /// the record is `PREPARING`); its completion is `SweepComplete`.
    /// [`Variant::StagingAbortsAtDeadline`] does the same to an overdue `STAGING` record.
    fn sweep_abort(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let from = match overdue_recovery(&state, t) {
            Some(Recovery::DecideAbort) => TxStatus::Preparing,
            Some(Recovery::Inquire) if self.variant == Variant::StagingAbortsAtDeadline => {
                TxStatus::Staging
            }
            _ => return state,
        };
        let tx = state.tx_mut(t);
        if let Ok(status) = swap(tx.record, from, TxStatus::Aborting) {
            tx.record = Some(status);
        }
        state
    }

    /// The staged coordinator's first round: the record put and every prepare, sent at once.
    fn stage(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        if !self.staged || tx.coordinator != Coordinator::Idle {
            return state;
        }
        tx.coordinator = Coordinator::Staging {
            yes: [false; ITEMS],
            acked: false,
            answered: false,
        };
        tx.staged = true;
        tx.prepares_in_flight = !tx.deadline_passed();
        state
    }

    /// The stager's early answer: "committed", from its acknowledged put and every yes vote
    /// ([`Variant::AnswerWithoutStageAck`]: without waiting for the put).
    fn answer(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        let Coordinator::Staging {
            yes,
            acked,
            answered: false,
        } = tx.coordinator
        else {
            return state;
        };
        let acked = acked || self.variant == Variant::AnswerWithoutStageAck;
        if acked && rules::decision(yes.into_iter()) == Decision::Commit {
            tx.coordinator = Coordinator::Staging {
                yes,
                acked: true,
                answered: true,
            };
            tx.answered_commit = true;
        }
        state
    }

    /// One inquiry ([`participant::inquire`]) about staged `t` on item `i`, its answer kept for
    /// [`Self::recover_decide`]. A prevent needs the deadline passed (recoverers only).
    fn inquire(
        &self,
        mut state: State<TXS, ITEMS>,
        t: Tx,
        i: Item,
        prevent: bool,
        upkeep: Upkeep,
    ) -> State<TXS, ITEMS> {
        let tx = state.tx(t);
        if tx.record != Some(TxStatus::Staging) || (prevent && !tx.deadline_passed()) {
            return state;
        }
        let deadlines = state.deadlines_passed();
        let found = *state.item(i);
        if !participant::inquiry_upkeep_applies(&found, t, upkeep, &deadlines) {
            return state;
        }
        let (after, answer) =
            participant::inquire(self.variant, found, t, prevent, upkeep, &deadlines);
        *state.item_mut(i) = after;
        let tx = state.tx_mut(t);
        // `Open` (a read-only inquiry found neither) decides nothing: as good as not asked.
        tx.inquiry[i.ix()] = (answer != Inquiry::Open).then_some(answer);
        if answer == Inquiry::Prevented {
            tx.prevented[i.ix()] = true;
        }
        state
    }

    /// A helper's or recoverer's decision on a `STAGING` record, by [`rules::staged_decision`]
    /// from the latest inquiries. Commit: the compare-and-swap, then the answer
    /// ([`Variant::HelperAnswersFromHolds`]: the answer first). Abort: only past the deadline.
    fn recover_decide(&self, mut state: State<TXS, ITEMS>, t: Tx) -> State<TXS, ITEMS> {
        let tx = state.tx_mut(t);
        if tx.record != Some(TxStatus::Staging) {
            return state;
        }
        match rules::staged_decision(tx.inquiry) {
            StagedDecision::Wait => {}
            StagedDecision::Commit
                if self.variant == Variant::HelperAnswersFromHolds && !tx.answered_commit =>
            {
                tx.answered_commit = true;
            }
            StagedDecision::Commit => {
                tx.record = Some(TxStatus::Committing);
                tx.answered_commit = true;
            }
            StagedDecision::Abort if tx.deadline_passed() => {
                tx.record = Some(TxStatus::Aborting);
            }
            StagedDecision::Abort => {}
        }
        state
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
                .chain(
                    Self::items().flat_map(|i| {
                        Self::txs().map(move |t| Action::Resolve(i, t, Upkeep::Plain))
                    }),
                )
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

/// Every transaction ended and no item is locked or reserved.
pub fn settled<const TXS: usize, const ITEMS: usize>(state: &State<TXS, ITEMS>) -> bool {
    state.txs.iter().all(|t| t.has_ended())
        && state
            .items
            .iter()
            .all(|i| i.lock.is_none() && !i.is_reserved())
}

/// What the sweeper does with a record ([`rules::recovery`]), if it picks it up: it reads only
/// overdue records (`TxLog::overdue`: written, past the deadline).
fn overdue_recovery<const TXS: usize, const ITEMS: usize>(
    state: &State<TXS, ITEMS>,
    t: Tx,
) -> Option<Recovery> {
    let tx = state.tx(t);
    match tx.record {
        Some(status) if tx.deadline_passed() => Some(rules::recovery(status, true)),
        _ => None,
    }
}

fn begin<const TXS: usize, const ITEMS: usize>(
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

fn send_prepares<const TXS: usize, const ITEMS: usize>(
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
fn decide<const TXS: usize, const ITEMS: usize>(
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
fn answer_as<const ITEMS: usize>(tx: &mut crate::state::TxState<ITEMS>, decision: Decision) {
    match decision {
        Decision::Commit => tx.answered_commit = true,
        Decision::Abort => tx.answered_abort = true,
    }
}

/// The record put lands if no record exists (`attribute_not_exists`); the stager, if alive and
/// still waiting, learns it is the stager. A put refused because a record exists (a resolver's
/// `ABORTED`, for a transaction whose locks expired before its put landed) makes the stager
/// follow that record.
fn deliver_stage<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
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

fn send_completes<const TXS: usize, const ITEMS: usize>(
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

fn crash<const TXS: usize, const ITEMS: usize>(
    mut state: State<TXS, ITEMS>,
    t: Tx,
) -> State<TXS, ITEMS> {
    let tx = state.tx_mut(t);
    if !matches!(tx.coordinator, Coordinator::Finished) {
        tx.coordinator = Coordinator::Crashed;
    }
    state
}

fn expire<const TXS: usize, const ITEMS: usize>(
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

// ---- properties -------------------------------------------------------------------------------

type M<const TXS: usize, const ITEMS: usize> = TwoPhaseCommit<TXS, ITEMS>;

fn atomicity<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    let mut owes_commit = false;
    for t in M::<TXS, ITEMS>::txs() {
        let applied = |i: &ItemState<TXS>| i.applied[t.ix()].any();
        let applied_any = state.items.iter().any(applied);
        let applied_all = state.items.iter().all(applied);
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

fn applied_at_most_once<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .items
        .iter()
        .all(|i| i.applied.iter().all(|a| *a != Applied::MoreThanOnce))
}

fn no_commit_without_decision<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().all(|t| {
        let recorded_commit =
            state.tx(t).record.and_then(TxStatus::decision) == Some(Decision::Commit);
        recorded_commit || state.items.iter().all(|i| !i.applied[t.ix()].any())
    })
}

fn no_violation_reported<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    !state.violation_reported
}

fn every_transaction_ends<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    settled(state) || !model.is_final(state)
}

fn sweeper_finishes<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    settled(&model.sweep_alone(state))
}

fn eventually_ends<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    settled(state)
}

fn committed_everywhere<const TXS: usize, const ITEMS: usize>(
    state: &State<TXS, ITEMS>,
    t: Tx,
) -> bool {
    state.tx(t).record == Some(TxStatus::Committed)
        && state.items.iter().all(|i| i.applied[t.ix()].any())
}

fn can_commit<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| committed_everywhere(state, t))
}

fn all_can_commit<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().all(|t| committed_everywhere(state, t))
}

fn can_abort<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .any(|t| t.record == Some(TxStatus::Aborted))
}

fn commit_finished_without_coordinator<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs()
        .any(|t| state.tx(t).coordinator == Coordinator::Crashed && committed_everywhere(state, t))
}

fn late_prepare_meets_fence<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| {
        state.tx(t).prepares_in_flight && state.items.iter().any(|i| i.fence[t.ix()].is_some())
    })
}

fn late_prepare_refused_by_horizon<const TXS: usize, const ITEMS: usize>(
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

fn commit_outlives_its_fence_entry<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    model.variant.fences()
        && M::<TXS, ITEMS>::txs().any(|t| {
            state.tx(t).record == Some(TxStatus::Committing)
                && state
                    .items
                    .iter()
                    .any(|i| i.applied[t.ix()].any() && i.fence[t.ix()].is_none())
        })
}

/// Whether some item of shape `shape` has applied some transaction's `op`.
fn applied_op<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
    op: Op,
    shape: Shape,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| {
        M::<TXS, ITEMS>::items().any(|i| {
            model.op(t, i) == op
                && state.item(i).applied[t.ix()].any()
                && state.item(i).shape == shape
        })
    })
}

fn put_creates_an_item<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    applied_op(model, state, Op::Put, Shape::Real)
}

fn delete_leaves_a_tombstone<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    applied_op(model, state, Op::Delete, Shape::Tombstone)
}

fn late_put_refused_by_tombstone<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().any(|t| {
        let tx = state.tx(t);
        tx.prepares_in_flight
            && tx.record.and_then(TxStatus::decision).is_some()
            && M::<TXS, ITEMS>::items().any(|i| {
                let item = state.item(i);
                model.op(t, i) == Op::Put
                    && item.shape == Shape::Tombstone
                    && (item.fence[t.ix()].is_some() || covers(item.horizon, t))
            })
    })
}

fn no_lock_outlives_its_transaction<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.items.iter().all(|i| {
        M::<TXS, ITEMS>::txs()
            .all(|t| !i.held_by(t) || !state.tx(t).record.is_some_and(TxStatus::is_terminal))
    })
}

fn bounds_hold<const TXS: usize, const ITEMS: usize>(
    model: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::items().all(|i| {
        let floor = model.column(i).iter().filter_map(|op| op.floor()).min();
        floor.is_none_or(|f| state.item(i).value >= f)
    })
}

fn lock_excludes_reservations<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .items
        .iter()
        .all(|i| i.lock.is_none() || !i.is_reserved())
}

fn reservations_share_an_item<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .items
        .iter()
        .any(|i| i.reserved.iter().filter(|r| **r).count() >= 2)
}

fn answer_honoured<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state.txs.iter().all(|tx| {
        let recorded = tx.record.and_then(TxStatus::decision);
        !(tx.answered_commit && (tx.answered_abort || recorded == Some(Decision::Abort)))
            && !(tx.answered_abort && recorded == Some(Decision::Commit))
    })
}

fn prevent_is_final<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    M::<TXS, ITEMS>::txs().all(|t| {
        M::<TXS, ITEMS>::items()
            .all(|i| !state.tx(t).prevented[i.ix()] || !state.item(i).held_by(t))
    })
}

fn answered_before_explicit<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .any(|tx| tx.answered_commit && tx.record == Some(TxStatus::Staging))
}

fn staging_prevented_and_aborted<const TXS: usize, const ITEMS: usize>(
    _: &M<TXS, ITEMS>,
    state: &State<TXS, ITEMS>,
) -> bool {
    state
        .txs
        .iter()
        .any(|tx| tx.prevented.iter().any(|p| *p) && tx.record == Some(TxStatus::Aborted))
}

impl<const TXS: usize, const ITEMS: usize> Model for TwoPhaseCommit<TXS, ITEMS> {
    type State = State<TXS, ITEMS>;
    type Action = Action;

    fn init_states(&self) -> Vec<Self::State> {
        vec![State::with_items(self.initial, self.values)]
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
            Property::always(NO_COMMIT_WITHOUT_DECISION, no_commit_without_decision),
            Property::always(NO_VIOLATION_REPORTED, no_violation_reported),
            Property::always(
                NO_LOCK_OUTLIVES_ITS_TRANSACTION,
                no_lock_outlives_its_transaction,
            ),
            Property::always(BOUNDS_HOLD, bounds_hold),
            Property::always(LOCK_EXCLUDES_RESERVATIONS, lock_excludes_reservations),
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
        // Examples that only a configuration with creating or deleting operations can show
        // (stateright reports a `sometimes` with no example as a failure).
        if self.has_op(Op::Put) {
            properties.push(Property::sometimes(
                PUT_CREATES_AN_ITEM,
                put_creates_an_item,
            ));
            properties.push(Property::sometimes(
                LATE_PUT_REFUSED_BY_TOMBSTONE,
                late_put_refused_by_tombstone,
            ));
        }
        if M::<TXS, ITEMS>::items()
            .any(|i| self.column(i).iter().filter(|op| op.reserves()).count() >= 2)
        {
            properties.push(Property::sometimes(
                RESERVATIONS_SHARE_AN_ITEM,
                reservations_share_an_item,
            ));
        }
        if self.staged {
            properties.push(Property::sometimes(
                ANSWERED_BEFORE_EXPLICIT,
                answered_before_explicit,
            ));
            properties.push(Property::sometimes(
                STAGING_PREVENTED_AND_ABORTED,
                staging_prevented_and_aborted,
            ));
        }
        if self.has_op(Op::Delete) {
            properties.push(Property::sometimes(
                DELETE_LEAVES_A_TOMBSTONE,
                delete_leaves_a_tombstone,
            ));
        }
        properties
    }
}
