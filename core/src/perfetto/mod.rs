//! Perfetto TrackEvent protobuf: streaming writer and reader.
//!
//! A trace file is a stream of `Trace.packet` fields (tag 0x0a, varint
//! length, TracePacket bytes). See `writer` for the layout streamscope
//! writes and `reader` for what it reads back; docs/TRACE-SCHEMA.md
//! describes both for users.

pub mod reader;
pub mod schema;
pub mod wire;
pub mod writer;

pub use reader::{read_file, read_stream};
pub use writer::{write_file, write_trace, PerfettoWriter};
