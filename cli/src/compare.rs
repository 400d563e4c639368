//! `streamscope compare A B`: two runs of one job side by side.

use std::path::PathBuf;

use anyhow::{bail, Context};
use streamscope_core::analysis::compare;

use crate::report::Format;

#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The control run: a trace file or a directory of rank files.
    pub control: PathBuf,
    /// The test run, compared against the control.
    pub test: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Only this rank.
    #[arg(long)]
    pub rank: Option<u32>,
}

/// Renders the comparison of the two runs in `args` as a string.
pub fn render(args: &CompareArgs) -> anyhow::Result<String> {
    if args.format == Format::Html {
        bail!("--format html is for `report` only; compare writes text, json or markdown");
    }
    let c = streamscope_core::analysis::job::compare(&args.control, &args.test, args.rank)?;
    Ok(match args.format {
        Format::Text => compare::text(&c),
        Format::Json => compare::json(&c) + "\n",
        Format::Markdown => compare::markdown(&c),
        Format::Html => bail!("--format html is for `report` only"),
    })
}

pub fn run(args: &CompareArgs) -> anyhow::Result<()> {
    let out = render(args)?;
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the comparison"),
    }
}
