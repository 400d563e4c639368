//! Random Kineto documents read in pieces (plain, gzip'ed, in several gzip
//! members), cut at random sizes, against the one-pass import; damaged
//! gzip streams through [`import_gzip`] against the same without pieces.

use std::io::Write;

use super::*;
use crate::dump::dump;
use crate::synth::XorShift;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).expect("in-memory write");
    gz.finish().expect("in-memory gzip")
}

/// Strings that look like cuts, escapes and brackets.
const TRICKY: [&str; 8] = [
    "plain",
    "},{",
    r#"\"},{\""#,
    r#"a\\"#,
    r#"]},{["#,
    r#"\u00e9\n\t"#,
    "} , {",
    r#"x\"y"#,
];

fn pick<'a>(rng: &mut XorShift, of: &[&'a str]) -> &'a str {
    of[rng.below(of.len())]
}

/// A timestamp text: integer, three decimals, fewer, more, an exponent.
fn ts(rng: &mut XorShift, base: i64) -> String {
    match rng.below(6) {
        0 => format!("{base}"),
        1 => format!("{base}.{:03}", rng.below(1000)),
        2 => format!("{base}.5"),
        3 => format!("{base}.{:05}", rng.below(100_000)),
        4 => format!("{base}e0"),
        _ => format!("\"{base}\""),
    }
}

/// One element of `traceEvents`: mostly events the importer maps, some it
/// skips, some not events at all; strings and args that hold `},{`.
fn element(rng: &mut XorShift, i: usize) -> String {
    let t = 1000 + 10 * i as i64 + rng.below(20) as i64;
    let s = pick(rng, &TRICKY);
    match rng.below(10) {
        0..=2 => format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "k{} {s}", "pid": 0, "tid": 7, "ts": {}, "dur": {}, "args": {{"device": 0, "stream": 7, "correlation": {i}, "grid": [1, 2, 3], "block": [4, 5, 6], "note": "{s}"}}}}"#,
            rng.below(3),
            ts(rng, t),
            ts(rng, 3)
        ),
        3..=4 => format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": {}, "dur": 1, "args": {{"correlation": {i}}}}}"#,
            ts(rng, t - 1)
        ),
        5 => format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "op {s}", "pid": 9, "tid": 9, "ts": {}, "dur": 4, "args": {{"nested": [{{"a": "{s}"}},{{"b": [{{}},{{}}]}}], "External id": {i}}}}}"#,
            ts(rng, t)
        ),
        6 => format!(
            r#"{{"ph": "C", "name": "mem {s}", "pid": 9, "ts": {}, "args": {{"v": {}}}}}"#,
            ts(rng, t),
            rng.below(100)
        ),
        7 => format!(
            r#"{{"ph": "M", "name": "thread_name", "pid": 9, "tid": 9, "args": {{"name": "thread {s}"}}}}"#
        ),
        8 => r#"{"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1, "cat": "ac2g", "name": "ac2g", "bp": "e"}"#.to_string(),
        _ => pick(rng, &["17", "null", "{}", r#"[{"a": 1},{"b": 2}]"#, r#"{"x": [{},{}]}"#]).to_string(),
    }
}

/// A random document: optional keys before and after `traceEvents` (some
/// arrays of objects, so that `},{` also occurs outside the events),
/// elements separated by varied whitespace.
fn document(rng: &mut XorShift, events: usize) -> String {
    let before = [
        r#""schemaVersion": 1"#,
        r#""deviceProperties": [{"id": 0, "name": "G"}, {"id": 1, "name": "},{"}]"#,
        r#""distributedInfo": {"rank": 0, "x": [{"a": 1},{"b": 2}]}"#,
    ];
    let after = [
        r#""traceName": "t""#,
        r#""baseTimeNanoseconds": 1700000000000000000"#,
        r#""deviceProperties": [{"id": 0, "name": "after"},{"id": 1}]"#,
        r#""extra": [{"a": 1},{"b": 2},{"c": 3}]"#,
    ];
    let mut keys: Vec<String> = before
        .iter()
        .filter(|_| rng.below(2) == 0)
        .map(|s| s.to_string())
        .collect();
    let seps = [",", ", ", ",\n", " ,\n  ", "\n,", ",\t"];
    let mut body = String::new();
    for i in 0..events {
        if i > 0 {
            body.push_str(pick(rng, &seps));
        }
        body.push_str(&element(rng, i));
    }
    keys.push(format!("\"traceEvents\": [{body}]"));
    keys.extend(
        after
            .iter()
            .filter(|_| rng.below(2) == 0)
            .map(|s| s.to_string()),
    );
    format!("{{{}}}", keys.join(", "))
}

/// `text` read as [`read_pieces`] reads `reader`: the trace, or the
/// one-pass import's error when the pieces fall back to it.
fn pieces_of(path: &Path, text: &[u8], reader: impl Read + Send, split: Split) -> String {
    let out = read_pieces(path, reader, text.len(), split, KeepArgs::All, |e| {
        gzip_error(path, e)
    })
    .expect("in-memory read");
    let t = match out {
        Outcome::Trace(t) => Ok(*t),
        Outcome::Whole(w) => {
            assert_eq!(w, text, "the whole text");
            import::import(path, &w)
        }
        Outcome::Again => import::import(path, text),
    };
    t.map(|t| dump(&t))
        .map_err(|e| e.to_string())
        .unwrap_or_else(|e| format!("error: {e}"))
}

#[test]
fn random_documents_in_pieces_read_as_one_pass() {
    let mut rng = XorShift(0x5B11_7000_0000_0001);
    let path = Path::new("random.json");
    let mut routes = [0usize; 2];
    for doc in 0..60 {
        let n = [0, 1, 2, 3, 10, 40][rng.below(6)];
        let text = document(&mut rng, n);
        let one = import::import(path, text.as_bytes())
            .map(|t| dump(&t))
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| format!("error: {e}"));
        let gz = gzip(text.as_bytes());
        // The same text in two gzip members, cut anywhere.
        let k = rng.below(text.len() + 1);
        let mut members = gzip(&text.as_bytes()[..k]);
        members.extend(gzip(&text.as_bytes()[k..]));
        for _ in 0..12 {
            let split = Split {
                piece_bytes: 4 + rng.below(text.len()),
                round_pieces: 1 + rng.below(5),
                claim_at: 1 + rng.below(3),
            };
            let plain = pieces_of(path, text.as_bytes(), text.as_bytes(), split);
            assert!(plain == one, "doc {doc} {split:?}: plain\n{text}");
            let decoder = flate2::bufread::MultiGzDecoder::new(&gz[..]);
            let gzipped = pieces_of(path, text.as_bytes(), decoder, split);
            assert!(gzipped == one, "doc {doc} {split:?}: gzip\n{text}");
            let decoder = flate2::bufread::MultiGzDecoder::new(&members[..]);
            let two = pieces_of(path, text.as_bytes(), decoder, split);
            assert!(
                two == one,
                "doc {doc} {split:?}: two members cut at {k}\n{text}"
            );
            routes[usize::from(one.starts_with("error"))] += 1;
        }
    }
    assert!(routes[0] > 300, "{routes:?}");
}

#[test]
fn last_piece_of_one_event_or_of_keys_after_the_events() {
    // Round sizes such that the last piece holds one event, or only the
    // keys after the events (arrays of objects, where a cut parses but is
    // not inside traceEvents): same trace as one pass.
    let mut rng = XorShift(0x5B11_7000_0000_0002);
    let path = Path::new("last.json");
    for _ in 0..8 {
        let mut text = document(&mut rng, 6);
        if !text.ends_with("]}") && rng.below(2) == 0 {
            text.truncate(text.len() - 1);
            let objects: Vec<String> = (0..50).map(|i| format!(r#"{{"k": {i}}}"#)).collect();
            text.push_str(&format!(r#", "tail": [{}]}}"#, objects.join(",")));
        }
        let one = dump(&import::import(path, text.as_bytes()).expect("one pass"));
        let last_event = text.rfind("{\"ph\"").expect("an event");
        for main_len in (last_event.saturating_sub(300)..text.len()).step_by(3) {
            {
                let split = Split {
                    piece_bytes: main_len,
                    round_pieces: 1 + rng.below(3),
                    claim_at: 1 + rng.below(2),
                };
                let got = pieces_of(path, text.as_bytes(), text.as_bytes(), split);
                assert!(got == one, "{split:?}\n{text}");
            }
        }
    }
}

/// A document past [`MIN_SPLIT_BYTES`], so that [`import_gzip`] reads it in
/// pieces.
fn large(rng: &mut XorShift) -> String {
    let mut events = 5000;
    loop {
        let text = document(rng, events);
        if text.len() > MIN_SPLIT_BYTES + (16 << 10) {
            return text;
        }
        events += events / 4;
    }
}

/// [`import_gzip_with`] as `split` says: the trace's dump or the error.
fn gzip_result(path: &Path, gz: &[u8], split: Option<Split>) -> String {
    match import_gzip_with(path, gz, split) {
        Ok((t, _)) => dump(&t),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn damaged_gzip_in_pieces_is_the_one_pass_result_and_never_panics() {
    let mut rng = XorShift(0x5B11_7000_0000_0003);
    let path = Path::new("damaged.json.gz");
    let text = large(&mut rng);
    let gz = gzip(text.as_bytes());
    let (_, route) = import_gzip_with(path, &gz, Some(split_default())).expect("whole");
    assert_ne!(route, Route::OnePass, "read in pieces");
    // Truncated (a stream cut short), a bit flipped (a bad block or
    // checksum), garbage after a whole member.
    let mut flipped = gz.clone();
    let at = 10 + rng.below(gz.len() - 10);
    flipped[at] ^= 1 << rng.below(8);
    let mut trailing = gz.clone();
    trailing.extend_from_slice(b"\x1f\x8b\x08garbage");
    for bad in [&gz[..rng.below(gz.len())], &flipped[..], &trailing[..]] {
        // In pieces or not: the same trace, or the same error.
        let pieces = gzip_result(path, bad, Some(split_default()));
        assert!(
            pieces == gzip_result(path, bad, None),
            "{} bytes",
            bad.len()
        );
    }
}

/// [`import_gzip_file`] on `gz` written to a file at `path`: the trace's
/// dump or the error, and the route when it loaded.
fn file_result(path: &Path, gz: &[u8]) -> (String, Option<Route>) {
    std::fs::write(path, gz).expect("temp file");
    let mut f = std::fs::File::open(path).expect("temp file");
    let mut head = Vec::new();
    (&mut f)
        .take(64 << 10)
        .read_to_end(&mut head)
        .expect("read");
    match import_gzip_file_route(path, head, f, gz.len(), KeepArgs::All) {
        Ok((t, route)) => (dump(&t), Some(route)),
        Err(e) => (format!("error: {e}"), None),
    }
}

#[test]
fn gzip_files_inflated_as_read_are_the_whole_file_result() {
    let mut rng = XorShift(0x5B11_7000_0000_0011);
    let dir = std::env::temp_dir().join(format!("streamscope-gzfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("rank-0.json.gz");
    let text = large(&mut rng);
    let gz = gzip(text.as_bytes());
    let mut flipped = gz.clone();
    let at = 10 + rng.below(gz.len() - 10);
    flipped[at] ^= 1 << rng.below(8);
    let mut trailing = gz.clone();
    trailing.extend_from_slice(b"\x1f\x8b\x08garbage");
    let cut = &gz[..gz.len() / 2];
    // A real trace is read as it is read, never again, into the trace
    // read at once.
    let real = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/hta/nccl_parser_config/nccl_data.json.gz"),
    )
    .expect("trace");
    let (streamed, route) = file_result(&path, &real);
    assert_eq!(route, Some(Route::Pieces));
    let at_once = import_gzip(&path, &real, KeepArgs::All).expect("trace");
    assert!(streamed == dump(&at_once));
    // Random documents, whole or damaged (these may be read again: their
    // strings hold what looks like a cut).
    for bad in [&gz[..], cut, &flipped[..], &trailing[..]] {
        let at_once = match import_gzip(&path, bad, KeepArgs::All) {
            Ok(t) => dump(&t),
            Err(e) => format!("error: {e}"),
        };
        assert!(file_result(&path, bad).0 == at_once, "{} bytes", bad.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn split_default() -> Split {
    Split {
        piece_bytes: 128 << 10,
        ..Split::DEFAULT
    }
}

/// A gzip stream read as [`import_gzip_with`] reads it, with no size
/// threshold: in pieces as `split` says, or in one pass (`None`).
fn small_gzip_result(path: &Path, gz: &[u8], split: Option<Split>) -> String {
    let one_pass = || {
        let mut text = Vec::new();
        flate2::bufread::MultiGzDecoder::new(gz)
            .read_to_end(&mut text)
            .map_err(|e| gzip_error(path, e))?;
        import::import(path, &text)
    };
    let r = match split {
        None => one_pass(),
        Some(split) => {
            let decoder = flate2::bufread::MultiGzDecoder::new(gz);
            match read_pieces(path, decoder, 0, split, KeepArgs::All, |e| {
                gzip_error(path, e)
            }) {
                Ok(Outcome::Trace(t)) => Ok(*t),
                Ok(Outcome::Whole(w)) => import::import(path, &w),
                Ok(Outcome::Again) => one_pass(),
                Err(e) => Err(e),
            }
        }
    };
    r.map(|t| dump(&t))
        .unwrap_or_else(|e| format!("error: {e}"))
}

#[test]
fn damaged_small_gzip_streams_in_pieces_are_the_one_pass_result() {
    // Truncated, flipped bits, members cut short, garbage after: in pieces
    // of any size, the same trace or error as one pass.
    let mut rng = XorShift(0x5B11_7000_0000_0004);
    let path = Path::new("small.json.gz");
    for doc in 0..40 {
        let n = [1, 5, 30][rng.below(3)];
        let text = document(&mut rng, n);
        let gz = gzip(text.as_bytes());
        let k = rng.below(text.len());
        let mut two = gzip(&text.as_bytes()[..k]);
        two.extend(gzip(&text.as_bytes()[k..]));
        let mut bad = match rng.below(4) {
            0 => gz[..rng.below(gz.len())].to_vec(),
            1 => two[..rng.below(two.len())].to_vec(),
            2 => {
                let mut b = gz.clone();
                let at = 10 + rng.below(b.len() - 10);
                b[at] ^= 1 << rng.below(8);
                b
            }
            _ => {
                let mut b = two.clone();
                b.extend_from_slice(&gz[..rng.below(gz.len())]);
                b
            }
        };
        if rng.below(8) == 0 {
            bad.extend_from_slice(b"garbage");
        }
        let one = small_gzip_result(path, &bad, None);
        for _ in 0..6 {
            let split = Split {
                piece_bytes: 4 + rng.below(text.len()),
                round_pieces: 1 + rng.below(5),
                claim_at: 1 + rng.below(3),
            };
            let got = small_gzip_result(path, &bad, Some(split));
            assert!(got == one, "doc {doc} {split:?}: {got:.200}\n{one:.200}");
        }
        // What a user gets: a trace (with a warning when the stream was
        // damaged) or one line naming the file.
        match import_gzip(path, &bad, KeepArgs::All) {
            Ok(t) => assert!(
                !t.diagnostics().is_empty() || bad.starts_with(&two) || bad.starts_with(&gz),
                "doc {doc}: damage told"
            ),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("small.json.gz"), "{msg}");
                assert!(!msg.contains('\n'), "one line: {msg}");
            }
        }
    }
}

#[test]
fn clean_documents_are_always_read_in_pieces() {
    // Events with no `},{` inside and nothing but short keys after them:
    // every cut, the last piece's included, is between two events, so no
    // size of round may fall back to one pass (a wrong cut would, silently).
    let mut rng = XorShift(0x5B11_7000_0000_0005);
    let path = Path::new("clean.json");
    let seps = [",", ", ", ",\n", " ,\n  ", "\n,"];
    for doc in 0..30 {
        let n = 1 + rng.below(40);
        let events: Vec<String> = (0..n)
            .map(|i| {
                let ts = ts(&mut rng, 1000 + 10 * i as i64);
                format!(
                    r#"{{"ph": "X", "cat": "kernel", "name": "k{}", "pid": 0, "tid": 7, "ts": {ts}, "dur": 2, "args": {{"device": 0, "stream": 7, "correlation": {i}}}}}"#,
                    rng.below(4)
                )
            })
            .collect();
        let mut body = String::new();
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                body.push_str(pick(&mut rng, &seps));
            }
            body.push_str(e);
        }
        let text = format!(r#"{{"schemaVersion": 1, "traceEvents": [{body}], "traceName": "c"}}"#);
        let one = dump(&import::import(path, text.as_bytes()).expect("one pass"));
        for _ in 0..15 {
            let split = Split {
                piece_bytes: 4 + rng.below(text.len()),
                round_pieces: 1 + rng.below(5),
                claim_at: 1 + rng.below(3),
            };
            let out = read_pieces(
                path,
                text.as_bytes(),
                text.len(),
                split,
                KeepArgs::All,
                |e| gzip_error(path, e),
            )
            .expect("in-memory read");
            let got = match out {
                Outcome::Trace(t) => dump(&t),
                Outcome::Whole(w) => dump(&import::import(path, &w).expect("whole")),
                Outcome::Again => panic!("doc {doc} {split:?}: read again\n{text}"),
            };
            assert!(got == one, "doc {doc} {split:?}");
        }
    }
}
