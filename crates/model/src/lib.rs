//! # twopc-model — the protocol of DESIGN.md §3, model-checked
//!
//! A [stateright] model of the two-phase commit that `crates/core` implements: conditional locks
//! carrying the transaction id and an expiry, per-item fence entries, the status
//! compare-and-swap `PREPARING → COMMITTING | ABORTING → COMMITTED | ABORTED`, the lock rule for
//! expired locks, the sweeper, coordinator crashes, and late, duplicated and reordered messages.
//! The checker explores every reachable state (breadth-first) and checks named properties in
//! each. Dev only: nothing in the product depends on it, and it depends on nothing but
//! stateright.
//!
//! ## Map
//!
//! | here | models | in `crates/core` (and `crates/dynamo`) |
//! | --- | --- | --- |
//! | [`state::Status`], `TxState::record` | the transaction record | `status::TxStatus`, `ports::TxLog` |
//! | [`state::Coordinator`] | the coordinator's progress through `submit` | `coordinator::Coordinator::submit` |
//! | [`state::ItemState`] | one item: `lock`, `txFence`, the applied operation (`txVersion`) | `model::ItemState`, `dynamo::items` |
//! | [`state::Clock`] | deadline = the locks' `expiresAt`; deadline + fence margin | `ParticipantConfig::fence_margin_ms` |
//! | [`participant::prepare`], [`participant::commit`], [`participant::abort`], [`participant::drop_stale_lock`] | one conditional write each | `participant::Participant::{prepare, commit, abort}`, `ParticipantStore` |
//! | [`participant::prune_committed_entry`], `Action::Prune` | a later write pruning an expired fence entry | the `prune` list of `ParticipantStore::{commit, abort}` |
//! | [`participant::resolution`] | the lock rule's table | `Participant::resolve` / `follow` |
//! | [`model::Action`] | one request, delivery or passing of time | — |
//! | `Action::SweepAbort/SweepComplete/SweepFinalize` | the sweeper's overdue records | `sweeper::Sweeper::run` → `Coordinator::recover` on `TxLog::overdue` |
//! | `Action::Resolve` | a newcomer meeting an expired lock, or the sweeper walking the lock-expiry index | `Participant::resolve` (from `prepare`, and from `Sweeper::run`) |
//! | [`Variant`] | the correct protocol, or a known mistake put back | — |
//!
//! ## What is checked
//!
//! Exhaustively for 2 transactions × 2 items (and 2 × 3, and 3 × 2 on demand), every transaction
//! touching every item, so they contend on all of them (see `tests/check.rs`). Safety,
//! `Property::always`:
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
//! finished by the sweeper, a late prepare meeting the fence, a commit still being driven after
//! its fence entry was pruned) show that the space is not vacuous; a test also checks that every
//! kind of step, and every case of the lock rule but two, changes some state (the two: a lock
//! of a missing owner, and a stale lock of a `COMMITTED` owner, which the baseline never
//! produces).
//!
//! ## The buggy variants
//!
//! - [`Variant::BlindTakeover`]: a prepare overwrites an expired lock. Breaks atomicity: a
//!   transaction decides to commit, its deadline passes, a newcomer takes one of its locks, and
//!   its commit there finds neither its lock nor its fence entry. Within the fence retention
//!   that is reported as a violation (so "no violation reported" breaks too); past it, the
//!   retention rule takes it as applied and the transaction is finalized `COMMITTED` with that
//!   item never applied: silently. Liveness holds in this variant (everything ends, wrongly).
//! - [`Variant::NoFence`]: no fence entries, and a commit/abort that finds its lock gone assumes
//!   it was done. Breaks "no operation applied twice" (a duplicate prepare re-locks an item its
//!   transaction already committed, and a retried commit or the sweeper applies it again) and
//!   "no lock outlives its transaction" (a prepare landing after the abort locks the item for an
//!   `ABORTED` transaction until a resolver clears it). Atomicity (all or nothing) and liveness
//!   survive.
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
//!   when the prepares are sent and lets a prepare sent in time land until the deadline plus the
//!   fence margin, [`state::Clock::PastMargin`]. That bound is the assumption fence pruning
//!   relies on; the model assumes it and cannot check it.
//! - **Fence pruning.** Past the margin, a transaction's `committed` entries may be pruned at
//!   any time (`Action::Prune`), and a commit that then finds neither its lock nor its entry is
//!   answered "already done" (`Participant::commit`, the retention rule of
//!   `docs/architecture.md`); the correct protocol keeps every property with both. `aborted`
//!   entries are not pruned: with no prepare able to land, dropping one changes no decision, and
//!   an abort re-sent afterwards would write it back, making the graph cyclic for nothing.
//! - **Time.** No clock values: per transaction, two marks passed nondeterministically (deadline,
//!   deadline + margin), one global clock: no skew between the coordinator's, the participants'
//!   and the sweeper's clocks (the margin exists to absorb it; the model cannot test that it
//!   does).
//! - **Resolution is one step per write**, with the read of the owner's record folded into the
//!   write that follows it. Sound because a record's decision never changes once made and each
//!   item write is conditional on the lock's owner, so acting on a stale read of a decided record
//!   does the same as acting on a fresh one.
//! - **Resolvers and the sweeper** may act on any expired lock or overdue record at any time, more
//!   often than the real ones (which need a newcomer or a schedule): more behaviours, not fewer.
//! - **Operations** have no content: the model tracks whether and how often each item applied
//!   each transaction's operation. Business refusals (`require` failing) are a no vote, which the
//!   coordinator's "abort at any time" already covers. Placeholders (`put`) and deletes are not
//!   modelled, nor is the idempotency key (one submit per transaction).
//! - **Size.** 2 × 2 and 2 × 3 are checked by every test run. 3 × 2 (28,546,265 states, every
//!   property holds, about 7 minutes in release on one core) is an ignored test: `cargo test -p
//!   twopc-model --release -- --ignored`. Every transaction touches every item.
//!
//! [stateright]: https://docs.rs/stateright
#![warn(missing_docs)]

pub mod model;
pub mod participant;
pub mod state;

pub use model::{Action, TwoByTwo, TwoPhaseCommit};
pub use participant::Variant;
pub use state::State;
