//! Armed mode against the stand-in libcupti (tests/fake/fake_cupti.c, whose
//! records exist only while cuptiActivityEnable has the kernel kind on):
//! nothing is written until a capture is triggered (SIGUSR2, the control
//! socket), each capture is its own file with records only from its
//! window, and the control socket is private. Each scenario runs in a
//! child process (this test binary re-run with STREAMSCOPE_FAKE_CHILD).
// libc and CUDA calls of the test itself, each with a SAFETY comment.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use streamscope_core::load::load_paths;
use streamscope_core::protocol::OPTIMIZER_STEP_RANGE;
use streamscope_core::{SliceKind, Trace};

mod common;
use common::{rig, CHILD};
use streamscope_collector::process_info::monotonic_ns;

/// Starts the armed child for `run_ms`; it marks an optimizer step every
/// 100 ms (as the Python hooks would).
fn spawn(dir: &Path, so: &Path, run_ms: u64, extra: &[(&str, &str)]) -> Child {
    let mut c = Command::new(std::env::current_exe().expect("test binary"));
    c.args(["child_armed", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("FAKE_RUN_MS", run_ms.to_string())
        .env("STREAMSCOPE_OUT", dir)
        .env("STREAMSCOPE_CUPTI_LIB", so)
        .env("STREAMSCOPE_ARMED", "1")
        .env("RANK", "3")
        .env("WORLD_SIZE", "4")
        .env("FAKE_CUPTI_ACTIVITY_LOG", dir.join("activity.log"))
        .env_remove("STREAMSCOPE_DURATION_S")
        .env_remove("STREAMSCOPE_CAPTURE_SIGNAL")
        .env_remove("STREAMSCOPE_CAPTURE_RANGE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().expect("child runs")
}

/// Child: armed collector, steps every 100 ms for FAKE_RUN_MS, then exit.
#[test]
fn child_armed() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert_eq!(streamscope_collector::InitializeInjection(), 1);
    let run_ms: u64 = std::env::var("FAKE_RUN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let marks = std::env::var_os("FAKE_NO_STEPS").is_none();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(run_ms) {
        std::thread::sleep(Duration::from_millis(100));
        let now = monotonic_ns();
        if marks {
            streamscope_collector::python::streamscope_optimizer_step(now - 20_000_000, now);
        }
    }
}

/// The control socket once the armed writer has made it.
fn wait_for_socket(dir: &Path) -> PathBuf {
    let t = Instant::now();
    loop {
        let found = std::fs::read_dir(dir.join(".control")).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "sock"))
        });
        if let Some(p) = found {
            return p;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ask(sock: &Path, line: &str) -> String {
    let mut c = UnixStream::connect(sock).expect("connect");
    c.write_all(line.as_bytes()).expect("write");
    let mut out = String::new();
    c.read_to_string(&mut out).expect("read");
    out
}

fn finish(child: Child) -> String {
    let out = child.wait_with_output().expect("child ends");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

fn traces(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pftrace"))
        .collect();
    v.sort();
    v
}

/// (start, end) of every kernel.
fn kernels(t: &Trace) -> Vec<(i64, i64)> {
    (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Kernel)
        .map(|i| {
            (
                t.slices().start_ns()[i],
                t.slices().start_ns()[i] + t.slices().dur_ns()[i],
            )
        })
        .collect()
}

#[test]
fn an_armed_process_never_triggered_writes_no_trace() {
    let Some((dir, so)) = rig("armed", "idle") else {
        return;
    };
    let child = spawn(&dir, &so, 1200, &[]);
    let sock = wait_for_socket(&dir);
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&dir.join(".control")), 0o700);
    assert_eq!(mode(&sock), 0o600);
    assert!(sock
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("rank-3-")));
    let stderr = finish(child);
    assert!(!stderr.contains("CUPTI unavailable"), "{stderr}");
    assert_eq!(traces(&dir), Vec::<String>::new());
    assert!(!sock.exists(), "the socket is removed at exit");
    let log = std::fs::read_to_string(dir.join("activity.log")).unwrap_or_default();
    assert!(log.is_empty(), "nothing enabled while armed: {log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigusr2_captures_only_its_window() {
    let Some((dir, so)) = rig("armed", "usr2") else {
        return;
    };
    let child = spawn(&dir, &so, 2500, &[("STREAMSCOPE_DURATION_S", "0.5")]);
    wait_for_socket(&dir);
    std::thread::sleep(Duration::from_millis(600));
    let sent = monotonic_ns();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) }, 0);
    finish(child);
    assert_eq!(traces(&dir), vec!["rank-3.capture-1.pftrace".to_string()]);
    let t = load_paths(&[dir.join("rank-3.capture-1.pftrace")]).expect("loads");
    let k = kernels(&t);
    assert!(k.len() >= 3, "{k:?}");
    // Polled every 50 ms; the fake stamps a record a few µs before a flush.
    for &(a, b) in &k {
        assert!(a >= sent, "kernel at {a} before the signal at {sent}");
        assert!(
            b <= sent + 800_000_000,
            "kernel past the 500 ms window: {b}"
        );
    }
    let p = &t.processes()[0];
    let (cs, ce) = (
        p.capture_start_ns.expect("start"),
        p.capture_end_ns.expect("end"),
    );
    assert!(
        (cs - sent) < 200_000_000,
        "started {} ms after",
        (cs - sent) / 1_000_000
    );
    assert!(
        (ce - cs - 500_000_000).abs() < 50_000_000,
        "{} ms",
        (ce - cs) / 1_000_000
    );
    let steps = (0..t.slices().len())
        .filter(|&i| t.str(t.slices().name()[i]) == OPTIMIZER_STEP_RANGE)
        .count();
    assert!((3..=7).contains(&steps), "{steps} steps in 500 ms");
    let log = std::fs::read_to_string(dir.join("activity.log")).expect("log");
    assert!(log.starts_with("enable 10\n"), "{log}");
    assert!(log.contains("disable 10\n"), "{log}");
    // The Python-line callback (cudaStreamSynchronize, cbid 131 in the
    // fake) only during the capture.
    let on = log.find("callback 1 2 131").expect("switched on");
    let off = log.find("callback 0 2 131").expect("switched off");
    assert!(on < off, "{log}");
    let meta = &t.processes()[0].metadata;
    assert!(
        meta.iter()
            .any(|(k, v)| k == "python_callsites" && v.contains("during this capture")),
        "{meta:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_steps_capture_that_finds_no_step_ends_and_says_why() {
    let Some((dir, so)) = rig("armed", "nosteps") else {
        return;
    };
    // No optimizer-step marks, no graph, no repeating kernel sequence.
    let child = spawn(
        &dir,
        &so,
        3000,
        &[("FAKE_NO_STEPS", "1"), ("FAKE_ONE_KERNEL", "1")],
    );
    let sock = wait_for_socket(&dir);
    let asked = Instant::now();
    assert_eq!(
        ask(&sock, "capture steps=2 max_ms=60000 find_ms=400\n"),
        "ok capture 1\n"
    );
    let err = finish(child);
    assert!(asked.elapsed() < Duration::from_secs(10));
    assert!(err.contains("no steps found within"), "{err}");
    assert!(err.contains("--duration"), "{err}");
    let t = load_paths(&[dir.join("rank-3.capture-1.pftrace")]).expect("capture");
    let p = &t.processes()[0];
    let why = p
        .metadata
        .iter()
        .find(|(k, _)| k == "capture_end")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(why.contains("no steps found"), "{:?}", p.metadata);
    let d = p.capture_end_ns.expect("end") - p.capture_start_ns.expect("start");
    assert!(
        (300_000_000..2_000_000_000).contains(&d),
        "{} ms",
        d / 1_000_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_control_socket_makes_numbered_captures() {
    let Some((dir, so)) = rig("armed", "socket") else {
        return;
    };
    let child = spawn(&dir, &so, 3000, &[]);
    let sock = wait_for_socket(&dir);
    assert_eq!(ask(&sock, "capture duration_ms=300\n"), "ok capture 1\n");
    let busy = ask(&sock, "capture duration_ms=300\n");
    assert!(
        busy.starts_with("error capture 1 is already running"),
        "{busy}"
    );
    let bad = ask(&sock, "launch missiles\n");
    assert!(bad.starts_with("error unknown command"), "{bad}");
    assert_eq!(bad.lines().count(), 1);
    std::thread::sleep(Duration::from_millis(800));
    let at = monotonic_ns() + 200_000_000;
    let line = format!("capture duration_ms=300 start_ns={at}\n");
    assert_eq!(ask(&sock, &line), "ok capture 2\n");
    // 200 ms until it starts, 300 ms of capture, then the collector's
    // 300 ms grace for the GPU work launched inside it.
    std::thread::sleep(Duration::from_millis(1300));
    // Steps: 2 whole steps = up to the 3rd step end after the start.
    assert_eq!(ask(&sock, "capture steps=2\n"), "ok capture 3\n");
    finish(child);
    assert_eq!(
        traces(&dir),
        [1, 2, 3].map(|k| format!("rank-3.capture-{k}.pftrace"))
    );
    let one = load_paths(&[dir.join("rank-3.capture-1.pftrace")]).expect("1");
    let two = load_paths(&[dir.join("rank-3.capture-2.pftrace")]).expect("2");
    assert!(!kernels(&one).is_empty() && !kernels(&two).is_empty());
    let (e1, s2) = (
        one.processes()[0].capture_end_ns.expect("end 1"),
        two.processes()[0].capture_start_ns.expect("start 2"),
    );
    assert!(kernels(&one).iter().all(|&(_, b)| b <= e1 + 150_000_000));
    assert!(
        s2 >= at && s2 - at < 30_000_000,
        "started at the instant asked"
    );
    assert!(kernels(&two).iter().all(|&(a, _)| a >= at));
    let three = load_paths(&[dir.join("rank-3.capture-3.pftrace")]).expect("3");
    let steps = (0..three.slices().len())
        .filter(|&i| three.str(three.slices().name()[i]) == OPTIMIZER_STEP_RANGE)
        .count();
    assert_eq!(steps, 3, "two whole steps and the one it started in");
    let p = &three.processes()[0];
    let d = p.capture_end_ns.expect("end") - p.capture_start_ns.expect("start");
    assert!(
        (150_000_000..500_000_000).contains(&d),
        "{} ms",
        d / 1_000_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exit_mid_capture_leaves_a_valid_trace() {
    let Some((dir, so)) = rig("armed", "exit") else {
        return;
    };
    let child = spawn(&dir, &so, 1500, &[]);
    let sock = wait_for_socket(&dir);
    assert_eq!(ask(&sock, "capture duration_ms=60000\n"), "ok capture 1\n");
    let t0 = Instant::now();
    finish(child);
    assert!(t0.elapsed() < Duration::from_secs(5), "exit is not held up");
    let t = load_paths(&[dir.join("rank-3.capture-1.pftrace")]).expect("loads");
    assert!(kernels(&t).len() >= 3);
    let p = &t.processes()[0];
    let d = p.capture_end_ns.expect("end") - p.capture_start_ns.expect("start");
    assert!(
        d < 3_000_000_000,
        "the window ends at exit: {} ms",
        d / 1_000_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn touching_dir_capture_triggers_but_an_old_file_does_not() {
    let Some((dir, so)) = rig("armed", "touch") else {
        return;
    };
    let trigger = dir.join("capture");
    std::fs::write(&trigger, b"").expect("an old trigger file");
    let child = spawn(&dir, &so, 2500, &[("STREAMSCOPE_DURATION_S", "0.3")]);
    wait_for_socket(&dir);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        traces(&dir),
        Vec::<String>::new(),
        "the old file did not trigger"
    );
    let touched = monotonic_ns();
    std::fs::File::options()
        .write(true)
        .open(&trigger)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()))
        .expect("touch");
    finish(child);
    assert_eq!(traces(&dir), vec!["rank-3.capture-1.pftrace".to_string()]);
    let t = load_paths(&[dir.join("rank-3.capture-1.pftrace")]).expect("loads");
    let cs = t.processes()[0].capture_start_ns.expect("start");
    assert!(
        cs >= touched && cs - touched < 400_000_000,
        "polled every 200 ms"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
