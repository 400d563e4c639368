//! Shapes of the rendered report: JSON keys, text tables, markdown tables,
//! on a real Kineto trace (HTA's nccl_data) and a generated FSDP-like trace.

use std::path::PathBuf;

use streamscope_core::analysis::{analyze, render, AnalysisOptions};
use streamscope_core::synth::{fsdp_like, SynthOptions};

fn nccl_data() -> streamscope_core::Trace {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/nccl_parser_config/nccl_data.json.gz");
    streamscope_core::kineto::read_file(&p).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn json_has_the_documented_keys() {
    let r = analyze(&nccl_data(), &AnalysisOptions::default());
    let v: serde_json::Value =
        serde_json::from_str(&render::json(&r)).unwrap_or_else(|e| panic!("{e}"));
    for key in [
        "ranks",
        "steps",
        "collectives",
        "occupancy",
        "sync_warnings",
        "dropped_records",
    ] {
        assert!(v.get(key).is_some(), "top-level {key}");
    }
    let rank = &v["ranks"][0];
    for key in [
        "rank",
        "device",
        "overlap_pct",
        "exposed_comm_us",
        "overlap_efficiency_pct",
        "compute_us",
        "comm_us",
        "kernel_time_us",
        "idle_pct",
        "compute_pct",
        "non_compute_pct",
        "window",
    ] {
        assert!(rank.get(key).is_some(), "ranks[0].{key}");
    }
    assert_eq!(
        rank["overlap_pct"]
            .as_f64()
            .map(|x| (x * 100.0).round() / 100.0),
        Some(14.31)
    );
    assert_eq!(rank["device"], "NVIDIA A100-PG509-200");
    assert_eq!(v["dropped_records"], 0);
    assert_eq!(v["steps"].as_array().map(|a| a.len()), Some(3));
    // The longest all-reduce of HTA's own test: 2049000 floats, among the sized collectives.
    let colls = v["collectives"].as_array().cloned().unwrap_or_default();
    let ar = colls
        .iter()
        .find(|c| c["collective"] == "AllReduce")
        .unwrap_or_else(|| panic!("{colls:?}"));
    assert!(
        ar["bytes"].as_u64().is_some_and(|b| b >= 2_049_000 * 4),
        "{ar}"
    );
    assert!(ar["bus_bw_gbps"].as_f64().is_some());
    let occ = &v["occupancy"][0];
    assert_eq!(occ["sm_count"], 108);
    assert!(occ["sms_in_use"]
        .as_array()
        .is_some_and(|a| !a.is_empty() && a[0].as_array().map(|p| p.len()) == Some(2)));
    for w in v["sync_warnings"].as_array().cloned().unwrap_or_default() {
        for key in [
            "pattern",
            "count",
            "host_blocked_us",
            "gpu_idle_us",
            "where",
            "slices",
            "start_ns",
        ] {
            assert!(w.get(key).is_some(), "sync_warnings[].{key}");
        }
    }
}

#[test]
fn text_and_markdown_tables() {
    let t = fsdp_like(&SynthOptions {
        ranks: 2,
        target_slices: 5_000,
        ..Default::default()
    });
    let r = analyze(&t, &AnalysisOptions::default());
    let text = render::text(&r);
    assert!(text.starts_with("streamscope report: 2 rank(s)"), "{text}");
    for title in [
        "Overlap and temporal breakdown",
        "Per step",
        "Idle time per stream",
        "Collectives",
        "SM occupancy",
        "Host synchronizations",
    ] {
        assert!(text.contains(title), "{title} missing:\n{text}");
    }
    // Columns line up: header and dash rule have the same width.
    let lines: Vec<&str> = text.lines().collect();
    let h = lines
        .iter()
        .position(|l| l.starts_with("rank  GPU") && l.contains("  median step ms  "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(lines[h + 1].starts_with("----  "));
    assert_eq!(lines[h + 2].split_whitespace().next(), Some("0"));
    assert!(text.contains("AllGather") && text.contains("ReduceScatter"));
    assert!(text.contains("item-like"));
    let md = render::markdown(&r);
    assert!(md.starts_with("## streamscope report"));
    assert!(
        md.contains("| rank | GPU | median step ms | overlap % |"),
        "{md}"
    );
    assert!(md.contains("|---|---|"));
    let table_rows = md.lines().filter(|l| l.starts_with("| 1 |")).count();
    assert!(table_rows >= 3, "rank 1 rows in several tables");
}

#[test]
fn past_eight_ranks_the_headline_summarizes_within_100_columns() {
    let t = fsdp_like(&SynthOptions {
        ranks: 12,
        target_slices: 24_000,
        ..Default::default()
    });
    let r = analyze(&t, &AnalysisOptions::default());
    // JSON keeps every rank; the text block summarizes.
    assert_eq!(r.headline.ranks.len(), 12);
    assert!(r.ranks.iter().all(|k| k.median_step_ms.is_some()));
    let text = render::text_brief(&r);
    for l in text.lines() {
        assert!(l.chars().count() <= render::WIDTH, "{l}");
    }
    assert!(text.contains("12 ranks: median step time"), "{text}");
    assert!(text.contains("(slowest"), "{text}");
    let rows = text
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u32>().is_ok())
        })
        .count();
    assert!((1..=5).contains(&rows), "{rows} rank rows:\n{text}");
    // Up to 8 ranks, a row each.
    let t = fsdp_like(&SynthOptions {
        ranks: 3,
        target_slices: 6_000,
        ..Default::default()
    });
    let text = render::text_brief(&analyze(&t, &AnalysisOptions::default()));
    for k in 0..3 {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{k}     "))),
            "rank {k}:\n{text}"
        );
    }
}
