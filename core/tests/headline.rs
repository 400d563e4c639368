//! The report's headline and top kernels on small built traces: the
//! launching Python line (the collector's argument, else the Kineto
//! python_function around the launch, user code first), shares and order.

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::*;

/// One rank: kernels (name, start, end, launch call (start, python arg),
/// enclosing python frames) on one stream.
struct Built {
    t: TraceBuilder,
    thread: TrackId,
    stream: TrackId,
    corr: u32,
}

impl Built {
    fn new() -> Built {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process {
            pid: 1,
            rank: Some(0),
            ..Default::default()
        });
        let d = t.add_device(Device {
            process: p,
            name: "GPU".into(),
            ..Default::default()
        });
        let stream = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "s7",
        );
        let thread = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
        Built {
            t,
            thread,
            stream,
            corr: 0,
        }
    }

    fn frame(&mut self, name: &str, start: i64, end: i64) {
        let n = self.t.intern(name);
        self.t.push_slice(NewSlice::new(
            self.thread,
            SliceKind::CpuOp,
            n,
            start,
            end - start,
        ));
    }

    /// A kernel `[start, end)` launched at `launch` (python arg `py`).
    fn kernel(&mut self, name: &str, launch: i64, start: i64, end: i64, py: Option<&str>) {
        self.corr += 1;
        let api = self.t.intern("cudaLaunchKernel");
        let mut l = NewSlice::new(self.thread, SliceKind::Runtime, api, launch, 5);
        l.correlation = self.corr;
        if let Some(p) = py {
            let (k, v) = (self.t.intern("python"), self.t.intern(p));
            l.args.push((k, ArgValue::Str(v)));
        }
        self.t.push_slice(l);
        let n = self.t.intern(name);
        let mut k = NewSlice::new(self.stream, SliceKind::Kernel, n, start, end - start);
        k.class = SliceClass::Compute;
        k.correlation = self.corr;
        self.t.push_slice(k);
    }
}

#[test]
fn top_kernels_name_the_launching_python_line_user_code_first() {
    let mut b = Built::new();
    // gemm: launched inside user code that calls into torch (a library
    // frame, innermost): the user frame is named.
    b.frame("train.py(42): step", 0, 10_000);
    b.frame(
        "/usr/lib/python3/site-packages/torch/nn/linear.py(7): forward",
        100,
        9_000,
    );
    b.kernel("gemm(float*, int)", 200, 1_000, 6_000, None);
    b.kernel("gemm(float*, int)", 300, 6_000, 9_000, None);
    // relu: the collector's own python argument on the launch.
    b.kernel("relu", 9_500, 9_600, 10_600, Some("model.py:9 (act)"));
    // copy_k: no python anywhere.
    b.kernel("copy_k", 20_000, 20_000, 20_400, None);
    let r = analyze(&b.t.finish(), &AnalysisOptions::default());
    let top = &r.ranks[0].top_kernels;
    let names: Vec<&str> = top.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["gemm(float*, int)", "relu", "copy_k"]);
    assert_eq!(top[0].count, 2);
    assert!(
        (top[0].total_ms - 0.008).abs() < 1e-12,
        "{}",
        top[0].total_ms
    );
    assert!((top[0].mean_ms - 0.004).abs() < 1e-12);
    assert_eq!(top[0].python, "train.py:42 (step)");
    assert_eq!(top[1].python, "model.py:9 (act)");
    assert_eq!(top[2].python, "");
    // Shares of the GPU time: 8 + 1 + 0.4 µs of 9.4.
    let share: Vec<f64> = top.iter().map(|k| k.share_pct.unwrap_or(0.0)).collect();
    assert!((share[0] - 800.0 / 9.4).abs() < 1e-9, "{share:?}");
    assert!(
        (share.iter().sum::<f64>() - 100.0).abs() < 1e-9,
        "{share:?}"
    );
    // The headline's top kernel is the first, and there are no steps.
    let h = &r.headline.ranks[0];
    assert_eq!(
        h.top_kernel.as_ref().map(|k| k.name.as_str()),
        Some(names[0])
    );
    assert_eq!((h.steps, h.median_step_ms), (0, None));
    assert_eq!(r.ranks[0].median_step_ms, None);
    assert!(r.headline.straggler.is_none());
    // The text names the line and the kernel without its parameter list.
    let text = streamscope_core::analysis::render::text_brief(&r);
    assert!(
        text.contains("top kernel, rank 0: 85.1 % of GPU time, 0.008 ms, launched at train.py:42 (step): gemm\n"),
        "{text}"
    );
}

/// A trace whose processes ran no GPU work (a capture that ended before
/// any, a profiler whose schedule never became active) says so in the
/// report's diagnostics instead of leaving "0 rank(s)" unexplained; a
/// trace with a kernel does not.
#[test]
fn no_gpu_work_is_said() {
    use streamscope_core::diagnostic::Kind;
    let (mut t, host, streams) = synth::one_gpu(7, Vec::new(), &[7]);
    let n = t.intern("aten::add");
    t.push_slice(NewSlice::new(host, SliceKind::CpuOp, n, 0, 1_000));
    let cpu_only = t.clone().finish();
    let r = analyze(&cpu_only, &AnalysisOptions::default());
    assert!(r.ranks.is_empty());
    let d = r
        .diagnostics
        .iter()
        .find(|d| d.kind == Kind::NoGpuWork)
        .expect("a NoGpuWork diagnostic");
    assert!(
        d.detail.contains("1 event(s) of 1 process(es)"),
        "{}",
        d.detail
    );
    let k = t.intern("gemm");
    let mut s = NewSlice::new(streams[0], SliceKind::Kernel, k, 2_000, 1_000);
    s.class = SliceClass::Compute;
    t.push_slice(s);
    let r = analyze(&t.finish(), &AnalysisOptions::default());
    assert_eq!(r.ranks.len(), 1);
    assert!(r.diagnostics.iter().all(|d| d.kind != Kind::NoGpuWork));
}

/// The same note when several files (analyzed file by file) hold no GPU
/// work between them.
#[test]
fn no_gpu_work_in_several_files_is_said() {
    use streamscope_core::diagnostic::Kind;
    let dir = std::env::temp_dir().join(format!("ss-no-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut paths = Vec::new();
    for pid in [11, 12] {
        let (mut t, host, _) = synth::one_gpu(pid, Vec::new(), &[7]);
        let n = t.intern("aten::add");
        t.push_slice(NewSlice::new(host, SliceKind::CpuOp, n, 0, 1_000));
        let p = dir.join(format!("rank-{pid}.json"));
        chrome::write_file(&t.finish(), &p).expect("write");
        paths.push(p);
    }
    let r = analysis::job::report(&paths, &AnalysisOptions::default(), true, &|_, _| {});
    let _ = std::fs::remove_dir_all(&dir);
    let r = r.expect("a report");
    assert!(r.ranks.is_empty());
    let notes: Vec<_> = r
        .diagnostics
        .iter()
        .filter(|d| d.kind == Kind::NoGpuWork)
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", r.diagnostics);
    assert!(
        notes[0].detail.contains("rank-11.json"),
        "{}",
        notes[0].detail
    );
}
