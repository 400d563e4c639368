//! Sync stalls: planted `.item()`-like syncs are all found, a sync-free
//! trace gives no warning, and each pattern gets its label, call site and cost.

use streamscope_core::analysis::{analyze, render, AnalysisOptions};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_core::*;

#[test]
fn planted_item_syncs_are_all_found() {
    let t = fsdp_like(&SynthOptions {
        ranks: 2,
        target_slices: 20_000,
        item_sync: true,
        ..Default::default()
    });
    let planted = t
        .slices()
        .name()
        .iter()
        .filter(|&&n| t.str(n) == "cudaStreamSynchronize")
        .count();
    assert!(planted >= 4, "generator planted {planted}");
    let r = analyze(&t, &AnalysisOptions::default());
    let mut found = 0;
    for k in &r.ranks {
        assert!(!k.syncs.is_empty(), "rank {} has no sync", k.rank);
        for g in &k.syncs {
            // In the window, every planted sync drains the GPU.
            assert!(g.gpu_idle_us > 0.0, "{g:?}");
        }
        for g in k
            .syncs
            .iter()
            .chain(&k.startup_syncs)
            .chain(&k.after_window_syncs)
        {
            assert_eq!(g.pattern, "item-like", "{g:?}");
            assert_eq!(g.api, "cudaStreamSynchronize");
            assert!(g.host_blocked_us > 0.0, "{g:?}");
            found += g.count as usize;
        }
    }
    assert_eq!(found, planted);
    // One warning per rank: repeats every steady-state step.
    assert_eq!(r.sync_warnings.len(), 2);
    assert!(r
        .sync_warnings
        .iter()
        .all(|w| w.warning.as_deref().is_some_and(|s| s.contains("GPU idle"))));
    let steps_per_rank = r.steps.iter().filter(|s| s.rank == 0).count();
    assert!(r.steps.iter().all(|s| s.syncs == 1), "one sync per step");
    // The generator's forward waits on each all-gather: per step, the first one is late.
    assert!(
        r.steps
            .iter()
            .all(|s| s.prefetch.all_gathers == 8 && s.prefetch.late >= 1),
        "{:?}",
        r.steps[0].prefetch
    );
    assert!(r.steps.iter().all(|s| s.idle_by_stream.len() == 2));
    assert_eq!(
        r.sync_warnings[0].per_step,
        Some(1.0),
        "{} steps",
        steps_per_rank
    );
    let json = render::json(&r);
    for key in [
        "\"pattern\"",
        "\"count\"",
        "\"host_blocked_us\"",
        "\"gpu_idle_us\"",
        "\"where\"",
        "\"slices\"",
    ] {
        assert!(json.contains(key), "{key}");
    }
}

#[test]
fn sync_free_trace_gives_no_warning() {
    let t = fsdp_like(&SynthOptions {
        ranks: 2,
        target_slices: 20_000,
        item_sync: false,
        ..Default::default()
    });
    let r = analyze(&t, &AnalysisOptions::default());
    assert!(r.sync_warnings.is_empty(), "{:?}", r.sync_warnings);
    assert!(r.ranks.iter().all(|k| k.syncs.is_empty()));
    assert!(r
        .ranks
        .iter()
        .all(|k| k.breakdown.overlap_pct.is_some_and(|p| p > 0.0)));
}

struct B {
    t: TraceBuilder,
    host: TrackId,
    s7: TrackId,
    corr: u32,
}

impl B {
    fn new() -> B {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process {
            pid: 1,
            rank: Some(0),
            ..Default::default()
        });
        let d = t.add_device(streamscope_core::synth::h200(p, 0));
        let host = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
        let s7 = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "stream 7",
        );
        B {
            t,
            host,
            s7,
            corr: 1,
        }
    }
    fn api(&mut self, name: &str, s: i64, d: i64, python: Option<&str>) -> (SliceId, u32) {
        let n = self.t.intern(name);
        let mut a = NewSlice::new(self.host, SliceKind::Runtime, n, s, d);
        a.correlation = self.corr;
        if let Some(p) = python {
            let k = self.t.intern("python");
            let v = self.t.intern(p);
            a.args.push((k, ArgValue::Str(v)));
        }
        self.corr += 1;
        (self.t.push_slice(a), self.corr - 1)
    }
    fn gpu(
        &mut self,
        kind: SliceKind,
        name: &str,
        s: i64,
        d: i64,
        corr: u32,
        copy: Option<CopyInfo>,
    ) -> SliceId {
        let n = self.t.intern(name);
        let mut k = NewSlice::new(self.s7, kind, n, s, d);
        k.class = SliceClass::of_gpu_name(kind, name);
        k.correlation = corr;
        k.copy = copy;
        self.t.push_slice(k)
    }
    fn range(&mut self, name: &str, s: i64, d: i64) {
        let n = self.t.intern(name);
        self.t
            .push_slice(NewSlice::new(self.host, SliceKind::Range, n, s, d));
    }
}

fn d2h(bytes: u64) -> Option<CopyInfo> {
    Some(CopyInfo {
        bytes,
        kind: CopyKind::DeviceToHost,
        pageable: true,
    })
}

#[test]
fn patterns_call_sites_and_costs() {
    let mut b = B::new();
    b.range("train", 0, 100_000);
    b.range("loss", 0, 10_000);
    // .item(): 4-byte D2H copy then a stream sync, with a python location.
    let (_, c) = b.api("cudaLaunchKernel", 0, 100, None);
    b.gpu(SliceKind::Kernel, "gemm", 200, 1000, c, None);
    let (_, c) = b.api("cudaMemcpyAsync", 300, 100, None);
    b.gpu(
        SliceKind::Memcpy,
        "Memcpy DtoH (Device -> Pageable)",
        1200,
        10,
        c,
        d2h(4),
    );
    let (item_builder_id, _) = b.api(
        "cudaStreamSynchronize",
        500,
        800,
        Some("train.py:42 (step)"),
    );
    // GPU idle after it: the next kernel starts 5 µs after the sync returned.
    let (_, c) = b.api("cudaLaunchKernel", 6_000, 100, None);
    b.gpu(SliceKind::Kernel, "gemm", 6_300, 1000, c, None);
    // .cpu(): synchronous cudaMemcpy of 4 KB, inside NVTX "loss".
    let (_, c) = b.api("cudaMemcpy", 7_400, 600, None);
    b.gpu(
        SliceKind::Memcpy,
        "Memcpy DtoH (Device -> Pageable)",
        7_400,
        500,
        c,
        d2h(4096),
    );
    // torch.cuda.synchronize() and an event sync outside "loss".
    b.api("cudaDeviceSynchronize", 20_000, 50, None);
    b.api("cudaEventSynchronize", 30_000, 50, None);
    // A Kineto "Context Sync" slice with the same correlation as an API call is not counted twice.
    let (_, c) = b.api("cudaDeviceSynchronize", 40_000, 50, None);
    let n = b.t.intern("Context Sync");
    let mut s = NewSlice::new(b.s7, SliceKind::Sync, n, 40_000, 50);
    s.correlation = c;
    b.t.push_slice(s);
    // cudaEventQuery polls: CUPTI reports it as an "Event Sync" too, but the host does not block.
    let (_, c) = b.api("cudaEventQuery", 50_000, 5, None);
    let n = b.t.intern("Event Sync");
    let mut q = NewSlice::new(b.s7, SliceKind::Sync, n, 50_000, 5);
    q.correlation = c;
    b.t.push_slice(q);
    // A CUPTI stream sync record without its API call (API capture off) counts.
    let n = b.t.intern("Stream Sync");
    b.t.push_slice(NewSlice::new(b.s7, SliceKind::Sync, n, 60_000, 40));
    let t = b.t.clone().finish();
    let r = analyze(&t, &AnalysisOptions::default());
    // The builder's slice ids are its own: find the sync in the trace.
    let item = (t.slices().ids())
        .find(|id| {
            t.slices().start_ns()[id.index()] == 500
                && t.slices().kind()[id.index()] == SliceKind::Runtime
        })
        .expect("the item sync");
    assert_ne!(item, item_builder_id, "finish sorted the slices");
    let syncs = &r.ranks[0].syncs;
    let by = |p: &str| syncs.iter().filter(|g| g.pattern == p).collect::<Vec<_>>();
    let item_g = by("item-like");
    assert_eq!(item_g.len(), 1, "{syncs:?}");
    assert_eq!(item_g[0].where_, "train.py:42 (step)");
    assert_eq!(item_g[0].python, "train.py:42 (step)");
    assert_eq!(item_g[0].nvtx, "train > loss");
    assert_eq!(item_g[0].slices, vec![item]);
    assert_eq!(item_g[0].host_blocked_us, 0.8);
    assert_eq!(
        item_g[0].gpu_idle_us, 5.09,
        "busy when the host began to wait (500): from the drain (the copy ends at 1210) to the next kernel (6300)"
    );
    let cpu = by("cpu-copy");
    assert_eq!(cpu.len(), 1, "{syncs:?}");
    assert_eq!(
        (cpu[0].api.as_str(), cpu[0].where_.as_str()),
        ("cudaMemcpy", "train > loss")
    );
    let dev = by("device-sync");
    assert_eq!(
        dev.iter().map(|g| g.count).sum::<u64>(),
        2,
        "Context Sync deduplicated: {syncs:?}"
    );
    assert_eq!(
        by("event-sync").len(),
        1,
        "cudaEventQuery is not a sync: {syncs:?}"
    );
    let lone = by("stream-sync");
    assert_eq!(
        (lone.len(), lone[0].api.as_str()),
        (1, "Stream Sync"),
        "{syncs:?}"
    );
    // A warning means a cost: the device syncs repeat but wait on an idle
    // GPU (0 µs), and the item-like sync's 5 µs stay under the 50 µs
    // threshold.
    assert!(dev.iter().all(|g| g.gpu_idle_us == 0.0), "{syncs:?}");
    assert!(r.sync_warnings.is_empty(), "{:?}", r.sync_warnings);
    // A low threshold turns the item-like sync into a warning, and only it.
    let low = analyze(
        &b.t.clone().finish(),
        &AnalysisOptions {
            sync_gpu_idle_threshold_us: 1.0,
            ..Default::default()
        },
    );
    assert_eq!(low.sync_warnings.len(), 1, "{:?}", low.sync_warnings);
    let item_w = low.sync_warnings.iter().find(|w| w.pattern == "item-like");
    assert!(item_w
        .and_then(|w| w.warning.as_deref())
        .is_some_and(|w| w.contains("GPU idle")));
}

#[test]
fn one_idle_gap_is_never_charged_twice() {
    let mut b = B::new();
    let (_, c) = b.api("cudaLaunchKernel", 0, 10, None);
    b.gpu(SliceKind::Kernel, "gemm", 20, 100, c, None);
    b.api("cudaDeviceSynchronize", 50, 150, None); // ends at 200, GPU idle since 120
    b.api("cudaEventSynchronize", 300, 100, None); // ends at 400
    let (_, c) = b.api("cudaLaunchKernel", 900, 10, None);
    b.gpu(SliceKind::Kernel, "gemm", 1_000, 100, c, None);
    let r = analyze(&b.t.clone().finish(), &AnalysisOptions::default());
    let idle = |p: &str| {
        r.ranks[0]
            .syncs
            .iter()
            .find(|g| g.pattern == p)
            .map(|g| g.gpu_idle_us)
    };
    assert_eq!(
        idle("device-sync"),
        Some(0.88),
        "busy when it began: from the drain (120) to the next kernel (1000)"
    );
    assert_eq!(
        idle("event-sync"),
        Some(0.0),
        "it waited on an idle GPU: the gap is the device sync's, charged once"
    );
}

#[test]
fn kineto_python_stack_gives_the_call_site() {
    let mut b = B::new();
    for (name, s, d) in [
        ("train.py(42): step", 0, 10_000),
        ("aten::item", 100, 2_000),
        ("aten::_local_scalar_dense", 150, 1_900),
    ] {
        let n = b.t.intern(name);
        b.t.push_slice(NewSlice::new(b.host, SliceKind::CpuOp, n, s, d));
    }
    let (_, c) = b.api("cudaMemcpyAsync", 200, 50, None);
    b.gpu(
        SliceKind::Memcpy,
        "Memcpy DtoH (Device -> Pageable)",
        300,
        5,
        c,
        d2h(4),
    );
    b.api("cudaStreamSynchronize", 260, 100, None);
    let r = analyze(&b.t.clone().finish(), &AnalysisOptions::default());
    let g = &r.ranks[0].syncs;
    assert_eq!(g.len(), 1, "{g:?}");
    assert_eq!(g[0].pattern, "item-like");
    assert_eq!(
        g[0].python, "train.py:42 (step)",
        "the user's frame, not torch's"
    );
    assert_eq!(g[0].where_, "train.py:42 (step)");
    assert_eq!(g[0].op, "aten::_local_scalar_dense");
}

#[test]
fn a_wait_on_work_launched_but_not_started_is_a_wait_on_a_busy_gpu() {
    // The host launches a copy, then waits; the GPU, idle at that instant,
    // starts the copy a moment later: the host waited on the device.
    let mut b = B::new();
    let (_, c) = b.api("cudaLaunchKernel", 0, 10, None);
    b.gpu(SliceKind::Kernel, "gemm", 20, 100, c, None);
    let (_, c) = b.api("cudaMemcpyAsync", 500, 10, None);
    b.gpu(
        SliceKind::Memcpy,
        "Memcpy DtoH (Device -> Pinned)",
        520,
        30,
        c,
        d2h(4),
    );
    b.api("cudaStreamSynchronize", 512, 100, None); // idle at 512, copy pending
    let (_, c) = b.api("cudaLaunchKernel", 2_000, 10, None);
    b.gpu(SliceKind::Kernel, "gemm", 2_020, 100, c, None);
    // A wait with nothing pending costs nothing.
    b.api("cudaDeviceSynchronize", 3_000, 50, None);
    let (_, c) = b.api("cudaLaunchKernel", 9_000, 10, None);
    b.gpu(SliceKind::Kernel, "gemm", 9_020, 100, c, None);
    let r = analyze(&b.t.clone().finish(), &AnalysisOptions::default());
    let g = &r.ranks[0].syncs;
    let item = g.iter().find(|g| g.pattern == "item-like");
    assert_eq!(
        item.map(|g| g.gpu_idle_us),
        Some(1.47),
        "from the copy's end (550) to the next kernel (2020): {g:?}"
    );
    let dev = g.iter().find(|g| g.pattern == "device-sync");
    assert_eq!(dev.map(|g| g.gpu_idle_us), Some(0.0), "{g:?}");
}
