//! The what-if replay at the ends of its factors (issue 32, D4): factors
//! whose predicted times leave the range of i64 nanoseconds are refused,
//! and within it predictions grow with each factor (a property test).

use std::path::Path;

use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions, WhatIfReport};
use streamscope_core::load::load_paths;
use streamscope_core::synth::XorShift;
use streamscope_core::Trace;

fn load(name: &str) -> Trace {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name);
    load_paths(&[dir]).expect("load")
}

fn changes(comm: Option<f64>, bw: Option<f64>, compute: Option<f64>) -> WhatIfOptions {
    WhatIfOptions {
        changes: Changes {
            comm_scale: comm,
            link_bw_gbps: bw,
            compute_scale: compute,
            drop_syncs: false,
            unblock_legacy: false,
            prefetch_deeper: None,
        },
        drop_syncs: Vec::new(),
        launch_queue: None,
    }
}

/// Per rank, the predicted median step and the sum of all predicted steps (µs).
fn predicted(r: &WhatIfReport) -> Vec<(f64, f64)> {
    r.ranks
        .iter()
        .map(|k| {
            (
                k.predicted_median_step_us.expect("steps"),
                k.steps.iter().map(|s| s.predicted_step_us).sum(),
            )
        })
        .collect()
}

#[test]
fn factors_past_the_range_are_refused_never_answered() {
    let t = load("fsdp-ref-nccl-h200x2");
    for (o, what) in [
        (
            changes(Some(1e12), None, None),
            "NCCL transfers ×1000000000000",
        ),
        (changes(None, Some(1e-9), None), "GB/s"),
        (changes(None, None, Some(1e308)), "compute kernels ×"),
        (changes(Some(1e300), None, Some(1e300)), "NCCL transfers"),
    ] {
        let e = whatif(&t, &o).expect_err("out of range");
        assert!(e.contains("leave the range") && e.contains(what), "{e}");
    }
    // An empty --drop-syncs pattern would match every sync.
    for empty in ["", "  "] {
        let mut o = changes(None, None, None);
        o.drop_syncs = vec![empty.to_string()];
        let e = whatif(&t, &o).expect_err("empty pattern");
        assert!(e.contains("empty pattern"), "{e}");
    }
    // Large but representable factors still answer, slower than measured.
    let r = whatif(&t, &changes(Some(1e3), None, None)).expect("in range");
    for k in &r.ranks {
        let (m, p) = (
            k.measured_median_step_us.expect("steps"),
            k.predicted_median_step_us.expect("steps"),
        );
        assert!(p > 10.0 * m, "{m} -> {p}");
    }
}

#[test]
fn predictions_grow_with_each_factor() {
    let t = load("fsdp-ref-nccl-h200x2");
    let mut rng = XorShift(0x3232_0000_0000_0001);
    // Factors from 1e-6 to 1e6, log-uniform, sorted; bandwidths likewise
    // (a lower bandwidth is a larger factor).
    let mut xs: Vec<f64> = (0..10)
        .map(|_| 10f64.powf(rng.below(12_001) as f64 / 1000.0 - 6.0))
        .collect();
    xs.extend([1.0, 1e-6, 1e6]);
    xs.sort_by(f64::total_cmp);
    let axes: [(&str, &dyn Fn(f64) -> WhatIfOptions); 3] = [
        ("--comm-scale", &|x| changes(Some(x), None, None)),
        ("--compute-scale", &|x| changes(None, None, Some(x))),
        ("--link-bw (1/x)", &|x| changes(None, Some(100.0 / x), None)),
    ];
    for (axis, make) in axes {
        let mut prev: Option<(f64, Vec<(f64, f64)>)> = None;
        for &x in &xs {
            let r = whatif(&t, &make(x)).unwrap_or_else(|e| panic!("{axis} {x}: {e}"));
            let p = predicted(&r);
            if let Some((px, pp)) = &prev {
                for (rank, (a, b)) in pp.iter().zip(&p).enumerate() {
                    // 1 ns of rounding per step at most.
                    assert!(
                        b.0 >= a.0 - 0.01 && b.1 >= a.1 - 0.1,
                        "{axis}: rank {rank}: {px} -> {a:?}, {x} -> {b:?}"
                    );
                }
            }
            prev = Some((x, p));
        }
    }
}
