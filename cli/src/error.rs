//! Typed errors of the CLI (thiserror, in the style of core's
//! `TraceError`). The commands themselves return `anyhow` errors, printed
//! as one `streamscope: error: ...` line; these are the errors of its
//! helpers, matched on where it matters and shown by their `Display`
//! (the CLI tests and the goldens hold the text).

use std::path::PathBuf;

/// A command-line value that does not parse (clap prints it after the
/// flag's name).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgError {
    /// `--duration`, `--max-duration`, `--find-steps-within`, `--delay` of `capture`.
    #[error("expected a duration such as 5s, 500ms or 1.5 (at most 1 h), got {0:?}")]
    Duration(String),
    /// `capture --ranks`.
    #[error("--ranks {0:?}: expected comma-separated rank numbers such as 0,3")]
    Ranks(String),
    /// `view --size`.
    #[error("expected WxH, got {0:?}")]
    Size(String),
    /// `record --capture-range`.
    #[error("expected cudaProfilerApi or nvtx:NAME, got {0:?}")]
    CaptureRange(String),
    /// `record --delay`, `--duration`.
    #[error("expected a number of seconds >= 0, got {0:?}")]
    Seconds(String),
    /// `--steps`: not a range of step numbers.
    #[error(transparent)]
    Steps(#[from] streamscope_core::analysis::job::StepsError),
    /// `whatif --comm-scale` and the like: not a number.
    #[error("expected a number, got {0:?}")]
    NotANumber(String),
    /// The same: zero, negative or not finite.
    #[error("expected a positive number, got {0}")]
    NotPositive(String),
    /// `sweep --env` without `=`.
    #[error("expected NAME=v1,v2,..., got {0:?}")]
    EnvAxis(String),
    /// `sweep --env` with a name that is not a variable's.
    #[error("not an environment variable name: {0:?}")]
    EnvName(String),
    /// `sweep --env` with an empty value.
    #[error("empty value in {0:?}")]
    EnvValue(String),
    /// `record --gpu-metrics=LIST`: the list's error (core's check).
    #[error("{0}")]
    GpuMetrics(String),
}

/// Why an armed process's control socket gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Nobody listens on it (the process is gone).
    #[error("stale socket, nobody listening ({0})")]
    Stale(std::io::Error),
    /// Another connection error.
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// The request could not be written.
    #[error("cannot send: {0}")]
    Send(std::io::Error),
    /// Reading the reply failed.
    #[error("no answer: {0}")]
    Read(std::io::Error),
    /// An empty reply.
    #[error("no answer")]
    NoAnswer,
}

/// Why there is no collector library for `record` to inject.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectorError {
    /// `$STREAMSCOPE_COLLECTOR` names no file.
    #[error("{var}={} does not exist", path.display())]
    Missing {
        /// The variable.
        var: &'static str,
        /// Its value.
        path: PathBuf,
    },
    /// The running executable's path is unknown.
    #[error("cannot locate the streamscope executable")]
    NoExecutable,
    /// Not built beside the executable.
    #[error("{file} not found next to {} (build it with `{build}`, or set {var})", dir.display())]
    NotBuilt {
        /// The library's file name.
        file: &'static str,
        /// The executable's folder.
        dir: PathBuf,
        /// The cargo command that builds it.
        build: String,
        /// The variable that names it.
        var: &'static str,
    },
}

/// Why one configuration of a sweep has no trace.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Its folder, left by a run that stopped, could not be removed.
    #[error("clearing {}: {source}", path.display())]
    Clear {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The streamscope executable's path is unknown.
    #[error("locating streamscope: {0}")]
    Executable(std::io::Error),
    /// `streamscope record` did not start.
    #[error("starting streamscope record: {0}")]
    Start(std::io::Error),
    /// `record` failed; `said` is " (its last stderr line)" or "".
    #[error("streamscope record exited with status {code}{said}")]
    Exited {
        /// Its exit status.
        code: i32,
        /// See the variant.
        said: String,
    },
    /// `record` was killed.
    #[error("streamscope record was killed by a signal{said}")]
    Killed {
        /// " (its last stderr line)" or "".
        said: String,
    },
    /// `record` succeeded but wrote no trace.
    #[error("no trace in {}{said}", dir.display())]
    NoTrace {
        /// The configuration's folder.
        dir: PathBuf,
        /// " (its last stderr line)" or "".
        said: String,
    },
}
