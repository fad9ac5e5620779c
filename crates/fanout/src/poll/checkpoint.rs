//! Where each shard was read up to: the positions of delivered records, kept in memory and
//! saved to a file (a temporary file, then a rename) so that a restart resumes after them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tracing::warn;

/// Where each shard was read up to (shard id → last delivered sequence number).
pub type Checkpoints = BTreeMap<String, String>;

/// The positions of a poller whose checkpoints are deferred
/// ([`Poller::defer_checkpoints`](super::Poller::defer_checkpoints)): read them, make what was
/// delivered up to them durable, then save them.
#[derive(Clone)]
pub struct Checkpointer {
    store: Arc<CheckpointStore>,
    file: PathBuf,
}

impl Checkpointer {
    /// Where each shard's delivered records end now (in memory; not yet saved).
    pub fn positions(&self) -> Checkpoints {
        self.store.lock().clone()
    }

    /// Saves `positions` (a temporary file, then a rename): a restart resumes after them.
    pub fn save(&self, positions: &Checkpoints) -> std::io::Result<()> {
        save(&self.file, positions)
    }

    /// The file the positions are saved in.
    pub fn file(&self) -> &Path {
        &self.file
    }
}

fn save(file: &Path, positions: &Checkpoints) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(positions).map_err(std::io::Error::other)?;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, file))
}

/// The checkpoints of every shard, and the file that keeps them across restarts.
pub(super) struct CheckpointStore {
    checkpoints: Mutex<Checkpoints>,
    file: Option<PathBuf>,
    /// Positions are kept in memory only; a [`Checkpointer`] saves them.
    deferred: AtomicBool,
}

impl CheckpointStore {
    /// The positions saved in `file` (none if it is missing or unreadable), saved there again
    /// after each delivered batch.
    pub(super) fn open(file: Option<PathBuf>) -> Self {
        let checkpoints = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        CheckpointStore {
            checkpoints: Mutex::new(checkpoints),
            file,
            deferred: false.into(),
        }
    }

    /// From now on positions are saved by the returned [`Checkpointer`] only; `None` without a
    /// file.
    pub(super) fn defer(self: &Arc<Self>) -> Option<Checkpointer> {
        let file = self.file.clone()?;
        self.deferred.store(true, Ordering::Release);
        Some(Checkpointer {
            store: self.clone(),
            file,
        })
    }

    /// The last delivered sequence number of `shard`.
    pub(super) fn get(&self, shard: &str) -> Option<String> {
        self.lock().get(shard).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, Checkpoints> {
        // A panic while holding it leaves the map as it was: still the right positions.
        self.checkpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `seq` as delivered on `shard` and, unless deferred, saves every position (a
    /// temporary file, then a rename: a crash leaves the old file or the new one).
    pub(super) fn advance(&self, shard: &str, seq: &str) {
        let deferred = self.deferred.load(Ordering::Acquire);
        let positions = {
            let mut c = self.lock();
            c.insert(shard.to_owned(), seq.to_owned());
            (!deferred && self.file.is_some()).then(|| c.clone())
        };
        if let (Some(f), Some(positions)) = (&self.file, positions)
            && save(f, &positions).is_err()
        {
            warn!(file = %f.display(), "could not save stream checkpoints");
        }
    }
}
