//! Kineto times at the edges: negative times, out-of-range time bases, and
//! what a Perfetto export makes of them (issue 32, D2 and D3).

use std::path::Path;

use streamscope_core::diagnostic::Kind;
use streamscope_core::kineto::read_bytes;
use streamscope_core::perfetto::{read_stream, time_offset_ns, write_trace};
use streamscope_core::Trace;

/// A Kineto document with one CPU op at each `(ts, dur)` (µs text) and the
/// given `baseTimeNanoseconds` (raw JSON text, or none).
fn doc(events: &[(&str, &str)], base: Option<&str>) -> Vec<u8> {
    let evs: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(i, (ts, dur))| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 7, "tid": 7, "ts": {ts}, "dur": {dur}}}"#
            )
        })
        .collect();
    let base = base
        .map(|b| format!(r#", "baseTimeNanoseconds": {b}"#))
        .unwrap_or_default();
    format!(
        r#"{{"schemaVersion": 1, "traceEvents": [{}]{base}}}"#,
        evs.join(",\n")
    )
    .into_bytes()
}

fn load(name: &str, bytes: &[u8]) -> Trace {
    read_bytes(Path::new(name), bytes).unwrap_or_else(|e| panic!("{e}"))
}

/// (start, dur) of every slice, in name order.
fn slices(t: &Trace) -> Vec<(String, i64, i64)> {
    let sl = t.slices();
    let mut v: Vec<(String, i64, i64)> = (0..sl.len())
        .map(|i| {
            (
                t.str(sl.name()[i]).to_string(),
                sl.start_ns()[i],
                sl.dur_ns()[i],
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn negative_times_keep_their_meaning_through_a_perfetto_export() {
    let t = load("neg.json", &doc(&[("-1", "4100"), ("2", "3")], None));
    assert_eq!(
        slices(&t),
        vec![("op0".into(), -1000, 4_100_000), ("op1".into(), 2000, 3000)]
    );
    assert_eq!(time_offset_ns(&t), 1000);
    let bytes = write_trace(&t, Vec::new()).expect("in memory");
    // On the wire every time is 1000 ns later, none clamped to 0, and the
    // shift is recorded in the processes' metadata.
    let wire = String::from_utf8_lossy(&bytes);
    assert!(
        wire.contains("meta.time_offset_ns"),
        "the shift is recorded"
    );
    // Read back, the shift is undone: the times are the model's own.
    let back = read_stream(Path::new("neg.pftrace"), &bytes[..]).expect("reads back");
    assert_eq!(slices(&back), slices(&t));
    let (a, b) = back.time_span().expect("slices");
    assert_eq!((a, b - a), (-1000, 4_100_000));
    assert!(back.processes()[0]
        .metadata
        .iter()
        .all(|(k, _)| k != "time_offset_ns"));
    // And a second export shifts it the same way again.
    let again = write_trace(&back, Vec::new()).expect("in memory");
    let back2 = read_stream(Path::new("neg2.pftrace"), &again[..]).expect("reads back");
    assert_eq!(slices(&back2), slices(&t));
    // A trace without negative times is written as it is.
    let t = load("pos.json", &doc(&[("1", "2")], None));
    assert_eq!(time_offset_ns(&t), 0);
    let back = read_stream(
        Path::new("pos.pftrace"),
        &write_trace(&t, Vec::new()).expect("in memory")[..],
    )
    .expect("reads back");
    assert_eq!(slices(&back), slices(&t));
    assert!(back.processes()[0]
        .metadata
        .iter()
        .all(|(k, _)| k != "time_offset_ns"));
}

#[test]
fn an_unusable_time_base_is_named_and_times_stay_relative() {
    let events = [("0", "1000"), ("4000", "100")];
    for base in [
        "9223372036854775000",
        "18446744073709551615",
        "-5",
        "1e30",
        "\"soon\"",
    ] {
        let t = load("base.json", &doc(&events, Some(base)));
        assert_eq!(
            slices(&t),
            vec![
                ("op0".into(), 0, 1_000_000),
                ("op1".into(), 4_000_000, 100_000)
            ],
            "base {base}: times kept relative, not saturated"
        );
        let d = t
            .diagnostics()
            .iter()
            .find(|d| d.kind == Kind::BadTimeBase)
            .unwrap_or_else(|| panic!("base {base}: no warning"));
        assert_eq!(d.count, 2, "{d}");
        let line = d.to_string();
        assert!(line.contains("base.json"), "{line}");
        assert!(line.contains("2 events"), "{line}");
    }
    // A usable base is added, without a word.
    let t = load("ok.json", &doc(&events, Some("1700000000000000000")));
    assert_eq!(slices(&t)[1].1, 1_700_000_000_004_000_000);
    assert!(t.diagnostics().iter().all(|d| d.kind != Kind::BadTimeBase));
}
