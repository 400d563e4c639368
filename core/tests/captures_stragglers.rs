//! The recordings of on-demand captures, a planted straggler and a whole
//! torch FSDP2 job with the NCCL plugin (traces/, recorded on 2 × H200 by
//! scripts/gpu/truth.sh parts `capture` and `straggler`).

use std::path::{Path, PathBuf};

use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::diagnostic::Kind;
use streamscope_core::load::load_paths;

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

fn capture_files(k: u32) -> Vec<PathBuf> {
    (0..2)
        .map(|r| {
            bundled(&format!(
                "torch-fsdp2-capture-h200x2/rank-{r}.capture-{k}.pftrace.gz"
            ))
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Per rank: median duration (ms) and overlap (%) of whole steps from `from`.
fn step_figures(r: &Report, rank: u32, from: i64) -> (f64, f64) {
    let st: Vec<_> = r
        .steps
        .iter()
        .filter(|s| s.rank == rank && s.step >= from)
        .collect();
    (
        median(st.iter().map(|s| s.duration_us / 1e3).collect()),
        median(st.iter().filter_map(|s| s.breakdown.overlap_pct).collect()),
    )
}

#[test]
fn a_directory_of_captures_loads_the_latest_and_says_so() {
    let t = load_paths(&[bundled("torch-fsdp2-capture-h200x2")]).expect("load");
    assert_eq!(t.processes().len(), 2);
    let d: Vec<_> = t
        .diagnostics()
        .iter()
        .filter(|d| d.kind == Kind::CaptureChosen)
        .collect();
    assert_eq!(d.len(), 1, "{:?}", t.diagnostics());
    assert!(d[0].detail.contains("capture 2 loaded"), "{}", d[0].detail);
    // The same processes as naming capture 2's files.
    let named = load_paths(&capture_files(2)).expect("load");
    assert_eq!(t.slices().len(), named.slices().len());
}

#[test]
fn captures_are_aligned_across_ranks_and_agree_with_the_whole_recording() {
    let full = analyze(
        &load_paths(&[bundled("torch-fsdp2-full-h200x2")]).expect("load"),
        &AnalysisOptions::default(),
    );
    for k in [1, 2] {
        let t = load_paths(&capture_files(k)).expect("load");
        assert_eq!(t.processes().len(), 2);
        let starts: Vec<i64> = t
            .processes()
            .iter()
            .map(|p| p.capture_start_ns.expect("a capture"))
            .collect();
        let ends: Vec<i64> = t
            .processes()
            .iter()
            .map(|p| p.capture_end_ns.expect("a capture"))
            .collect();
        // Both ranks begin within 1 ms (one wall-clock instant, or each
        // rank's next step boundary).
        assert!(
            (starts[0] - starts[1]).abs() < 1_000_000,
            "capture {k}: {starts:?}"
        );
        assert!(ends.iter().zip(&starts).all(|(e, s)| e > s));
        assert!(t.processes().iter().all(|p| p.dropped_records == 0));
        let r = analyze(&t, &AnalysisOptions::default());
        for rank in 0..2 {
            let whole = r
                .steps
                .iter()
                .filter(|s| s.rank == rank && s.step >= 1)
                .count();
            assert!(whole >= 2, "capture {k} rank {rank}: {whole} whole steps");
            // FSDP2 warms up over its first steps: the whole recording's
            // steady state is from step 4.
            let (ms, ov) = step_figures(&r, rank, 1);
            let (full_ms, full_ov) = step_figures(&full, rank, 4);
            assert!(
                (ms / full_ms - 1.0).abs() < 0.06,
                "capture {k} rank {rank}: step {ms:.1} ms vs {full_ms:.1} ms recorded whole"
            );
            assert!(
                (ov - full_ov).abs() < 3.0,
                "capture {k} rank {rank}: overlap {ov:.1} % vs {full_ov:.1} %"
            );
        }
    }
}

#[test]
fn the_planted_straggler_is_named_and_its_cost_accounted_for() {
    let r = analyze(
        &load_paths(&[bundled("fsdp-ref-straggler-h200x2")]).expect("load"),
        &AnalysisOptions::default(),
    );
    // The same job without a straggler.
    let base = analyze(
        &load_paths(&[bundled("fsdp-ref-overlap-h200x2")]).expect("load"),
        &AnalysisOptions::default(),
    );
    let steady: Vec<_> = r.steps.iter().filter(|s| s.step >= 1).collect();
    assert!(steady.len() >= 20);
    assert!(
        steady.iter().all(|s| s.straggler_rank == Some(1)),
        "every step names rank 1"
    );
    let wait = median(
        steady
            .iter()
            .filter_map(|s| s.straggler_wait_us)
            .map(|w| w / 1e3)
            .collect(),
    );
    let comm = |r: &Report| {
        median(
            r.steps
                .iter()
                .filter(|s| s.rank == 0 && s.step >= 1)
                .map(|s| s.breakdown.comm_us / 1e3)
                .collect(),
        )
    };
    let added = comm(&r) - comm(&base);
    // Rank 0's NCCL kernels last longer by what it waits for rank 1.
    assert!(
        (wait / added - 1.0).abs() < 0.10,
        "wait {wait:.1} ms vs rank 0's added NCCL time {added:.1} ms"
    );
    // Bounded by the planted host sleep: 16 all-gathers x 5 ms.
    assert!(wait < 80.0 && wait > 40.0, "{wait}");
    assert!(r
        .ranks
        .iter()
        .all(|k| k.exposed_wait_us > Some(0.0) || k.rank == 1));
}

#[test]
fn pytorchs_own_nccl_loads_the_plugin_and_collectives_carry_bytes() {
    let t = load_paths(&[bundled("torch-fsdp2-full-h200x2")]).expect("load");
    for p in t.processes() {
        let plugin = p
            .metadata
            .iter()
            .find(|(k, _)| k == "nccl_profiler_plugin")
            .map(|(_, v)| v.as_str())
            .unwrap_or("");
        assert!(
            plugin.starts_with("v5: init called"),
            "{}: {plugin}",
            p.name
        );
    }
    let r = analyze(&t, &AnalysisOptions::default());
    let kinds = &r.cross_rank.kinds;
    assert!(!kinds.is_empty());
    // A block: LayerNorm(4096) + Linear(4096, 16384) + Linear(16384, 4096),
    // weights and biases: 134,246,400 parameters. Gathered in bf16 (2
    // bytes), gradients reduce-scattered in fp32 (4 bytes).
    let params = 2 * 4096 + (4096 * 16384 + 16384) + (16384 * 4096 + 4096);
    assert_eq!(params, 134_246_400);
    for k in kinds {
        let bytes = k.bytes.expect("bytes from the plugin");
        let per = bytes / k.count;
        let want = match k.collective.as_str() {
            "AllGather" => 2 * params,
            "ReduceScatter" => 4 * params,
            other => panic!("unexpected collective {other}"),
        };
        assert_eq!(per, want, "{}", k.collective);
        assert_eq!(bytes % k.count, 0);
        assert!(k.bus_bw_gbps.is_some_and(|b| b > 10.0));
    }
}
