//! streamscope's desktop timeline viewer (egui/eframe).
//!
//! [`app::ViewerApp`] is the whole UI; [`run`] opens it in a window (or, with
//! `screenshot`, renders the first frame to a PNG and exits).
//!
//! Layout: [`timeline`] (lane tree, level of detail, per-column class
//! coverage of GPU lanes when zoomed out, one-mesh painting, input)
//! in the middle; [`panels`] over the analysis report (overlap, sync
//! warnings), selection details, top kernels and search; [`load`] and
//! [`browse`] open files. Numbers come from `streamscope_core::analysis`;
//! the viewer computes only what it draws (and the top-kernel table).
//!
//! Controls (as in Perfetto and Tracy): wheel or W/S zoom around the pointer;
//! drag, horizontal scroll, A/D or ←/→ pan; ↑/↓ or the wheel over the lane
//! names scroll; shift-drag or right-drag selects a range (Esc clears);
//! click selects a slice (a click on an "N kernels" block zooms into it)
//! and F zooms to it; `--step N`, `--range A..B` and `--rank R` choose
//! what the view opens on ([`Framing`]);
//! files can be dropped onto the window.

pub mod app;
pub mod browse;
pub mod error;
pub mod framing;
pub mod load;
pub mod model;
pub mod panels;
mod screenshot;
pub mod style;
pub mod timeline;

use std::path::PathBuf;

use anyhow::{anyhow, Context as _};

pub use app::ViewerApp;
pub use framing::{parse_range, FrameTarget, Framing};

/// `streamscope view` arguments.
#[derive(Debug, Clone, Default)]
pub struct ViewOptions {
    /// Trace files or folders; empty opens the bundled trace.
    pub traces: Vec<PathBuf>,
    /// Render the first frame to this PNG and exit.
    pub screenshot: Option<PathBuf>,
    /// Window size in points (width, height).
    pub size: Option<(u32, u32)>,
    /// What the view opens on (step, range, rank).
    pub framing: Framing,
    /// Two runs side by side (control, test) instead of `traces`.
    pub compare: Option<(PathBuf, PathBuf)>,
}

/// Opens the viewer window and blocks until it is closed. The window opens
/// at once and the traces load behind a progress bar; a screenshot loads
/// first (so that `--step` / `--rank` errors fail it).
pub fn run(opts: ViewOptions) -> anyhow::Result<()> {
    let app = if let Some((a, b)) = &opts.compare {
        let step = match opts.framing.target {
            Some(FrameTarget::Step(n)) => Some(n),
            _ => None,
        };
        ViewerApp::open_compare(a.clone(), b.clone(), step)
    } else if opts.screenshot.is_some() {
        ViewerApp::open(opts.traces.clone())
    } else {
        ViewerApp::open_in_background(opts.traces.clone())
    };
    if let Some(png) = &opts.screenshot {
        refuse_failed_load(&app, png)?;
    }
    run_app(app, &opts)
}

/// A screenshot of a trace that did not load (of the error shown instead)
/// is no screenshot: an error naming the file, and no PNG.
fn refuse_failed_load(app: &ViewerApp, png: &std::path::Path) -> anyhow::Result<()> {
    let failed = app.files.iter().find_map(|f| {
        f.result
            .as_ref()
            .err()
            .filter(|_| !f.path.is_dir())
            .map(|e| (f, e))
    });
    if let Some((f, e)) = failed {
        let path = f.path.display().to_string();
        let e = e.to_string();
        let e = if e.contains(&path) {
            e
        } else {
            format!("{path}: {e}")
        };
        return Err(anyhow!("{e}; no screenshot taken ({})", png.display()));
    }
    if app.model.is_none() {
        let why = app
            .message
            .clone()
            .unwrap_or_else(|| "nothing loaded".into());
        return Err(anyhow!("{why}; no screenshot taken ({})", png.display()));
    }
    Ok(())
}

/// Runs an already built app (e.g. over a generated trace); `opts.traces`
/// is ignored.
pub fn run_app(mut app: ViewerApp, opts: &ViewOptions) -> anyhow::Result<()> {
    if let Err(e) = app.set_framing(opts.framing) {
        // A screenshot of the wrong part of the trace is worse than none;
        // the window opens anyway and shows the error.
        if opts.screenshot.is_some() {
            return Err(anyhow!(e));
        }
    }
    let (w, h) = opts.size.unwrap_or((1600, 1000));
    let result = screenshot::new_result_slot();
    if let Some(path) = &opts.screenshot {
        app.screenshot = Some(app::ScreenshotJob {
            path: path.clone(),
            frames: 0,
            requested: false,
            result: result.clone(),
        });
    }
    let native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("streamscope")
            .with_inner_size([w as f32, h as f32])
            .with_drag_and_drop(true),
        renderer: eframe::Renderer::Glow,
        ..Default::default()
    };
    eframe::run_native("streamscope", native, Box::new(|_cc| Ok(Box::new(app))))
        .map_err(|e| anyhow!("cannot open the viewer window: {e}"))?;
    if let Some(path) = &opts.screenshot {
        let written = result
            .lock()
            .map_err(|_| anyhow!("screenshot state poisoned"))?
            .clone();
        match written {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(anyhow!(e)).context("writing the screenshot"),
            None => {
                return Err(anyhow!(
                    "{}: the window closed before the screenshot was taken",
                    path.display()
                ))
            }
        }
    }
    Ok(())
}
