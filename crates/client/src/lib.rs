//! # twopc-client — a client of the coordinator's HTTP API
//!
//! Build a [`Transaction`] (each participant's item and [`Op`], or a custom participant's
//! payload; numbers are exact [`Decimal`]s, never floats), [`Client::submit`] it, read the
//! [`TxAnswer`]. Every attempt of a submit carries one `Idempotency-Key` (given, or made), so
//! the client retries what may pass (a failed connection, a timeout, `429`, `5xx`) without ever
//! running a transaction twice; when no attempt got an answer the error says so
//! ([`Error::Undetermined`]: read back with [`Client::status`]). A `202` (decided, not finished)
//! is an outcome too: [`Client::wait`] asks until it is finished. Refusals are typed by the API's
//! stable codes ([`ErrorCode`]), aborts by their reason ([`AbortCode`]).
//!
//! Map of the crate:
//! - [`transaction`]: [`Transaction`], [`Op`], [`key`]: the request body.
//! - [`outcome`]: [`TxAnswer`], [`ParticipantOutcome`], [`Abort`]: the answers.
//! - [`client`]: [`Client`], [`Config`]: submit, status, wait, and the retry rule.
//! - [`error`]: [`Error`], [`ErrorCode`].
//! - `sigv4` (feature `sigv4`): SigV4 signing for API Gateway's IAM authorisation (service
//!   `execute-api`), the SDK's signer, credentials from the standard AWS chain.
//!
//! ```no_run
//! use std::time::Duration;
//! use twopc_client::{Client, Config, Decimal, Op, Transaction, key};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new(Config::new("http://127.0.0.1:3000"))?;
//! let amount = Decimal::parse("10")?;
//! let tx = Transaction::new()
//!     .table("accounts", key("id", "alice"), Op::debit("balance", &amount))
//!     .table("accounts", key("id", "bob"), Op::credit("balance", &amount));
//! let mut outcome = client.submit(&tx, Some("order-42")).await?;
//! if !outcome.is_finished() {
//!     outcome = client.wait(&outcome.tx_id, Duration::from_secs(30)).await?;
//! }
//! println!("{} {}", outcome.status, outcome.tx_id);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod client;
pub mod error;
mod http;
pub mod outcome;
#[cfg(feature = "sigv4")]
pub mod sigv4;
pub mod transaction;

pub use client::{Client, Config, Pending};
pub use error::{Error, ErrorCode};
pub use outcome::{Abort, AbortCode, Outcome, ParticipantOutcome, TxAnswer};
#[cfg(feature = "sigv4")]
pub use sigv4::SigV4;
pub use transaction::{Op, Transaction, key};
pub use twopc_core::decimal::Decimal;
pub use twopc_core::ids::TxId;
pub use twopc_core::item::Key;
pub use twopc_core::op::{Comparator, Mode};
pub use twopc_core::record::{Vote, VoteReason};
pub use twopc_core::status::TxStatus;
