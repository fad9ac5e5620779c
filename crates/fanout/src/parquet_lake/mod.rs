//! The local data lake: the rows Firehose would get, converted to Parquet against the lake's
//! columns ([`crate::lake::COLUMNS`]) and rolled into files like Firehose's buffer:
//! `ROOT/committed/dt=YYYY-MM-DD/<name>-<n>.parquet`.
//!
//! [`Lake::put`] only buffers (the stream processor's pushes never wait for Parquet); a roll
//! ([`ParquetLake::roll`]) writes the buffer to a hidden temporary file per day, syncs it and
//! renames it into place, so a reader sees a whole file or none. The stream positions the rows
//! came from are saved only after that ([`roll_and_checkpoint`], feature `poller`): a crash
//! before the rename loses the buffer but not the positions, which are redelivered; a crash
//! after the rename and before the checkpoint delivers some rows twice, with the same
//! `eventId`. Nothing is lost; duplicates are visible only through `eventId`.
//!
//! Here: the buffer, the roll and the lake's files; the rows' Parquet encoding is `format`.

mod format;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

pub use format::{read_file, write_file};

use crate::lake::{PARTITION, PREFIX, field};
use crate::ports::{Lake, SinkError};
use crate::rows::partition_date;

/// Why rows could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    /// A file could not be written, synced or renamed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Arrow or Parquet refused the rows.
    #[error("encoding Parquet: {0}")]
    Encode(String),
    /// A row does not fit its column's type (a bug in the row's making).
    #[error("column {column}: {why}")]
    Column {
        /// The column.
        column: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A fault point fired (tests): the roll stopped dead, as a killed process would.
    #[error("stopped at {0:?}")]
    Stopped(RollPoint),
}

/// A step of a roll at which a test may stop it dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RollPoint {
    /// A day's file is written and synced under its temporary name, not renamed.
    BeforeRename,
    /// Every file is in place; the stream positions are not saved.
    BeforeCheckpoint,
}

/// Decides whether a roll stops at a point (tests); production never does.
pub trait RollFaults: Send + Sync {
    /// True: stop here.
    fn fire(&self, point: RollPoint) -> bool;
}

/// Never stops.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRollFaults;

impl RollFaults for NoRollFaults {
    fn fire(&self, _: RollPoint) -> bool {
        false
    }
}

/// The local lake: rows buffered, rolled into Parquet files.
pub struct ParquetLake {
    root: PathBuf,
    name: String,
    buffer: Mutex<Vec<Value>>,
    rolled: AtomicU64,
    faults: Arc<dyn RollFaults>,
}

/// What a roll wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rolled {
    /// Rows written.
    pub rows: usize,
    /// The files, in place.
    pub files: Vec<PathBuf>,
}

impl ParquetLake {
    /// A lake under `root` whose files are named `<name>-<n>.parquet` (one name per writer).
    pub fn new(root: impl Into<PathBuf>, name: impl Into<String>) -> Self {
        ParquetLake {
            root: root.into(),
            name: name.into(),
            buffer: Mutex::new(Vec::new()),
            rolled: AtomicU64::new(0),
            faults: Arc::new(NoRollFaults),
        }
    }

    /// With fault points (tests).
    pub fn with_faults(mut self, faults: Arc<dyn RollFaults>) -> Self {
        self.faults = faults;
        self
    }

    /// The folder of one day: `ROOT/committed/dt=DAY`.
    pub fn day_dir(&self, day: &str) -> PathBuf {
        self.root.join(PREFIX).join(format!("{PARTITION}={day}"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Value>> {
        // A panic while holding it leaves whole rows: still the right buffer.
        self.buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Rows waiting for the next roll.
    pub fn buffered(&self) -> usize {
        self.lock().len()
    }

    /// Removes the temporary files a crash left (they were never renamed, so never read, and
    /// their rows were not checkpointed). Returns how many.
    pub fn clean(&self) -> usize {
        let mut removed = 0;
        let days = std::fs::read_dir(self.root.join(PREFIX));
        for day in days.into_iter().flatten().flatten() {
            for f in std::fs::read_dir(day.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = f.file_name().to_string_lossy().into_owned();
                if name.starts_with('.')
                    && name.ends_with(".tmp")
                    && std::fs::remove_file(f.path()).is_ok()
                {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Writes the buffer out: per day, a temporary file, synced, renamed into place. On an
    /// error the rows go back to the buffer for the next roll (a file already renamed may then
    /// be written again: duplicates, never losses).
    pub fn roll(&self) -> Result<Rolled, LakeError> {
        let rows = std::mem::take(&mut *self.lock());
        let mut out = Rolled::default();
        if rows.is_empty() {
            return Ok(out);
        }
        let mut by_day: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for row in rows {
            let ms = field(&row, "committedat")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            by_day.entry(partition_date(ms)).or_default().push(row);
        }
        let n = self.rolled.fetch_add(1, Ordering::Relaxed);
        let mut pending: Vec<(String, Vec<Value>)> = by_day.into_iter().collect();
        while let Some((day, rows)) = pending.first() {
            match self.write_day(day, rows, n) {
                Ok(path) => {
                    out.rows += rows.len();
                    out.files.push(path);
                    pending.remove(0);
                }
                Err(LakeError::Stopped(p)) => return Err(LakeError::Stopped(p)),
                Err(e) => {
                    let mut back: Vec<Value> = pending.into_iter().flat_map(|(_, r)| r).collect();
                    let mut buffer = self.lock();
                    back.append(&mut buffer);
                    *buffer = back;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn write_day(&self, day: &str, rows: &[Value], n: u64) -> Result<PathBuf, LakeError> {
        let dir = self.day_dir(day);
        let io = |source| LakeError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let name = format!("{}-{n:06}.parquet", self.name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let path = dir.join(&name);
        write_file(&tmp, rows)?;
        if self.faults.fire(RollPoint::BeforeRename) {
            return Err(LakeError::Stopped(RollPoint::BeforeRename));
        }
        std::fs::rename(&tmp, &path).map_err(io)?;
        // The rename itself is durable once the folder is synced.
        File::open(&dir).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(path)
    }
}

impl Lake for ParquetLake {
    async fn put(&self, rows: &[Value]) -> Result<Vec<usize>, SinkError> {
        self.lock().extend(rows.iter().cloned());
        Ok(vec![])
    }
}

/// One roll, then the stream positions saved: the positions are read *before* the buffer is
/// taken, so every position saved belongs to rows already in a file (a batch's position is
/// recorded only after its rows were put).
#[cfg(feature = "poller")]
pub fn roll_and_checkpoint(
    lake: &ParquetLake,
    checkpoints: &crate::poll::Checkpointer,
) -> Result<Rolled, LakeError> {
    let positions = checkpoints.positions();
    let rolled = lake.roll()?;
    if lake.faults.fire(RollPoint::BeforeCheckpoint) {
        return Err(LakeError::Stopped(RollPoint::BeforeCheckpoint));
    }
    checkpoints
        .save(&positions)
        .map_err(|source| LakeError::Io {
            path: checkpoints.file().to_owned(),
            source,
        })?;
    Ok(rolled)
}

/// The lake's files under `root` (`committed/dt=*/*.parquet`, not the temporary ones), sorted.
pub fn files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(PREFIX))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|day| {
            std::fs::read_dir(day.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
}

/// Every row of the lake under `root` (tests and tools).
pub fn read_rows(root: &Path) -> Result<Vec<Value>, LakeError> {
    let mut rows = vec![];
    for f in files(root) {
        rows.extend(read_file(&f)?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Detected;
    use crate::rows::row;
    use serde_json::json;
    use std::str::FromStr;

    fn item(balance: &str, committed_at: u64) -> Value {
        let mut item = serde_json::Map::new();
        item.insert("id".into(), json!("alice"));
        item.insert(
            "balance".into(),
            Value::Number(serde_json::Number::from_str(balance).expect("number")),
        );
        item.insert("tags".into(), json!(["vip"]));
        row(&Detected::ItemCommitted {
            tx_id: "t1".into(),
            participant: "accounts".into(),
            key: serde_json::from_value(json!({"id": "alice"})).expect("key"),
            item: Some(item),
            version: json!(3),
            committed_at,
        })
    }

    fn temp() -> PathBuf {
        std::env::temp_dir().join(format!(
            "twopc-parquet-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ))
    }

    #[test]
    fn rows_round_trip_through_parquet_with_exact_decimals_and_a_timestamp() {
        let tx = row(&Detected::TransactionCompleted {
            tx_id: "t1".into(),
            status: "COMMITTED".into(),
            participants: vec![
                json!({"participant": "accounts", "key": {"id": "alice"}, "vote": "yes", "mode": "exclusive"}),
                json!({"participant": "payments", "vote": "yes"}),
            ],
            completed_at: 1_795_305_600_123,
        });
        let dir = temp();
        let path = dir.join("x.parquet");
        std::fs::create_dir_all(&dir).expect("dir");
        write_file(&path, &[item("0.10", 1_795_305_600_000), tx]).expect("write");
        let back = read_file(&path).expect("read");
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(
            back[0]["numbers"],
            json!({"balance": "0.100000000000000000"})
        );
        assert_eq!(back[0]["item"], json!({"id": "alice", "tags": "[\"vip\"]"}));
        assert_eq!(back[0]["key"], json!({"id": "alice"}));
        assert_eq!(back[0]["version"], json!(3));
        assert_eq!(back[0]["eventid"], json!("t1/accounts/{\"id\":\"alice\"}"));
        assert_eq!(
            back[1]["committedat"],
            json!("2026-11-22 00:00:00.123 +00:00")
        );
        assert_eq!(back[1]["items"], json!(1), "one participant with a key");
        assert_eq!(back[1]["participants"][1]["participant"], json!("payments"));
        assert_eq!(back[1]["participants"][1]["key"], Value::Null);
        assert_eq!(back[1]["participants"][0]["key"], json!({"id": "alice"}));
    }

    #[tokio::test]
    async fn a_roll_writes_one_file_per_day_and_leaves_no_temporary_file() {
        let dir = temp();
        let lake = ParquetLake::new(&dir, "w");
        lake.put(&[item("1", 1_795_305_599_999), item("2", 1_795_305_600_000)])
            .await
            .expect("put");
        assert_eq!(lake.buffered(), 2);
        let rolled = lake.roll().expect("roll");
        assert_eq!(
            (rolled.rows, rolled.files.len(), lake.buffered()),
            (2, 2, 0)
        );
        let days: Vec<String> = files(&dir)
            .iter()
            .filter_map(|f| f.parent()?.file_name()?.to_str().map(str::to_owned))
            .collect();
        assert_eq!(days, ["dt=2026-11-21", "dt=2026-11-22"]);
        assert_eq!(lake.clean(), 0);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn a_roll_stopped_before_its_rename_leaves_only_a_temporary_file_which_clean_removes() {
        struct Stop;
        impl RollFaults for Stop {
            fn fire(&self, p: RollPoint) -> bool {
                p == RollPoint::BeforeRename
            }
        }
        let dir = temp();
        let lake = ParquetLake::new(&dir, "w").with_faults(Arc::new(Stop));
        lake.put(&[item("1", 0)]).await.expect("put");
        assert!(matches!(
            lake.roll(),
            Err(LakeError::Stopped(RollPoint::BeforeRename))
        ));
        assert!(files(&dir).is_empty(), "no reader sees the unfinished file");
        assert_eq!(ParquetLake::new(&dir, "next").clean(), 1);
        std::fs::remove_dir_all(&dir).ok();
    }
}
