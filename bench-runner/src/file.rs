//! A file-system call that failed, with what it was doing and where: the one I/O error that
//! the parts writing files (record, render, export, run) carry.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {error}", path.display())]
pub struct FileError {
    pub what: &'static str,
    pub path: PathBuf,
    pub error: std::io::Error,
}

/// For `map_err`: the failed call on `path` (`?` turns it into the caller's error).
pub fn error<'p>(
    what: &'static str,
    path: &'p Path,
) -> impl FnOnce(std::io::Error) -> FileError + 'p {
    move |error| FileError {
        what,
        path: path.to_path_buf(),
        error,
    }
}
