//! Typed errors for loading and writing traces.

use std::path::PathBuf;

/// Why a trace could not be loaded or written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: file is empty")]
    Empty { path: PathBuf },
    #[error("{path}: not a trace ({why})")]
    NotATrace { path: PathBuf, why: String },
    #[error("{path}: corrupt Perfetto trace at byte {offset}: {why}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        why: String,
    },
    #[error("{path}: invalid Kineto JSON: {why}")]
    Json { path: PathBuf, why: String },
    #[error("{path}: directory holds no trace files (.pftrace, .perfetto-trace, .json, .json.gz)")]
    EmptyDirectory { path: PathBuf },
    #[error("{path}: nothing to write: the trace has no processes")]
    NothingToWrite { path: PathBuf },
    #[error("{path}: already exists (pass --force to replace it)")]
    OutputExists { path: PathBuf },
    #[error("{path}: cannot write: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl TraceError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = TraceError> = std::result::Result<T, E>;
