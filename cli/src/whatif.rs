//! `streamscope whatif TRACE...`: the steps replayed with changed
//! durations (communication, compute, host syncs).

use crate::error::ArgError;
use std::path::PathBuf;

use anyhow::{bail, Context};
use streamscope_core::analysis::whatif::{render, Changes, WhatIfOptions};

use crate::report::Format;

fn positive(s: &str) -> Result<f64, ArgError> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| ArgError::NotANumber(s.to_string()))?;
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(ArgError::NotPositive(s.to_string()))
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct WhatIfArgs {
    /// Trace files or directories of rank files (Perfetto or Kineto).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// NCCL kernels' transfer part (after the last rank arrived) × X.
    #[arg(long, value_name = "X", value_parser = positive, conflicts_with = "link_bw")]
    pub comm_scale: Option<f64>,
    /// NCCL transfers recomputed at this bus bandwidth (GB/s) from each
    /// collective's bytes (record_param_comms or NCCL plugin metadata).
    #[arg(long, value_name = "GBPS", value_parser = positive)]
    pub link_bw: Option<f64>,
    /// Non-NCCL kernels × X.
    #[arg(long, value_name = "X", value_parser = positive)]
    pub compute_scale: Option<f64>,
    /// Remove the host syncs at this Python line (FILE:LINE) or whose API
    /// name or Python location contains PATTERN: the host no longer waits.
    /// Repeatable.
    #[arg(long, value_name = "FILE:LINE|PATTERN")]
    pub drop_syncs: Vec<String>,
    /// Run the legacy default stream's work as if it were on a non-blocking
    /// stream: GPU work no longer waits on its implicit synchronization with
    /// the blocking streams (needs a `streamscope record` trace, which says
    /// how each stream was created).
    #[arg(long)]
    pub legacy_stream_nonblocking: bool,
    /// Prefetch N units deeper: each NCCL all-gather issued N positions
    /// earlier in its step's sequence (its launch and the buffer it waits
    /// for become those of the all-gather N before it); the report adds
    /// the peak memory that holds (docs/METRICS.md, "What-if").
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub prefetch_deeper: Option<u32>,
    /// Launches the host may queue ahead of the GPU before a launch call
    /// blocks (default 1024, an assumption: CUDA does not document it); a
    /// host freed of its syncs runs ahead until the queue is full.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub launch_queue: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Renders the replay of `args` as a string.
pub fn render(args: &WhatIfArgs) -> anyhow::Result<String> {
    if args.format == Format::Html {
        bail!("--format html is for `report` only; whatif writes text, json or markdown");
    }
    // Only analyzed: a Kineto file's arguments no analysis reads are skipped.
    let trace = crate::load_with_progress_keeping(
        &args.traces,
        streamscope_core::load::KeepArgs::Analysis,
    )?;
    let opts = WhatIfOptions {
        changes: Changes {
            comm_scale: args.comm_scale,
            link_bw_gbps: args.link_bw,
            compute_scale: args.compute_scale,
            drop_syncs: false,
            unblock_legacy: args.legacy_stream_nonblocking,
            prefetch_deeper: args.prefetch_deeper,
        },
        drop_syncs: args.drop_syncs.clone(),
        launch_queue: args.launch_queue,
    };
    let r = streamscope_core::analysis::job::whatif(&args.traces, &trace, &opts)?;
    Ok(match args.format {
        Format::Text => render::text(&r),
        Format::Json => render::json(&r) + "\n",
        Format::Markdown => render::markdown(&r),
        Format::Html => bail!("--format html is for `report` only"),
    })
}

pub fn run(args: &WhatIfArgs) -> anyhow::Result<()> {
    let out = render(args)?;
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the replay"),
    }
}
