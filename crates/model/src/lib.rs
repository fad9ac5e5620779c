//! # twopc-model — the protocol's rules, model-checked
//!
//! A [stateright] model of the protocol `crates/core` ships: every decision a step takes is the
//! answer of the same pure function of [`twopc_core::rules`] the shipped drivers ask; the model
//! adds the effects of the writes on abstract items and records, every interleaving (crashes,
//! lost, duplicated and arbitrarily late messages, expiry, resolvers, the sweeper), named
//! properties checked in every reachable state, and broken [`Variant`]s as overrides of a rule.
//! `docs/model-check.md` says what is checked, what each variant breaks, and why the
//! abstractions are sound; `tests/check.rs` pins the state counts.
//!
//! - [`state`]: the abstract state: transactions (record, coordinator, clock, messages in
//!   flight, applications of each operation) and items (lock, reservations and the operation
//!   each carries, fence, horizon, shape, one number), all small and `Copy`;
//!   [`state::ItemState::seen_by`] builds the [`twopc_core::rules::Seen`] a step asks with.
//! - [`participant`]: one conditional write per call (prepare or reserve, commit, abort,
//!   dropping a stale lock) as the rules decide, the fence upkeep a write may carry out, and the [`Variant`]s.
//! - [`system`]: the stateright [`stateright::Model`]: the [`Action`]s (one request, delivery or
//!   passing of time each), which rule each runs, and the properties.
//! - [`unanswered`]: a participant that never answers, and what the path rule
//!   (`rules::stages`) guarantees about it.
//!
//! [stateright]: https://docs.rs/stateright
#![warn(missing_docs)]

pub mod participant;
pub mod state;
pub mod system;
pub mod unanswered;

pub use participant::Variant;
pub use state::State;
pub use system::{Action, TwoByTwo, TwoPhaseCommit};
