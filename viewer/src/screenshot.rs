//! `--screenshot OUT.png`: once the first frames have laid out, ask the
//! backend for the rendered pixels, write them as PNG and close the window.

use crate::error::ScreenshotError;
use std::path::Path;
use std::sync::{Arc, Mutex};

use egui::{ColorImage, Context, ViewportCommand};

use crate::app::ViewerApp;

/// Frames to draw before the shot (fonts and panel sizes settle after the
/// first pass).
const SETTLE_FRAMES: u32 = 3;

pub(crate) fn after_frame(ctx: &Context, app: &mut ViewerApp) {
    let loading = app.is_loading();
    let Some(job) = &mut app.screenshot else {
        return;
    };
    if loading {
        // The shot shows the loaded trace, not the progress bar.
        ctx.request_repaint_after(std::time::Duration::from_millis(50));
        return;
    }
    job.frames += 1;
    if job.requested {
        ctx.request_repaint();
        return;
    }
    if job.frames < SETTLE_FRAMES {
        ctx.request_repaint();
        return;
    }
    job.requested = true;
    let path = job.path.clone();
    let result = job.result.clone();
    let ctx2 = ctx.clone();
    ctx.request_screenshot(move |img: Arc<ColorImage>| {
        let r = write_png(&path, &img);
        if let Ok(mut slot) = result.lock() {
            *slot = Some(r);
        }
        ctx2.send_viewport_cmd(ViewportCommand::Close);
        ctx2.request_repaint();
    });
    ctx.request_repaint();
}

pub(crate) fn new_result_slot() -> Arc<Mutex<Option<Result<(), ScreenshotError>>>> {
    Arc::new(Mutex::new(None))
}

/// Writes an egui image as an RGBA PNG.
pub fn write_png(path: &Path, img: &ColorImage) -> Result<(), ScreenshotError> {
    let [w, h] = img.size;
    let mut bytes = Vec::with_capacity(w * h * 4);
    for c in &img.pixels {
        bytes.extend_from_slice(&c.to_array());
    }
    let buf = image::RgbaImage::from_raw(w as u32, h as u32, bytes)
        .ok_or_else(|| ScreenshotError::WrongSize(path.to_path_buf()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| ScreenshotError::Write {
            path: dir.to_path_buf(),
            why: e.to_string(),
        })?;
    }
    buf.save(path).map_err(|e| ScreenshotError::Write {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}
