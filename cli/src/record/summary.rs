//! The end of `streamscope record`: the trace files written and a few
//! lines per rank from the analysis of them.

use std::path::Path;

use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::load::load_paths;

use super::files;
use super::progress::human_bytes;

/// Exit code of a run that wrote no trace, when the command itself succeeded.
pub const NO_TRACE_EXIT: i32 = 2;

/// Lists the traces in `out` and prints their summary; says why when
/// there are none (`collector_found`: whether the collector was injected).
/// Returns `code`, or [`NO_TRACE_EXIT`] when no trace was written, the
/// command succeeded and `allow_untraced` is false.
pub fn print(
    out: &Path,
    collector_found: bool,
    code: i32,
    dropped: u64,
    allow_untraced: bool,
) -> i32 {
    let traces = files(out, |n| n.ends_with(".pftrace"));
    if traces.is_empty() {
        let why = if collector_found {
            "the command did not use CUDA (or the collector could not start: see the lines above)"
        } else {
            "the collector library was not found"
        };
        if allow_untraced {
            eprintln!("streamscope: no trace was written: {why}. Exit code {code}.");
            return code;
        }
        let exit = if code == 0 { NO_TRACE_EXIT } else { code };
        eprintln!(
            "streamscope: error: no trace was written: {why}. The command exited with {code}; \
             record exits with {exit} (--allow-untraced: exit with the command's code)."
        );
        return exit;
    }
    eprintln!(
        "streamscope: {} trace file(s) in {}:",
        traces.len(),
        out.display()
    );
    for t in &traces {
        let size = std::fs::metadata(t).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "  {} ({})",
            t.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            human_bytes(size)
        );
    }
    print_analysis(out);
    if dropped > 0 {
        eprintln!(
            "streamscope: {} records were dropped (see each trace's dropped_records)",
            dropped
        );
    }
    eprintln!(
        "Next: streamscope report {0}   |   streamscope view {0}",
        out.display()
    );
    code
}

/// The summary of the traces in `out`, and the processes that ran
/// torch.profiler.
fn print_analysis(out: &Path) {
    match load_paths(&[out.to_path_buf()]) {
        Ok(trace) => {
            let report = analyze(&trace, &AnalysisOptions::default());
            eprint!("{}", summary(&report));
            eprint!("{}", host_cost(&trace, &report));
            let profiler = torch_profiler_lines(&trace);
            if !profiler.is_empty() {
                eprintln!("streamscope: torch.profiler ran inside the recorded job:");
                for l in profiler {
                    eprintln!("{l}");
                }
            }
        }
        Err(e) => eprintln!("streamscope: could not read the traces back: {e}"),
    }
}

/// What a recorded CUDA call adds to the host's time, µs, by kind of call:
/// the recorded-minus-plain medians of `examples/api_cost.py` on one H200
/// (scripts/gpu/record-cost.sh; docs/PERFORMANCE.md, "What recording costs
/// a host-bound job"). An estimate: a call's cost varies by a few µs from
/// run to run.
fn call_cost_us(api: &str) -> f64 {
    if api.contains("Launch") {
        3.1
    } else if api.contains("Memcpy") || api.contains("Memset") {
        4.8
    } else if api.contains("Synchronize") {
        3.5
    } else if api.contains("Event") {
        1.9
    } else {
        2.0
    }
}

/// Per rank with steps: the CUDA calls recorded per step and the host
/// time their recording is estimated to add to a step ([`call_cost_us`]).
pub fn host_cost(trace: &streamscope_core::Trace, r: &Report) -> String {
    use streamscope_core::SliceKind;
    let s = trace.slices();
    let mut out = String::new();
    for rank in &r.ranks {
        let Some(step_ms) = rank.median_step_ms.filter(|m| *m > 0.0) else {
            continue;
        };
        // The calls made in the headline window's steps.
        let w = &rank.window;
        let steps = w.steps.len();
        let (Some(w_start), Some(w_end)) = (w.start_ns, w.end_ns) else {
            continue;
        };
        if steps == 0 || w_end <= w_start {
            continue;
        }
        let (mut calls, mut cost_us) = (0u64, 0.0f64);
        let mut costs: std::collections::HashMap<streamscope_core::StrId, f64> =
            std::collections::HashMap::new();
        for i in 0..s.len() {
            let start = s.start_ns()[i];
            if !matches!(s.kind()[i], SliceKind::Runtime | SliceKind::Driver)
                || start < w_start
                || start >= w_end
                || trace.track(s.track()[i]).process != rank.process
            {
                continue;
            }
            let name = s.name()[i];
            cost_us += *costs
                .entry(name)
                .or_insert_with(|| call_cost_us(trace.str(name)));
            calls += 1;
        }
        if calls == 0 {
            continue;
        }
        let steps = steps as f64;
        let (per_step, added_ms) = (calls as f64 / steps, cost_us / steps / 1000.0);
        out += &format!(
            "  {}: recording cost (estimate): {:.0} CUDA calls traced per step, \
             about {:.2} ms of host time each step ({:.0}% of the recorded {:.2} ms step)\n",
            rank.label,
            per_step,
            added_ms,
            100.0 * added_ms / step_ms,
            step_ms
        );
    }
    out
}

/// Host-sync warnings listed in the end-of-record summary.
pub const SUMMARY_WARNINGS: usize = 10;

/// The processes in which torch.profiler was started while recorded
/// (process metadata `core::protocol::TORCH_PROFILER_KEY`).
pub fn torch_profiler_lines(trace: &streamscope_core::Trace) -> Vec<String> {
    trace
        .processes()
        .iter()
        .filter_map(|p| {
            p.metadata
                .iter()
                .find(|(k, _)| k == streamscope_core::protocol::TORCH_PROFILER_KEY)
                .map(|(_, v)| format!("  {}: {v}", p.name))
        })
        .collect()
}

/// A few lines per rank: overlap, exposed communication, sync warnings.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    for rank in &r.ranks {
        if !rank.has_gpu_events {
            s += &format!("  {}: no GPU activity\n", rank.label);
            continue;
        }
        let pct = |v: Option<f64>| {
            v.map(|x| format!("{x:.1}%"))
                .unwrap_or_else(|| "n/a".into())
        };
        // The headline's figures, in ms (docs/METRICS.md, "Headline").
        let h = r.headline.ranks.iter().find(|h| h.rank == rank.rank);
        let step = match h.and_then(|h| Some((h.median_step_ms?, h.steps))) {
            Some((m, n)) => format!(" · step {m:.2} ms (median of {n})"),
            None => String::new(),
        };
        let exposed = match h {
            Some(h) if h.steps > 0 => format!("{:.2} ms/step", h.exposed_comm_ms_per_step),
            _ => format!("{:.2} ms", rank.breakdown.exposed_comm_us / 1000.0),
        };
        s += &format!(
            "  {}: {} GPU events · overlap {} · exposed comm {exposed}{step} · idle {}\n",
            rank.label,
            rank.breakdown.gpu_events,
            pct(rank.breakdown.overlap_pct),
            pct(rank.breakdown.idle_pct)
        );
        if rank.measured.any() {
            s += &format!("    GPU metrics: {}\n", measured_line(&rank.measured));
        }
    }
    if !r.sync_warnings.is_empty() {
        let n = r.sync_warnings.len();
        s += &format!("  {n} host-sync warning(s):\n");
        for w in r.sync_warnings.iter().take(SUMMARY_WARNINGS) {
            s += &format!(
                "    rank {} · {} · {} at {} · {}× · host blocked {:.2} ms · GPU idle {:.2} ms\n",
                w.rank,
                w.pattern,
                w.api,
                w.where_,
                w.count,
                w.host_blocked_us / 1000.0,
                w.gpu_idle_us / 1000.0
            );
        }
        if n > SUMMARY_WARNINGS {
            s += &format!(
                "    ... and {} more (all of them: streamscope report)\n",
                n - SUMMARY_WARNINGS
            );
        }
    }
    if r.dropped_records > 0 {
        s += &format!("  dropped records: {}\n", r.dropped_records);
    }
    s
}

/// A rank's measured GPU metrics (`record --gpu-metrics`), those it has:
/// SM active (and while compute runs), occupancy, tensor pipes, DRAM and
/// NVLink (tx, rx).
fn measured_line(m: &streamscope_core::analysis::Measured) -> String {
    let mut parts = Vec::new();
    if let Some(v) = m.sm_active_pct {
        parts.push(match m.sm_active_compute_pct {
            Some(c) => format!("SM active {v:.1}% ({c:.1}% while compute runs)"),
            None => format!("SM active {v:.1}%"),
        });
    }
    if let Some(v) = m.warps_active_pct {
        parts.push(format!("occupancy {v:.1}%"));
    }
    if let Some(v) = m.tensor_active_pct {
        parts.push(format!("tensor {v:.1}%"));
    }
    if let Some(v) = m.dram_gbps {
        parts.push(format!("DRAM {v:.0} GB/s"));
    }
    if let (Some(tx), Some(rx)) = (m.nvlink_tx_gbps, m.nvlink_rx_gbps) {
        parts.push(format!("NVLink tx/rx {tx:.0}/{rx:.0} GB/s"));
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled sync_zoo recording: ~21 syncs and ~200 launches a
    /// ~23 ms step (examples/sync_zoo.py), so a few hundred calls per step
    /// and an estimate of about a millisecond.
    #[test]
    fn host_cost_counts_the_calls_of_a_step() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/sync-zoo-h200");
        let t = load_paths(&[dir]).expect("bundled trace");
        let r = analyze(&t, &AnalysisOptions::default());
        let s = host_cost(&t, &r);
        eprintln!("{s}");
        let line = s.lines().next().expect("one rank with steps");
        let num = |after: &str| -> f64 {
            let rest = &line[line.find(after).expect(after) + after.len()..];
            rest.split_whitespace()
                .next()
                .and_then(|w| w.trim_end_matches('%').parse().ok())
                .expect("a number")
        };
        let calls = num("estimate): ");
        let ms = num("about ");
        assert!((200.0..1500.0).contains(&calls), "{s}");
        assert!(ms > 0.3 && ms < 5.0, "{s}");
        assert_eq!(s.lines().count(), 1, "{s}");
        // Nothing for a trace without API calls.
        let g = streamscope_core::synth::fsdp_like(&streamscope_core::synth::SynthOptions {
            ranks: 1,
            target_slices: 2_000,
            ..Default::default()
        });
        let gr = analyze(&g, &AnalysisOptions::default());
        let has_api = (0..g.slices().len()).any(|i| {
            matches!(
                g.slices().kind()[i],
                streamscope_core::SliceKind::Runtime | streamscope_core::SliceKind::Driver
            )
        });
        assert_eq!(host_cost(&g, &gr).is_empty(), !has_api);
    }

    #[test]
    fn summary_has_a_line_per_rank() {
        use streamscope_core::synth::{fsdp_like, SynthOptions};
        let t = fsdp_like(&SynthOptions {
            ranks: 2,
            target_slices: 4_000,
            ..Default::default()
        });
        let s = summary(&analyze(&t, &AnalysisOptions::default()));
        let ranks: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("GPU events · overlap"))
            .collect();
        assert_eq!(ranks.len(), 2, "{s}");
        assert!(ranks.iter().all(|l| l.contains('%')), "{s}");
        // The headline's step time, in ms; no µs left.
        assert!(ranks.iter().all(|l| l.contains(" ms (median of ")), "{s}");
        assert!(!s.contains("µs"), "{s}");
        // No samples, no metrics line.
        assert!(!s.contains("GPU metrics:"), "{s}");
    }

    #[test]
    fn sampled_ranks_get_a_metrics_line() {
        use streamscope_core::synth::{add_gpu_metrics, fsdp_like, SynthOptions};
        let mut t = fsdp_like(&SynthOptions {
            ranks: 2,
            target_slices: 4_000,
            ..Default::default()
        });
        add_gpu_metrics(&mut t, 10_000);
        let s = summary(&analyze(&t, &AnalysisOptions::default()));
        let lines: Vec<&str> = s.lines().filter(|l| l.contains("GPU metrics:")).collect();
        assert_eq!(lines.len(), 2, "{s}");
        assert!(
            lines
                .iter()
                .all(|l| l.contains("SM active") && l.contains("GB/s")),
            "{s}"
        );
    }

    #[test]
    fn the_warning_count_matches_the_lines() {
        let warning = |i: u64| streamscope_core::analysis::SyncGroup {
            pattern: "item-like".into(),
            api: "cudaStreamSynchronize".into(),
            where_: format!("train.py:{i} (step)"),
            count: 1,
            warning: Some("blocks".into()),
            ..Default::default()
        };
        for n in [1usize, 6, SUMMARY_WARNINGS, SUMMARY_WARNINGS + 3] {
            let r = Report {
                sync_warnings: (0..n as u64).map(warning).collect(),
                ..Default::default()
            };
            let s = summary(&r);
            assert!(s.contains(&format!("  {n} host-sync warning(s):")), "{s}");
            let listed = s.lines().filter(|l| l.starts_with("    rank ")).count();
            let more: usize = s
                .lines()
                .find_map(|l| l.strip_prefix("    ... and "))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            assert_eq!(listed + more, n, "{s}");
            assert_eq!(listed, n.min(SUMMARY_WARNINGS), "{s}");
        }
    }

    #[test]
    fn torch_profiler_runs_are_named() {
        let mut t = streamscope_core::TraceBuilder::new();
        assert!(torch_profiler_lines(&t.clone().finish()).is_empty());
        let mut p = streamscope_core::Process {
            name: "rank 1 · node · 12".into(),
            ..Default::default()
        };
        p.metadata.push((
            streamscope_core::protocol::TORCH_PROFILER_KEY.into(),
            "torch.profiler was started while recorded".into(),
        ));
        t.add_process(p);
        t.add_process(Default::default());
        let lines = torch_profiler_lines(&t.clone().finish());
        assert_eq!(
            lines,
            vec!["  rank 1 · node · 12: torch.profiler was started while recorded".to_string()]
        );
    }
}
