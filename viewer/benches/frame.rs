//! Frame cost of the viewer on a 10-million-slice trace, headless: one egui
//! pass (level of detail + mesh building + all panels) plus tessellation,
//! full zoom-out and zoomed in. Prints medians; not a pass/fail test.
//!
//! `cargo bench -p streamscope-viewer --bench frame [-- SLICES]`

use std::time::{Duration, Instant};

use egui::{Context, Pos2, RawInput, Rect, Vec2};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_viewer::timeline::{timeline_ui, TimelineState};
use streamscope_viewer::ViewerApp;

const FRAMES: usize = 31;

fn input(size: Vec2) -> RawInput {
    RawInput {
        screen_rect: Some(Rect::from_min_size(Pos2::ZERO, size)),
        ..Default::default()
    }
}

/// Median time of a full frame: `run_ui` then `tessellate`.
fn median_frame(
    ctx: &Context,
    size: Vec2,
    mut ui_fn: impl FnMut(&mut egui::Ui),
) -> (Duration, usize) {
    let mut times = Vec::with_capacity(FRAMES);
    let mut prims = 0;
    for _ in 0..FRAMES {
        let t0 = Instant::now();
        let mut out = ctx.run_ui(input(size), &mut ui_fn);
        out.textures_delta.clear();
        let p = ctx.tessellate(out.shapes, out.pixels_per_point);
        times.push(t0.elapsed());
        prims = p
            .iter()
            .map(|c| match &c.primitive {
                egui::epaint::Primitive::Mesh(m) => m.indices.len() / 3,
                egui::epaint::Primitive::Callback(_) => 0,
            })
            .sum();
    }
    times.sort();
    (times[FRAMES / 2], prims)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let target: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let size = Vec2::new(1920.0, 1080.0);

    let t0 = Instant::now();
    let trace = fsdp_like(&SynthOptions {
        target_slices: target,
        ..Default::default()
    });
    let n = trace.slices.len();
    let gen = t0.elapsed();
    let t1 = Instant::now();
    let mut app = ViewerApp::from_trace(trace);
    let load = t1.elapsed();
    println!(
        "slices: {n} (generated in {}, sort + analysis + index in {})",
        ms(gen),
        ms(load)
    );

    let ctx = Context::default();
    // Fonts and panel sizes settle in the first passes.
    for _ in 0..3 {
        ctx.run_ui(input(size), |ui| app.ui_root(ui))
            .textures_delta
            .clear();
    }
    let (full_app, tris_full) = median_frame(&ctx, size, |ui| app.ui_root(ui));

    let Some(model) = app.model.take() else {
        eprintln!("no model");
        return;
    };
    let mut st = TimelineState::default();
    let tl = Context::default();
    for _ in 0..3 {
        tl.run_ui(input(size), |ui| timeline_ui(ui, &model, &mut st))
            .textures_delta
            .clear();
    }
    let (full_tl, _) = median_frame(&tl, size, |ui| timeline_ui(ui, &model, &mut st));

    // Zoomed in: 1/2000 of the trace, in the middle (a few steps' kernels).
    let (a, b) = model.index.span_ns;
    let mid = a + (b - a) / 2;
    let w = ((b - a) / 2000).max(1000);
    st.zoom_to(&model.index, mid - w / 2, mid + w / 2);
    let (zoom_tl, tris_zoom) = median_frame(&tl, size, |ui| timeline_ui(ui, &model, &mut st));
    app.model = Some(model);
    app.timeline.zoom_to(
        &app.model
            .as_ref()
            .map(|m| m.index.clone())
            .unwrap_or_default(),
        mid - w / 2,
        mid + w / 2,
    );
    let (zoom_app, _) = median_frame(&ctx, size, |ui| app.ui_root(ui));

    println!("frame 1920x1080, median of {FRAMES} (egui pass + tessellation):");
    println!(
        "  full zoom-out, whole app:    {} ({tris_full} triangles)",
        ms(full_app)
    );
    println!("  full zoom-out, timeline only: {}", ms(full_tl));
    println!("  zoomed in 1/2000, whole app: {}", ms(zoom_app));
    println!(
        "  zoomed in 1/2000, timeline:  {} ({tris_zoom} triangles)",
        ms(zoom_tl)
    );
}
