//! DynamoDB requests counted where the SDK sends them: an interceptor on the client's config
//! sees every attempt (retries included) just before it goes on the wire, so "requests per
//! transaction" is counted, never computed from the protocol's description.
//!
//! It also counts *rounds*: how often the number of requests in flight rises from zero. With one
//! transaction in flight, that is the number of sequential round trips on the transaction's
//! critical path (requests sent together, such as concurrent prepares, share a round). And it
//! meters what each write costs in DynamoDB's units ([`crate::capacity`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeDeserializationInterceptorContextRef,
    BeforeSerializationInterceptorContextMut, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;

use crate::capacity::{Meter, Peaks, Units};

/// The operations told apart in the counts (the last slot counts any other).
pub const OPERATIONS: [&str; 8] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "GetItem",
    "TransactWriteItems",
    "Query",
    "BatchWriteItem",
    "other",
];

/// The slot of an operation in [`OPERATIONS`] (the last for any other).
pub fn slot(op: &str) -> usize {
    OPERATIONS
        .iter()
        .position(|o| *o == op)
        .unwrap_or(OPERATIONS.len() - 1)
}

#[derive(Debug, Default)]
struct Counts {
    by_op: [AtomicU64; OPERATIONS.len()],
    in_flight: AtomicI64,
    rounds: AtomicU64,
    units: Meter,
}

/// The interceptor; clones share their counts.
#[derive(Clone, Debug, Default)]
pub struct RequestCounter {
    counts: Arc<Counts>,
}

/// Counts at one moment (subtract two to get a window's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// Attempts sent, by [`OPERATIONS`] index.
    pub by_op: [u64; OPERATIONS.len()],
    /// Times the number of requests in flight rose from zero.
    pub rounds: u64,
    /// Capacity units.
    pub units: Units,
}

impl Requests {
    /// Every attempt sent.
    pub fn total(&self) -> u64 {
        self.by_op.iter().sum()
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &Requests) -> Requests {
        self.zip(earlier, u64::saturating_sub)
    }

    /// `self + other`.
    pub fn plus(&self, other: &Requests) -> Requests {
        self.zip(other, |a, b| a + b)
    }

    fn zip(&self, o: &Requests, f: impl Fn(u64, u64) -> u64 + Copy) -> Requests {
        Requests {
            by_op: std::array::from_fn(|i| f(self.by_op[i], o.by_op[i])),
            rounds: f(self.rounds, o.rounds),
            units: self.units.zip(&o.units, f),
        }
    }
}

impl RequestCounter {
    /// A counter at zero, its requests not asking for their consumed capacity.
    pub fn new() -> Self {
        RequestCounter::default()
    }

    /// Whether writes from now on ask for their consumed capacity (and the meter reads it).
    pub fn ask_units(&self, on: bool) {
        self.counts.units.set_asking(on);
    }

    /// The counts now.
    pub fn snapshot(&self) -> Requests {
        Requests {
            by_op: std::array::from_fn(|i| self.counts.by_op[i].load(Ordering::Relaxed)),
            rounds: self.counts.rounds.load(Ordering::Relaxed),
            units: self.counts.units.snapshot(),
        }
    }

    /// The largest reservation set and fence seen in responses since the last call.
    pub fn take_peaks(&self) -> Peaks {
        self.counts.units.take_peaks()
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "twopc-bench request counter"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.counts.units.ask(context.input_mut(), cfg);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        match context.output_or_error() {
            Ok(output) => self.counts.units.read_output(output, cfg),
            Err(e) => {
                if let Some(e) = e.as_operation_error() {
                    self.counts.units.read_error(e);
                }
            }
        }
        Ok(())
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // DynamoDB's JSON protocol names the operation in this header:
        // `X-Amz-Target: DynamoDB_20120810.UpdateItem`.
        let op = context
            .request()
            .headers()
            .get("x-amz-target")
            .and_then(|t| t.rsplit('.').next())
            .unwrap_or("other");
        self.counts.by_op[slot(op)].fetch_add(1, Ordering::Relaxed);
        if self.counts.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.counts.rounds.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn read_after_transmit(
        &self,
        _context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Not called when the transmission itself fails: the round count is only read with one
        // transfer in flight, where that does not happen (failures are reported).
        self.counts.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}
