//! streamscope core: the trace model, the Perfetto writer and reader, Kineto
//! (torch.profiler) import, chrome-json export and the analyses.
//!
//! This crate has no GPU and no GUI dependency; the collector, the viewer and
//! the CLI all stand on it.

pub mod error;
pub mod model;
pub mod perfetto;
pub mod kineto;
pub mod chrome;
pub mod load;
pub mod synth;
pub mod dump;
pub mod analysis;

pub use error::{Result, TraceError};
pub use model::*;
