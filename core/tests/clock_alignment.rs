//! Ranks on two hosts: one rank of a real 2-rank recording moved to a
//! simulated second host (its clock shifted by a known offset and drifting
//! at a known rate, its host renamed) must give the clock map back and the
//! same cross-rank figures as the recording on its one host
//! (docs/METRICS.md, "Clocks").

use std::path::Path;

use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::load::load_paths;
use streamscope_core::*;

fn bundled(name: &str) -> Trace {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name);
    load_paths(&[p]).expect("load the bundled trace")
}

/// Process `p` moved to host `host`, its clock reading
/// t + offset + drift · (t − at) at true time t.
fn on_other_host(t: &Trace, p: u32, host: &str, offset_ns: i64, drift: f64, at: i64) -> Trace {
    let clock = |x: i64| x + offset_ns + ((x - at) as f64 * drift).round() as i64;
    let mut b = t.clone().into_builder();
    for id in b.slices().ids() {
        if b.slice_process(id) == ProcessId::from_index(p as usize) {
            let i = id.index();
            let (s, d) = (b.slices().start_ns()[i], b.slices().dur_ns()[i]);
            b.set_slice_start(id, clock(s));
            b.set_slice_dur(id, clock(s + d) - clock(s));
        }
    }
    b.processes_mut()[p as usize].hostname = host.into();
    b.finish()
}

/// Every cross-rank figure of a report, named.
fn figures(r: &Report) -> Vec<(String, f64)> {
    let mut v = Vec::new();
    let x = &r.cross_rank;
    for w in &x.waits {
        let n = format!("rank {} waits for rank {}", w.waiting_rank, w.for_rank);
        v.push((format!("{n}: count"), w.count as f64));
        v.push((format!("{n}: us"), w.wait_us));
    }
    for k in &x.kinds {
        let n = &k.collective;
        v.push((format!("{n} skew median"), k.skew_median_us.unwrap_or(-1.0)));
        v.push((format!("{n} skew p95"), k.skew_p95_us.unwrap_or(-1.0)));
        v.push((format!("{n} skew max"), k.skew_max_us.unwrap_or(-1.0)));
        v.push((format!("{n} wait"), k.wait_us));
        v.push((format!("{n} transfer"), k.transfer_us));
        v.push((format!("{n} bus bw"), k.bus_bw_gbps.unwrap_or(-1.0)));
        for (rank, c) in &k.last_rank {
            v.push((format!("{n} rank {rank} last"), *c as f64));
        }
    }
    for k in &r.ranks {
        let n = format!("rank {}", k.rank);
        v.push((
            format!("{n} exposed wait"),
            k.exposed_wait_us.unwrap_or(-1.0),
        ));
        v.push((
            format!("{n} exposed transfer"),
            k.exposed_transfer_us.unwrap_or(-1.0),
        ));
    }
    for s in &r.steps {
        let n = format!("rank {} step {}", s.rank, s.step);
        v.push((
            format!("{n} straggler"),
            s.straggler_rank.map_or(-1.0, f64::from),
        ));
        v.push((
            format!("{n} straggler wait"),
            s.straggler_wait_us.unwrap_or(-1.0),
        ));
        v.push((format!("{n} comm wait"), s.comm_wait_us.unwrap_or(-1.0)));
    }
    v
}

/// Relative difference, |b − a| / |a|.
fn rel(a: f64, b: f64) -> f64 {
    (b - a).abs() / a.abs().max(1e-9)
}

/// How close one recording's report on two hosts must come to its
/// one-host report.
struct Bounds {
    /// Offset error at the middle of the matched collectives, ns.
    offset_ns: f64,
    /// Drift error, µs/s.
    drift_us_per_s: f64,
    /// Relative error of the waits, skews, transfers and exposed splits
    /// over the whole window (`strict`: those named there within 2 %).
    whole: f64,
    /// Figures held to 2 % even where `whole` is looser.
    strict: &'static [&'static str],
    /// Arrival-order counts may change by this many (near-ties).
    ties: f64,
    /// Relative error of one step's waits of 1 ms or more.
    step: f64,
}

/// Rank 1 of a recording moved to "node-b", its clock shifted by
/// −10 s..+10 s and drifting by up to ±10 µs/s: the clock map comes back
/// the same for every offset and drift, within `b` of the truth, and the
/// cross-rank figures within `b` of the one-host report.
fn check(name: &str, b: &Bounds) {
    let t0 = bundled(name);
    let base = analyze(&t0, &AnalysisOptions::default());
    assert!(base.cross_rank.clock_offsets.is_empty());
    let want = figures(&base);
    let (lo, hi) = t0.time_span().expect("span");
    let mid = lo + (hi - lo) / 2;
    let mut errors = Vec::new();
    for offset in [
        -10_000_000_000i64,
        -3_000_000,
        40_000,
        7_000_000,
        10_000_000_000,
    ] {
        for drift_us_per_s in [0.0, 10.0, -10.0, 4.0] {
            let drift = drift_us_per_s * 1e-6;
            let t = on_other_host(&t0, 1, "node-b", offset, drift, mid);
            let r = analyze(&t, &AnalysisOptions::default());
            let x = &r.cross_rank;
            let what = format!("{name}: offset {offset} ns, drift {drift_us_per_s} us/s");
            assert!(x.comparable, "{what}: {:?}", x.notes);
            assert!(x.clocks.contains("2 hosts"), "{what}: {}", x.clocks);
            assert_eq!(x.clock_offsets.len(), 1, "{what}");
            let o = &x.clock_offsets[0];
            assert_eq!(o.host, "node-b", "{what}");
            assert_eq!(o.ranks, vec![1], "{what}");
            // The truth at o.at_ns (rank 0's clock): node-b's clock is
            // `offset + drift·(t − mid)` ahead; the map takes that back.
            let truth = -(offset as f64 + drift * (o.at_ns - mid) as f64);
            let err = o.offset_ns as f64 - truth;
            assert!(
                err.abs() <= b.offset_ns,
                "{what}: offset {} vs {truth}",
                o.offset_ns
            );
            let drift_err = o.drift_us_per_s + drift_us_per_s;
            assert!(drift_err.abs() <= b.drift_us_per_s, "{what}: {o:?}");
            assert!(o.residual_us < 10.0, "{what}: {o:?}");
            errors.push((err, drift_err));
            let got = figures(&r);
            assert_eq!(got.len(), want.len(), "{what}");
            for (a, g) in want.iter().zip(&got) {
                assert_eq!(a.0, g.0);
                let (n, a, g) = (&a.0, a.1, g.1);
                let bound = if n.ends_with("straggler") {
                    0.0
                } else if n.ends_with("count") || n.ends_with(" last") {
                    assert!((a - g).abs() <= b.ties, "{what}: {n} {a} vs {g}");
                    continue;
                } else if n.contains(" step ") {
                    if a < 1000.0 {
                        continue;
                    }
                    b.step
                } else if b.strict.iter().any(|s| n.contains(s)) {
                    0.02
                } else {
                    b.whole
                };
                assert!(rel(a, g) <= bound, "{what}: {n} {a} vs {g}");
            }
        }
    }
    // Neither the offset nor the drift moves the estimate.
    for e in &errors {
        assert!((e.0 - errors[0].0).abs() <= 20.0, "{name}: {errors:?}");
        assert!((e.1 - errors[0].1).abs() <= 0.05, "{name}: {errors:?}");
    }
}

/// fsdp-ref-nccl-h200x2 (0.58 s, one 6 µs all-reduce at its end). Measured
/// (debug build, this test): offset 2.32 µs from the truth at the middle
/// for every offset and drift (the goal, 2 µs, is missed here:
/// docs/METRICS.md, "Clocks", says why), drift 7.3 µs/s off; rank 1's
/// wait for rank 0 +2.0 % (21.24 → 21.66 ms), rank 0's exposed wait
/// −3.5 % (471 → 454 µs), the all-gather skew median +2.7 %, transfers
/// and bandwidth within 2 %, every step's straggler the same, 2 of 40
/// near-tie instances in another arrival order.
#[test]
fn fsdp_ref_nccl_on_two_hosts() {
    check(
        "fsdp-ref-nccl-h200x2",
        &Bounds {
            offset_ns: 2_500.0,
            drift_us_per_s: 8.0,
            whole: 0.04,
            strict: &["rank 1 waits", "transfer", "bw"],
            ties: 2.0,
            step: 0.05,
        },
    );
}

/// torch-fsdp2-h200x2 (0.76 s, ms-long waits). Measured: offset 0.51 µs
/// from the truth, drift 0.36 µs/s off; every cross-rank figure within
/// 0.25 % of the one-host report (the goal met).
#[test]
fn torch_fsdp2_on_two_hosts() {
    check(
        "torch-fsdp2-h200x2",
        &Bounds {
            offset_ns: 2_000.0,
            drift_us_per_s: 2.0,
            whole: 0.02,
            strict: &[],
            ties: 0.0,
            step: 0.02,
        },
    );
}

/// A rank moved to another clock whose process has no hostname (the
/// recordings' processes say "vm"): its row names it by its rank rather
/// than leave the host empty.
#[test]
fn an_unnamed_host_is_named_by_its_rank() {
    let t0 = bundled("fsdp-ref-nccl-h200x2");
    assert!(t0.processes().iter().all(|p| p.hostname == "vm"));
    let (lo, hi) = t0.time_span().expect("span");
    let t = on_other_host(&t0, 1, "", 7_000_000, 0.0, lo + (hi - lo) / 2);
    let r = analyze(&t, &AnalysisOptions::default());
    let o = &r.cross_rank.clock_offsets;
    assert_eq!(o.len(), 1, "{:?}", r.cross_rank.notes);
    assert_eq!(o[0].host, "host of rank 1 (no hostname recorded)");
    assert!((o[0].offset_ns + 7_000_000).abs() <= 2_500, "{:?}", o[0]);
    let text = streamscope_core::analysis::render::text(&r);
    assert!(
        text.contains("host of rank 1 (no hostname recorded)"),
        "{text}"
    );
    assert!(text.contains("drift us/s"), "{text}");
}

/// `whatif` couples each collective's ranks on the first rank's clock
/// too, each kernel by its own offset: with rank 1 on another host whose
/// clock drifts 100 µs/s, 1.5x slower transfers predict the same median
/// steps as on the one host (measured: rank 0's within 1.4 µs of 40.5 ms,
/// 54 µs off with one offset per rank; rank 1's 3.7 µs longer, as its
/// measured step is on that fast clock).
#[test]
fn whatif_on_two_hosts_predicts_as_on_one() {
    use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions, WhatIfReport};
    let t0 = bundled("fsdp-ref-overlap-h200x2");
    let (lo, hi) = t0.time_span().expect("span");
    let t = on_other_host(&t0, 1, "node-b", 7_000_000, 100e-6, lo + (hi - lo) / 2);
    let opts = WhatIfOptions {
        changes: Changes {
            comm_scale: Some(1.5),
            ..Default::default()
        },
        drop_syncs: Vec::new(),
        launch_queue: None,
    };
    let steps = |r: &WhatIfReport| -> Vec<(f64, f64)> {
        r.ranks
            .iter()
            .map(|k| {
                (
                    k.measured_median_step_us.expect("steps"),
                    k.predicted_median_step_us.expect("steps"),
                )
            })
            .collect()
    };
    let one = steps(&whatif(&t0, &opts).expect("replay"));
    let two = steps(&whatif(&t, &opts).expect("replay"));
    for (a, b) in one.iter().zip(&two) {
        assert!((a.1 - b.1).abs() <= 10.0, "{a:?} vs {b:?}");
    }
}
