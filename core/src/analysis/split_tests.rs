//! Each rank's analysis in two halves on two threads must give the report
//! of the one-thread path, byte for byte, whatever the trace and options.

use super::*;
use crate::model::SliceKind;
use crate::synth::{self, SynthOptions, XorShift};

/// The JSON report of `t`, each rank's work split over two threads or not.
fn both(t: &Trace, opts: &AnalysisOptions) -> (String, String) {
    (
        render::json(&analyze_split(t, opts, Some(false))),
        render::json(&analyze_split(t, opts, Some(true))),
    )
}

fn assert_same(what: &str, t: &Trace, opts: &AnalysisOptions) {
    let (one, two) = both(t, opts);
    assert!(one == two, "{what}: split report differs ({opts:?})");
}

/// Options drawn at random: a rank, a steps window (sometimes empty or
/// beyond the steps), tolerances.
fn random_opts(rng: &mut XorShift, ranks: u32) -> AnalysisOptions {
    let a = rng.below(5) as i64;
    AnalysisOptions {
        rank: (rng.below(3) == 0).then(|| rng.below(ranks as usize + 1) as u32),
        steps: match rng.below(4) {
            0 => Some((a, a + rng.below(3) as i64)),
            1 => Some((a + 2, a)),
            _ => None,
        },
        hta_rounding: [None, Some(true), Some(false)][rng.below(3)],
        consecutive_kernel_delay_ns: [30_000, 0, 1_000][rng.below(3)],
        sync_gpu_idle_threshold_us: [50.0, 0.0][rng.below(2)],
        stall_tolerance_ns: [25_000, 0][rng.below(2)],
        sm_series_max_points: [100_000, 7][rng.below(2)],
    }
}

#[test]
fn split_ranks_report_what_one_thread_reports() {
    let mut rng = XorShift(0x5717_7E57_0000_0001);
    for seed in 1..=6u64 {
        let ranks = 1 + (seed % 3) as u32;
        let mut t = synth::fsdp_like(&SynthOptions {
            ranks,
            target_slices: 1_500,
            layers: 3,
            item_sync: seed % 2 == 0,
            seed,
        });
        if seed % 3 == 0 {
            synth::add_gpu_metrics(&mut t, 20_000);
        }
        for _ in 0..3 {
            let opts = random_opts(&mut rng, ranks);
            assert_same(&format!("seed {seed}"), &t, &opts);
        }
        if seed % 2 == 0 {
            // The syncs, filled into the step rows after both halves: on
            // the steps that hold them.
            let r = analyze_split(&t, &AnalysisOptions::default(), Some(true));
            assert!(r.steps.iter().any(|s| s.syncs > 0), "seed {seed}: syncs");
        }
        // No steps: the ProfilerStep ranges gone.
        let mut no_steps = t.clone();
        let names = no_steps.slices().name().to_vec();
        let step_names: Vec<bool> = (names.iter())
            .map(|&n| is_step_name(no_steps.str(n)))
            .collect();
        no_steps.retain_slices(|id| !step_names[id.index()]);
        assert_same(
            &format!("seed {seed}, no steps"),
            &no_steps,
            &random_opts(&mut rng, ranks),
        );
        // One rank without GPU work, another without host work.
        let mut lopsided = t.clone();
        let sl = lopsided.slices();
        let procs: Vec<u32> = (0..sl.len())
            .map(|i| lopsided.track(sl.track()[i]).process.get())
            .collect();
        let gpu: Vec<bool> = sl.kind().iter().map(|k| k.is_gpu_activity()).collect();
        lopsided.retain_slices(|id| {
            let i = id.index();
            !(procs[i] == 0 && gpu[i] || procs[i] == 1 && !gpu[i])
        });
        assert_same(
            &format!("seed {seed}, lopsided"),
            &lopsided,
            &AnalysisOptions::default(),
        );
        // Only host work, or nothing at all.
        let mut host_only = t.clone();
        host_only.retain_slices(|id| !gpu[id.index()]);
        assert_same("host only", &host_only, &AnalysisOptions::default());
        let mut empty = t.clone();
        empty.retain_slices(|_| false);
        assert_same("no slices", &empty, &AnalysisOptions::default());
    }
}

#[test]
fn split_reports_the_same_on_a_kineto_trace_with_steps_windows() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/trace_filter/sampled_rank-0.json.gz");
    let t = crate::load::load_file(&path).expect("HTA trace");
    assert!(t.slices().kind().contains(&SliceKind::Kernel));
    for steps in [None, Some((0, 100)), Some((1, 1)), Some((100, 200))] {
        let opts = AnalysisOptions {
            steps,
            ..Default::default()
        };
        assert_same("sampled_rank-0", &t, &opts);
    }
}
