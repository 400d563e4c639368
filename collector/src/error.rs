//! Typed errors of the collector (thiserror, in the style of core's
//! `TraceError`). They end as one `streamscope: ...` line on the job's
//! stderr (the collector never stops the job): their `Display` is that
//! text.

use std::path::PathBuf;

use libc::c_int;

use crate::cupti_api::CuptiResult;

/// Why the collector did not start tracing (`session::start`): the job
/// then runs untraced, with "CUPTI unavailable (...)".
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A malformed capture variable.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// CUPTI missing or refusing.
    #[error(transparent)]
    Cupti(#[from] CuptiError),
    /// A signal handler could not be installed.
    #[error(transparent)]
    Signal(#[from] SignalError),
    /// The output folder cannot be created.
    #[error("cannot create {}: {source}", path.display())]
    OutputDir {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No trace file can be created in the output folder.
    #[error("cannot create a trace file in {}: {source}", dir.display())]
    TraceFile {
        /// The output folder.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The writer thread did not start.
    #[error("cannot start the writer thread: {0}")]
    WriterThread(std::io::Error),
    /// A second start in one process.
    #[error("collector initialized twice")]
    Twice,
    /// The session was set but cannot be read back.
    #[error("no session")]
    NoSession,
}

/// A malformed `STREAMSCOPE_*` variable; names it and its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The capture range.
    #[error("{var}={value}: expected cudaProfilerApi or nvtx:NAME")]
    CaptureRange {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// A delay or duration.
    #[error("{var}={value}: expected a number of seconds >= 0")]
    Seconds {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
    },
    /// Armed mode's trigger signal.
    #[error("{var}={value}: expected USR1, USR2, HUP, WINCH, URG or a signal number")]
    Signal {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
}

/// `sigaction` refused a signal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sigaction({0}) failed")]
pub struct SignalError(pub c_int);

/// CUPTI missing, too old, or refusing a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CuptiError {
    /// No libcupti could be opened.
    #[error("libcupti not found (tried {tried}; set LD_LIBRARY_PATH or STREAMSCOPE_CUPTI_LIB)")]
    NotFound {
        /// The names tried, comma-separated.
        tried: String,
    },
    /// A function the collector needs is not in this libcupti.
    #[error("libcupti has no {0}")]
    Missing(String),
    /// A call returned an error.
    #[error("{func} failed: {why} ({code})")]
    Call {
        /// The function (and its argument, when that tells more).
        func: &'static str,
        /// CUPTI's text for the code.
        why: String,
        /// The result code.
        code: CuptiResult,
    },
}

/// Armed mode's control socket and request queue.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The queue's lock was poisoned.
    #[error("internal error")]
    Poisoned,
    /// A capture is already running or waiting.
    #[error("capture {0} is already running")]
    Busy(u32),
    /// The control folder cannot be created.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The control folder cannot be inspected.
    #[error("{}: {source}", path.display())]
    Inspect {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The control folder is a link, another user's, or open to others.
    #[error("{} is not a private folder of this user (mode 0700)", .0.display())]
    NotPrivate(PathBuf),
    /// The socket cannot be bound.
    #[error("cannot bind {}: {source}", path.display())]
    Bind {
        /// The socket's path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The socket's mode cannot be set.
    #[error("cannot chmod {}: {source}", path.display())]
    Chmod {
        /// The socket's path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The thread serving the socket did not start.
    #[error("cannot start the control thread: {0}")]
    Thread(std::io::Error),
}

/// Why a GPU is not sampled (`--gpu-metrics`; the sampler process prints
/// it and writes it in the feed's status).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplerError {
    /// `streamscope-gpu-sampler` was given an argument it does not take.
    #[error("unknown argument {0:?}")]
    UnknownArgument(String),
    /// It was not given `--dir`.
    #[error("--dir DIR is required")]
    NoDir,
    /// The metric list or rate in the environment (core's check).
    #[error("{0}")]
    Settings(String),
    /// A file cannot be opened or created.
    #[error("cannot {what} {}: {why}", path.display())]
    File {
        /// "open" or "create".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        why: String,
    },
    /// Another sampler holds the GPU's lock (its pid, when it wrote one).
    #[error("sampled by {}", holder.as_ref().map_or("another process".to_string(), |p| format!("pid {p}")))]
    Locked {
        /// The holder's pid as it wrote it.
        holder: Option<String>,
    },
    /// A metric name with a NUL byte.
    #[error("bad metric name {0:?}")]
    MetricName(String),
    /// A CUPTI call failed.
    #[error("{call} failed: {why}")]
    Call {
        /// The function (or functions).
        call: &'static str,
        /// CUPTI's name of the result.
        why: String,
    },
    /// No metric asked for was accepted.
    #[error("no metric accepted; refused: {0}")]
    NoMetric(String),
    /// The sampler's configuration was refused (its own message).
    #[error("{0}")]
    Config(String),
    /// No NVIDIA driver.
    #[error("libcuda.so.1 not found (no NVIDIA driver)")]
    NoDriver,
    /// A driver without the functions needed.
    #[error("libcuda lacks cuInit or cuDeviceGetCount")]
    OldDriver,
    /// cuInit failed.
    #[error("cuInit failed (CUresult {0}): no usable GPU")]
    Init(c_int),
    /// cuDeviceGetCount failed.
    #[error("cuDeviceGetCount failed (CUresult {0})")]
    DeviceCount(c_int),
    /// The driver shows no device.
    #[error("no CUDA device visible")]
    NoDevice,
    /// Set-up failed without a context and again with the primary one.
    #[error("{first}; with the primary context current: {second}")]
    BothTries {
        /// Without a context of its own.
        first: Box<SamplerError>,
        /// With the GPU's primary context current.
        second: Box<SamplerError>,
    },
}
