//! Long runs of whitespace between JSON tokens, cut short.
//!
//! Whitespace outside strings means nothing in JSON, but the piece reader
//! (`split`) holds the text between two events whole and a one-pass import
//! holds all of it: a gzip file of a few MB that inflates to gigabytes of
//! blanks would otherwise be held whole. [`Blanks`] keeps the first
//! [`KEEP`] bytes of each run of whitespace outside strings and drops the
//! rest, so what is held is bounded by the events themselves, whatever the
//! padding. Strings (and their escapes) pass untouched. The piece reader
//! applies it to a piece only once the piece has grown far past its size
//! (its fast path does not pay for it); one-pass inflations read through
//! [`Squeeze`].

use std::io::{self, Read};

use super::top_level::TopLevel;

/// Bytes of one run of whitespace (outside strings) that are kept: enough
/// that no real trace's indentation is touched.
pub(crate) const KEEP: usize = 4096;

/// A reader that passes JSON text through with every run of whitespace
/// outside strings cut to [`KEEP`] bytes, and for a Kineto document
/// ([`Squeeze::kineto`]) the top-level values the import does not read cut
/// to their shell ([`TopLevel`]).
pub(crate) struct Squeeze<R> {
    inner: R,
    top: Option<TopLevel>,
    blanks: Blanks,
}

impl<R: Read> Squeeze<R> {
    /// Whitespace runs cut, nothing else (any JSON text).
    pub(crate) fn new(inner: R) -> Squeeze<R> {
        Squeeze {
            inner,
            top: None,
            blanks: Blanks::default(),
        }
    }

    /// A Kineto document: whitespace runs cut, and the top-level values
    /// the import does not read cut to their shell.
    pub(crate) fn kineto(inner: R) -> Squeeze<R> {
        Squeeze {
            top: Some(TopLevel::document()),
            ..Squeeze::new(inner)
        }
    }
}

/// Where JSON text stands, from a point outside any string: in a string
/// (after a backslash), or in a run of whitespace of so many bytes.
#[derive(Debug, Default)]
pub(crate) struct Blanks {
    in_string: bool,
    escaped: bool,
    /// Whitespace bytes in the current run so far.
    run: usize,
}

impl Blanks {
    /// Keeps the bytes of `buf[..n]` that are not excess whitespace, in
    /// place; how many are kept. Inside a string it jumps from quote or
    /// backslash to the next (memchr); bytes move only once one was dropped.
    pub(crate) fn filter(&mut self, buf: &mut [u8], n: usize) -> usize {
        let (mut r, mut w) = (0, 0);
        while r < n {
            let (end, keep) = if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    (r + 1, true)
                } else {
                    match memchr::memchr2(b'"', b'\\', &buf[r..n]) {
                        Some(i) => {
                            if buf[r + i] == b'"' {
                                self.in_string = false;
                            } else {
                                self.escaped = true;
                            }
                            (r + i + 1, true)
                        }
                        None => (n, true),
                    }
                }
            } else {
                let b = buf[r];
                if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                    self.run += 1;
                    (r + 1, self.run <= KEEP)
                } else {
                    self.run = 0;
                    self.in_string = b == b'"';
                    (r + 1, true)
                }
            };
            if keep {
                if w != r {
                    buf.copy_within(r..end, w);
                }
                w += end - r;
            }
            r = end;
        }
        w
    }
}

use crate::error::Refused;

/// The error of a document whose value under `key`, which the import
/// reads, holds more than [`READ_VALUE_MAX`](super::top_level::READ_VALUE_MAX) bytes.
pub(crate) fn oversized(key: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        Refused(format!(
            "top-level key {key:?} holds more than {} MiB (kilobytes in a torch.profiler trace): refused",
            super::top_level::READ_VALUE_MAX >> 20
        )),
    )
}

impl<R: Read> Read for Squeeze<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // A read that keeps nothing (all excess blanks) reads again, so 0
        // still means the end.
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let n = match &mut self.top {
                Some(top) => {
                    let n = top.filter(buf, n);
                    if let Some(key) = top.oversized() {
                        return Err(oversized(key));
                    }
                    n
                }
                None => n,
            };
            let kept = self.blanks.filter(buf, n);
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes of `fill`, read lazily.
    struct Blanks {
        left: u64,
        fill: u8,
    }

    impl Read for Blanks {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = (buf.len() as u64).min(self.left) as usize;
            buf[..n].fill(self.fill);
            self.left -= n as u64;
            Ok(n)
        }
    }

    fn squeezed(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        // Odd chunk sizes: state must carry across reads.
        let mut r = Squeeze::new(io::BufReader::with_capacity(7, text));
        r.read_to_end(&mut out).expect("in memory");
        out
    }

    #[test]
    fn ordinary_json_passes_untouched() {
        let text = br#"{"traceEvents": [
  {"name": "a   b", "ts": 1, "args": {"s": "q\"   \\"}},
  {"name": "\\", "ts": 2}
]}"#;
        assert_eq!(squeezed(text), text.to_vec());
    }

    #[test]
    fn long_runs_outside_strings_are_cut_and_strings_kept() {
        let pad = " \n\t\r".repeat(5000);
        let inner = " ".repeat(3 * KEEP);
        let text = format!(r#"{{"a":{pad}"x{inner}y",{pad}"b":1}}{pad}"#);
        let out = squeezed(text.as_bytes());
        let expected = format!(
            r#"{{"a":{}"x{inner}y",{}"b":1}}{}"#,
            &pad[..KEEP],
            &pad[..KEEP],
            &pad[..KEEP]
        );
        assert_eq!(String::from_utf8(out).expect("utf-8"), expected);
        let v: serde_json::Value = serde_json::from_str(&expected).expect("still JSON");
        assert_eq!(v["a"].as_str().map(str::len), Some(2 + 3 * KEEP));
    }

    #[test]
    fn a_quarter_gigabyte_of_blanks_comes_out_as_a_few_kilobytes() {
        let head = io::Cursor::new(br#"{"traceEvents":["#.to_vec());
        let tail = io::Cursor::new(b"]}".to_vec());
        let blanks = Blanks {
            left: 1 << 28,
            fill: b' ',
        };
        let mut r = Squeeze::new(head.chain(blanks).chain(tail));
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf).expect("in memory");
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            assert!(out.len() < 2 * KEEP, "{} bytes kept", out.len());
        }
        assert_eq!(out.len(), 16 + KEEP + 2);
    }
}
