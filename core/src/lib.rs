//! streamscope core: the trace model, the Perfetto writer and reader, Kineto
//! (torch.profiler) import, chrome-json export and the analyses.
//!
//! This crate has no GPU and no GUI dependency; the collector, the viewer and
//! the CLI all stand on it.
//!
//! The `testing` feature adds `synth` (generated FSDP-like traces) and
//! `dump` (a textual dump for round-trip tests), for tests and benchmarks.

#![warn(missing_docs)]
//!
//! The public API: the model at the crate root ([`Trace`], made by a
//! [`TraceBuilder`], with its ids and kinds), loading ([`load`]), the file
//! formats ([`perfetto`], [`kineto`], [`chrome`]), the analyses
//! ([`analysis`]), problems met on the way ([`diagnostic`]), the record ↔
//! collector contract ([`protocol`]) and the measured-GPU-metrics names
//! ([`gpu_metrics`]). Everything else is private to the crate.

pub mod analysis;
mod arg_keys;
pub mod chrome;
mod comms;
pub mod diagnostic;
#[cfg(any(test, feature = "testing"))]
pub mod dump;
mod error;
pub mod gpu_metrics;
pub mod kineto;
pub mod load;
mod model;
mod nccl;
pub mod output;
mod par;
pub mod perfetto;
pub mod protocol;
#[cfg(any(test, feature = "testing"))]
pub mod synth;

pub use diagnostic::{Diagnostic, Severity};
pub use error::{Result, TraceError};
pub use model::{
    Allocations, ArgSet, ArgValue, ClockDomain, CopyInfo, CopyKind, Counters, Device, DeviceId,
    Flow, LaunchConfig, NewSlice, Process, ProcessId, SliceClass, SliceId, SliceKind, Slices,
    StrId, StringPool, Trace, TraceBuilder, Track, TrackId, TrackKind, COMPARE_RUN_KEY, NO_ARGS,
    NO_PAYLOAD,
};
