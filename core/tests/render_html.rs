//! `report --format html` from the report structs: every keyed number
//! equals the JSON, user strings are escaped, nothing is fetched, and a
//! job of 1024 ranks stays a readable page of at most 10 MB.

use streamscope_core::analysis::render::{self, html_check};
use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::synth::{add_gpu_metrics, fsdp_like, SynthOptions};

fn json_of(r: &Report) -> serde_json::Value {
    serde_json::from_str(&render::json(r)).unwrap_or_else(|e| panic!("{e}"))
}

fn two_ranks() -> Report {
    let mut t = fsdp_like(&SynthOptions {
        ranks: 2,
        target_slices: 4_000,
        ..Default::default()
    });
    add_gpu_metrics(&mut t, 50_000);
    analyze(&t, &AnalysisOptions::default())
}

/// Every `<tbody>` of `page`: its number of rows.
fn body_rows(page: &str) -> Vec<usize> {
    page.split("<tbody>")
        .skip(1)
        .map(|b| {
            b.split("</tbody>")
                .next()
                .unwrap_or("")
                .matches("<tr>")
                .count()
        })
        .collect()
}

#[test]
fn keyed_numbers_equal_the_json() {
    let r = two_ranks();
    let page = render::html(&r, "synth");
    let json = json_of(&r);
    let n = html_check::check(&page, &json).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 100, "only {n} keyed cells");
    // Every section the issue lists is there.
    for id in [
        "headline",
        "steps",
        "utilization",
        "syncs",
        "collectives",
        "stragglers",
        "kernels",
        "metrics",
        "diagnostics",
    ] {
        assert!(page.contains(&format!("<section id=\"{id}\">")), "{id}");
    }
    let keys: Vec<String> = html_check::cells(&page)
        .into_iter()
        .map(|c| c.key)
        .collect();
    for want in [
        "headline.ranks.1.overlap_pct",
        "headline.ranks.0.median_step_ms",
        "ranks.0.syncs.0.gpu_idle_us",
        "collectives.0.bus_bw_gbps",
        "ranks.1.top_kernels.0.total_ms",
        "ranks.0.measured.sm_active_pct",
        "steps.0.breakdown.exposed_comm_us",
    ] {
        assert!(keys.iter().any(|k| k == want), "no cell {want}");
    }
}

#[test]
fn a_wrong_number_is_caught() {
    let r = two_ranks();
    let page = render::html(&r, "synth");
    let json = json_of(&r);
    let cell = html_check::cells(&page)
        .into_iter()
        .find(|c| c.key == "headline.ranks.0.overlap_pct")
        .unwrap_or_else(|| panic!("no overlap cell"));
    // The same value shown one unit off, and a value claimed for another key.
    let shown = cell.text.parse::<f64>().unwrap_or(0.0) + 1.0;
    let off = page.replacen(
        &format!(">{}</td>", cell.text),
        &format!(">{shown:.1}</td>"),
        1,
    );
    let err = html_check::check(&off, &json).err().unwrap_or_default();
    assert!(err.contains("text differs"), "{err}");
    let moved = page.replacen(
        "data-key=\"headline.ranks.0.overlap_pct\"",
        "data-key=\"headline.ranks.0.idle_pct\"",
        1,
    );
    assert!(html_check::check(&moved, &json).is_err());
}

#[test]
fn user_strings_are_escaped() {
    let mut r = two_ranks();
    let evil = "<script>alert('x')</script>&\"";
    r.ranks[0].top_kernels[0].name = format!("void k<{evil}>(int)");
    r.ranks[0].top_kernels[0].python = format!("/x/{evil}.py:3 (f)");
    r.ranks[0].syncs[0].where_ = format!("/x/{evil}.py:7 (g)");
    r.ranks[0].device = evil.into();
    r.headline.ranks[0].device = evil.into();
    r.diagnostics
        .push(streamscope_core::diagnostic::Diagnostic::new(
            streamscope_core::diagnostic::Kind::MalformedEvents,
            2,
            evil,
        ));
    let page = render::html(&r, &format!("traces/{evil}"));
    assert!(!page.contains("<script>alert"), "unescaped script");
    assert!(!page.contains("alert('x')"), "unescaped quote");
    assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
    // The page's own script is the only one.
    assert_eq!(page.matches("<script").count(), 1);
}

#[test]
fn nothing_is_fetched() {
    let page = render::html(&two_ranks(), "synth");
    for bad in [
        "http://", "https://", " src=", "url(", "@import", "<link", "<iframe",
    ] {
        assert!(!page.contains(bad), "the page holds {bad:?}");
    }
    // Links only within the page.
    for (i, _) in page.match_indices(" href=\"") {
        assert_eq!(&page[i + 7..i + 8], "#", "{}", &page[i..i + 40]);
    }
}

#[test]
fn a_thousand_ranks_is_a_summary_and_heat_maps() {
    let t = fsdp_like(&SynthOptions {
        ranks: 1024,
        target_slices: 200_000,
        layers: 2,
        ..Default::default()
    });
    let r = analyze(&t, &AnalysisOptions::default());
    assert_eq!(r.ranks.len(), 1024);
    let page = render::html(&r, "synth 1024 ranks");
    eprintln!("1024 ranks: {} bytes of HTML", page.len());
    assert!(page.len() <= 10 << 20, "{} bytes", page.len());
    // No table lists a row per rank.
    let rows = body_rows(&page);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|&n| n <= 40), "{rows:?}");
    assert!(page.contains("Over all 1024 ranks"));
    assert!(page.contains("ranks at a glance"));
    assert!(page.contains("wait for peers per step and rank"));
    // Steps of the picked ranks only: at most six bar charts.
    assert!(page.matches("steps: GPU time by kind").count() <= 6);
    let json = json_of(&r);
    html_check::check(&page, &json).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_worst_case_of_a_thousand_ranks_stays_under_10_mb() {
    use streamscope_core::analysis::headline::RankHeadline;
    use streamscope_core::analysis::{Breakdown, DeviceOccupancy, RankReport, StepReport, Window};
    use streamscope_core::synth::XorShift;
    // 1024 ranks of 130 steps whose waits differ in every cell, and SMs in
    // use that change in every bin: no run of equal cells to merge.
    let mut rng = XorShift(7);
    let mut u = move || f64::from(rng.unit_f32());
    let steps: Vec<i64> = (0..130).collect();
    let mut r = Report::default();
    for k in 0..1024u32 {
        r.ranks.push(RankReport {
            rank: k,
            has_gpu_events: true,
            window: Window {
                steps: steps.clone(),
                ..Default::default()
            },
            ..Default::default()
        });
        r.headline.ranks.push(RankHeadline {
            rank: k,
            has_gpu_events: true,
            steps: steps.len() as u64,
            median_step_ms: Some(30.0 + u()),
            overlap_pct: Some(80.0 + 10.0 * u()),
            idle_pct: Some(5.0 * u()),
            exposed_comm_ms_per_step: u(),
            ..Default::default()
        });
        for &s in &steps {
            let w = 5000.0 * u();
            r.steps.push(StepReport {
                rank: k,
                step: s,
                duration_us: 30_000.0 + 1000.0 * u(),
                gpu_start_ns: Some(s * 31_000_000),
                breakdown: Breakdown {
                    compute_us: 20_000.0,
                    comm_us: 9_000.0,
                    overlap_us: 8_000.0 * u(),
                    exposed_comm_us: 1_000.0,
                    idle_us: 1_000.0 * u(),
                    kernel_time_us: 30_000.0,
                    ..Default::default()
                },
                comm_wait_us: Some(w),
                straggler_rank: Some(((k + 1) % 1024).min(1023)),
                straggler_wait_us: Some(w),
                ..Default::default()
            });
        }
        r.occupancy.push(DeviceOccupancy {
            rank: k,
            device: streamscope_core::DeviceId::from_index(k as usize),
            name: "NVIDIA H200".into(),
            sm_count: 132,
            sms_in_use: (0..3000)
                .map(|i| (i * 1_500_000, (132.0 * u()) as u32))
                .collect(),
            ..Default::default()
        });
    }
    let page = render::html(&r, "worst case");
    eprintln!(
        "1024 ranks x 130 steps, nothing merged: {} bytes",
        page.len()
    );
    assert!(page.len() <= 10 << 20, "{} bytes", page.len());
    assert!(body_rows(&page).iter().all(|&n| n <= 40));
    // 130 steps in at most 120 columns: two steps share a column.
    assert!(page.contains("One column per 2 steps"), "steps not grouped");
}

/// A trace with allocator samples (HTA's df_index_resolver) gets a memory
/// section: the peak's figures and the blocks live then, keyed and equal
/// to the JSON; a trace without has none.
#[test]
fn memory_section_shows_the_peak_and_its_blocks() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/df_index_resolver/df_index_resolver.json.gz");
    let t = streamscope_core::load::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let r = analyze(&t, &AnalysisOptions::default());
    let page = render::html(&r, "df_index_resolver");
    let json = json_of(&r);
    html_check::check(&page, &json).unwrap_or_else(|e| panic!("{e}"));
    assert!(page.contains("<section id=\"memory\">"));
    let keys: Vec<String> = html_check::cells(&page)
        .into_iter()
        .map(|c| c.key)
        .collect();
    for k in [
        "ranks.0.memory.peak_allocated_bytes",
        "ranks.0.memory.reserved_at_peak_bytes",
        "ranks.0.memory.live_at_peak.0.bytes",
        "ranks.0.memory.live_at_peak.9.bytes",
        "ranks.0.memory.live_at_peak_other_bytes",
    ] {
        assert!(keys.iter().any(|x| x == k), "{k} not shown");
    }
    // 6,629,508,096 B is 6322.4 MiB.
    assert!(page.contains(">6322.4</td>"));
    assert!(page.contains("aten::mm"));
    assert!(!render::html(&two_ranks(), "synth").contains("<section id=\"memory\">"));
}
