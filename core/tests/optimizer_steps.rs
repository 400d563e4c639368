//! Steps from the collector's optimizer-step ranges when a loop steps more
//! than one optimizer an iteration (a GAN's discriminator and generator,
//! dense and sparse parameters), or when a wrapper's `step()` calls its
//! inner optimizer's: one step per iteration, not one per `step()` call.

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::protocol::{OPTIMIZER_KEY_ARG, OPTIMIZER_STEP_RANGE};
use streamscope_core::*;

const US: i64 = 1000;
/// One iteration, µs.
const PERIOD: i64 = 3000;

/// `iters` iterations of one thread on one GPU: a 1000 µs kernel, then
/// optimizer `a`'s step, a 1500 µs kernel, then optimizer `b`'s step (each
/// `step()` waits for its kernel, as a loss read before it would). With
/// `nested`, `a` is absent and `b`'s step is a wrapper around an inner
/// optimizer's (key 7). `keys`: whether the ranges say which optimizer.
fn loop_of(iters: usize, nested: bool, keys: bool) -> Trace {
    let (mut t, host, lanes) = streamscope_core::synth::one_gpu(40, Vec::new(), &[7]);
    let s7 = lanes[0];
    let launch = t.intern("cudaLaunchKernel");
    let marker = t.intern(OPTIMIZER_STEP_RANGE);
    let key_arg = t.intern(OPTIMIZER_KEY_ARG);
    let mut corr = 1u32;
    let range = |t: &mut TraceBuilder, start: i64, end: i64, key: u64| {
        let mut r = NewSlice::new(host, SliceKind::Range, marker, start, end - start);
        if keys {
            r.args = vec![(key_arg, ArgValue::UInt(key))];
        }
        t.push_slice(r);
    };
    for i in 0..iters as i64 {
        let t0 = 100 * US + i * PERIOD * US;
        let mut at = t0;
        for (name, dur, key) in [("disc", 1000, 1u64), ("gen", 1500, 2u64)] {
            let mut a = NewSlice::new(host, SliceKind::Runtime, launch, at, 5 * US);
            a.correlation = corr;
            t.push_slice(a);
            let n = t.intern(name);
            let mut k = NewSlice::new(s7, SliceKind::Kernel, n, at + 10 * US, dur * US);
            k.class = SliceClass::Compute;
            k.correlation = corr;
            t.push_slice(k);
            corr += 1;
            let done = at + (10 + dur) * US;
            if nested {
                if key == 2 {
                    range(&mut t, done, done + 100 * US, 3);
                    range(&mut t, done + 20 * US, done + 80 * US, 7);
                }
            } else {
                range(&mut t, done, done + 100 * US, key);
            }
            at = done + 200 * US;
        }
    }
    t.finish()
}

fn steps_of(t: &Trace) -> (usize, f64, String) {
    let r = analyze(t, &AnalysisOptions::default());
    let k = &r.ranks[0];
    (
        r.steps.len(),
        r.median_step_us(k.rank).unwrap_or(0.0),
        k.step_source.clone(),
    )
}

#[test]
fn two_optimizers_an_iteration_make_one_step() {
    let (n, median_us, source) = steps_of(&loop_of(20, false, true));
    assert_eq!(source, "optimizer-step");
    assert_eq!(n, 20, "steps");
    assert!(
        (median_us - PERIOD as f64).abs() < 1.0,
        "median step {median_us} µs, the iteration is {PERIOD}"
    );
}

#[test]
fn a_wrapped_optimizer_step_is_one_step() {
    let (n, median_us, _) = steps_of(&loop_of(20, true, true));
    assert_eq!(n, 20, "steps");
    assert!((median_us - PERIOD as f64).abs() < 1.0, "{median_us} µs");
    // Recordings that do not say which optimizer: nesting still holds.
    let (n, median_us, _) = steps_of(&loop_of(20, true, false));
    assert_eq!(n, 20, "steps");
    assert!((median_us - PERIOD as f64).abs() < 1.0, "{median_us} µs");
}
