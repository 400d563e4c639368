//! Typed errors for loading and writing traces.

use std::fmt;
use std::path::PathBuf;

/// Why a trace could not be loaded or written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// An I/O error on the file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file has no bytes.
    #[error("{path}: file is empty")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is neither a Perfetto trace nor Kineto JSON.
    #[error("{path}: not a trace ({why})")]
    NotATrace {
        /// The file.
        path: PathBuf,
        /// Why it was rejected.
        why: String,
    },
    /// A Perfetto trace that cannot be decoded.
    #[error("{path}: corrupt Perfetto trace at byte {offset}: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the problem in the file.
        offset: u64,
        /// What is wrong there.
        why: String,
    },
    /// Kineto JSON that cannot be parsed.
    #[error("{path}: invalid Kineto JSON: {why}")]
    Json {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A directory without trace files.
    #[error("{path}: directory holds no trace files (.pftrace, .perfetto-trace, .json, .json.gz){subfolders}")]
    EmptyDirectory {
        /// The directory.
        path: PathBuf,
        /// Its subfolders that hold trace files, in words ("" when none):
        /// "; its subfolders with traces: a, b (name one: DIR/a)".
        subfolders: String,
    },
    /// Writing a trace without processes.
    #[error("{path}: nothing to write: the trace has no processes")]
    NothingToWrite {
        /// The output file.
        path: PathBuf,
    },
    /// The output file exists and replacing it was not asked for.
    #[error("{path}: already exists (pass --force to replace it)")]
    OutputExists {
        /// The output file.
        path: PathBuf,
    },
    /// An output that may not be written: an input, or not a regular file.
    #[error("{path}: {why}")]
    Output {
        /// The output file.
        path: PathBuf,
        /// Why it is refused.
        why: String,
    },
    /// A rank-set summary that cannot be read or merged.
    #[error("{path}: {why}")]
    Summary {
        /// The summary file (the first one, for a merge).
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Writing the output failed.
    #[error("{path}: cannot write: {source}")]
    Write {
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl TraceError {
    /// A [`TraceError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }

    /// The error for a gzip stream that cannot be inflated (corrupt, or
    /// cut before anything usable), naming the file; a document refused
    /// for what it holds ([`Refused`]) keeps its own message.
    pub(crate) fn gzip(path: &std::path::Path, e: std::io::Error) -> Self {
        if e.get_ref().is_some_and(|r| r.is::<Refused>()) {
            return TraceError::io(path, e);
        }
        TraceError::io(
            path,
            std::io::Error::new(e.kind(), format!("corrupt or truncated gzip data: {e}")),
        )
    }
}

/// A document refused for what it holds (not for damage): carried inside
/// an [`std::io::Error`] so that the gzip route does not call it corrupt data.
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Result with [`TraceError`] as the default error.
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
