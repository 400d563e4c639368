//! Replays fuzz/corpus (seeds and inputs that once found bugs, see
//! fuzz/README.md) through the Perfetto reader, the Kineto import and the
//! format-sniffing loader: each gives a trace or a one-line error naming
//! the file, never a panic; what loads writes and reads back, and is
//! analyzed (findings and their replays included) without a panic.

use std::path::{Path, PathBuf};

use streamscope_core::{analysis, kineto, load, perfetto, Trace, TraceError};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{}: seeds missing", dir.display());
    files
}

fn check(file: &Path, what: &str, r: std::thread::Result<Result<Trace, TraceError>>) {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match r {
        Err(_) => panic!("{what} panicked on {}", file.display()),
        Ok(Err(e)) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{what} {name}: {msg}");
            assert!(
                msg.contains(name) || msg.contains("fuzz."),
                "{what} {name}: {msg}"
            );
        }
        Ok(Ok(t)) => {
            let bytes = perfetto::write_trace(&t, Vec::new()).expect("write to memory");
            if !t.processes().is_empty() {
                let back = perfetto::read_stream(Path::new("again.pftrace"), &bytes[..])
                    .unwrap_or_else(|e| panic!("{what} {name}: written trace reads back: {e}"));
                // Every slice comes back, of the same kind, or the loss is
                // reported (times near both ends of i64 overflow once shifted
                // to Perfetto's unsigned times: those packets read as damaged).
                let lost = back
                    .diagnostics()
                    .iter()
                    .any(|d| d.severity == streamscope_core::diagnostic::Severity::DataLoss);
                assert!(
                    back.count_by_kind() == t.count_by_kind()
                        || (lost && back.slices().len() < t.slices().len()),
                    "{what} {name}: {:?} of {:?}, {:?}",
                    back.count_by_kind(),
                    t.count_by_kind(),
                    back.diagnostics()
                );
            }
            if let Some((a, b)) = t.time_span() {
                assert!(b >= a, "{what} {name}");
            }
            // What `report` runs on what loads (overflow checks on in tests):
            // the analysis, then the findings with their what-if replays.
            let analyzed = std::panic::catch_unwind(|| {
                let mut r = analysis::analyze(&t, &analysis::AnalysisOptions::default());
                analysis::findings::attach(&mut r, Some(&t));
                // Damaged times never give a step that ends before it
                // starts, nor a negative step time.
                r.steps
                    .iter()
                    .find(|s| {
                        s.end_ns < s.start_ns
                            || s.duration_us.is_nan()
                            || s.duration_us < 0.0
                            || s.host_interval_us.is_nan()
                            || s.host_interval_us < 0.0
                    })
                    .map(|s| (s.rank, s.step, s.start_ns, s.end_ns, s.duration_us))
            });
            match analyzed {
                Err(_) => panic!("{what} {name}: the analysis panicked"),
                Ok(Some(bad)) => panic!("{what} {name}: a step ends before it starts: {bad:?}"),
                Ok(None) => {}
            }
        }
    }
}

#[test]
fn perfetto_corpus_never_panics() {
    for f in corpus("perfetto") {
        let bytes = std::fs::read(&f).expect("read");
        let r = std::panic::catch_unwind(|| {
            perfetto::read_stream(Path::new("fuzz.pftrace"), &bytes[..])
        });
        check(&f, "perfetto reader", r);
        let r = std::panic::catch_unwind(|| load::load_file(&f));
        check(&f, "loader", r);
    }
}

#[test]
fn kineto_corpus_never_panics() {
    for f in corpus("kineto") {
        let bytes = std::fs::read(&f).expect("read");
        let r = std::panic::catch_unwind(|| kineto::read_bytes(Path::new("fuzz.json"), &bytes));
        check(&f, "kineto import", r);
        let r = std::panic::catch_unwind(|| {
            kineto::read_bytes_keeping(Path::new("fuzz.json"), &bytes, kineto::KeepArgs::Analysis)
        });
        check(&f, "lean kineto import", r);
        let r = std::panic::catch_unwind(|| load::load_file(&f));
        check(&f, "loader", r);
    }
}

/// The regression inputs (each once showed a defect): what each must give.
#[test]
fn regression_inputs_load_with_their_warnings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    use streamscope_core::diagnostic::Kind::*;
    for (file, kind, count) in [
        (
            "perfetto/regress-bad-wire-type.pftrace",
            DamagedPackets,
            None,
        ),
        (
            "perfetto/regress-damaged-length.pftrace",
            DamagedPackets,
            None,
        ),
        (
            "perfetto/regress-junk-between-packets.pftrace",
            DamagedPackets,
            Some(1),
        ),
        (
            "perfetto/regress-runaway-length.pftrace",
            DamagedPackets,
            None,
        ),
        (
            "perfetto/regress-ts-beyond-i64.pftrace",
            DamagedPackets,
            Some(1),
        ),
        (
            "perfetto/regress-parent-loop.pftrace",
            TrackParentLoop,
            None,
        ),
        ("kineto/regress-bad-durations.json", BadDuration, Some(3)),
        ("kineto/regress-cut-in-events.json", Truncated, Some(1)),
        ("kineto/regress-truncated.json.gz", Truncated, Some(1)),
        (
            "kineto/regress-chrome-bad-indexes.json",
            MalformedEvents,
            None,
        ),
        (
            "kineto/regress-time-base-beyond-i64.json",
            BadTimeBase,
            Some(3),
        ),
    ] {
        let t = load::load_file(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            t.diagnostics()
                .iter()
                .any(|d| d.kind == kind && count.is_none_or(|c| d.count == c)),
            "{file}: {:?}",
            t.diagnostics()
        );
    }
    let t = load::load_file(&dir.join("perfetto/regress-kinds-before-descriptors.pftrace"))
        .expect("loads");
    let kinds: Vec<&str> = t.slices().kind().iter().map(|k| k.name()).collect();
    assert_eq!(kinds, ["driver", "runtime", "sync"]);
    let t = load::load_file(&dir.join("kineto/regress-edge-timestamps.json")).expect("loads");
    let (a, b) = t.time_span().expect("span");
    assert!(b >= a);
    // A base near 2^63 ns is not added: the slices keep their distances.
    let t = load::load_file(&dir.join("kineto/regress-time-base-beyond-i64.json")).expect("loads");
    assert_eq!(t.time_span(), Some((0, 4_100_000)));
    // A time before 0: a Perfetto export moves every time, keeping the span.
    let t = load::load_file(&dir.join("kineto/regress-negative-ts.json")).expect("loads");
    let bytes = perfetto::write_trace(&t, Vec::new()).expect("in memory");
    let back = perfetto::read_stream(Path::new("neg.pftrace"), &bytes[..]).expect("reads back");
    let span = |t: &Trace| t.time_span().map(|(a, b)| b - a);
    assert_eq!(span(&back), span(&t));
    assert_eq!(span(&t), Some(4_100_000));
    // A megabyte of blanks between two events.
    let t = load::load_file(&dir.join("kineto/regress-whitespace-padding.json.gz")).expect("loads");
    assert_eq!(t.slices().len(), 3);
}
