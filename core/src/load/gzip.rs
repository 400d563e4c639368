//! Gzip-compressed traces: what a gzip file holds is judged by its first
//! inflated bytes, and a compressed Perfetto trace is inflated as it is
//! decoded (one 8 MiB chunk of inflated packets in memory, never the
//! whole inflated file next to the compressed one). Compressed Kineto
//! JSON keeps its own two-core reader (`kineto::read_bytes`).

use std::io::Read;
use std::path::Path;

use crate::diagnostic::{Diagnostic, Kind};
use crate::error::{Result, TraceError};
use crate::model::Trace;

/// The first two bytes of every gzip member.
pub(crate) const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether `head` starts a gzip stream.
pub(crate) fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(&MAGIC)
}

/// Up to `limit` inflated bytes from the start of `gz` (the first bytes of
/// a gzip file; the rest of the stream may be missing). Errors only when
/// not one byte inflates.
pub(crate) fn inflate_head(path: &Path, gz: &[u8], limit: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    // `gz` is often only the file's first bytes, so a stream cut short is
    // expected: the bytes inflated before an error are the prefix.
    match flate2::read::MultiGzDecoder::new(gz)
        .take(limit)
        .read_to_end(&mut out)
    {
        Err(e) if out.is_empty() => Err(TraceError::gzip(path, e)),
        _ => Ok(out),
    }
}

/// Whether an inflate error is the data's fault (corrupt or cut stream)
/// rather than the file system's.
fn is_data_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), InvalidInput | InvalidData | UnexpectedEof)
}

/// Inflates `inner`, ending (as if at the end of the file) at the first
/// corrupt or cut place, which it keeps to report.
struct Salvaging<R: Read> {
    inner: flate2::read::MultiGzDecoder<R>,
    inflated: u64,
    error: Option<std::io::Error>,
}

impl<R: Read> Read for Salvaging<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.error.is_some() {
            return Ok(0);
        }
        match self.inner.read(buf) {
            Ok(n) => {
                self.inflated += n as u64;
                Ok(n)
            }
            Err(e) if is_data_error(&e) => {
                self.error = Some(e);
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }
}

/// Reads a gzip-compressed Perfetto trace from `input` (the whole file,
/// from its first byte). A stream that is cut or corrupt part-way loads
/// the packets inflated before that place, with a warning (as a cut plain
/// .pftrace or .json.gz does); one that holds no whole packet before it is
/// an error naming the file.
pub(crate) fn read_perfetto<R: Read>(path: &Path, input: R) -> Result<Trace> {
    let mut s = Salvaging {
        inner: flate2::read::MultiGzDecoder::new(input),
        inflated: 0,
        error: None,
    };
    let read = crate::perfetto::read_stream(path, &mut s);
    match (read, s.error) {
        (Ok(t), None) => Ok(t),
        (Ok(mut t), Some(e)) => {
            t.add_diagnostics([
                Diagnostic::new(
                    Kind::Truncated,
                    1,
                    format!(
                        "gzip data is truncated or corrupt ({e}) after {} bytes of trace: loaded what it held",
                        s.inflated
                    ),
                )
                .in_file(path.display()),
            ]);
            Ok(t)
        }
        (Err(_), Some(e)) => Err(TraceError::gzip(path, e)),
        (Err(e), None) => Err(e),
    }
}
