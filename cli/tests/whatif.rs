//! `streamscope whatif` end to end on the real traces in traces/, and bad input.

use std::path::{Path, PathBuf};
use std::process::Command;

fn traces(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

fn whatif(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .arg("whatif")
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(name: &str) -> String {
    traces(name).display().to_string()
}

#[test]
fn json_per_rank_and_step() {
    let (code, out, err) = whatif(&[
        &path("fsdp-ref-overlap-h200x2"),
        "--comm-scale",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(v["consistency_max_error_pct"].as_f64().expect("number") <= 2.0);
    let ranks = v["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), 2);
    for r in ranks {
        let steps = r["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), 13);
        for s in steps {
            let m = s["measured_step_us"].as_f64().expect("measured");
            let p = s["predicted_step_us"].as_f64().expect("predicted");
            let replayed = s["replayed_step_us"].as_f64().expect("replayed");
            // Slower transfers never make a step shorter; the unchanged
            // replay is the measured step.
            assert!(p > m, "{m} -> {p}");
            assert!((replayed - m).abs() <= 0.02 * m);
            for k in ["measured_exposed_comm_us", "predicted_exposed_comm_us"] {
                assert!(s[k].as_f64().is_some(), "{k}");
            }
            let c = &s["critical_path"];
            let sum: f64 = ["compute_pct", "communication_pct", "host_pct", "sync_pct"]
                .iter()
                .map(|k| c[*k].as_f64().expect("share"))
                .sum();
            assert!((sum - 100.0).abs() < 1e-6, "{c}");
        }
        let m = r["measured_median_step_us"].as_f64().expect("median");
        let p = r["predicted_median_step_us"].as_f64().expect("median");
        assert!(p > 1.3 * m, "{m} -> {p}");
    }
}

#[test]
fn text_and_markdown_state_the_consistency_and_the_regimes() {
    let (code, out, err) = whatif(&[&path("fsdp-ref-serial-h200x2"), "--compute-scale", "0.5"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("changes: compute kernels ×0.5"), "{out}");
    assert!(
        out.contains(
            "consistency: the unchanged replay reproduces every measured step within 0.000 %"
        ),
        "{out}"
    );
    let (code, md, err) = whatif(&[
        &path("fsdp-ref-overlap-h200x2"),
        "--drop-syncs",
        "cuMemcpyDtoH",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(md.contains("### Regime per collective"), "{md}");
    assert!(md.contains("| AllGather |"), "{md}");
    assert!(
        md.contains("--drop-syncs cuMemcpyDtoH: 28 sync call(s) dropped"),
        "{md}"
    );
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    // No communication: a communication change would be made up.
    let (code, out, err) = whatif(&[&path("sync-zoo-h200"), "--comm-scale", "2"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("sync-zoo-h200") && err.contains("no communication"),
        "{err}"
    );
    // A sync spec that matches nothing.
    let (code, _, err) = whatif(&[&path("sync-zoo-h200"), "--drop-syncs", "nowhere.py:1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--drop-syncs nowhere.py:1: matches no host sync"),
        "{err}"
    );
    // Nonsense scales and both communication changes at once.
    let (code, _, err) = whatif(&[&path("sync-zoo-h200"), "--compute-scale", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("positive"), "{err}");
    let (code, _, err) = whatif(&[
        &path("fsdp-ref-nccl-h200x2"),
        "--comm-scale",
        "2",
        "--link-bw",
        "100",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
    // A missing trace.
    let (code, _, err) = whatif(&["/nonexistent/trace.pftrace"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/trace.pftrace"), "{err}");
}
