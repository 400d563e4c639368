//! A sweep's table: each configuration's runs read back from its
//! directory and analyzed, summarized with their spread (the best named only
//! beyond noise), and written as markdown, JSON and an SVG plot.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use streamscope_core::analysis::{analyze, AnalysisOptions};

use super::{is_done, Config, FAILED};

/// One run of a configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Row {
    /// Run directory name.
    pub config: String,
    /// The environment it set.
    pub env: Vec<(String, String)>,
    /// "ok", or "failed: REASON".
    pub status: String,
    /// Median step time over the ranks' headline windows (mean over ranks), µs.
    pub step_us: Option<f64>,
    /// Overlap of communication with compute, % (mean over ranks).
    pub overlap_pct: Option<f64>,
    /// Exposed communication per step (mean over ranks), µs.
    pub exposed_comm_us_per_step: Option<f64>,
    /// Bus bandwidth per collective kind, GB/s (mean over ranks and kinds' rows).
    pub bus_bw_gbps: Vec<(String, f64)>,
    /// Twice the standard error of the median step (mean over ranks), µs.
    pub step_noise_us: Option<f64>,
}

/// One configuration over its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ConfigRow {
    /// Configuration name (its runs' directories without "+run-N").
    pub config: String,
    /// The environment it set.
    pub env: Vec<(String, String)>,
    /// Runs that succeeded, of `runs_total`.
    pub runs_ok: u64,
    /// Runs made.
    pub runs_total: u64,
    /// Median over the runs of their step time, µs.
    pub step_us: Option<f64>,
    /// The spread: lowest run median less its noise, µs.
    pub step_low_us: Option<f64>,
    /// The spread: highest run median plus its noise, µs.
    pub step_high_us: Option<f64>,
    /// Median over the runs, %.
    pub overlap_pct: Option<f64>,
    /// Median over the runs, µs.
    pub exposed_comm_us_per_step: Option<f64>,
    /// Per collective kind, median over the runs, GB/s.
    pub bus_bw_gbps: Vec<(String, f64)>,
}

/// The sweep's table.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Table {
    /// One row per configuration, in grid order.
    pub configs: Vec<ConfigRow>,
    /// Every run, in grid order.
    pub rows: Vec<Row>,
    /// The configuration whose spread lies wholly below every other's
    /// (None: no difference beyond noise, or nothing ran).
    pub best: Option<String>,
    /// The fastest configuration by median, named or not.
    pub fastest: Option<String>,
    /// The verdict in words.
    pub verdict: String,
}

/// A run's directory name less its "+run-N".
fn config_of(run: &str) -> &str {
    match run.rsplit_once("+run-") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => run,
    }
}

fn median_of(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| streamscope_core::analysis::findings::median(v))
}

/// Per configuration: its runs summarized; the best beyond noise, if any.
fn summarize(rows: &[Row]) -> (Vec<ConfigRow>, Option<String>, Option<String>, String) {
    let mut configs: Vec<ConfigRow> = Vec::new();
    let mut runs: Vec<Vec<&Row>> = Vec::new();
    for r in rows {
        let name = config_of(&r.config);
        match configs.iter().position(|c| c.config == name) {
            Some(i) => runs[i].push(r),
            None => {
                configs.push(ConfigRow {
                    config: name.to_string(),
                    env: r.env.clone(),
                    ..Default::default()
                });
                runs.push(vec![r]);
            }
        }
    }
    for (c, rs) in configs.iter_mut().zip(&runs) {
        let ok: Vec<&&Row> = rs.iter().filter(|r| r.status == "ok").collect();
        c.runs_total = rs.len() as u64;
        c.runs_ok = ok.len() as u64;
        let steps: Vec<f64> = ok.iter().filter_map(|r| r.step_us).collect();
        c.step_us = median_of(&steps);
        let noise = |r: &Row| r.step_noise_us.unwrap_or(0.0);
        c.step_low_us = ok
            .iter()
            .filter_map(|r| Some(r.step_us? - noise(r)))
            .reduce(f64::min);
        c.step_high_us = ok
            .iter()
            .filter_map(|r| Some(r.step_us? + noise(r)))
            .reduce(f64::max);
        c.overlap_pct = median_of(&ok.iter().filter_map(|r| r.overlap_pct).collect::<Vec<_>>());
        c.exposed_comm_us_per_step = median_of(
            &ok.iter()
                .filter_map(|r| r.exposed_comm_us_per_step)
                .collect::<Vec<_>>(),
        );
        let mut kinds: Vec<(String, Vec<f64>)> = Vec::new();
        for r in &ok {
            for (k, v) in &r.bus_bw_gbps {
                match kinds.iter_mut().find(|x| &x.0 == k) {
                    Some(x) => x.1.push(*v),
                    None => kinds.push((k.clone(), vec![*v])),
                }
            }
        }
        c.bus_bw_gbps = kinds
            .into_iter()
            .filter_map(|(k, v)| Some((k, median_of(&v)?)))
            .collect();
    }
    let ran: Vec<&ConfigRow> = configs.iter().filter(|c| c.step_us.is_some()).collect();
    let fastest = ran
        .iter()
        .min_by(|a, b| {
            a.step_us
                .unwrap_or(0.0)
                .total_cmp(&b.step_us.unwrap_or(0.0))
        })
        .map(|c| c.config.clone());
    let Some(f) = fastest.clone() else {
        return (configs, None, None, "nothing ran".into());
    };
    if ran.len() == 1 {
        return (
            configs,
            None,
            fastest,
            format!("one configuration ran ({f}): nothing to compare"),
        );
    }
    let fc = ran.iter().find(|c| c.config == f).expect("fastest ran");
    let high = fc.step_high_us.unwrap_or(f64::INFINITY);
    let close: Vec<&str> = ran
        .iter()
        .filter(|c| c.config != f && c.step_low_us.unwrap_or(f64::NEG_INFINITY) <= high)
        .map(|c| c.config.as_str())
        .collect();
    let ms = |us: Option<f64>| us.map_or("-".into(), |v| format!("{:.2}", v / 1000.0));
    if close.is_empty() {
        let verdict = format!(
            "best: {f}, {} ms ({}-{} ms over its runs), beyond the spread of every other configuration",
            ms(fc.step_us),
            ms(fc.step_low_us),
            ms(fc.step_high_us)
        );
        (configs, Some(f), fastest, verdict)
    } else {
        let verdict = format!(
            "no difference beyond noise: the fastest, {f} ({}-{} ms over its runs), overlaps {}",
            ms(fc.step_low_us),
            ms(fc.step_high_us),
            close.join(", ")
        );
        (configs, None, fastest, verdict)
    }
}

/// Builds the table from the sweep directory: each done configuration's
/// traces analyzed as `report` does; a failed one carries its reason.
pub fn table(dir: &Path, configs: &[Config]) -> Table {
    let mut rows = Vec::with_capacity(configs.len());
    for c in configs {
        let cdir = dir.join(&c.name);
        let mut row = Row {
            config: c.name.clone(),
            env: c.env.clone(),
            ..Default::default()
        };
        if !is_done(dir, c) {
            let why = std::fs::read_to_string(cdir.join(FAILED))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "not run".into());
            row.status = format!("failed: {why}");
            rows.push(row);
            continue;
        }
        let trace = match streamscope_core::load::load_paths(std::slice::from_ref(&cdir)) {
            Ok(t) => t,
            Err(e) => {
                row.status = format!("failed: {e}");
                rows.push(row);
                continue;
            }
        };
        let r = analyze(&trace, &AnalysisOptions::default());
        let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        row.step_noise_us = mean(
            r.ranks
                .iter()
                .map(|k| {
                    let d: Vec<f64> = r.window_steps(k.rank).map(|s| s.duration_us).collect();
                    streamscope_core::analysis::findings::median_noise(&d)
                })
                .collect(),
        );
        row.step_us = mean(
            r.ranks
                .iter()
                .filter_map(|k| r.median_step_us(k.rank))
                .collect(),
        );
        row.overlap_pct = mean(
            r.ranks
                .iter()
                .filter_map(|k| k.breakdown.overlap_pct)
                .collect(),
        );
        row.exposed_comm_us_per_step = mean(
            r.ranks
                .iter()
                .map(|k| k.breakdown.exposed_comm_us / k.window.steps.len().max(1) as f64)
                .collect(),
        );
        let mut kinds: Vec<(String, Vec<f64>)> = Vec::new();
        for s in &r.collectives {
            let Some(bw) = s.bus_bw_gbps else { continue };
            match kinds.iter_mut().find(|k| k.0 == s.collective) {
                Some(k) => k.1.push(bw),
                None => kinds.push((s.collective.clone(), vec![bw])),
            }
        }
        row.bus_bw_gbps = kinds
            .into_iter()
            .filter_map(|(k, v)| Some((k, mean(v)?)))
            .collect();
        row.status = if row.step_us.is_some() {
            "ok".into()
        } else {
            "failed: no steps in its traces".into()
        };
        rows.push(row);
    }
    let (configs, best, fastest, verdict) = summarize(&rows);
    Table {
        configs,
        rows,
        best,
        fastest,
        verdict,
    }
}

fn ms(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| format!("{:.2}", v / 1000.0))
}

/// The table as markdown: per configuration (median of its runs, and the
/// spread a best must beat), the verdict, then every run.
pub fn markdown(t: &Table) -> String {
    let mut s = String::from("## streamscope sweep\n\n");
    s.push_str("| config | runs ok | step ms (median of runs) | spread ms | overlap % | exposed comm ms/step | bus bandwidth GB/s |\n|---|---|---|---|---|---|---|\n");
    for c in &t.configs {
        let bw = c
            .bus_bw_gbps
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect::<Vec<_>>()
            .join(", ");
        let best = if t.best.as_deref() == Some(c.config.as_str()) {
            " (best)"
        } else {
            ""
        };
        s.push_str(&format!(
            "| {}{best} | {}/{} | {} | {} | {} | {} | {} |\n",
            c.config,
            c.runs_ok,
            c.runs_total,
            ms(c.step_us),
            match (c.step_low_us, c.step_high_us) {
                (Some(a), Some(b)) => format!("{}-{}", ms(Some(a)), ms(Some(b))),
                _ => "-".into(),
            },
            c.overlap_pct.map_or("-".into(), |v| format!("{v:.1}")),
            ms(c.exposed_comm_us_per_step),
            if bw.is_empty() { "-".into() } else { bw },
        ));
    }
    s.push_str(&format!("\nVerdict: {}\n", t.verdict));
    s.push_str("\n### Runs\n\n");
    s.push_str("| run | status | step ms (median) | noise ms | overlap % | exposed comm ms/step | bus bandwidth GB/s |\n|---|---|---|---|---|---|---|\n");
    for r in &t.rows {
        let bw = r
            .bus_bw_gbps
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect::<Vec<_>>()
            .join(", ");
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.config,
            r.status.replace('|', "/"),
            ms(r.step_us),
            r.step_noise_us
                .map_or("-".into(), |v| format!("±{:.2}", v / 1000.0)),
            r.overlap_pct.map_or("-".into(), |v| format!("{v:.1}")),
            ms(r.exposed_comm_us_per_step),
            if bw.is_empty() { "-".into() } else { bw },
        ));
    }
    s
}

/// Step time and exposed communication per configuration, as SVG.
pub fn plot(t: &Table, path: &Path) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let ok: Vec<(usize, &Row)> = t
        .rows
        .iter()
        .filter(|r| r.step_us.is_some())
        .enumerate()
        .collect();
    let ymax = ok
        .iter()
        .filter_map(|(_, r)| r.step_us)
        .fold(0.0f64, f64::max)
        .max(1.0)
        / 1000.0
        * 1.15;
    let n = ok.len().max(1);
    let root = SVGBackend::new(path, (160 + 90 * n as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let labels: Vec<String> = ok.iter().map(|(_, r)| r.config.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "streamscope sweep: step time and exposed communication",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(120)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0f64..ymax)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let k = x.round();
            if (x - k).abs() < 1e-6 && k >= 0.0 {
                labels.get(k as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("ms")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (series, color, off, value) in [
        ("median step time", BLUE, -0.2, 0usize),
        ("exposed communication per step", RED, 0.2, 1usize),
    ] {
        chart
            .draw_series(ok.iter().filter_map(|(i, r)| {
                let v = if value == 0 {
                    r.step_us?
                } else {
                    r.exposed_comm_us_per_step?
                } / 1000.0;
                let x = *i as f64 + off;
                Some(Rectangle::new(
                    [(x - 0.18, 0.0), (x + 0.18, v)],
                    color.filled(),
                ))
            }))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(series)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Writes sweep.md, sweep.json and sweep.svg into `dir`.
pub fn write_outputs(dir: &Path, t: &Table) -> anyhow::Result<()> {
    let md = dir.join("sweep.md");
    std::fs::write(&md, markdown(t)).with_context(|| format!("writing {}", md.display()))?;
    let js = dir.join("sweep.json");
    let json = serde_json::to_string_pretty(t).context("serializing the table")?;
    std::fs::write(&js, json + "\n").with_context(|| format!("writing {}", js.display()))?;
    plot(t, &dir.join("sweep.svg"))
        .with_context(|| format!("plotting {}", dir.join("sweep.svg").display()))
}

#[cfg(test)]
mod table_tests {
    use super::super::{grid, parse_env, DONE};
    use super::*;
    use std::path::PathBuf;

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("read") {
            let p = e.expect("entry").path();
            if p.is_file() {
                std::fs::copy(&p, to.join(p.file_name().expect("name"))).expect("copy");
            }
        }
    }

    fn bundled(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../traces")
            .join(name)
    }

    #[test]
    fn table_from_prepared_configs() {
        let dir =
            std::env::temp_dir().join(format!("streamscope-sweep-table-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let configs = grid(&[parse_env("MODE=serial,overlap,broken").expect("axis")], 1);
        for (c, src) in configs
            .iter()
            .zip(["fsdp-ref-serial-h200x2", "fsdp-ref-overlap-h200x2"])
        {
            copy_dir(&bundled(src), &dir.join(&c.name));
            std::fs::write(dir.join(&c.name).join(DONE), "ok\n").expect("marker");
        }
        std::fs::create_dir_all(dir.join(&configs[2].name)).expect("mkdir");
        std::fs::write(
            dir.join(&configs[2].name).join(FAILED),
            "streamscope record exited with status 2\n",
        )
        .expect("marker");
        assert!(is_done(&dir, &configs[0]) && !is_done(&dir, &configs[2]));
        let t = table(&dir, &configs);
        assert_eq!(t.rows.len(), 3);
        let (serial, overlap) = (&t.rows[0], &t.rows[1]);
        assert_eq!(
            (serial.status.as_str(), overlap.status.as_str()),
            ("ok", "ok")
        );
        // The overlapped schedule is the faster one, hides most of its communication.
        assert_eq!(t.best.as_deref(), Some("MODE-overlap"));
        let (s, o) = (
            serial.step_us.expect("step"),
            overlap.step_us.expect("step"),
        );
        assert!(o < s, "{o} vs {s}");
        assert!(serial.overlap_pct.expect("overlap") < 1.0);
        assert!(overlap.overlap_pct.expect("overlap") > 80.0);
        assert!(
            overlap.exposed_comm_us_per_step.expect("exposed")
                < serial.exposed_comm_us_per_step.expect("exposed")
        );
        assert_eq!(
            t.rows[2].status,
            "failed: streamscope record exited with status 2"
        );
        write_outputs(&dir, &t).expect("outputs");
        let md = std::fs::read_to_string(dir.join("sweep.md")).expect("md");
        assert!(md.contains("| MODE-overlap (best) | 1/1 |"), "{md}");
        assert!(md.contains("Verdict: best: MODE-overlap"), "{md}");
        let svg = std::fs::read_to_string(dir.join("sweep.svg")).expect("svg");
        assert!(
            svg.starts_with("<svg") && svg.contains("MODE-serial"),
            "{}",
            &svg[..200.min(svg.len())]
        );
        let js: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).expect("json"))
                .expect("parse");
        assert_eq!(js["best"], "MODE-overlap");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn two_knobs_that_cannot_matter_name_no_best() {
        // The same recording under two settings, three runs each (the
        // serial and the overlapped run mixed into both): the spreads
        // overlap, so no best is named even though one median is lower.
        let dir =
            std::env::temp_dir().join(format!("streamscope-sweep-noise-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let configs = grid(&[parse_env("KNOB=a,b").expect("axis")], 3);
        let srcs = [
            "fsdp-ref-overlap-h200x2",
            "fsdp-ref-serial-h200x2",
            "fsdp-ref-overlap-h200x2",
            "fsdp-ref-serial-h200x2",
            "fsdp-ref-overlap-h200x2",
            "fsdp-ref-serial-h200x2",
        ];
        for (c, src) in configs.iter().zip(srcs) {
            copy_dir(&bundled(src), &dir.join(&c.name));
            std::fs::write(dir.join(&c.name).join(DONE), "ok\n").expect("marker");
        }
        let t = table(&dir, &configs);
        assert_eq!(t.rows.len(), 6);
        assert_eq!(t.configs.len(), 2);
        let (a, b) = (&t.configs[0], &t.configs[1]);
        assert_eq!(
            (a.config.as_str(), a.runs_ok, a.runs_total),
            ("KNOB-a", 3, 3)
        );
        // a: overlap, serial, overlap (median: overlap); b: serial, overlap, serial.
        assert!(a.step_us < b.step_us);
        assert_eq!(t.fastest.as_deref(), Some("KNOB-a"));
        assert_eq!(t.best, None);
        assert!(
            t.verdict.starts_with("no difference beyond noise"),
            "{}",
            t.verdict
        );
        let md = markdown(&t);
        assert!(!md.contains("(best)"), "{md}");
        assert!(md.contains("KNOB-a+run-3"), "{md}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
