//! GPU tests: run CUDA programs with the collector injected and check the
//! traces. Ignored by default (no GPU in CI); scripts/gpu/collector.sh runs
//! them on the GPU machine with:
//! - `COLLECTOR_SO`: path of libstreamscope_collector.so
//! - `FSDP_REF`: path of the fsdp-ref binary (tests needing it are skipped without it)
//! - `STREAMSCOPE_CUPTI_LIB` (optional): libcupti, also used for NVTX injection
//! - `python3` with torch on PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use streamscope_core::SliceId;

use streamscope_core::load::load_paths;
use streamscope_core::{ClockDomain, SliceKind, Trace, TrackKind};

fn collector() -> PathBuf {
    let p = PathBuf::from(
        std::env::var("COLLECTOR_SO").expect("COLLECTOR_SO must name libstreamscope_collector.so"),
    );
    assert!(p.is_file(), "{} missing", p.display());
    p
}

fn cupti() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STREAMSCOPE_CUPTI_LIB") {
        return Some(PathBuf::from(p));
    }
    let dirs = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect::<Vec<_>>())
        .unwrap_or_default();
    dirs.into_iter()
        .map(|d| d.join("libcupti.so.13"))
        .find(|p| p.is_file())
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ss-gpu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("out dir");
    d
}

fn inject(cmd: &mut Command, out: &Path) {
    // As `streamscope record` does: the Python hooks find the collector
    // through STREAMSCOPE_PY_HOOK_LIB only.
    cmd.env("CUDA_INJECTION64_PATH", collector())
        .env("STREAMSCOPE_PY_HOOK_LIB", collector())
        .env("STREAMSCOPE_OUT", out);
    if let Some(c) = cupti() {
        cmd.env("NVTX_INJECTION64_PATH", &c)
            .env("STREAMSCOPE_CUPTI_LIB", &c);
    }
    for v in [
        "STREAMSCOPE_CAPTURE_RANGE",
        "STREAMSCOPE_DELAY_S",
        "STREAMSCOPE_DURATION_S",
    ] {
        cmd.env_remove(v);
    }
}

fn run_ok(mut cmd: Command) -> String {
    let out = cmd.output().expect("command starts");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{:?} failed: {stderr}", cmd);
    assert!(!stderr.contains("CUPTI unavailable"), "{stderr}");
    stderr
}

fn load(dir: &Path) -> Trace {
    load_paths(&[dir.to_path_buf()]).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

fn count(t: &Trace, kind: SliceKind) -> usize {
    t.slices().kind().iter().filter(|&&k| k == kind).count()
}

fn names_of(t: &Trace, kind: SliceKind) -> Vec<String> {
    (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == kind)
        .map(|i| t.str(t.slices().name()[i]).to_string())
        .collect()
}

/// python3 running `source`, with the call-site hooks `streamscope record` installs.
fn python(dir: &Path, name: &str, source: &str) -> Command {
    let script = dir.join(name);
    std::fs::write(&script, source).expect("write script");
    let hooks = dir.join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks dir");
    std::fs::write(
        hooks.join("sitecustomize.py"),
        include_str!("../python/sitecustomize.py"),
    )
    .expect("hooks");
    let mut c = Command::new("python3");
    c.arg(&script).env("PYTHONPATH", &hooks);
    c
}

#[test]
#[ignore = "needs a GPU"]
fn fsdp_ref_trace_has_kernels_nccl_copies_api_and_no_drops() {
    let Some(bin) = std::env::var_os("FSDP_REF") else {
        eprintln!("FSDP_REF not set: skipped");
        return;
    };
    let out = out_dir("fsdp");
    let mut cmd = Command::new(bin);
    cmd.args([
        "--mode",
        "overlap",
        "--gpus",
        "2",
        "--layers",
        "2",
        "--dim",
        "1024",
        "--batch",
        "2",
        "--seq",
        "256",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--item-sync",
    ]);
    inject(&mut cmd, &out);
    run_ok(cmd);
    let t = load(&out);
    assert_eq!(t.processes().len(), 1);
    let p = &t.processes()[0];
    assert_eq!(p.dropped_records, 0, "dropped records");
    assert_eq!(p.clock, ClockDomain::Monotonic);
    assert_eq!(p.clock_snapshot.len(), 3);
    assert!(
        p.metadata.iter().any(|(k, _)| k == "collector"),
        "{:?}",
        p.metadata
    );
    assert_eq!(t.devices().len(), 2, "two GPUs");
    assert!(
        t.devices()
            .iter()
            .all(|d| d.name.contains("H200") && d.sm_count > 0),
        "{:?}",
        t.devices()
    );
    let kernels = names_of(&t, SliceKind::Kernel);
    assert!(kernels.len() > 20, "{} kernels", kernels.len());
    assert!(
        kernels.iter().any(|n| n.starts_with("ncclDevKernel_")),
        "no NCCL kernel: {:?}",
        &kernels[..kernels.len().min(20)]
    );
    assert!(count(&t, SliceKind::Memcpy) > 0, "no memcpy");
    assert!(
        count(&t, SliceKind::Runtime) + count(&t, SliceKind::Driver) > 0,
        "no API calls"
    );
    assert!(count(&t, SliceKind::Range) > 0, "no NVTX ranges");
    for tr in t.tracks() {
        if let TrackKind::Stream { .. } = tr.kind {
            let parent = tr.parent.expect("stream track has a GPU parent");
            assert!(matches!(t.track(parent).kind, TrackKind::Gpu { .. }));
        }
    }
    let mut t2 = t.clone().into_builder();
    t2.link_flows_by_correlation();
    assert!(
        !t2.finish().flows().is_empty(),
        "kernels correlate with their launches"
    );
}

const SYNC_SCRIPT: &str = r#"import torch
x = torch.ones(1 << 20, device="cuda")
for i in range(5):
    y = (x * 2).sum()
    v = y.item()  # line 5
torch.cuda.synchronize()  # line 6
"#;

#[test]
#[ignore = "needs a GPU"]
fn python_syncs_carry_their_file_and_line() {
    let out = out_dir("pysync");
    let mut cmd = python(&out, "sync_test.py", SYNC_SCRIPT);
    inject(&mut cmd, &out);
    run_ok(cmd);
    let t = load(&out);
    let lines: Vec<String> = (0..t.slices().len())
        .filter_map(|i| t.arg_string(SliceId::from_index(i), "python"))
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("sync_test.py:5")),
        "python lines: {lines:?}"
    );
    assert!(count(&t, SliceKind::Sync) > 0, "no synchronization records");
    assert_eq!(t.processes()[0].dropped_records, 0);
}

/// The capture scripts run 20 cos, then 7 sin inside the window, then 20
/// tan: only the sin kernels may be in the trace.
fn assert_only_the_window_kernels(t: &Trace) {
    let kernels = names_of(t, SliceKind::Kernel);
    assert!(
        kernels.iter().filter(|n| n.contains("sin")).count() >= 7,
        "{kernels:?}"
    );
    assert!(
        !kernels
            .iter()
            .any(|n| n.contains("cos_") || n.contains("tan_")),
        "{kernels:?}"
    );
}

const PROFILER_SCRIPT: &str = r#"import torch
x = torch.ones(1 << 16, device="cuda")
for _ in range(20): torch.cos(x)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(7): torch.sin(x)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
for _ in range(20): torch.tan(x)
torch.cuda.synchronize()
"#;

#[test]
#[ignore = "needs a GPU"]
fn profiler_api_capture_keeps_only_the_window() {
    let out = out_dir("profapi");
    let mut cmd = python(&out, "prof.py", PROFILER_SCRIPT);
    inject(&mut cmd, &out);
    cmd.env("STREAMSCOPE_CAPTURE_RANGE", "cudaProfilerApi");
    run_ok(cmd);
    let t = load(&out);
    assert_only_the_window_kernels(&t);
    let p = &t.processes()[0];
    assert!(
        p.capture_start_ns.is_some() && p.capture_end_ns.is_some(),
        "capture window recorded"
    );
}

const NVTX_SCRIPT: &str = r#"import torch
x = torch.ones(1 << 16, device="cuda")
for _ in range(20): torch.cos(x)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("capture-me")
for _ in range(7): torch.sin(x)
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
for _ in range(20): torch.tan(x)
torch.cuda.synchronize()
"#;

#[test]
#[ignore = "needs a GPU"]
fn nvtx_capture_keeps_only_the_named_range() {
    let out = out_dir("nvtxcap");
    let mut cmd = python(&out, "nvtx.py", NVTX_SCRIPT);
    inject(&mut cmd, &out);
    cmd.env("STREAMSCOPE_CAPTURE_RANGE", "nvtx:capture-me");
    run_ok(cmd);
    let t = load(&out);
    assert_only_the_window_kernels(&t);
    assert!(names_of(&t, SliceKind::Range)
        .iter()
        .any(|n| n == "capture-me"));
}

const FOREVER_SCRIPT: &str = r#"import torch, sys
x = torch.ones(1 << 16, device="cuda")
print("ready", flush=True)
while True:
    torch.sin(x)
    torch.cuda.synchronize()
"#;

#[test]
#[ignore = "needs a GPU"]
fn sigterm_flushes_the_trace_before_the_process_dies() {
    let out = out_dir("sigterm");
    let mut cmd = python(&out, "forever.py", FOREVER_SCRIPT);
    inject(&mut cmd, &out);
    let mut child = cmd.stdout(Stdio::null()).spawn().expect("python starts");
    std::thread::sleep(Duration::from_secs(8));
    // The trace is on CLOCK_MONOTONIC, like this.
    let sent_ns = streamscope_collector::process_info::monotonic_ns();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("child ends");
    assert!(!status.success(), "killed by SIGTERM");
    let t = load(&out);
    assert!(
        count(&t, SliceKind::Kernel) > 100,
        "kernels flushed before death: {}",
        count(&t, SliceKind::Kernel)
    );
    let last_end_ns = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Kernel)
        .map(|i| t.slices().start_ns()[i] + t.slices().dur_ns()[i])
        .max()
        .unwrap_or(0);
    let lost_ns = sent_ns - last_end_ns;
    assert!(
        lost_ns <= 1_500_000_000,
        "the last kernel ended {:.3} s before SIGTERM was sent (at most 1.5 s may be lost)",
        lost_ns as f64 / 1e9
    );
}

/// fsdp-ref (one process, two GPUs: one communicator per GPU) with the
/// collector as NCCL's profiler plugin, as `streamscope record` sets it:
/// NCCL loads v5, every communicator calls init, and the trace holds the
/// collectives with their args, sequence numbers rising per communicator
/// and function.
#[test]
#[ignore = "needs a GPU and NCCL"]
fn fsdp_ref_nccl_plugin_records_the_collectives() {
    let Some(bin) = std::env::var_os("FSDP_REF") else {
        eprintln!("FSDP_REF not set: skipped");
        return;
    };
    let out = out_dir("nccl-plugin");
    let mut cmd = Command::new(bin);
    cmd.args([
        "--mode", "overlap", "--gpus", "2", "--layers", "2", "--dim", "1024", "--batch", "2",
        "--seq", "256", "--steps", "4", "--warmup", "1",
    ]);
    inject(&mut cmd, &out);
    cmd.env("NCCL_PROFILER_PLUGIN", collector())
        .env("NCCL_DEBUG", "INFO")
        .env("NCCL_DEBUG_SUBSYS", "INIT,ENV");
    let stderr = run_ok(cmd);
    let t = load(&out);
    let meta = &t.processes()[0].metadata;
    let plugin = meta
        .iter()
        .find(|(k, _)| k == "nccl_profiler_plugin")
        .map(|(_, v)| v.as_str());
    assert!(
        plugin.is_some_and(|v| v.starts_with("v5: init called for")),
        "{plugin:?}; NCCL said: {}",
        stderr
            .lines()
            .filter(|l| l.contains("PROFILER") || l.contains("profiler"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        !meta.iter().any(|(k, _)| k == "nccl_records_lost"),
        "{meta:?}"
    );
    let ops: Vec<usize> = (0..t.slices().len())
        .filter(|&i| t.str(t.slices().name()[i]).starts_with("NCCL "))
        .collect();
    let kernels = names_of(&t, SliceKind::Kernel)
        .into_iter()
        .filter(|n| n.starts_with("ncclDevKernel_"))
        .count();
    eprintln!("{} NCCL operations, {kernels} NCCL kernels", ops.len());
    assert!(!ops.is_empty(), "no NCCL operation recorded");
    let mut last: std::collections::HashMap<(String, String, String), u64> = Default::default();
    for &i in &ops {
        let arg = |k: &str| t.arg_string(SliceId::from_index(i), k).unwrap_or_default();
        assert!(arg("comm").starts_with("0x"), "{}", arg("comm"));
        assert_eq!(arg("nranks"), "2");
        assert!(!arg("dtype").is_empty() && !arg("count").is_empty());
        if let Ok(seq) = arg("seq").parse::<u64>() {
            assert!(!arg("algo").is_empty() && !arg("proto").is_empty());
            let key = (arg("comm"), arg("rank"), arg("func"));
            if let Some(&prev) = last.get(&key) {
                assert!(seq > prev, "{key:?}: {seq} after {prev}");
            }
            last.insert(key, seq);
        }
    }
    // One communicator (one hash) with a rank on each GPU.
    let ranks: std::collections::HashSet<(String, String)> =
        last.keys().map(|k| (k.0.clone(), k.1.clone())).collect();
    assert_eq!(ranks.len(), 2, "{ranks:?}");
}
