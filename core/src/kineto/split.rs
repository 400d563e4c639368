//! Gzip traces read on two cores.
//!
//! Inflating and parsing tens of MB of JSON is most of a report's time, and
//! one pass cannot be shared between threads (events borrow the inflated
//! text). So the text is cut in two between two events of `traceEvents`:
//! this thread inflates the first part, then parses it straight into the
//! trace while a second thread inflates and parses the rest into a list of
//! events, which this thread then maps in file order. The builder sees the
//! same events in the same order as in one pass, so the trace is identical.
//!
//! The cut is found by its bytes (`}`, `,`, `{` with only whitespace
//! between), which could also occur inside a string or a nested array. The
//! first part must therefore parse, closed by `]}`, as a whole document
//! that ends inside `traceEvents`, which holds only if the cut sat between
//! two of its elements; otherwise (or if the rest does not parse) the joined
//! text is imported in one pass, so a wrong cut costs time, never
//! correctness, and errors are those of the one-pass import.

use crate::diagnostic::{Diagnostic, Kind};
use std::io::Read;
use std::path::Path;

use std::sync::mpsc::{Receiver, Sender};

use super::event::Event;
use super::import::{self, RestEnd};
use crate::error::{Result, TraceError};
use crate::model::Trace;

/// Below this inflated size a second thread gains too little.
const MIN_SPLIT_BYTES: usize = 1 << 20;
/// Percent of the text in the first part. This thread also maps every
/// event into the trace, so it parses less than half.
const FIRST_PERCENT: usize = 42;
/// Closes the first part into a document.
const FIRST_END: &[u8] = b"]}";
/// Opens the rest as a document continuing `traceEvents`.
const REST_START: &[u8] = br#"{"traceEvents":["#;

/// Imports gzip-compressed Kineto JSON, on two threads when it is large.
pub fn import_gzip(path: &Path, gz: &[u8]) -> Result<Trace> {
    let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    let share = if two_cores { FIRST_PERCENT } else { 100 };
    match import_gzip_with(path, gz, share) {
        Ok((t, _)) => Ok(t),
        Err(e) => {
            // A damaged or truncated stream: load the JSON it still holds.
            let mut text = Vec::new();
            let Err(gz_err) = flate2::bufread::MultiGzDecoder::new(gz).read_to_end(&mut text)
            else {
                return Err(e); // the stream is whole: the JSON error stands
            };
            match import::import(path, &text) {
                Ok(mut t) => {
                    t.diagnostics.push(
                        Diagnostic::new(
                            Kind::Truncated,
                            1,
                            format!(
                                "gzip data is truncated or corrupt ({gz_err}) after {} bytes of JSON: loaded what it held",
                                text.len()
                            ),
                        )
                        .in_file(path.display()),
                    );
                    Ok(t)
                }
                Err(_) => Err(e),
            }
        }
    }
}

/// How a trace was read (for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    OnePass,
    TwoParts,
    /// Cut, but not between two events (or not valid JSON): rejoined.
    Rejoined,
}

/// [`import_gzip`] with `first_percent` of the text in the first part (100:
/// one pass).
fn import_gzip_with(path: &Path, gz: &[u8], first_percent: usize) -> Result<(Trace, Route)> {
    let size = gzip_size_hint(gz);
    let mut decoder = flate2::bufread::MultiGzDecoder::new(gz);
    if first_percent >= 100 || size < MIN_SPLIT_BYTES {
        let mut text = Vec::with_capacity(size);
        decoder
            .read_to_end(&mut text)
            .map_err(|e| gzip_error(path, e))?;
        return Ok((import::import(path, &text)?, Route::OnePass));
    }
    let first_len = size / 100 * first_percent;
    let mut first = Vec::new();
    let mut rest = Vec::new();
    let read = read_in_two_parts(path, decoder, &mut first, first_len, &mut rest, size)?;
    let route = match read {
        Read2::Trace(trace) => return Ok((*trace, Route::TwoParts)),
        Read2::Whole => Route::OnePass,
        Read2::Rejoin => {
            first.truncate(first.len() - FIRST_END.len());
            first.push(b',');
            first.extend_from_slice(&rest[REST_START.len()..]);
            drop(rest);
            Route::Rejoined
        }
    };
    Ok((import::import(path, &first)?, route))
}

/// What [`read_in_two_parts`] made of a stream.
enum Read2 {
    Trace(Box<Trace>),
    /// No cut found: `first` holds the whole text.
    Whole,
    /// The parts did not read as expected (see the module doc): `first` and
    /// `rest` are to be joined.
    Rejoin,
}

/// Inflates about `first_len` bytes into `first` and cuts them after an
/// event; then maps `first` here while another thread inflates the rest of
/// the stream into `rest` and parses it, sending its events here in
/// batches. That thread first touches the memory of `rest` (page faults
/// cost as much as inflating), while this one inflates `first`.
fn read_in_two_parts<'t>(
    path: &Path,
    mut decoder: impl Read + Send,
    first: &'t mut Vec<u8>,
    first_len: usize,
    rest: &'t mut Vec<u8>,
    total_bytes: usize,
) -> Result<Read2> {
    std::thread::scope(|s| {
        let (start, started) = std::sync::mpsc::channel::<(Vec<u8>, _)>();
        let (to_mapper, batches) = std::sync::mpsc::channel();
        let (to_parser, spent) = std::sync::mpsc::channel();
        let rest_len = total_bytes.saturating_sub(first_len) + 64 * 1024;
        let worker = s.spawn(move || {
            rest.resize(rest_len, 0);
            rest.clear();
            // The text after the cut, then the stream; none when no cut.
            let Ok((tail, decoder)) = started.recv() else {
                return Ok(None);
            };
            rest.extend_from_slice(REST_START);
            rest.extend_from_slice(&tail);
            read_rest(decoder, rest, to_mapper, spent)
        });
        first.reserve_exact(first_len + FIRST_END.len());
        (&mut decoder)
            .take(first_len as u64)
            .read_to_end(first)
            .map_err(|e| gzip_error(path, e))?;
        let cut = if first.len() == first_len {
            find_cut(first)
        } else {
            None
        };
        let Some(cut) = cut else {
            drop(start);
            decoder
                .read_to_end(first)
                .map_err(|e| gzip_error(path, e))?;
            return Ok(Read2::Whole);
        };
        let tail = first[cut + 1..].to_vec();
        first.truncate(cut);
        first.extend_from_slice(FIRST_END);
        // A send fails only if the worker panicked: its join says so.
        let _ = start.send((tail, decoder));
        let first: &'t [u8] = first;
        let mut first_part = import::first_part(path, first, total_bytes);
        if let Some(f) = first_part.as_mut() {
            for batch in &batches {
                f.map_rest(&batch);
                // Back to be freed by the thread that allocated it (or
                // here, once that thread is done).
                let _ = to_parser.send(batch);
            }
        }
        drop(batches);
        let rest_end = match worker.join() {
            Ok(r) => r.map_err(|e| gzip_error(path, e))?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok(match (first_part, rest_end) {
            (Some(f), Some(r)) => Read2::Trace(Box::new(f.finish(r))),
            _ => Read2::Rejoin,
        })
    })
}

/// Inflates the rest of the stream after the text already in `text`, then
/// parses it, sending its events to `to_mapper` (`None` when it does not
/// parse).
fn read_rest<'t>(
    mut decoder: impl Read,
    text: &'t mut Vec<u8>,
    to_mapper: Sender<Vec<Event<'t>>>,
    spent: Receiver<Vec<Event<'t>>>,
) -> std::io::Result<Option<RestEnd<'t>>> {
    decoder.read_to_end(text)?;
    let text: &'t [u8] = text;
    Ok(import::rest_part(text, to_mapper, spent))
}

fn gzip_error(path: &Path, e: std::io::Error) -> TraceError {
    crate::load::gzip_error(path, e)
}

/// The offset of the `,` of the last `}` `,` `{` (whitespace allowed
/// between) in `text`: probably the boundary between two events.
fn find_cut(text: &[u8]) -> Option<usize> {
    let before = |end: usize| {
        text[..end]
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map(|i| (i, text[i]))
    };
    let mut end = text.len();
    while let Some(open) = text[..end].iter().rposition(|&b| b == b'{') {
        if let Some((comma, b',')) = before(open) {
            if let Some((_, b'}')) = before(comma) {
                return Some(comma);
            }
        }
        end = open;
    }
    None
}

/// Inflated size from the gzip trailer (ISIZE, the size mod 2^32 of the
/// last member), bounded so a corrupt trailer cannot ask for absurd memory.
fn gzip_size_hint(gz: &[u8]) -> usize {
    let fallback = gz.len().saturating_mul(8);
    let Some(tail) = gz.len().checked_sub(4).and_then(|i| gz.get(i..)) else {
        return fallback;
    };
    let isize = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
    if isize >= gz.len() && isize <= gz.len().saturating_mul(64) {
        isize
    } else {
        fallback
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::PathBuf;

    use super::*;
    use crate::dump::dump;

    fn hta(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/hta")
            .join(rel)
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).expect("in-memory write");
        gz.finish().expect("in-memory gzip")
    }

    /// Imports `gz` in one pass and cut at several shares; every cut
    /// import must equal the one-pass trace (and its dump) exactly.
    fn assert_same_as_one_pass(name: &str, gz: &[u8], expected: Route) {
        let path = Path::new(name);
        let (one, route) = import_gzip_with(path, gz, 100).expect("one pass");
        assert_eq!(route, Route::OnePass);
        let one_dump = dump(&one);
        for share in [FIRST_PERCENT, 10, 50, 90] {
            let (cut, route) = import_gzip_with(path, gz, share).expect("two parts");
            assert_eq!(route, expected, "{name} at {share}%");
            assert_eq!(dump(&cut), one_dump, "{name} at {share}%");
            assert!(cut == one, "{name} at {share}%: same model");
        }
    }

    #[test]
    fn hta_traces_read_in_two_parts_equal_one_pass() {
        for rel in [
            "df_index_resolver/df_index_resolver.json.gz",
            "nccl_parser_config/nccl_data.json.gz",
            "trace_filter/sampled_rank-0.json.gz",
            "trace_filter/sampled_rank-1.json.gz",
        ] {
            let gz = std::fs::read(hta(rel)).expect("read HTA trace");
            assert_same_as_one_pass(rel, &gz, Route::TwoParts);
        }
    }

    /// A trace of `n` kernels (with args), padded past the split threshold.
    fn synthetic(n: usize, device_props: &str, kernel_extra: &str) -> String {
        let mut events = Vec::new();
        for i in 0..n {
            events.push(format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k{}", "pid": 0, "tid": 7,
  "ts": {}.5, "dur": 3, "args": {{"device": 0, "stream": 7, "correlation": {i},
  "grid": [1, 2, 3], "block": [4, 5, 6]{kernel_extra}}}}}"#,
                i % 13,
                1000 + i
            ));
            events.push(format!(
                r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
  "ts": {}, "dur": 1, "args": {{"correlation": {i}}}}}"#,
                999 + i
            ));
            events.push(r#"{"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1, "cat": "ac2g", "name": "ac2g", "bp": "e"}"#.to_string());
            events.push("17".to_string());
        }
        format!(
            r#"{{"schemaVersion": 1, "deviceProperties": [{device_props}],
"traceEvents": [
{}
], "traceName": "synthetic", "baseTimeNanoseconds": 1700000000000000000}}"#,
            events.join(",\n")
        )
    }

    #[test]
    fn synthetic_trace_in_two_parts_counts_malformed_and_keys_after_events() {
        let json = synthetic(5000, r#"{"id": 0, "name": "X"}"#, "");
        assert!(json.len() > MIN_SPLIT_BYTES);
        let gz = gzip(json.as_bytes());
        assert_same_as_one_pass("synthetic.json.gz", &gz, Route::TwoParts);
        let (t, _) = import_gzip_with(Path::new("s.json.gz"), &gz, 50).expect("import");
        assert_eq!(t.slices.len(), 10_000);
        assert!(
            t.diagnostics
                .iter()
                .any(|d| d.kind == crate::diagnostic::Kind::MalformedEvents && d.count == 5000),
            "{:?}",
            t.diagnostics
        );
        assert!(t
            .slices
            .start_ns
            .iter()
            .all(|&s| s > 1_700_000_000_000_000_000));
    }

    #[test]
    fn a_cut_inside_nested_objects_or_another_array_is_rejoined() {
        // Events separated by numbers, each holding `},{` in its args: the
        // only cuts found are inside an event.
        // (Varied, so that gzip's ratio stays below the size hint's bound.)
        let events: Vec<String> = (0..20_000)
            .map(|i| {
                format!(
                    r#"{{"ph": "X", "cat": "cpu_op", "name": "op{}", "pid": 1, "tid": 1,
  "ts": {i}, "dur": 1, "args": {{"x": [{{"a": {}}},{{"b": 2}}]}}}}, 3"#,
                    i % 7,
                    i * 7919 % 10007
                )
            })
            .collect();
        let nested = format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"));
        assert!(nested.len() > MIN_SPLIT_BYTES);
        let gz = gzip(nested.as_bytes());
        let (one, _) = import_gzip_with(Path::new("n.json.gz"), &gz, 100).expect("one pass");
        let (cut, route) = import_gzip_with(Path::new("n.json.gz"), &gz, 50).expect("rejoined");
        assert_eq!(route, Route::Rejoined);
        assert_eq!(dump(&cut), dump(&one));
        // deviceProperties before the events, larger than the first part:
        // the first part parses, but ends outside traceEvents.
        let props: Vec<String> = (0..100_000)
            .map(|i| format!(r#"{{"id": {}, "name": "pad"}}"#, i * 7919 % 10007 + 100))
            .collect();
        let props = props.join(",\n");
        let padded = synthetic(100, &props, "");
        let gz = gzip(padded.as_bytes());
        let (one, _) = import_gzip_with(Path::new("p.json.gz"), &gz, 100).expect("one pass");
        let (cut, route) = import_gzip_with(Path::new("p.json.gz"), &gz, 30).expect("rejoined");
        assert_eq!(route, Route::Rejoined);
        assert!(cut == one);
        assert_eq!(one.slices.len(), 200);
    }

    #[test]
    fn errors_are_the_one_pass_errors() {
        let json = synthetic(5000, "", "");
        // Invalid JSON late in the rest, and a truncated gzip stream.
        let broken = json.replacen("\"ts\": 5990.5", "\"ts\": 5990.5,,", 1);
        assert_ne!(broken, json);
        let gz = gzip(broken.as_bytes());
        let full = gzip(json.as_bytes());
        for bad in [&gz[..], &full[..full.len() * 3 / 4]] {
            let path = Path::new("bad.json.gz");
            let one = import_gzip_with(path, bad, 100).expect_err("one pass fails");
            let cut = import_gzip_with(path, bad, 40).expect_err("two parts fail");
            assert_eq!(cut.to_string(), one.to_string());
            assert!(one.to_string().contains("bad.json.gz"), "{one}");
        }
    }

    #[test]
    fn cut_is_the_comma_between_objects() {
        let text = br#"[{"a": {"b": 1}} ,
  {"c": 2}, 7, {"d": 2}"#;
        let cut = find_cut(text).expect("a cut");
        assert_eq!(text[cut], b',');
        assert_eq!(&text[cut - 2..cut], b"} ");
        // Bytes only: a cut inside a string is found too (and then rejected
        // by parsing).
        assert_eq!(find_cut(br#"[{"a": 1} {"c": "},{"}"#), Some(18));
        assert_eq!(find_cut(b"[1, 2, {\"a\": 3}]"), None);
    }
}
