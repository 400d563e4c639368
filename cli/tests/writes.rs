//! What `export` and `report --summary-out` write, and what they never
//! write over (issue 32: D1, D6, D7).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_streamscope"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh directory of this test's own, removed when the test ends
/// (each holds copies of a bundled trace: left behind, they fill /tmp).
struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> TmpDir {
    let d = std::env::temp_dir().join(format!("streamscope-writes-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    TmpDir(d)
}

fn run(cmd: &mut Command) -> (Output, String) {
    let out = cmd.output().expect("runs");
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, se)
}

fn rank0() -> PathBuf {
    repo().join("traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz")
}

fn temps(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn summary_out_never_replaces_an_input() {
    let d = dir("summary-input");
    let input = d.join("rank-0.pftrace.gz");
    std::fs::copy(rank0(), &input).expect("copy");
    let before = std::fs::read(&input).expect("read");
    // The input itself, with --force.
    let (o, se) = run(bin()
        .args(["report", "--force", "--summary-out"])
        .arg(&input)
        .arg(&input));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("is an input"), "{se}");
    assert_eq!(std::fs::read(&input).expect("read"), before, "input kept");
    // A file inside an input directory, also through another spelling.
    let (o, se) = run(bin()
        .args(["report", "--force", "--summary-out"])
        .arg(d.join(".").join("rank-0.pftrace.gz"))
        .arg(&*d));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("input"), "{se}");
    assert_eq!(std::fs::read(&input).expect("read"), before, "input kept");
    // A link to the input is the input.
    let link_dir = dir("summary-link");
    let link = link_dir.join("alias.summary");
    std::os::unix::fs::symlink(&input, &link).expect("symlink");
    let (o, se) = run(bin()
        .args(["report", "--force", "--summary-out"])
        .arg(&link)
        .arg(&input));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert_eq!(std::fs::read(&input).expect("read"), before, "input kept");
    // Elsewhere, it is written.
    let out_dir = dir("summary-ok");
    let out = out_dir.join("a.summary");
    let (o, se) = run(bin()
        .args(["report", "--summary-out"])
        .arg(&out)
        .arg(&input));
    assert!(o.status.success(), "{se}");
    assert!(out.is_file());
}

#[test]
fn force_replaces_only_regular_files_and_writes_through_links_to_them() {
    let d = dir("force");
    let export = |out: &Path| {
        run(bin()
            .arg("export")
            .arg(rank0())
            .args(["--to", "chrome-json", "--force", "-o"])
            .arg(out))
    };
    // A FIFO stays a FIFO (no reader: a write into it would block).
    let fifo = d.join("pipe.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let (o, se) = export(&fifo);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("is a FIFO") && se.contains("pipe.json"), "{se}");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .expect("still there")
        .file_type()
        .is_fifo());
    // A directory.
    let sub = d.join("sub.json");
    std::fs::create_dir(&sub).expect("dir");
    let (o, se) = export(&sub);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("is a directory"), "{se}");
    // A dangling link, and a link to a FIFO: refused, the links kept.
    let dangling = d.join("dangling.json");
    std::os::unix::fs::symlink(d.join("nowhere"), &dangling).expect("symlink");
    let (o, se) = export(&dangling);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("symbolic link to nothing"), "{se}");
    assert!(!d.join("nowhere").exists());
    let to_fifo = d.join("to-fifo.json");
    std::os::unix::fs::symlink(&fifo, &to_fifo).expect("symlink");
    let (o, se) = export(&to_fifo);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("symbolic link to a FIFO"), "{se}");
    // A link to a regular file: the target is replaced, the link stays.
    let target_dir = dir("force-target");
    let target = target_dir.join("real.json");
    std::fs::write(&target, b"old").expect("write");
    let link = d.join("link.json");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let (o, se) = export(&link);
    assert!(o.status.success(), "{se}");
    assert!(std::fs::symlink_metadata(&link)
        .expect("link")
        .file_type()
        .is_symlink());
    let text = std::fs::read(&target).expect("target");
    assert!(text.starts_with(b"{"), "the target holds the export");
    assert!(temps(&d).is_empty() && temps(&target_dir).is_empty());
}

/// A Perfetto trace of about `slices` slices, written to `path`.
fn big_trace(path: &Path, slices: usize) {
    let t = streamscope_core::synth::fsdp_like(&streamscope_core::synth::SynthOptions {
        target_slices: slices,
        ..Default::default()
    });
    streamscope_core::perfetto::write_file(&t, path).expect("write");
}

/// Starts an export of `input` to `out` and sends `signal` once its
/// temporary file shows; whether it was seen.
fn interrupt_export(input: &Path, out: &Path, signal: &str) -> bool {
    let d = out.parent().expect("dir");
    let mut child = bin()
        .arg("export")
        .arg(input)
        .args(["--to", "chrome-json", "-o"])
        .arg(out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawns");
    let t0 = Instant::now();
    let mut seen = false;
    while t0.elapsed() < Duration::from_secs(120) {
        if !temps(d).is_empty() {
            seen = true;
            let sent = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status()
                .expect("kill");
            assert!(sent.success());
            break;
        }
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().expect("wait");
    if seen {
        assert!(!status.success(), "{signal}: {status:?}");
    }
    seen
}

#[test]
fn an_interrupted_export_leaves_no_temporary_file() {
    let d = dir("interrupt");
    let input = d.join("big.pftrace");
    big_trace(&input, 400_000);
    for signal in ["-TERM", "-INT"] {
        let out = d.join(format!("out{signal}.json"));
        let seen = interrupt_export(&input, &out, signal);
        assert!(
            seen,
            "{signal}: the export ended before its temporary file showed"
        );
        assert!(temps(&d).is_empty(), "{signal}: {:?}", temps(&d));
        assert!(!out.exists(), "{signal}: no partial output");
    }
}

#[test]
fn a_temporary_file_of_a_killed_export_is_removed_by_the_next() {
    let d = dir("stale");
    let out = d.join("out.pftrace");
    // A writer killed with -9 (its pid beyond any pid_max), and one still
    // running (this test).
    let stale = d.join(".out.pftrace.streamscope-4194305-0.tmp");
    let live = d.join(format!(
        ".out.pftrace.streamscope-{}-0.tmp",
        std::process::id()
    ));
    std::fs::write(&stale, b"partial").expect("write");
    std::fs::write(&live, b"partial").expect("write");
    // Not a trace name: a directory load skips it.
    let (o, se) = run(bin().arg("info").arg(&*d).arg(rank0()));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("holds no trace files"), "{se}");
    let (o, se) = run(bin()
        .arg("export")
        .arg(rank0())
        .args(["--to", "perfetto", "-o"])
        .arg(&out));
    assert!(o.status.success(), "{se}");
    assert!(out.is_file());
    assert!(!stale.exists(), "the dead writer's file is removed");
    assert!(live.exists(), "a running writer's file is left alone");
}

#[test]
fn a_screenshot_of_a_trace_that_did_not_load_is_an_error() {
    let d = dir("screenshot");
    let bad = d.join("bad.json");
    std::fs::write(&bad, b"{\"traceEvents\": [oops").expect("write");
    let png = d.join("shot.png");
    let (o, se) = run(bin().args(["view", "--screenshot"]).arg(&png).arg(&bad));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("bad.json") && se.contains("no screenshot taken"),
        "{se}"
    );
    assert!(!png.exists());
    // Nor over its input.
    let input = d.join("rank-0.pftrace.gz");
    std::fs::copy(rank0(), &input).expect("copy");
    let before = std::fs::read(&input).expect("read");
    let (o, se) = run(bin().args(["view", "--screenshot"]).arg(&input).arg(&input));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("is an input"), "{se}");
    assert_eq!(std::fs::read(&input).expect("read"), before);
}
