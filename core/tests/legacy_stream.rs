//! Work on the legacy default stream beside blocking streams (issue 35, the
//! seed's footgun): the finding, and the what-if that drops the legacy
//! stream's implicit synchronization, on a generated native loop that
//! follows CUDA's rules for it.

use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions};
use streamscope_core::analysis::{analyze, findings, AnalysisOptions};
use streamscope_core::protocol::streams;
use streamscope_core::*;

const US: i64 = 1000;

/// Process `pid` with one GPU, whose metadata says the stream creations
/// `meta` (if any): the builder, its thread "main", and one track per
/// stream id of `ids`.
fn rig(pid: u32, meta: Option<&str>, ids: &[u32]) -> (TraceBuilder, TrackId, Vec<TrackId>) {
    let meta = meta
        .map(|m| vec![(streams::key(0), m.to_string())])
        .unwrap_or_default();
    streamscope_core::synth::one_gpu(pid, meta, ids)
}

/// `steps` steps of one thread on one GPU. Each step launches (5 µs each)
/// A1 (1000 µs) on stream 13, B1 (500 µs) on 14, a 20 µs kernel on the
/// legacy default stream 7, then A2 (500 µs) on 13 and B2 (1000 µs) on 14,
/// and ends with a `cudaDeviceSynchronize`. GPU work starts 5 µs after
/// what it waits for: its launch, its stream, and, under CUDA's legacy
/// rules when `blocking`, the legacy kernel waits for all earlier work on
/// 13 and 14 and their later work waits for it. `meta`: the stream
/// creations the trace says, if any. Returns the trace and the GPU period
/// of a step.
fn native_loop(steps: usize, blocking: bool, meta: Option<&str>) -> (Trace, i64) {
    let (mut t, host, lanes) = rig(20, meta, &[7, 13, 14]);
    let (s7, s13, s14) = (lanes[0], lanes[1], lanes[2]);
    let launch = t.intern("cudaLaunchKernel");
    let sync = t.intern("cudaDeviceSynchronize");
    let mut corr = 1u32;
    let mut now = 100 * US;
    // End of the last work per stream (7, 13, 14).
    let mut free = [0i64; 3];
    let mut period = 0;
    let mut prev_end = None;
    for step in 0..steps {
        let start = now;
        let mut step_end = 0i64;
        for (name, lane, dur) in [
            ("gemm_a1", 1usize, 1000),
            ("gemm_b1", 2, 500),
            ("tiny", 0, 20),
            ("gemm_a2", 1, 500),
            ("gemm_b2", 2, 1000),
        ] {
            let mut a = NewSlice::new(host, SliceKind::Runtime, launch, now, 5 * US);
            a.correlation = corr;
            t.push_slice(a);
            let mut ready = (now + 5 * US).max(free[lane] + 5 * US);
            if blocking {
                // The legacy stream waits for the blocking streams, and
                // they for it.
                let others = if lane == 0 {
                    free[1].max(free[2])
                } else {
                    free[0]
                };
                ready = ready.max(others + 5 * US);
            }
            let track = [s7, s13, s14][lane];
            let n = t.intern(name);
            let mut k = NewSlice::new(track, SliceKind::Kernel, n, ready, dur * US);
            k.class = SliceClass::of_gpu_name(SliceKind::Kernel, name);
            k.correlation = corr;
            t.push_slice(k);
            free[lane] = ready + dur * US;
            step_end = step_end.max(free[lane]);
            corr += 1;
            now += 5 * US;
        }
        let end = step_end + 5 * US;
        let mut s = NewSlice::new(host, SliceKind::Runtime, sync, now, end - now);
        s.correlation = corr;
        corr += 1;
        t.push_slice(s);
        now = end + 2 * US;
        let n = t.intern(&format!("step {step}"));
        t.push_slice(NewSlice::new(host, SliceKind::Range, n, start, now - start));
        if let Some(e) = prev_end {
            period = step_end - e;
        }
        prev_end = Some(step_end);
    }
    (t.finish(), period)
}

const BLOCKING: &str = "7:legacy 13:blocking 14:blocking";

fn unblocked() -> WhatIfOptions {
    WhatIfOptions {
        changes: Changes {
            unblock_legacy: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn legacy_stream_between_blocking_streams_is_a_finding_with_the_replays_gain() {
    let (t, period) = native_loop(12, true, Some(BLOCKING));
    // Under the legacy rules: the sync's return and the next launch, then
    // A1, tiny and B2 one after the other.
    assert_eq!(period, (5 + 2 + 5 + 1000 + 5 + 20 + 5 + 1000) * US);
    let mut r = analyze(&t, &AnalysisOptions::default());
    findings::attach(&mut r, Some(&t));
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == "legacy_stream")
        .expect("a legacy_stream finding");
    assert_eq!(f.where_.kernel, "tiny");
    assert!(
        f.evidence.contains("legacy default stream 7"),
        "{}",
        f.evidence
    );
    assert!(
        f.evidence.contains("blocking stream(s) 13, 14"),
        "{}",
        f.evidence
    );
    // Without the implicit waits both streams run 1500 µs of work side by
    // side: the step is about 1500 µs of the 2047 µs measured.
    let w = whatif(&t, &unblocked()).expect("replay");
    let k = &w.ranks[0];
    let (m, p) = (
        k.measured_median_step_us.expect("steps"),
        k.predicted_median_step_us.expect("steps"),
    );
    assert!((m - period as f64 / 1000.0).abs() < 15.0, "measured {m}");
    assert!(p > 1500.0 && p < 1500.0 * 1.03, "predicted {p}");
    let pct = f.predicted_gain_pct.expect("predicted");
    assert!(pct > 20.0 && pct < 30.0, "gain {pct} %");
    assert!(f.beyond_noise);
    assert!(f.cost_per_step_us >= f.predicted_gain_us.expect("predicted"));
    assert_eq!(f.prediction, "whatif --legacy-stream-nonblocking");
}

#[test]
fn no_finding_where_nothing_synchronizes_with_the_legacy_stream() {
    // The same program with non-blocking streams: the legacy kernel
    // orders nothing, and the trace says so.
    let (t, _) = native_loop(12, false, Some("7:legacy 13:non-blocking 14:non-blocking"));
    let mut r = analyze(&t, &AnalysisOptions::default());
    findings::attach(&mut r, Some(&t));
    assert!(r.findings.iter().all(|f| f.kind != "legacy_stream"));
    let e = whatif(&t, &unblocked()).expect_err("nothing to unblock");
    assert!(e.contains("--legacy-stream-nonblocking"), "{e}");
    // A trace that does not say how its streams were created (Kineto, an
    // older recording): no finding, however the work ran.
    let (t, _) = native_loop(12, true, None);
    let mut r = analyze(&t, &AnalysisOptions::default());
    findings::attach(&mut r, Some(&t));
    assert!(r.findings.iter().all(|f| f.kind != "legacy_stream"));
}

/// `steps` steps: A (1000 µs) on blocking stream 13, then L (300 µs) on the
/// legacy default stream 7, then a `cudaDeviceSynchronize` at `loop.cu:9`.
/// L waits for A (the legacy rules, as the timing shows); the next step's A
/// starts after its own launch, so the recording shows no wait of A on L.
fn synced_loop(steps: usize) -> Trace {
    let (mut t, host, lanes) = rig(21, Some("7:legacy 13:blocking"), &[13, 7]);
    let (s13, s7) = (lanes[0], lanes[1]);
    let launch = t.intern("cudaLaunchKernel");
    let sync = t.intern("cudaDeviceSynchronize");
    let python = t.intern("python");
    let site = t.intern("loop.cu:9 (main)");
    let mut corr = 1u32;
    let mut now = 100 * US;
    for step in 0..steps {
        let start = now;
        let mut ready = now + 5 * US;
        for (track, name, dur) in [(s13, "gemm_a", 1000), (s7, "tiny_l", 300)] {
            let mut a = NewSlice::new(host, SliceKind::Runtime, launch, now, 5 * US);
            a.correlation = corr;
            t.push_slice(a);
            ready = ready.max(now + 5 * US);
            let n = t.intern(name);
            let mut k = NewSlice::new(track, SliceKind::Kernel, n, ready, dur * US);
            k.class = SliceClass::of_gpu_name(SliceKind::Kernel, name);
            k.correlation = corr;
            t.push_slice(k);
            ready += (dur + 5) * US;
            corr += 1;
            now += 5 * US;
        }
        let end = ready;
        let mut s = NewSlice::new(host, SliceKind::Runtime, sync, now, end - now);
        s.correlation = corr;
        s.args = vec![(python, ArgValue::Str(site))];
        corr += 1;
        t.push_slice(s);
        now = end + 2 * US;
        let n = t.intern(&format!("step {step}"));
        t.push_slice(NewSlice::new(host, SliceKind::Range, n, start, now - start));
    }
    t.finish()
}

/// Dropping the per-step device sync frees the host, not the GPU: the next
/// step's work on the blocking stream still waits for the legacy-stream
/// kernel launched before it, though the recording never showed that wait
/// (the launch order gives it; `whatif::graph::legacy`).
#[test]
fn a_dropped_sync_keeps_the_legacy_streams_implicit_synchronization() {
    let t = synced_loop(12);
    let drop = WhatIfOptions {
        drop_syncs: vec!["loop.cu:9".into()],
        ..Default::default()
    };
    let r = whatif(&t, &drop).expect("replay");
    let k = &r.ranks[0];
    let measured = k.measured_median_step_us.expect("steps");
    let predicted = k.predicted_mean_step_us.expect("mean");
    // A, then L, back to back: 1000 + 5 + 300 + 5 µs a step (the host's
    // sync return and launches no longer in the way).
    assert!(
        (predicted - 1310.0).abs() < 15.0,
        "predicted {predicted} µs (measured {measured})"
    );
    // With L on a non-blocking stream as well, A runs back to back.
    let both = WhatIfOptions {
        changes: Changes {
            unblock_legacy: true,
            ..Default::default()
        },
        ..drop
    };
    let free = whatif(&t, &both).expect("replay").ranks[0]
        .predicted_mean_step_us
        .expect("mean");
    assert!(free < 1030.0, "{free} µs");
}
