//! A native CUDA program recorded on one H200 (examples/legacy_stream.cu,
//! traces/legacy-stream-h200): two blocking streams that overlap, a tiny
//! kernel on the legacy default stream between them, one
//! `cudaDeviceSynchronize` per iteration, every kernel named `spin`. No
//! marker and no repeating name: the steps come from the sync
//! (`analysis::sync_steps`), and the legacy-stream finding's predicted gain
//! is checked against the same program run with non-blocking streams
//! (job-timing.txt, from scripts/gpu/whatif-validate.sh).

use std::path::Path;

use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions};
use streamscope_core::analysis::{analyze, findings, AnalysisOptions};

const FOLDER: &str = "legacy-stream-h200";

fn load() -> streamscope_core::Trace {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(FOLDER);
    streamscope_core::load::load_paths(&[dir]).expect("load")
}

/// The median step (ms) of the JSON line whose mode is `mode`.
fn job_ms(mode: &str) -> f64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(FOLDER)
        .join("job-timing.txt");
    let text = std::fs::read_to_string(path).expect("job-timing.txt");
    text.lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|j| j["mode"] == mode)
        .and_then(|j| j["median_step_ms"].as_f64())
        .expect("a JSON line of that mode")
}

#[test]
fn a_native_loop_gets_steps_from_its_sync_and_the_legacy_finding_its_gain() {
    let t = load();
    let mut r = analyze(&t, &AnalysisOptions::default());
    findings::attach(&mut r, Some(&t));
    let rank = &r.ranks[0];
    assert_eq!(rank.step_source, "sync");
    let blocking = job_ms("blocking");
    let nonblocking = job_ms("nonblocking");
    let measured = r.median_step_us(0).expect("steps") / 1000.0;
    // 2.06 ms recorded, 2.05 ms unrecorded.
    assert!(
        (measured - blocking).abs() / blocking < 0.03,
        "{measured} vs {blocking}"
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.kind == "legacy_stream")
        .expect("a legacy_stream finding");
    assert_eq!(r.findings[0].kind, "legacy_stream", "ranked first");
    let gain = f.predicted_gain_us.expect("predicted") / 1000.0;
    // Predicted 0.51 ms/step; measured 2.05 -> 1.53 ms (0.51-0.53).
    let truth = blocking - nonblocking;
    let err_pct_of_step = 100.0 * (gain - truth) / blocking;
    assert!(
        err_pct_of_step.abs() < 5.0,
        "gain {gain} vs {truth} ({err_pct_of_step:.1} % of step)"
    );

    let w = whatif(
        &t,
        &WhatIfOptions {
            changes: Changes {
                unblock_legacy: true,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .expect("replay");
    let p = w.ranks[0].predicted_median_step_us.expect("steps") / 1000.0;
    let err = 100.0 * (p - nonblocking) / nonblocking;
    assert!(
        err.abs() < 5.0,
        "predicted {p} vs {nonblocking} ({err:.1} %)"
    );
}
