//! The what-if replay's host model (docs/METRICS.md, "What-if"): a host
//! that no longer waits for the GPU launches ahead while the queued GPU
//! work runs, bounded by the launch queue; on generated single-GPU loops.

use streamscope_core::analysis::whatif::{whatif, WhatIfNote, WhatIfOptions, WhatIfReport};
use streamscope_core::*;

const US: i64 = 1000;

/// A loop of `steps` steps on one GPU, each an NVTX range "step N": `k`
/// launches of `launch_us` µs each, kernels of `kernel_us` µs queued on one
/// stream (each starts 5 µs after its launch or after the previous one), a
/// `cudaStreamSynchronize` at `train.py:42` that returns 5 µs after the last
/// kernel, then `host_us` of host work before the next step's launches.
pub fn host_loop(steps: usize, k: usize, launch_us: i64, kernel_us: i64, host_us: i64) -> Trace {
    host_loop_at(steps, k, launch_us, kernel_us, host_us, 0)
}

/// [`host_loop`] with each step range starting `shift_us` before the first launch
/// (the previous step's sync and host work in it, in part).
pub fn host_loop_at(
    steps: usize,
    k: usize,
    launch_us: i64,
    kernel_us: i64,
    host_us: i64,
    shift_us: i64,
) -> Trace {
    let (mut t, host, lanes) = streamscope_core::synth::one_gpu(10, Vec::new(), &[7]);
    let s7 = lanes[0];
    let launch = t.intern("cudaLaunchKernel");
    let sync = t.intern("cudaStreamSynchronize");
    let kname = t.intern("gemm");
    let python = t.intern("python");
    let mut corr = 1u32;
    let mut now = 100 * US;
    let mut gpu_free = 0i64;
    for step in 0..steps {
        let start = now;
        for _ in 0..k {
            let mut a = NewSlice::new(host, SliceKind::Runtime, launch, now, launch_us * US);
            a.correlation = corr;
            t.push_slice(a);
            let ks = (now + 5 * US).max(gpu_free);
            let mut kk = NewSlice::new(s7, SliceKind::Kernel, kname, ks, kernel_us * US);
            kk.class = SliceClass::of_gpu_name(SliceKind::Kernel, "gemm");
            kk.correlation = corr;
            t.push_slice(kk);
            gpu_free = ks + kernel_us * US;
            corr += 1;
            now += launch_us * US;
        }
        let end = (gpu_free + 5 * US).max(now + 2 * US);
        let mut s = NewSlice::new(host, SliceKind::Runtime, sync, now, end - now);
        s.correlation = corr;
        corr += 1;
        let loc = t.intern("/home/u/train.py:42 (main)");
        s.args = vec![(python, ArgValue::Str(loc))];
        t.push_slice(s);
        now = end + host_us * US;
        let n = t.intern(&format!("step {step}"));
        let a = (start - shift_us * US).max(0);
        t.push_slice(NewSlice::new(
            host,
            SliceKind::Range,
            n,
            a,
            now - shift_us * US - a,
        ));
    }
    t.finish()
}

fn drop_line(t: &Trace, spec: &str) -> WhatIfReport {
    whatif(
        t,
        &WhatIfOptions {
            drop_syncs: vec![spec.to_string()],
            ..Default::default()
        },
    )
    .expect("replay")
}

fn medians(r: &WhatIfReport) -> (f64, f64) {
    let k = &r.ranks[0];
    (
        k.measured_median_step_us.expect("steps"),
        k.predicted_median_step_us.expect("steps"),
    )
}

#[test]
fn gpu_bound_loop_without_its_sync_runs_at_the_gpus_pace() {
    // 50 kernels of 200 µs (10 ms of GPU work), 20 µs launches, 3 ms of host
    // work after the sync: measured ~13 ms; without the sync the host's
    // 4 ms per step hides under the GPU's 10 ms.
    let t = host_loop(12, 50, 20, 200, 3000);
    let r = drop_line(&t, "train.py:42");
    let (m, p) = medians(&r);
    assert!((m - 13_010.0).abs() < 50.0, "measured {m}");
    assert!((p - 10_000.0).abs() < 0.01 * 10_000.0, "predicted {p}");
}

#[test]
fn shifted_step_ranges_predict_the_same_pace() {
    for shift in [1000, 2000, 4000] {
        let t = host_loop_at(12, 50, 20, 200, 3000, shift);
        let r = drop_line(&t, "train.py:42");
        let (m, p) = medians(&r);
        eprintln!("shift {shift}: measured {m} predicted {p}");
        assert!(
            (p - 10_000.0).abs() < 0.02 * 10_000.0,
            "shift {shift}: predicted {p} (measured {m})"
        );
    }
    // Launch-bound: 50 launches of 200 µs hold kernels of 100 µs; the host
    // work after the sync then adds to the host's 10 ms per step.
    let t = host_loop(12, 50, 200, 100, 3000);
    let (m, p) = medians(&drop_line(&t, "train.py:42"));
    assert!((m - 13_002.0).abs() < 50.0, "measured {m}");
    assert!((p - 13_000.0).abs() < 0.01 * 13_000.0, "predicted {p}");
}

#[test]
fn host_bound_loop_keeps_the_hosts_pace() {
    // 10 ms of GPU work, 1 ms of launches and 12 ms of host work: without
    // the sync the step is the host's 13 ms, no less.
    let t = host_loop(12, 50, 20, 200, 12_000);
    let (m, p) = medians(&drop_line(&t, "train.py:42"));
    assert!((m - 22_010.0).abs() < 50.0, "measured {m}");
    assert!((p - 13_000.0).abs() < 0.01 * 13_000.0, "predicted {p}");
}

#[test]
fn a_full_launch_queue_holds_the_host_to_the_gpus_pace() {
    // Without the sync the host needs 4 ms a step, the GPU 10 ms: the host
    // gains 6 ms a step on the GPU. A queue of 1024 launches never fills in
    // 12 steps of 50 launches; one of 60 (12 ms of GPU work) fills in the
    // third step. From then on each step's launches wait for the GPU,
    // except the ~15 that follow the 3 ms of host work (the GPU took 15
    // kernels meanwhile): ~35 of 50 per step.
    let t = host_loop(12, 50, 20, 200, 3000);
    let deep = drop_line(&t, "train.py:42");
    assert_eq!(deep.launch_queue_depth, 1024);
    assert_eq!(deep.launch_queue_waits, 0);
    let shallow = whatif(
        &t,
        &WhatIfOptions {
            drop_syncs: vec!["train.py:42".into()],
            launch_queue: Some(60),
            ..Default::default()
        },
    )
    .expect("replay");
    assert!(
        (300..=400).contains(&shallow.launch_queue_waits),
        "{}",
        shallow.launch_queue_waits
    );
    assert!(shallow.notes.iter().any(|n| matches!(
        n,
        WhatIfNote::LaunchQueueFull { calls, .. } if *calls == shallow.launch_queue_waits
    )));
    // The steps are the GPU's 10 ms.
    let k = &shallow.ranks[0];
    for s in k.steps.iter().skip(3) {
        assert!(
            (s.predicted_step_us - 10_000.0).abs() < 0.01 * 10_000.0,
            "step {}: {}",
            s.step,
            s.predicted_step_us
        );
    }
    // The unchanged replay is the measured loop, queue or not.
    let r = whatif(
        &t,
        &WhatIfOptions {
            launch_queue: Some(60),
            ..Default::default()
        },
    )
    .expect("replay");
    assert_eq!(r.consistency_max_error_pct, 0.0);
    assert_eq!(r.launch_queue_waits, 0);
}

mod findings {
    //! `report`'s findings take their gains from these replays.
    use super::*;
    use streamscope_core::analysis::{analyze, render, AnalysisOptions};

    #[test]
    fn the_planted_sync_is_the_first_finding_with_the_replays_gain() {
        let t = host_loop(12, 50, 20, 200, 3000);
        let mut r = analyze(&t, &AnalysisOptions::default());
        assert!(r.findings.is_empty(), "analyze leaves findings to attach");
        streamscope_core::analysis::findings::attach(&mut r, Some(&t));
        let f = &r.findings[0];
        assert_eq!(f.kind, "sync");
        assert_eq!(f.where_.line, "/home/u/train.py:42 (main)");
        assert_eq!(f.prediction, "whatif --drop-syncs /home/u/train.py:42");
        let w = drop_line(&t, "/home/u/train.py:42");
        let k = &w.ranks[0];
        let gain = k.measured_mean_step_us.expect("mean") - k.predicted_mean_step_us.expect("mean");
        assert_eq!(f.predicted_gain_us, Some(gain));
        // 13.01 ms measured, 10 ms GPU-paced: ~3 ms, ~23 %.
        assert!((gain - 3010.0).abs() < 60.0, "{gain}");
        let pct = f.predicted_gain_pct.expect("pct");
        assert!((pct - 23.1).abs() < 0.5, "{pct}");
        assert!(f.beyond_noise && f.cost_per_step_us > 0.0);
        // Where the viewer jumps: the sync's first call.
        assert!(f.slice.is_some() && f.start_ns.is_some());
        // No communication in the loop: no communication finding.
        assert!(r
            .findings
            .iter()
            .all(|f| !f.kind.contains("collective") && f.kind != "late_prefetch"));
        // The first screen names it; JSON has the keys.
        let brief = render::text_brief(&r);
        let line = brief
            .lines()
            .find(|l| l.starts_with("fix first 1: host sync"))
            .unwrap_or_else(|| panic!("{brief}"));
        assert!(line.contains("train.py:42"), "{line}");
        let j: serde_json::Value = serde_json::from_str(&render::json(&r)).expect("json");
        let f0 = &j["findings"][0];
        for key in [
            "kind",
            "where",
            "predicted_gain_us",
            "predicted_gain_pct",
            "evidence",
        ] {
            assert!(!f0[key].is_null(), "{key}: {f0}");
        }
        assert_eq!(f0["where"]["rank"], 0);
    }

    #[test]
    fn a_sync_the_gpu_never_idles_for_is_no_finding() {
        // Launch-bound: the GPU is done before the host reaches the sync
        // (kernels of 10 µs behind launches of 200 µs), the sync returns at
        // once: no GPU idle behind it, no finding for it.
        let t = host_loop(12, 50, 200, 10, 3000);
        let mut r = analyze(&t, &AnalysisOptions::default());
        streamscope_core::analysis::findings::attach(&mut r, Some(&t));
        let idle: Vec<f64> = r.ranks[0].syncs.iter().map(|g| g.gpu_idle_us).collect();
        assert_eq!(idle, vec![0.0]);
        for k in &r.ranks {
            for g in k.syncs.iter().filter(|g| g.gpu_idle_us == 0.0) {
                assert!(
                    !r.findings
                        .iter()
                        .any(|f| f.kind == "sync" && f.where_.line == g.python),
                    "{g:?}"
                );
            }
        }
        for f in r.findings.iter().filter(|f| f.kind == "sync") {
            assert!(f.cost_per_step_us > 0.0, "{f:?}");
        }
    }
}
