//! Scratch directories for tests that write dataset files.

use std::fs;
use std::path::{Path, PathBuf};

pub(super) struct TempDir(tempfile::TempDir);

impl TempDir {
    pub(super) fn new() -> Self {
        Self(tempfile::tempdir().expect("a temporary directory"))
    }

    pub(super) fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `bytes` to `relative`, creating parent folders.
    pub(super) fn write(&self, relative: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.path().join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&path, bytes).unwrap();
        path
    }
}
