//! One `twopc serve` per data folder: an advisory lock on `serve.lock` in the folder, held for
//! the life of the process; a second one on the same folder is refused with a message naming the
//! first (its pid and URL, written beside the lock while it runs).
//!
//! The lock, not the pid, decides: the kernel releases it when the process dies, however it
//! dies. A pid outlives its process as a zombie when nobody reaps it (after a `kill -9` in a
//! container whose PID 1 does not reap orphans), and may later name an unrelated process.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::ServeError;

/// The claim on a data folder; released when dropped or when the process dies.
pub struct Claim {
    /// Holds the lock (`flock`, through std's `File::try_lock`); never read.
    _lock: File,
    pid_file: PathBuf,
    url_file: PathBuf,
}

/// Opens (creating) a lock file; it is never truncated or removed, so every process locks the
/// same file.
pub fn open_lock(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
}

/// The pid recorded in a file, if any.
pub fn recorded_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
}

impl Claim {
    /// Claims `data_dir` for this process, unless a live `twopc serve` holds it.
    pub fn take(data_dir: &Path) -> Result<Claim, ServeError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ServeError::Io { path, source }
        };
        std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
        let lock_path = data_dir.join("serve.lock");
        let (pid_file, url_file) = (data_dir.join("serve.pid"), data_dir.join("serve.url"));
        let lock = open_lock(&lock_path).map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let url = std::fs::read_to_string(&url_file).unwrap_or_default();
                return Err(ServeError::AlreadyRunning {
                    data_dir: data_dir.to_path_buf(),
                    pid: recorded_pid(&pid_file),
                    url: url.trim().to_owned(),
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(ServeError::Io {
                    path: lock_path,
                    source,
                });
            }
        }
        // Whatever a killed predecessor left is stale now: replaced or removed.
        let _ = std::fs::remove_file(&url_file);
        std::fs::write(&pid_file, std::process::id().to_string()).map_err(io(&pid_file))?;
        Ok(Claim {
            _lock: lock,
            pid_file,
            url_file,
        })
    }

    /// Records where this process serves.
    pub fn serving_at(&self, url: &str) -> Result<(), ServeError> {
        std::fs::write(&self.url_file, url).map_err(|source| ServeError::Io {
            path: self.url_file.clone(),
            source,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // The lock file stays (removing it could let two processes lock two different files);
        // the lock itself goes with the file handle, after these.
        let _ = std::fs::remove_file(&self.pid_file);
        let _ = std::fs::remove_file(&self.url_file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "twopc-claim-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("folder");
        dir
    }

    #[test]
    fn a_held_folder_is_refused_naming_the_holder_and_free_again_once_released() {
        let dir = folder("held");
        let first = Claim::take(&dir).expect("first claim");
        first.serving_at("http://127.0.0.1:3000").expect("url");
        // A second open file description of the same lock file conflicts, as another process's
        // would.
        match Claim::take(&dir) {
            Err(ServeError::AlreadyRunning { pid, url, .. }) => {
                assert_eq!(pid, Some(std::process::id()));
                assert_eq!(url, "http://127.0.0.1:3000");
            }
            other => panic!("expected AlreadyRunning, got {:?}", other.err()),
        }
        drop(first);
        let again = Claim::take(&dir).expect("free once released");
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pid_file_left_by_a_dead_process_does_not_hold_the_folder() {
        // What a killed serve leaves: its pid (here pid 1's, a live process) and URL, no lock.
        let dir = folder("stale");
        std::fs::write(dir.join("serve.pid"), "1").expect("pid");
        std::fs::write(dir.join("serve.url"), "http://127.0.0.1:1").expect("url");
        let claim = Claim::take(&dir).expect("a stale pid file is no claim");
        assert_eq!(
            recorded_pid(&dir.join("serve.pid")),
            Some(std::process::id())
        );
        assert!(!dir.join("serve.url").exists(), "the stale URL is removed");
        drop(claim);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
