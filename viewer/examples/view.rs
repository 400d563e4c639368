//! Runs the viewer without the CLI: `view [--synth SLICES] [--search TEXT]
//! [--tab overlap|syncs|top] [--screenshot OUT.png] [--size WxH] [TRACE...]`. `--synth` opens a
//! generated FSDP-like trace; `--search` selects the first match.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_viewer::app::Tab;
use streamscope_viewer::{run_app, ViewOptions, ViewerApp};

fn main() -> anyhow::Result<()> {
    let mut opts = ViewOptions::default();
    let mut synth: Option<usize> = None;
    let mut search: Option<String> = None;
    let mut tab = Tab::Overlap;
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
            "--tab" => {
                tab = match args.next().as_deref() {
                    Some("syncs") => Tab::Syncs,
                    Some("top") => Tab::TopKernels,
                    _ => Tab::Overlap,
                }
            }
            "--search" => search = Some(args.next().context("--search needs a text")?),
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
    let mut app = match synth {
        Some(n) => ViewerApp::from_trace(fsdp_like(&SynthOptions {
            target_slices: n,
            ..Default::default()
        })),
        None => ViewerApp::open(opts.traces.clone()),
    };
    if let (Some(q), Some(model)) = (search, &app.model) {
        app.search.query = q;
        if let Some(s) = app.search.step(&model.trace, true) {
            app.timeline.select_and_show(model, s);
        }
    }
    app.tab = tab;
    run_app(app, &opts)
}
