//! Heat: items many transactions want at once, found without being told. DynamoDB cancels a
//! `TransactWriteItems` one of whose items another request is writing, so on such an item the
//! native path loses transactions where the staged commit's reservations stand together.
//!
//! A native attempt that gives way on an item because another request was writing it
//! (`TransactionConflict`) or the protocol holds it is *evidence* of contention
//! ([`Heat::Contended`]): the staged prepare it falls back to writes the item's heat mark
//! (`txHot`, until now plus the window) in its own write, at no extra request. Every native
//! write is conditional on no live mark ([`native_write`](super::native_write) answers
//! [`NativeStep::Heated`]), and a refused write returns the item, so any coordinator learns the
//! mark from the item ([`Heat::Marked`]) and routes around it until the mark ends. A mark is
//! renewed only by new evidence, so an item that cools goes back to native a window after the
//! last contention anyone saw there.
//!
//! Contention where a live mark already stood marks every item of the transaction ([`heats`]):
//! the spot is known hot, DynamoDB names only the item where a conflict met another request,
//! and the transaction's other items are where the same transactions go next (a hot account's
//! partners, a block of hot items). Left unmarked, each of them would cost every coordinator
//! one more native attempt, each holding the items it prepared for a moment against the staged
//! transactions standing there. A *first* sighting (no live mark on any item) marks only the
//! items that saw contention, and the coordinator remembers the others in its cache alone: two
//! transactions that happen to meet once (random keys, many in flight) are no hot spot, and
//! marking every item they name would send more transactions down the staged path, whose holds
//! meet more native attempts, each marking every item it names in turn: on uniform keys with
//! eight items and 32 in flight, a cascade. Likewise a coordinator refused by a live mark on one
//! item remembers every item of that transaction as hot until the mark ends (in its cache
//! alone: nothing new was seen, so nothing is written).

use super::NativeStep;

/// What one item of a cancelled native `TransactWriteItems` was found to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeFinding {
    /// Its write's condition held (another item cancelled the transaction).
    Passed,
    /// Another request was writing it at the same time (DynamoDB's `TransactionConflict`).
    Busy,
    /// Its write was refused: what [`native_write`](super::native_write) says of the item as
    /// it was returned, and the item's heat mark (`txHot`, 0 if none).
    Refused {
        /// The native rule's step on the item as found.
        step: NativeStep,
        /// Its heat mark.
        hot_until: u64,
    },
}

/// What a coordinator learns of an item's heat from a cancelled native attempt: route its
/// transactions around it (the protocol path) until `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Heat {
    /// The item carries a live mark, written by whoever saw it contended: nothing new is seen,
    /// so nothing is written.
    Marked {
        /// The mark's end.
        until: u64,
    },
    /// The item was contended just now: the staged prepare that follows marks it until then.
    Contended {
        /// Now plus the window.
        until: u64,
    },
}

impl Heat {
    /// Until when native attempts avoid the item.
    pub fn until(self) -> u64 {
        match self {
            Heat::Marked { until } | Heat::Contended { until } => until,
        }
    }

    /// The mark the staged prepare writes on the item, if any: only fresh evidence renews it.
    pub fn mark(self) -> Option<u64> {
        match self {
            Heat::Marked { .. } => None,
            Heat::Contended { until } => Some(until),
        }
    }
}

/// The heat rule: what `found` teaches at `now` with marks lasting `window_ms`. Busy, or held by
/// the protocol: contended now. Refused by a live mark alone: marked. Passed, or refused by its
/// own conditions or its shape: nothing about heat.
pub fn heat(found: NativeFinding, now: u64, window_ms: u64) -> Option<Heat> {
    match found {
        NativeFinding::Busy
        | NativeFinding::Refused {
            step: NativeStep::Protocol,
            ..
        } => Some(Heat::Contended {
            until: now.saturating_add(window_ms),
        }),
        NativeFinding::Refused {
            step: NativeStep::Heated,
            hot_until,
        } => Some(Heat::Marked { until: hot_until }),
        NativeFinding::Passed | NativeFinding::Refused { .. } => None,
    }
}

/// What a native attempt that met `found` (one finding per item, in order) teaches of each of
/// its items at `now`: [`heat`] of each, except that
/// - contention seen on an item where some item of the attempt carried a live mark (a hot spot
///   seen again) marks every item as contended;
/// - contention with no live mark anywhere (a first sighting) marks the items that saw it, and
///   the others are learned until the same end, writing nothing;
/// - a live mark met on one item (with nothing contended) is learned for every item until that
///   mark ends, writing nothing.
///
/// The module's first section says why.
pub fn heats(found: &[NativeFinding], now: u64, window_ms: u64) -> Vec<Option<Heat>> {
    let each: Vec<_> = found.iter().map(|f| heat(*f, now, window_ms)).collect();
    if let Some(contended) = each
        .iter()
        .flatten()
        .find(|h| matches!(h, Heat::Contended { .. }))
        .copied()
    {
        let seen_again = found.iter().any(|f| {
            matches!(
                f,
                NativeFinding::Refused {
                    step: NativeStep::Heated,
                    ..
                }
            ) || matches!(f, NativeFinding::Refused { hot_until, .. } if *hot_until > now)
        });
        let learned = Heat::Marked {
            until: contended.until(),
        };
        return each
            .into_iter()
            .map(|h| match h {
                Some(Heat::Contended { .. }) => Some(contended),
                _ if seen_again => Some(contended),
                _ => Some(learned),
            })
            .collect();
    }
    let latest = each.iter().flatten().max_by_key(|h| h.until()).copied();
    each.into_iter().map(|h| h.or(latest)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::PrepareRefusal;

    const NOW: u64 = 1_000;
    const WINDOW: u64 = 10_000;

    #[test]
    fn contention_seen_now_marks_the_item_for_a_window() {
        for found in [
            NativeFinding::Busy,
            NativeFinding::Refused {
                step: NativeStep::Protocol,
                hot_until: 0,
            },
            // A live mark and a hold: the hold is news, and renews the mark.
            NativeFinding::Refused {
                step: NativeStep::Protocol,
                hot_until: NOW + 5,
            },
        ] {
            let h = heat(found, NOW, WINDOW).expect("contended");
            assert_eq!(
                h,
                Heat::Contended {
                    until: NOW + WINDOW
                },
                "{found:?}"
            );
            assert_eq!(h.mark(), Some(NOW + WINDOW));
        }
    }

    #[test]
    fn a_mark_alone_is_learned_and_never_renewed() {
        let h = heat(
            NativeFinding::Refused {
                step: NativeStep::Heated,
                hot_until: NOW + 3,
            },
            NOW,
            WINDOW,
        )
        .expect("marked");
        assert_eq!(h, Heat::Marked { until: NOW + 3 });
        assert_eq!(h.until(), NOW + 3);
        assert_eq!(
            h.mark(),
            None,
            "no new evidence: an item that cools goes native"
        );
    }

    #[test]
    fn contention_where_a_mark_stood_marks_every_item_of_the_transaction() {
        let marked = NativeFinding::Refused {
            step: NativeStep::Heated,
            hot_until: NOW + 3,
        };
        let contended = Heat::Contended {
            until: NOW + WINDOW,
        };
        // A conflict at the second item: the first passed, the third carries a mark.
        let found = [NativeFinding::Passed, NativeFinding::Busy, marked];
        assert_eq!(heats(&found, NOW, WINDOW), vec![Some(contended); 3]);
        for h in heats(&found, NOW, WINDOW).into_iter().flatten() {
            assert_eq!(h.mark(), Some(NOW + WINDOW), "each prepare writes it");
        }
        // A hold met where a live mark stands: seen again, every item marked.
        let held_and_marked = NativeFinding::Refused {
            step: NativeStep::Protocol,
            hot_until: NOW + 3,
        };
        assert_eq!(
            heats(&[held_and_marked, NativeFinding::Passed], NOW, WINDOW),
            vec![Some(contended); 2]
        );
    }

    #[test]
    fn a_first_sighting_marks_where_it_was_seen_and_remembers_the_rest_unwritten() {
        let contended = Heat::Contended {
            until: NOW + WINDOW,
        };
        let learned = Heat::Marked {
            until: NOW + WINDOW,
        };
        // A hold on an unmarked item (a mark that ended is no mark), a conflict elsewhere.
        let held = NativeFinding::Refused {
            step: NativeStep::Protocol,
            hot_until: NOW,
        };
        let found = [NativeFinding::Passed, held, NativeFinding::Busy];
        let heats = heats(&found, NOW, WINDOW);
        assert_eq!(heats, vec![Some(learned), Some(contended), Some(contended)]);
        let written: Vec<_> = heats.iter().map(|h| h.and_then(Heat::mark)).collect();
        assert_eq!(written, vec![None, Some(NOW + WINDOW), Some(NOW + WINDOW)]);
    }

    #[test]
    fn without_contention_a_mark_is_learned_for_every_item_and_written_nowhere() {
        let marked = NativeFinding::Refused {
            step: NativeStep::Heated,
            hot_until: NOW + 3,
        };
        // A mark refused the attempt: learned for every item until it ends, written nowhere.
        let learned = Heat::Marked { until: NOW + 3 };
        assert_eq!(
            heats(&[NativeFinding::Passed, marked], NOW, WINDOW),
            vec![Some(learned); 2]
        );
        assert_eq!(learned.mark(), None);
        // Two marks: each item keeps its own; an item without one, the latest.
        let later = NativeFinding::Refused {
            step: NativeStep::Heated,
            hot_until: NOW + 7,
        };
        assert_eq!(
            heats(&[marked, NativeFinding::Passed, later], NOW, WINDOW),
            vec![
                Some(learned),
                Some(Heat::Marked { until: NOW + 7 }),
                Some(Heat::Marked { until: NOW + 7 })
            ]
        );
        let own = NativeFinding::Refused {
            step: NativeStep::Apply,
            hot_until: 0,
        };
        assert_eq!(
            heats(&[NativeFinding::Passed, own], NOW, WINDOW),
            vec![None, None]
        );
    }

    #[test]
    fn refusals_of_the_operations_own_say_nothing_of_heat() {
        for found in [
            NativeFinding::Passed,
            NativeFinding::Refused {
                step: NativeStep::Apply, // its own `require` failed
                hot_until: 0,
            },
            NativeFinding::Refused {
                step: NativeStep::Refuse(PrepareRefusal::Exists),
                hot_until: NOW + 3,
            },
        ] {
            assert_eq!(heat(found, NOW, WINDOW), None, "{found:?}");
        }
    }
}
