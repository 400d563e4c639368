//! Steps of CUDA-graph jobs and of loops whose host runs ahead: graph
//! launches as steps (also after the optimizer-step marks stop), step
//! times on the GPU's clock, and the repetition rule across an extra copy
//! every N steps (docs/METRICS.md, "Steps").

use streamscope_core::analysis::{analyze, AnalysisOptions, Report, WindowRule};
use streamscope_core::diagnostic::Kind;
use streamscope_core::protocol::{GRAPH_ID_ARG, OPTIMIZER_STEP_RANGE};
use streamscope_core::*;

const US: i64 = 1_000;
const MS: i64 = 1_000_000;

struct Job {
    t: TraceBuilder,
    host: TrackId,
    stream: TrackId,
    corr: u32,
}

impl Job {
    fn new() -> Job {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process {
            pid: 100,
            rank: Some(0),
            ..Default::default()
        });
        let d = t.add_device(streamscope_core::synth::h200(p, 0));
        let host = t.add_track(p, None, TrackKind::Thread { tid: 100 }, "main");
        let stream = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "compute",
        );
        Job {
            t,
            host,
            stream,
            corr: 1,
        }
    }

    fn call(&mut self, api: &str, at: i64, dur: i64) -> u32 {
        let c = self.corr;
        self.corr += 1;
        let n = self.t.intern(api);
        let mut a = NewSlice::new(self.host, SliceKind::Runtime, n, at, dur);
        a.correlation = c;
        self.t.push_slice(a);
        c
    }

    fn gpu(
        &mut self,
        kind: SliceKind,
        name: &str,
        corr: u32,
        start: i64,
        dur: i64,
        graph: Option<u64>,
    ) {
        let n = self.t.intern(name);
        let mut k = NewSlice::new(self.stream, kind, n, start, dur);
        k.class = SliceClass::of_gpu_name(kind, name);
        k.correlation = corr;
        if let Some(g) = graph {
            let key = self.t.intern(GRAPH_ID_ARG);
            k.args.push((key, ArgValue::UInt(g)));
        }
        self.t.push_slice(k);
    }

    /// An eager kernel launched at `at`, running at `start`.
    fn kernel(&mut self, name: &str, at: i64, start: i64, dur: i64) {
        let c = self.call("cudaLaunchKernel", at, 5 * US);
        self.gpu(SliceKind::Kernel, name, c, start, dur, None);
    }

    /// One launch of graph `graph` at `at` whose `names` run back to back
    /// from `start`, each `each` long; returns the GPU end.
    fn replay(
        &mut self,
        graph: Option<u64>,
        names: &[&str],
        at: i64,
        start: i64,
        each: i64,
    ) -> i64 {
        let c = self.call("cudaGraphLaunch", at, 10 * US);
        let mut t = start;
        for n in names {
            self.gpu(SliceKind::Kernel, n, c, t, each, graph);
            t += each + 2 * US;
        }
        t
    }

    fn range(&mut self, name: &str, at: i64, dur: i64) {
        let n = self.t.intern(name);
        self.t
            .push_slice(NewSlice::new(self.host, SliceKind::Range, n, at, dur));
    }

    fn report(&self) -> Report {
        analyze(&self.t.clone().finish(), &AnalysisOptions::default())
    }
}

const STEP: [&str; 6] = [
    "gemm_fwd", "gelu", "gemm_fwd", "gemm_bwd", "gemm_bwd", "adamw",
];

/// Warm-up steps run eagerly, each ended by an optimizer-step mark; a
/// capture (a mark, no GPU work); then `replays` launches of the captured
/// graph, `period` apart on the host, each running ~`period` of GPU work,
/// the loss read every 10 replays. Returns the job.
fn whole_step_graph(replays: usize, period: i64, graph_id: Option<u64>) -> Job {
    let mut j = Job::new();
    let mut t = 10 * MS;
    for _ in 0..3 {
        let mut g = t + 50 * US;
        for (k, n) in STEP.iter().enumerate() {
            j.kernel(n, t + k as i64 * 20 * US, g, 3 * MS);
            g += 3 * MS + 20 * US;
        }
        j.range(OPTIMIZER_STEP_RANGE, t + 100 * US, 50 * US);
        t = g + MS;
    }
    // Capture: the optimizer runs once more on the host, nothing on the GPU.
    j.range(OPTIMIZER_STEP_RANGE, t + 2 * MS, 50 * US);
    t += 20 * MS;
    let each = (period - 12 * US * STEP.len() as i64) / STEP.len() as i64;
    for r in 0..replays {
        let at = t + r as i64 * period;
        let end = j.replay(graph_id, &STEP, at, at + 30 * US, each);
        if (r + 1) % 10 == 0 {
            let c = j.call("cudaMemcpyAsync", end, 40 * US);
            j.gpu(
                SliceKind::Memcpy,
                "Memcpy DtoH (Device -> Pageable)",
                c,
                end,
                3 * US,
                None,
            );
        }
    }
    j
}

fn median(r: &Report) -> f64 {
    r.median_step_us(0).expect("steps") / 1000.0
}

#[test]
fn whole_step_graph_replays_are_the_steps() {
    for graph_id in [Some(7), None] {
        let j = whole_step_graph(30, 10 * MS, graph_id);
        let r = j.report();
        let k = &r.ranks[0];
        let what = format!("graph id {graph_id:?}");
        assert_eq!(k.step_source, "graph-launch", "{what}");
        // 3 warm-up steps, the capture, then one step per replay.
        assert_eq!(r.steps.len(), 4 + 30, "{what}");
        let sources: Vec<&str> = r.steps.iter().map(|s| s.source.as_str()).collect();
        assert!(
            sources[..4].iter().all(|s| *s == "optimizer-step"),
            "{sources:?}"
        );
        assert!(
            sources[4..].iter().all(|s| *s == "graph-launch"),
            "{sources:?}"
        );
        // Graph launches and GPU time by graphs against eagerly, per step.
        assert!(r.steps[..4]
            .iter()
            .all(|s| s.graph_launches == 0 && s.graph_gpu_us == 0.0));
        for s in &r.steps[4..] {
            assert_eq!(s.graph_launches, 1, "{what}: step {}", s.step);
            assert!(s.graph_gpu_us > 9_000.0, "{what}: {s:?}");
            assert!(s.eager_gpu_us < 10.0, "{what}: {s:?}");
        }
        assert!(r.steps[0].eager_gpu_us > 17_000.0, "{what}");
        // The steady state: the replays after the first.
        assert_eq!(k.window.rule, WindowRule::SteadySteps, "{what}");
        assert_eq!(k.window.steps, (5..34).collect::<Vec<i64>>(), "{what}");
        let m = median(&r);
        assert!((m - 10.0).abs() < 0.05, "{what}: median step {m} ms");
        // The GPU is busy but for the gaps between kernels: not warm-up idle.
        let idle = k.breakdown.idle_pct.expect("idle");
        assert!(idle < 2.0, "{what}: idle {idle} %");
    }
}

#[test]
fn a_host_running_ahead_gets_gpu_step_times_and_a_note() {
    let mut j = Job::new();
    // 20 launches 1 ms apart on the host, each 8 ms of GPU work: the GPU
    // runs them back to back.
    let mut gpu = 5 * MS;
    for r in 0..20 {
        let at = MS + r * MS;
        gpu = j.replay(Some(3), &STEP, at, gpu.max(at + 30 * US), 8 * MS / 6) + 10 * US;
    }
    let r = j.report();
    assert_eq!(r.ranks[0].step_source, "graph-launch");
    let m = median(&r);
    assert!((m - 8.08).abs() < 0.1, "median step {m} ms");
    let host: Vec<f64> = r.steps[..19].iter().map(|s| s.host_interval_us).collect();
    assert!(host.iter().all(|&h| (h - 1000.0).abs() < 1.0), "{host:?}");
    let note = r
        .diagnostics
        .iter()
        .find(|d| d.kind == Kind::HostRunsAhead)
        .expect("a host_runs_ahead note");
    assert!(note.count >= 10, "{note:?}");
}

#[test]
fn forward_and_backward_graphs_step_at_the_forward() {
    let mut j = Job::new();
    for r in 0..12 {
        let t = MS + r * 10 * MS;
        // No graph ids (as in a Kineto trace): graphs known by their work.
        let end = j.replay(None, &["gemm_fwd", "gelu", "gemm_fwd"], t, t + 50 * US, MS);
        let end = j.replay(None, &STEP, t + 100 * US, end + 10 * US, MS);
        j.kernel("adamw_eager", t + 200 * US, end + 10 * US, 500 * US);
    }
    let r = j.report();
    assert_eq!(r.ranks[0].step_source, "graph-launch");
    assert_eq!(r.steps.len(), 12);
    // Each step starts at its forward graph's launch.
    for (k, s) in r.steps.iter().enumerate() {
        assert_eq!(s.start_ns, MS + k as i64 * 10 * MS, "step {k}");
        assert_eq!(s.breakdown.gpu_events, 3 + 6 + 1, "step {k}");
    }
}

#[test]
fn repetition_holds_across_a_copy_every_ten_steps() {
    let mut j = Job::new();
    let mut t = MS;
    for s in 0..40 {
        for n in ["a", "b", "c", "d", "b"] {
            j.kernel(n, t - 500 * US, t, 200 * US);
            t += 210 * US;
        }
        if s % 10 == 9 {
            let c = j.call("cudaMemcpyAsync", t, 20 * US);
            j.gpu(
                SliceKind::Memcpy,
                "Memcpy DtoH (Device -> Pageable)",
                c,
                t,
                5 * US,
                None,
            );
            t += 10 * US;
        }
        t += 300 * US;
    }
    let r = j.report();
    assert_eq!(r.ranks[0].step_source, "repetition");
    assert!(r.steps.len() >= 38, "{} steps", r.steps.len());
    let m = median(&r);
    assert!((m - 1.35).abs() < 0.02, "median step {m} ms");
}

/// Two ranks whose whole step, NCCL all-reduce included, is one CUDA graph
/// (DDP/FSDP captured in a graph): the replays are the steps on both
/// ranks, the NCCL kernels run by the graphs are matched across ranks (no
/// NCCL plugin records come from replays: by stream and kind in order),
/// and the rank whose host launches late is the straggler.
#[test]
fn nccl_inside_graphs_is_matched_across_ranks() {
    let mut t = TraceBuilder::new();
    let mut tracks = Vec::new();
    for r in 0..2u32 {
        let p = t.add_process(Process {
            pid: 100 + r,
            rank: Some(r),
            ..Default::default()
        });
        let d = t.add_device(streamscope_core::synth::h200(p, r));
        let host = t.add_track(p, None, TrackKind::Thread { tid: 100 + r }, "main");
        let mk = |t: &mut TraceBuilder, s: u32, n: &str| {
            t.add_track(
                p,
                None,
                TrackKind::Stream {
                    device: d,
                    stream: s,
                },
                n,
            )
        };
        let compute = mk(&mut t, 7, "compute");
        let comm = mk(&mut t, 20, "nccl");
        tracks.push((host, compute, comm));
    }
    let (launch, gemm, ar) = (
        t.intern("cudaGraphLaunch"),
        t.intern("gemm_bwd"),
        t.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    );
    let key = t.intern(GRAPH_ID_ARG);
    let mut corr = 1u32;
    for step in 0..12i64 {
        let t0 = MS + step * 10 * MS;
        for (r, &(host, compute, comm)) in tracks.iter().enumerate() {
            // Rank 1's host launches each replay 1 ms late: rank 0's
            // all-reduce waits for it.
            let late = r as i64 * MS;
            let mut a = NewSlice::new(host, SliceKind::Runtime, launch, t0 + late, 10 * US);
            a.correlation = corr;
            t.push_slice(a);
            let g0 = t0 + late + 50 * US;
            let mut k = NewSlice::new(compute, SliceKind::Kernel, gemm, g0, 6 * MS);
            k.class = SliceClass::Compute;
            k.correlation = corr;
            k.args.push((key, ArgValue::UInt(1)));
            t.push_slice(k);
            // The all-reduce starts with the backward; it ends when both
            // ranks are in, plus the transfer.
            let ar_start = t0 + late + 1_050 * US;
            let ar_end = t0 + MS + 1_050 * US + 2 * MS;
            let mut c = NewSlice::new(comm, SliceKind::Kernel, ar, ar_start, ar_end - ar_start);
            c.class = SliceClass::Communication;
            c.correlation = corr;
            c.args.push((key, ArgValue::UInt(1)));
            t.push_slice(c);
            corr += 1;
        }
    }
    let r = analyze(&t.finish(), &AnalysisOptions::default());
    assert_eq!(r.ranks.len(), 2);
    for k in &r.ranks {
        assert_eq!(k.step_source, "graph-launch", "rank {}", k.rank);
        let steps = r.steps.iter().filter(|s| s.rank == k.rank).count();
        assert_eq!(steps, 12, "rank {}", k.rank);
        // The all-reduce runs under the backward GEMM for the most part.
        let o = k.breakdown.overlap_pct.expect("overlap");
        assert!(o > 50.0, "rank {}: overlap {o}", k.rank);
    }
    assert_eq!(r.cross_rank.comm_kernels, 24);
    assert_eq!(r.cross_rank.matched_kernels, 24);
    let steady: Vec<&streamscope_core::analysis::StepReport> = r
        .steps
        .iter()
        .filter(|s| s.rank == 0 && s.step >= 1)
        .collect();
    assert!(
        steady.iter().all(|s| s.straggler_rank == Some(1)),
        "{:?}",
        steady.iter().map(|s| s.straggler_rank).collect::<Vec<_>>()
    );
}
