//! Collectives matched across ranks: waits, transfer, stragglers, skew
//! (docs/METRICS.md, "Cross-rank collectives"), on the real H200 traces,
//! a planted straggler, HTA's Kineto trace and traces that cannot match.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::analysis::{bus_factor, match_collectives, MatchKey, MatchNote, Matching};
use streamscope_core::load::load_paths;
use streamscope_core::synth::h200;
use streamscope_core::*;

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

/// The matching `analyze` does (ranks with GPU work, numbered).
fn matching(t: &Trace) -> Matching {
    match_collectives(t)
}

fn comm_kernels_per_process(t: &Trace) -> Vec<usize> {
    let mut n = vec![0usize; t.processes().len()];
    for i in 0..t.slices().len() {
        if t.slices().kind()[i] == SliceKind::Kernel
            && t.str(t.slices().name()[i]).starts_with("nccl")
        {
            n[t.slice_process(SliceId::from_index(i)).index()] += 1;
        }
    }
    n
}

/// Checks the invariants every matching and report must hold.
fn check_invariants(t: &Trace, m: &Matching, r: &Report) {
    for inst in &m.instances {
        let first = inst
            .parts
            .iter()
            .map(|p| p.start_ns)
            .min()
            .expect("present");
        let last = inst
            .parts
            .iter()
            .map(|p| p.start_ns)
            .max()
            .expect("present");
        assert_eq!(inst.parts[inst.last].start_ns, last);
        assert_eq!(inst.skew_ns, last - first);
        assert_eq!(inst.parts[inst.last].wait_ns, 0);
        for p in &inst.parts {
            assert!(p.wait_ns >= 0 && p.transfer_ns() >= 0, "{p:?}");
            assert_eq!(p.wait_ns + p.transfer_ns(), p.end_ns - p.start_ns, "{p:?}");
            // Every part is the same kernel name as the first rank's.
            assert_eq!(
                t.slices().name()[p.slice.index()],
                t.slices().name()[inst.parts[0].slice.index()]
            );
        }
    }
    let ranks: Vec<u32> = r.ranks.iter().map(|k| k.rank).collect();
    for k in &r.ranks {
        let (w, x) = (
            k.exposed_wait_us.expect("present"),
            k.exposed_transfer_us.expect("present"),
        );
        assert!(w >= 0.0 && x >= 0.0);
        assert!(
            (w + x - k.breakdown.exposed_comm_us).abs() <= 1.0,
            "rank {}: {w} + {x} != {}",
            k.rank,
            k.breakdown.exposed_comm_us
        );
    }
    let mut with_straggler = 0;
    for s in &r.steps {
        let longest = r
            .steps
            .iter()
            .filter(|o| o.step == s.step)
            .map(|o| o.duration_us)
            .fold(0.0, f64::max);
        if let Some(k) = s.straggler_rank {
            with_straggler += 1;
            assert!(ranks.contains(&k), "step {}: straggler {k}", s.step);
            let w = s.straggler_wait_us.expect("present");
            assert!(w > 0.0 && w <= longest, "step {}: {w} > {longest}", s.step);
        }
        if let Some(w) = s.comm_wait_us {
            assert!(w >= 0.0 && w <= longest, "step {}: own wait {w}", s.step);
        }
    }
    assert!(with_straggler > 0);
}

#[test]
fn real_collector_traces_match_every_nccl_kernel() {
    for name in ["fsdp-ref-overlap-h200x2", "torch-fsdp2-h200x2"] {
        let t = load_paths(&[bundled(name)]).expect("load");
        let per = comm_kernels_per_process(&t);
        assert_eq!(per.len(), 2);
        assert_eq!(per[0], per[1], "{name}: {per:?}");
        let m = matching(&t);
        assert!(m.notes.is_empty(), "{name}: {:?}", m.notes);
        assert!(m.comparable, "{name}: {}", m.clocks);
        assert_eq!(m.method, "order");
        assert_eq!(m.instances.len(), per[0], "{name}");
        assert_eq!(m.by_slice.len(), per[0] + per[1], "{name}");
        let r = analyze(&t, &AnalysisOptions::default());
        assert_eq!(r.cross_rank.matched_kernels, r.cross_rank.comm_kernels);
        assert!(r.cross_rank.instances_in_window > 0);
        assert!(!r.cross_rank.kinds.is_empty());
        // Collector traces carry no sizes yet: no invented bytes.
        assert!(r
            .cross_rank
            .kinds
            .iter()
            .all(|k| k.bytes.is_none() && k.bus_bw_gbps.is_none()));
        for k in &r.cross_rank.kinds {
            let (p50, p95) = (
                k.skew_median_us.expect("present"),
                k.skew_p95_us.expect("present"),
            );
            assert!(0.0 <= p50 && p50 <= p95 && p95 <= k.skew_max_us.expect("present"));
            assert!((k.wait_us + k.transfer_us - k.kernel_us).abs() < 1.0);
        }
        check_invariants(&t, &m, &r);
    }
}

/// Two ranks on one host; per step `per_step` all-gathers on a NCCL stream
/// and a GEMM after each on the compute stream, NVTX "step N" ranges.
/// Rank 1 starts every all-gather `late_ns` after rank 0; both end together.
fn planted(steps: u32, per_step: u32, late_ns: i64) -> Trace {
    let mut t = TraceBuilder::new();
    let ag = t.intern("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    let gemm = t.intern("sm90_gemm");
    let launch = t.intern("cudaLaunchKernel");
    for r in 0..2u32 {
        let p = t.add_process(Process {
            pid: 100 + r,
            rank: Some(r),
            world_size: Some(2),
            hostname: "node0".into(),
            clock: ClockDomain::Monotonic,
            ..Default::default()
        });
        let d = t.add_device(h200(p, r));
        let host = t.add_track(p, None, TrackKind::Thread { tid: 100 + r }, "python");
        let comm = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 20,
            },
            "s20",
        );
        let comp = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "s7",
        );
        let mut corr = 1u32;
        for s in 0..steps {
            let step_start = 1_000_000_000 + s as i64 * 100_000_000;
            let name = t.intern(&format!("step {s}"));
            let mut sl = NewSlice::new(host, SliceKind::Range, name, step_start, 90_000_000);
            sl.class = SliceClass::None;
            t.push_slice(sl);
            for k in 0..per_step {
                let base = step_start + 1_000_000 + k as i64 * 10_000_000;
                let start = base + if r == 1 { late_ns } else { 0 };
                let end = base + late_ns + 2_000_000;
                let mut l =
                    NewSlice::new(host, SliceKind::Runtime, launch, start - 500_000, 10_000);
                l.correlation = corr;
                t.push_slice(l);
                let mut kern = NewSlice::new(comm, SliceKind::Kernel, ag, start, end - start);
                kern.class = SliceClass::Communication;
                kern.correlation = corr;
                t.push_slice(kern);
                corr += 1;
                let mut g = NewSlice::new(comp, SliceKind::Kernel, gemm, end + 10_000, 1_000_000);
                g.class = SliceClass::Compute;
                t.push_slice(g);
            }
        }
    }
    t.link_flows_by_correlation();
    t.finish()
}

#[test]
fn a_rank_starting_every_all_gather_late_is_the_straggler() {
    let late = 3_000_000;
    let t = planted(6, 4, late);
    let m = matching(&t);
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    assert_eq!(m.instances.len(), 24);
    for inst in &m.instances {
        assert_eq!(inst.parts[inst.last].rank, 1);
        assert!((inst.skew_ns - late).abs() <= 1_000);
        let r0 = inst.parts.iter().find(|p| p.rank == 0).expect("present");
        assert!((r0.wait_ns - late).abs() <= 1_000, "{r0:?}");
        assert_eq!(r0.launch_ns, Some(r0.start_ns - 500_000));
    }
    let r = analyze(&t, &AnalysisOptions::default());
    for s in &r.steps {
        assert_eq!(s.straggler_rank, Some(1), "step {}", s.step);
        // 4 all-gathers a step, rank 0 waits 3 ms in each.
        let w = s.straggler_wait_us.expect("present");
        assert!((w - 4.0 * late as f64 / 1000.0).abs() <= 4.0, "{w}");
        let own = s.comm_wait_us.expect("present");
        if s.rank == 0 {
            assert!((own - w).abs() < 1e-6);
        } else {
            assert_eq!(own, 0.0);
        }
    }
    let pair = &r.cross_rank.waits;
    assert_eq!(pair.len(), 1);
    assert_eq!((pair[0].waiting_rank, pair[0].for_rank), (0, 1));
    // Rank 0's exposed communication is almost all waiting (compute never
    // overlaps it), rank 1's all transfer.
    let r0 = &r.ranks[0];
    assert!(r0.exposed_wait_us.expect("present") > 0.5 * r0.breakdown.exposed_comm_us);
    assert_eq!(r.ranks[1].exposed_wait_us, Some(0.0));
    check_invariants(&t, &m, &r);
    let text = streamscope_core::analysis::render::text(&r);
    assert!(text.contains("Who waits for whom"), "{text}");
}

/// Removes slices (by index) from a trace.
fn drop_slices(t: &mut Trace, drop: &HashSet<usize>) {
    t.retain_slices(|id| !drop.contains(&id.index()));
}

#[test]
fn kernels_missing_on_one_rank_give_a_note_and_no_pairs() {
    let mut t = load_paths(&[bundled("fsdp-ref-overlap-h200x2")]).expect("load");
    let ag: Vec<usize> = (0..t.slices().len())
        .filter(|&i| {
            t.slice_process(SliceId::from_index(i)) == ProcessId::from_index(1)
                && t.slices().kind()[i] == SliceKind::Kernel
                && t.str(t.slices().name()[i]).contains("AllGather")
        })
        .collect();
    assert!(ag.len() > 10);
    drop_slices(&mut t, &ag[3..6].iter().copied().collect());
    let m = matching(&t);
    assert!(m.instances.iter().all(|i| i.kind != "AllGather"));
    assert!(
        m.notes.iter().any(|n| matches!(
            n,
            MatchNote::CountsDiffer { group, counts }
                if group.contains("AllGather") && counts.len() == 2 && counts[0].kernels != counts[1].kernels
        )),
        "{:?}",
        m.notes
    );
    let r = analyze(&t, &AnalysisOptions::default());
    assert!(r.diagnostics.iter().any(|d| {
        d.kind == streamscope_core::diagnostic::Kind::UnmatchedCollectives
            && d.detail.contains("AllGather")
    }));
    assert!(r
        .cross_rank
        .kinds
        .iter()
        .all(|k| k.collective != "AllGather"));
    // One rank alone: a note, nothing matched.
    let t = load_paths(&[bundled("fsdp-ref-overlap-h200x2/rank-0.pftrace.gz")]).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    assert_eq!(r.cross_rank.instances, 0);
    assert!(r.ranks[0].exposed_wait_us.is_none());
    assert!(r.steps.iter().all(|s| s.straggler_rank.is_none()));
    assert!(
        r.diagnostics.iter().any(|d| {
            d.kind == streamscope_core::diagnostic::Kind::UnmatchedCollectives
                && d.detail.contains("1 of the job's 2 ranks")
        }),
        "{:?}",
        r.diagnostics
    );
}

/// HTA's Kineto trace (rank 0 of 2) with a copy of itself as rank 1 whose
/// NCCL kernels start `late_ns` later and last that much less.
fn kineto_pair(late_ns: i64) -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/nccl_parser_config/nccl_data.json.gz");
    let mut t = load_paths(&[path]).expect("load");
    assert_eq!(t.processes().len(), 1);
    // Rank 1: a copy of rank 0 whose NCCL kernels start `late_ns` later.
    let mut p1 = t.processes()[0].clone();
    p1.rank = Some(1);
    p1.pid += 1;
    let mut b = TraceBuilder::new();
    let np = b.add_process(p1);
    let dev_map: Vec<DeviceId> = t
        .devices()
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.process = np;
            d.ordinal += 1;
            b.add_device(d)
        })
        .collect();
    for tr in t.tracks() {
        let kind = match tr.kind {
            TrackKind::Stream { device, stream } => TrackKind::Stream {
                device: dev_map[device.index()],
                stream,
            },
            TrackKind::Gpu { device } => TrackKind::Gpu {
                device: dev_map[device.index()],
            },
            TrackKind::Counter { device } => TrackKind::Counter {
                device: device.map(|d| dev_map[d.index()]),
            },
            k => k,
        };
        b.add_track(np, tr.parent, kind, t.str(tr.name));
    }
    let sl = t.slices();
    for id in sl.ids() {
        let i = id.index();
        let nccl = sl.kind()[i] == SliceKind::Kernel && t.str(sl.name()[i]).starts_with("nccl");
        let (s, d) = if nccl {
            (
                sl.start_ns()[i] + late_ns,
                (sl.dur_ns()[i] - late_ns).max(0),
            )
        } else {
            (sl.start_ns()[i], sl.dur_ns()[i])
        };
        let name = b.intern(t.str(sl.name()[i]));
        let mut n = NewSlice::new(sl.track()[i], sl.kind()[i], name, s, d);
        n.class = sl.class()[i];
        n.correlation = sl.correlation()[i];
        n.launch = t.launch_of(id).copied();
        n.copy = t.copy_of(id).copied();
        for (k, v) in t.args_of(id) {
            let v = match v {
                ArgValue::Str(x) => ArgValue::Str(b.intern(t.str(*x))),
                v => *v,
            };
            n.args.push((b.intern(t.str(*k)), v));
        }
        b.push_slice(n);
    }
    b.link_flows_by_correlation();
    t.append(b.finish());
    t
}

#[test]
fn kineto_collectives_carry_bytes_and_transfer_bus_bandwidth() {
    // Shorter than the shortest NCCL kernel (7.6 µs) so every one keeps a transfer part.
    let late = 5_000;
    let t = kineto_pair(late);
    let m = matching(&t);
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    assert_eq!(m.instances.len(), 21);
    let ar: Vec<_> = m
        .instances
        .iter()
        .filter(|i| i.kind == "AllReduce")
        .collect();
    assert_eq!(ar.len(), 15);
    for i in &m.instances {
        assert_eq!(i.group_size, 2);
        assert_eq!(i.parts[i.last].rank, 1);
        // µs-rounded Kineto times: the planted 5 µs within 1 µs.
        assert!((i.skew_ns - late).abs() <= 1_000, "{}", i.skew_ns);
        let b = i.bytes.expect("bytes from record_param_comms args");
        assert!(b > 0);
        // nccl-tests: allreduce 2(n-1)/n, broadcast 1; n = 2 here.
        let f = match i.kind.as_str() {
            "AllReduce" => 2.0 * (2.0 - 1.0) / 2.0,
            "Broadcast" => 1.0,
            k => panic!("unexpected collective {k}"),
        };
        assert_eq!(bus_factor(&i.kind, 2), Some(f));
        let bw = i.bus_bw_gbps().expect("present");
        assert!((bw - b as f64 * f / i.transfer_ns as f64).abs() < 1e-9);
    }
    // 6637568 floats in the first all-reduce shown by the trace's args.
    assert!(ar.iter().any(|i| i.bytes == Some(6_637_568 * 4)));
    let r = analyze(&t, &AnalysisOptions::default());
    let k = r
        .cross_rank
        .kinds
        .iter()
        .find(|k| k.collective == "AllReduce")
        .expect("AllReduce row");
    assert!(k.bytes.is_some_and(|b| b > 0));
    assert!(k.bus_bw_gbps.is_some_and(|b| b > 0.0));
    // Per rank too: bytes and the nccl-tests factor over the whole kernel time.
    for c in r.collectives.iter().filter(|c| c.collective == "AllReduce") {
        let bytes = c.bytes.expect("bytes") as f64;
        assert_eq!(c.sized, c.count);
        let secs = c.total_us * 1e-6;
        let want = bytes * bus_factor("AllReduce", 2).expect("present") / secs / 1e9;
        let got = c.bus_bw_gbps.expect("bus bw");
        assert!((got - want).abs() / want < 1e-6, "{got} vs {want}");
    }
}

/// Moves every timestamp of process `p` by `shift_ns` and puts it on another host.
fn shift_process(t: &mut Trace, p: u32, shift_ns: i64) {
    let mut b = std::mem::take(t).into_builder();
    for id in b.slices().ids() {
        if b.slice_process(id) == ProcessId::from_index(p as usize) {
            let s = b.slices().start_ns()[id.index()];
            b.set_slice_start(id, s + shift_ns);
        }
    }
    b.processes_mut()[p as usize].hostname = "other-host".into();
    *t = b.finish();
}

#[test]
fn clock_offsets_between_hosts_are_recovered_from_collective_ends() {
    for name in ["fsdp-ref-overlap-h200x2", "torch-fsdp2-h200x2"] {
        let t0 = load_paths(&[bundled(name)]).expect("load");
        let base = analyze(&t0, &AnalysisOptions::default());
        assert!(base.cross_rank.clock_offsets.is_empty());
        for shift in [-3_000_000_000i64, 5_000_000, 40_000] {
            let mut t = t0.clone();
            shift_process(&mut t, 1, shift);
            let m = matching(&t);
            assert!(m.notes.is_empty(), "{name}: {:?}", m.notes);
            assert_eq!(m.clock_offsets.len(), 1);
            let o = &m.clock_offsets[0];
            assert_eq!(o.ranks, vec![1]);
            // Rank 1's clock runs `shift` ahead: the offset takes it back.
            assert!(
                (o.offset_ns + shift).abs() <= 20_000,
                "{name}: shift {shift}: offset {} (residual {} us)",
                o.offset_ns,
                o.residual_us
            );
            assert!(o.residual_us < 20.0, "{name}: {}", o.residual_us);
            eprintln!(
                "{name}: shift {shift} ns: offset {} ns, error {} ns, residual {} us",
                o.offset_ns,
                o.offset_ns + shift,
                o.residual_us
            );
            let r = analyze(&t, &AnalysisOptions::default());
            check_invariants(&t, &m, &r);
            // The same stragglers as on the shared clock where they were
            // clear (a few µs of offset error may flip near-ties).
            let mut agree = 0;
            for (a, b) in r.steps.iter().zip(&base.steps) {
                assert_eq!((a.rank, a.step), (b.rank, b.step));
                if a.straggler_rank == b.straggler_rank {
                    agree += 1;
                } else {
                    assert!(
                        b.straggler_wait_us.is_some_and(|w| w < 1000.0),
                        "{name}: shift {shift}: step {} {:?} vs {:?}",
                        a.step,
                        a.straggler_rank,
                        b
                    );
                }
            }
            assert!(agree * 10 >= base.steps.len() * 8, "{name}: {agree}");
        }
    }
}

/// Gives every NCCL kernel a "Seq" argument: its order on its rank, plus
/// `bump` for process 1's kernel number `bumped`.
fn with_seq(trace: &mut Trace, bumped: usize, bump: u64) {
    let mut t = std::mem::take(trace).into_builder();
    let key = t.intern("Seq");
    let mut next = vec![0u64; t.processes().len()];
    for id in t.slices().ids() {
        let i = id.index();
        if t.slices().kind()[i] != SliceKind::Kernel
            || !t.str(t.slices().name()[i]).starts_with("nccl")
        {
            continue;
        }
        let p = t.slice_process(id).index();
        let mut seq = next[p] + 100;
        if p == 1 && next[p] as usize == bumped {
            seq += bump;
        }
        next[p] += 1;
        let mut args = t.args_of(id).to_vec();
        args.push((key, ArgValue::UInt(seq)));
        t.set_slice_args(id, args);
    }
    *trace = t.finish();
}

#[test]
fn sequence_numbers_match_by_process_group() {
    let mut t = kineto_pair(5_000);
    with_seq(&mut t, 0, 0);
    let m = matching(&t);
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    assert_eq!(m.method, "sequence");
    assert_eq!(m.instances.len(), 21);
    for i in &m.instances {
        assert_eq!(i.group, "pg 0");
        let seqs: Vec<u64> = i
            .parts
            .iter()
            .map(|p| match t.arg(p.slice, "Seq") {
                Some(ArgValue::UInt(s)) => *s,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(seqs[0], seqs[1]);
        assert_eq!(i.seq, Some(seqs[0]));
    }
    // A sequence number rank 0 never saw: nothing of the group is paired.
    let mut t = kineto_pair(5_000);
    with_seq(&mut t, 3, 1_000);
    let m = matching(&t);
    assert!(m.instances.is_empty());
    assert!(
        m.notes.iter().any(|n| matches!(
            n,
            MatchNote::KernelDiffers { group, by: MatchKey::Sequence, .. } if group.contains("pg 0")
        )),
        "{:?}",
        m.notes
    );
}
