//! A native program's syncs named by their C/C++ caller (issue 35 item 5):
//! the collector writes `protocol::CALLER_ARG` on a sync with no Python
//! line; the report's sync rows, its findings and `whatif --drop-syncs
//! FILE:LINE` use it as they use a Python line.

use streamscope_core::analysis::whatif::{whatif, WhatIfOptions};
use streamscope_core::analysis::{analyze, findings, AnalysisOptions};
use streamscope_core::*;

const US: i64 = 1000;
const CALLER: &str = "/src/app/train.cu:57 (step(float*, int))";

/// 12 steps: 20 launches of 20 µs, kernels of 200 µs on one stream, then a
/// `cudaStreamSynchronize` whose caller is [`CALLER`], then 3 ms of host work.
fn native_loop() -> Trace {
    let (mut t, host, lanes) = streamscope_core::synth::one_gpu(30, Vec::new(), &[13]);
    let s = lanes[0];
    let launch = t.intern("cudaLaunchKernel");
    let sync = t.intern("cudaStreamSynchronize");
    let caller_key = t.intern(protocol::CALLER_ARG);
    let caller = t.intern(CALLER);
    let (mut corr, mut now, mut free) = (1u32, 100 * US, 0i64);
    for step in 0..12 {
        let start = now;
        for _ in 0..20 {
            let mut a = NewSlice::new(host, SliceKind::Runtime, launch, now, 20 * US);
            a.correlation = corr;
            t.push_slice(a);
            let ks = (now + 5 * US).max(free);
            let n = t.intern("gemm");
            let mut k = NewSlice::new(s, SliceKind::Kernel, n, ks, 200 * US);
            k.class = SliceClass::of_gpu_name(SliceKind::Kernel, "gemm");
            k.correlation = corr;
            t.push_slice(k);
            free = ks + 200 * US;
            corr += 1;
            now += 20 * US;
        }
        let end = free + 5 * US;
        let mut c = NewSlice::new(host, SliceKind::Runtime, sync, now, end - now);
        c.correlation = corr;
        c.args = vec![(caller_key, ArgValue::Str(caller))];
        corr += 1;
        t.push_slice(c);
        now = end + 3000 * US;
        let n = t.intern(&format!("step {step}"));
        t.push_slice(NewSlice::new(host, SliceKind::Range, n, start, now - start));
    }
    t.finish()
}

#[test]
fn a_native_syncs_caller_is_its_where_and_its_drop_syncs_line() {
    let t = native_loop();
    let mut r = analyze(&t, &AnalysisOptions::default());
    findings::attach(&mut r, Some(&t));
    let k = &r.ranks[0];
    let g = k
        .syncs
        .iter()
        .find(|g| g.api == "cudaStreamSynchronize")
        .expect("the sync");
    assert_eq!(g.python, CALLER);
    assert_eq!(g.where_, CALLER);
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == "sync")
        .expect("a sync finding");
    assert_eq!(f.where_.line, CALLER);
    assert_eq!(f.prediction, "whatif --drop-syncs /src/app/train.cu:57");
    // The caller's FILE:LINE selects it for the replay, as a Python line would.
    let w = whatif(
        &t,
        &WhatIfOptions {
            drop_syncs: vec!["train.cu:57".into()],
            ..Default::default()
        },
    )
    .expect("replay");
    let k = &w.ranks[0];
    let (m, p) = (
        k.measured_median_step_us.expect("steps"),
        k.predicted_median_step_us.expect("steps"),
    );
    // 4 ms of GPU work hides the 3.4 ms of host work once the host no
    // longer waits: about 4.0 ms against 7.4 ms.
    assert!(m > 7000.0, "measured {m}");
    assert!(p < 4200.0, "predicted {p}");
}
