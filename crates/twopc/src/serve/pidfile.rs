//! One `twopc serve` per data folder: its pid and URL are written there while it runs, and a
//! second one on the same folder is refused with a message naming the first.

use std::path::{Path, PathBuf};

use super::ServeError;
use super::dynamodb_local::alive;

/// The claim on a data folder; released (files removed) when dropped.
pub struct Claim {
    pid_file: PathBuf,
    url_file: PathBuf,
}

impl Claim {
    /// Claims `data_dir` for this process, unless a live `twopc serve` holds it.
    pub fn take(data_dir: &Path) -> Result<Claim, ServeError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ServeError::Io { path, source }
        };
        std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
        let (pid_file, url_file) = (data_dir.join("serve.pid"), data_dir.join("serve.url"));
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            && pid != std::process::id()
            && alive(pid)
        {
            let url = std::fs::read_to_string(&url_file).unwrap_or_default();
            return Err(ServeError::AlreadyRunning {
                data_dir: data_dir.to_path_buf(),
                pid,
                url: url.trim().to_owned(),
            });
        }
        std::fs::write(&pid_file, std::process::id().to_string()).map_err(io(&pid_file))?;
        Ok(Claim { pid_file, url_file })
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
        let _ = std::fs::remove_file(&self.pid_file);
        let _ = std::fs::remove_file(&self.url_file);
    }
}
