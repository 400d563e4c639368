//! Gzip-compressed Perfetto traces (.pftrace.gz, as traces/ ships them):
//! the same model as the plain file, cut or corrupt streams, gzip of
//! something else, directories mixing both, and writing .gz.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use streamscope_core::diagnostic::Kind;
use streamscope_core::dump::dump;
use streamscope_core::load::{expand, load_file, load_paths};
use streamscope_core::*;

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("streamscope-load-gzip-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn bundled(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(rel)
}

fn inflate(gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .expect("inflates");
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).expect("in-memory write");
    z.finish().expect("in-memory gzip")
}

/// The model without its warnings (which name the file they came from).
fn model(t: &Trace) -> String {
    let mut t = t.clone();
    t.take_diagnostics();
    dump(&t)
}

#[test]
fn a_gzipped_real_trace_loads_to_the_same_model_as_the_plain_file() {
    let dir = tmp_dir("same");
    for rank in 0..2 {
        let gz = bundled(&format!("torch-fsdp2-h200x2/rank-{rank}.pftrace.gz"));
        let bytes = std::fs::read(&gz).expect("bundled trace");
        assert!(bytes.starts_with(&[0x1f, 0x8b]), "shipped gzip-compressed");
        let plain = dir.join(format!("rank-{rank}.pftrace"));
        std::fs::write(&plain, inflate(&bytes)).expect("write");
        let (a, b) = (
            load_file(&gz).expect("gzip loads"),
            load_file(&plain).expect("plain loads"),
        );
        assert!(a.slices().len() > 10_000, "{}", a.slices().len());
        assert!(a.diagnostics().is_empty(), "{:?}", a.diagnostics());
        assert_eq!(dump(&a), dump(&b), "rank {rank}");
    }
    // The directory of plain files and the shipped one: one model.
    let shipped = load_paths(&[bundled("torch-fsdp2-h200x2")]).expect("shipped dir");
    let plain = load_paths(&[dir]).expect("plain dir");
    assert_eq!(shipped.processes().len(), 2);
    assert_eq!(model(&shipped), model(&plain));
}

#[test]
fn a_gzip_cut_before_its_first_packet_is_an_error_naming_the_file() {
    let dir = tmp_dir("cut");
    let gz = std::fs::read(bundled("sync-zoo-h200/rank-0.pftrace.gz")).expect("read");
    for cut in [2, 12, 40] {
        let f = dir.join(format!("cut-{cut}.pftrace.gz"));
        std::fs::write(&f, &gz[..cut]).expect("write");
        let e = load_file(&f).expect_err("nothing to load");
        let text = e.to_string();
        assert!(text.contains(&format!("cut-{cut}.pftrace.gz")), "{text}");
        assert!(text.contains("gzip"), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }
}

#[test]
fn a_gzip_cut_part_way_loads_what_it_holds_with_a_warning() {
    let dir = tmp_dir("half");
    let src = bundled("fsdp-ref-serial-h200x2/rank-0.pftrace.gz");
    let gz = std::fs::read(&src).expect("read");
    let full = load_file(&src).expect("whole file");
    let f = dir.join("rank-0.pftrace.gz");
    std::fs::write(&f, &gz[..gz.len() / 2]).expect("write");
    let cut = load_file(&f).expect("half a gzip stream loads");
    assert!(cut.slices().len() > full.slices().len() / 5);
    assert!(cut.slices().len() < full.slices().len());
    let warn = cut
        .diagnostics()
        .iter()
        .find(|d| d.kind == Kind::Truncated && d.detail.contains("gzip"))
        .unwrap_or_else(|| panic!("{:?}", cut.diagnostics()));
    assert_eq!(warn.file.as_deref(), Some(f.display().to_string().as_str()));
    // Damage inside the stream (bytes overwritten, not cut): what came
    // before it loads, with the same warning; no panic.
    let mut bad = gz.clone();
    let mid = bad.len() / 2;
    bad[mid..mid + 64].fill(0xff);
    let f = dir.join("damaged.pftrace.gz");
    std::fs::write(&f, &bad).expect("write");
    let t = load_file(&f).expect("loads up to the damage");
    assert!(t.slices().len() < full.slices().len());
    assert!(
        t.diagnostics().iter().any(|d| d.kind == Kind::Truncated),
        "{:?}",
        t.diagnostics()
    );
}

#[test]
fn gzip_of_something_else_is_not_a_trace() {
    let dir = tmp_dir("else");
    // Deterministic noise (a linear congruential generator), led by a byte
    // no trace starts with.
    let mut x: u64 = 0x5eed;
    let noise: Vec<u8> = std::iter::once(0x00)
        .chain((0..100_000).map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        }))
        .collect();
    for (name, bytes) in [
        ("noise.pftrace.gz", gzip(&noise)),
        ("notes.pftrace.gz", gzip(b"hello, not a trace\n")),
        ("twice.pftrace.gz", gzip(&gzip(b"{}"))),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, bytes).expect("write");
        let e = load_file(&f).expect_err("not a trace");
        assert!(matches!(e, TraceError::NotATrace { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("not a trace") && text.contains(name),
            "{text}"
        );
    }
    // A gzip of nothing is an empty file.
    let f = dir.join("empty.pftrace.gz");
    std::fs::write(&f, gzip(b"")).expect("write");
    let e = load_file(&f).expect_err("empty");
    assert!(matches!(e, TraceError::Empty { .. }), "{e}");
}

#[test]
fn a_directory_mixing_plain_and_gzip_ranks_loads_both() {
    let dir = tmp_dir("mixed");
    let gz0 = std::fs::read(bundled("fsdp-ref-serial-h200x2/rank-0.pftrace.gz")).expect("read");
    let gz1 = bundled("fsdp-ref-serial-h200x2/rank-1.pftrace.gz");
    std::fs::write(dir.join("rank-0.pftrace"), inflate(&gz0)).expect("write");
    std::fs::copy(&gz1, dir.join("rank-1.pftrace.gz")).expect("copy");
    std::fs::write(dir.join("notes.txt.gz"), gzip(b"not listed")).expect("write");
    let listed = expand(&dir).expect("lists");
    let names: Vec<String> = listed
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["rank-0.pftrace", "rank-1.pftrace.gz"]);
    let t = load_paths(std::slice::from_ref(&dir)).expect("both load");
    let mut ranks: Vec<_> = t.processes().iter().filter_map(|p| p.rank).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1]);
    assert!(t.diagnostics().is_empty(), "{:?}", t.diagnostics());
    let shipped = load_paths(&[bundled("fsdp-ref-serial-h200x2")]).expect("shipped");
    assert_eq!(model(&t), model(&shipped));
    // Capture files and .perfetto-trace.gz are picked up like their plain names.
    let caps = tmp_dir("captures");
    std::fs::copy(&gz1, caps.join("rank-1.capture-1.pftrace.gz")).expect("copy");
    std::fs::write(caps.join("rank-0.capture-1.perfetto-trace.gz"), &gz0).expect("write");
    let t = load_paths(&[caps]).expect("captures load");
    assert_eq!(t.processes().len(), 2);
}

#[test]
fn a_model_written_to_a_gz_name_is_gzip_and_reads_back_the_same() {
    let dir = tmp_dir("write");
    let t = load_paths(&[bundled("sync-zoo-h200")]).expect("loads");
    let out = dir.join("zoo.pftrace.gz");
    perfetto::write_new_file(&t, &out, false).expect("writes");
    let bytes = std::fs::read(&out).expect("read");
    assert!(bytes.starts_with(&[0x1f, 0x8b]), "gzip");
    let back = load_file(&out).expect("reads back");
    // The same as the plain export of the same model.
    let plain = dir.join("zoo.pftrace");
    perfetto::write_new_file(&t, &plain, false).expect("writes");
    assert_eq!(inflate(&bytes), std::fs::read(&plain).expect("read"));
    assert_eq!(model(&back), model(&load_file(&plain).expect("plain")));
    assert_eq!(back.slices().len(), t.slices().len());
    // Chrome JSON to a .json.gz name too.
    let json = dir.join("zoo.json.gz");
    chrome::write_new_file(&t, &json, false).expect("writes");
    assert!(std::fs::read(&json)
        .expect("read")
        .starts_with(&[0x1f, 0x8b]));
    assert_eq!(
        load_file(&json).expect("reads back").slices().len(),
        t.slices().len()
    );
    // No temporary file left.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("ls")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty());
}
