//! The whole session (InitializeInjection, buffer callbacks, writer thread,
//! atexit and SIGTERM flushes) against a stand-in libcupti compiled from
//! tests/fake/fake_cupti.c: no GPU needed. Each scenario runs in a child
//! process (this test binary re-run with STREAMSCOPE_FAKE_CHILD set), since
//! the collector lives for the whole process.
// libc and CUDA calls of the test itself, each with a SAFETY comment.
#![allow(unsafe_code)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use streamscope_core::{DeviceId, SliceId};

use streamscope_core::load::load_paths;
use streamscope_core::{ClockDomain, SliceKind, TrackKind};

mod common;
use common::{cdylib, rig, CHILD};

fn child(test: &str, dir: &Path, so: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("test binary"));
    c.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("STREAMSCOPE_OUT", dir)
        .env("STREAMSCOPE_CUPTI_LIB", so)
        .env("RANK", "3")
        .env("WORLD_SIZE", "4")
        .env("FAKE_CUPTI_API_LOG", dir.join("api.log"))
        .env_remove("STREAMSCOPE_ALL_APIS")
        .env_remove("STREAMSCOPE_CAPTURE_RANGE");
    c
}

/// Runs `cmd` to its end; fails the test, with its stderr, unless it succeeds.
fn succeeds(cmd: &mut Command) {
    let out = cmd.output().expect("child runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Child: start the collector, let the writer flush a few times, return (exit runs atexit).
#[test]
fn child_exits_normally() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert_eq!(streamscope_collector::InitializeInjection(), 1);
    assert!(
        streamscope_collector::session::session().is_some(),
        "collector started on the fake CUPTI"
    );
    // What the Python hooks do around an optimizer step and at a
    // torch.profiler start (not in the run that must leave no trace).
    if std::env::var_os("FAKE_CUPTI_EMPTY").is_none() {
        streamscope_collector::python::streamscope_optimizer_step(1_000, 2_000);
        assert_eq!(
            streamscope_collector::python::streamscope_torch_profiler_started(),
            1
        );
    }
    std::thread::sleep(Duration::from_millis(2500));
}

/// Child: start the collector and spin until a signal ends the process.
#[test]
fn child_waits_for_sigterm() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert_eq!(streamscope_collector::InitializeInjection(), 1);
    println!("ready");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn all_apis_records_every_call() {
    let Some((dir, so)) = rig("fake", "all-apis") else {
        return;
    };
    succeeds(child("child_exits_normally", &dir, &so).env("STREAMSCOPE_ALL_APIS", "1"));
    let t = load_paths(&[dir.join("rank-3.pftrace")]).expect("trace loads");
    let filter = metadata(&t, "api_filter");
    assert_eq!(
        filter.as_deref(),
        Some("none: every CUDA API call recorded")
    );
    assert!(!dir.join("api.log").exists(), "no API switched off");
}

#[test]
fn activity_buffers_reach_cupti_zeroed_and_are_reused() {
    let Some((dir, so)) = rig("fake", "zeroed") else {
        return;
    };
    let log = dir.join("buffers.log");
    succeeds(child("child_exits_normally", &dir, &so).env("FAKE_CUPTI_BUFFER_LOG", &log));
    let text = std::fs::read_to_string(&log).expect("the fake logged its buffer requests");
    let lines: Vec<&str> = text.lines().collect();
    // One request a flush (every 100 ms for 2.5 s), each buffer written.
    assert!(lines.len() >= 10, "{lines:?}");
    assert!(
        lines.iter().all(|l| l.starts_with("zeroed ")),
        "a buffer reached CUPTI unzeroed: {lines:?}"
    );
    let mut addrs: Vec<&str> = lines.iter().map(|l| &l[7..]).collect();
    addrs.sort();
    addrs.dedup();
    assert!(
        addrs.len() < lines.len(),
        "converted buffers are handed out again: {lines:?}"
    );
    let t = load_paths(&[dir.join("rank-3.pftrace")]).expect("trace loads");
    let said = metadata(&t, "activity_buffers").unwrap_or_default();
    assert!(said.starts_with("zeroed and faulted in"), "{said}");
}

#[test]
fn a_normal_exit_writes_a_complete_trace() {
    let Some((dir, so)) = rig("fake", "exit") else {
        return;
    };
    let out = child("child_exits_normally", &dir, &so)
        .output()
        .expect("child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert!(!stderr.contains("CUPTI unavailable"), "{stderr}");
    let file = dir.join("rank-3.pftrace");
    assert!(
        file.is_file(),
        "trace named after RANK: {:?}",
        std::fs::read_dir(&dir).map(|d| d.count())
    );
    let t = load_paths(&[file]).expect("trace loads");
    let p = &t.processes()[0];
    assert_eq!((p.rank, p.world_size), (Some(3), Some(4)));
    assert!(p.name.starts_with("rank 3 · "), "{}", p.name);
    assert_eq!(p.clock, ClockDomain::Monotonic);
    assert_eq!(p.clock_snapshot.len(), 3);
    assert_eq!(p.dropped_records, 0);
    assert!(
        p.metadata
            .iter()
            .any(|(k, v)| k == "collector" && v.starts_with("streamscope-collector")),
        "{:?}",
        p.metadata
    );
    assert!(p
        .metadata
        .iter()
        .any(|(k, v)| k == "clock" && v.contains("cuptiActivityRegisterTimestampCallback")));
    // State queries are left out of the records, launches and syncs are not.
    let filter = p
        .metadata
        .iter()
        .find(|(k, _)| k == "api_filter")
        .map(|(_, v)| v.as_str());
    assert_eq!(
        filter,
        Some("not recorded (state queries; record --all-apis keeps them): cuDevicePrimaryCtxGetState, cudaGetDevice"),
        "{:?}",
        p.metadata
    );
    let log = std::fs::read_to_string(dir.join("api.log")).expect("the switches were called");
    let mut calls: Vec<&str> = log.lines().collect();
    calls.sort();
    assert_eq!(calls, ["1 529 0", "2 17 0"]);
    let kernels: Vec<&str> = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Kernel)
        .map(|i| t.str(t.slices().name()[i]))
        .collect();
    // One buffer per flush: the periodic ones (about 2 in 2.5 s) and the final one.
    assert!(kernels.len() >= 2, "{kernels:?}");
    assert!(kernels.contains(&"matmul(float*, float*)"), "{kernels:?}");
    assert!(
        kernels.contains(&"ncclDevKernel_AllGather_RING_LL"),
        "{kernels:?}"
    );
    let apis = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Runtime)
        .count();
    assert_eq!(apis, kernels.len());
    assert!((0..t.slices().len()).any(|i| t.str(t.slices().name()[i]) == "cudaLaunchKernel"));
    let copies = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Memcpy)
        .count();
    assert_eq!(copies, kernels.len());
    assert!(t.tracks().iter().any(|tr| tr.kind
        == TrackKind::Stream {
            device: DeviceId::from_index(0),
            stream: 7
        }));
    assert!(t
        .tracks()
        .iter()
        .any(|tr| tr.kind == TrackKind::Thread { tid: 7 }));
    // The optimizer step the "hooks" noted, as a range on their thread.
    let steps: Vec<usize> = (0..t.slices().len())
        .filter(|&i| {
            t.str(t.slices().name()[i]) == streamscope_core::protocol::OPTIMIZER_STEP_RANGE
        })
        .collect();
    assert_eq!(steps.len(), 1);
    assert_eq!(t.slices().kind()[steps[0]], SliceKind::Range);
    assert_eq!(
        (
            t.slices().start_ns()[steps[0]],
            t.slices().dur_ns()[steps[0]]
        ),
        (1_000, 1_000)
    );
    // torch.profiler: said once on stderr, kept in the trace for `record`.
    assert_eq!(
        stderr.matches("torch.profiler was started").count(),
        1,
        "{stderr}"
    );
    assert!(p
        .metadata
        .iter()
        .any(|(k, v)| k == streamscope_core::protocol::TORCH_PROFILER_KEY
            && v.contains("CUDA events are missing")));
    let progress =
        std::fs::read_to_string(dir.join(format!(".progress-{}-{}", host_tag(), out_pid(&t))))
            .unwrap_or_default();
    assert!(
        progress.contains("done=1"),
        "final progress written: {progress:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// This host as the collector writes it in file names.
fn host_tag() -> String {
    streamscope_collector::process_info::host_tag(&streamscope_collector::process_info::hostname())
}

fn out_pid(t: &streamscope_core::Trace) -> u32 {
    t.processes()[0].pid
}

#[test]
fn sigterm_flushes_then_dies_by_the_signal() {
    let Some((dir, so)) = rig("fake", "term") else {
        return;
    };
    let mut c = child("child_waits_for_sigterm", &dir, &so);
    c.stdout(std::process::Stdio::null());
    let mut proc = c.spawn().expect("child runs");
    std::thread::sleep(Duration::from_millis(1800));
    let _ = Command::new("kill")
        .args(["-TERM", &proc.id().to_string()])
        .status();
    let status = proc.wait().expect("child ends");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(15),
        "the default action still ends the process: {status:?}"
    );
    let t = load_paths(&[dir.join("rank-3.pftrace")]).expect("trace loads");
    let kernels = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Kernel)
        .count();
    assert!(
        kernels >= 2,
        "periodic and final flush made it to disk: {kernels}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_process_without_gpu_work_leaves_no_trace() {
    let Some((dir, so)) = rig("fake", "empty") else {
        return;
    };
    succeeds(child("child_exits_normally", &dir, &so).env("FAKE_CUPTI_EMPTY", "1"));
    assert!(
        !dir.join("rank-3.pftrace").exists(),
        "no empty trace left behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn monotonic_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// Child: start the collector, run 700 ms, then crash with SIGSEGV (raised
/// on this thread: the handler path of a real fault), printing when.
#[test]
fn child_crashes() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    // As in a Python process: the default action (the Rust test harness
    // has a stack-overflow handler of its own).
    // SAFETY: sets a default disposition; no handler code involved.
    unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
    assert_eq!(streamscope_collector::InitializeInjection(), 1);
    std::thread::sleep(Duration::from_millis(700));
    println!("crash at {}", monotonic_ns());
    // SAFETY: raise has no memory effects; SIGSEGV ends the process.
    unsafe { libc::raise(libc::SIGSEGV) };
    std::thread::sleep(Duration::from_secs(10));
}

/// The last kernel's end in a trace (CLOCK_MONOTONIC ns).
fn last_kernel_end(path: &Path) -> i64 {
    let t = load_paths(&[path.to_path_buf()]).expect("trace loads");
    (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Kernel)
        .map(|i| t.slices().start_ns()[i] + t.slices().dur_ns()[i])
        .max()
        .unwrap_or(0)
}

#[test]
fn a_segfault_flushes_then_dies_by_the_signal() {
    let Some((dir, so)) = rig("fake", "segv") else {
        return;
    };
    let out = child("child_crashes", &dir, &so)
        .output()
        .expect("child runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "it still dies by the signal: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let crash: i64 = stdout
        .lines()
        .find_map(|l| l.split_once("crash at ").map(|(_, v)| v))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "crash time in {stdout:?} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let last = last_kernel_end(&dir.join("rank-3.pftrace"));
    // The fake hands back a kernel ending at each flush: the final (forced)
    // flush of the crash handler puts one right at the crash.
    let lost_ms = (crash - last) as f64 / 1e6;
    assert!(lost_ms < 50.0, "lost {lost_ms:.1} ms before the segfault");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigkill_loses_at_most_250_ms() {
    let Some((dir, so)) = rig("fake", "kill") else {
        return;
    };
    let mut c = child("child_waits_for_sigterm", &dir, &so);
    c.stdout(std::process::Stdio::null());
    let mut proc = c.spawn().expect("child runs");
    std::thread::sleep(Duration::from_millis(1500));
    let killed = monotonic_ns();
    let _ = proc.kill();
    let _ = proc.wait();
    let last = last_kernel_end(&dir.join("rank-3.pftrace"));
    let lost_ms = (killed - last) as f64 / 1e6;
    // Periodic flushes every 100 ms; nothing runs at a SIGKILL.
    assert!(lost_ms < 250.0, "lost {lost_ms:.1} ms before SIGKILL");
    let _ = std::fs::remove_dir_all(&dir);
}

/// tests/fake/fake_nccl.c plays the driver and NCCL: the library, opened
/// again as NCCL_PROFILER_PLUGIN, gets init, Group/Coll/P2p events and
/// finalize through `ncclProfiler_v5`; the operations reach the trace file.
#[test]
fn nccl_plugin_calls_reach_the_trace_file() {
    let Some((dir, so)) = rig("fake", "nccl") else {
        return;
    };
    let Some(lib) = cdylib() else {
        panic!("no libstreamscope_collector.so next to the test binary");
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/fake_nccl.c");
    let app = dir.join("fake_nccl");
    let ok = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&app)
        .arg(&src)
        .arg("-ldl")
        .status()
        .expect("cc runs");
    assert!(ok.success());
    let out = Command::new(&app)
        .env("CUDA_INJECTION64_PATH", &lib)
        .env("NCCL_PROFILER_PLUGIN", &lib)
        .env("STREAMSCOPE_OUT", &dir)
        .env("STREAMSCOPE_CUPTI_LIB", &so)
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .env_remove("STREAMSCOPE_CAPTURE_RANGE")
        .output()
        .expect("fake_nccl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("plugin streamscope"), "{stdout}");
    assert!(stdout.contains("mask 6"), "Coll | P2p: {stdout}");
    let t = load_paths(&[dir.join("rank-1.pftrace")]).expect("trace loads");
    let ops: Vec<usize> = (0..t.slices().len())
        .filter(|&i| t.str(t.slices().name()[i]).starts_with("NCCL "))
        .collect();
    let names: Vec<&str> = ops.iter().map(|&i| t.str(t.slices().name()[i])).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "NCCL AllReduce").count(),
        5,
        "{names:?}"
    );
    assert_eq!(names.iter().filter(|n| **n == "NCCL Send").count(), 5);
    let seqs: Vec<String> = ops
        .iter()
        .filter_map(|&i| t.arg_string(SliceId::from_index(i), "seq"))
        .collect();
    assert_eq!(seqs, ["0", "1", "2", "3", "4"]);
    let first = ops[0];
    assert_eq!(t.slices().kind()[first], SliceKind::Other);
    assert_eq!(
        t.track_name(t.slices().track()[first]),
        "NCCL · comm 0xc0ffee0123456789 (world) · rank 1/2"
    );
    assert_eq!(
        t.arg_string(SliceId::from_index(first), "bytes").as_deref(),
        Some("4194304")
    );
    assert_eq!(
        t.arg_string(SliceId::from_index(first), "proto").as_deref(),
        Some("LL128")
    );
    // Host times on the trace's clock, between the process's first and last kernel.
    let kernels: Vec<i64> = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Kernel)
        .map(|i| t.slices().start_ns()[i])
        .collect();
    let dur = t.slices().dur_ns()[first];
    assert!((1_000_000..100_000_000).contains(&dur), "{dur} ns");
    assert!(kernels.iter().any(|&k| k > t.slices().start_ns()[first]));
    let meta = &t.processes()[0].metadata;
    assert!(
        meta.iter()
            .any(|(k, v)| k == "nccl_profiler_plugin" && v.starts_with("v5: init called for 1")),
        "{meta:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn metadata(t: &streamscope_core::Trace, key: &str) -> Option<String> {
    t.processes()[0]
        .metadata
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

/// Child: the GPU sampler process (`streamscope-gpu-sampler`) on one
/// stand-in GPU, until its stdin closes.
#[test]
fn child_gpu_sampler() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let dir = std::env::var("STREAMSCOPE_OUT").expect("dir");
    let code = streamscope_collector::pm_sampling::sidecar::serve(
        &["--dir".into(), dir],
        Some(vec![(0, "ordinal0".into())]),
    );
    std::process::exit(code);
}

/// The sampler started as `record --gpu-metrics` starts it: stdin and
/// stdout piped, its `ready` line read.
fn start_sampler(dir: &Path, so: &Path, list: &str) -> std::process::Child {
    use std::io::BufRead;
    let mut sampler = child("child_gpu_sampler", dir, so)
        .env("STREAMSCOPE_GPU_METRICS", list)
        .env("STREAMSCOPE_GPU_METRICS_HZ", "1000")
        .env("FAKE_CUPTI_PM_LOG", dir.join("pm.log"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sampler runs");
    let out = sampler.stdout.take().expect("piped");
    // (libtest's own "test child_gpu_sampler ... " starts the line.)
    let ready = std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.trim_end().ends_with("ready"));
    assert!(ready, "the sampler said ready");
    sampler
}

/// Closes the sampler's stdin and waits for it: its exit code.
fn stop_sampler(mut sampler: std::process::Child) -> Option<i32> {
    drop(sampler.stdin.take());
    sampler.wait().expect("sampler ends").code()
}

#[test]
fn gpu_metrics_become_counter_tracks_on_the_trace_clock() {
    let Some((dir, so)) = rig("fake", "pm") else {
        return;
    };
    let started = monotonic_ns();
    let sampler = start_sampler(&dir, &so, "default");
    let out = child("child_exits_normally", &dir, &so)
        .env("STREAMSCOPE_GPU_METRICS_FEED", &dir)
        .output()
        .expect("child runs");
    let ended = monotonic_ns();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    assert_eq!(stop_sampler(sampler), Some(0));
    let t = load_paths(&[dir.join("rank-3.pftrace")]).expect("trace loads");
    let sampled = metadata(&t, "gpu_metrics.device0.sampled").expect("sampled");
    assert!(
        sampled.contains("sm_active=sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
        "{sampled}"
    );
    // NVLink refused (each candidate probed alone), the rest kept.
    let refused = metadata(&t, "gpu_metrics.device0.refused").expect("refused");
    assert!(
        refused.contains("nvlrx__bytes.sum (fake error (17))")
            && refused.contains("nvltx__bytes_data_user.sum"),
        "{refused}"
    );
    assert!(!sampled.contains("nvlink"), "{sampled}");
    let stats = metadata(&t, "gpu_metrics.device0.stats").expect("stats");
    assert!(stats.contains("clock CLOCK_REALTIME"), "{stats}");
    let config = metadata(&t, "gpu_metrics.device0.config").expect("config");
    assert!(
        config.starts_with("1000 Hz (GPU time interval 1000000 ns)"),
        "{config}"
    );
    // Counter tracks under the GPU, on CLOCK_MONOTONIC, with the values.
    let track = |name: &str| {
        t.tracks()
            .iter()
            .position(|tr| t.str(tr.name) == name)
            .unwrap_or_else(|| panic!("no track {name}"))
    };
    let sm = track("GPU 0 · SM active %");
    assert!(matches!(
        t.tracks()[sm].kind,
        TrackKind::Counter { device: Some(_) }
    ));
    let dram = track("GPU 0 · DRAM GB/s");
    assert!(!t
        .tracks()
        .iter()
        .any(|tr| t.str(tr.name).contains("NVLink")));
    let points = |k: usize| -> Vec<(i64, f64)> {
        (0..t.counters().len())
            .filter(|&i| t.counters().track()[i].index() == k)
            .map(|i| (t.counters().ts_ns()[i], t.counters().value()[i]))
            .collect()
    };
    let sm_pts = points(sm);
    // ~2.5 s at 1 kHz: the child's life, and the sampler's start before it.
    assert!(sm_pts.len() > 1000, "{} samples", sm_pts.len());
    assert!(sm_pts.iter().all(|p| p.1 == 42.0));
    assert!(
        sm_pts.iter().all(|p| p.0 > started && p.0 < ended),
        "samples off the trace clock"
    );
    assert!(sm_pts.windows(2).all(|w| w[1].0 - w[0].0 == 1_000_000));
    // The feed covered the child's end: its last batch waited for it.
    let last = sm_pts.last().expect("points").0;
    assert!(
        ended - last < 400_000_000,
        "last sample {} ms before the end",
        (ended - last) / 1_000_000
    );
    // 4200 bytes per 1 ms sample: 4.2 MB/s.
    assert!(points(dram).iter().all(|p| (p.1 - 4.2e-3).abs() < 1e-9));
    // Stopped, decoded and disabled by the sampler when its stdin closed.
    let log = std::fs::read_to_string(dir.join("pm.log")).expect("pm log");
    let calls: Vec<&str> = log.lines().collect();
    assert_eq!(
        calls,
        [
            "profilerInitialize",
            "enable",
            "start",
            "stop",
            "disable",
            "profilerDeInitialize"
        ]
    );
}

#[test]
fn a_gpu_sampled_by_another_process_is_noted_and_metrics_off_changes_nothing() {
    let Some((dir, so)) = rig("fake", "pm-lock") else {
        return;
    };
    // Another process holds GPU 0's lock (the fake has no libcuda: the GPU
    // is named by its ordinal).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let lock = dir.join(streamscope_core::protocol::gpu_metrics_lock_name(
        &host, "ordinal0",
    ));
    let mut held = std::fs::File::create(&lock).expect("lock file");
    held.try_lock().expect("locked");
    std::io::Write::write_all(&mut held, b"4242").expect("pid written");
    let sampler = start_sampler(&dir, &so, "sm_active");
    succeeds(child("child_exits_normally", &dir, &so).env("STREAMSCOPE_GPU_METRICS_FEED", &dir));
    // Nothing sampled: the sampler says so by its exit code.
    assert_eq!(stop_sampler(sampler), Some(2));
    let t = load_paths(&[dir.join("rank-3.pftrace")]).expect("trace loads");
    assert_eq!(
        metadata(&t, "gpu_metrics.device0.status").as_deref(),
        Some("sampled by pid 4242")
    );
    assert!(t.counters().is_empty());
    assert!(!std::fs::read_to_string(dir.join("pm.log"))
        .unwrap_or_default()
        .contains("enable"));
    drop(held);
    // Metrics off: no profiler call, no metadata, no counters.
    let _ = std::fs::remove_file(dir.join("rank-3.pftrace"));
    let _ = std::fs::remove_file(dir.join("pm.log"));
    let out = child("child_exits_normally", &dir, &so)
        .env_remove("STREAMSCOPE_GPU_METRICS_FEED")
        .env("FAKE_CUPTI_PM_LOG", dir.join("pm.log"))
        .output()
        .expect("child runs");
    assert!(out.status.success());
    let t = load_paths(&[dir.join("rank-3.pftrace")]).expect("trace loads");
    assert!(t.counters().is_empty());
    assert!(!t.processes()[0]
        .metadata
        .iter()
        .any(|(k, _)| k.starts_with("gpu_metrics")));
    assert!(!dir.join("pm.log").exists(), "no CUPTI profiler call");
}
