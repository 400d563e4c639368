//! `streamscope sweep` end to end: a configuration done before is kept, a
//! failing one is recorded and skipped, the table is built from the traces.

use std::path::{Path, PathBuf};
use std::process::Command;

fn sweep(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .arg("sweep")
        .arg("-o")
        .arg(dir)
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("streamscope-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn done_configs_are_kept_failed_ones_recorded_and_the_table_built() {
    let dir = tmp("resume");
    // X=1 ran before: a real recording and its done-marker.
    let done = dir.join("X-1");
    std::fs::create_dir_all(&done).expect("mkdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-overlap-h200x2");
    for e in std::fs::read_dir(&src).expect("read") {
        let p = e.expect("entry").path();
        std::fs::copy(&p, done.join(p.file_name().expect("name"))).expect("copy");
    }
    std::fs::write(done.join(".sweep-done"), "ok\n").expect("marker");
    // X=2 runs `true` under record: no CUDA, no trace; a failure with its reason.
    let (code, out, err) = sweep(&dir, &["--repeat", "1", "--env", "X=1,2", "--", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[1/2] X-1: kept (done before)"), "{err}");
    assert!(err.contains("[2/2] X-2: failed: "), "{err}");
    // One configuration ran: nothing to name a best against.
    assert!(out.contains("| X-1 | 1/1 | 33.76 | "), "{out}");
    assert!(out.contains("| X-2 | 0/1 | - | - |"), "{out}");
    assert!(
        out.contains("Verdict: one configuration ran (X-1): nothing to compare"),
        "{out}"
    );
    assert!(out.contains("| X-1 | ok | 33.76 | ±"), "{out}");
    assert!(out.contains("| X-2 | failed: "), "{out}");
    let reason = std::fs::read_to_string(dir.join("X-2/.sweep-failed")).expect("failure recorded");
    assert!(!reason.trim().is_empty());
    assert!(!dir.join("X-2/.sweep-done").exists());
    for f in ["sweep.md", "sweep.json", "sweep.svg"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    // Run again: X-1 kept, X-2 tried again.
    let (code, _, err) = sweep(&dir, &["--repeat", "1", "--env", "X=1,2", "--", "true"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("X-1: kept") && err.contains("X-2: failed"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_ran_is_an_error() {
    let dir = tmp("none");
    let (code, _, err) = sweep(&dir, &["--env", "NCCL_PROTO=Simple", "--", "true"]);
    assert_eq!(code, 2);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("streamscope: error: no configuration of the sweep ran"),
        "{err}"
    );
    let (code, _, err) = sweep(&dir, &["--env", "NCCL_PROTO", "--", "true"]);
    assert_eq!(code, 2);
    assert!(err.contains("expected NAME=v1,v2"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
