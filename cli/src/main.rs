//! `streamscope`: record, report, view, export and inspect GPU traces.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use streamscope_core::ProcessId;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use streamscope_core::load::{load_paths_keeping, KeepArgs};
use streamscope_core::{SliceKind, Trace, TrackKind};

mod capture;
mod cleanup;
mod compare;
mod error;
mod record;
mod report;
mod sweep;
mod whatif;

#[derive(Parser)]
#[command(
    name = "streamscope",
    version,
    about = "GPU timeline profiler for distributed training"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command with the CUPTI collector injected; one trace per CUDA process.
    Record(record::RecordArgs),
    /// Start a capture in the armed processes (`record --armed`) of this host: one file per process, rank-R.capture-K.pftrace.
    Capture(capture::CaptureArgs),
    /// Overlap, exposed communication, idle time, steps, sync stalls and SM occupancy.
    #[command(after_help = REPORT_KEYS)]
    Report(report::ReportArgs),
    /// Open the timeline viewer (the bundled trace when no TRACE is given).
    View(ViewArgs),
    /// Two runs side by side: step time, overlap, exposed communication, idle, and kernels and collectives by change.
    #[command(after_help = COMPARE_KEYS)]
    Compare(compare::CompareArgs),
    /// Replay the steps with changed durations: slower/faster collectives
    /// (--comm-scale, --link-bw), compute (--compute-scale), host syncs
    /// removed (--drop-syncs); predicted step time, overlap, exposed
    /// communication, critical path and the communication wall per collective.
    #[command(after_help = WHATIF_KEYS)]
    Whatif(whatif::WhatIfArgs),
    /// Run a command once per configuration of an environment grid (NCCL
    /// knobs), each recorded; then step time, overlap, exposed
    /// communication and bus bandwidth per configuration (markdown, JSON, SVG).
    Sweep(sweep::SweepArgs),
    /// Convert a trace to Perfetto protobuf or chrome-json.
    Export(ExportArgs),
    /// Ranks, devices, streams, counts per kind, time span and dropped records.
    Info(InfoArgs),
}

/// The top-level keys of `report --format json` (docs/METRICS.md).
const REPORT_KEYS: &str = "JSON keys (--format json): headline, ranks, other_processes, steps, \
collectives, collectives_per_step, occupancy, cross_rank, sync_warnings, dropped_records, \
diagnostics, findings. Definitions: docs/METRICS.md.";
/// The top-level keys of `compare --format json`.
const COMPARE_KEYS: &str = "JSON keys (--format json): control, test, ranks, kernels, \
collectives, diagnostics. Definitions: docs/METRICS.md.";
/// The top-level keys of `whatif --format json`.
const WHATIF_KEYS: &str = "JSON keys (--format json): changes, consistency_max_error_pct, \
graph_nodes, graph_edges, launch_queue_depth, launch_queue_waits, ranks, notes. \
Definitions: docs/WHATIF.md.";

#[derive(clap::Args)]
struct ViewArgs {
    /// Trace files or directories (Perfetto or Kineto); several ranks at once.
    traces: Vec<PathBuf>,
    /// Render the first frame to this PNG and exit (headless under Xvfb).
    #[arg(long)]
    screenshot: Option<PathBuf>,
    /// Window size for the screenshot, WxH.
    #[arg(long, value_parser = parse_size)]
    size: Option<(u32, u32)>,
    /// Open on step N (as `report` numbers steps), its bounds marked.
    #[arg(long, value_name = "N", conflicts_with = "range")]
    step: Option<i64>,
    /// Open on a time range from the trace start, e.g. 120ms..160ms.
    #[arg(long, value_name = "A..B", value_parser = streamscope_viewer::parse_range)]
    range: Option<(f64, f64)>,
    /// Show this rank only (other ranks collapsed); --step takes its step.
    #[arg(long, value_name = "R")]
    rank: Option<u32>,
    /// Two runs side by side: the test run aligned at the control's first
    /// step, and a Compare tab (what `streamscope compare` prints).
    #[arg(long, num_args = 2, value_names = ["CONTROL", "TEST"], conflicts_with = "traces")]
    compare: Option<Vec<PathBuf>>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// Perfetto TrackEvent protobuf (.pftrace), opens in ui.perfetto.dev.
    Perfetto,
    /// Trace Event Format JSON (chrome://tracing).
    ChromeJson,
}

#[derive(clap::Args)]
struct ExportArgs {
    /// A .pftrace, a Kineto .json, either gzip-compressed (.gz), or a directory of them.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Output format.
    #[arg(long = "to", value_enum)]
    to: ExportFormat,
    /// Output file, gzip-compressed when its name ends in .gz. An existing
    /// file is refused unless --force; an input (or a trace file inside an
    /// input directory) is always refused. Written through a temporary
    /// .NAME.streamscope-PID-N.tmp beside it, renamed into place when
    /// complete (removed on Ctrl-C/SIGTERM; the next write removes one left
    /// by a kill -9).
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file: a regular file only (a symbolic
    /// link to one has its target replaced); a device, FIFO, socket,
    /// directory or dangling link is refused.
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct InfoArgs {
    /// A .pftrace, a Kineto .json, either gzip-compressed (.gz), or a directory of them.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
}

fn parse_size(s: &str) -> Result<(u32, u32), error::ArgError> {
    let bad = || error::ArgError::Size(s.to_string());
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let n = |v: &str| v.trim().parse::<u32>().map_err(|_| bad());
    Ok((n(w)?, n(h)?))
}

/// Loads traces with a spinner on a terminal, and prints load warnings.
pub fn load_with_progress(paths: &[PathBuf]) -> Result<Trace> {
    load_with_progress_keeping(paths, KeepArgs::All)
}

/// [`load_with_progress`], keeping the arguments of Kineto events that
/// `keep` says.
pub fn load_with_progress_keeping(paths: &[PathBuf], keep: KeepArgs) -> Result<Trace> {
    let spinner = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_message(format!(
            "loading {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ));
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        pb
    });
    let trace = load_paths_keeping(paths, keep);
    if let Some(pb) = spinner {
        pb.finish_and_clear();
    }
    let trace = trace?;
    for d in trace.diagnostics() {
        eprintln!("streamscope: warning: {d}");
    }
    Ok(trace)
}

fn export(args: &ExportArgs) -> Result<()> {
    let t0 = Instant::now();
    streamscope_core::load::refuse_input_as_output(&args.output, &args.traces)?;
    streamscope_core::load::check_output(&args.output, args.force)?;
    let trace = load_with_progress(&args.traces)?;
    let overwrite = args.force;
    match args.to {
        ExportFormat::Perfetto => {
            let offset = streamscope_core::perfetto::time_offset_ns(&trace);
            if offset > 0 {
                eprintln!(
                    "streamscope: warning: {}: times from {} ns: Perfetto's are unsigned, so every time is written {offset} ns later (process metadata time_offset_ns); chrome-json keeps them",
                    args.output.display(),
                    -offset
                );
            }
            streamscope_core::perfetto::write_new_file(&trace, &args.output, overwrite)?
        }
        ExportFormat::ChromeJson => {
            streamscope_core::chrome::write_new_file(&trace, &args.output, overwrite)?
        }
    }
    let bytes = std::fs::metadata(&args.output)
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!(
        "streamscope: wrote {} ({} slices, {:.1} MB) in {:.2} s",
        args.output.display(),
        trace.slices().len(),
        bytes as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

fn fmt_ns(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    match a {
        a if a >= 1e9 => format!("{:.3} s", ns as f64 / 1e9),
        a if a >= 1e6 => format!("{:.3} ms", ns as f64 / 1e6),
        a if a >= 1e3 => format!("{:.3} µs", ns as f64 / 1e3),
        _ => format!("{ns} ns"),
    }
}

fn info(args: &InfoArgs) -> Result<()> {
    let trace = load_with_progress(&args.traces)?;
    use std::io::Write;
    match std::io::stdout()
        .lock()
        .write_all(info_text(&trace).as_bytes())
    {
        // `streamscope info ... | head` closing the pipe early is fine.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// The `info` summary of a trace.
fn info_text(t: &Trace) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "processes: {}   slices: {}   flows: {}   counter samples: {}",
        t.processes().len(),
        t.slices().len(),
        t.flows().len(),
        t.counters().len()
    );
    if let Some((a, b)) = t.time_span() {
        // Saturating: timestamps near ±2^63 ns must not wrap the span.
        let _ = writeln!(
            o,
            "time span: {} ({} .. {} ns)",
            fmt_ns(b.saturating_sub(a)),
            a,
            b
        );
    }
    let _ = writeln!(o, "dropped records: {}", t.dropped_records());
    let _ = writeln!(o, "counts per kind:");
    for (k, n) in t.count_by_kind() {
        let _ = writeln!(o, "  {:<10} {n}", k.name());
    }
    // Per-track slice counts and kernels, in one pass.
    let mut per_track = vec![(0usize, 0usize); t.tracks().len()];
    for i in 0..t.slices().len() {
        let e = &mut per_track[t.slices().track()[i].index()];
        e.0 += 1;
        if t.slices().kind()[i] == SliceKind::Kernel {
            e.1 += 1;
        }
    }
    for (pi, p) in t.processes().iter().enumerate() {
        let rank = p
            .rank
            .map(|r| format!("rank {r}"))
            .unwrap_or_else(|| "rank ?".into());
        let world = p.world_size.map(|w| format!(" of {w}")).unwrap_or_default();
        let _ = writeln!(o, "\n{}", process_line(p, &format!("{rank}{world}")));
        if p.dropped_records > 0 {
            let _ = writeln!(o, "  dropped records: {}", p.dropped_records);
        }
        for d in t
            .devices()
            .iter()
            .filter(|d| d.process == ProcessId::from_index(pi))
        {
            let _ = writeln!(
                o,
                "  GPU {}: {} (sm_{}{}, {} SMs)",
                d.ordinal, d.name, d.compute_major, d.compute_minor, d.sm_count
            );
        }
        for (ti, tr) in t.tracks().iter().enumerate() {
            if tr.process != ProcessId::from_index(pi) {
                continue;
            }
            let (n, kernels) = per_track[ti];
            match tr.kind {
                TrackKind::Stream { device, stream } => {
                    let ord = t
                        .devices()
                        .get(device.index())
                        .map(|d| d.ordinal)
                        .unwrap_or(device.get());
                    let _ = writeln!(
                        o,
                        "  stream {stream:<5} GPU {ord}: {}, {}",
                        plural(n, "slice"),
                        plural(kernels, "kernel")
                    );
                }
                TrackKind::Thread { tid } => {
                    let _ = writeln!(
                        o,
                        "  thread {tid:<5} {}: {}",
                        t.str(tr.name),
                        plural(n, "slice")
                    );
                }
                TrackKind::Counter { .. } => {
                    let samples = t
                        .counters()
                        .track()
                        .iter()
                        .filter(|c| c.get() == ti as u32)
                        .count();
                    let _ = writeln!(
                        o,
                        "  counter {}: {}",
                        t.str(tr.name),
                        plural(samples, "sample")
                    );
                }
                _ => {}
            }
        }
        // What the GPU metrics sampler accepted, refused and measured.
        for (k, v) in p
            .metadata
            .iter()
            .filter(|(k, _)| k.starts_with("gpu_metrics"))
        {
            let _ = writeln!(o, "  {k}: {v}");
        }
    }
    if !t.diagnostics().is_empty() {
        let _ = writeln!(o, "\ndiagnostics:");
        for d in t.diagnostics() {
            let sev = match d.severity {
                streamscope_core::diagnostic::Severity::Info => "info",
                streamscope_core::diagnostic::Severity::DataLoss => "data loss",
                streamscope_core::diagnostic::Severity::Error => "error",
            };
            let _ = writeln!(o, "  [{sev}] {d}");
        }
    }
    o
}

/// "1 slice", "2 slices".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// "rank 0 of 2 · pid 1006 · host vm · python3 · clock monotonic": each
/// fact once (the collector's process name repeats the rank, host and pid).
fn process_line(p: &streamscope_core::Process, rank: &str) -> String {
    let pid = p.pid.to_string();
    let mut parts = vec![rank.to_string(), format!("pid {pid}")];
    if !p.hostname.is_empty() {
        parts.push(format!("host {}", p.hostname));
    }
    let said = |x: &str| {
        x.is_empty()
            || x == pid
            || x == p.hostname
            || rank.starts_with(x)
            || x == format!("pid {pid}")
    };
    let name: Vec<&str> = p
        .name
        .split(" · ")
        .map(str::trim)
        .filter(|x| !said(x))
        .collect();
    if !name.is_empty() {
        parts.push(name.join(" · "));
    }
    parts.push(format!("clock {}", p.clock.name()));
    parts.join(" · ")
}

/// The hint when the viewer cannot open a window.
const NO_DISPLAY_HINT: &str =
    "to render the viewer to a PNG instead: streamscope view TRACE --screenshot OUT.png \
     (under xvfb-run where no X server runs; scripts/demo.sh does it)";

/// A windowing error without the source location winit puts in it
/// ("os error at /root/.cargo/registry/.../mod.rs:765: why" -> "os error: why").
fn without_source_location(e: &str) -> String {
    match e.find(" at /") {
        Some(i) => {
            let rest = &e[i + 4..];
            // The location ends with ":LINE: ".
            let end = rest.find(": ").map_or(rest.len(), |k| k + 2);
            format!("{}: {}", &e[..i], &rest[end..])
        }
        None => e.to_string(),
    }
}

fn view(args: &ViewArgs) -> Result<()> {
    if let Some(png) = &args.screenshot {
        let inputs = [
            args.traces.clone(),
            args.compare.clone().unwrap_or_default(),
        ]
        .concat();
        streamscope_core::load::refuse_input_as_output(png, &inputs)?;
    }
    let display = ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    if !display && args.screenshot.is_none() {
        anyhow::bail!("no display (DISPLAY and WAYLAND_DISPLAY are unset); {NO_DISPLAY_HINT}");
    }
    view_window(args).map_err(|e| {
        let line = without_source_location(&error_line(&e));
        if args.screenshot.is_none() && line.contains("cannot open the viewer window") {
            anyhow::anyhow!("{line}; {NO_DISPLAY_HINT}")
        } else {
            anyhow::anyhow!(line)
        }
    })
}

fn view_window(args: &ViewArgs) -> Result<()> {
    streamscope_viewer::run(streamscope_viewer::ViewOptions {
        traces: args.traces.clone(),
        screenshot: args.screenshot.clone(),
        size: args.size,
        framing: streamscope_viewer::Framing {
            target: match (args.step, args.range) {
                (Some(n), _) => Some(streamscope_viewer::FrameTarget::Step(n)),
                (None, Some((a, b))) => Some(streamscope_viewer::FrameTarget::Range(a, b)),
                (None, None) => None,
            },
            rank: args.rank,
        },
        compare: args
            .compare
            .as_ref()
            .and_then(|v| Some((v.first()?.clone(), v.get(1)?.clone()))),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Export(_) | Command::Report(_)) {
        // They write through temporary files: removed if interrupted.
        cleanup::remove_temp_files_on_signals();
    }
    let result = match &cli.command {
        // record exits with the recorded command's exit code.
        Command::Record(a) => record::run(a),
        Command::Capture(a) => capture::run(a).map(|()| 0),
        Command::Report(a) => report::run(a).map(|()| 0),
        Command::View(a) => view(a).map(|()| 0),
        Command::Compare(a) => compare::run(a).map(|()| 0),
        Command::Whatif(a) => whatif::run(a).map(|()| 0),
        Command::Sweep(a) => sweep::run(a),
        Command::Export(a) => export(a).map(|()| 0),
        Command::Info(a) => info(a).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("streamscope: error: {}", error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// One line: the error and its causes, without repeating what the outer
/// message already says.
fn error_line(e: &anyhow::Error) -> String {
    streamscope_core::analysis::job::error_line(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_takes_a_step_or_a_range_and_a_rank() {
        let v = |args: &[&str]| {
            Cli::try_parse_from([&["streamscope", "view", "t"], args].concat()).map(|c| {
                match c.command {
                    Command::View(v) => (v.step, v.range, v.rank),
                    _ => (None, None, None),
                }
            })
        };
        assert_eq!(
            v(&["--step", "6", "--rank", "1"]).ok(),
            Some((Some(6), None, Some(1)))
        );
        assert_eq!(
            v(&["--range", "120..160ms"]).ok(),
            Some((None, Some((120e6, 160e6)), None))
        );
        assert!(v(&["--step", "6", "--range", "1ms..2ms"]).is_err());
        assert!(v(&["--range", "1..2"]).is_err(), "a range needs a unit");
    }

    #[test]
    fn info_lists_streams_and_counts() {
        let t = streamscope_core::synth::fsdp_like(&streamscope_core::synth::SynthOptions {
            target_slices: 500,
            ..Default::default()
        });
        let s = info_text(&t);
        assert!(s.contains("rank 0 of 2"), "{s}");
        assert!(s.contains("stream 7"), "{s}");
        assert!(s.contains("kernel"), "{s}");
        assert!(s.contains("GPU 0: NVIDIA H200 (sm_90, 132 SMs)"), "{s}");
    }

    #[test]
    fn size_parses() {
        assert_eq!(parse_size("1600x1000"), Ok((1600, 1000)));
        assert_eq!(parse_size("big"), Err(error::ArgError::Size("big".into())));
    }
}
