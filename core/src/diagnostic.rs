//! Problems met while loading or analyzing traces, as data.
//!
//! Each problem is one [`Diagnostic`]: what kind of problem, how bad, how
//! many times, in which file, and a line for people. Loaders attach them to
//! the [`Trace`](crate::model::Trace) (`diagnostics`); the analysis adds its
//! own to the [`Report`](crate::analysis::Report); `report` and `info` print
//! them and the JSON report carries them. Tests assert on [`Kind`], never on
//! the text. (Perfetto's trace processor keeps its import stats the same
//! way: a fixed set of named counters, each with a severity.)

use std::fmt;

use serde::{Deserialize, Serialize};

/// What went wrong. The JSON name is the snake_case of the variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The file (or its gzip stream) ends early: what came before the cut
    /// was loaded.
    Truncated,
    /// Perfetto packets that do not decode were skipped (`count` of them).
    DamagedPackets,
    /// Slices with a begin and no end, closed at their sequence's last
    /// timestamp.
    UnterminatedSlices,
    /// Slice ends without a begin, ignored.
    UnmatchedSliceEnds,
    /// Packets that needed incremental state their sequence never cleared.
    IncrementalStateLost,
    /// Track descriptors whose parents form a loop (shown at top level).
    TrackParentLoop,
    /// Events that are not well-formed (Kineto/chrome JSON), skipped.
    MalformedEvents,
    /// Events without a usable timestamp, skipped.
    MissingTimestamp,
    /// Events whose duration is missing, negative or out of range, loaded
    /// with duration 0.
    BadDuration,
    /// Events with neither a device/stream nor a thread, skipped.
    UnplacedEvents,
    /// Events of categories the importer does not know, off the host
    /// process, skipped.
    UnknownCategories,
    /// Trace-level metadata that does not parse (e.g. Kineto's
    /// deviceProperties).
    UnreadableMetadata,
    /// A file of a directory holds no events (empty or header only), skipped.
    EmptyFile,
    /// A file of a directory could not be read as a trace, skipped.
    UnreadableFile,
    /// One rank in two files: two runs mixed?
    DuplicateRank,
    /// The analysis was asked for a rank the trace does not have.
    NoSuchRank,
    /// Collectives that cannot be matched across ranks (a rank missing,
    /// counts or sequence numbers that differ): no pairs made.
    UnmatchedCollectives,
    /// `--steps` cannot be applied (no steps, or outside the range).
    StepsUnavailable,
    /// A directory holds several on-demand captures: the latest is loaded.
    CaptureChosen,
    /// The host launched steps more than a step ahead of the GPU running
    /// them: host step intervals are not step times (the GPU-clock
    /// durations are).
    HostRunsAhead,
    /// A Kineto `baseTimeNanoseconds` out of range (negative, beyond 2^63
    /// ns, or carrying events past it): not added, times kept relative.
    BadTimeBase,
    /// No process of the trace ran GPU work (kernels, copies, memsets):
    /// no rank to report.
    NoGpuWork,
}

/// How bad a problem is, as Perfetto's import stats grade them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; nothing was lost.
    Info,
    /// Some of the input could not be used: figures may be short of it.
    DataLoss,
    /// What was asked could not be done.
    Error,
}

impl Kind {
    /// The severity of this kind of problem.
    pub fn severity(self) -> Severity {
        use Kind::*;
        match self {
            UnterminatedSlices | UnmatchedSliceEnds | TrackParentLoop | BadDuration
            | UnreadableMetadata | DuplicateRank | UnmatchedCollectives | CaptureChosen
            | HostRunsAhead | BadTimeBase | NoGpuWork => Severity::Info,
            Truncated | DamagedPackets | IncrementalStateLost | MalformedEvents
            | MissingTimestamp | UnplacedEvents | UnknownCategories | EmptyFile
            | UnreadableFile => Severity::DataLoss,
            NoSuchRank | StepsUnavailable => Severity::Error,
        }
    }
}

/// One problem: its kind, severity, how many times it happened, the file
/// it concerns (when one does) and a line for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// What went wrong.
    pub kind: Kind,
    /// How bad it is (from `kind`).
    pub severity: Severity,
    /// How many events, packets or occurrences (1 for a one-off).
    pub count: u64,
    /// The file concerned, as given by the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line for people, without the file name.
    pub detail: String,
}

impl Diagnostic {
    /// A diagnostic of `kind`, `count` times, with `detail` for people.
    pub fn new(kind: Kind, count: u64, detail: impl Into<String>) -> Diagnostic {
        Diagnostic {
            kind,
            severity: kind.severity(),
            count,
            file: None,
            detail: detail.into(),
        }
    }

    /// The same, about `file`.
    pub fn in_file(mut self, file: impl fmt::Display) -> Diagnostic {
        self.file = Some(file.to_string());
        self
    }
}

/// "file: detail", or "detail" when no file is concerned.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{file}: {}", self.detail),
            None => f.write_str(&self.detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_with_and_without_a_file() {
        let d = Diagnostic::new(Kind::DamagedPackets, 3, "skipped 3 damaged packets");
        assert_eq!(d.to_string(), "skipped 3 damaged packets");
        assert_eq!(d.severity, Severity::DataLoss);
        let d = d.in_file("a/rank-0.pftrace");
        assert_eq!(d.to_string(), "a/rank-0.pftrace: skipped 3 damaged packets");
    }

    #[test]
    fn json_uses_snake_case_names_and_omits_no_file() {
        let d = Diagnostic::new(Kind::StepsUnavailable, 1, "no steps");
        let v = serde_json::to_value(&d).expect("serializes");
        assert_eq!(v["kind"], "steps_unavailable");
        assert_eq!(v["severity"], "error");
        assert_eq!(v["count"], 1);
        assert!(v.get("file").is_none());
    }
}
