//! A Perfetto file cut short loads every whole packet before the cut,
//! with a warning; each slice read is one of the whole file's.

use std::collections::HashSet;
use std::path::Path;

use streamscope_core::diagnostic::Kind;
use streamscope_core::perfetto::{read_stream, write_trace};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_core::Trace;

fn to_bytes(t: &Trace) -> Vec<u8> {
    write_trace(t, Vec::new()).expect("write to memory")
}

fn from_bytes(b: &[u8]) -> Trace {
    read_stream(Path::new("mem.pftrace"), b).expect("read back")
}

#[test]
fn truncated_file_loads_every_whole_packet_with_a_warning() {
    let t = fsdp_like(&SynthOptions {
        target_slices: 2_000,
        ..Default::default()
    });
    let bytes = to_bytes(&t);
    let whole_trace = from_bytes(&bytes);
    let full = whole_trace.slices().len();
    // (start, duration, name) of every slice.
    let slice_set = |t: &Trace| -> HashSet<(i64, i64, String)> {
        let s = t.slices();
        (0..s.len())
            .map(|i| {
                (
                    s.start_ns()[i],
                    s.dur_ns()[i],
                    t.str(s.name()[i]).to_string(),
                )
            })
            .collect()
    };
    let whole = slice_set(&whole_trace);
    let mut last = 0;
    for frac in [0.3, 0.6, 0.9] {
        let cut = (bytes.len() as f64 * frac) as usize;
        let back = read_stream(Path::new("cut.pftrace"), &bytes[..cut]).expect("truncated loads");
        assert!(
            back.diagnostics().iter().any(|d| d.kind == Kind::Truncated),
            "{:?}",
            back.diagnostics()
        );
        assert!(back.slices().len() >= last && back.slices().len() <= full);
        // Each slice read is one of the whole file's, as it is there, except
        // those open at the cut: closed at their sequence's last timestamp
        // (as many as the UnterminatedSlices diagnostic counts), they keep
        // their start and name, and end no later than in the whole file.
        let closed: u64 = back
            .diagnostics()
            .iter()
            .filter(|d| d.kind == Kind::UnterminatedSlices)
            .map(|d| d.count)
            .sum();
        let differing: Vec<(i64, i64, String)> =
            slice_set(&back).difference(&whole).cloned().collect();
        assert_eq!(
            differing.len() as u64,
            closed,
            "{frac}: slices not in the whole file: {differing:?}"
        );
        for (start, dur, name) in &differing {
            assert!(
                whole
                    .iter()
                    .any(|(s, d, n)| s == start && n == name && d >= dur),
                "{frac}: {name} at {start} ns is not a whole-file slice cut short"
            );
        }
        last = back.slices().len();
    }
    assert!(last > full / 2);
}
