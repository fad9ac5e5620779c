//! The production model of DynamoDB, laid over DynamoDB Local by a wrapped HTTP client, so the
//! systems meet what the real service does rather than what DynamoDB Local's serial engine
//! does:
//!
//! - [`model`]: the latency per operation, fitted to figures measured from AWS Lambda, and
//!   their source; [`lognormal`]: the fits and their quantiles, including the slowest of
//!   several requests sent together (the one-round floor);
//! - [`service`]: transaction conflicts and the partition's write rate, as DynamoDB's
//!   documentation states them, with the assumptions no source fixes as parameters;
//! - [`connector`]: the SDK's HTTP client wrapped to take each request's sampled time and to
//!   answer as the service would when the model refuses a write.

pub mod connector;
pub mod lognormal;
pub mod model;
pub mod service;
