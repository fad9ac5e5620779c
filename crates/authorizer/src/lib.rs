//! # twopc-authorizer — who may connect, and what they may see
//!
//! The WebSocket API pushes committed changes, balances included; this crate decides who gets
//! them. The same code runs in the `$connect` Lambda REQUEST authorizer (`ws-authorizer`), in
//! the connections function and in the local stack (`twopc serve`).
//! - [`verify`]: a JWT from an OIDC issuer, checked for signature (only the algorithms
//!   configured; `none` never), expiry, not-before, issuer and audience against keys from a
//!   [`verify::KeySource`] (the issuer's JWKS), cached and fetched again once on an unknown `kid`.
//! - [`grants`]: the `twopc` claim — which topics a principal may subscribe to — and the
//!   per-topic check `subscribe` runs.
//! - [`context`]: the principal as the authorizer hands it to the `$connect` route.
//! - [`refusal`]: every refusal as a stable machine-readable code.
//! - [`shared`]: the opt-in shared demo token, compared in constant time.
//! - `local` (feature `local`): the local stack's issuer (a P-256 key kept in a folder, tokens
//!   minted with it, its key set).
#![warn(missing_docs)]

pub mod context;
pub mod grants;
#[cfg(feature = "local")]
pub mod local;
pub mod refusal;
pub mod shared;
pub mod verify;

pub use grants::{Grants, Wanted};
pub use refusal::AccessRefusal;
pub use verify::{KeySource, Principal, Verifier, VerifierConfig};
