//! `streamscope record` on commands that never touch CUDA: without a
//! collector it refuses to start (or runs untraced with --allow-untraced);
//! a run that wrote no trace says so loudly and exits non-zero unless
//! --allow-untraced; the command's own failing exit code comes back.

use std::process::Command;

/// `record -o DIR [extra...] -- cmd...` with STREAMSCOPE_COLLECTOR set to
/// `collector` (a path that may not exist).
fn record_with(
    dir: &std::path::Path,
    collector: &std::path::Path,
    extra: &[&str],
    cmd: &[&str],
) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .env("STREAMSCOPE_COLLECTOR", collector)
        .arg("record")
        .arg("-o")
        .arg(dir)
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .expect("streamscope runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A file standing for the collector: CUDA_INJECTION64_PATH names it, and
/// a command that never loads CUDA never opens it.
fn stand_in_collector(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).expect("dir");
    let lib = dir.join("libstreamscope_collector.so");
    std::fs::write(&lib, b"").expect("write");
    lib
}

#[test]
fn without_a_collector_record_refuses_to_run_untraced() {
    let dir = temp("nocollector");
    let marker = dir.with_extension("ran");
    let _ = std::fs::remove_file(&marker);
    let touch = format!("touch {}", marker.display());
    let missing = dir.with_extension("missing.so");
    let (code, stderr) = record_with(&dir, &missing, &[], &["sh", "-c", &touch]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("error: no trace can be written") && stderr.contains("--allow-untraced"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the command must not have run");
    // --allow-untraced: it runs, and its exit code comes back.
    let (code, stderr) = record_with(&dir, &missing, &["--allow-untraced"], &["sh", "-c", &touch]);
    assert_eq!(code, 0, "{stderr}");
    assert!(marker.exists(), "the command ran");
    assert!(stderr.contains("no trace was written"), "{stderr}");
    let _ = std::fs::remove_file(&marker);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_program_without_cuda_writes_no_trace_and_record_fails_loudly() {
    let dir = temp("true");
    let lib = stand_in_collector(&temp("true-lib"));
    let (code, stderr) = record_with(&dir, &lib, &[], &["true"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("error: no trace was written"), "{stderr}");
    assert!(dir.is_dir(), "the output directory is created");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, stderr) = record_with(&dir, &lib, &["--allow-untraced"], &["true"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("no trace was written"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(temp("true-lib"));
}

#[test]
fn the_childs_exit_code_comes_back() {
    let dir = temp("exit3");
    let lib = stand_in_collector(&temp("exit3-lib"));
    let (code, stderr) = record_with(&dir, &lib, &[], &["sh", "-c", "echo out; exit 3"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("no trace was written"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(temp("exit3-lib"));
}

#[test]
fn the_child_sees_the_collector_environment() {
    let dir = temp("env");
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .args([
            "record",
            "--allow-untraced",
            "--capture-range",
            "nvtx:step",
            "--delay",
            "2",
            "-o",
        ])
        .arg(&dir)
        .args([
            "--",
            "sh",
            "-c",
            "echo \"$STREAMSCOPE_OUT|$STREAMSCOPE_CAPTURE_RANGE|$STREAMSCOPE_DELAY_S|$STREAMSCOPE_START_MONOTONIC_NS\"",
        ])
        .output()
        .expect("streamscope runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let canon = std::fs::canonicalize(&dir).expect("dir exists");
    let (head, start) = stdout.trim().rsplit_once('|').expect("four fields");
    assert_eq!(head, format!("{}|nvtx:step|2", canon.display()));
    // record's start on CLOCK_MONOTONIC: the origin of --delay for every process.
    let start: i64 = start.parse().expect("a number of ns");
    let now = {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        t.tv_sec * 1_000_000_000 + t.tv_nsec
    };
    assert!(start > 0 && start <= now, "{start} vs {now}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--memory MODE` reaches the Python hooks as STREAMSCOPE_MEMORY; without
/// it the user's own value passes through untouched; a bad mode is refused.
#[test]
fn record_memory_mode_reaches_the_child() {
    let run = |extra: &[&str], user: Option<&str>| {
        let dir = temp("memory-mode");
        let mut c = Command::new(env!("CARGO_BIN_EXE_streamscope"));
        c.args(["record", "--allow-untraced"])
            .args(extra)
            .arg("-o")
            .arg(&dir);
        c.args(["--", "sh", "-c", "echo \"[${STREAMSCOPE_MEMORY-unset}]\""]);
        match user {
            Some(v) => c.env("STREAMSCOPE_MEMORY", v),
            None => c.env_remove("STREAMSCOPE_MEMORY"),
        };
        let out = c.output().expect("streamscope runs");
        let _ = std::fs::remove_dir_all(&dir);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (extra, user, want) in [
        (&["--memory", "lines"][..], None, "[lines]"),
        (&["--memory", "off"][..], Some("1"), "[off]"),
        (&["--memory=on"][..], None, "[on]"),
        (&[][..], None, "[unset]"),
        (&[][..], Some("lines"), "[lines]"),
    ] {
        let (code, stdout, stderr) = run(extra, user);
        assert_eq!(stdout, want, "{extra:?} {user:?}: {stderr}");
        assert_eq!(code, Some(0), "{extra:?}: {stderr}");
    }
    let (code, _, stderr) = run(&["--memory", "stacks"], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--memory"), "{stderr}");
}

#[test]
fn help_warns_about_torch_profiler() {
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .args(["record", "--help"])
        .output()
        .expect("streamscope runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("torch.profiler") && text.contains("one subscriber"),
        "{text}"
    );
}

#[test]
fn a_bad_capture_range_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .args(["record", "--capture-range", "bogus", "--", "true"])
        .output()
        .expect("streamscope runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cudaProfilerApi"));
}

/// Compiles a C file of collector/tests/fake into `dir`; None without cc.
fn compile(
    dir: &std::path::Path,
    src: &str,
    out: &str,
    shared: bool,
) -> Option<std::path::PathBuf> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collector/tests/fake")
        .join(src);
    let target = dir.join(out);
    let mut cc = Command::new("cc");
    if shared {
        cc.args(["-shared", "-fPIC"]);
    }
    let ok = cc
        .arg("-o")
        .arg(&target)
        .arg(&src)
        .arg("-ldl")
        .status()
        .ok()?
        .success();
    ok.then_some(target)
}

/// A test that needs the collector library and a C compiler: outside CI it
/// says why it skips; in CI (where `cargo test --workspace` builds the
/// collector and gcc is installed) a missing piece is a failure.
fn skip_or_fail(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("{why}: skipped");
}

/// The collector library `cargo test --workspace` built: next to the
/// streamscope executable after a `cargo build`, else in deps/ (a test
/// build compiles the cdylib there without copying it up).
fn collector_lib() -> Option<std::path::PathBuf> {
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_streamscope"));
    let dir = exe.parent()?;
    [
        dir.join("libstreamscope_collector.so"),
        dir.join("deps/libstreamscope_collector.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// `streamscope` with the collector it must inject named explicitly.
fn streamscope_with(lib: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_streamscope"));
    c.env("STREAMSCOPE_COLLECTOR", lib);
    c
}

/// The collector library, a fresh temp dir, a fake libcupti and a fake CUDA
/// app built in it.
fn fake_rig(
    name: &str,
) -> Option<(
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
)> {
    let Some(lib) = collector_lib() else {
        skip_or_fail("collector library not built (cargo build -p streamscope-collector)");
        return None;
    };
    let dir = temp(name);
    std::fs::create_dir_all(&dir).expect("temp dir");
    match (
        compile(&dir, "fake_cupti.c", "libfakecupti.so", true),
        compile(&dir, "fake_app.c", "fake_app", false),
    ) {
        (Some(cupti), Some(app)) => Some((lib, dir, cupti, app)),
        _ => {
            skip_or_fail("no C compiler");
            None
        }
    }
}

#[test]
fn a_traced_program_gets_its_trace_and_a_summary() {
    let Some((lib, dir, cupti, app)) = fake_rig("fake") else {
        return;
    };
    let out_dir = dir.join("traces");
    let out = streamscope_with(&lib)
        .args(["record", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&app)
        .env("STREAMSCOPE_CUPTI_LIB", &cupti)
        .env_remove("RANK")
        .output()
        .expect("streamscope runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "the program's exit code: {stderr}"
    );
    assert!(stderr.contains("1 trace file(s)"), "{stderr}");
    assert!(
        !stderr.contains("torch.profiler"),
        "no fixed torch.profiler note on every run: {stderr}"
    );
    assert!(
        stderr.contains("GPU events · overlap"),
        "summary per process: {stderr}"
    );
    let files: Vec<String> = std::fs::read_dir(&out_dir)
        .expect("out dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "only the trace is left (no progress files): {files:?}"
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    assert!(
        files[0].ends_with(".pftrace")
            && (host.is_empty() || files[0].starts_with(&format!("pid-{host}-"))),
        "pid-HOST-N.pftrace: {files:?}"
    );
    // A second run into the same directory is refused and leaves it alone...
    let again = streamscope_with(&lib)
        .args(["record", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&app)
        .env("STREAMSCOPE_CUPTI_LIB", &cupti)
        .env_remove("RANK")
        .output()
        .expect("streamscope runs");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success(), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    let first = out_dir.join(&files[0]);
    let first_bytes = std::fs::read(&first).expect("first trace");
    // ...and with --force records alongside, overwriting nothing.
    let forced = streamscope_with(&lib)
        .args(["record", "--force", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&app)
        .env("STREAMSCOPE_CUPTI_LIB", &cupti)
        .env_remove("RANK")
        .output()
        .expect("streamscope runs");
    let stderr = String::from_utf8_lossy(&forced.stderr);
    assert_eq!(forced.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("2 trace file(s)"), "{stderr}");
    assert_eq!(std::fs::read(&first).expect("first trace"), first_bytes);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_processes_with_the_same_rank_keep_both_traces() {
    let Some((lib, dir, cupti, app)) = fake_rig("samerank") else {
        return;
    };
    let out_dir = dir.join("traces");
    let script = format!("{0}; {0}; exit 0", app.display());
    let out = streamscope_with(&lib)
        .args(["record", "-o"])
        .arg(&out_dir)
        .args(["--", "sh", "-c", &script])
        .env("STREAMSCOPE_CUPTI_LIB", &cupti)
        .env("RANK", "5")
        .output()
        .expect("streamscope runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)
        .expect("out dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        vec!["rank-5-2.pftrace", "rank-5.pftrace"],
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_python_hooks_come_from_a_private_folder_and_know_the_collector() {
    let Some(lib) = collector_lib() else {
        skip_or_fail("collector library not built (cargo build -p streamscope-collector)");
        return;
    };
    let dir = temp("hooks");
    let out = streamscope_with(&lib)
        .args(["record", "-o"])
        .arg(&dir)
        .args([
            "--",
            "sh",
            "-c",
            "d=${PYTHONPATH%%:*}; echo \"$STREAMSCOPE_PY_HOOK_LIB\"; stat -c %a \"$d\"; ls \"$d\"",
        ])
        .output()
        .expect("streamscope runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        vec![lib.to_string_lossy().as_ref(), "700", "sitecustomize.py"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The lines of examples/sync_zoo.py marked `# SYNC: kind` (each must be
/// flagged) and `# NOT-A-SYNC: kind` (must not be), and the line range of
/// its step loop.
fn sync_zoo_marks(text: &str) -> (Vec<u32>, Vec<u32>, (u32, u32)) {
    let (mut syncs, mut not) = (Vec::new(), Vec::new());
    let (mut first, mut last) = (0, 0);
    for (i, l) in text.lines().enumerate() {
        let n = i as u32 + 1;
        if l.contains("  # SYNC: ") {
            syncs.push(n);
        } else if l.contains("  # NOT-A-SYNC: ") {
            not.push(n);
        }
        if l.trim_start().starts_with("while step < args.steps") {
            first = n;
        }
        if l.contains("step_s.append(") {
            last = n;
        }
    }
    (syncs, not, (first, last))
}

#[test]
fn sync_zoo_marks_are_found() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("examples/sync_zoo.py")).expect("sync_zoo.py");
    let (syncs, not, (first, last)) = sync_zoo_marks(&text);
    assert!(syncs.len() >= 17, "{syncs:?}");
    assert_eq!(not.len(), 1);
    assert!(first > 0 && last > first);
    assert!(syncs.iter().chain(&not).all(|l| (first..=last).contains(l)));
    // One sync per line: no line is marked twice.
    let mut uniq = syncs.clone();
    uniq.dedup();
    assert_eq!(uniq, syncs);
}

/// traces/sync-zoo-h200/ (recorded on an H200 by scripts/gpu/truth.sh, then
/// committed): the report's host-sync table is pinned to sync_zoo.py's
/// marked lines. Every planted sync is flagged at its own line, the pinned
/// non-blocking copy is not, nothing else inside the step loop is, no line
/// merges with another, and every step ends with an optimizer-step range.
/// Skipped until the trace is committed.
#[test]
fn sync_zoo_trace_flags_every_planted_line_and_nothing_else() {
    use streamscope_core::analysis::{analyze, AnalysisOptions};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("traces/sync-zoo-h200");
    if !dir.is_dir() {
        eprintln!("traces/sync-zoo-h200 not recorded yet: skipped");
        return;
    }
    let text = std::fs::read_to_string(root.join("examples/sync_zoo.py")).expect("sync_zoo.py");
    let (syncs, not, (first, last)) = sync_zoo_marks(&text);
    let trace = streamscope_core::load::load_paths(std::slice::from_ref(&dir)).expect("loads");
    let report = analyze(&trace, &AnalysisOptions::default());
    let line_of = |w: &streamscope_core::analysis::SyncGroup| -> Option<u32> {
        let loc = if w.python.is_empty() {
            &w.where_
        } else {
            &w.python
        };
        let rest = loc.split("sync_zoo.py:").nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let mut flagged = std::collections::BTreeMap::<u32, Vec<String>>::new();
    let mut elsewhere = Vec::new();
    for w in &report.sync_warnings {
        match line_of(w) {
            Some(l) => flagged.entry(l).or_default().push(w.pattern.clone()),
            None => elsewhere.push(format!("{} {} at {}", w.pattern, w.api, w.where_)),
        }
    }
    let missing: Vec<u32> = syncs
        .iter()
        .copied()
        .filter(|l| !flagged.contains_key(l))
        .collect();
    assert!(
        missing.is_empty(),
        "planted syncs not flagged at their line: {missing:?}; flagged {flagged:?}"
    );
    for l in &not {
        assert!(
            !flagged.contains_key(l),
            "the pinned non-blocking copy (line {l}) is flagged"
        );
    }
    let extra: Vec<u32> = flagged
        .keys()
        .copied()
        .filter(|l| (first..=last).contains(l) && !syncs.contains(l))
        .collect();
    assert!(
        extra.is_empty(),
        "unplanted lines flagged inside the loop: {extra:?}"
    );
    assert!(
        elsewhere.is_empty(),
        "warnings without a sync_zoo.py line: {elsewhere:?}"
    );
    // The trace's optimizer-step ranges: one per step (12 steps recorded).
    let name = streamscope_core::protocol::OPTIMIZER_STEP_RANGE;
    let steps = (0..trace.slices().len())
        .filter(|&i| trace.str(trace.slices().name()[i]) == name)
        .count();
    assert_eq!(steps, 12, "optimizer-step ranges");
}

/// `record` names the collector as NCCL's profiler plugin (absolute path),
/// keeps a plugin the user named (saying so in one line), and sets nothing
/// with --no-nccl-plugin.
#[test]
fn record_sets_the_nccl_profiler_plugin_unless_one_is_named() {
    let Some(lib) = collector_lib() else {
        skip_or_fail("no collector library");
        return;
    };
    let run = |name: &str, extra: &[&str], user: Option<&str>| {
        let dir = temp(name);
        let mut c = streamscope_with(&lib);
        c.arg("record").args(extra).arg("-o").arg(&dir);
        c.args(["--", "sh", "-c", "echo \"[$NCCL_PROFILER_PLUGIN]\""]);
        match user {
            Some(v) => c.env("NCCL_PROFILER_PLUGIN", v),
            None => c.env_remove("NCCL_PROFILER_PLUGIN"),
        };
        let out = c.output().expect("streamscope runs");
        let _ = std::fs::remove_dir_all(&dir);
        (
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (stdout, _) = run("nccl-set", &[], None);
    let abs = std::path::absolute(&lib).expect("absolute");
    assert_eq!(stdout, format!("[{}]", abs.display()));
    let (stdout, stderr) = run("nccl-user", &[], Some("inspector"));
    assert_eq!(stdout, "[inspector]");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("NCCL_PROFILER_PLUGIN=inspector is already set"))
            .count(),
        1,
        "{stderr}"
    );
    let (stdout, stderr) = run("nccl-off", &["--no-nccl-plugin"], None);
    assert_eq!(stdout, "[]");
    assert!(!stderr.contains("NCCL_PROFILER_PLUGIN"), "{stderr}");
}

#[test]
fn gpu_metrics_without_a_gpu_record_the_job_anyway() {
    // No GPU here (CI): the sampler is missing or ends at once; the job
    // still runs and is recorded, with one line saying why there are no
    // metrics.
    let dir = temp("gpu-metrics-none");
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .args(["record", "--allow-untraced", "-o"])
        .arg(&dir)
        .args(["--gpu-metrics", "--gpu-metrics-hz", "5k", "--", "true"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The sampler says why ("GPU metrics unavailable: libcuda.so.1 not
    // found ..."), or `record` does when the sampler is missing.
    assert_eq!(
        err.lines().filter(|l| l.contains("GPU metrics")).count(),
        1,
        "{err}"
    );
    // No feed is left behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().contains("gpu-metrics")),
        "{left:?}"
    );
    // A bad rate is refused before anything runs.
    let bad = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .args(["record", "-o"])
        .arg(&dir)
        .args(["--gpu-metrics", "--gpu-metrics-hz", "7", "--", "true"])
        .output()
        .expect("run");
    assert!(!bad.status.success());
    // The flags are in the help.
    let help = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .args(["record", "--help"])
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--gpu-metrics"), "{help}");
    assert!(help.contains("--gpu-metrics-hz"), "{help}");
}
