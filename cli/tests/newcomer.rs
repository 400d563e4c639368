//! A newcomer's path through the `streamscope` binary, one test per trap
//! met on a fresh clone (issue 31): the first screen of `report`, the demo
//! script, `record` after the demo, mixed runs, nested folders, no
//! display, help texts, error lines and `info`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_streamscope"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn trace(rel: &str) -> PathBuf {
    repo().join("traces").join(rel)
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("runs");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, so, se)
}

/// A fresh folder under cargo's temporary folder for integration tests.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("newcomer-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let (o, so, se) = run(cmd.args(["--format", "json"]));
    assert!(o.status.success(), "{se}");
    serde_json::from_str(&so).expect("JSON")
}

#[test]
fn the_headline_of_the_bundled_demo_fits_100_columns() {
    // What scripts/demo.sh prints: `report` on the bundled torch FSDP2 trace.
    let (o, text, se) = run(bin().arg("report").arg(trace("torch-fsdp2-h200x2")));
    assert!(o.status.success(), "{se}");
    for l in text.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert!(text.lines().count() <= 40, "one screen:\n{text}");
    assert!(text.contains("step ms: median (min-max)"), "{text}");
    assert!(text.contains("costliest sync, rank 0:"), "{text}");
    assert!(text.contains("top kernel, rank 0:"), "{text}");
    assert!(
        text.contains("--full"),
        "says where the tables are:\n{text}"
    );
    // No table of the full report, and no µs, on the first screen.
    assert!(!text.contains("Per step ("), "{text}");
    assert!(!text.contains(" us") && !text.contains("µs"), "{text}");
}

#[test]
fn the_report_gives_the_median_step_time_in_ms_everywhere() {
    let dir = trace("fsdp-ref-overlap-h200x2");
    let v = json(bin().arg("report").arg(&dir));
    let steps = v["steps"].as_array().expect("steps");
    for r in v["ranks"].as_array().expect("ranks") {
        let rank = r["rank"].as_u64().expect("rank");
        let label = r["window"]["steps"].as_array().expect("window steps");
        // The median of the window's step durations, recomputed here.
        let mut d: Vec<f64> = steps
            .iter()
            .filter(|s| s["rank"].as_u64() == Some(rank) && label.contains(&s["step"]))
            .map(|s| s["duration_us"].as_f64().expect("duration") / 1000.0)
            .collect();
        d.sort_by(f64::total_cmp);
        let n = d.len();
        assert!(n >= 3, "steady-state steps");
        let median = if n % 2 == 1 {
            d[n / 2]
        } else {
            (d[n / 2 - 1] + d[n / 2]) / 2.0
        };
        let got = r["median_step_ms"]
            .as_f64()
            .expect("ranks[].median_step_ms");
        assert!((got - median).abs() < 1e-9, "{got} vs {median}");
        let h = &v["headline"]["ranks"][rank as usize];
        assert_eq!(h["median_step_ms"].as_f64(), Some(got));
        assert_eq!(h["min_step_ms"].as_f64(), Some(d[0]));
        assert_eq!(h["max_step_ms"].as_f64(), Some(d[n - 1]));
        // The top kernels: most time first, shares of the GPU time.
        let top = r["top_kernels"].as_array().expect("top_kernels");
        assert!(!top.is_empty());
        let totals: Vec<f64> = top
            .iter()
            .map(|k| k["total_ms"].as_f64().unwrap_or(-1.0))
            .collect();
        assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
        let share: f64 = top
            .iter()
            .map(|k| k["share_pct"].as_f64().unwrap_or(0.0))
            .sum();
        assert!(share > 50.0 && share <= 100.0 + 1e-9, "{share}");
        assert_eq!(h["top_kernel"]["name"], top[0]["name"]);
    }
    // The text headline prints the same median, in ms.
    let (_, text, _) = run(bin().arg("report").arg(&dir));
    let m = v["ranks"][0]["median_step_ms"].as_f64().unwrap_or(0.0);
    assert!(text.contains(&format!("0     {m:.2} (")), "{m:.2}:\n{text}");
    // --full: the tables follow, times in ms, the top kernels among them.
    let (_, full, _) = run(bin().arg("report").arg(&dir).arg("--full"));
    assert!(full.starts_with(&text[..text.find("\n\n").unwrap_or(0)]));
    for title in [
        "Overlap and temporal breakdown",
        "Top kernels",
        "Per step",
        "Collectives",
    ] {
        assert!(full.contains(title), "{title}");
    }
    for l in full.lines() {
        assert!(
            !l.contains(" us ") && !l.ends_with(" us") && !l.contains("µs"),
            "{l}"
        );
    }
    // Markdown has the top kernels too.
    let (_, md, _) = run(bin().arg("report").arg(&dir).args(["--format", "markdown"]));
    assert!(md.contains("### Top kernels"), "{md}");
}

#[test]
fn a_one_gpu_trace_prints_no_empty_sections() {
    let (o, full, se) = run(bin()
        .arg("report")
        .arg(trace("sync-zoo-h200"))
        .arg("--full"));
    assert!(o.status.success(), "{se}");
    // No all-gather, no stall: no prefetch table; start-up and teardown
    // syncs summed in one row each.
    assert!(!full.contains("all-gather prefetch"), "{full}");
    assert!(!full.contains("Who waits for whom"), "{full}");
    let after = full
        .lines()
        .filter(|l| l.starts_with("0 ") && l.contains(" after "))
        .count();
    assert!(after <= 1, "{after} rows after the window:\n{full}");
}

#[test]
fn the_demo_script_works_with_any_target_dir_and_builds_the_collector() {
    // A stand-in cargo that logs its arguments and reports the binary built
    // into an unusual target folder, as cargo's JSON messages do.
    let dir = scratch("demo");
    let target = dir.join("elsewhere");
    let release = target.join("release");
    std::fs::create_dir_all(&release).expect("mkdir");
    let exe = release.join("streamscope");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_streamscope"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_streamscope"), &exe).expect("copy the binary");
    }
    let fake = dir.join("bin");
    std::fs::create_dir_all(&fake).expect("mkdir");
    let log = dir.join("cargo-args");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> '{}'\necho '{{\"reason\":\"compiler-artifact\",\"executable\":\"{}\"}}'\n",
        log.display(),
        exe.display()
    );
    let cargo = fake.join("cargo");
    std::fs::write(&cargo, script).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (o, so, se) = run(Command::new("bash")
        .arg(repo().join("scripts/demo.sh"))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", &target)
        .env("STREAMSCOPE_DEMO_VIEW", "0"));
    assert!(o.status.success(), "{se}\n{so}");
    assert!(so.contains("step ms: median"), "{so}");
    let args = std::fs::read_to_string(&log).expect("cargo was called");
    assert!(args.contains("-p streamscope-collector"), "{args}");
    assert!(args.contains("--release"), "{args}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_finds_the_collector_of_another_profile_beside_its_binary() {
    // The demo builds a release streamscope; the collector built after it
    // (`cargo build -p streamscope-collector`) lands in target/debug.
    let dir = scratch("profiles");
    std::fs::write(
        dir.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .expect("tag");
    let (release, debug) = (dir.join("release"), dir.join("debug"));
    std::fs::create_dir_all(&release).expect("mkdir");
    std::fs::create_dir_all(&debug).expect("mkdir");
    let exe = release.join("streamscope");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_streamscope"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_streamscope"), &exe).expect("copy the binary");
    }
    let lib = debug.join("libstreamscope_collector.so");
    std::fs::write(&lib, b"").expect("stand-in collector");
    let out_dir = dir.join("traces");
    let (_, so, se) = run(Command::new(&exe)
        .env_remove("STREAMSCOPE_COLLECTOR")
        .args(["record", "-o"])
        .arg(&out_dir)
        .args(["--", "sh", "-c", "echo \"$CUDA_INJECTION64_PATH\""]));
    assert_eq!(so.trim(), lib.display().to_string(), "{se}");
    // No collector anywhere: the hint names the build for this profile.
    std::fs::remove_file(&lib).expect("rm");
    let (o, _, se) = run(Command::new(&exe)
        .env_remove("STREAMSCOPE_COLLECTOR")
        .args(["record", "-o"])
        .arg(&out_dir)
        .args(["--", "true"]));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("cargo build --release -p streamscope-collector"),
        "{se}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_runs_are_refused_unless_merged_and_compare_is_named() {
    let (a, b) = (
        trace("fsdp-ref-overlap-h200x2"),
        trace("fsdp-ref-serial-h200x2"),
    );
    // Overlapping ranks.
    let (o, _, se) = run(bin().arg("report").arg(&a).arg(&b));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("different runs") && se.contains("rank 0"),
        "{se}"
    );
    assert!(se.contains("streamscope compare"), "{se}");
    assert_eq!(se.lines().count(), 1, "{se}");
    let (o, so, se) = run(bin().arg("report").arg(&a).arg(&b).arg("--merge"));
    assert!(o.status.success(), "{se}");
    assert!(so.starts_with("streamscope report: 4 rank(s)"), "{so}");
    // Disjoint ranks of two runs made one after the other.
    let (o, _, se) = run(bin()
        .arg("report")
        .arg(trace("torch-fsdp2-h200x2/rank-0.pftrace.gz"))
        .arg(trace("torch-fsdp2-plain-h200x2/rank-1.pftrace.gz")));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("started") && se.contains("after"), "{se}");
    // The two files of one run are one run.
    let (o, _, se) = run(bin()
        .arg("report")
        .arg(a.join("rank-0.pftrace.gz"))
        .arg(a.join("rank-1.pftrace.gz")));
    assert!(o.status.success(), "{se}");
}

#[test]
fn a_folder_of_trace_folders_lists_them() {
    let (o, _, se) = run(bin().arg("report").arg(trace("fsdp-ref-prefetch-h200x2")));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("prefetch-0"), "{se}");
    let (o, _, se) = run(bin().arg("report").arg(repo().join("traces")));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("fsdp-ref-overlap-h200x2")
            && se.contains("fsdp-ref-prefetch-h200x2/prefetch-0"),
        "{se}"
    );
}

#[test]
fn view_without_a_display_suggests_a_screenshot_in_one_line() {
    let (o, _, se) = run(bin()
        .arg("view")
        .arg(trace("sync-zoo-h200"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET"));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert_eq!(se.trim_end().lines().count(), 1, "{se}");
    assert!(se.contains("--screenshot"), "{se}");
    assert!(!se.contains(".cargo") && !se.contains("winit"), "{se}");
}

/// The keys a help text lists after "JSON keys (--format json): ".
fn help_keys(cmd: &str) -> Vec<String> {
    let (_, help, _) = run(bin().args([cmd, "--help"]));
    let line = help
        .split("JSON keys (--format json): ")
        .nth(1)
        .unwrap_or_else(|| panic!("{cmd} --help lists no JSON keys:\n{help}"));
    let list = line.split('.').next().unwrap_or("");
    list.split(',')
        .map(|k| k.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|k| !k.is_empty())
        .collect()
}

#[test]
fn help_texts_list_the_keys_the_json_has() {
    let a = trace("fsdp-ref-serial-h200x2");
    let b = trace("fsdp-ref-overlap-h200x2");
    let cases: Vec<(&str, serde_json::Value)> = vec![
        ("report", json(bin().arg("report").arg(&b))),
        ("compare", json(bin().arg("compare").arg(&a).arg(&b))),
        ("whatif", json(bin().arg("whatif").arg(&b))),
    ];
    for (cmd, v) in cases {
        let listed = help_keys(cmd);
        let have: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
        let mut l = listed.clone();
        l.sort();
        let mut h = have.clone();
        h.sort();
        assert_eq!(l, h, "{cmd} --help lists {listed:?}, the JSON has {have:?}");
    }
}

#[test]
fn errors_name_the_path_once() {
    let missing = scratch("errors").join("no-such-trace");
    let name = missing.display().to_string();
    for cmd in ["report", "info", "whatif", "export"] {
        let mut c = bin();
        c.arg(cmd).arg(&missing);
        if cmd == "export" {
            c.args(["--to", "perfetto", "-o"])
                .arg(missing.with_extension("out"));
        }
        let (o, _, se) = run(&mut c);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {se}");
        assert_eq!(se.matches(&name).count(), 1, "{cmd}: {se}");
        assert_eq!(se.trim_end().lines().count(), 1, "{cmd}: {se}");
    }
}

#[test]
fn info_says_each_fact_once() {
    let (o, so, se) = run(bin().arg("info").arg(trace("sync-zoo-h200")));
    assert!(o.status.success(), "{se}");
    let line = so
        .lines()
        .find(|l| l.starts_with("rank 0"))
        .unwrap_or_else(|| panic!("{so}"));
    assert_eq!(line.matches("rank 0").count(), 1, "{line}");
    let pid = line
        .split(" · ")
        .find_map(|p| p.strip_prefix("pid "))
        .expect("a pid");
    assert_eq!(line.matches(pid).count(), 1, "{line}");
    // Counts agree in number.
    assert!(
        !so.contains(" 1 slices") && !so.contains(" 1 kernels"),
        "{so}"
    );
    assert!(so.contains(": 1 slice\n"), "{so}");
}
