//! Each metric on hand-built traces: touching and nested intervals, several
//! streams, zero-length kernels, no communication, a rank without GPU
//! events, idle categories, steps, stalls, prefetch slack, collectives.

use streamscope_core::analysis::{analyze, render, AnalysisOptions, WindowRule};
use streamscope_core::*;

const AG: &str = "ncclDevKernel_AllGather_RING_LL(x)";
const AR: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)";

/// One rank: a host thread, compute streams 7 and 8, a NCCL stream 20.
struct B {
    t: TraceBuilder,
    host: TrackId,
    s7: TrackId,
    s8: TrackId,
    s20: TrackId,
    corr: u32,
}

impl B {
    fn new() -> B {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process {
            pid: 1,
            rank: Some(0),
            world_size: Some(1),
            ..Default::default()
        });
        B::add_rank(t, p)
    }

    fn add_rank(mut t: TraceBuilder, p: ProcessId) -> B {
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
            "stream 7",
        );
        let s8 = t.add_track(
            p,
            Some(g),
            TrackKind::Stream {
                device: d,
                stream: 8,
            },
            "stream 8",
        );
        let s20 = t.add_track(
            p,
            Some(g),
            TrackKind::Stream {
                device: d,
                stream: 20,
            },
            "stream 20",
        );
        B {
            t,
            host,
            s7,
            s8,
            s20,
            corr: 1,
        }
    }

    /// A kernel named `name`, launched by a 1 ns cudaLaunchKernel at `launch_ns` when given.
    fn kernel(
        &mut self,
        tr: TrackId,
        name: &str,
        s: i64,
        d: i64,
        launch_ns: Option<i64>,
    ) -> SliceId {
        let n = self.t.intern(name);
        let mut k = NewSlice::new(tr, SliceKind::Kernel, n, s, d);
        k.class = SliceClass::of_gpu_name(SliceKind::Kernel, name);
        if let Some(l) = launch_ns {
            k.correlation = self.corr;
            let api = self.t.intern("cudaLaunchKernel");
            let mut a = NewSlice::new(self.host, SliceKind::Runtime, api, l, 1);
            a.correlation = self.corr;
            self.t.push_slice(a);
            self.corr += 1;
        }
        self.t.push_slice(k)
    }

    fn range(&mut self, name: &str, s: i64, d: i64) -> SliceId {
        let n = self.t.intern(name);
        self.t
            .push_slice(NewSlice::new(self.host, SliceKind::Range, n, s, d))
    }

    fn report(&self) -> streamscope_core::analysis::Report {
        analyze(&self.t.clone().finish(), &AnalysisOptions::default())
    }
}

#[test]
fn touching_nested_and_several_streams() {
    let mut b = B::new();
    b.kernel(b.s20, AR, 0, 150, None);
    b.kernel(b.s7, "gemm", 100, 100, None);
    b.kernel(b.s7, "gemm", 200, 100, None); // touches the first
    b.kernel(b.s8, "gemm_small", 120, 30, None); // nested in the first, other stream
    let r = b.report();
    let k = &r.ranks[0];
    // No steps: the headline starts at the first collective.
    assert_eq!(k.window.rule, WindowRule::FromFirstCollective);
    assert_eq!(k.window.start_ns, Some(0));
    assert_eq!(k.breakdown.compute_us, 0.2);
    assert_eq!(k.breakdown.comm_us, 0.15);
    assert_eq!(k.breakdown.overlap_us, 0.05);
    assert_eq!(k.breakdown.exposed_comm_us, 0.1);
    let ov = k.breakdown.overlap_pct.unwrap_or(-1.0);
    assert!((ov - 100.0 / 3.0).abs() < 1e-9, "{ov}");
    // min(|C|, |M|) = 150 ns: efficiency equals overlap % here.
    assert!((k.breakdown.overlap_efficiency_pct.unwrap_or(-1.0) - 100.0 / 3.0).abs() < 1e-9);
    assert_eq!(k.breakdown.kernel_time_us, 0.3);
    assert_eq!(k.breakdown.idle_pct, Some(0.0));
    assert!((k.breakdown.non_compute_us - 0.1).abs() < 1e-12);
    assert_eq!(k.breakdown.gpu_events, 4);
}

#[test]
fn zero_length_kernels_add_no_time() {
    let mut b = B::new();
    b.kernel(b.s20, AR, 0, 0, None);
    b.kernel(b.s7, "gemm", 0, 100, None);
    b.kernel(b.s7, "empty", 400, 0, None);
    let k = &b.report().ranks[0];
    assert_eq!(k.breakdown.compute_us, 0.1);
    assert_eq!(k.breakdown.comm_us, 0.0);
    assert_eq!(
        k.breakdown.overlap_pct, None,
        "zero communication time: undefined, not NaN"
    );
    assert_eq!(
        k.breakdown.kernel_time_us, 0.4,
        "kernel time runs to the last end, zero-length or not"
    );
    assert_eq!(k.breakdown.idle_pct, Some(75.0));
}

#[test]
fn no_communication_at_all() {
    let mut b = B::new();
    b.kernel(b.s7, "gemm", 0, 100, None);
    b.kernel(b.s8, "gemm", 50, 100, None);
    let r = b.report();
    let k = &r.ranks[0];
    assert_eq!(
        (k.breakdown.overlap_pct, k.breakdown.overlap_efficiency_pct),
        (None, None)
    );
    assert_eq!(k.breakdown.exposed_comm_us, 0.0);
    assert_eq!(k.breakdown.compute_pct, Some(100.0));
    assert!(r.collectives.is_empty());
    let json = render::json(&r);
    assert!(json.contains("\"overlap_pct\": null"), "{json}");
    assert!(!json.contains("NaN"));
}

#[test]
fn rank_without_gpu_events_is_reported_as_such() {
    let mut b = B::new();
    b.kernel(b.s7, "gemm", 0, 100, None);
    let mut t = b.t;
    let p = t.add_process(Process {
        pid: 2,
        rank: Some(1),
        ..Default::default()
    });
    let host = t.add_track(p, None, TrackKind::Thread { tid: 2 }, "main");
    let n = t.intern("aten::add");
    t.push_slice(NewSlice::new(host, SliceKind::CpuOp, n, 0, 50));
    let r = analyze(&t.clone().finish(), &AnalysisOptions::default());
    // A process without GPU work (a launcher) is not a rank: it is listed
    // under other_processes.
    assert_eq!(r.ranks.len(), 1);
    assert_eq!(r.ranks[0].rank, 0);
    assert_eq!(r.other_processes.len(), 1);
    let other = &r.other_processes[0];
    assert_eq!((other.pid, other.rank, other.host_slices), (2, Some(1), 1));
    let text = render::text(&r);
    assert!(text.contains("other processes"), "{text}");
    assert!(text.contains("pid 2"), "{text}");
    assert!(!text.contains("NaN") && !render::json(&r).contains("NaN"));
    assert!(render::json(&r).contains("\"other_processes\""));
    // --rank filters, and never picks the launcher.
    let only = analyze(
        &t.clone().finish(),
        &AnalysisOptions {
            rank: Some(1),
            ..Default::default()
        },
    );
    assert!(only.ranks.is_empty());
}

#[test]
fn idle_categories_per_stream() {
    let mut b = B::new();
    b.kernel(b.s7, "a", 0, 100, Some(-10));
    b.kernel(b.s7, "b", 200, 100, Some(150)); // launched after a ended: host wait 100
    b.kernel(b.s7, "c", 310, 90, Some(100)); // queued, gap 10 < 30 µs: kernel wait
    b.kernel(b.s7, "d", 40_400, 100, Some(200)); // queued, gap 40 µs: other
    let k = &b.report().ranks[0];
    let s = &k.idle_by_stream[0];
    assert_eq!(s.at.stream(), Some(7));
    assert_eq!(
        (s.host_wait_us, s.kernel_wait_us, s.other_us),
        (0.1, 0.01, 40.0)
    );
    assert!((s.total_us - 40.11).abs() < 1e-9);
}

#[test]
fn comm_stall_and_late_prefetch() {
    let mut b = B::new();
    b.kernel(b.s20, AR, 0, 0, None); // the headline starts at the first collective
    b.kernel(b.s7, "gemm", 0, 100, Some(0));
    b.kernel(b.s20, AG, 50, 250, Some(1)); // ends at 300
    b.kernel(b.s7, "gemm", 302, 100, Some(2)); // queued long before; starts right after the all-gather
    b.kernel(b.s20, AG, 402, 50, Some(3)); // ends at 452
    b.kernel(b.s7, "gemm", 20_000, 100, Some(19_990)); // launched late: not a stall
    let k = &b.report().ranks[0];
    assert_eq!(k.comm_stalls.count, 1);
    assert_eq!(k.comm_stalls.total_us, 0.202);
    assert_eq!(k.comm_stalls.by_stream[0].at.stream(), Some(7));
    assert_eq!(k.prefetch.all_gathers, 2);
    assert_eq!(k.prefetch.late, 1);
    // Late by how long its consumer waited: from the end of the previous
    // compute kernel (100) to the consumer's start (302).
    assert_eq!(k.prefetch.late_us, 0.202);
    assert_eq!(k.prefetch.min_us, Some(0.0));
    let slacks: Vec<f64> = k.prefetch.per_all_gather.iter().map(|p| p.1).collect();
    assert_eq!(slacks, vec![0.0, 19.548]);
}

#[test]
fn collectives_with_sizes_and_bus_bandwidth() {
    let mut b = B::new();
    let k = b.kernel(b.s20, AR, 0, 1000, None);
    let keys = ["In msg nelems", "Out msg nelems", "Group size", "dtype"].map(|s| b.t.intern(s));
    let f = b.t.intern("Float");
    let args = vec![
        (keys[0], ArgValue::Int(1000)),
        (keys[1], ArgValue::Int(1000)),
        (keys[2], ArgValue::Int(4)),
        (keys[3], ArgValue::Str(f)),
    ];
    b.t.set_slice_args(k, args);
    b.kernel(b.s20, AG, 2000, 500, None);
    let r = b.report();
    let ar = r
        .collectives
        .iter()
        .find(|c| c.collective == "AllReduce")
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(
        (ar.count, ar.algorithm.as_str(), ar.protocol.as_str()),
        (1, "RING", "LL")
    );
    assert_eq!(ar.bytes, Some(4000));
    let alg = ar.alg_bw_gbps.unwrap_or(0.0);
    assert!((alg - 4.0).abs() < 1e-9, "{alg}");
    let bus = ar.bus_bw_gbps.unwrap_or(0.0);
    assert!((bus - 6.0).abs() < 1e-9, "2(n-1)/n = 1.5 for n = 4: {bus}");
    let ag = r
        .collectives
        .iter()
        .find(|c| c.collective == "AllGather")
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!((ag.count, ag.bytes, ag.bus_bw_gbps), (1, None, None));
    assert_eq!(ag.mean_us, 0.5);
}

#[test]
fn hta_window_drops_the_last_step_by_correlation() {
    let mut b = B::new();
    b.range("ProfilerStep#1", 0, 1000);
    b.range("ProfilerStep#2", 1000, 1000);
    b.kernel(b.s7, "gemm", 500, 400, Some(10));
    b.kernel(b.s20, AR, 800, 400, Some(20));
    // Launched in the last step, runs on the GPU later: dropped from the headline.
    b.kernel(b.s7, "gemm", 1300, 500, Some(1100));
    let r = b.report();
    let k = &r.ranks[0];
    assert_eq!(k.window.rule, WindowRule::HtaSteps);
    assert_eq!(k.window.steps, vec![1]);
    assert_eq!(k.step_source, "ProfilerStep");
    assert_eq!(k.breakdown.gpu_events, 2);
    assert_eq!(k.breakdown.overlap_pct, Some(25.0));
    // Every step still gets a row, by launch.
    assert_eq!(r.steps.len(), 2);
    assert_eq!(r.steps[1].breakdown.gpu_events, 1);
    assert_eq!(r.steps[1].breakdown.compute_us, 0.5);
    // --steps 2..2 picks the last step only.
    let sel = analyze(
        &b.t.clone().finish(),
        &AnalysisOptions {
            steps: Some((2, 2)),
            ..Default::default()
        },
    );
    assert_eq!(sel.ranks[0].window.rule, WindowRule::SelectedSteps);
    assert_eq!(sel.ranks[0].breakdown.gpu_events, 1);
    assert_eq!(sel.ranks[0].breakdown.compute_us, 0.5);
}

#[test]
fn nvtx_step_ranges() {
    let mut b = B::new();
    for s in 0..3i64 {
        b.range(&format!("step {s}"), s * 1000, 900);
        b.kernel(b.s7, "gemm", s * 1000 + 100, 200, Some(s * 1000 + 10));
    }
    let r = b.report();
    assert_eq!(r.ranks[0].step_source, "nvtx");
    assert_eq!(
        r.steps.iter().map(|s| s.step).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert!(r.steps.iter().all(|s| s.breakdown.compute_us == 0.2));
    // Per-step idle categories: the gap before each step's only kernel is
    // outside the step's own work, so each step's stream shows no idle.
    assert!(r
        .steps
        .iter()
        .all(|s| s.idle_by_stream.len() == 1 && s.idle_by_stream[0].total_us == 0.0));
}

#[test]
fn steps_from_repetition() {
    let mut b = B::new();
    let mut ts = 0;
    for _step in 0..4 {
        for name in ["embed", "gemm", "gemm", "gelu", "optimizer"] {
            b.kernel(b.s7, name, ts, 50, None);
            ts += 100;
        }
    }
    let r = b.report();
    assert_eq!(r.ranks[0].step_source, "repetition");
    assert_eq!(r.steps.len(), 4);
    assert_eq!(r.steps[1].start_ns, 500);
    assert!(
        r.steps.iter().all(|s| s.breakdown.gpu_events == 5),
        "{:?}",
        r.steps
    );
}

#[test]
fn sizes_from_the_enclosing_record_param_comms() {
    let mut b = B::new();
    let op = b.t.intern("record_param_comms");
    let keys = [
        "Collective name",
        "In msg nelems",
        "Out msg nelems",
        "Group size",
        "dtype",
    ]
    .map(|s| b.t.intern(s));
    let (name, bf16) = (b.t.intern("_reduce_scatter_base"), b.t.intern("BFloat16"));
    let mut rpc = NewSlice::new(b.host, SliceKind::CpuOp, op, 0, 100);
    rpc.args = vec![
        (keys[0], ArgValue::Str(name)),
        (keys[1], ArgValue::Int(4096)),
        (keys[2], ArgValue::Int(1024)),
        (keys[3], ArgValue::Int(8)),
        (keys[4], ArgValue::Str(bf16)),
    ];
    b.t.push_slice(rpc);
    b.kernel(
        b.s20,
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)",
        200,
        1000,
        Some(10),
    );
    // Launched outside any record_param_comms: no size.
    b.kernel(
        b.s20,
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)",
        2000,
        1000,
        Some(500),
    );
    let r = b.report();
    let rs: Vec<_> = r
        .collectives
        .iter()
        .filter(|c| c.collective == "ReduceScatter")
        .collect();
    assert_eq!(rs.len(), 1, "{:?}", r.collectives);
    let c = rs[0];
    assert_eq!((c.count, c.sized, c.bytes), (2, 1, Some(8192)));
    assert_eq!((c.dtype.as_str(), c.reduce_op.as_str()), ("bf16", "Sum"));
    let alg = c.alg_bw_gbps.unwrap_or(0.0);
    let bus = c.bus_bw_gbps.unwrap_or(0.0);
    assert!(
        (alg - 8.192).abs() < 1e-9 && (bus - 8.192 * 7.0 / 8.0).abs() < 1e-9,
        "{alg} {bus}"
    );
}

#[test]
fn repetition_prefers_the_step_over_the_layer_period() {
    let mut b = B::new();
    let mut ts = 0;
    for _step in 0..4 {
        for name in [
            "layer_gemm",
            "layer_act",
            "layer_gemm",
            "layer_act",
            "layer_gemm",
            "layer_act",
            "adam",
        ] {
            b.kernel(b.s7, name, ts, 50, None);
            ts += 100;
        }
    }
    let r = b.report();
    assert_eq!(r.ranks[0].step_source, "repetition");
    assert_eq!(r.steps.len(), 4, "{:?}", r.steps);
    assert_eq!(r.steps[1].start_ns, 700);
}

#[test]
fn prefetch_exactly_on_time_is_late_when_compute_waited() {
    let mut b = B::new();
    b.kernel(b.s20, AR, 0, 0, None); // the headline starts at the first collective
    b.kernel(b.s7, "gemm", 0, 100, Some(0));
    b.kernel(b.s20, AG, 50, 150, Some(1)); // ends at 200
    b.kernel(b.s7, "gemm", 200, 100, Some(2)); // starts at its end: compute had waited since 100
    b.kernel(b.s20, AG, 250, 50, Some(3)); // ends at 300 while compute runs until 300...
    b.kernel(b.s7, "gemm", 300, 100, Some(4)); // ...and goes on back to back: not waiting
    let k = &b.report().ranks[0];
    assert_eq!(k.prefetch.all_gathers, 2);
    assert_eq!(k.prefetch.late, 1);
    assert_eq!(
        k.prefetch
            .per_all_gather
            .iter()
            .map(|p| p.1)
            .collect::<Vec<_>>(),
        vec![0.0, 0.0]
    );
}

#[test]
fn empty_trace_and_gpu_work_off_stream_tracks() {
    let r = analyze(&Trace::default(), &AnalysisOptions::default());
    assert!(r.ranks.is_empty() && r.steps.is_empty());
    assert!(render::text(&r).starts_with("streamscope report: 0 rank(s)"));
    assert!(render::markdown(&r).contains("| rank |"));
    // A foreign trace: kernels on an "Other" track still count.
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process::default());
    let tr = t.add_track(p, None, TrackKind::Other, "gpu?");
    let n = t.intern("gemm");
    let mut k = NewSlice::new(tr, SliceKind::Kernel, n, 0, 1000);
    k.class = SliceClass::Compute;
    t.push_slice(k);
    let r = analyze(&t.clone().finish(), &AnalysisOptions::default());
    assert_eq!(r.ranks[0].breakdown.compute_us, 1.0);
    assert_eq!(r.ranks[0].idle_by_stream.len(), 1);
    assert!(r.occupancy.is_empty(), "no device record");
}
