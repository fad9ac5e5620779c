//! Which protocol the model runs ([`Variant`]): the shipped one, or one with a known mistake put
//! back in (or a proposed change), each overriding one rule or one write's effect, so that the
//! checker shows the property a mistake breaks.

/// Which protocol the model runs: the real one, one with a known mistake put back in, or one
/// with a proposed change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The protocol of `docs/protocol.md` as `crates/core` implements it, with the fence horizon: the
    /// rules of `twopc_core::rules`, unchanged.
    Correct,
    /// A prepare that meets an expired lock overwrites it (a blind conditional write on
    /// `expiresAt < now`) instead of resolving the owner. `docs/protocol.md`, "The lock rule": this loses
    /// a decided transaction's write. Override of [`rules::prepare`](twopc_core::rules::prepare)'s answer: `ResolveOwner`
    /// on a real item, for a non-creating operation, becomes `Lock` (see [`prepare`](super::prepare)).
    BlindTakeover,
    /// No fence: commit and abort write no entry, prepare checks none, and a commit or abort that
    /// finds its lock gone assumes it was already done (the fault "any failed commit condition
    /// means already committed" of docs/protocol.md, "The pattern it comes from"). Only the
    /// deadline check stands between a late prepare and the item. Overrides: [`rules::prepare`](twopc_core::rules::prepare)
    /// is given no entry and no coverage; every answer of [`rules::commit`](twopc_core::rules::commit) without the lock, and
    /// [`rules::abort`](twopc_core::rules::abort)'s `FenceOut`, become "already done"; the holder's release writes no
    /// entry (see [`prepare`](super::prepare), [`commit`](super::commit), [`abort`](super::abort)).
    NoFence,
    /// Fence entries are pruned at any time (and the horizon kept), but prepare does not check
    /// the horizon: pruning then relies on no prepare landing late, which nothing bounds.
    /// Override: [`rules::prepare`](twopc_core::rules::prepare) is given no coverage (commit and abort still read it).
    NoHorizon,
    /// The lock holder's pruning release writes the horizon it computed from the fence its
    /// prepare read (the horizon then, raised over the entries it removes) *unconditionally*,
    /// instead of only if the item's horizon is not above it (`release_clauses` in
    /// `crates/dynamo`: `horizon <= :h`, else the participant releases without pruning). A
    /// lock-free abort that raised the horizon meanwhile is undone. Overrides only an effect:
    /// the prepare that takes the lock records the horizon it read, and the pruning release
    /// writes the horizon from it (see `release`).
    StaleHorizon,
    /// The design before tombstones: a committed delete removes the item entirely (its fence and
    /// horizon with it), and an aborted create (or a dropped stale lock on a placeholder)
    /// deletes its placeholder. A retried delete commit that finds no item answers "already
    /// done" (the commit rule's answer for a delete on an absent item). Overrides only an
    /// effect: burying removes the item (see `bury`).
    DeleteRemoves,
    /// Not a mistake but a proposed change: a lock-free abort that finds no item writes a
    /// tombstone carrying its `aborted` entry (`fence_aborted` creating the item,
    /// `attribute_not_exists(key)`), instead of answering "already done" with nothing written.
    /// Closes the orphan lock the correct protocol leaves when the item is created after the
    /// abort and the aborted transaction's prepare lands late (see `docs/model-check.md`). Override of
    /// [`rules::abort`](twopc_core::rules::abort)'s answer: "already done" on an absent item becomes that write (see
    /// [`abort`](super::abort)).
    AbortBuriesAbsent,
    /// A reservation's bound is checked against the committed value instead of the lowest value
    /// the reservations in flight could leave (`rules::escrow` given `value_vs_lower` for
    /// `lowest_vs_lower`): two debits that each fit the balance, but not together, both reserve
    /// and both commit. Override of the facts given to the rule (see [`escrow_seen`](super::escrow_seen)).
    CommittedBound,
    /// An exclusive prepare takes the lock while reservations stand (no `txResN = 0` in its
    /// condition): its bound, checked on the committed value, ignores what the reservations
    /// will take. Override of [`rules::prepare`](twopc_core::rules::prepare)'s answer: `Reserved` becomes `Lock` (see
    /// [`prepare`](super::prepare)).
    LockIgnoresReservations,
    /// Staged commit, broken: recovery treats an overdue `STAGING` record like a `PREPARING`
    /// one and aborts it for its deadline alone (`rules::recovery` answering `DecideAbort`),
    /// although its stager may have answered "committed" from every participant holding it.
    StagingAbortsAtDeadline,
    /// Staged commit, broken: the lock rule aborts a `STAGING` owner past its deadline from the
    /// one item it stands on (`rules::resolve` answering `DecideAbort` for `Recover`).
    ResolverAbortsStaging,
    /// Staged commit, broken: an inquiry that finds no item answers "prevented" without writing
    /// the tombstone (`rules::inquire`'s `Bury` read as nothing to do): a creating prepare of
    /// the transaction can still land there afterwards.
    PreventSkipsAbsent,
    /// Staged commit, broken: the stager answers "committed" from every yes vote before its
    /// record put is acknowledged (the put may land late, or never).
    AnswerWithoutStageAck,
    /// Staged commit, broken: a helper (a replay, a status read) answers "committed" when its
    /// inquiries find every participant holding the transaction, without first winning the
    /// compare-and-swap `STAGING → COMMITTING`.
    HelperAnswersFromHolds,
    /// A replay, broken: a client's retry of a keyed transaction (same id) sends its prepares
    /// again with a *fresh* `began` (its own clock) instead of writing its record first and
    /// finding the first attempt's. Its prepares are not covered by any horizon, so on an item
    /// whose entry for the transaction was pruned they hold the item again, for a transaction
    /// that may have committed already. Override: a [`crate::system::Action::Replay`] step
    /// exists (it is none otherwise: the correct replay's put is refused and it sends nothing),
    /// and the prepare it sends is given no coverage (see [`prepare`](super::prepare)'s `fresh`).
    FreshBeganReplay,
    /// Native transactions, broken: the native write ignores the reservations standing on an
    /// item (no `txResN = 0` in its condition) and applies its debit beside them, its bound
    /// checked on the committed value alone. Override of [`rules::native_write`](twopc_core::rules::native_write)'s facts: no
    /// other reservation is seen (see [`native_write`](super::native_write)).
    NativeIgnoresReservations,
    /// One item named twice, broken: the participant before issue 35's second line. A prepare
    /// that finds its transaction's own hold takes it for a retry whatever operation the hold
    /// carries: an exclusive lock is written again with the new operation (the stored one
    /// overwritten), a reservation is reused; either votes yes. Override: the rules are never
    /// told of another operation ([`own_hold_with_another_operation`](super::own_hold_with_another_operation)
    /// is given `false`), in prepares and inquiries.
    OwnHoldIsRetry,
    /// One item named twice, broken: the second line in prepare only. An inquiry that finds the
    /// transaction's own hold answers "held" whatever operation the hold carries, so recovery
    /// of a `STAGING` record can commit a transaction one of whose operations no hold carries
    /// (its prepare refused, or not landed yet).
    /// Override: inquiries are never told of another operation.
    InquiryIgnoresOperation,
    /// One item named twice, a proposed change: a hold records which of its transaction's
    /// operations it carries (the request's part, say its index), and a prepare or inquiry of
    /// another part meets it as "another operation" even where the two operations are
    /// identical, which comparing operations cannot tell from a retry. Override of the fact
    /// given to [`own_hold_with_another_operation`](super::own_hold_with_another_operation).
    OwnHoldComparesPart,
    /// Clocks (issue 35), a proposed change: recovery acts whatever its clock says. A
    /// recoverer's prevent (an inquiry with `prevent`) and its abort of a `STAGING` record, and
    /// the sweeper's recovery of a record (an abort of a `PREPARING` one included), take place
    /// before the transaction's deadline as well as after: a completer acting on a fresh
    /// recovery ask, or a sweeper, whose clock runs ahead of the stager's. Override: the
    /// deadline guards of [`crate::system::Action::Inquire`],
    /// [`crate::system::Action::RecoverDecide`] and the sweeper's steps are dropped.
    RecoveryIgnoresDeadline,
    /// An idempotency key used again after its record expired (issue 45), broken: the code
    /// before the fix. Holds, fence entries and records are matched by transaction id alone,
    /// so a key's later transaction takes its earlier one's entries for its own (refused
    /// `fenced` by a `committed` entry it never wrote, answered `committed` by an inquiry,
    /// its abort meeting "its" commit), its release overwrites the earlier one's entry without
    /// raising the horizon, and the lock rule reads the later record for the earlier one's
    /// hold. Override of the facts given to every rule ([`crate::state::Env::by_id`]) and of
    /// the record the lock rule reads; no [`crate::system::Action::Retire`].
    ReuseMatchesId,
    /// An abort gives a reservation's escrow back by the message's operation, not the hold's
    /// (issue 45, item 3: the DynamoDB release before the fix). One item named twice sends
    /// the abort of the other name's operation, leaving a phantom in the stored escrow.
    /// Override of the effect of a reservation's release ([`ItemState::escrow`]).
    ///
    /// [`ItemState::escrow`]: crate::state::ItemState::escrow
    GiveBackByMessage,
}

impl Variant {
    /// Whether items keep a fence (entries and horizon).
    pub fn fences(self) -> bool {
        self != Variant::NoFence
    }

    /// Whether recovery (prevents, aborts of `STAGING` records, the sweeper) waits for the
    /// transaction's deadline.
    pub fn recovery_waits_for_deadline(self) -> bool {
        self != Variant::RecoveryIgnoresDeadline
    }

    /// Whether prepare refuses a transaction the horizon covers.
    pub fn checks_horizon(self) -> bool {
        !matches!(self, Variant::NoFence | Variant::NoHorizon)
    }
}
