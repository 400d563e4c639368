//! Perfetto TrackEvent protobuf: streaming writer and reader.
