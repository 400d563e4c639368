//! The `streamscope` binary end to end: export, info and report on real
//! traces, and bad input (one error line naming the file, exit code 2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_streamscope"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn peer(rel: &str) -> PathBuf {
    repo().join("core/tests/data/hta").join(rel)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("streamscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("runs");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, so, se)
}

fn kernel_count(info: &str) -> usize {
    info.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("kernel")
                .map(|n| n.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

#[test]
fn export_kineto_to_perfetto_keeps_kernel_counts() {
    let src = peer("nccl_parser_config/nccl_data.json.gz");
    let out = tmp("nccl.pftrace");
    let (o, _, se) = run(bin()
        .args(["export"])
        .arg(&src)
        .args(["--to", "perfetto", "-o"])
        .arg(&out));
    assert!(o.status.success(), "{se}");
    let (_, from_kineto, _) = run(bin().arg("info").arg(&src));
    let (o, from_pftrace, se) = run(bin().arg("info").arg(&out));
    assert!(o.status.success(), "{se}");
    assert_eq!(kernel_count(&from_kineto), 2700, "{from_kineto}");
    assert_eq!(kernel_count(&from_pftrace), kernel_count(&from_kineto));
    assert!(from_pftrace.contains("stream 40"), "{from_pftrace}");
}

#[test]
fn export_chrome_json_is_json() {
    let out = tmp("fsdp.json");
    let src = repo().join("traces/fsdp-ref-overlap-h200x2");
    let (o, _, se) = run(bin()
        .args(["export"])
        .arg(&src)
        .args(["--to", "chrome-json", "-o"])
        .arg(&out));
    assert!(o.status.success(), "{se}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("valid JSON");
    assert!(v["traceEvents"].as_array().is_some_and(|a| a.len() > 1000));
}

#[test]
fn report_json_on_the_bundled_fsdp_ref_traces() {
    let overlap = repo().join("traces/fsdp-ref-overlap-h200x2");
    let serial = repo().join("traces/fsdp-ref-serial-h200x2");
    let json = |dir: &Path| -> serde_json::Value {
        let (o, so, se) = run(bin().arg("report").arg(dir).args(["--format", "json"]));
        assert!(o.status.success(), "{se}");
        serde_json::from_str(&so).expect("report JSON")
    };
    let (o, s) = (json(&overlap), json(&serial));
    for r in o["ranks"].as_array().expect("ranks") {
        // Prefetched all-gathers and overlapped reduce-scatters hide most communication.
        assert!(r["overlap_pct"].as_f64().expect("overlap") > 50.0, "{r}");
    }
    for r in s["ranks"].as_array().expect("ranks") {
        // One stream: nothing can overlap.
        assert!(r["overlap_pct"].as_f64().expect("overlap") < 1.0, "{r}");
    }
    assert_eq!(o["dropped_records"], 0);
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let not_trace = tmp("notes.txt");
    std::fs::write(&not_trace, "just some notes\n").expect("write");
    let empty_dir = tmp("empty-dir");
    std::fs::create_dir_all(&empty_dir).expect("dir");
    let truncated_json = tmp("cut.json");
    std::fs::write(
        &truncated_json,
        b"{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1",
    )
    .expect("write");
    for (args, needle) in [
        (
            vec!["info".into(), not_trace.display().to_string()],
            "notes.txt",
        ),
        (
            vec!["info".into(), empty_dir.display().to_string()],
            "empty-dir",
        ),
        (
            vec!["report".into(), truncated_json.display().to_string()],
            "cut.json",
        ),
        (
            vec!["info".into(), "/no/such/trace.pftrace".into()],
            "/no/such/trace.pftrace",
        ),
        (
            vec![
                "export".into(),
                repo()
                    .join("traces/fsdp-ref-serial-h200x2")
                    .display()
                    .to_string(),
                "--to".into(),
                "perfetto".into(),
                "-o".into(),
                "/no/such/dir/out.pftrace".into(),
            ],
            "/no/such/dir/out.pftrace",
        ),
    ] {
        let (o, _, se) = run(bin().args(&args));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {se}");
        let lines: Vec<&str> = se.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {se}");
        assert!(
            lines[0].starts_with("streamscope: error: ") && lines[0].contains(needle),
            "{se}"
        );
        assert!(!se.contains("panicked"), "{se}");
    }
}

#[test]
fn truncated_pftrace_loads_with_a_warning() {
    let src = repo().join("traces/fsdp-ref-overlap-h200x2/rank-0.pftrace.gz");
    let bytes = inflate(&std::fs::read(&src).expect("read"));
    let cut = tmp("cut.pftrace");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let (o, so, se) = run(bin().arg("info").arg(&cut));
    assert!(o.status.success(), "{se}");
    assert!(se.contains("truncated at byte"), "{se}");
    let slices: usize = so
        .split_whitespace()
        .skip_while(|w| *w != "slices:")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(slices > 1000, "{so}");
}

fn inflate(gz: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .expect("inflates");
    out
}

#[test]
fn gzip_traces_read_export_and_fail_cleanly() {
    let src = repo().join("traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz");
    let gz = std::fs::read(&src).expect("read");
    let plain = tmp("gz-plain.pftrace");
    std::fs::write(&plain, inflate(&gz)).expect("write");
    let (o, a, se) = run(bin().arg("info").arg(&src));
    assert!(o.status.success(), "{se}");
    let (o, b, se) = run(bin().arg("info").arg(&plain));
    assert!(o.status.success(), "{se}");
    assert_eq!(a, b);
    // Export to a .gz name writes gzip, which reads back the same.
    let out = tmp("gz-export.pftrace.gz");
    let _ = std::fs::remove_file(&out);
    let (o, _, se) = run(bin()
        .arg("export")
        .arg(&plain)
        .args(["--to", "perfetto", "-o"])
        .arg(&out));
    assert!(o.status.success(), "{se}");
    assert!(std::fs::read(&out)
        .expect("read")
        .starts_with(&[0x1f, 0x8b]));
    let (o, c, se) = run(bin().arg("info").arg(&out));
    assert!(o.status.success(), "{se}");
    assert_eq!(a, c);
    assert_eq!(report_json(&[&src])["ranks"], report_json(&[&out])["ranks"]);
    // Cut before its first packet: one line naming the file, exit 2.
    let cut = tmp("gz-cut.pftrace.gz");
    std::fs::write(&cut, &gz[..20]).expect("write");
    let (o, _, se) = run(bin().arg("info").arg(&cut));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("gz-cut.pftrace.gz") && se.contains("gzip"),
        "{se}"
    );
    assert_eq!(se.trim_end().lines().count(), 1, "{se}");
    assert!(!se.contains("panicked"), "{se}");
    // Gzip of text: not a trace.
    let text = tmp("gz-text.pftrace.gz");
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut z, b"just some words").expect("gzip");
    std::fs::write(&text, z.finish().expect("gzip")).expect("write");
    let (o, _, se) = run(bin().arg("info").arg(&text));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("gz-text.pftrace.gz") && se.contains("not a trace"),
        "{se}"
    );
}

fn report_json(paths: &[&Path]) -> serde_json::Value {
    let (o, so, se) = run(bin().arg("report").args(paths).args(["--format", "json"]));
    assert!(o.status.success(), "{se}");
    serde_json::from_str(&so).expect("report JSON")
}

#[test]
fn info_reads_a_pipe() {
    // A gzip file through a pipe: read once, inflated as it is read.
    let src = repo().join("traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz");
    let (o, so, se) = run(Command::new("bash").arg("-c").arg(format!(
        "'{}' info <(cat '{}')",
        env!("CARGO_BIN_EXE_streamscope"),
        src.display()
    )));
    assert!(o.status.success(), "{se}");
    // The same counts as the file read directly.
    let (d, direct, de) = run(bin().arg("info").arg(&src));
    assert!(d.status.success(), "{de}");
    let slices = |s: &str| {
        s.split("slices: ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_string)
    };
    assert!(slices(&direct).is_some(), "{direct}");
    assert_eq!(slices(&so), slices(&direct), "{so}");
}

#[test]
fn chrome_json_export_reports_what_its_source_reports() {
    let src = repo().join("traces/fsdp-ref-serial-h200x2");
    let out = tmp("serial-roundtrip.json");
    let _ = std::fs::remove_file(&out);
    let (o, _, se) = run(bin()
        .arg("export")
        .arg(&src)
        .args(["--to", "chrome-json", "-o"])
        .arg(&out));
    assert!(o.status.success(), "{se}");
    let (_, a, _) = run(bin().arg("info").arg(&src));
    let (o, b, se) = run(bin().arg("info").arg(&out));
    assert!(o.status.success(), "{se}");
    // Was one process, 3,438 of 34,932 slices and no flows.
    assert_eq!(a, b);
    let (ra, rb) = (report_json(&[&src]), report_json(&[&out]));
    assert_eq!(ra["ranks"], rb["ranks"]);
}

#[test]
fn export_refuses_to_overwrite_or_to_write_into_its_input() {
    let src = repo().join("traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz");
    // A folder of its own: the other tests of this binary write their
    // exports (and their temporary files) beside each other at the same time.
    let mine = tmp("refuse");
    std::fs::create_dir_all(&mine).expect("dir");
    let out = mine.join("refuse.pftrace");
    std::fs::write(&out, b"precious").expect("write");
    let export = |input: &Path, output: &Path, force: bool| {
        let mut c = bin();
        c.arg("export")
            .arg(input)
            .args(["--to", "perfetto", "-o"])
            .arg(output);
        if force {
            c.arg("--force");
        }
        run(&mut c)
    };
    let (o, _, se) = export(&src, &out, false);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("already exists") && se.contains("--force"),
        "{se}"
    );
    assert_eq!(std::fs::read(&out).expect("read"), b"precious");
    let (o, _, se) = export(&src, &out, true);
    assert!(o.status.success(), "{se}");
    assert_ne!(std::fs::read(&out).expect("read"), b"precious");
    // Its own input, even with --force.
    let (o, _, se) = export(&out, &out, true);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("is an input"), "{se}");
    // A new file inside an input directory would show its ranks twice.
    let dir = tmp("ranks-dir");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::copy(&src, dir.join("rank-0.pftrace.gz")).expect("copy");
    let (o, _, se) = export(&dir, &dir.join("merged.pftrace"), true);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("inside input directory"), "{se}");
    assert!(!dir.join("merged.pftrace").exists());
    // No temporary files left anywhere.
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().expect("dir"))
        .expect("ls")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn exporting_a_trace_without_processes_is_an_error() {
    // A Perfetto file with one packet that defines nothing.
    let src = tmp("nothing.pftrace");
    std::fs::write(&src, [0x0a, 0x02, 0x50, 0x01]).expect("write");
    let out = tmp("nothing-out.pftrace");
    let (o, _, se) = run(bin()
        .arg("export")
        .arg(&src)
        .args(["--to", "perfetto", "-o"])
        .arg(&out));
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(se.contains("nothing to write"), "{se}");
    assert!(!out.exists());
}

#[test]
fn info_on_timestamps_near_the_ends_of_i64_does_not_wrap() {
    let src = tmp("edges.json");
    std::fs::write(
        &src,
        br#"{"traceEvents":[
      {"ph":"X","cat":"cpu_op","name":"early","pid":1,"tid":1,"ts":-9223372036854775.8,"dur":1},
      {"ph":"X","cat":"cpu_op","name":"late","pid":1,"tid":1,"ts":9223372036854775.8,"dur":1000}
    ]}"#,
    )
    .expect("write");
    let (o, so, se) = run(bin().arg("info").arg(&src));
    assert!(o.status.success(), "{se}");
    let span = so
        .lines()
        .find(|l| l.starts_with("time span: "))
        .expect("a span");
    assert!(!span.starts_with("time span: -"), "{span}");
}

#[test]
fn compare_two_runs_and_its_errors() {
    let a = repo().join("traces/fsdp-ref-serial-h200x2");
    let b = repo().join("traces/fsdp-ref-overlap-h200x2");
    let (out, so, se) = run(bin().args(["compare", "--format", "json"]).arg(&a).arg(&b));
    assert!(out.status.success(), "{se}");
    let v: serde_json::Value = serde_json::from_str(&so).expect("json");
    let ranks = v["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2);
    assert!(ranks
        .iter()
        .all(|r| r["step_delta_us"].as_f64() < Some(0.0)));
    let (out, so, _) = run(bin()
        .args(["compare", "--format", "markdown"])
        .arg(&a)
        .arg(&b));
    assert!(out.status.success());
    assert!(
        so.starts_with("## streamscope compare") && so.contains("| rank |"),
        "{so}"
    );
    // A rank in neither run: one line, exit 2.
    let (out, _, se) = run(bin().args(["compare", "--rank", "7"]).arg(&a).arg(&b));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        se.contains("rank 7") && se.trim().lines().count() == 1,
        "{se}"
    );
    // Not a trace: the file is named.
    let bad = tmp("not-a-trace.json");
    std::fs::write(&bad, b"hello").expect("write");
    let (out, _, se) = run(bin().arg("compare").arg(&a).arg(&bad));
    assert_eq!(out.status.code(), Some(2));
    assert!(se.contains("not-a-trace.json"), "{se}");
}
