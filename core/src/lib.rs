//! streamscope core: the trace model, the Perfetto writer and reader, Kineto
//! (torch.profiler) import, chrome-json export and the analyses.
//!
//! This crate has no GPU and no GUI dependency; the collector, the viewer and
//! the CLI all stand on it.
//!
//! The `testing` feature adds `synth` (generated FSDP-like traces) and
//! `dump` (a textual dump for round-trip tests), for tests and benchmarks.

#![warn(missing_docs)]

pub mod analysis;
pub mod chrome;
pub mod comms;
pub mod diagnostic;
#[cfg(any(test, feature = "testing"))]
pub mod dump;
pub mod error;
pub mod gpu_metrics;
pub mod kineto;
pub mod load;
pub mod model;
pub mod perfetto;
pub mod protocol;
#[cfg(any(test, feature = "testing"))]
pub mod synth;

pub use error::{Result, TraceError};
pub use model::*;
