//! A Kineto import for analysis only (`KeepArgs::Analysis`, as `report`
//! loads) against the full import: the same slices, counters and tracks,
//! argument sets that are the full ones restricted to the analyses' keys
//! (`analysis::ARG_KEYS`), and byte-identical reports; on HTA's traces
//! (the large one read in pieces on two threads) and on documents made to
//! hold what the lean reader must not drop.

use std::io::Write;
use std::path::{Path, PathBuf};

use streamscope_core::analysis::{analyze, compare, render, AnalysisOptions, ARG_KEYS};
use streamscope_core::load::{load_file_keeping, KeepArgs};
use streamscope_core::{SliceId, SliceKind, Trace};

fn hta(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta")
        .join(rel)
}

/// Each slice's arguments as (key, value) text.
fn args_text(t: &Trace, keep: impl Fn(&str) -> bool) -> Vec<Vec<(String, String)>> {
    (0..t.slices().len())
        .map(|i| {
            t.args_of(SliceId::from_index(i))
                .iter()
                .map(|(k, v)| (t.str(*k).to_string(), t.arg_value_string(v)))
                .filter(|(k, _)| keep(k))
                .collect()
        })
        .collect()
}

/// Everything but the argument sets, as text.
fn columns(t: &Trace) -> Vec<String> {
    let s = t.slices();
    let mut out: Vec<String> = (0..s.len())
        .map(|i| {
            format!(
                "{} {} {} {:?} {:?} {} {}",
                s.track()[i].index(),
                s.start_ns()[i],
                s.dur_ns()[i],
                s.kind()[i],
                s.class()[i],
                t.str(s.name()[i]),
                s.correlation()[i],
            )
        })
        .collect();
    out.extend(
        s.ids()
            .map(|i| format!("{:?} {:?}", t.launch_of(i), t.copy_of(i))),
    );
    out.extend(t.flows().iter().map(|f| format!("{f:?}")));
    out.extend(t.diagnostics().iter().map(|d| format!("{d:?}")));
    let c = t.counters();
    out.extend((0..c.len()).map(|i| {
        format!(
            "counter {} {} {}",
            c.track()[i].index(),
            c.ts_ns()[i],
            c.value()[i]
        )
    }));
    out.extend(
        t.tracks()
            .iter()
            .map(|k| format!("track {:?} {:?}", k.kind, t.str(k.name))),
    );
    out
}

/// Checks the lean import of `path` against the full one; the number of
/// arguments the lean one left out.
fn check(path: &Path) -> usize {
    let full = load_file_keeping(path, KeepArgs::All).expect("full import");
    let lean = load_file_keeping(path, KeepArgs::Analysis).expect("lean import");
    let name = path.display();
    assert_eq!(
        columns(&full),
        columns(&lean),
        "{name}: slices, counters or tracks differ"
    );
    let analysis_key = |k: &str| ARG_KEYS.contains(&k);
    assert_eq!(
        args_text(&full, analysis_key),
        args_text(&lean, |_| true),
        "{name}: lean argument sets are not the full ones restricted to ARG_KEYS"
    );
    let opts = AnalysisOptions::default();
    assert!(
        render::json(&analyze(&full, &opts)) == render::json(&analyze(&lean, &opts)),
        "{name}: reports differ"
    );
    let count = |t: &Trace| args_text(t, |_| true).iter().map(Vec::len).sum::<usize>();
    count(&full) - count(&lean)
}

#[test]
fn hta_traces_analyze_the_same_from_a_lean_import() {
    let mut dropped = 0;
    for rel in [
        "df_index_resolver/df_index_resolver.json.gz",
        "nccl_parser_config/nccl_data.json.gz",
        "trace_filter/sampled_rank-0.json.gz",
        "trace_filter/sampled_rank-1.json.gz",
    ] {
        dropped += check(&hta(rel));
    }
    // The lean import does leave arguments out (CPU ops' External id, ...).
    assert!(dropped > 100_000, "only {dropped} arguments left out");
}

#[test]
fn runs_compare_the_same_from_a_lean_import() {
    // Two runs of one rank: HTA's rank-0 trace, and the same with every
    // kernel 10 % longer (a test run against its control).
    let a = hta("trace_filter/sampled_rank-0.json.gz");
    let opts = AnalysisOptions::default();
    let with = |keep| {
        let control = load_file_keeping(&a, keep).expect("import");
        let mut b = control.clone().into_builder();
        for i in 0..b.slices().len() {
            if b.slices().kind()[i] == SliceKind::Kernel {
                let d = b.slices().dur_ns()[i];
                b.set_slice_dur(SliceId::from_index(i), d + d / 10);
            }
        }
        let test = b.finish();
        let c = compare::compare(&control, &test, ("a", "b"), &opts);
        assert!(
            !c.ranks.is_empty() && !c.kernels.is_empty(),
            "nothing compared"
        );
        compare::json(&c)
    };
    assert!(
        with(KeepArgs::All) == with(KeepArgs::Analysis),
        "comparisons differ"
    );
}

#[test]
fn what_if_replays_the_same_from_a_lean_import() {
    use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions};
    let opts = WhatIfOptions {
        changes: Changes {
            comm_scale: Some(2.0),
            link_bw_gbps: None,
            compute_scale: Some(0.5),
            drop_syncs: false,
            unblock_legacy: false,
            prefetch_deeper: None,
        },
        drop_syncs: Vec::new(),
        launch_queue: None,
    };
    for rel in [
        "trace_filter/sampled_rank-0.json.gz",
        "nccl_parser_config/nccl_data.json.gz",
    ] {
        let run = |keep| {
            let t = load_file_keeping(&hta(rel), keep).expect("import");
            let r = whatif(&t, &opts).expect("replay");
            assert!(!r.ranks.is_empty(), "{rel}: nothing replayed");
            format!("{r:?}")
        };
        assert!(
            run(KeepArgs::All) == run(KeepArgs::Analysis),
            "{rel}: what-if differs"
        );
    }
}

/// A document with what the lean reader must keep: the analyses' keys on
/// CPU ops and kernels, the import's own keys, counters (whose arguments
/// are their series), memory instants, metadata, an event whose `ph`
/// follows its `args`, nested and odd values in dropped arguments, and
/// an event serde_json reads (an escape).
fn tricky_document(events: usize) -> String {
    let mut ev = vec![
        r#"{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "trainer"}}"#.to_string(),
        r#"{"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "main"}}"#
            .to_string(),
    ];
    for i in 0..events {
        let ts = 1_000 + 10 * i;
        let c = 100 + i;
        ev.push(format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 7, "tid": 8, "ts": {ts}, "dur": 9, "args": {{"External id": {i}, "Input Dims": [[4096, 4096], [], [1, 2, 3]], "Input type": ["c10::BFloat16", ""], "Collective name": "_allgather_base", "In msg nelems": 1024, "Out msg nelems": 2048, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Seq": {i}, "odd": {{"deep": [1e300, -0.0, 1E-5, "x\"y"]}}, "python": "train.py:{i}"}}}}"#
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 8, "ts": {ts}, "dur": 3, "args": {{"External id": {i}, "cbid": 211, "correlation": {c}, "big": 123456789012345678901234, "f": 2.5}}}}"#
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 7, "ts": {}, "dur": 4, "args": {{"queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": {c}, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.1, "warps per SM": 0.5, "grid": [2, 1, 1], "block": [512, 1, 1], "est. achieved occupancy %": 0, "Collective name": "_allgather_base", "In msg nelems": 1024, "Out msg nelems": 2048, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Seq": {i}}}}}"#,
            ts + 2
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": {}, "dur": 1, "args": {{"device": 0, "stream": 7, "correlation": {c}, "bytes": 4096, "memory bandwidth (GB/s)": 1.5}}}}"#,
            ts + 7
        ));
        ev.push(format!(
            r#"{{"args": {{"External id": {i}, "python": "late.py:1", "Seq": 3}}, "ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 7, "tid": 8, "ts": {}, "dur": 1}}"#,
            ts + 1
        ));
        ev.push(format!(
            r#"{{"ph": "C", "name": "queue", "pid": 7, "ts": {ts}, "args": {{"depth": {i}, "External id": 3}}}}"#
        ));
        ev.push(format!(
            r#"{{"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 8, "ts": {ts}, "args": {{"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 512, "Total Allocated": {}, "Total Reserved": 4096}}}}"#,
            512 * i
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "esc\u0061ped", "pid": 7, "tid": 8, "ts": {}, "dur": 1, "args": {{"External id": {i}, "python": "e.py:{i}"}}}}"#,
            ts + 3
        ));
        ev.push(format!(r#"{{"ph": "f", "id": {c}, "pid": 0, "tid": 7, "ts": {ts}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}"#));
    }
    format!(
        "{{\"schemaVersion\": 1, \"traceEvents\": [\n{}\n], \"baseTimeNanoseconds\": 1700000000000000000}}",
        ev.join(",\n")
    )
}

#[test]
fn made_up_documents_analyze_the_same_from_a_lean_import() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("streamscope-lean-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Small (one pass, plain and gzip) and large (gzip read in pieces).
    for (events, name) in [(20, "small"), (6_000, "large")] {
        let text = tricky_document(events);
        let plain = dir.join(format!("{name}.json"));
        std::fs::write(&plain, &text).expect("write json");
        let gz = dir.join(format!("{name}.json.gz"));
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(text.as_bytes()).expect("gzip");
        std::fs::write(&gz, z.finish().expect("gzip")).expect("write gz");
        for p in [&plain, &gz] {
            let dropped = check(p);
            // External id, Input Dims, Input type, odd, cbid, big, f, queued, ...
            assert!(
                dropped >= 10 * events,
                "{}: {dropped} left out",
                p.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
