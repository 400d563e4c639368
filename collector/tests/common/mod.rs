//! What the collector's test binaries share: the child-process marker, the
//! rig (a fresh folder with the stand-in libcupti compiled into it) and
//! the collector cdylib cargo built.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the re-run test binary that plays the traced process.
pub const CHILD: &str = "STREAMSCOPE_FAKE_CHILD";

/// Compiles the fake libcupti; None when there is no C compiler.
fn fake_cupti(dir: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake/fake_cupti.c");
    let so = dir.join("libfakecupti.so");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .ok()?
        .success();
    ok.then_some(so)
}

/// The test's folder (`ss-PREFIX-NAME-PID`, emptied) and the fake libcupti
/// built into it; None in the child process (it runs the `child_*`
/// functions instead) and where no C compiler is found, which CI (gcc,
/// python3 and the cdylib are there) refuses.
pub fn rig(prefix: &str, name: &str) -> Option<(PathBuf, PathBuf)> {
    if std::env::var_os(CHILD).is_some() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("ss-{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let Some(so) = fake_cupti(&dir) else {
        assert!(std::env::var_os("CI").is_none(), "no C compiler");
        eprintln!("no C compiler: skipped");
        return None;
    };
    Some((dir, so))
}

/// The collector cdylib: the newer of target/debug (a `cargo build`) and
/// the one a test build leaves in target/debug/deps beside the test.
pub fn cdylib() -> Option<PathBuf> {
    let deps = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let up = deps.parent()?.join("libstreamscope_collector.so");
    [up, deps.join("libstreamscope_collector.so")]
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
}
