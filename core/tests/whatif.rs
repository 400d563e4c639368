//! The what-if replay (docs/METRICS.md, "What-if") on the real H200 traces
//! in traces/ and on generated ones.

use std::path::{Path, PathBuf};

use streamscope_core::analysis::whatif::{whatif, WhatIfOptions, WhatIfReport};
use streamscope_core::load::load_paths;

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces")
}

/// Every trace folder under traces/: a folder with trace files directly in it.
fn trace_folders() -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(d)
            .expect("read traces/")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        let has_trace = entries.iter().any(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            p.is_file()
                && (n.contains(".pftrace") || n.ends_with(".json") || n.ends_with(".json.gz"))
        });
        if has_trace {
            out.push(d.to_path_buf());
        }
        for p in entries.iter().filter(|p| p.is_dir()) {
            walk(p, out);
        }
    }
    let mut out = Vec::new();
    walk(&traces_dir(), &mut out);
    out
}

fn run(folder: &Path, opts: &WhatIfOptions) -> Result<WhatIfReport, String> {
    let t = load_paths(&[folder.to_path_buf()]).expect("load");
    whatif(&t, opts)
}

#[test]
fn unchanged_replay_reproduces_every_step_of_every_trace() {
    let folders = trace_folders();
    assert!(folders.len() >= 7, "{folders:?}");
    for f in &folders {
        let r =
            run(f, &WhatIfOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(!r.ranks.is_empty(), "{}", f.display());
        for rank in &r.ranks {
            assert!(!rank.steps.is_empty());
            for s in &rank.steps {
                let err = (s.predicted_step_us - s.measured_step_us).abs() / s.measured_step_us;
                assert!(
                    err <= 0.02,
                    "{} rank {} step {}: measured {:.1} µs, replayed {:.1} µs",
                    f.display(),
                    s.rank,
                    s.step,
                    s.measured_step_us,
                    s.predicted_step_us
                );
                assert!(s.replay_error_pct <= 2.0);
            }
        }
        assert!(r.consistency_max_error_pct <= 2.0);
    }
}

mod built {
    //! Two ranks, one step each: a compute kernel, an all-reduce that the
    //! next compute kernel waits for (cross-stream), a stream sync the host
    //! blocks in, then host time until the step ends. Rank 0 reaches the
    //! all-reduce at 200 µs, rank 1 at 500 µs; the transfer takes 400 µs.
    use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions, WhatIfReport};
    use streamscope_core::*;

    const US: i64 = 1000;

    pub fn trace(with_steps: bool, with_nccl: bool) -> Trace {
        let mut t = TraceBuilder::new();
        for rank in 0..2u32 {
            let p = t.add_process(Process {
                pid: 10 + rank,
                rank: Some(rank),
                world_size: Some(2),
                ..Default::default()
            });
            let d = t.add_device(streamscope_core::synth::h200(p, 0));
            let host = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
            let g = t.add_track(p, None, TrackKind::Gpu { device: d }, "GPU 0");
            let s7 = t.add_track(
                p,
                Some(g),
                TrackKind::Stream {
                    device: d,
                    stream: 7,
                },
                "s7",
            );
            let s8 = t.add_track(
                p,
                Some(g),
                TrackKind::Stream {
                    device: d,
                    stream: 8,
                },
                "s8",
            );
            let mut corr = 1u32;
            let mut call = |t: &mut TraceBuilder, name: &str, s: i64, d: i64| {
                let n = t.intern(name);
                let mut a = NewSlice::new(host, SliceKind::Runtime, n, s * US, d * US);
                a.correlation = corr;
                t.push_slice(a);
                corr += 1;
                corr - 1
            };
            let kernel = |t: &mut TraceBuilder, tr: TrackId, name: &str, s: i64, d: i64, c: u32| {
                let n = t.intern(name);
                let mut k = NewSlice::new(tr, SliceKind::Kernel, n, s * US, d * US);
                k.class = SliceClass::of_gpu_name(SliceKind::Kernel, name);
                k.correlation = c;
                t.push_slice(k);
            };
            let c = call(&mut t, "cudaLaunchKernel", 10, 5);
            kernel(&mut t, s7, "gemm_a", 100, 300, c);
            let arrive = if rank == 0 { 200 } else { 500 };
            if with_nccl {
                let c = call(&mut t, "cudaLaunchKernel", 20, 5);
                let name =
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
                kernel(&mut t, s8, name, arrive, 900 - arrive, c);
            }
            let c = call(&mut t, "cudaLaunchKernel", 30, 5);
            kernel(&mut t, s7, "gemm_b", 905, 300, c);
            call(&mut t, "cudaStreamSynchronize", 150, 1210 - 150);
            if with_steps {
                let n = t.intern("step 0");
                t.push_slice(NewSlice::new(host, SliceKind::Range, n, 0, 1300 * US));
            }
        }
        t.finish()
    }

    fn run(t: &Trace, changes: Changes, drops: &[&str]) -> Result<WhatIfReport, String> {
        whatif(
            t,
            &WhatIfOptions {
                changes,
                drop_syncs: drops.iter().map(|s| s.to_string()).collect(),
                launch_queue: None,
            },
        )
    }

    fn steps(r: &WhatIfReport) -> Vec<(f64, f64)> {
        r.ranks
            .iter()
            .flat_map(|k| &k.steps)
            .map(|s| (s.measured_step_us, s.predicted_step_us))
            .collect()
    }

    #[test]
    fn unchanged_is_the_measured_step() {
        let r = run(&trace(true, true), Changes::default(), &[]).expect("replay");
        assert_eq!(steps(&r), vec![(1300.0, 1300.0), (1300.0, 1300.0)]);
        assert_eq!(r.consistency_max_error_pct, 0.0);
    }

    #[test]
    fn slower_transfer_delays_the_waiting_kernel_the_sync_and_the_step() {
        // The transfer starts when rank 1 arrives (500 µs) and takes 800 µs:
        // gemm_b starts 5 µs after it, the sync returns 5 µs after gemm_b,
        // the step ends 90 µs of host time later: 1700 µs on both ranks.
        let ch = Changes {
            comm_scale: Some(2.0),
            ..Default::default()
        };
        let r = run(&trace(true, true), ch, &[]).expect("replay");
        assert_eq!(steps(&r), vec![(1300.0, 1700.0), (1300.0, 1700.0)]);
        let s = &r.ranks[0].steps[0];
        // Rank 0's kernel waits 300 µs for rank 1, then transfers.
        let g = &s.regimes[0];
        assert_eq!(g.collective, "AllReduce");
        assert_eq!((g.measured_comm_us, g.predicted_comm_us), (400.0, 800.0));
        // Nothing of the all-reduce overlaps compute after gemm_a ends at 400 µs... but gemm_a
        // overlaps its start: 200..400 µs on rank 0.
        assert_eq!(s.measured_exposed_comm_us, 500.0);
        assert_eq!(s.predicted_exposed_comm_us, 900.0);
        // The critical path from the sync's return back to the step start:
        // the sync's 5 µs, gemm_b's 300 µs (compute), its 5 µs wait and the
        // 800 µs transfer (communication), then rank 1's late start of the
        // all-reduce, 480 µs after its launch (host: launch latency), and
        // the 20 µs before that launch; and the 90 µs of host time from the
        // sync's return to the step's end.
        let c = &s.critical_path;
        assert_eq!(c.length_us, 1700.0);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(c.compute_pct, 100.0 * 300.0 / 1700.0), "{c:?}");
        assert!(close(c.communication_pct, 100.0 * 805.0 / 1700.0), "{c:?}");
        assert!(close(c.sync_pct, 100.0 * 5.0 / 1700.0), "{c:?}");
        assert!(close(c.host_pct, 100.0 * 590.0 / 1700.0), "{c:?}");
    }

    #[test]
    fn faster_compute_leaves_the_collective_bound_step() {
        // gemm_a halves (it ends before the all-reduce), gemm_b halves:
        // 905 + 150 + 5 + 90 = 1150 µs.
        let ch = Changes {
            compute_scale: Some(0.5),
            ..Default::default()
        };
        let r = run(&trace(true, true), ch, &[]).expect("replay");
        assert_eq!(steps(&r), vec![(1300.0, 1150.0), (1300.0, 1150.0)]);
    }

    #[test]
    fn dropped_sync_no_longer_blocks_the_host() {
        // The host no longer waits: its part of the step ends 90 µs after
        // the sync began (150 µs), and the step lasts as long as its GPU
        // work, which ends at 1205 µs (the GPU sets the pace).
        let r = run(
            &trace(true, true),
            Changes::default(),
            &["StreamSynchronize"],
        )
        .expect("replay");
        assert_eq!(steps(&r), vec![(1300.0, 1205.0), (1300.0, 1205.0)]);
        let c = &r.ranks[0].steps[0].critical_path;
        // Its critical path runs through the GPU work, no sync on it.
        assert_eq!((c.length_us, c.sync_pct), (1205.0, 0.0), "{c:?}");
        assert!(
            (c.compute_pct - 100.0 * 300.0 / 1205.0).abs() < 1e-9,
            "{c:?}"
        );
        assert!(
            r.notes.iter().any(|n| matches!(
                n,
                streamscope_core::analysis::whatif::WhatIfNote::SyncsDropped { spec, calls: 2 } if spec == "StreamSynchronize"
            )),
            "{:?}",
            r.notes
        );
        let none =
            run(&trace(true, true), Changes::default(), &["train.py:12"]).expect_err("refused");
        assert!(none.contains("matches no host sync"), "{none}");
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let e = run(&trace(false, true), Changes::default(), &[]).expect_err("refused");
        assert!(e.starts_with("no steps"), "{e}");
        let ch = Changes {
            comm_scale: Some(2.0),
            ..Default::default()
        };
        let e = run(&trace(true, false), ch, &[]).expect_err("refused");
        assert!(e.starts_with("no communication"), "{e}");
        let bw = Changes {
            link_bw_gbps: Some(100.0),
            ..Default::default()
        };
        let e = run(&trace(true, true), bw, &[]).expect_err("refused");
        assert!(e.contains("bytes"), "{e}");
        // Compute and sync changes need no communication.
        let r = run(
            &trace(true, false),
            Changes {
                compute_scale: Some(2.0),
                ..Default::default()
            },
            &[],
        );
        assert!(r.is_ok());
    }
}

fn median_change(r: &WhatIfReport) -> Vec<(f64, f64)> {
    r.ranks
        .iter()
        .map(|k| {
            (
                k.measured_median_step_us.expect("steps"),
                k.predicted_median_step_us.expect("steps"),
            )
        })
        .collect()
}

fn opts(comm: Option<f64>, bw: Option<f64>, compute: Option<f64>, drops: &[&str]) -> WhatIfOptions {
    WhatIfOptions {
        changes: streamscope_core::analysis::whatif::Changes {
            comm_scale: comm,
            link_bw_gbps: bw,
            compute_scale: compute,
            drop_syncs: false,
            unblock_legacy: false,
            prefetch_deeper: None,
        },
        drop_syncs: drops.iter().map(|s| s.to_string()).collect(),
        launch_queue: None,
    }
}

fn load(name: &str) -> streamscope_core::Trace {
    load_paths(&[traces_dir().join(name)]).expect("load")
}

#[test]
fn serial_schedule_pays_every_transfer_and_every_compute_kernel() {
    // Serial: collectives and compute on one stream, nothing overlaps: the
    // step grows by its transfer time when transfers double, and shrinks
    // by about half its compute when compute kernels halve.
    let t = load("fsdp-ref-serial-h200x2");
    let slow = whatif(&t, &opts(Some(2.0), None, None, &[])).expect("replay");
    let fast = whatif(&t, &opts(Some(0.5), None, None, &[])).expect("replay");
    for (rank, (s, f)) in slow.ranks.iter().zip(&fast.ranks).enumerate() {
        for (a, b) in s.steps.iter().zip(&f.steps).filter(|(a, _)| a.in_window) {
            let transfer: f64 = a.regimes.iter().map(|g| g.measured_comm_us).sum();
            let grew = a.predicted_step_us - a.measured_step_us;
            let shrank = b.measured_step_us - b.predicted_step_us;
            assert!(
                (grew - transfer).abs() < 0.05 * transfer,
                "rank {rank} step {}: grew {grew:.0} µs, transfers {transfer:.0} µs",
                a.step
            );
            assert!(
                (shrank - transfer / 2.0).abs() < 0.05 * transfer,
                "rank {rank} step {}: shrank {shrank:.0} µs, transfers {transfer:.0} µs",
                a.step
            );
            // Nothing hides a serial collective.
            assert_eq!(a.predicted_overlap_pct.map(|p| p < 1.0), Some(true));
        }
    }
    let compute = whatif(&t, &opts(None, None, Some(0.5), &[])).expect("replay");
    for (m, c) in median_change(&compute) {
        assert!(c < 0.8 * m && c > 0.6 * m, "{m} -> {c}");
    }
}

#[test]
fn overlapped_transfers_hide_until_the_wall() {
    // Prefetched all-gathers and overlapped reduce-scatters: 20 % slower
    // transfers cost the overlapped schedule less than the serial one pays
    // (its backward is close to the wall already: an all-gather and a
    // reduce-scatter per layer on one NCCL stream); at 4x both collectives
    // are past the wall, where the step grows by most of the added time.
    let grew = |name: &str, x: f64| -> (f64, f64) {
        let r = whatif(&load(name), &opts(Some(x), None, None, &[])).expect("replay");
        let k = &r.ranks[0];
        let step = k.steps.iter().find(|s| s.in_window).expect("steady step");
        let transfer: f64 = step.regimes.iter().map(|g| g.measured_comm_us).sum();
        let (m, p) = median_change(&r)[0];
        (p - m, transfer)
    };
    let (serial, _) = grew("fsdp-ref-serial-h200x2", 1.2);
    let (overlap, transfer) = grew("fsdp-ref-overlap-h200x2", 1.2);
    assert!(
        overlap > 0.0 && overlap < 0.8 * serial,
        "{overlap} vs {serial}"
    );
    let (overlap4, _) = grew("fsdp-ref-overlap-h200x2", 4.0);
    assert!(overlap4 > 0.5 * 3.0 * transfer, "{overlap4} ({transfer})");
    let t = load("fsdp-ref-overlap-h200x2");
    let base = whatif(&t, &opts(None, None, None, &[])).expect("replay");
    let slow = whatif(&t, &opts(Some(4.0), None, None, &[])).expect("replay");
    for (r1, r4) in base.ranks.iter().zip(&slow.ranks) {
        let regime = |s: &streamscope_core::analysis::whatif::StepWhatIf| -> Vec<String> {
            s.regimes.iter().map(|g| g.regime.clone()).collect()
        };
        assert_eq!(regime(&r1.steps[3]), vec!["hidden", "hidden"]);
        assert_eq!(regime(&r4.steps[3]), vec!["past the wall", "past the wall"]);
    }
}

#[test]
fn link_bandwidth_from_the_collectives_bytes() {
    // The plugin recording knows each collective's bytes: at its own
    // measured bus bandwidth the step is about what was measured, slower
    // links cost more, faster less.
    let t = load("fsdp-ref-nccl-h200x2");
    let at =
        |bw: f64| median_change(&whatif(&t, &opts(None, Some(bw), None, &[])).expect("replay"));
    let (slow, fast) = (at(50.0), at(400.0));
    for (s, f) in slow.iter().zip(&fast) {
        assert!(s.1 > s.0 && f.1 < s.1, "{s:?} {f:?}");
    }
}

#[test]
fn dropping_the_item_sync_leaves_the_gpu_setting_the_pace() {
    // fsdp-ref's --item-sync copies the loss to the host every step
    // (cuMemcpyDtoH): dropped, the host runs ahead and the step is its GPU
    // work, a little shorter than measured (no drain and refill).
    let t = load("fsdp-ref-overlap-h200x2");
    let r = whatif(&t, &opts(None, None, None, &["cuMemcpyDtoH"])).expect("replay");
    for (m, p) in median_change(&r) {
        assert!(p <= m && p > 0.9 * m, "{m} -> {p}");
    }
    let e = whatif(&t, &opts(Some(2.0), None, None, &["no_such_file.py:3"])).expect_err("refused");
    assert!(e.contains("no_such_file.py:3"), "{e}");
}

#[test]
fn generated_fsdp_trace_replays_unchanged() {
    use streamscope_core::synth::{fsdp_like, SynthOptions};
    let t = fsdp_like(&SynthOptions {
        ranks: 4,
        target_slices: 60_000,
        layers: 8,
        item_sync: true,
        seed: 7,
    });
    let r = whatif(&t, &WhatIfOptions::default()).expect("replay");
    for k in &r.ranks {
        for s in &k.steps {
            assert!(
                s.replay_error_pct <= 2.0,
                "rank {} step {}: measured {} replayed {} notes {:?}",
                s.rank,
                s.step,
                s.measured_step_us,
                s.replayed_step_us,
                r.notes
            );
        }
    }
}
