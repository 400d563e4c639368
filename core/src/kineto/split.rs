//! Gzip traces read piece by piece, on two cores.
//!
//! The inflated text of a large trace (hundreds of MB for a million events)
//! is never held whole: it is inflated a few MiB at a time and cut between
//! two events of `traceEvents` into pieces that are each a document of
//! their own (`{"traceEvents":[` before the events of all but the first,
//! `]}` after those of all but the last). Pieces come in rounds of two:
//! this thread parses the first straight into the trace while a second
//! thread inflates the other and the next round's first piece, then parses
//! the other, sending the events the importer maps in batches, which this
//! thread then maps in file order. The last piece, when large, is cut in
//! two the same way and read as a round. The builder sees the same events
//! in the same order as in one pass, so the trace is identical.
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

use super::import::{self, Pieces};
use crate::error::{Result, TraceError};
use crate::model::Trace;

/// Below this inflated size a second thread gains too little.
const MIN_SPLIT_BYTES: usize = 1 << 20;
/// Inflated text per round of two pieces.
const ROUND_BYTES: usize = 8 << 20;
/// Percent of a round's text in the piece this thread parses. It also maps
/// every event into the trace, but the other thread also inflates both
/// pieces; since the fast reader (`document::scan`) made parsing cheaper
/// than mapping, half and half is as fast as any split measured (42 to 58).
const MAIN_PERCENT: usize = 50;
/// Closes a piece but the last into a document.
const PIECE_END: &[u8] = b"]}";
/// Opens a piece but the first as a document continuing `traceEvents`.
const PIECE_START: &[u8] = br#"{"traceEvents":["#;

/// Imports gzip-compressed Kineto JSON, piece by piece on two threads when
/// it is large.
pub fn import_gzip(path: &Path, gz: &[u8]) -> Result<Trace> {
    let split = Split {
        main_percent: MAIN_PERCENT,
        round_bytes: ROUND_BYTES,
    };
    match import_gzip_with(path, gz, Some(split)) {
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

/// How the text is cut into pieces.
#[derive(Debug, Clone, Copy)]
struct Split {
    /// Percent of a round's text in the piece this thread parses.
    main_percent: usize,
    /// Inflated text per round of two pieces.
    round_bytes: usize,
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
) -> Result<Trace> {
    let io = |e| TraceError::io(path, e);
    let split = Split {
        main_percent: MAIN_PERCENT,
        round_bytes: ROUND_BYTES,
    };
    if len < MIN_SPLIT_BYTES {
        let mut bytes = head;
        let mut rest = rest;
        rest.read_to_end(&mut bytes).map_err(io)?;
        return super::read_bytes(path, &bytes);
    }
    let reader = std::io::Cursor::new(head).chain(rest);
    match read_pieces(path, reader, len, split, io)? {
        Outcome::Trace(t) => Ok(*t),
        Outcome::Whole(text) => super::read_bytes(path, &text),
        Outcome::Again => super::read_bytes(path, &std::fs::read(path).map_err(io)?),
    }
}

/// [`import_gzip`] cut as `split` says (`None`: one pass).
fn import_gzip_with(path: &Path, gz: &[u8], split: Option<Split>) -> Result<(Trace, Route)> {
    let size = gzip_size_hint(gz);
    let one_pass = || {
        let mut text = Vec::with_capacity(size);
        flate2::bufread::MultiGzDecoder::new(gz)
            .read_to_end(&mut text)
            .map_err(|e| gzip_error(path, e))?;
        import::import(path, &text)
    };
    let Some(split) = split.filter(|_| size >= MIN_SPLIT_BYTES) else {
        return Ok((one_pass()?, Route::OnePass));
    };
    let decoder = flate2::bufread::MultiGzDecoder::new(gz);
    match read_pieces(path, decoder, size, split, |e| gzip_error(path, e))? {
        Outcome::Trace(t) => Ok((*t, Route::Pieces)),
        Outcome::Whole(text) => Ok((import::import(path, &text)?, Route::OnePass)),
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

/// Reads the text of `decoder` (about `total_bytes`) piece by piece, in
/// rounds of two pieces (see the module doc).
fn read_pieces(
    path: &Path,
    decoder: impl std::io::Read + Send,
    total_bytes: usize,
    split: Split,
    read_error: impl Fn(std::io::Error) -> TraceError,
) -> Result<Outcome> {
    let main_len = (split.round_bytes.saturating_mul(split.main_percent) / 100).max(1);
    let other_len = split.round_bytes.saturating_sub(main_len).max(1);
    let mut cutter = Cutter::new(decoder);
    let mut main = Vec::new();
    let mut next = Vec::new();
    let mut other = Vec::new();
    let mut last = cutter.piece(&mut main, main_len).map_err(&read_error)?;
    if last {
        return Ok(Outcome::Whole(main));
    }
    let mut pieces = Pieces::new(path, total_bytes);
    let mut first = true;
    loop {
        if last {
            if cut_last(&mut main, &mut next, split.round_bytes / 4) {
                // Its two parts on the two threads, as a round's pieces.
                let mut tail = Cutter {
                    decoder: &next[..],
                    carry: Vec::new(),
                    first: false,
                };
                let round = Round {
                    main: &main,
                    first,
                    other: &mut other,
                    other_len: next.len() + 1,
                    next: &mut Vec::new(),
                    next_len: 0,
                };
                return match round.read(&mut pieces, &mut tail) {
                    Ok(Some(Done::Trace)) => Ok(Outcome::Trace(Box::new(pieces.finish()))),
                    Ok(_) => Ok(Outcome::Again),
                    Err(e) => Err(read_error(e)),
                };
            }
            return Ok(if pieces.piece(&main, first, true) {
                Outcome::Trace(Box::new(pieces.finish()))
            } else {
                Outcome::Again
            });
        }
        let round = Round {
            main: &main,
            first,
            other: &mut other,
            other_len,
            next: &mut next,
            next_len: main_len,
        };
        match round.read(&mut pieces, &mut cutter) {
            Ok(Some(Done::Trace)) => return Ok(Outcome::Trace(Box::new(pieces.finish()))),
            Ok(Some(Done::Next { last: l })) => last = l,
            Ok(None) => return Ok(Outcome::Again),
            Err(e) => return Err(read_error(e)),
        }
        std::mem::swap(&mut main, &mut next);
        first = false;
    }
}

/// One round: this thread's piece (already inflated), and the other
/// thread's, which it inflates, then inflates the next round's piece for
/// this thread (only it can inflate, while this thread is busy parsing and
/// mapping), then parses its own.
struct Round<'a> {
    main: &'a [u8],
    first: bool,
    other: &'a mut Vec<u8>,
    other_len: usize,
    next: &'a mut Vec<u8>,
    next_len: usize,
}

/// How a round ended.
enum Done {
    /// The other piece was the last.
    Trace,
    /// The next round's piece is in `next`.
    Next { last: bool },
}

impl Round<'_> {
    /// `None` when a piece did not read as expected.
    fn read<R: std::io::Read + Send>(
        self,
        pieces: &mut Pieces,
        cutter: &mut Cutter<R>,
    ) -> std::io::Result<Option<Done>> {
        let Round {
            main,
            first,
            other,
            other_len,
            next,
            next_len,
        } = self;
        std::thread::scope(|s| {
            let (to_mapper, batches) = std::sync::mpsc::channel();
            let (to_parser, spent) = std::sync::mpsc::channel();
            let worker = s.spawn(move || {
                let other_last = cutter.piece(other, other_len)?;
                // The next round's piece before parsing: inflating is what
                // this thread alone can do, while the other maps.
                let next_last = if other_last {
                    None
                } else {
                    Some(cutter.piece(next, next_len)?)
                };
                let other: &[u8] = other;
                let end = import::parse_piece(other, to_mapper, &spent);
                // Free here what the mapper sent back.
                while let Ok(batch) = spent.recv() {
                    drop(batch);
                }
                Ok::<_, std::io::Error>((end, other_last, next_last))
            });
            let main_ok = pieces.piece(main, first, false);
            if main_ok {
                for batch in &batches {
                    pieces.map_events(&batch);
                    // Back to be freed by the thread that allocated it.
                    let _ = to_parser.send(batch);
                }
            }
            drop(batches);
            drop(to_parser);
            let (end, other_last, next_last) = match worker.join() {
                Ok(r) => r?,
                Err(panic) => std::panic::resume_unwind(panic),
            };
            let Some(end) = end.filter(|_| main_ok) else {
                return Ok(None);
            };
            if !pieces.parsed(end, other_last) {
                return Ok(None);
            }
            Ok(Some(match next_last {
                None => Done::Trace,
                Some(last) => Done::Next { last },
            }))
        })
    }
}

/// Inflated text in pieces, each cut after an event (see the module doc).
struct Cutter<R> {
    decoder: R,
    /// The text after the last cut.
    carry: Vec<u8>,
    first: bool,
}

impl<R: std::io::Read> Cutter<R> {
    fn new(decoder: R) -> Cutter<R> {
        Cutter {
            decoder,
            carry: Vec::new(),
            first: true,
        }
    }

    /// Fills `buf` with the next piece, of about `len` bytes of text;
    /// `true` when it is the last (the text ended).
    fn piece(&mut self, buf: &mut Vec<u8>, len: usize) -> std::io::Result<bool> {
        buf.clear();
        if !self.first {
            buf.extend_from_slice(PIECE_START);
        }
        self.first = false;
        let body = buf.len();
        buf.reserve(len + self.carry.len() + (64 << 10));
        buf.extend_from_slice(&self.carry);
        self.carry.clear();
        let mut want = len;
        loop {
            let missing = (body + want).saturating_sub(buf.len()).max(1);
            let read = (&mut self.decoder).take(missing as u64).read_to_end(buf)?;
            if read < missing {
                return Ok(true);
            }
            if let Some(cut) = find_cut(&buf[body..]) {
                let cut = body + cut;
                self.carry.extend_from_slice(&buf[cut + 1..]);
                buf.truncate(cut);
                buf.extend_from_slice(PIECE_END);
                return Ok(false);
            }
            // No cut yet (one long event, or not events at all): read on.
            want = want.saturating_mul(2);
        }
    }
}

fn gzip_error(path: &Path, e: std::io::Error) -> TraceError {
    crate::load::gzip_error(path, e)
}

/// Cuts the last piece, `main`, in two near its middle when it has at
/// least `min_len` bytes: `main` keeps the events before the cut, closed,
/// and `tail` gets the text after it. `false` (nothing changed) when it is
/// smaller or has no cut.
fn cut_last(main: &mut Vec<u8>, tail: &mut Vec<u8>, min_len: usize) -> bool {
    if main.len() < min_len.max(1) {
        return false;
    }
    let Some(cut) = find_cut(&main[..main.len() / 2]) else {
        return false;
    };
    tail.clear();
    tail.extend_from_slice(&main[cut + 1..]);
    main.truncate(cut);
    main.extend_from_slice(PIECE_END);
    true
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

    /// Rounds of 256 KiB, `main_percent` of each on the calling thread.
    fn split(main_percent: usize) -> Split {
        Split {
            main_percent,
            round_bytes: 256 << 10,
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
        for (main_percent, round_bytes) in [
            (MAIN_PERCENT, ROUND_BYTES),
            (10, 1 << 20),
            (50, 300 << 10),
            (90, 97 << 10),
        ] {
            let split = Split {
                main_percent,
                round_bytes,
            };
            let (cut, route) = import_gzip_with(path, gz, Some(split)).expect("pieces");
            // A text that ends within the first piece is read in one pass.
            let first_piece = round_bytes * main_percent / 100;
            let expected = if text_len <= first_piece {
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
            import_gzip_with(Path::new("s.json.gz"), &gz, Some(split(50))).expect("import");
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
        let (cut, route) =
            import_gzip_with(Path::new("n.json.gz"), &gz, Some(split(50))).expect("rejoined");
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
            import_gzip_with(Path::new("p.json.gz"), &gz, Some(split(30))).expect("rejoined");
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
            let cut = import_gzip_with(path, bad, Some(split(40))).expect_err("two parts fail");
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
        match read_pieces(path, text.as_bytes(), text.len(), split, |e| {
            gzip_error(path, e)
        })
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
        // One cut, at every length of the first piece from inside the top
        // level to the last event: the reading stops at every position class
        // (strings with escapes, nested args, between events) and the cut is
        // the last `},{` before it.
        let mut routes = std::collections::BTreeMap::new();
        for main_len in (events_at - 40)..text.len() {
            let split = Split {
                main_percent: 1,
                round_bytes: main_len * 100,
            };
            let (route, t) = read_text(path, &text, split);
            *routes.entry(format!("{route:?}")).or_insert(0) += 1;
            assert!(t == one, "first piece of {main_len}: same model");
            assert_eq!(dump(&t), one_dump, "first piece of {main_len}");
        }
        // Cuts between events read in pieces; cuts found inside strings or
        // nested args (most, in these events) fall back to one pass.
        assert!(
            routes["Pieces"] > 1000 && routes["Again"] > 1000,
            "{routes:?}"
        );
        // Many pieces, in rounds of every size: every cut is between events.
        let text = synthetic(30, "", "");
        let one = import::import(path, text.as_bytes()).expect("one pass");
        assert_eq!(one.slices().len(), 60);
        for round_bytes in 2..1200 {
            let split = Split {
                main_percent: 50,
                round_bytes,
            };
            let (route, t) = read_text(path, &text, split);
            assert_eq!(route, Route::Pieces, "{split:?}");
            assert!(t == one, "{split:?}: same model");
        }
    }

    #[test]
    fn last_piece_is_cut_in_two_or_read_again() {
        let mut main = br#"{"traceEvents":[{"a": 1},
 {"b": "},{"}, {"c": 3}, {"d": 4}]}"#
            .to_vec();
        let mut tail = b"old".to_vec();
        assert!(!cut_last(&mut main.clone(), &mut tail, main.len() + 1));
        assert_eq!(tail, b"old", "too small: untouched");
        // The last `},{` before the middle.
        assert!(cut_last(&mut main, &mut tail, 8));
        assert_eq!(main, br#"{"traceEvents":[{"a": 1}]}"#);
        assert_eq!(
            tail,
            br#"
 {"b": "},{"}, {"c": 3}, {"d": 4}]}"#
        );
        // Rounds of every size over events whose strings and nested args hold
        // `},{`: wherever the last piece is cut, the model is the one-pass one
        // (read in pieces, or again in one pass when the cut was no boundary).
        let text = tricky(8);
        let path = Path::new("tricky.json");
        let one = import::import(path, text.as_bytes()).expect("one pass");
        let mut routes = std::collections::BTreeMap::new();
        for round_bytes in (200..text.len()).step_by(7) {
            let split = Split {
                main_percent: 50,
                round_bytes,
            };
            let (route, t) = read_text(path, &text, split);
            *routes.entry(format!("{route:?}")).or_insert(0) += 1;
            assert!(t == one, "{split:?}: same model");
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
