//! Steps on any job: the period detector finds the steps of the real
//! recordings in traces/ once their step annotations are removed, and the
//! headline figures from detected steps stay within 2 percentage points of
//! those from the annotated steps. Also: optimizer-step markers, the
//! steady-state window, and `--steps` on a trace without steps.

use std::path::{Path, PathBuf};

use streamscope_core::analysis::steps::is_step_name;
use streamscope_core::analysis::{analyze, AnalysisOptions, Report, WindowRule};
use streamscope_core::load::load_paths;
use streamscope_core::model::*;
use streamscope_core::protocol::OPTIMIZER_STEP_RANGE;

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

const TRACES: [&str; 3] = [
    "fsdp-ref-overlap-h200x2",
    "fsdp-ref-serial-h200x2",
    "torch-fsdp2-h200x2",
];

/// Renames every step annotation (ProfilerStep, NVTX step ranges, the
/// collector's optimizer-step ranges) so that nothing marks a step.
/// Returns how many it removed.
fn strip_step_markers(t: &mut Trace) -> usize {
    let removed = t.intern("removed annotation");
    let mut n = 0;
    for i in 0..t.slices.len() {
        if !matches!(t.slices.kind[i], SliceKind::Range | SliceKind::CpuOp) {
            continue;
        }
        let name = t.str(t.slices.name[i]);
        if is_step_name(name) || name == OPTIMIZER_STEP_RANGE {
            t.slices.name[i] = removed;
            n += 1;
        }
    }
    n
}

fn load(name: &str) -> Trace {
    match load_paths(&[bundled(name)]) {
        Ok(t) => t,
        Err(e) => panic!("{name}: {e}"),
    }
}

fn steps_of(r: &Report, rank: u32) -> Vec<(i64, i64)> {
    r.steps
        .iter()
        .filter(|s| s.rank == rank)
        .map(|s| (s.start_ns, s.end_ns))
        .collect()
}

#[test]
fn period_detector_finds_the_steps_of_real_recordings() {
    for name in TRACES {
        let mut t = load(name);
        let annotated = analyze(&t, &AnalysisOptions::default());
        let removed = strip_step_markers(&mut t);
        assert!(removed > 0, "{name}: no step annotation to remove");
        let detected = analyze(&t, &AnalysisOptions::default());
        assert_eq!(annotated.ranks.len(), detected.ranks.len(), "{name}");
        for (a, d) in annotated.ranks.iter().zip(&detected.ranks) {
            let what = format!("{name} rank {}", a.rank);
            assert_eq!(a.step_source, "nvtx", "{what}");
            assert_eq!(d.step_source, "repetition", "{what}");
            assert_eq!(d.window.rule, WindowRule::SteadySteps, "{what}");
            let want = steps_of(&annotated, a.rank);
            let got = steps_of(&detected, d.rank);
            // Every detected step is one annotated step: the same count
            // (the first may be lost to warm-up) and each detected
            // period's duration within 5 % of an annotated step's.
            assert!(
                got.len() + 1 >= want.len() && got.len() <= want.len(),
                "{what}: {} detected vs {} annotated steps",
                got.len(),
                want.len()
            );
            let median = |v: &[(i64, i64)]| {
                let mut d: Vec<i64> = v.iter().map(|s| s.1 - s.0).collect();
                d.sort_unstable();
                d.get(d.len() / 2).copied().unwrap_or(0) as f64
            };
            // The annotated steps after the warm-up; the detected ones but
            // the last, which ends with the last kernel of its period.
            let (mw, mg) = (
                median(&want[1..]),
                median(&got[..got.len().saturating_sub(1).max(1)]),
            );
            eprintln!(
                "{what}: detected step durations {:?}",
                got.iter().map(|s| (s.1 - s.0) / 1000).collect::<Vec<_>>()
            );
            assert!(
                (mg - mw).abs() <= 0.05 * mw,
                "{what}: detected steps last {mg} ns (median), annotated {mw}"
            );
            let pp = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => (x - y).abs(),
                (None, None) => 0.0,
                _ => f64::INFINITY,
            };
            let dov = pp(a.breakdown.overlap_pct, d.breakdown.overlap_pct);
            let didle = pp(a.breakdown.idle_pct, d.breakdown.idle_pct);
            eprintln!(
                "{what}: {} annotated / {} detected steps; overlap {:?} / {:?}; idle {:?} / {:?}",
                want.len(),
                got.len(),
                a.breakdown.overlap_pct,
                d.breakdown.overlap_pct,
                a.breakdown.idle_pct,
                d.breakdown.idle_pct
            );
            assert!(dov <= 2.0, "{what}: overlap differs by {dov} points");
            assert!(didle <= 2.0, "{what}: idle differs by {didle} points");
        }
    }
}
