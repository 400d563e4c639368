//! Typed errors of the viewer (thiserror, in the style of core's
//! `TraceError`): what the user sees is their `Display`.

use std::path::PathBuf;

/// Why `--rank`, `--step` or `--range` cannot frame the loaded trace.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FramingError {
    /// No rank of that number.
    #[error("no rank {rank} in the trace (ranks: {ranks})")]
    NoRank {
        /// The rank asked for.
        rank: u32,
        /// The trace's ranks, comma-separated.
        ranks: String,
    },
    /// `--step` on a trace without steps.
    #[error("the trace has no steps (no ProfilerStep or NVTX step ranges, no repetition found)")]
    NoSteps,
    /// No step of that number (of the rank, with `--rank`).
    #[error("no step {step} (steps: {steps})")]
    NoStep {
        /// The step asked for.
        step: i64,
        /// The steps there are, comma-separated.
        steps: String,
    },
    /// A range with no length.
    #[error("empty range {start}..{end}")]
    EmptyRange {
        /// Start, ns from the trace start.
        start: f64,
        /// End, ns from the trace start.
        end: f64,
    },
}

/// Why a `--range A..B` argument does not parse; each names the text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RangeError {
    /// No `..`.
    #[error("{0:?}: expected A..B, e.g. 120ms..160ms")]
    NotARange(String),
    /// Neither side has a unit.
    #[error("{0:?}: give a unit (ns, us, ms or s), e.g. 120ms..160ms")]
    NoUnit(String),
    /// B is not after A.
    #[error("{0:?}: the end must come after the start")]
    Backwards(String),
    /// A side that is not a number.
    #[error("{0:?}: not a number with a unit")]
    NotANumber(String),
    /// A side that is infinite or NaN.
    #[error("{0:?}: not a finite time")]
    NotFinite(String),
    /// A unit other than ns, us, µs, ms, s.
    #[error("{side:?}: unknown unit {unit:?} (ns, us, ms, s)")]
    UnknownUnit {
        /// The side of the range.
        side: String,
        /// Its unit.
        unit: String,
    },
}

/// Why a path the user opened did not load.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The loader's error (core's `TraceError`, which names the file), as
    /// text: the status is kept and cloned with the app.
    #[error("{0}")]
    Trace(String),
    /// Loading stopped (cancelled) before this file was read.
    #[error("{}: not read (loading stopped)", .0.display())]
    NotRead(PathBuf),
}

impl From<streamscope_core::TraceError> for LoadError {
    fn from(e: streamscope_core::TraceError) -> LoadError {
        LoadError::Trace(e.to_string())
    }
}

/// Why `--screenshot` wrote no PNG.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScreenshotError {
    /// The frame egui handed back is not width × height pixels.
    #[error("{}: screenshot buffer has the wrong size", .0.display())]
    WrongSize(PathBuf),
    /// Creating the folder or writing the file failed.
    #[error("{}: {why}", path.display())]
    Write {
        /// The folder or file.
        path: PathBuf,
        /// The I/O or PNG encoder's error.
        why: String,
    },
}
