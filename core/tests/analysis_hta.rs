//! HTA parity: the headline numbers on HTA's own sample traces match what
//! HTA 0.5 computes (tests/data/hta/EXPECTED.md) within 0.05
//! percentage points, and the µs figures within 1 µs.

use std::path::PathBuf;

use streamscope_core::analysis::{analyze, AnalysisOptions, WindowRule};

fn trace(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta")
        .join(rel)
}

struct Expected {
    file: &'static str,
    rank: u32,
    steps: &'static [i64],
    overlap_pct: f64,
    comm_us: f64,
    overlap_us: f64,
    idle_us: f64,
    compute_us: f64,
    non_compute_us: f64,
    kernel_time_us: f64,
    idle_pct: f64,
    compute_pct: f64,
    non_compute_pct: f64,
}

const EXPECTED: [Expected; 4] = [
    Expected {
        file: "trace_filter/sampled_rank-0.json.gz",
        rank: 0,
        steps: &[551],
        overlap_pct: 11.81,
        comm_us: 195327.0,
        overlap_us: 23068.0,
        idle_us: 321378.0,
        compute_us: 106252.0,
        non_compute_us: 172428.0,
        kernel_time_us: 600058.0,
        idle_pct: 53.56,
        compute_pct: 17.71,
        non_compute_pct: 28.74,
    },
    Expected {
        file: "trace_filter/sampled_rank-1.json.gz",
        rank: 1,
        steps: &[551],
        overlap_pct: 20.05,
        comm_us: 168027.0,
        overlap_us: 33691.0,
        idle_us: 328671.0,
        compute_us: 135548.0,
        non_compute_us: 136455.0,
        kernel_time_us: 600674.0,
        idle_pct: 54.72,
        compute_pct: 22.57,
        non_compute_pct: 22.72,
    },
    Expected {
        file: "nccl_parser_config/nccl_data.json.gz",
        rank: 0,
        steps: &[4, 5],
        overlap_pct: 14.31,
        comm_us: 24278.0,
        overlap_us: 3473.0,
        idle_us: 338781.0,
        compute_us: 75169.0,
        non_compute_us: 21636.0,
        kernel_time_us: 435586.0,
        idle_pct: 77.78,
        compute_pct: 17.26,
        non_compute_pct: 4.97,
    },
    Expected {
        file: "df_index_resolver/df_index_resolver.json.gz",
        rank: 1,
        steps: &[2, 3, 4, 5],
        overlap_pct: 0.0,
        comm_us: 238274.0,
        overlap_us: 0.0,
        idle_us: 643612.0,
        compute_us: 496485.0,
        non_compute_us: 256572.0,
        kernel_time_us: 1396669.0,
        idle_pct: 46.08,
        compute_pct: 35.55,
        non_compute_pct: 18.37,
    },
];

fn close(what: &str, file: &str, got: Option<f64>, want: f64, tol: f64) {
    let got = got.unwrap_or(f64::NAN);
    assert!(
        (got - want).abs() <= tol,
        "{file}: {what} = {got}, HTA says {want}"
    );
}

#[test]
fn matches_hta_on_its_sample_traces() {
    for e in &EXPECTED {
        let t = match streamscope_core::kineto::read_file(&trace(e.file)) {
            Ok(t) => t,
            Err(err) => panic!("{}: {err}", e.file),
        };
        let r = analyze(&t, &AnalysisOptions::default());
        assert_eq!(r.ranks.len(), 1, "{}", e.file);
        let k = &r.ranks[0];
        let f = e.file;
        assert_eq!(k.rank, e.rank, "{f}");
        assert!(k.has_gpu_events, "{f}");
        assert_eq!(k.window.rule, WindowRule::HtaSteps, "{f}");
        assert_eq!(k.window.steps, e.steps, "{f}");
        close("overlap %", f, k.breakdown.overlap_pct, e.overlap_pct, 0.05);
        close("idle %", f, k.breakdown.idle_pct, e.idle_pct, 0.05);
        close("compute %", f, k.breakdown.compute_pct, e.compute_pct, 0.05);
        close(
            "non-compute %",
            f,
            k.breakdown.non_compute_pct,
            e.non_compute_pct,
            0.05,
        );
        close("comm us", f, Some(k.breakdown.comm_us), e.comm_us, 1.0);
        close(
            "overlap us",
            f,
            Some(k.breakdown.overlap_us),
            e.overlap_us,
            1.0,
        );
        close("idle us", f, Some(k.breakdown.idle_us), e.idle_us, 1.0);
        close(
            "compute us",
            f,
            Some(k.breakdown.compute_us),
            e.compute_us,
            1.0,
        );
        close(
            "non-compute us",
            f,
            Some(k.breakdown.non_compute_us),
            e.non_compute_us,
            1.0,
        );
        close(
            "kernel time us",
            f,
            Some(k.breakdown.kernel_time_us),
            e.kernel_time_us,
            1.0,
        );
        close(
            "exposed comm us",
            f,
            Some(k.breakdown.exposed_comm_us),
            e.comm_us - e.overlap_us,
            1.0,
        );
    }
}

#[test]
fn two_ranks_loaded_together_match_hta_per_rank() {
    let paths = [trace(EXPECTED[0].file), trace(EXPECTED[1].file)];
    let t = streamscope_core::load::load_paths(&paths).unwrap_or_else(|e| panic!("{e}"));
    let r = analyze(&t, &AnalysisOptions::default());
    assert_eq!(r.ranks.len(), 2);
    for e in &EXPECTED[..2] {
        let k = r
            .ranks
            .iter()
            .find(|k| k.rank == e.rank)
            .unwrap_or_else(|| panic!("rank {}", e.rank));
        close(
            "overlap %",
            e.file,
            k.breakdown.overlap_pct,
            e.overlap_pct,
            0.05,
        );
        close("idle %", e.file, k.breakdown.idle_pct, e.idle_pct, 0.05);
        close(
            "compute %",
            e.file,
            k.breakdown.compute_pct,
            e.compute_pct,
            0.05,
        );
        close(
            "non-compute %",
            e.file,
            k.breakdown.non_compute_pct,
            e.non_compute_pct,
            0.05,
        );
    }
    // SendRecv kernels on stream 84, 10 per rank, HTA's window keeps those launched in step 551.
    let sr: Vec<_> = r
        .collectives
        .iter()
        .filter(|c| c.collective == "SendRecv")
        .collect();
    assert_eq!(sr.len(), 2, "{:?}", r.collectives);
    assert!(sr
        .iter()
        .all(|c| c.protocol == "SIMPLE" && c.dtype == "i8" && c.count <= 10));
}

/// (stream, host wait µs, kernel wait µs, other µs).
type StreamIdleRow = (u32, f64, f64, f64);

/// HTA's get_idle_time_breakdown (defaults) on its sample traces:
/// (stream, host wait, kernel wait, other) in µs.
#[test]
fn idle_breakdown_per_stream_matches_hta() {
    let cases: [(&str, &[StreamIdleRow]); 3] = [
        (
            "nccl_parser_config/nccl_data.json.gz",
            &[(7, 357247.0, 2155.0, 0.0), (40, 381499.0, 0.0, 0.0)],
        ),
        (
            "trace_filter/sampled_rank-0.json.gz",
            &[
                (7, 213825.0, 1985.0, 261740.0),
                (23, 596037.0, 70.0, 34.0),
                (25, 0.0, 9.0, 47865.0),
                (84, 148934.0, 6.0, 0.0),
                (203, 0.0, 0.0, 0.0),
            ],
        ),
        (
            "df_index_resolver/df_index_resolver.json.gz",
            &[
                (7, 791330.0, 16727.0, 73829.0),
                (14, 933139.0, 5568.0, 4444.0),
            ],
        ),
    ];
    for (file, want) in cases {
        let t = streamscope_core::kineto::read_file(&trace(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let r = analyze(&t, &AnalysisOptions::default());
        let got = &r.ranks[0].idle_by_stream;
        assert_eq!(got.len(), want.len(), "{file}: {got:?}");
        for &(stream, host, kernel, other) in want {
            let s = got
                .iter()
                .find(|s| s.at.stream() == Some(stream))
                .unwrap_or_else(|| panic!("{file}: stream {stream}"));
            let ctx = format!("{file} stream {stream}: {s:?}");
            assert!((s.host_wait_us - host).abs() <= 1.0, "{ctx}");
            assert!((s.kernel_wait_us - kernel).abs() <= 1.0, "{ctx}");
            assert!((s.other_us - other).abs() <= 1.0, "{ctx}");
        }
    }
}
