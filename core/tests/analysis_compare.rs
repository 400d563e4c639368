//! `compare`: two real 2 x H200 recordings of fsdp-ref, serial against
//! overlapped (traces/), and a run against itself.

use std::path::PathBuf;

use streamscope_core::analysis::{compare, AnalysisOptions};
use streamscope_core::diagnostic::Kind;
use streamscope_core::load::load_paths;
use streamscope_core::ProcessId;

fn bundled(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
}

#[test]
fn overlapped_fsdp_ref_against_serial() {
    let a = load_paths(&[bundled("traces/fsdp-ref-serial-h200x2")]).expect("serial");
    let b = load_paths(&[bundled("traces/fsdp-ref-overlap-h200x2")]).expect("overlap");
    let c = compare::compare(&a, &b, ("serial", "overlap"), &AnalysisOptions::default());
    assert_eq!(c.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1]);
    for r in &c.ranks {
        // Overlap shortens the step and hides communication (the trace's
        // own report: 41.5 vs 33.6 ms on rank 0).
        let (sa, sb) = (
            r.control.step_us.expect("steps"),
            r.test.step_us.expect("steps"),
        );
        assert!(sb < sa * 0.9, "rank {}: {sa} -> {sb}", r.rank);
        let d = r.step_delta_us.expect("delta");
        assert!((d - (sb - sa)).abs() < 1e-6);
        assert!(r.test.overlap_pct > r.control.overlap_pct);
        assert!(r.test.exposed_comm_us_per_step < r.control.exposed_comm_us_per_step / 2.0);
    }
    // The same model: the same collectives per step, and the kernels that
    // share the SMs with NCCL get slower when overlapped.
    let coll: Vec<&str> = c.collectives.iter().map(|k| k.name.as_str()).collect();
    assert!(
        coll.contains(&"AllGather") && coll.contains(&"ReduceScatter"),
        "{coll:?}"
    );
    for k in &c.collectives {
        assert!((k.control_count - k.test_count).abs() < 0.5, "{k:?}");
    }
    let compute_delta: f64 = c
        .kernels
        .iter()
        .filter(|k| k.class == "compute")
        .map(|k| k.delta_us)
        .sum();
    assert!(compute_delta > 0.0, "{compute_delta}");
    // Largest change first.
    for w in c.kernels.windows(2) {
        assert!(w[0].delta_us.abs() >= w[1].delta_us.abs());
    }
    for k in &c.kernels {
        assert!((k.delta_us - (k.test_us - k.control_us)).abs() < 1e-9);
    }
    let text = compare::text(&c);
    assert!(
        text.contains("Per rank") && text.contains("AllGather"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&compare::json(&c)).expect("json");
    assert_eq!(json["ranks"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_run_against_itself_changes_nothing() {
    let a = load_paths(&[bundled("traces/torch-fsdp2-h200x2")]).expect("fsdp2");
    let c = compare::compare(&a, &a, ("a", "a"), &AnalysisOptions::default());
    assert_eq!(c.ranks.len(), 2);
    for r in &c.ranks {
        assert_eq!(r.step_delta_us, Some(0.0));
        assert_eq!(r.control, r.test);
    }
    assert!(!c.kernels.is_empty());
    assert!(c
        .kernels
        .iter()
        .all(|k| k.delta_us == 0.0 && k.control_count == k.test_count));
}

#[test]
fn a_rank_in_one_run_only_is_named_and_left_out() {
    let dir = bundled("traces/fsdp-ref-overlap-h200x2");
    let both = load_paths(std::slice::from_ref(&dir)).expect("two ranks");
    let one = load_paths(&[dir.join("rank-1.pftrace.gz")]).expect("rank 1");
    let c = compare::compare(&both, &one, ("both", "one"), &AnalysisOptions::default());
    assert_eq!(c.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [1]);
    assert!(
        c.diagnostics
            .iter()
            .any(|d| d.kind == Kind::NoSuchRank && d.file.as_deref() == Some("both")),
        "{:?}",
        c.diagnostics
    );
}

#[test]
fn side_by_side_aligns_the_first_steps() {
    use streamscope_core::analysis::analyze;
    let a = load_paths(&[bundled("traces/fsdp-ref-serial-h200x2")]).expect("serial");
    let b = load_paths(&[bundled("traces/fsdp-ref-overlap-h200x2")]).expect("overlap");
    let opts = AnalysisOptions::default();
    // The first step number both headline windows of rank 0 hold starts
    // at the same time in both runs once B is moved.
    let starts = |t: &streamscope_core::Trace| -> Vec<(i64, i64)> {
        let r = analyze(t, &opts);
        let w = &r.ranks.iter().find(|k| k.rank == 0).expect("rank 0").window;
        let mut v: Vec<(i64, i64)> = r
            .steps
            .iter()
            .filter(|s| s.rank == 0 && w.steps.contains(&s.step))
            .map(|s| (s.step, s.start_ns))
            .collect();
        v.sort_unstable();
        v
    };
    let (sa, sb) = (starts(&a), starts(&b));
    let (n, ta) = *sa
        .iter()
        .find(|(n, _)| sb.iter().any(|(m, _)| m == n))
        .expect("a common step");
    let tb = sb.iter().find(|(m, _)| *m == n).map(|x| x.1).expect("step");
    let shift = ta - tb;
    let (merged, c) = compare::side_by_side(&a, &b, ("a", "b"), None, &opts);
    assert_eq!(c.ranks.len(), 2);
    assert_eq!(merged.processes().len(), 4);
    assert_eq!(merged.slices().len(), a.slices().len() + b.slices().len());
    // B's slices, in order, moved by exactly the shift.
    let b_min = b.slices().start_ns().iter().min().copied().expect("slices");
    let tracks_b: Vec<bool> = merged
        .tracks()
        .iter()
        .map(|t| t.process >= ProcessId::from_index(2))
        .collect();
    let merged_b_min = (0..merged.slices().len())
        .filter(|&i| tracks_b[merged.slices().track()[i].index()])
        .map(|i| merged.slices().start_ns()[i])
        .min()
        .expect("B slices");
    assert_eq!(merged_b_min, b_min + shift);
}

#[test]
fn side_by_side_aligns_the_step_asked_for() {
    let a = load_paths(&[bundled("traces/fsdp-ref-serial-h200x2")]).expect("serial");
    let b = load_paths(&[bundled("traces/fsdp-ref-overlap-h200x2")]).expect("overlap");
    let opts = AnalysisOptions::default();
    let (merged, c) = compare::side_by_side(&a, &b, ("a", "b"), Some(6), &opts);
    assert_eq!(c.aligned_step, Some(6));
    // Step 6 of rank 0 starts together: the two processes of rank 0 (A's
    // is process 0, B's process 2) have their "step 6" range at one time.
    let step6 = |process: u32| {
        (0..merged.slices().len())
            .find(|&i| {
                merged.tracks()[merged.slices().track()[i].index()].process
                    == ProcessId::from_index(process as usize)
                    && merged.str(merged.slices().name()[i]) == "step 6"
            })
            .map(|i| merged.slices().start_ns()[i])
            .expect("a step 6 range")
    };
    let d = (step6(0) - step6(2)).abs();
    assert!(d < 1_000_000, "step 6 starts {d} ns apart");
}
