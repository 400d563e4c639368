//! The streamed report (one rank file at a time, collective records kept
//! across files) equals the in-memory report of the same files, and a
//! merge of rank-set summaries equals the report of all their files.

use std::path::{Path, PathBuf};

use streamscope_core::analysis::relocate::{Offsets, Relocate};
use streamscope_core::analysis::streamed::{self, Summary};
use streamscope_core::analysis::{analyze, render, AnalysisOptions};
use streamscope_core::diagnostic::Kind;
use streamscope_core::load::{is_trace_name, load_paths, sources};
use streamscope_core::synth::{fsdp_like_rank, SynthOptions};

fn in_memory(paths: &[PathBuf], opts: &AnalysisOptions) -> String {
    render::json(&analyze(&load_paths(paths).expect("load"), opts))
}

fn streamed_json(paths: &[PathBuf], opts: &AnalysisOptions) -> String {
    render::json(&streamed::analyze_files(paths, opts, &|_, _| {}).expect("streamed"))
}

/// Folders under traces/ that hold two or more trace files.
fn real_sets() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces");
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut files = 0;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if is_trace_name(&p) {
                files += 1;
            }
        }
        if files >= 2 {
            out.push(d);
        }
    }
    out.sort();
    out
}

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("ss-streamed-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` rank files of an `world`-rank synthetic job.
fn synth_job(dir: &Path, world: u32, ranks: &[u32], slices: usize) {
    let o = SynthOptions {
        ranks: world,
        target_slices: slices,
        ..Default::default()
    };
    for &r in ranks {
        let t = fsdp_like_rank(&o, r);
        streamscope_core::perfetto::write_file(&t, &dir.join(format!("rank-{r:04}.pftrace")))
            .expect("write");
    }
}

#[test]
fn real_traces_stream_to_the_same_report() {
    let sets = real_sets();
    assert!(!sets.is_empty(), "no multi-file folder under traces/");
    for dir in sets {
        let paths = vec![dir.clone()];
        let opts = AnalysisOptions::default();
        let a = in_memory(&paths, &opts);
        let b = streamed_json(&paths, &opts);
        assert!(a == b, "{}: streamed report differs", dir.display());
        // Cross-rank figures are there to compare where the folder holds two
        // ranks (graph-compile-h200's second file is a helper process).
        let v: serde_json::Value = serde_json::from_str(&b).expect("json");
        if v["ranks"].as_array().map_or(0, Vec::len) >= 2 {
            assert!(v["cross_rank"]["comm_kernels"].as_u64().unwrap_or(0) > 0);
        }
    }
}

#[test]
fn generated_ranks_stream_to_the_same_report() {
    let tmp = TempDir::new("synth");
    let ranks: Vec<u32> = (0..10).collect();
    synth_job(&tmp.0, 10, &ranks, 3_000);
    let paths = vec![tmp.0.clone()];
    let opts = AnalysisOptions::default();
    let a = in_memory(&paths, &opts);
    assert_eq!(a, streamed_json(&paths, &opts));
    let v: serde_json::Value = serde_json::from_str(&a).expect("json");
    assert_eq!(v["ranks"].as_array().map(Vec::len), Some(10));
    // Eight ranks per host: the second host's clock is aligned.
    assert!(v["cross_rank"]["instances"].as_u64().unwrap_or(0) > 0);
    assert!(v["cross_rank"]["clock_offsets"]
        .as_array()
        .is_some_and(|c| !c.is_empty()));
    // One rank, and a step range: still equal.
    for opts in [
        AnalysisOptions {
            rank: Some(9),
            ..Default::default()
        },
        AnalysisOptions {
            steps: Some((3, 5)),
            ..Default::default()
        },
        AnalysisOptions {
            rank: Some(40),
            ..Default::default()
        },
    ] {
        assert_eq!(
            in_memory(&paths, &opts),
            streamed_json(&paths, &opts),
            "{opts:?}"
        );
    }
}

#[test]
fn a_missing_rank_gets_the_same_note() {
    let tmp = TempDir::new("missing");
    synth_job(&tmp.0, 4, &[0, 1, 3], 2_000);
    let paths = vec![tmp.0.clone()];
    let opts = AnalysisOptions::default();
    let report = streamed::analyze_files(&paths, &opts, &|_, _| {}).expect("streamed");
    assert!(report
        .diagnostics
        .iter()
        .any(|d| d.kind == Kind::UnmatchedCollectives && d.detail.contains("3 of the job's 4")));
    assert_eq!(report.cross_rank.instances, 0);
    assert_eq!(render::json(&report), in_memory(&paths, &opts));
}

#[test]
fn ranks_numbered_across_files_and_a_skipped_file() {
    // Two files without RANK: the second pass numbers them as one load does.
    let tmp = TempDir::new("norank");
    let o = SynthOptions {
        ranks: 2,
        target_slices: 2_000,
        ..Default::default()
    };
    for r in 0..2 {
        let mut b = fsdp_like_rank(&o, r).into_builder();
        for p in b.processes_mut() {
            p.rank = None;
            p.local_rank = None;
        }
        let t = b.finish();
        streamscope_core::perfetto::write_file(&t, &tmp.0.join(format!("rank-{r}.pftrace")))
            .expect("write");
    }
    std::fs::write(tmp.0.join("rank-9.pftrace"), b"").expect("empty file");
    let paths = vec![tmp.0.clone()];
    let opts = AnalysisOptions::default();
    let a = in_memory(&paths, &opts);
    assert_eq!(a, streamed_json(&paths, &opts));
    let v: serde_json::Value = serde_json::from_str(&a).expect("json");
    assert_eq!(v["ranks"][1]["rank"], 1);
    assert!(a.contains("empty_file"), "{a}");
}

#[test]
fn summaries_of_two_rank_sets_merge_into_the_report_of_all() {
    let opts = AnalysisOptions::default();
    let tmp = TempDir::new("summary");
    for dir in real_sets() {
        // The files a directory load takes (of a directory of captures,
        // the latest capture's).
        let files: Vec<_> = sources(std::slice::from_ref(&dir))
            .expect("files")
            .into_iter()
            .map(|s| s.path)
            .collect();
        let half = files.len() / 2;
        let mut summaries = Vec::new();
        for (k, set) in [&files[..half], &files[half..]].into_iter().enumerate() {
            let parts = streamed::summarize_files(set, &opts, &|_, _| {}).expect("summary");
            let path = tmp.0.join(format!("node-{k}.summary"));
            Summary::new(parts, &opts)
                .write(&path, true)
                .expect("write");
            assert!(Summary::is_summary_file(&path));
            assert_eq!(Summary::read(&path).expect("read").files.len(), set.len());
            summaries.push(path);
        }
        let merged = streamed::merge_summaries(&summaries, &opts).expect("merge");
        assert!(
            render::json(&merged) == in_memory(&files, &opts),
            "{}: merged summaries differ from the direct report",
            dir.display()
        );
    }
    // Other options than the summaries were made with: a clear error.
    let path = tmp.0.join("node-0.summary");
    let other = AnalysisOptions {
        steps: Some((1, 2)),
        ..Default::default()
    };
    let err = streamed::merge_summaries(&[path], &other)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("other analysis options"), "{err}");
    // Not a summary: named.
    let junk = tmp.0.join("junk.summary");
    std::fs::write(&junk, b"{\"format\":\"x\"}").expect("write");
    assert!(!Summary::is_summary_file(&junk));
    let err = Summary::read(&junk)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("junk.summary") && err.contains("not a streamscope summary"),
        "{err}"
    );
}

/// The delta a relocated report's JSON number at `path` (object keys and
/// array indices) should show under `by`; `parent` is the object holding it.
fn expected_move(
    path: &[String],
    parent: Option<&serde_json::Value>,
    by: &Offsets,
) -> (&'static str, i64) {
    let last = path.last().map_or("", String::as_str);
    let key_before = |n: usize| path.len().checked_sub(n).map(|i| path[i].as_str());
    if last == "slice" || last == "comm_slice" || key_before(2) == Some("slices") {
        return ("slice", by.slices.into());
    }
    if key_before(3) == Some("per_all_gather") && last == "0" {
        return ("slice", by.slices.into());
    }
    if last == "process" {
        return ("process", by.processes.into());
    }
    let off_device = parent.is_some_and(|p| p["device"] == serde_json::json!(u32::MAX));
    if last == "device" && !off_device {
        return ("device", by.devices.into());
    }
    if last == "stream" && off_device {
        return ("track", by.tracks.into());
    }
    ("", 0)
}

fn walk_moves(
    a: &serde_json::Value,
    b: &serde_json::Value,
    path: &mut Vec<String>,
    parent: Option<&serde_json::Value>,
    by: &Offsets,
    moved: &mut std::collections::BTreeMap<&'static str, usize>,
) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.len(), y.len(), "{path:?}");
            for (k, v) in x {
                path.push(k.clone());
                walk_moves(v, &y[k], path, Some(a), by, moved);
                path.pop();
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path:?}");
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                path.push(i.to_string());
                walk_moves(v, w, path, parent, by, moved);
                path.pop();
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_u64() => {
            let (kind, d) = expected_move(path, parent, by);
            let (x, y) = (x.as_u64().expect("u64") as i64, y.as_i64().expect("int"));
            assert_eq!(y - x, d, "{path:?}: {x} -> {y}");
            if d != 0 {
                *moved.entry(kind).or_default() += 1;
            }
        }
        _ => assert_eq!(a, b, "{path:?}"),
    }
}

/// A relocated report differs from the original exactly at its slice,
/// process and device indices (and the streams of GPU tracks off any
/// device: their track ids), each moved by its offset.
#[test]
fn relocation_moves_every_index_and_nothing_else() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-overlap-h200x2");
    let report = analyze(
        &load_paths(&[dir]).expect("load"),
        &AnalysisOptions::default(),
    );
    let by = Offsets {
        slices: 1_000_000,
        processes: 1_000,
        devices: 100,
        tracks: 10_000,
    };
    let mut moved_report = report.clone();
    moved_report.relocate(&by);
    let a = serde_json::to_value(&report).expect("json");
    let b = serde_json::to_value(&moved_report).expect("json");
    let mut moved = std::collections::BTreeMap::new();
    walk_moves(&a, &b, &mut Vec::new(), None, &by, &mut moved);
    // Stall, prefetch and sync slice ids, rank processes, stream and
    // occupancy devices are all there and all moved.
    for kind in ["slice", "process", "device"] {
        assert!(
            moved.get(kind).copied().unwrap_or(0) > 0,
            "{kind}: {moved:?}"
        );
    }
    assert!(moved["slice"] > 1000, "{moved:?}");
}

/// Summaries of three rank sets of a six-rank job merge into the report of
/// all six files: every file after the first has its indices moved.
#[test]
fn summaries_of_three_rank_sets_merge_into_the_report_of_all() {
    let tmp = TempDir::new("three");
    let ranks: Vec<u32> = (0..6).collect();
    synth_job(&tmp.0, 6, &ranks, 2_000);
    let opts = AnalysisOptions::default();
    let files: Vec<_> = sources(std::slice::from_ref(&tmp.0))
        .expect("files")
        .into_iter()
        .map(|s| s.path)
        .collect();
    assert_eq!(files.len(), 6);
    let mut summaries = Vec::new();
    for (k, set) in files.chunks(2).enumerate() {
        let parts = streamed::summarize_files(set, &opts, &|_, _| {}).expect("summary");
        let path = tmp.0.join(format!("set-{k}.summary"));
        Summary::new(parts, &opts)
            .write(&path, true)
            .expect("write");
        summaries.push(path);
    }
    let merged = streamed::merge_summaries(&summaries, &opts).expect("merge");
    let direct = in_memory(&files, &opts);
    assert!(
        render::json(&merged) == direct,
        "merged summaries differ from the direct report"
    );
    let v: serde_json::Value = serde_json::from_str(&direct).expect("json");
    // The last rank's rows hold indices past the first files' counts.
    assert_eq!(v["ranks"][5]["process"], 5);
    assert!(v["ranks"][5]["idle_by_stream"][0]["device"].as_u64() >= Some(5));
}
