//! Whether a transaction is committed as one native `TransactWriteItems` ([`native`]), and
//! what its write does on an item as found ([`native_write`]).

use super::{Holder, PrepareRefusal, PrepareStep, Seen, prepare};

/// Why a transaction is not committed as one native `TransactWriteItems` (it takes the
/// protocol path instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotNative {
    /// A custom participant (its own logic, reached by its own transport) takes part.
    Custom,
    /// A table the coordinator does not reach `direct` (a Lambda or HTTP participant: another
    /// account, Region or process owns the writes).
    NotDirect,
    /// A service marked `hot` takes part: its items take concurrent reservations, which a
    /// native transaction on the same item would conflict with.
    Hot,
    /// A `delete`: it must leave a tombstone carrying the item's fence, which needs the item
    /// read first.
    Delete,
    /// More items than one `TransactWriteItems` takes besides the record.
    TooMany,
    /// More bytes than one `TransactWriteItems` takes.
    TooLarge,
}

impl NotNative {
    /// For logs and the bench.
    pub fn as_str(self) -> &'static str {
        match self {
            NotNative::Custom => "custom participant",
            NotNative::NotDirect => "participant not reached direct",
            NotNative::Hot => "hot service",
            NotNative::Delete => "delete",
            NotNative::TooMany => "too many items",
            NotNative::TooLarge => "too large",
        }
    }
}

/// One participant of a transaction, as [`native`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NativeFacts {
    /// A table's item (not a custom participant).
    pub table: bool,
    /// Reached `direct`: the coordinator writes the table itself, in its own account and Region.
    pub direct: bool,
    /// The service is marked hot.
    pub hot: bool,
    /// The operation deletes the item.
    pub deletes: bool,
}

/// Most actions in one `TransactWriteItems` (the record's put is one of them).
pub const NATIVE_MAX_ACTIONS: usize = 100;
/// Most bytes in one `TransactWriteItems`.
pub const NATIVE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Whether a transaction may be committed as one native `TransactWriteItems` (every item's
/// write and the record's put), given its participants and an upper estimate of the request's
/// bytes. Checked in this order: custom participants, transports, hot services, deletes, size.
pub fn native(
    participants: impl IntoIterator<Item = NativeFacts>,
    bytes: usize,
) -> Result<(), NotNative> {
    let mut items = 0;
    for p in participants {
        if !p.table {
            return Err(NotNative::Custom);
        }
        if !p.direct {
            return Err(NotNative::NotDirect);
        }
        if p.hot {
            return Err(NotNative::Hot);
        }
        if p.deletes {
            return Err(NotNative::Delete);
        }
        items += 1;
    }
    if items + 1 > NATIVE_MAX_ACTIONS {
        return Err(NotNative::TooMany);
    }
    if bytes > NATIVE_MAX_BYTES {
        return Err(NotNative::TooLarge);
    }
    Ok(())
}

/// What a native transaction's write does on one item as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeStep {
    /// Apply the operation (its own conditions permitting).
    Apply,
    /// The protocol holds the item (a lock, a placeholder, reservations): the transaction takes
    /// the protocol path, which settles or waits for the holders.
    Protocol,
    /// Refuse, as a prepare would (the item's shape against the operation).
    Refuse(PrepareRefusal),
}

/// The native write's rule: the prepare rule ([`prepare`]) for a transaction that has never
/// been anywhere (no fence entry, above every horizon, holding nothing), taken and released in
/// one write. So it applies only where an exclusive prepare would lock the item at once: no
/// lock, no reservation standing, the shape the operation needs; where the protocol holds the
/// item it gives way to the protocol. A reservation's escrow is kept by the same token: none
/// stands where a native write applies.
pub fn native_write(seen: Seen, creates: bool) -> NativeStep {
    let fresh = Seen {
        entry: None,
        covered: false,
        reserved_by_me: false,
        holder: match seen.holder {
            Holder::Me => Holder::Other { expired: false },
            other => other,
        },
        ..seen
    };
    match prepare(fresh, creates) {
        PrepareStep::Lock => NativeStep::Apply,
        PrepareStep::Refuse(
            PrepareRefusal::Locked
            | PrepareRefusal::ResolveOwner
            | PrepareRefusal::Reserved
            | PrepareRefusal::Paused
            | PrepareRefusal::Full
            | PrepareRefusal::Fenced(_)
            | PrepareRefusal::BelowHorizon,
        ) => NativeStep::Protocol,
        PrepareStep::Refuse(r) => NativeStep::Refuse(r),
    }
}
