//! Perfetto TrackEvent protobuf: streaming writer and reader.
//!
//! A trace file is a stream of `Trace.packet` fields (tag 0x0a, varint
//! length, TracePacket bytes). See `writer` for the layout streamscope
//! writes and `reader` for what it reads back; docs/TRACE-SCHEMA.md
//! describes both for users.

mod reader;
/// The field numbers and interned names streamscope writes: public with
/// the `testing` feature, for tests that craft input.
#[cfg(any(test, feature = "testing"))]
pub mod schema;
#[cfg(not(any(test, feature = "testing")))]
mod schema;
/// The protobuf wire format (varints, length-delimited fields): public
/// with the `testing` feature, for tests that craft damaged input.
#[cfg(any(test, feature = "testing"))]
pub mod wire;
#[cfg(not(any(test, feature = "testing")))]
mod wire;
mod writer;

pub use reader::{read_file, read_stream};
pub use writer::{time_offset_ns, write_file, write_new_file, write_trace, PerfettoWriter};
