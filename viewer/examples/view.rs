//! Runs the viewer without the CLI: `view [--synth SLICES] [--screenshot OUT.png]
//! [--size WxH] [TRACE...]`. `--synth` opens a generated FSDP-like trace.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_viewer::{run, run_app, ViewOptions, ViewerApp};

fn main() -> anyhow::Result<()> {
    let mut opts = ViewOptions::default();
    let mut synth: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--screenshot" => {
                opts.screenshot = Some(PathBuf::from(
                    args.next().context("--screenshot needs a path")?,
                ))
            }
            "--size" => {
                let v = args.next().context("--size needs WxH")?;
                let (w, h) = v
                    .split_once('x')
                    .ok_or_else(|| anyhow!("--size {v}: expected WxH"))?;
                opts.size = Some((w.parse()?, h.parse()?));
            }
            "--synth" => {
                synth = Some(
                    args.next()
                        .context("--synth needs a slice count")?
                        .parse()?,
                )
            }
            s if s.starts_with("--") => bail!("unknown option {s}"),
            path => opts.traces.push(PathBuf::from(path)),
        }
    }
    match synth {
        Some(n) => {
            let trace = fsdp_like(&SynthOptions {
                target_slices: n,
                ..Default::default()
            });
            run_app(ViewerApp::from_trace(trace), &opts)
        }
        None => run(opts),
    }
}
