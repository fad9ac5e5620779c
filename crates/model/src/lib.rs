//! # twopc-model — the protocol of DESIGN.md §3, model-checked
//!
//! A [stateright] model of the two-phase commit that `crates/core` implements: conditional locks
//! carrying the transaction id and an expiry, per-item fence entries and fence horizon, the status
//! compare-and-swap `PREPARING → COMMITTING | ABORTING → COMMITTED | ABORTED`, the lock rule for
//! expired locks, the sweeper, coordinator crashes, late, duplicated and reordered messages, and
//! operations that create (`put`, through a placeholder) and delete (leaving a tombstone) items.
//! The checker explores every reachable state (breadth-first) and checks named properties in
//! each. Dev only: nothing in the product depends on it. It depends on stateright and on
//! `twopc-core`, whose rules ([`twopc_core::rules`]) it runs: every decision a step takes is the
//! answer of the same pure function the shipped drivers ask, given the abstract item or record as
//! the step finds it. The model adds the effects of the writes on its abstract state, the
//! interleavings, and the [`Variant`]s, each an override of a rule.
//!
//! ## Map
//!
//! The state. The protocol's enums are core's: a record's status is a
//! [`TxStatus`](twopc_core::status::TxStatus), a decision a
//! [`Decision`](twopc_core::status::Decision), a fence entry a
//! [`FenceOutcome`](twopc_core::model::FenceOutcome), an item's shape a
//! [`Shape`](twopc_core::rules::Shape).
//!
//! | here | models | in `crates/core` (and `crates/dynamo`) |
//! | --- | --- | --- |
//! | `TxState::record` | the transaction record's status | `status::TxStatus`, `ports::TxLog` |
//! | [`state::Coordinator`] | the coordinator's progress through `submit` | `coordinator::Coordinator::submit` |
//! | [`state::ItemState`] | one item: `lock`, `txFence`, `txFenceHorizon`, its shape (absent, real, placeholder `txPlaceholder`, tombstone `txTombstone`), the applied operations (`txVersion`) | `model::ItemState`, `dynamo::items` |
//! | [`state::ItemState::seen_by`] | the item as one transaction's step finds it: shape, lock holder (expired or not), own fence entry, covered by the horizon | `rules::Seen`, `model::ItemState::seen_by` |
//! | [`state::Op`], `TwoPhaseCommit::ops` | what each transaction does to each item: update, `put` (creates), `delete` | `op::Operation` (`creates`, `delete`) |
//! | [`state::Tx`] order | transactions ordered by `began` (`T0` began first) | `Lock::began`, `FenceEntry::began`, the record's `createdAt` |
//! | [`state::Clock`] | deadline = the locks' `expiresAt` | `TxRecord::deadline` |
//!
//! The steps ([`model::Action`]: one request, delivery or passing of time), and the rule each
//! runs:
//!
//! | step | runs | in `crates/core` (and `crates/dynamo`) |
//! | --- | --- | --- |
//! | `DeliverPrepare` ([`participant::prepare`]) | `rules::prepare(seen, op.creates())`: `Lock` takes the lock unless it is already the transaction's, and is the yes vote; `Refuse` is a no | `Participant::prepare`, `classify_refusal`, `DynamoItems::prepare` |
//! | `DeliverComplete`, `SweepComplete`, a resolver's commit or abort ([`participant::commit`], [`participant::abort`]) | `rules::commit(seen, op is a delete)`: `Apply` or the reply; `rules::abort(seen)`: `Release`, `FenceOut` or the reply. An unacknowledged reply (`Reply::Violation`) is reported | `Participant::{commit, abort}`, `DynamoItems::{commit, bury, release, fence_aborted}` |
//! | [`participant::Upkeep`]: `Prune`, `Raise` | the lock holder's release (the rules' `Apply`, `Release`) removing any set of other entries and raising the horizon over them: every policy of `rules::plan_prune`; where the abort rule says `FenceOut` and the fence has an entry, raising the horizon instead of writing the entry: `rules::fence_out`'s `RaiseHorizon`, for some capacity | the `prune` of `ParticipantStore::{commit, abort}`, `ParticipantStore::fence_aborted` |
//! | `Resolve` | on an expired lock, `rules::resolve(owner's record, owner's deadline passed)`: `RecordAborted`, `DecideAbort` (one record write each), `RollForward`, `AbortHere` (the commit or abort rule, for the owner), `DropStale` ([`participant::drop_stale_lock`]); `OwnerLive` is no step | `Participant::resolve` (from `prepare`, and from `Sweeper::run` walking the lock-expiry index) |
//! | `Decide` | `rules::decision` from the yes votes: a commit only if it says `Commit`, an abort at any time (a lost or late reply is a no); a lost swap, `rules::after_lost_decide` | `Coordinator::submit`, `Coordinator::decide` |
//! | `Finalize` | a lost swap, `rules::after_lost_finalize` | `Coordinator::complete` |
//! | `SweepAbort`, `SweepComplete`, `SweepFinalize` | on an overdue record, `rules::recovery(status, deadline passed)`: `DecideAbort`; `Complete(decision)`, item by item, then the finalize | `sweeper::Sweeper::run` → `Coordinator::recover` on `TxLog::overdue` |
//! | `Begin`, `SendPrepares`, `SendCompletes`, `Crash`, `Expire` | no rule: the record's creation, sending (the deadline check at the send), a coordinator stopping, time passing | `Coordinator::submit`, `Participant::prepare`'s deadline check |
//! | [`Variant`] | the correct protocol, a known mistake put back, or a proposed change: an override of the facts given to a rule, of the step it answers, or of an effect | — |
//!
//! ## What is checked
//!
//! Exhaustively for 2 transactions × 2 items (and 2 × 3; 3 × 1 and 3 × 2 on demand), every
//! transaction updating every item, all of which exist, so they contend on all of them (see
//! `tests/check.rs`). Then creating and deleting, in their own configurations
//! ([`TwoPhaseCommit::with_ops`]): `T0` puts and `T1` deletes one item that starts absent; `T0`
//! puts item 0 (absent) and updates item 1, `T1` deletes item 0 and updates item 1; every pair
//! of operations (update, put, delete) of 2 transactions on one item that starts absent, real
//! or a tombstone (27 configurations); on demand, put / delete / put and five more
//! 3-transaction configurations on one item. Safety, `Property::always`:
//! - [`model::ATOMICITY`]: never applied on one item and aborted on another; `COMMITTED` means
//!   applied everywhere; abort-decided means applied nowhere; and once no step is left, a
//!   commit-decided transaction has applied everywhere (DESIGN.md invariant "Atomicity").
//! - [`model::APPLIED_AT_MOST_ONCE`]: "exactly once", the other half of that invariant, and the
//!   fence's reason to exist.
//! - [`model::NO_COMMIT_WITHOUT_DECISION`]: an item applies `T` only if `T`'s record reached
//!   `COMMITTING`, the commit point (§3 step 3).
//! - [`model::NO_VIOLATION_REPORTED`]: no commit or abort ever finds the item contradicting the
//!   decision ("The fence", last sentence).
//! - [`model::NO_LOCK_OUTLIVES_ITS_TRANSACTION`]: a late prepare never locks an item for a
//!   transaction that has ended (the "hanging" problem of "The fence").
//!
//! Liveness (invariant "No stuck lock"):
//! - [`model::EVERY_TRANSACTION_ENDS`] (`always`): every state with no step left has every
//!   transaction ended and no lock held. A test walks the whole graph and finds no cycle, so
//!   every behaviour is finite and ends in such a state: this *is* "eventually everything ends",
//!   exactly, assuming only that the system does not halt while a step is still possible (time
//!   passes, the sweeper keeps running; a coordinator that stalls forever is a crash, and a
//!   message that is never delivered is the next property's case).
//! - [`model::SWEEPER_FINISHES`] (`always`): from every reachable state, if every coordinator
//!   stops for good and every message in flight is lost, the sweeper and the resolvers alone end
//!   every transaction and free every item: recovery needs only the record.
//! - [`model::EVENTUALLY_ENDS`] (`Property::eventually`): the same goal in stateright's own
//!   form, kept for readers who look for it. Stateright 0.31 checks `eventually` only at states
//!   with no successor and only along the first path that reached each state (its docs and
//!   `checker/bfs.rs` say so), so it can miss counterexamples; the two properties above are the
//!   ones to trust.
//!
//! `Property::sometimes` examples (commit, abort, both commit, a crashed coordinator's commit
//! finished by the sweeper, a late prepare meeting the fence, a late prepare refused by the
//! horizon alone, a commit still being driven after its fence entry was pruned; with creates and
//! deletes also a put creating an item, a delete leaving a tombstone, a late prepare of a put
//! refused by a tombstone) show that the space is not vacuous; a test also checks that every
//! kind of step (pruning by a lock holder's release and a lock-free abort raising the horizon
//! included), and every case of the lock rule but two, changes some state (the two: a lock of a
//! missing owner, and a stale lock of a `COMMITTED` owner, which the baseline never produces,
//! and which creates and deletes do not produce either: the tombstone keeps the fence).
//!
//! ## Creates and deletes: what the check found
//!
//! With tombstones, every property holds for creates and deletes, in every configuration
//! checked, but one: **no lock outlives its transaction**. Nothing is applied twice, or without
//! a commit decision, or on one item and not another; no violation is reported; everything
//! ends. The exception needs an item that starts absent and gets created: an abort that finds
//! no item writes nothing (`rules::abort` answers "already done": `release` and `fence_aborted`
//! both find no item), so nothing fences the aborted transaction out of the item once someone
//! creates it. Trace (`T0` puts, `T1` deletes, the item absent): `T1` begins and sends its
//! prepare, which is delayed; `T1` decides abort, its abort finds no item, `T1` is finalized
//! `ABORTED`; `T0` creates the item and commits; `T1`'s prepare lands: the item is real, `T1`
//! has no entry and the horizon does not cover it, so it locks the item for an `ABORTED`
//! transaction. The same happens to a put whose own abort found no item (its late prepare
//! writes a placeholder for an `ABORTED` transaction). `rules::abort` documents the gap (a late
//! prepare "finds nothing to lock unless someone creates the item first"), and
//! `docs/protocol.md` accepts it ("Accepted gaps"). The harm is
//! availability only: the orphan lock blocks the item until the aborted transaction's deadline,
//! and then the lock rule aborts it there (its record is `ABORTED`), applying nothing. The
//! [`Variant::AbortBuriesAbsent`] change (an abort that finds no item writes a tombstone with
//! its `aborted` entry) removes it: every property holds, in every configuration above.
//!
//! ## The buggy variants
//!
//! - [`Variant::BlindTakeover`]: a prepare overwrites an expired lock. A transaction decides to
//!   commit, its deadline passes, a newcomer takes one of its locks, and its commit there finds
//!   neither its lock nor its fence entry. With 2 transactions nothing can raise that item's
//!   horizon over the victim, so the commit is reported as a violation ("no violation reported"
//!   breaks) and never acknowledged: with every message lost, the sweeper cannot finish the
//!   victim ("the sweeper alone finishes" breaks); in the full model the victim's own late
//!   prepare may re-lock the item and finish it. With a third transaction that prunes the
//!   newcomer's entry (raising the horizon over the victim), the commit is answered "already
//!   done" and the victim is finalized `COMMITTED` with that item never applied: atomicity
//!   breaks, silently (a scripted 3 × 1 test, and an exhaustive one on demand).
//! - [`Variant::NoFence`]: no fence entries, and a commit/abort that finds its lock gone assumes
//!   it was done. Breaks "no operation applied twice" (a duplicate prepare re-locks an item its
//!   transaction already committed, and a retried commit or the sweeper applies it again) and
//!   "no lock outlives its transaction" (a prepare landing after the abort locks the item for an
//!   `ABORTED` transaction until a resolver clears it). Atomicity (all or nothing) and liveness
//!   survive.
//! - [`Variant::NoHorizon`]: entries are pruned at any time, but prepare does not check the
//!   horizon (the old design's pruning, with its time bound on late prepares gone). Breaks the
//!   same two properties as no fence at all: a lock holder prunes a committed transaction's
//!   entry, that transaction's late duplicate prepare re-locks the item, and its retried commit
//!   applies again.
//! - [`Variant::StaleHorizon`]: the lock holder's pruning release writes the horizon computed
//!   from what its prepare read, unconditionally, so a lock-free abort's raise made while it held
//!   the lock is undone. Needs 3 transactions (the holder, the pruned one, a later-begun aborted
//!   one whose prepare is still in flight) and then breaks exactly "no lock outlives its
//!   transaction": the aborted transaction's late prepare locks the item, an orphan lock that the
//!   lock rule removes once it expires (its abort is done, so nothing is ever applied). The real
//!   release is conditional on `horizon <= :h` and releases without pruning otherwise, which the
//!   correct model's never-lowered horizon covers.
//! - [`Variant::DeleteRemoves`]: the design before tombstones: a committed delete removes the
//!   item with its fence and horizon, an aborted create (or a dropped stale lock) deletes its
//!   placeholder. Breaks "no operation applied twice": `T0` puts the item and commits there,
//!   its coordinator crashes before finalizing (the record stays `COMMITTING`); `T1` deletes
//!   the item; a late duplicate of `T0`'s prepare finds no item and recreates it as `T0`'s
//!   placeholder; the sweeper re-drives `T0`'s commit, which finds its lock and applies the put
//!   again, undoing `T1`'s delete. Also breaks "no violation reported" (a retried commit of the
//!   put finds no item, or a retried delete finds the item recreated with a fresh fence), "the
//!   sweeper alone finishes" (with every message lost, `T0`'s commit on the missing item is a
//!   violation forever and `T0` stays `COMMITTING`), and "no lock outlives its transaction"
//!   (a `COMMITTED` put's late prepare recreates its placeholder: the stale lock the lock rule
//!   drops, which the tombstone design never produces). Atomicity and "every transaction ends"
//!   survive.
//! - [`Variant::AbortBuriesAbsent`]: not a mistake, a proposed change (see "Creates and
//!   deletes" above): a lock-free abort that finds no item writes a tombstone carrying its
//!   `aborted` entry. Every property holds.
//!
//! ## Abstractions (what the model leaves out, and why that is sound)
//!
//! - **Messages.** A sent prepare, commit or abort stays deliverable forever: any number of
//!   copies, in any order, interleaved with anything. Replies are not messages: a prepare's yes
//!   reaches the coordinator with the write, and a coordinator that stops waiting just decides
//!   abort (a timeout is a no), so a lost reply is covered. Commit/abort acknowledgements are read
//!   off the items ("every item finished"), which is equivalent because a finished item stays
//!   finished.
//! - **Late prepare writes.** The participant checks the deadline *before* its write, so the
//!   write can land after the deadline (slow or retried request). The model checks the deadline
//!   when the prepares are sent and lets a prepare sent in time land at any later moment, with no
//!   bound: nothing in the model (or the real system) limits how late a write may land.
//! - **The fence horizon.** Transactions are ordered by index as by `began` (set once at begin,
//!   carried by every message, stored in the lock and the entries). Each item has a horizon
//!   (initially below every transaction); prepare also requires `began > horizon` unless the lock
//!   is already its own. A lock holder's commit or abort may remove *any* other transactions'
//!   entries, committed or aborted, at any time ([`participant::Upkeep::Prune`]: every subset
//!   is a separate step, so every pruning policy of `rules::plan_prune` is covered, and whoever writes
//!   the release prunes, the coordinator, a resolver or the sweeper, where the real code prunes
//!   only in the coordinator's, from its prepare's reply: more behaviours), raising the horizon
//!   to the latest `began` removed; the horizon is never lowered (the real release is
//!   conditional on it). A commit that finds neither its lock nor its entry is "already done" if
//!   the horizon covers it (its entry was pruned after it applied: a decided commit's lock is
//!   removed by nobody but that commit), else a violation. An abort that finds neither is
//!   "already done" without a write if the horizon covers it (no prepare of it can land), else it
//!   writes its `aborted` entry or, the fence being full, raises the horizon to its `began`
//!   ([`participant::Upkeep::Raise`], a separate step whenever the fence has an entry: full for
//!   some capacity ≥ 1, so every capacity is covered). Pruned `aborted` entries are never written
//!   back (a re-sent abort is answered by the horizon), so the graph stays acyclic, which a test
//!   checks. Safety of pruning therefore depends on no clock and no bound on late writes; the
//!   price is availability, not checked here: a live transaction's slow prepare is refused once
//!   a later-begun transaction's entry was pruned or its abort raised the horizon, and it aborts.
//! - **Time.** No clock values: per transaction one mark passed nondeterministically (the
//!   deadline), one global clock: no skew between the coordinator's, the participants' and the
//!   sweeper's clocks. The fence margin (`ParticipantConfig::fence_margin_ms`) is not modelled:
//!   it no longer bears on safety. In the real code it only decides which entries the holder
//!   prunes first (those past their transaction's deadline plus the margin) and so trades item
//!   size against refusing a live transaction's slow prepare; the model prunes any entry at any
//!   time, which covers every margin. Clock skew in `began` only reorders transactions, and
//!   equal `began`s (not modelled) are refused by `began <= horizon` (more refusals, never fewer).
//! - **Resolution is one step per write**, with the read of the owner's record folded into the
//!   write that follows it. Sound because a record's decision never changes once made and each
//!   item write is conditional on the lock's owner, so acting on a stale read of a decided record
//!   does the same as acting on a fresh one.
//! - **Resolvers and the sweeper** may act on any expired lock or overdue record at any time, more
//!   often than the real ones (which need a newcomer or a schedule): more behaviours, not fewer.
//! - **Operations** have no content, only a kind ([`state::Op`]): an update (`add`, `set`,
//!   `remove`), a `put` or a `delete`; the model tracks whether and how often each item applied
//!   each transaction's operation (an observer's record, kept even if the item is removed). Each
//!   transaction applies one operation per item, fixed by the configuration. Business refusals
//!   (`require` failing, an `add` to a non-number) are a no vote, which the coordinator's "abort
//!   at any time" already covers; so is the distinction between `notFound`, `condition` and
//!   `conflict`. Attribute values, readers (who see nothing of a placeholder or a tombstone) and
//!   the stream are not modelled, nor is the idempotency key (one submit per transaction).
//! - **Items that appear and disappear.** An item is absent, real, a placeholder or a tombstone
//!   ([`Shape`](twopc_core::rules::Shape)), and the protocol never removes one: a committed delete and an aborted
//!   create leave a tombstone with the fence and the horizon, so the horizon's promise (no
//!   prepare of a covered transaction locks the item again) holds for the key's whole life. A
//!   creating prepare takes an absent item, a tombstone whose horizon is below its transaction,
//!   or its own placeholder; it writes a placeholder that keeps the tombstone's fence and
//!   horizon. Deleting a tombstone for good (a TTL, a cleanup job) is not modelled: it would be
//!   [`Variant::DeleteRemoves`]' hazard again unless no prepare of a transaction the tombstone
//!   fences can still land. Keys are independent items; a key that starts absent has no history
//!   (nobody prepared there), which is the real case of a key never written.
//! - **Size.** 2 × 2 and 2 × 3 are checked by every test run (and the two 3-transaction
//!   counterexamples replayed as scripts), and so are the 2-transaction configurations with
//!   creates and deletes (7,363 states for put/delete on one item, 31,315 for the 2 × 2 one,
//!   27 more of 1,764 to 11,389 states each, for the correct protocol and the proposed
//!   change). 3 × 1 (1,417,419 states for the correct protocol; the stale-horizon and
//!   blind-takeover variants too), 3 × 2 (18,175,265 states, every property holds, about 3
//!   minutes in release on one core), and put / delete / put on one item
//!   (1,163,906 states; 1,350,202 with [`Variant::DeleteRemoves`]) with five more
//!   3-transaction configurations of creates and deletes (about a million states each, a few
//!   seconds each in release) are ignored tests: `cargo test -p twopc-model --release --
//!   --ignored`. Every transaction touches every item.
//!
//! [stateright]: https://docs.rs/stateright
#![warn(missing_docs)]

pub mod model;
pub mod participant;
pub mod state;

pub use model::{Action, TwoByTwo, TwoPhaseCommit};
pub use participant::Variant;
pub use state::State;
