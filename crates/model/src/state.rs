//! The model's state: small `Copy` enums and fixed-size arrays, so a state hashes fast and the
//! checker stores it cheaply.
//!
//! The protocol's own enums are `crates/core`'s: a record's status is a [`TxStatus`], a
//! decision a [`Decision`], a fence entry a [`FenceOutcome`], an item's shape a [`Shape`]. The
//! types here are the model's abstractions of the rest (each names what it stands for in
//! `crates/core`), keeping only what the rules read: no keys, no attribute values, no
//! timestamps; of an operation only its kind ([`Op`]); transactions and the horizon as indices
//! ordered like `began`.

use twopc_core::item::FenceOutcome;
use twopc_core::message::Inquiry;
use twopc_core::rules::{Holder, Others, Seen, Shape};
use twopc_core::status::{Decision, TxStatus};

/// A transaction, by index (`0..TXS`). Every transaction touches every item, with the operation
/// the model's configuration gives it there ([`Op`]); one may name one item twice
/// ([`crate::system::Twice`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tx(pub u8);

/// A participant item, by index (`0..ITEMS`); also a transaction's name for the item of its
/// index (its request's spelling of the key), which is that item but for
/// [`crate::system::Twice`]'s second name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item(pub u8);

impl Tx {
    /// The index, for arrays.
    pub fn ix(self) -> usize {
        usize::from(self.0)
    }
}

impl Item {
    /// The index, for arrays.
    pub fn ix(self) -> usize {
        usize::from(self.0)
    }
}

/// The kind of operation a transaction applies to an item (`twopc_core::op::Operation`, its
/// content reduced to what the participant's decisions read: whether it creates the item
/// (`Operation::creates`, a `put`) or removes it (`delete`), whether it commutes
/// (`Operation::mode`), and, on the one number the model tracks ([`ItemState::value`]), its
/// change and its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Changes an existing item (`set`, `remove`, ...) but not its number: needs a real item;
    /// exclusive.
    Update,
    /// Creates the item (`put`): needs it absent, a tombstone, or already our placeholder.
    Put,
    /// Deletes the item (`delete`): needs a real item; committed, leaves a tombstone.
    Delete,
    /// `add -1` with `require gte 1` and a `set` beside it: exclusive, its bound checked on the
    /// committed value at prepare (the lock keeps it true until commit).
    Withdraw,
    /// `add -1` with `require gte 1`: commutes, so it reserves (its floor: 0).
    Debit,
    /// `add +1`, no bound: commutes, so it reserves.
    Credit,
}

impl Op {
    /// Whether the operation creates its item (`Operation::creates`).
    pub fn creates(self) -> bool {
        self == Op::Put
    }

    /// Whether it reserves instead of locking (`Operation::mode` is `Mode::Reserved`).
    pub fn reserves(self) -> bool {
        matches!(self, Op::Debit | Op::Credit)
    }

    /// Its change to the number.
    pub fn delta(self) -> i8 {
        match self {
            Op::Withdraw | Op::Debit => -1,
            Op::Credit => 1,
            Op::Update | Op::Put | Op::Delete => 0,
        }
    }

    /// Its lower bound on the number (`require gte`), if any.
    pub fn lower_bound(self) -> Option<i8> {
        matches!(self, Op::Withdraw | Op::Debit).then_some(1)
    }

    /// The floor its reservation keeps the number above (`Escrowed::floor`: `v + min(0, d)`).
    pub fn floor(self) -> Option<i8> {
        self.lower_bound().map(|v| v + self.delta().min(0))
    }
}

/// How many times an item applied a transaction's operation, saturating at "more than once"
/// (which is already a violation) so the state space stays finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Applied {
    /// Not applied.
    Never,
    /// Applied exactly once.
    Once,
    /// Applied twice or more.
    MoreThanOnce,
}

impl Applied {
    /// One more application.
    pub fn bump(self) -> Applied {
        match self {
            Applied::Never => Applied::Once,
            Applied::Once | Applied::MoreThanOnce => Applied::MoreThanOnce,
        }
    }

    /// Whether it was applied at all.
    pub fn any(self) -> bool {
        self != Applied::Never
    }
}

/// An item's fence horizon (`txFenceHorizon`): the latest-begun transaction it covers, `None`
/// (the real code's 0) below every transaction. Transactions are ordered by index as by their
/// `began`: `T0` began before `T1`, and so on, so `Option<Tx>`'s order (`None` first) is the
/// horizon's order.
pub type Horizon = Option<Tx>;

/// Whether `horizon` covers `tx` (`tx.began <= horizon`): no prepare of `tx` may lock the item.
pub fn covers(horizon: Horizon, tx: Tx) -> bool {
    horizon.is_some_and(|h| tx <= h)
}

/// One participant item (`twopc_core::item::ItemState`, protocol attributes only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ItemState<const TXS: usize> {
    /// The transaction holding the lock. Its `expiresAt` is the holder's deadline, so whether the
    /// lock expired is [`TxState::deadline_passed`] of the holder.
    pub lock: Option<Tx>,
    /// The fence: one entry per transaction at most. Either outcome may be pruned at any time by
    /// the lock holder's commit or abort, which raises the horizon over it (see `docs/model-check.md`,
    /// "The fence horizon").
    pub fence: [Option<FenceOutcome>; TXS],
    /// The fence horizon: every transaction whose entry was removed is covered by it, and a
    /// prepare of a covered transaction is refused. Never lowered in the correct protocol.
    pub horizon: Horizon,
    /// The horizon as the holder's prepare read it when it took the lock, from which the holder
    /// computes the horizon its pruning release writes. Kept only by
    /// [`crate::participant::Variant::StaleHorizon`] (the one variant whose release writes that
    /// value unconditionally); always `None` otherwise, so it costs the others no states.
    pub horizon_at_lock: Horizon,
    /// Absent, real, placeholder or tombstone. Stays [`Shape::Real`] in a configuration where
    /// every operation is an [`Op::Update`] of an existing item.
    pub shape: Shape,
    /// The one business number the model tracks (a balance): every commit of a [`Op::Withdraw`],
    /// [`Op::Debit`] or [`Op::Credit`] adds its change. Constant where no operation changes it.
    pub value: i8,
    /// The transactions holding a reservation (`txRes:<txId>`). The extremes and the floor the
    /// real item stores (`txLo`, `txHi`, `txFl`) are functions of these and of the
    /// configuration's operations (`participant::escrow_seen`).
    pub reserved: [bool; TXS],
    /// Transactions whose exclusive prepare met live reservations and paused new ones
    /// (`txPause`). A pause lasts until its transaction's deadline at the latest
    /// (`Participant::prepare` writes `min(now + pause, deadline)`); the model keeps it exactly
    /// that long, and a later pause by the same transaction changes nothing.
    pub paused_by: [bool; TXS],
    /// For each transaction holding the item (by lock or reservation), the name (its request's
    /// spelling of the key, [`Item`] as a name) whose operation its hold carries: the
    /// operation the lock stores (`Lock::op`), which a resolver rolling it forward applies.
    /// `None` where the transaction holds nothing. Where every transaction names each item
    /// once it is always that item, so it costs no states; it tells the two operations apart
    /// where one transaction names an item twice ([`crate::system::Twice`]).
    pub held_for: [Option<Item>; TXS],
    /// The escrow's low extreme as the item stores it (`txLo`), less the value: what the
    /// standing reservations' debits could take. Moved by each reservation's own change as it
    /// is taken and released, never recomputed (the code stores it so), so a release that
    /// gives back another change than its hold took leaves a phantom here.
    pub escrow: i8,
    /// For each transaction holding a reservation, the debit its hold took (its operation's
    /// change if negative, else 0): what its release gives back.
    pub held_debit: [i8; TXS],
    /// The item's heat mark is live (`txHot`, [`twopc_core::rules::heat`]): native writes give
    /// way on it. Set by a prepare that carries a mark; cleared by time (`Cool`). Only in
    /// configurations with heat; always false otherwise.
    pub hot: bool,
    /// A mark on the item ended once already: time ends a mark once per item in the model, so
    /// that a duplicate prepare marking it again cannot cycle with the cooling (any later mark
    /// stands; what one cooling lets a native write do, the model has seen).
    pub cooled: bool,
}

impl<const TXS: usize> ItemState<TXS> {
    /// An unlocked real item with an empty fence.
    pub fn new() -> Self {
        Self::with_shape(Shape::Real)
    }

    /// An item of shape `shape`, unlocked, with an empty fence and no horizon (a
    /// [`Shape::Placeholder`] is always locked: not a starting shape).
    pub fn with_shape(shape: Shape) -> Self {
        debug_assert!(
            shape != Shape::Placeholder,
            "a placeholder is always locked"
        );
        ItemState {
            lock: None,
            fence: [None; TXS],
            horizon: None,
            horizon_at_lock: None,
            shape,
            value: 0,
            reserved: [false; TXS],
            paused_by: [false; TXS],
            held_for: [None; TXS],
            escrow: 0,
            held_debit: [0; TXS],
            hot: false,
            cooled: false,
        }
    }
}

/// What a step reads beside the item: whose deadline passed, and which transactions share an
/// id ([`crate::system::Reuse`]: an idempotency key used again after its record expired).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Env<const TXS: usize> {
    /// `deadline_passed[u]`: whether transaction `u`'s deadline, which is its holds'
    /// `expiresAt`, has passed.
    pub deadline_passed: [bool; TXS],
    /// `twin[u]`: the other transaction under `u`'s id, if any.
    pub twin: [Option<Tx>; TXS],
    /// Whether holds and entries are told apart by id alone, a twin's read as the
    /// transaction's own ([`crate::participant::Variant::ReuseMatchesId`]); else by id and
    /// `began`, which the transactions' indices are.
    pub by_id: bool,
    /// `ahead[u]`: whether transaction `u` began further ahead of the participants' clocks than
    /// the margin (`rules::too_far_ahead`). The model has no clock values: `false` in every
    /// configuration it checks, set only by the tests of the steps that read it.
    pub ahead: [bool; TXS],
}

impl<const TXS: usize> Env<TXS> {
    /// No transaction shares an id; `deadline_passed` as given.
    pub fn new(deadline_passed: [bool; TXS]) -> Self {
        Env {
            deadline_passed,
            twin: [None; TXS],
            by_id: false,
            ahead: [false; TXS],
        }
    }

    /// `tx`'s twin, if it has one and the step reads the twin's holds and entries as its own.
    pub fn same_as(&self, tx: Tx) -> Option<Tx> {
        self.twin[tx.ix()].filter(|_| self.by_id)
    }

    /// `tx`'s twin, if it has one and the step tells it apart (a former transaction).
    pub fn former(&self, tx: Tx) -> Option<Tx> {
        self.twin[tx.ix()].filter(|_| !self.by_id)
    }
}

impl<const TXS: usize> ItemState<TXS> {
    /// The item as `tx`'s step finds it: what the rules read of it (`rules::Seen::of` in
    /// `crates/core`). A twin's hold or entry is the transaction's own by id alone
    /// ([`Env::by_id`]), else a former transaction's (`former_entry`, `former_reservation`).
    pub fn seen_by(&self, tx: Tx, env: &Env<TXS>) -> Seen {
        let mine = |u: usize| u == tx.ix() || env.same_as(tx).is_some_and(|w| w.ix() == u);
        let former = env.former(tx);
        Seen {
            shape: self.shape,
            holder: match self.lock {
                None => Holder::Nobody,
                Some(owner) if mine(owner.ix()) => Holder::Me,
                Some(owner) => Holder::Other {
                    expired: env.deadline_passed[owner.ix()],
                },
            },
            entry: (0..TXS).filter(|&u| mine(u)).find_map(|u| self.fence[u]),
            covered: covers(self.horizon, tx),
            reserved_by_me: (0..TXS).any(|u| mine(u) && self.reserved[u]),
            reserved_by_others: {
                let others = (0..TXS).filter(|&u| !mine(u) && self.reserved[u]);
                let (mut any, mut expired) = (false, false);
                for u in others {
                    any = true;
                    expired |= env.deadline_passed[u];
                }
                match (any, expired) {
                    (false, _) => Others::None,
                    (true, false) => Others::Live,
                    (true, true) => Others::Expired,
                }
            },
            paused: (0..TXS).any(|u| self.paused_by[u] && !env.deadline_passed[u]),
            // A transaction's prepares here all carry its one operation on the item.
            other_op: false,
            former_entry: former.is_some_and(|w| self.fence[w.ix()].is_some()),
            former_reservation: former.is_some_and(|w| self.reserved[w.ix()]),
            hot: self.hot,
        }
    }

    /// Whether some transaction holds a reservation.
    pub fn is_reserved(&self) -> bool {
        self.reserved.iter().any(|r| *r)
    }

    /// Whether `tx` holds the item, by lock or reservation.
    pub fn held_by(&self, tx: Tx) -> bool {
        self.lock == Some(tx) || self.reserved[tx.ix()]
    }
}

impl<const TXS: usize> Default for ItemState<TXS> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a transaction's coordinator is in `Coordinator::submit` (its program counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coordinator<const ITEMS: usize> {
    /// Not started.
    Idle,
    /// The record is written (`PREPARING`); no prepare sent yet.
    Begun,
    /// Prepares are in flight; `yes[i]` says item `i` answered yes. Missing answers are a no once
    /// the coordinator stops waiting (a timeout is a no).
    Preparing {
        /// Yes votes received, per item.
        yes: [bool; ITEMS],
    },
    /// Staged commit: the record put (`STAGING`) and the prepares are in flight together.
    Staging {
        /// Yes votes received, per item.
        yes: [bool; ITEMS],
        /// The record put was acknowledged: this coordinator is the stager.
        acked: bool,
        /// It answered the client "committed" (from its acknowledged put and every yes vote);
        /// from here on it only makes the commit explicit.
        answered: bool,
    },
    /// The decision is recorded (by us, or we lost the swap and follow the record); commit or
    /// abort messages not sent yet.
    Decided(Decision),
    /// Commit or abort messages are in flight; waiting until every item acknowledged, then
    /// finalize.
    Completing(Decision),
    /// Returned: finalized, or found the record already terminal.
    Finished,
    /// Stopped dead at some point (crash, timeout of the Lambda, error). Nothing it did is undone
    /// and nothing more happens on its behalf; the sweeper and resolvers finish the transaction
    /// from the record alone.
    Crashed,
}

/// Time, as far as one transaction can tell: the model has no clock values, only the one mark
/// the protocol's decisions read. (The fence margin, `ParticipantConfig::fence_margin_ms`, is
/// not a mark: it only decides which entries the real code prunes first, and the model prunes
/// any entry at any time.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Clock {
    /// Before the deadline: the locks are live, the record is not overdue.
    BeforeDeadline,
    /// Past the deadline: the locks expired (a newcomer may resolve the owner), the record is
    /// overdue (the sweeper picks it up), a prepare arriving now is refused by the participant's
    /// deadline check — but a prepare that passed the check earlier may still land, at any
    /// later time.
    PastDeadline,
}

/// Everything about one transaction that is not on the items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxState<const ITEMS: usize> {
    /// The transaction record's status (`None`: not written).
    pub record: Option<TxStatus>,
    /// Where time stands relative to the transaction's deadline. Moved on by the
    /// nondeterministic `Expire` step; never back.
    pub clock: Clock,
    /// The coordinator's program counter.
    pub coordinator: Coordinator<ITEMS>,
    /// Prepare messages were sent before the deadline (so they pass the participant's deadline
    /// check). A sent message stays deliverable forever: it may land late, after its transaction
    /// was decided or finished, and more than once (transport retries, SDK retries, a Lambda
    /// invocation running late).
    pub prepares_in_flight: bool,
    /// The commit or abort messages were sent, carrying this decision. Deliverable forever, like
    /// prepares.
    pub completes_in_flight: Option<Decision>,
    /// Staged commit: the record put was sent (with the prepares). It may land late, or never;
    /// it lands only on an absent record (`attribute_not_exists`).
    pub staged: bool,
    /// What each participant answered the latest inquiry about this transaction (a helper's or
    /// a recoverer's; `None`: not asked yet).
    pub inquiry: [Option<Inquiry>; ITEMS],
    /// Ghost: an inquiry prevented the transaction on the item (or found it prevented).
    pub prevented: [bool; ITEMS],
    /// Ghost: some coordinator answered the client "committed".
    pub answered_commit: bool,
    /// Ghost: some coordinator answered the client "aborted".
    pub answered_abort: bool,
    /// [`crate::participant::Variant::FreshBeganReplay`] only (always false otherwise): a replay
    /// sent the prepares again, with a fresh `began`.
    pub replayed: bool,
    /// The record was removed by its time-to-live (`expireAt`, 7 days after it ended), so
    /// that its id may begin again ([`crate::system::Reuse`]); `record` keeps, as a ghost,
    /// the status it ended with. Always false but in a configuration with a reuse.
    pub expired: bool,
    /// Ghost: applications of the operation of each of its names (the business effect,
    /// `txVersion`). An observer's record, not an attribute: it survives the item's removal
    /// ([`crate::participant::Variant::DeleteRemoves`]), so a second application after a
    /// removal and re-creation is still counted; and it is kept per name, so that where one
    /// transaction names an item twice each operation is counted on its own.
    pub applied: [Applied; ITEMS],
    /// The heat marks its prepares write, per name: its native attempt gave way there because
    /// the item was contended ([`twopc_core::rules::Heat::mark`]). Only in configurations with
    /// heat.
    pub marks: [bool; ITEMS],
}

impl<const ITEMS: usize> TxState<ITEMS> {
    /// A transaction whose coordinator has not started.
    pub fn new() -> Self {
        TxState {
            record: None,
            clock: Clock::BeforeDeadline,
            coordinator: Coordinator::Idle,
            prepares_in_flight: false,
            completes_in_flight: None,
            staged: false,
            inquiry: [None; ITEMS],
            prevented: [false; ITEMS],
            answered_commit: false,
            answered_abort: false,
            replayed: false,
            expired: false,
            applied: [Applied::Never; ITEMS],
            marks: [false; ITEMS],
        }
    }

    /// Whether time has passed the transaction's deadline, which is also its locks' `expiresAt`.
    pub fn deadline_passed(&self) -> bool {
        self.clock != Clock::BeforeDeadline
    }

    /// Whether the transaction has ended: its record is terminal, or it never began and never
    /// will (its coordinator crashed before writing the record).
    pub fn has_ended(&self) -> bool {
        match self.record {
            Some(status) => status.is_terminal(),
            None => self.coordinator == Coordinator::Crashed,
        }
    }
}

impl<const ITEMS: usize> Default for TxState<ITEMS> {
    fn default() -> Self {
        Self::new()
    }
}

/// The whole system: transactions (records, coordinators, messages, clock) and items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State<const TXS: usize, const ITEMS: usize> {
    /// Per transaction.
    pub txs: [TxState<ITEMS>; TXS],
    /// Per item.
    pub items: [ItemState<TXS>; ITEMS],
    /// A participant answered a commit or abort with a protocol violation (docs/protocol.md, "Commit and abort": "a commit
    /// that finds neither its lock nor its fence entry ... report it loudly"). Sticky.
    pub violation_reported: bool,
}

impl<const TXS: usize, const ITEMS: usize> State<TXS, ITEMS> {
    /// Nothing begun, every item real and free.
    pub fn new() -> Self {
        Self::with_shapes([Shape::Real; ITEMS])
    }

    /// Nothing begun, every item free and of the given shape.
    pub fn with_shapes(shapes: [Shape; ITEMS]) -> Self {
        State {
            txs: [TxState::new(); TXS],
            items: shapes.map(ItemState::with_shape),
            violation_reported: false,
        }
    }

    /// Nothing begun, every item free, of the given shape and holding the given number.
    pub fn with_items(shapes: [Shape; ITEMS], values: [i8; ITEMS]) -> Self {
        let mut state = Self::with_shapes(shapes);
        for (item, value) in state.items.iter_mut().zip(values) {
            item.value = value;
        }
        state
    }

    /// The transaction's state.
    pub fn tx(&self, tx: Tx) -> &TxState<ITEMS> {
        &self.txs[tx.ix()]
    }

    /// The transaction's state, to change.
    pub fn tx_mut(&mut self, tx: Tx) -> &mut TxState<ITEMS> {
        &mut self.txs[tx.ix()]
    }

    /// The item's state.
    pub fn item(&self, item: Item) -> &ItemState<TXS> {
        &self.items[item.ix()]
    }

    /// The item's state, to change.
    pub fn item_mut(&mut self, item: Item) -> &mut ItemState<TXS> {
        &mut self.items[item.ix()]
    }

    /// Which transactions' deadlines have passed.
    pub fn deadlines_passed(&self) -> [bool; TXS] {
        self.txs.map(|t| t.deadline_passed())
    }

    /// What a step reads beside an item when no transaction shares an id.
    pub fn env(&self) -> Env<TXS> {
        Env::new(self.deadlines_passed())
    }
}

impl<const TXS: usize, const ITEMS: usize> Default for State<TXS, ITEMS> {
    fn default() -> Self {
        Self::new()
    }
}
