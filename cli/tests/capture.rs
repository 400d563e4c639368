//! `streamscope capture` and `record --armed`: bad input and dead sockets
//! are one clear error line and exit code 2; end to end, an armed run of a
//! stand-in CUDA program (the collector's tests/fake/fake_app.c and
//! fake_cupti.c, no GPU) takes the capture `streamscope capture` asks for,
//! and `report` reads the capture's files.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_streamscope"))
}

fn temp(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-capture-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("runs");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, so, se)
}

fn host_tag() -> String {
    streamscope_core::protocol::host_tag(
        &std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default(),
    )
}

fn last_line_error(se: &str, needle: &str) {
    let last = se.lines().last().unwrap_or("");
    assert!(
        last.starts_with("streamscope: error: ") && last.contains(needle),
        "{se}"
    );
    assert!(!se.contains("panicked"), "{se}");
}

#[test]
fn a_directory_without_armed_processes_is_one_error_line() {
    let dir = temp("none");
    let (o, _, se) = run(bin().arg("capture").arg(&dir).args(["--duration", "1s"]));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert_eq!(se.lines().count(), 1, "{se}");
    last_line_error(&se, "no armed process");
    let (o, _, se) = run(bin().args(["capture", "/no/such/dir", "--steps", "2"]));
    assert_eq!(o.status.code(), Some(2), "{se}");
    last_line_error(&se, "no such directory");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_are_one_error_line() {
    let dir = temp("bad");
    for (args, needle) in [
        (vec!["--duration", "1s", "--ranks", "a,b"], "--ranks"),
        (vec!["--duration", "soon"], "--duration"),
        (vec![], "--duration"),
        (vec!["--duration", "1s", "--steps", "2"], "not both"),
        (vec!["--steps", "2", "--delay", "5min"], "--delay"),
    ] {
        let (o, _, se) = run(bin().arg("capture").arg(&dir).args(&args));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {se}");
        assert_eq!(se.lines().count(), 1, "{args:?}: {se}");
        last_line_error(&se, needle);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dead_socket_is_reported_and_the_capture_fails() {
    let dir = temp("dead");
    let ctl = dir.join(".control");
    std::fs::create_dir_all(&ctl).expect("dir");
    let sock = ctl.join(format!("rank-0-{}-999999.sock", host_tag()));
    drop(UnixListener::bind(&sock).expect("bind"));
    assert!(sock.exists(), "a socket file nobody listens on");
    let (o, _, se) = run(bin().arg("capture").arg(&dir).args(["--duration", "1s"]));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.lines()
            .next()
            .unwrap_or("")
            .contains("rank 0 (pid 999999): stale socket"),
        "{se}"
    );
    last_line_error(&se, "no armed process accepted");
    let (o, _, se) = run(bin()
        .arg("capture")
        .arg(&dir)
        .args(["--duration", "1s", "--ranks", "3"]));
    assert_eq!(o.status.code(), Some(2), "{se}");
    last_line_error(&se, "rank(s) 3 did not accept");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds `file` from the collector's test sources into `dir`.
fn cc(dir: &Path, file: &str, shared: bool) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collector/tests/fake")
        .join(file);
    let out = dir.join(file.trim_end_matches(".c"));
    let mut c = Command::new("cc");
    if shared {
        c.args(["-shared", "-fPIC"]);
    }
    let ok = c
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(out)
}

#[test]
fn record_armed_then_capture_then_report() {
    let dir = temp("e2e");
    let lib =
        Path::new(env!("CARGO_BIN_EXE_streamscope")).with_file_name("libstreamscope_collector.so");
    let (Some(cupti), Some(app)) = (
        cc(&dir, "fake_cupti.c", true),
        cc(&dir, "fake_app.c", false),
    ) else {
        eprintln!("no C compiler: skipped");
        return;
    };
    if !lib.is_file() {
        eprintln!("no collector library next to the binary (cargo build -p streamscope-collector): skipped");
        return;
    }
    let out = dir.join("out");
    let rec = bin()
        .args(["record", "--armed", "--no-python-hooks", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&app)
        .env("STREAMSCOPE_COLLECTOR", &lib)
        .env("STREAMSCOPE_CUPTI_LIB", &cupti)
        .env("RANK", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("record runs");
    let t = Instant::now();
    while !std::fs::read_dir(out.join(".control"))
        .map(|mut rd| rd.next().is_some())
        .unwrap_or(false)
    {
        assert!(t.elapsed() < Duration::from_secs(10), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (o, so, se) =
        run(bin()
            .arg("capture")
            .arg(&out)
            .args(["--duration", "400ms", "--ranks", "0", "--wait"]));
    assert!(o.status.success(), "{se}");
    assert!(so.contains("rank 0 (pid "), "{so}");
    assert!(so.contains("capture 1 accepted"), "{so}");
    // --wait returns once the file is written, while the program (2 s)
    // still runs: the file is whole already.
    assert!(so.contains("): capture 1 written"), "{so}");
    assert!(so.contains("written: streamscope report"), "{so}");
    let (_, early, se) = run(bin()
        .arg("report")
        .arg(out.join("rank-0.capture-1.pftrace")));
    assert!(early.contains("1 rank(s)"), "{early} {se}");
    let r = rec.wait_with_output().expect("record ends");
    let se = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "the program's exit code: {se}");
    assert!(se.contains("1 capture file(s)"), "{se}");
    assert!(se.contains("*.capture-1.pftrace"), "{se}");
    let file = out.join("rank-0.capture-1.pftrace");
    assert!(file.is_file(), "{se}");
    let sockets = std::fs::read_dir(out.join(".control"))
        .map(|rd| rd.count())
        .unwrap_or(0);
    assert_eq!(sockets, 0, "the socket is gone at exit");
    let (o, so, se) = run(bin().arg("report").arg(&file));
    assert!(so.contains("1 rank(s)"), "{so}");
    assert!(o.status.success(), "{se}");
    let _ = std::fs::remove_dir_all(&dir);
}
