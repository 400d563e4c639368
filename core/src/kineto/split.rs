//! Gzip traces read piece by piece, on two cores.
//!
//! The inflated text of a large trace (hundreds of MB for a million events)
//! is never held whole: it is inflated a quarter of a MiB at a time and cut
//! between two events of `traceEvents` into pieces that are each a document
//! of their own (`{"traceEvents":[` before the events of all but the first,
//! `]}` after those of all but the last). A helper thread inflates the
//! pieces; this thread parses them in file order straight into the trace,
//! and the helper, whenever it is ahead, parses the furthest piece not yet
//! taken into batches of events that this thread maps when it gets there
//! (see `pipeline`). The builder sees the same events in the same order as
//! in one pass, so the trace is identical.
//!
//! A cut is found by its bytes (`}`, `,`, `{` with only whitespace
//! between), which could also occur inside a string or a nested array. A
//! piece must therefore parse as a whole document that ends inside
//! `traceEvents` (the last one, as any document), which holds only if its
//! cut sat between two of its elements; otherwise (or if a piece does not
//! parse) the text is inflated again and imported in one pass, so a wrong
//! cut costs time and memory, never correctness, and errors are those of
//! the one-pass import.

use crate::diagnostic::{Diagnostic, Kind};
use std::io::Read;
use std::path::Path;

use super::squeeze::Squeeze;
use super::{import, KeepArgs};
use crate::error::{Result, TraceError};
use crate::model::Trace;
use cutter::{Cutter, PieceBuf};
use pipeline::read_pieces;

/// A piece this many times its size without a cut has its whitespace runs
/// cut ([`Blanks`]).
const SQUEEZE_FROM: usize = 4;
/// Below this inflated size a second thread gains too little.
const MIN_SPLIT_BYTES: usize = 1 << 20;
/// Inflated text per piece: small enough that the first, inflated before
/// the second thread starts, costs little, that neither thread waits long
/// for the other at the end, and that a round's buffers (touched, so
/// faulted in, once) stay a few MiB; large enough that handing a piece
/// over costs nothing (a piece parses in about a third of a millisecond).
const PIECE_BYTES: usize = 1 << 18;
/// Pieces per round (their buffers are reused from round to round).
const ROUND_PIECES: usize = 12;
/// Published pieces nobody took from which the helper takes the last.
const CLAIM_AT: usize = 2;
/// Closes a piece but the last into a document.
const PIECE_END: &[u8] = b"]}";
/// Opens a piece but the first as a document continuing `traceEvents`.
const PIECE_START: &[u8] = br#"{"traceEvents":["#;

/// Imports gzip-compressed Kineto JSON, piece by piece on two threads when
/// it is large.
pub fn import_gzip(path: &Path, gz: &[u8], keep: KeepArgs) -> Result<Trace> {
    let split = Split::DEFAULT;
    match import_gzip_split(path, gz, Some(split), keep) {
        Ok((t, _)) => Ok(t),
        Err(e) => {
            // A damaged or truncated stream: load the JSON it still holds.
            let mut text = Vec::new();
            let Err(gz_err) = inflate(gz).read_to_end(&mut text) else {
                return Err(e); // the stream is whole: the JSON error stands
            };
            match import::import_keeping(path, &text, keep) {
                Ok(mut t) => {
                    t.add_diagnostics([
                        Diagnostic::new(
                            Kind::Truncated,
                            1,
                            format!(
                                "gzip data is truncated or corrupt ({gz_err}) after {} bytes of JSON: loaded what it held",
                                text.len()
                            ),
                        )
                        .in_file(path.display()),
                    ]);
                    Ok(t)
                }
                Err(_) => Err(e),
            }
        }
    }
}

/// Imports a regular gzip file of `len` bytes, `head` (its first bytes,
/// already read) then `rest`, inflating it piece by piece as it is read.
/// Whatever does not go that way (a damaged stream, pieces that do not
/// read, a text too small to split) reads the file again, whole, through
/// [`import_gzip`], so errors and what a damaged file still loads are
/// exactly [`import_gzip`]'s.
pub fn import_gzip_file(
    path: &Path,
    head: Vec<u8>,
    rest: impl std::io::Read + Send,
    len: usize,
    keep: KeepArgs,
) -> Result<Trace> {
    import_gzip_file_route(path, head, rest, len, keep).map(|(t, _)| t)
}

/// [`import_gzip_file`], and how the text was read: [`Route::Pieces`] as
/// it was read, [`Route::OnePass`] when it ended within its first piece,
/// [`Route::Again`] when the file was read again through [`import_gzip`].
fn import_gzip_file_route(
    path: &Path,
    head: Vec<u8>,
    rest: impl std::io::Read + Send,
    len: usize,
    keep: KeepArgs,
) -> Result<(Trace, Route)> {
    let again = || {
        let gz = std::fs::read(path).map_err(|e| TraceError::io(path, e))?;
        Ok((import_gzip(path, &gz, keep)?, Route::Again))
    };
    let size = file_size_hint(path, len);
    if size < MIN_SPLIT_BYTES {
        return again();
    }
    let text =
        std::io::BufReader::with_capacity(READ_BYTES, std::io::Cursor::new(head).chain(rest));
    let decoder = flate2::bufread::MultiGzDecoder::new(text);
    match read_pieces(path, decoder, size, Split::DEFAULT, keep, |e| {
        gzip_error(path, e)
    }) {
        Ok(Outcome::Trace(t)) => Ok((*t, Route::Pieces)),
        Ok(Outcome::Whole(text)) => {
            Ok((import::import_keeping(path, &text, keep)?, Route::OnePass))
        }
        Ok(Outcome::Again) | Err(_) => again(),
    }
}

/// The JSON text of a gzip stream, its long runs of whitespace cut short
/// ([`Squeeze`]), for an inflation held whole: what is held of it is
/// bounded by its events, whatever the padding.
pub(super) fn inflate<R: std::io::BufRead>(gz: R) -> Squeeze<flate2::bufread::MultiGzDecoder<R>> {
    Squeeze::kineto(flate2::bufread::MultiGzDecoder::new(gz))
}

/// Compressed bytes read at a time by [`import_gzip_file`].
const READ_BYTES: usize = 1 << 16;

/// [`gzip_size_hint`] of the gzip file at `path`, `len` bytes long, from
/// its last four bytes.
fn file_size_hint(path: &Path, len: usize) -> usize {
    use std::io::{Seek, SeekFrom};
    let tail = std::fs::File::open(path).and_then(|mut f| {
        let mut tail = [0u8; 4];
        f.seek(SeekFrom::End(-4))?;
        f.read_exact(&mut tail)?;
        Ok(tail)
    });
    match tail {
        Ok(tail) => size_hint(Some(tail), len),
        Err(_) => size_hint(None, len),
    }
}

/// How the text is cut into pieces, and shared between the threads.
#[derive(Debug, Clone, Copy)]
struct Split {
    /// Inflated text per piece.
    piece_bytes: usize,
    /// Pieces per round.
    round_pieces: usize,
    /// Published pieces nobody took from which the helper takes the last
    /// (tests set 1 to have it parse as much as it can).
    claim_at: usize,
}

impl Split {
    const DEFAULT: Split = Split {
        piece_bytes: PIECE_BYTES,
        round_pieces: ROUND_PIECES,
        claim_at: CLAIM_AT,
    };
}

/// How a trace was read (for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    OnePass,
    Pieces,
    /// Cut, but not between two events (or not valid JSON): inflated again
    /// and read in one pass.
    Again,
}

/// Imports plain Kineto JSON of `len` bytes from `reader` (its first bytes
/// `head`, already read, then the rest of the file at `path`), piece by piece
/// on two threads when it is large; when the pieces do not read (see the
/// module doc), the file is read again, whole, and imported in one pass.
pub fn import_plain_file(
    path: &Path,
    head: Vec<u8>,
    rest: impl std::io::Read + Send,
    len: usize,
    keep: KeepArgs,
) -> Result<Trace> {
    let io = |e| TraceError::io(path, e);
    let split = Split::DEFAULT;
    let whole = |bytes: &[u8]| super::read_bytes_keeping(path, bytes, keep);
    if len < MIN_SPLIT_BYTES {
        let mut bytes = head;
        let mut rest = rest;
        rest.read_to_end(&mut bytes).map_err(io)?;
        return whole(&bytes);
    }
    let reader = std::io::Cursor::new(head).chain(rest);
    match read_pieces(path, reader, len, split, keep, io)? {
        Outcome::Trace(t) => Ok(*t),
        Outcome::Whole(text) => whole(&text),
        // Read again through the squeeze: padding and the top-level values
        // the import does not read are not held.
        Outcome::Again => {
            let mut text = Vec::new();
            let file = std::fs::File::open(path).map_err(io)?;
            Squeeze::kineto(std::io::BufReader::new(file))
                .read_to_end(&mut text)
                .map_err(io)?;
            whole(&text)
        }
    }
}

/// [`import_gzip`] cut as `split` says (`None`: one pass), all arguments kept.
#[cfg(test)]
fn import_gzip_with(path: &Path, gz: &[u8], split: Option<Split>) -> Result<(Trace, Route)> {
    import_gzip_split(path, gz, split, KeepArgs::All)
}

/// [`import_gzip`] cut as `split` says (`None`: one pass).
fn import_gzip_split(
    path: &Path,
    gz: &[u8],
    split: Option<Split>,
    keep: KeepArgs,
) -> Result<(Trace, Route)> {
    let size = gzip_size_hint(gz);
    let one_pass = || {
        let mut text = Vec::with_capacity(size);
        inflate(gz)
            .read_to_end(&mut text)
            .map_err(|e| gzip_error(path, e))?;
        import::import_keeping(path, &text, keep)
    };
    let Some(split) = split.filter(|_| size >= MIN_SPLIT_BYTES) else {
        return Ok((one_pass()?, Route::OnePass));
    };
    let decoder = flate2::bufread::MultiGzDecoder::new(gz);
    match read_pieces(path, decoder, size, split, keep, |e| gzip_error(path, e))? {
        Outcome::Trace(t) => Ok((*t, Route::Pieces)),
        Outcome::Whole(text) => Ok((import::import_keeping(path, &text, keep)?, Route::OnePass)),
        Outcome::Again => Ok((one_pass()?, Route::Again)),
    }
}

/// What [`read_pieces`] made of a stream.
enum Outcome {
    Trace(Box<Trace>),
    /// The text ended within the first piece: here it is, whole.
    Whole(Vec<u8>),
    /// A piece did not read as expected (see the module doc).
    Again,
}

fn gzip_error(path: &Path, e: std::io::Error) -> TraceError {
    TraceError::gzip(path, e)
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
    let tail = gz
        .len()
        .checked_sub(4)
        .and_then(|i| gz.get(i..))
        .and_then(|t| <[u8; 4]>::try_from(t).ok());
    size_hint(tail, gz.len())
}

/// The inflated size a gzip stream of `gz_len` bytes gives, from its
/// trailer's `tail` (ISIZE, the size modulo 2^32) when that is plausible,
/// else a guess.
fn size_hint(tail: Option<[u8; 4]>, gz_len: usize) -> usize {
    let fallback = gz_len.saturating_mul(8);
    let Some(tail) = tail else {
        return fallback;
    };
    let isize = u32::from_le_bytes(tail) as usize;
    if isize >= gz_len && isize <= gz_len.saturating_mul(64) {
        isize
    } else {
        fallback
    }
}

mod cutter;
mod pipeline;

#[cfg(test)]
mod differential;

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

    #[test]
    fn padding_between_events_is_not_held_by_a_piece() {
        let event = |n: &str| {
            format!(r#"{{"ph":"X","cat":"cpu_op","name":"{n}","ts":1,"dur":1,"pid":1,"tid":1}}"#)
        };
        let head = format!(r#"{{"traceEvents":[{},"#, event("a"));
        let tail = format!(r#"{},{}]}}"#, event("b"), event("c"));
        let pad = std::io::repeat(b' ').take(48 << 20);
        let text = std::io::Cursor::new(head.into_bytes())
            .chain(pad)
            .chain(std::io::Cursor::new(tail.into_bytes()));
        let len = 1 << 16;
        let mut cutter = Cutter::new(text);
        let mut buf = PieceBuf::default();
        let (mut held, mut pieces) = (0, Vec::new());
        loop {
            let last = cutter.piece(&mut buf, len).expect("in memory");
            held = held.max(buf.bytes.len());
            pieces.push(String::from_utf8_lossy(buf.text()).into_owned());
            if last {
                break;
            }
        }
        // The piece grows to SQUEEZE_FROM pieces, then by one at a time.
        assert!(held <= (SQUEEZE_FROM + 2) * len, "{held} bytes held");
        let all = pieces.concat();
        assert!(all.contains("\"a\"") && all.contains("\"b\"") && all.contains("\"c\""));
        // A long event (no whitespace) still doubles as before.
        let long = format!(r#"{{"traceEvents":[{}]}}"#, event(&"x".repeat(40 * len)));
        let mut cutter = Cutter::new(std::io::Cursor::new(long.clone().into_bytes()));
        let mut buf = PieceBuf::default();
        assert!(cutter.piece(&mut buf, len).expect("in memory"));
        assert_eq!(buf.text(), long.as_bytes());
    }

    /// Pieces of `piece_bytes`, three a round, the helper parsing all it
    /// can.
    fn split(piece_bytes: usize) -> Split {
        Split {
            piece_bytes,
            round_pieces: 3,
            claim_at: 1,
        }
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
        let (one, route) = import_gzip_with(path, gz, None).expect("one pass");
        assert_eq!(route, Route::OnePass);
        let one_dump = dump(&one);
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(gz)
            .read_to_end(&mut text)
            .expect("inflate");
        let text_len = text.len();
        drop(text);
        for (piece_bytes, round_pieces, claim_at) in [
            (PIECE_BYTES, ROUND_PIECES, CLAIM_AT),
            (100 << 10, 2, 1),
            (150 << 10, 5, 2),
            (87 << 10, 7, 1),
        ] {
            let split = Split {
                piece_bytes,
                round_pieces,
                claim_at,
            };
            let (cut, route) = import_gzip_with(path, gz, Some(split)).expect("pieces");
            // A text that ends within the first piece is read in one pass.
            let expected = if text_len <= piece_bytes {
                Route::OnePass
            } else {
                expected
            };
            assert_eq!(route, expected, "{name} in {split:?}");
            assert_eq!(dump(&cut), one_dump, "{name} in {split:?}");
            assert!(cut == one, "{name} in {split:?}: same model");
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
            assert_same_as_one_pass(rel, &gz, Route::Pieces);
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
        assert_same_as_one_pass("synthetic.json.gz", &gz, Route::Pieces);
        let (t, _) =
            import_gzip_with(Path::new("s.json.gz"), &gz, Some(split(128 << 10))).expect("import");
        assert_eq!(t.slices().len(), 10_000);
        assert!(
            t.diagnostics()
                .iter()
                .any(|d| d.kind == crate::diagnostic::Kind::MalformedEvents && d.count == 5000),
            "{:?}",
            t.diagnostics()
        );
        assert!(t
            .slices()
            .start_ns()
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
        let (one, _) = import_gzip_with(Path::new("n.json.gz"), &gz, None).expect("one pass");
        let (cut, route) = import_gzip_with(Path::new("n.json.gz"), &gz, Some(split(128 << 10)))
            .expect("rejoined");
        assert_eq!(route, Route::Again);
        assert_eq!(dump(&cut), dump(&one));
        // deviceProperties before the events, larger than the first part:
        // the first part parses, but ends outside traceEvents.
        let props: Vec<String> = (0..100_000)
            .map(|i| format!(r#"{{"id": {}, "name": "pad"}}"#, i * 7919 % 10007 + 100))
            .collect();
        let props = props.join(",\n");
        let padded = synthetic(100, &props, "");
        let gz = gzip(padded.as_bytes());
        let (one, _) = import_gzip_with(Path::new("p.json.gz"), &gz, None).expect("one pass");
        let (cut, route) =
            import_gzip_with(Path::new("p.json.gz"), &gz, Some(split(77 << 10))).expect("rejoined");
        assert_eq!(route, Route::Again);
        assert!(cut == one);
        assert_eq!(one.slices().len(), 200);
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
            let one = import_gzip_with(path, bad, None).expect_err("one pass fails");
            let cut =
                import_gzip_with(path, bad, Some(split(100 << 10))).expect_err("two parts fail");
            assert_eq!(cut.to_string(), one.to_string());
            assert!(one.to_string().contains("bad.json.gz"), "{one}");
        }
    }

    /// Events whose strings hold escaped quotes, brackets and `},{`, with
    /// nested args (arrays of objects), then keys after the events.
    fn tricky(n: usize) -> String {
        let events: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"ph": "X", "cat": "cpu_op", "name": "op \"{i}\" ]}},{{[", "pid": 1, "tid": 2,
 "ts": {}.25, "dur": 2, "args": {{"s": "a\\\"}},{{\"b", "nested": [{{"x": [1, {{"y": "}},{{"}}]}}, {{"z": null}}],
 "correlation": {i}, "u": "\u00e9\n"}}}} , {{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7,
 "ts": {}, "dur": 1, "args": {{"device": 0, "stream": 7, "correlation": {i}, "grid": [1, 1, 1]}}}},
  [{{"not": "an event"}},{{"a": 1}}], {{"ph": "C", "name": "c", "pid": 1, "ts": {i}, "args": {{"v": {i}}}}}"#,
                    100 + 10 * i,
                    101 + 10 * i
                )
            })
            .collect();
        format!(
            r#"{{"schemaVersion": 1, "deviceProperties": [{{"id": 0, "name": "G"}}], "traceEvents": [
{}
], "traceName": "tricky", "baseTimeNanoseconds": 1700000000000000000}}"#,
            events.join(",")
        )
    }

    /// Reads `text` as [`read_pieces`] does; the route and the trace (the
    /// one-pass import when the pieces did not read).
    fn read_text(path: &Path, text: &str, split: Split) -> (Route, Trace) {
        match read_pieces(
            path,
            text.as_bytes(),
            text.len(),
            split,
            KeepArgs::All,
            |e| gzip_error(path, e),
        )
        .expect("read")
        {
            Outcome::Trace(t) => (Route::Pieces, *t),
            Outcome::Whole(w) => (Route::OnePass, import::import(path, &w).expect("whole")),
            Outcome::Again => (
                Route::Again,
                import::import(path, text.as_bytes()).expect("again"),
            ),
        }
    }

    #[test]
    fn pieces_cut_at_every_position_read_as_one_pass() {
        let text = tricky(8);
        let path = Path::new("tricky.json");
        let one = import::import(path, text.as_bytes()).expect("one pass");
        assert_eq!(one.slices().len(), 16);
        let one_dump = dump(&one);
        let events_at = text.find("traceEvents").expect("events");
        // Pieces of every length from inside the top level to the last
        // event: the first cut falls at every position class (strings with
        // escapes, nested args, between events) and is the last `},{`
        // before it; the pieces after it are as long.
        let mut routes = std::collections::BTreeMap::new();
        for main_len in (events_at - 40)..text.len() {
            let split = Split {
                piece_bytes: main_len,
                round_pieces: 2,
                claim_at: 1,
            };
            let (route, t) = read_text(path, &text, split);
            *routes.entry(format!("{route:?}")).or_insert(0) += 1;
            assert!(t == one, "first piece of {main_len}: same model");
            assert_eq!(dump(&t), one_dump, "first piece of {main_len}");
        }
        // Cuts between events read in pieces; cuts found inside strings or
        // nested args (most, in these events) fall back to one pass.
        assert!(
            routes["Pieces"] > 500 && routes["Again"] > 1000,
            "{routes:?}"
        );
        // Many pieces, in rounds of every size: every cut is between events.
        let text = synthetic(30, "", "");
        let one = import::import(path, text.as_bytes()).expect("one pass");
        assert_eq!(one.slices().len(), 60);
        for piece_bytes in 1..600 {
            let split = Split {
                piece_bytes,
                round_pieces: 1 + piece_bytes % 4,
                claim_at: 1 + piece_bytes % 2,
            };
            let (route, t) = read_text(path, &text, split);
            assert_eq!(route, Route::Pieces, "{split:?}");
            assert!(t == one, "{split:?}: same model");
        }
    }

    #[test]
    fn pieces_of_every_size_read_as_one_pass() {
        // Pieces of every size over events whose strings and nested args
        // hold `},{`: wherever a piece is cut, the model is the one-pass one
        // (read in pieces, or again in one pass when the cut was no
        // boundary), whichever thread parsed it.
        let text = tricky(8);
        let path = Path::new("tricky.json");
        let one = import::import(path, text.as_bytes()).expect("one pass");
        let mut routes = std::collections::BTreeMap::new();
        for piece_bytes in (100..text.len()).step_by(7) {
            for claim_at in [1, 2] {
                let split = Split {
                    piece_bytes,
                    round_pieces: 1 + piece_bytes % 5,
                    claim_at,
                };
                let (route, t) = read_text(path, &text, split);
                *routes.entry(format!("{route:?}")).or_insert(0) += 1;
                assert!(t == one, "{split:?}: same model");
            }
        }
        assert!(routes.contains_key("Pieces"), "{routes:?}");
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
