//! Rank-set summaries (`report --summary-out`) as a hostile user hands
//! them back (issue 32, D8 and the smaller summary defects): damaged
//! content is refused by its checksum, version fields are read as they
//! are, a summary written again with spaces still merges, a fault is
//! blamed on its own file, and a report that breaks its invariants is
//! refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_streamscope"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn dir(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "streamscope-summaries-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("runs");
    (
        out.clone(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The summary of `input`, written to `out`.
fn summarize(input: &Path, out: &Path) {
    let (o, _, se) = run(bin().args(["report", "--summary-out"]).arg(out).arg(input));
    assert!(o.status.success(), "{se}");
}

fn merge(paths: &[&Path]) -> (Output, String, String) {
    run(bin().arg("report").args(paths).args(["--format", "json"]))
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("JSON")
}

/// The checksum a summary states for `v`'s content: CRC-32 of
/// `[options, files]` as compact JSON with sorted keys.
fn checksum(v: &serde_json::Value) -> String {
    let mut crc = flate2::Crc::new();
    crc.update(&serde_json::to_vec(&[&v["options"], &v["files"]]).expect("JSON"));
    format!("{:08x}", crc.sum())
}

#[test]
fn a_flipped_digit_is_caught_by_the_checksum() {
    let d = dir("flip");
    let s = d.join("a.summary");
    summarize(&repo().join("traces/fsdp-ref-nccl-h200x2"), &s);
    let (o, good, se) = merge(&[&s]);
    assert!(o.status.success(), "{se}");
    let text = std::fs::read_to_string(&s).expect("read");
    // One digit of a slice count flipped.
    let at = text.find("\"slices\":").expect("a slice count") + "\"slices\":".len();
    let mut bytes = text.into_bytes();
    bytes[at] = if bytes[at] == b'9' {
        b'1'
    } else {
        bytes[at] + 1
    };
    std::fs::write(&s, &bytes).expect("write");
    let (o, so, se) = merge(&[&s]);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(so.is_empty(), "nothing printed: {so}");
    assert!(se.contains("a.summary") && se.contains("checksum"), "{se}");
    assert!(!good.is_empty());
}

#[test]
fn a_summary_written_again_with_spaces_merges_as_before() {
    let d = dir("pretty");
    let s = d.join("a.summary");
    summarize(&repo().join("traces/fsdp-ref-nccl-h200x2"), &s);
    let (o, before, se) = merge(&[&s]);
    assert!(o.status.success(), "{se}");
    let pretty = d.join("pretty.summary");
    let text = serde_json::to_string_pretty(&json(&s)).expect("JSON");
    std::fs::write(&pretty, format!("\n  {text}\n")).expect("write");
    let (o, after, se) = merge(&[&pretty]);
    assert!(o.status.success(), "{se}");
    assert_eq!(before, after);
}

#[test]
fn version_fields_are_read_as_they_are() {
    let d = dir("versions");
    let s = d.join("a.summary");
    summarize(&repo().join("traces/fsdp-ref-nccl-h200x2"), &s);
    let v = json(&s);
    for (version, says) in [
        (
            Some(serde_json::json!(1)),
            "summary version 1; this build reads version 3",
        ),
        (Some(serde_json::json!(2)), "summary version 2"),
        (
            Some(serde_json::json!("1")),
            "version \"1\" is not a version number",
        ),
        (
            Some(serde_json::json!(1.5)),
            "version 1.5 is not a version number",
        ),
        (
            Some(serde_json::json!(-1)),
            "version -1 is not a version number",
        ),
        (
            Some(serde_json::Value::Null),
            "version null is not a version number",
        ),
        (None, "no version field"),
    ] {
        let mut w = v.clone();
        match &version {
            Some(x) => w["version"] = x.clone(),
            None => {
                w.as_object_mut().expect("object").remove("version");
            }
        }
        let f = d.join("v.summary");
        std::fs::write(&f, serde_json::to_vec(&w).expect("JSON")).expect("write");
        let (o, _, se) = merge(&[&f]);
        assert_eq!(o.status.code(), Some(2), "{version:?}: {se}");
        assert!(
            se.contains("v.summary") && se.contains(says),
            "{version:?}: {se}"
        );
    }
}

#[test]
fn a_fault_is_blamed_on_its_own_summary() {
    let d = dir("blame");
    let a = d.join("a.summary");
    let b = d.join("b.summary");
    // The same rank file under two names: rank 0 twice, a numbering that
    // b's file does not fit.
    let one = dir("blame-one");
    let two = dir("blame-two");
    let src = repo().join("traces/fsdp-ref-nccl-h200x2");
    for f in std::fs::read_dir(&src).expect("ls").flatten() {
        std::fs::copy(f.path(), one.join(f.file_name())).expect("copy");
        std::fs::copy(f.path(), two.join(f.file_name())).expect("copy");
    }
    summarize(&one, &a);
    summarize(&two, &b);
    let (o, _, se) = merge(&[&a, &b]);
    assert_eq!(o.status.code(), Some(2), "{se}");
    // The files are listed first ("loading a.summary, b.summary: "), then
    // the one at fault.
    assert!(
        se.contains("b.summary: ") && !se.contains("a.summary: "),
        "{se}"
    );
    // And a damaged second summary is named, not the first.
    let mut text = std::fs::read(&b).expect("read");
    let at = text.len() - 10;
    text[at] = b'#';
    std::fs::write(&b, text).expect("write");
    let (o, _, se) = merge(&[&a, &b]);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(
        se.contains("b.summary: ") && !se.contains("a.summary: "),
        "{se}"
    );
}

#[test]
fn a_report_that_breaks_its_invariants_is_refused() {
    let d = dir("invariants");
    let s = d.join("a.summary");
    summarize(&repo().join("traces/fsdp-ref-nccl-h200x2"), &s);
    let mut v = json(&s);
    // Overlap of 250 %, with a checksum that matches.
    let b = &mut v["files"][0]["parts"][0]["report"]["ranks"][0];
    assert!(b["overlap_pct"].is_number(), "{b}");
    b["overlap_pct"] = serde_json::json!(250.0);
    v["checksum"] = serde_json::json!(checksum(&v));
    std::fs::write(&s, serde_json::to_vec(&v).expect("JSON")).expect("write");
    let (o, so, se) = merge(&[&s]);
    assert_eq!(o.status.code(), Some(2), "{se}");
    assert!(so.is_empty(), "nothing printed: {so}");
    assert!(se.contains("invariants") && se.contains("overlap"), "{se}");
}
