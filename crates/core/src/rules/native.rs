//! Whether a transaction is committed as one native `TransactWriteItems` ([`native`]), and
//! what its write does on an item as found ([`native_write`]).

use super::{Holder, PathFacts, PrepareRefusal, PrepareStep, Reach, Seen, prepare};

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
    /// An item the coordinator knows to be contended (a live heat mark it learned from an
    /// earlier native attempt: [`heat`](super::heat)): a native attempt there would be
    /// cancelled, and would hold the transaction's other items meanwhile.
    Heated,
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
            NotNative::Heated => "contended item",
            NotNative::Delete => "delete",
            NotNative::TooMany => "too many items",
            NotNative::TooLarge => "too large",
        }
    }
}

/// Most actions in one `TransactWriteItems` (the record's put is one of them).
pub(crate) const NATIVE_MAX_ACTIONS: usize = 100;
/// Most bytes in one `TransactWriteItems`.
pub(crate) const NATIVE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Whether a transaction may be committed as one native `TransactWriteItems` (every item's
/// write and the record's put), given its participants and an upper estimate of the request's
/// bytes. Checked in this order: custom participants, transports, hot services, contended items,
/// deletes, size.
pub fn native(
    participants: impl IntoIterator<Item = PathFacts>,
    bytes: usize,
) -> Result<(), NotNative> {
    let mut items = 0;
    for p in participants {
        if !p.table {
            return Err(NotNative::Custom);
        }
        if p.reach != Reach::Direct {
            return Err(NotNative::NotDirect);
        }
        if p.hot {
            return Err(NotNative::Hot);
        }
        if p.heated {
            return Err(NotNative::Heated);
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
    /// The item's heat mark is live (it was contended lately): the transaction takes the
    /// protocol path, where concurrent transactions reserve the item together.
    Heated,
    /// Refuse, as a prepare would (the item's shape against the operation).
    Refuse(PrepareRefusal),
}

/// The native write's rule: the prepare rule ([`prepare`]) for a transaction that has never
/// been anywhere (no fence entry, above every horizon, holding nothing), taken and released in
/// one write. So it applies only where an exclusive prepare would lock the item at once: no
/// lock, no reservation standing, the shape the operation needs; where the protocol holds the
/// item it gives way to the protocol, and where the item is marked hot ([`Seen::hot`]) as well. A
/// reservation's escrow is kept by the same token: none stands where a native write applies.
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
        PrepareStep::Lock if seen.hot => NativeStep::Heated,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::*;

    fn table() -> PathFacts {
        PathFacts::DIRECT_TABLE
    }

    #[test]
    fn native_takes_plain_direct_tables_and_names_the_first_reason_it_refuses() {
        assert_eq!(native([table(), table()], 1_000), Ok(()));
        let with = |f: fn(&mut PathFacts)| {
            let mut p = table();
            f(&mut p);
            native([table(), p], 1_000)
        };
        assert_eq!(with(|p| p.table = false), Err(NotNative::Custom));
        assert_eq!(with(|p| p.reach = Reach::Lambda), Err(NotNative::NotDirect));
        assert_eq!(with(|p| p.hot = true), Err(NotNative::Hot));
        assert_eq!(with(|p| p.heated = true), Err(NotNative::Heated));
        assert_eq!(with(|p| p.deletes = true), Err(NotNative::Delete));
        assert_eq!(
            native(vec![table(); NATIVE_MAX_ACTIONS - 1], 1),
            Ok(()),
            "99 items and the record fill one request"
        );
        assert_eq!(
            native(vec![table(); NATIVE_MAX_ACTIONS], 1),
            Err(NotNative::TooMany)
        );
        assert_eq!(
            native([table()], NATIVE_MAX_BYTES + 1),
            Err(NotNative::TooLarge)
        );
    }

    #[test]
    fn a_native_write_applies_only_where_an_exclusive_prepare_would_lock_at_once() {
        let real = Seen {
            shape: Shape::Real,
            ..Seen::ABSENT
        };
        assert_eq!(native_write(real, false), NativeStep::Apply);
        assert_eq!(native_write(Seen::ABSENT, true), NativeStep::Apply);
        let tomb = Seen {
            shape: Shape::Tombstone,
            // A tombstone's fence and horizon are about other transactions.
            covered: true,
            ..Seen::ABSENT
        };
        assert_eq!(native_write(tomb, true), NativeStep::Apply);
        // Where the protocol holds the item, it gives way.
        for held in [
            Seen {
                holder: Holder::Other { expired: false },
                ..real
            },
            Seen {
                holder: Holder::Other { expired: true },
                ..real
            },
            Seen {
                reserved_by_others: Others::Live,
                ..real
            },
            Seen {
                reserved_by_others: Others::Expired,
                ..real
            },
            Seen {
                shape: Shape::Placeholder,
                holder: Holder::Other { expired: false },
                ..Seen::ABSENT
            },
        ] {
            assert_eq!(native_write(held, false), NativeStep::Protocol, "{held:?}");
        }
        // A pause keeps reservations out, not a native write.
        assert_eq!(
            native_write(
                Seen {
                    paused: true,
                    ..real
                },
                false
            ),
            NativeStep::Apply
        );
        // A live heat mark: gives way where it would apply; where the protocol holds the item,
        // that is what it found (the contention itself); a wrong shape is refused as ever.
        let hot = Seen { hot: true, ..real };
        assert_eq!(native_write(hot, false), NativeStep::Heated);
        assert_eq!(
            native_write(
                Seen {
                    reserved_by_others: Others::Live,
                    ..hot
                },
                false
            ),
            NativeStep::Protocol
        );
        assert_eq!(
            native_write(hot, true),
            NativeStep::Refuse(PrepareRefusal::Exists)
        );
        // The shape against the operation: refused as a prepare is.
        assert_eq!(
            native_write(Seen::ABSENT, false),
            NativeStep::Refuse(PrepareRefusal::NotFound(Shape::Absent))
        );
        assert_eq!(
            native_write(tomb, false),
            NativeStep::Refuse(PrepareRefusal::NotFound(Shape::Tombstone))
        );
        assert_eq!(
            native_write(real, true),
            NativeStep::Refuse(PrepareRefusal::Exists)
        );
    }
}
