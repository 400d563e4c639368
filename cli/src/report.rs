//! `streamscope report TRACE...`: load, analyze, print text / markdown /
//! JSON, or write one self-contained HTML page (`--format html`).
//!
//! One file loads into memory and is analyzed whole. Several rank files
//! (a directory, or several arguments) are analyzed one file at a time
//! per core, keeping only each rank's rows and collective records
//! (`analysis::streamed`): the same report in bounded memory. Summaries
//! (`--summary-out`) of rank sets analyzed where their files are merge
//! into the report of all their files.

use crate::error::ArgError;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use streamscope_core::analysis::job::{self, display_paths};
use streamscope_core::analysis::streamed::{self, Summary};
use streamscope_core::analysis::{render, AnalysisOptions, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text: the headline block (report: the tables too with --full).
    Text,
    /// JSON (the command's help lists its keys).
    Json,
    /// Markdown tables for a pull request.
    Markdown,
    /// One self-contained HTML page with plots (`report` only; no network
    /// needed to open it): to stdout, or to `-o FILE`.
    Html,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Trace files (.pftrace, Kineto .json/.json.gz) or directories of them; several = one multi-rank trace. Or rank-set summaries (--summary-out), merged into one report.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Write this rank set's summary (per-rank results and collective records) to FILE instead of a report; `report FILE...` merges summaries.
    #[arg(long, value_name = "FILE")]
    pub summary_out: Option<PathBuf>,
    /// Write the report to FILE instead of stdout (any format; `--format html -o report.html`): never over an input, an existing FILE only with --force, through a temporary file renamed into place.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "summary_out"
    )]
    pub output: Option<PathBuf>,
    /// Replace an existing -o / --summary-out file (a regular file only, as `export --force`; never an input).
    #[arg(long)]
    pub force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Text: after the headline block, every table (overlap and breakdown,
    /// top kernels, per step, idle per stream, stalls and prefetch,
    /// collectives, who waits for whom, occupancy, GPU metrics, host syncs).
    #[arg(long)]
    pub full: bool,
    /// Analyze traces of different runs together (two arguments whose
    /// ranks overlap, or recorded far apart in time) as one job; without
    /// it they are refused (`compare A B` puts two runs side by side).
    #[arg(long)]
    pub merge: bool,
    /// Only this rank.
    #[arg(long)]
    pub rank: Option<u32>,
    /// Headline numbers over steps A..B (inclusive step numbers, e.g. 4..6 or 5); default: HTA's window.
    #[arg(long, value_parser = parse_steps)]
    pub steps: Option<(i64, i64)>,
    /// A sync pattern costing at least this much GPU idle (µs) is a warning.
    #[arg(long, default_value_t = 50.0)]
    pub sync_idle_threshold_us: f64,
    /// Idle gaps shorter than this (µs) count as kernel wait (HTA's consecutive_kernel_delay).
    #[arg(long, default_value_t = 30.0)]
    pub kernel_wait_us: f64,
}

/// "A..B", "A..=B" or "A".
pub fn parse_steps(s: &str) -> Result<(i64, i64), ArgError> {
    job::parse_steps(s).map_err(ArgError::from)
}

pub fn options(args: &ReportArgs) -> anyhow::Result<AnalysisOptions> {
    job::options(
        args.rank,
        args.steps,
        args.sync_idle_threshold_us,
        args.kernel_wait_us,
    )
}

/// A progress bar "rank files analyzed k/N" on a terminal's stderr.
fn rank_progress() -> Option<indicatif::ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new(0);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "rank files analyzed {pos}/{len} [{bar:30}] {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    })
}

/// `--summary-out`: analyzes the traces rank file by rank file and writes their summary.
fn write_summary(args: &ReportArgs, out: &Path, opts: &AnalysisOptions) -> anyhow::Result<()> {
    // Never over an input, only a regular file: judged before any work.
    streamscope_core::load::refuse_input_as_output(out, &args.traces)?;
    streamscope_core::load::check_output(out, args.force)?;
    if job::summary_inputs(&args.traces)? {
        bail!(
            "--summary-out takes trace files, not summaries ({})",
            display_paths(&args.traces)
        );
    }
    let pb = rank_progress();
    let files = streamed::summarize_files(&args.traces, opts, &|done, total| {
        if let Some(pb) = &pb {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        }
    });
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let files = files.with_context(|| format!("loading {}", display_paths(&args.traces)))?;
    let ranks: usize = files
        .iter()
        .map(|f| f.parts.iter().filter(|p| p.analyzed).count())
        .sum();
    let n = files.len();
    Summary::new(files, opts)
        .write(out, args.force)
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "streamscope: wrote {} ({ranks} rank(s) of {n} file(s))",
        out.display()
    );
    Ok(())
}

/// Renders the report of the traces in `args` as a string.
pub fn render_report(args: &ReportArgs) -> anyhow::Result<String> {
    let report = checked_report(args)?;
    Ok(match args.format {
        Format::Text if args.full => render::text(&report),
        Format::Text => render::text_brief(&report),
        Format::Json => render::json(&report) + "\n",
        Format::Markdown => render::markdown(&report),
        Format::Html => render::html(&report, &display_paths(&args.traces)),
    })
}

/// The report of `args`, or an error when `--rank` / `--steps` select nothing.
fn checked_report(args: &ReportArgs) -> anyhow::Result<Report> {
    let opts = options(args)?;
    let pb = rank_progress();
    let report = job::report(&args.traces, &opts, args.merge, &|done, total| {
        if let Some(pb) = &pb {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        }
    });
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    // Input that could not be used, and a trace with no rank at all, are
    // said on stderr too, whatever the format (the report holds them in
    // its notes or `diagnostics`): a script keeping only stdout hears of
    // them.
    if let Ok(r) = &report {
        for d in &r.diagnostics {
            if d.severity == streamscope_core::diagnostic::Severity::DataLoss
                || d.kind == streamscope_core::diagnostic::Kind::NoGpuWork
            {
                eprintln!("streamscope: warning: {d}");
            }
        }
    }
    report
}

pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    if let Some(out) = &args.summary_out {
        return write_summary(args, out, &options(args)?);
    }
    if let Some(out) = &args.output {
        return write_report(args, out);
    }
    use std::io::Write;
    let written = if args.format == Format::Json {
        // Written as it is serialized (the JSON of a thousand ranks is
        // gigabytes): the bytes of `render::json`.
        let report = checked_report(args)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        render::pretty::to_writer(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
    } else {
        let out = render_report(args)?;
        std::io::stdout().lock().write_all(out.as_bytes())
    };
    match written {
        // `streamscope report ... | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the report"),
    }
}

/// `-o FILE`: the report in its format, written through a temporary file
/// (never over an input; an existing file only with `--force`), judged
/// before any work.
fn write_report(args: &ReportArgs, out: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    streamscope_core::load::refuse_input_as_output(out, &args.traces)?;
    streamscope_core::load::check_output(out, args.force)?;
    let written = if args.format == Format::Json {
        let report = checked_report(args)?;
        streamscope_core::load::write_atomically(out, args.force, |w| {
            render::pretty::to_writer(&mut *w, &report).map_err(std::io::Error::from)?;
            w.write_all(b"\n")
        })
    } else {
        let text = render_report(args)?;
        streamscope_core::load::write_atomically(out, args.force, |w| w.write_all(text.as_bytes()))
    };
    written.with_context(|| format!("writing {}", out.display()))?;
    eprintln!("streamscope: wrote {}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::analysis::job::StepsError;

    fn args(format: Format) -> ReportArgs {
        let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../core/tests/data/hta/nccl_parser_config/nccl_data.json.gz");
        ReportArgs {
            traces: vec![trace],
            summary_out: None,
            output: None,
            force: false,
            format,
            full: true,
            merge: false,
            rank: None,
            steps: None,
            sync_idle_threshold_us: 50.0,
            kernel_wait_us: 30.0,
        }
    }

    #[test]
    fn renders_each_format() -> anyhow::Result<()> {
        let json: serde_json::Value = serde_json::from_str(&render_report(&args(Format::Json))?)?;
        assert_eq!(json["ranks"][0]["rank"], 0);
        assert!(json["ranks"][0]["overlap_pct"].as_f64().is_some());
        let text = render_report(&args(Format::Text))?;
        assert!(text.starts_with("streamscope report: 1 rank(s)"), "{text}");
        let md = render_report(&args(Format::Markdown))?;
        assert!(md.starts_with("## streamscope report"), "{md}");
        let steps = ReportArgs {
            steps: Some((5, 5)),
            ..args(Format::Json)
        };
        let json: serde_json::Value = serde_json::from_str(&render_report(&steps)?)?;
        assert_eq!(json["ranks"][0]["window"]["rule"], "selected_steps");
        assert_eq!(json["ranks"][0]["window"]["steps"][0], 5);
        Ok(())
    }

    #[test]
    fn missing_rank_and_bad_threshold_are_errors() {
        let missing = ReportArgs {
            rank: Some(9),
            ..args(Format::Text)
        };
        let err = render_report(&missing)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("rank 9"), "{err}");
        let bad = ReportArgs {
            sync_idle_threshold_us: -1.0,
            ..args(Format::Text)
        };
        assert!(render_report(&bad).is_err());
    }

    #[test]
    fn steps_on_a_trace_without_them_say_why() {
        // One kernel and no step marker: nothing to select.
        let dir = std::env::temp_dir().join(format!("ss-nosteps-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let mut t = streamscope_core::TraceBuilder::new();
        use streamscope_core::*;
        let p = t.add_process(Process {
            pid: 1,
            rank: Some(0),
            ..Default::default()
        });
        let d = t.add_device(Device {
            process: p,
            name: "GPU".into(),
            ..Default::default()
        });
        let s = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "s7",
        );
        let n = t.intern("gemm");
        let mut k = NewSlice::new(s, SliceKind::Kernel, n, 0, 1000);
        k.class = SliceClass::Compute;
        t.push_slice(k);
        let path = dir.join("rank-0.json");
        assert!(streamscope_core::chrome::write_file(&t.clone().finish(), &path).is_ok());
        let a = ReportArgs {
            traces: vec![path],
            steps: Some((4, 12)),
            ..args(Format::Text)
        };
        let err = render_report(&a)
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.contains("--steps 4..12"), "{err}");
        assert!(err.contains("no steps"), "{err}");
        // Steps exist but none in the range: the error lists them.
        let out_of_range = ReportArgs {
            steps: Some((40, 50)),
            ..args(Format::Text)
        };
        let err = render_report(&out_of_range)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("none in 40..50"), "{err}");
    }

    #[test]
    fn summaries_merge_into_the_report_of_their_files() -> anyhow::Result<()> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-nccl-h200x2");
        let files = streamscope_core::load::expand(&dir)?;
        let tmp = std::env::temp_dir().join(format!("ss-summary-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        let mut outs = Vec::new();
        for (k, f) in files.iter().enumerate() {
            let out = tmp.join(format!("node-{k}.summary"));
            let a = ReportArgs {
                traces: vec![f.clone()],
                summary_out: Some(out.clone()),
                ..args(Format::Json)
            };
            run(&a)?;
            outs.push(out);
        }
        let merged = render_report(&ReportArgs {
            traces: outs.clone(),
            ..args(Format::Json)
        });
        let direct = render_report(&ReportArgs {
            traces: vec![dir],
            ..args(Format::Json)
        });
        // A summary again without --force: refused.
        let again = run(&ReportArgs {
            traces: vec![files[0].clone()],
            summary_out: Some(outs[0].clone()),
            ..args(Format::Json)
        });
        let mixed = render_report(&ReportArgs {
            traces: vec![outs[0].clone(), files[1].clone()],
            ..args(Format::Json)
        });
        let _ = std::fs::remove_dir_all(&tmp);
        // Findings aside (their gains need the whole trace to replay, which
        // summaries do not hold), the merge is the direct report.
        let parse = |s: String| -> anyhow::Result<serde_json::Value> {
            let mut v: serde_json::Value = serde_json::from_str(&s)?;
            let f = v
                .as_object_mut()
                .and_then(|o| o.remove("findings"))
                .ok_or_else(|| anyhow::anyhow!("no findings key"))?;
            Ok(serde_json::json!({ "report": v, "findings": f }))
        };
        let (merged, direct) = (parse(merged?)?, parse(direct?)?);
        assert!(
            merged["report"] == direct["report"],
            "merged summaries differ from the direct report"
        );
        let kinds = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v["findings"]
                .as_array()
                .map(|a| a.iter().map(|f| f["kind"].to_string()).collect())
                .unwrap_or_default();
            k.sort();
            k
        };
        // Kinds read from the trace itself (pageable copies) need it whole.
        let (km, kd) = (kinds(&merged), kinds(&direct));
        assert!(
            km.iter().all(|k| kd.contains(k)),
            "merged findings {km:?} not among the direct report's {kd:?}"
        );
        assert!(km.contains(&"\"sync\"".to_string()), "{km:?}");
        let merged_findings = merged["findings"].as_array().cloned().unwrap_or_default();
        assert!(!merged_findings.is_empty());
        assert!(
            merged_findings
                .iter()
                .all(|f| f["predicted_gain_us"].is_null()),
            "a merge of summaries predicts no gain"
        );
        let again = again.err().map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(again.contains("already exists"), "{again}");
        let mixed = mixed.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(mixed.contains("mixed"), "{mixed}");
        Ok(())
    }

    #[test]
    fn step_ranges() {
        assert_eq!(parse_steps("4..6"), Ok((4, 6)));
        assert_eq!(parse_steps("4..=6"), Ok((4, 6)));
        assert_eq!(parse_steps("5"), Ok((5, 5)));
        assert_eq!(
            parse_steps("6..4"),
            Err(ArgError::Steps(StepsError::Empty("6..4".into())))
        );
        let e = parse_steps("x..4").expect_err("not a number");
        assert!(
            matches!(&e, ArgError::Steps(StepsError::Number { text, .. }) if text == "x"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            r#"bad step number "x": invalid digit found in string"#
        );
    }
}
