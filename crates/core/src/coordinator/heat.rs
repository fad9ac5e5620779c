//! What this coordinator learned of items' heat ([`rules::heat`](crate::rules::heat)): each
//! contended item's table and key, until when native attempts avoid it. A cache of what the
//! items themselves say (their `txHot` marks, which every coordinator learns from a refused
//! native write), so that a coordinator pays for one refused attempt per mark, not one per
//! transaction. Bounded: past [`HeatCache::MOST`] items the expired go first, then the earliest
//! to expire.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::item::{Key, canonical_key};

/// Items known contended, until when.
#[derive(Debug, Default)]
pub(crate) struct HeatCache {
    items: Mutex<HashMap<String, u64>>,
}

impl HeatCache {
    /// Most items remembered.
    pub(crate) const MOST: usize = 10_000;

    /// Whether native attempts avoid `key` of `table` at `now`.
    pub(crate) fn is_hot(&self, table: &str, key: &Key, now: u64) -> bool {
        let Ok(items) = self.items.lock() else {
            return false; // a panic elsewhere poisoned it: forget, and go native
        };
        items
            .get(&entry(table, key))
            .is_some_and(|until| now < *until)
    }

    /// Avoid `key` of `table` until `until` (or later, if already known so).
    pub(crate) fn learn(&self, table: &str, key: &Key, until: u64, now: u64) {
        let Ok(mut items) = self.items.lock() else {
            return;
        };
        if items.len() >= Self::MOST {
            items.retain(|_, u| now < *u);
        }
        if items.len() >= Self::MOST
            && let Some(first) = items
                .iter()
                .min_by_key(|(_, u)| **u)
                .map(|(k, _)| k.clone())
        {
            items.remove(&first);
        }
        let known = items.entry(entry(table, key)).or_default();
        *known = (*known).max(until);
    }
}

/// One item's name in the cache: its table and its key's canonical form (one item, however its
/// numbers are spelled).
fn entry(table: &str, key: &Key) -> String {
    let key = serde_json::to_string(&canonical_key(key)).unwrap_or_default();
    format!("{table}\n{key}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(v: serde_json::Value) -> Key {
        [("id".to_owned(), v)].into()
    }

    #[test]
    fn an_item_is_avoided_until_its_mark_ends_however_its_key_is_spelled() {
        let heat = HeatCache::default();
        heat.learn("t", &key(json!(1)), 100, 0);
        assert!(heat.is_hot("t", &key(json!(1.0)), 99));
        assert!(!heat.is_hot("t", &key(json!(1)), 100));
        assert!(!heat.is_hot("u", &key(json!(1)), 50), "another table");
        // A later mark extends it, an earlier one does not shorten it.
        heat.learn("t", &key(json!(1)), 200, 50);
        heat.learn("t", &key(json!(1)), 150, 60);
        assert!(heat.is_hot("t", &key(json!(1)), 199));
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_earliest() {
        let heat = HeatCache::default();
        for i in 0..HeatCache::MOST {
            heat.learn("t", &key(json!(i)), 1_000 + i as u64, 0);
        }
        heat.learn("t", &key(json!("new")), 5_000, 0);
        assert!(heat.is_hot("t", &key(json!("new")), 10));
        assert!(!heat.is_hot("t", &key(json!(0)), 10), "the earliest went");
        assert!(heat.is_hot("t", &key(json!(1)), 10));
        // Full again once the expired have gone: they go first, and only they.
        heat.learn("t", &key(json!("later")), 9_000, 4_000);
        assert!(heat.is_hot("t", &key(json!("new")), 4_000));
        assert!(heat.is_hot("t", &key(json!("later")), 4_000));
        assert!(heat.is_hot("t", &key(json!(3_001)), 4_000));
        assert_eq!(
            heat.items.lock().expect("lock").len(),
            HeatCache::MOST - 3_000 + 1,
            "the 3,001 marks ended by 4,000 went; two were learned"
        );
    }
}
