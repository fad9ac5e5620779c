//! DynamoDB requests counted where the SDK sends them: an interceptor on the client's config
//! sees every attempt (retries included) just before it goes on the wire, so "requests per
//! transaction" is counted, never computed from the protocol's description.
//!
//! It also counts *rounds*: how often the number of requests in flight rises from zero. With one
//! transaction in flight (concurrency 1), that is the number of sequential round trips on the
//! transaction's critical path (requests sent together, such as concurrent prepares, share a
//! round).
//!
//! The same interceptor meters what each request costs in DynamoDB's units
//! ([`crate::capacity`]): it asks every request for its consumed capacity before serialisation
//! and reads it back after deserialisation.

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

#[derive(Debug, Default)]
struct Counts {
    by_op: [AtomicU64; OPERATIONS.len()],
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    in_flight: AtomicI64,
    rounds: AtomicU64,
    swept: AtomicU64,
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
    /// Transactions whose finish left them to the sweeper.
    pub swept: u64,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received (`Content-Length`).
    pub bytes_received: u64,
    /// Capacity units the responses reported (and the refused writes' estimate).
    pub units: Units,
}

impl Requests {
    /// Every attempt sent.
    pub fn total(&self) -> u64 {
        self.by_op.iter().sum()
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &Requests) -> Requests {
        let mut by_op = [0; OPERATIONS.len()];
        for (i, slot) in by_op.iter_mut().enumerate() {
            *slot = self.by_op[i].saturating_sub(earlier.by_op[i]);
        }
        Requests {
            by_op,
            rounds: self.rounds.saturating_sub(earlier.rounds),
            swept: self.swept.saturating_sub(earlier.swept),
            bytes_sent: self.bytes_sent.saturating_sub(earlier.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
            units: self.units.since(&earlier.units),
        }
    }

    /// `self + other`.
    pub fn plus(&self, other: &Requests) -> Requests {
        let mut by_op = self.by_op;
        for (i, slot) in by_op.iter_mut().enumerate() {
            *slot += other.by_op[i];
        }
        Requests {
            by_op,
            rounds: self.rounds + other.rounds,
            swept: self.swept + other.swept,
            bytes_sent: self.bytes_sent + other.bytes_sent,
            bytes_received: self.bytes_received + other.bytes_received,
            units: self.units.plus(&other.units),
        }
    }

    /// Attempts of one operation.
    pub fn of(&self, op: &str) -> u64 {
        OPERATIONS
            .iter()
            .position(|o| *o == op)
            .map_or(0, |i| self.by_op[i])
    }
}

impl RequestCounter {
    /// A counter at zero, its requests not asking for their consumed capacity.
    pub fn new() -> Self {
        RequestCounter {
            counts: Arc::new(Counts::default()),
        }
    }

    /// Whether requests from now on ask for their consumed capacity (and the meter reads it).
    /// Asking slows DynamoDB Local, so the bench asks only in slices set aside for it.
    pub fn ask_units(&self, on: bool) {
        self.counts.units.set_asking(on);
    }

    /// The counts now.
    pub fn snapshot(&self) -> Requests {
        let mut by_op = [0; OPERATIONS.len()];
        for (i, slot) in by_op.iter_mut().enumerate() {
            *slot = self.counts.by_op[i].load(Ordering::Relaxed);
        }
        Requests {
            by_op,
            rounds: self.counts.rounds.load(Ordering::Relaxed),
            swept: self.counts.swept.load(Ordering::Relaxed),
            bytes_sent: self.counts.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.counts.bytes_received.load(Ordering::Relaxed),
            units: self.counts.units.snapshot(),
        }
    }

    /// Notes a transaction its finish left to the sweeper.
    pub fn note_swept(&self) {
        self.counts.swept.fetch_add(1, Ordering::Relaxed);
    }

    /// The largest reservation set, fence and item seen in responses since the last call.
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
        let slot = OPERATIONS
            .iter()
            .position(|o| *o == op)
            .unwrap_or(OPERATIONS.len() - 1);
        self.counts.by_op[slot].fetch_add(1, Ordering::Relaxed);
        let sent = context.request().body().bytes().map_or(0, <[u8]>::len);
        self.counts
            .bytes_sent
            .fetch_add(sent as u64, Ordering::Relaxed);
        if self.counts.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.counts.rounds.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let received = context
            .response()
            .headers()
            .get("content-length")
            .and_then(|l| l.parse::<u64>().ok())
            .unwrap_or(0);
        self.counts
            .bytes_received
            .fetch_add(received, Ordering::Relaxed);
        // Not called when the transmission itself fails: the round count is only read in
        // healthy concurrency-1 runs, where that does not happen (failures are reported).
        self.counts.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}
