//! Loading and writing files: pipes, directories with bad ranks, ranks
//! given twice, truncated gzip, atomic writes, and chrome-json read back.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use streamscope_core::dump::dump;
use streamscope_core::load::{load_file, load_paths, write_atomically};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_core::*;

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("streamscope-load-io-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn bundled(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn synth(ranks: u32, n: usize) -> Trace {
    fsdp_like(&SynthOptions {
        ranks,
        target_slices: n,
        ..Default::default()
    })
}

fn without_warnings(t: &Trace) -> String {
    let mut t = t.clone();
    t.take_diagnostics();
    dump(&t)
}

/// The bytes of a bundled gzip trace, inflated.
fn inflated(gz: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(gz).expect("bundled trace"))
        .read_to_end(&mut out)
        .expect("inflates");
    out
}

#[test]
fn a_fifo_is_read_once() {
    let src = bundled("traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz");
    let expected = load_file(&src).expect("file loads");
    // The plain trace and the gzip file, each through a FIFO.
    for (name, bytes) in [
        ("rank-0.pftrace", inflated(&src)),
        (
            "rank-0.pftrace.gz",
            std::fs::read(&src).expect("bundled trace"),
        ),
    ] {
        let dir = tmp_dir(&format!("fifo-{name}"));
        let fifo = dir.join(name);
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfifo");
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                // Fails (EPIPE) if the reader closes the pipe after sniffing.
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo)?;
                f.write_all(&bytes)
            })
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(load_paths(&[fifo]));
        });
        // Opened twice, the second open would wait for a writer forever.
        let t = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("loading a FIFO does not hang")
            .expect("a FIFO loads");
        writer.join().expect("writer").expect("whole file written");
        assert_eq!(dump(&t), dump(&expected), "{name}");
    }
}

#[test]
fn a_bad_empty_or_header_only_rank_in_a_directory_is_skipped_with_a_warning() {
    let dir = tmp_dir("bad-rank");
    let src = bundled("traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz");
    std::fs::copy(&src, dir.join("rank-0.pftrace.gz")).expect("copy");
    std::fs::write(dir.join("rank-1.pftrace"), b"\x00\x01 not a trace").expect("write");
    std::fs::write(dir.join("rank-2.pftrace"), b"").expect("write");
    // Header only: a process, no events (a collector that died at start).
    let mut header = TraceBuilder::new();
    header.add_process(Process {
        pid: 9,
        rank: Some(3),
        ..Default::default()
    });
    perfetto::write_file(&header.clone().finish(), &dir.join("rank-3.pftrace")).expect("write");
    let t = load_paths(std::slice::from_ref(&dir)).expect("the good rank loads");
    assert_eq!(t.processes().len(), 1);
    assert_eq!(t.processes()[0].rank, Some(0));
    use streamscope_core::diagnostic::Kind;
    for (name, kind) in [
        ("rank-1.pftrace", Kind::UnreadableFile),
        ("rank-2.pftrace", Kind::EmptyFile),
        ("rank-3.pftrace", Kind::EmptyFile),
    ] {
        let hits: Vec<_> = t
            .diagnostics()
            .iter()
            .filter(|d| d.file.as_deref().is_some_and(|f| f.ends_with(name)))
            .collect();
        assert_eq!(hits.len(), 1, "{name}: {:?}", t.diagnostics());
        assert_eq!(hits[0].kind, kind, "{name}");
        let line = hits[0].to_string();
        assert!(line.contains(name) && line.ends_with("skipped") && !line.contains('\n'));
    }
    // Named on its own, a bad file is still an error.
    let e = load_paths(&[dir.join("rank-1.pftrace")]).expect_err("bad file");
    assert!(e.to_string().contains("rank-1.pftrace"), "{e}");
    // A directory of nothing but bad files: the first error.
    let bad = tmp_dir("all-bad");
    std::fs::write(bad.join("a.pftrace"), b"\x00nope").expect("write");
    let e = load_paths(&[bad]).expect_err("nothing loads");
    assert!(e.to_string().contains("a.pftrace"), "{e}");
}

#[test]
fn the_same_file_twice_is_an_error_and_one_rank_in_two_files_a_warning() {
    let dir = bundled("traces/fsdp-ref-serial-h200x2");
    let e = load_paths(&[dir.clone(), dir.join("rank-0.pftrace.gz")]).expect_err("twice");
    assert!(
        e.to_string().contains("rank-0.pftrace") && e.to_string().contains("given twice"),
        "{e}"
    );
    let other = bundled("traces/fsdp-ref-overlap-h200x2/rank-0.pftrace.gz");
    let t = load_paths(&[dir.join("rank-0.pftrace.gz"), other]).expect("loads");
    assert_eq!(t.processes().len(), 2);
    assert!(
        t.diagnostics().iter().any(|d| {
            d.kind == streamscope_core::diagnostic::Kind::DuplicateRank
                && d.detail.contains("overlap")
        }),
        "{:?}",
        t.diagnostics()
    );
}

#[test]
fn a_truncated_json_gz_loads_what_it_holds_and_warns() {
    let src = bundled("core/tests/data/hta/trace_filter/sampled_rank-0.json.gz");
    let gz = std::fs::read(&src).expect("read");
    let full = kineto::read_bytes(&src, &gz).expect("whole file");
    let cut = kineto::read_bytes(Path::new("cut.json.gz"), &gz[..gz.len() / 2])
        .expect("half a gzip stream loads");
    assert!(
        cut.slices().len() > full.slices().len() / 5,
        "{}",
        cut.slices().len()
    );
    assert!(cut.slices().len() < full.slices().len());
    assert!(
        cut.diagnostics().iter().any(|d| {
            d.kind == streamscope_core::diagnostic::Kind::Truncated
                && d.file.as_deref() == Some("cut.json.gz")
        }),
        "{:?}",
        cut.diagnostics()
    );
    // The same through a directory load.
    let dir = tmp_dir("gz");
    std::fs::write(dir.join("rank-0.json.gz"), &gz[..gz.len() / 2]).expect("write");
    let t = load_paths(&[dir]).expect("loads");
    assert_eq!(t.slices().len(), cut.slices().len());
    // Plain JSON cut inside its events loads too.
    let json = br#"{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2},{"ph":"X","cat":"cpu_op","na"#;
    let t = kineto::read_bytes(Path::new("c.json"), json).expect("loads");
    assert_eq!(t.slices().len(), 1);
    assert!(t
        .diagnostics()
        .iter()
        .any(|d| d.kind == streamscope_core::diagnostic::Kind::Truncated));
}

#[test]
fn writes_are_atomic_and_refuse_to_clobber_without_overwrite() {
    let dir = tmp_dir("atomic");
    let f = dir.join("out.pftrace");
    std::fs::write(&f, b"good").expect("write");
    // A write that fails half way leaves the old file.
    let e = write_atomically(&f, true, |w| {
        w.write_all(b"partial")?;
        Err(std::io::Error::other("disk full"))
    })
    .expect_err("fails");
    assert!(e.to_string().contains("out.pftrace"), "{e}");
    assert_eq!(std::fs::read(&f).expect("read"), b"good");
    // No temporary left behind.
    assert_eq!(std::fs::read_dir(&dir).expect("ls").count(), 1);
    let e = write_atomically(&f, false, |w| w.write_all(b"new")).expect_err("exists");
    assert!(matches!(e, TraceError::OutputExists { .. }), "{e}");
    write_atomically(&f, true, |w| w.write_all(b"new")).expect("overwrite");
    assert_eq!(std::fs::read(&f).expect("read"), b"new");
    // Two writers to one path: each result is whole, never interleaved.
    let t = synth(2, 3_000);
    let a = perfetto::write_trace(&t, Vec::new()).expect("bytes");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| perfetto::write_file(&t, &f).expect("write"));
        }
    });
    assert_eq!(std::fs::read(&f).expect("read"), a);
    assert_eq!(std::fs::read_dir(&dir).expect("ls").count(), 1);
}

#[test]
fn an_empty_trace_is_not_written() {
    let dir = tmp_dir("empty");
    let f = dir.join("empty.pftrace");
    let e = perfetto::write_file(&Trace::default(), &f).expect_err("nothing to write");
    assert!(matches!(e, TraceError::NothingToWrite { .. }), "{e}");
    let e = chrome::write_file(&Trace::default(), &dir.join("e.json")).expect_err("nothing");
    assert!(e.to_string().contains("e.json"), "{e}");
    assert_eq!(std::fs::read_dir(&dir).expect("ls").count(), 0);
}

#[test]
fn chrome_json_reads_back_as_the_model_it_was_written_from() {
    let dir = tmp_dir("chrome");
    for (name, t) in [
        ("synth", synth(2, 3_000)),
        (
            "kineto",
            kineto::read_file(&bundled(
                "core/tests/data/hta/nccl_parser_config/nccl_data.json.gz",
            ))
            .expect("kineto"),
        ),
        (
            "collector",
            load_paths(&[bundled("traces/fsdp-ref-serial-h200x2")]).expect("load"),
        ),
    ] {
        let f = dir.join(format!("{name}.json"));
        chrome::write_file(&t, &f).expect("export");
        let back = load_paths(std::slice::from_ref(&f)).expect("read back");
        assert_eq!(back.processes().len(), t.processes().len(), "{name}");
        assert_eq!(back.flows().len(), t.flows().len(), "{name}");
        assert_eq!(back.count_by_kind(), t.count_by_kind(), "{name}");
        assert_eq!(without_warnings(&back), without_warnings(&t), "{name}");
    }
}

#[test]
fn progress_counts_bytes_as_a_file_is_read() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use streamscope_core::synth::{fsdp_like, SynthOptions};
    let t = fsdp_like(&SynthOptions {
        target_slices: 600_000,
        ..Default::default()
    });
    let path = tmp_dir("progress").join("big.pftrace");
    streamscope_core::perfetto::write_file(&t, &path).expect("write");
    let size = std::fs::metadata(&path).expect("size").len();
    assert!(size > 16 << 20, "{size} bytes: more than two 8 MiB chunks");
    let (calls, bytes) = (AtomicU64::new(0), AtomicU64::new(0));
    let back = streamscope_core::load::load_file_with_progress(&path, &|n| {
        calls.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(n, Ordering::Relaxed);
    })
    .expect("loads");
    assert_eq!(back.slices().len(), t.slices().len());
    assert_eq!(
        bytes.load(Ordering::Relaxed),
        size,
        "every byte counted once"
    );
    assert!(
        calls.load(Ordering::Relaxed) >= 3,
        "counted as it was read, not at the end"
    );
    let _ = std::fs::remove_file(&path);
}
