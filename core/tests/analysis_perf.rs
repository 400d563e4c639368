//! Timing harness (prints, does not assert): `analyze` on a generated
//! FSDP-like trace of 10 million slices.
//! `cargo test --release -p streamscope-core --test analysis_perf -- --ignored --nocapture`

use std::time::Instant;

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::synth::{fsdp_like, SynthOptions};

#[test]
#[ignore = "timing harness: run in release with --ignored --nocapture"]
fn analyze_ten_million_slices() {
    let n: usize = std::env::var("STREAMSCOPE_PERF_SLICES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let t0 = Instant::now();
    let t = fsdp_like(&SynthOptions {
        ranks: 8,
        target_slices: n,
        layers: 32,
        item_sync: true,
        seed: 7,
    });
    let gen = t0.elapsed();
    let t1 = Instant::now();
    let r = analyze(&t, &AnalysisOptions::default());
    let took = t1.elapsed();
    println!(
        "generated {} slices in {:.2?}; analyze: {:.3} s ({} ranks, {} steps, {} sync warnings)",
        t.slices().len(),
        gen,
        took.as_secs_f64(),
        r.ranks.len(),
        r.steps.len(),
        r.sync_warnings.len()
    );
    assert_eq!(r.ranks.len(), 8);
}

#[test]
#[ignore = "timing harness: run in release with --ignored --nocapture"]
fn analyze_ten_million_slices_without_step_markers() {
    let n: usize = std::env::var("STREAMSCOPE_PERF_SLICES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let mut b = fsdp_like(&SynthOptions {
        ranks: 8,
        target_slices: n,
        layers: 32,
        item_sync: true,
        seed: 7,
    })
    .into_builder();
    // Hide the ProfilerStep ranges: steps must come from the kernel sequence's period.
    for id in b.slices().ids() {
        if b.slices().kind()[id.index()] == streamscope_core::SliceKind::Range {
            b.set_slice_kind(id, streamscope_core::SliceKind::Other);
        }
    }
    let t = b.finish();
    let t1 = Instant::now();
    let r = analyze(&t, &AnalysisOptions::default());
    println!(
        "no step markers, {} slices: analyze {:.3} s; step source {}, {} steps",
        t.slices().len(),
        t1.elapsed().as_secs_f64(),
        r.ranks[0].step_source,
        r.steps.len()
    );
    assert_eq!(r.ranks[0].step_source, "repetition");
}

#[test]
#[ignore = "timing harness: run in release with --ignored --nocapture"]
fn whatif_ten_million_slices() {
    use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions};
    let n: usize = std::env::var("STREAMSCOPE_PERF_SLICES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let t = fsdp_like(&SynthOptions {
        ranks: 8,
        target_slices: n,
        layers: 32,
        item_sync: true,
        seed: 7,
    });
    let opts = WhatIfOptions {
        changes: Changes {
            comm_scale: Some(2.0),
            ..Default::default()
        },
        drop_syncs: Vec::new(),
        launch_queue: None,
    };
    let t1 = Instant::now();
    let r = whatif(&t, &opts).expect("replay");
    println!(
        "{} slices: whatif --comm-scale 2 {:.3} s ({} graph nodes, {} edges, {} ranks, consistency {:.3} %)",
        t.slices().len(),
        t1.elapsed().as_secs_f64(),
        r.graph_nodes,
        r.graph_edges,
        r.ranks.len(),
        r.consistency_max_error_pct
    );
    assert_eq!(r.ranks.len(), 8);
    assert!(r.consistency_max_error_pct <= 2.0);
}

/// The findings' replays on top of `analyze` (what `report` adds on one
/// file): each finding kind's what-if, `late_prefetch`'s deeper-prefetch
/// replay (two passes) among them.
#[test]
#[ignore = "timing harness: run in release with --ignored --nocapture"]
fn findings_ten_million_slices() {
    let n: usize = std::env::var("STREAMSCOPE_PERF_SLICES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let t = fsdp_like(&SynthOptions {
        ranks: 8,
        target_slices: n,
        layers: 32,
        item_sync: true,
        seed: 7,
    });
    let mut r = analyze(&t, &AnalysisOptions::default());
    let t0 = Instant::now();
    streamscope_core::analysis::findings::attach(&mut r, Some(&t));
    let took = t0.elapsed();
    let kinds: Vec<String> = r
        .findings
        .iter()
        .map(|f| format!("{} ({})", f.kind, f.prediction))
        .collect();
    println!(
        "{} slices: findings {:.3} s: {}",
        t.slices().len(),
        took.as_secs_f64(),
        kinds.join("; ")
    );
    assert!(!r.findings.is_empty());
}
