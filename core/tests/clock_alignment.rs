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
        if b.slice_process(id) == ProcessId(p) {
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

/// Rank 1 of fsdp-ref-nccl-h200x2 (2 × H200, one host) moved to "node-b",
/// its clock shifted by −10 s..+10 s and drifting by up to ±10 µs/s.
///
/// Measured (debug build, this test): the estimate is the same for every
/// offset and drift (to a few ns): offset 2.32 µs from the truth at the
/// middle of the matched collectives (the goal is 2 µs: see
/// docs/METRICS.md, "Clocks", for why end differences give no better on
/// this 0.58 s recording), drift 7.3 µs/s from the truth; rank 1's wait
/// for rank 0 within 2 %, rank 0's exposed wait 3.5 % (471 → 454 µs), the
/// all-gather skew median 2.7 %; a few near-ties change order.
#[test]
fn a_rank_on_another_host_is_aligned_by_offset_and_drift() {
    let t0 = bundled("fsdp-ref-nccl-h200x2");
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
            let what = format!("offset {offset} ns, drift {drift_us_per_s} us/s");
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
                err.abs() <= 2_500.0,
                "{what}: offset {} vs {truth}",
                o.offset_ns
            );
            assert!(
                (o.drift_us_per_s + drift_us_per_s).abs() <= 8.0,
                "{what}: {o:?}"
            );
            assert!(o.residual_us < 10.0, "{what}: {o:?}");
            errors.push((err, o.drift_us_per_s + drift_us_per_s));
            let got = figures(&r);
            assert_eq!(got.len(), want.len(), "{what}");
            for (a, b) in want.iter().zip(&got) {
                assert_eq!(a.0, b.0);
                let n = &a.0;
                if n.ends_with("straggler") {
                    assert_eq!(a.1, b.1, "{what}: {n}");
                } else if n.ends_with("count") || n.ends_with(" last") {
                    // Instances whose ranks arrived within the error: near-ties.
                    assert!((a.1 - b.1).abs() <= 2.0, "{what}: {n} {} vs {}", a.1, b.1);
                } else if n.contains(" step ") {
                    // One step's waits: those of a millisecond or more.
                    if a.1 >= 1000.0 {
                        assert!(rel(a.1, b.1) <= 0.05, "{what}: {n} {} vs {}", a.1, b.1);
                    }
                } else if n.starts_with("rank 1 waits")
                    || n.ends_with("transfer")
                    || n.ends_with("bw")
                {
                    assert!(rel(a.1, b.1) <= 0.02, "{what}: {n} {} vs {}", a.1, b.1);
                } else {
                    assert!(rel(a.1, b.1) <= 0.04, "{what}: {n} {} vs {}", a.1, b.1);
                }
            }
        }
    }
    // Neither the offset nor the drift moves the estimate.
    for e in &errors {
        assert!((e.0 - errors[0].0).abs() <= 20.0, "{errors:?}");
        assert!((e.1 - errors[0].1).abs() <= 0.05, "{errors:?}");
    }
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
