//! Frame cost of the viewer, headless: one egui pass (level of detail,
//! coverage columns, mesh building, all panels) plus tessellation, at
//! 1920x1080, at every zoom from the whole trace down to a few µs, on a
//! 10-million-slice trace of 2 ranks and on one of 64 ranks. Prints medians
//! and the worst zoom; not a pass/fail test.
//!
//! Then the 2-rank trace again with GPU metrics lanes (4 counters per GPU
//! sampled every 100 µs, as `record --gpu-metrics` at 10 kHz writes them).
//!
//! `cargo bench -p streamscope-viewer --bench frame [-- SLICES] [metrics]`
//! (`metrics`: only the sweep with the metrics lanes)

use std::time::{Duration, Instant};

use egui::{Context, Pos2, RawInput, Rect, Vec2};
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_viewer::ViewerApp;

const FRAMES: usize = 15;
/// Budget per frame (60 Hz).
const BUDGET: Duration = Duration::from_millis(16);

fn input(size: Vec2) -> RawInput {
    RawInput {
        screen_rect: Some(Rect::from_min_size(Pos2::ZERO, size)),
        ..Default::default()
    }
}

/// Median and worst time of a full frame (`run_ui` then `tessellate`), and
/// the triangles of the last one.
fn frame_times(ctx: &Context, size: Vec2, app: &mut ViewerApp) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(FRAMES);
    let mut prims = 0;
    for _ in 0..FRAMES {
        let t0 = Instant::now();
        let mut out = ctx.run_ui(input(size), |ui| app.ui_root(ui));
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
    (times[FRAMES / 2], times[FRAMES - 1], prims)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Frames at every zoom: the whole trace, then windows 4x narrower each
/// time, centred in the trace, down to about 5 µs.
/// `metrics_ns`: also GPU metrics counter lanes (`synth::add_gpu_metrics`,
/// 4 per GPU) with a sample every that many ns.
fn sweep(name: &str, ranks: u32, target: usize, size: Vec2, metrics_ns: Option<i64>) {
    let t0 = Instant::now();
    let mut trace = fsdp_like(&SynthOptions {
        ranks,
        target_slices: target,
        ..Default::default()
    });
    if let Some(every) = metrics_ns {
        streamscope_core::synth::add_gpu_metrics(&mut trace, every);
        println!("{name}: {} counter samples", trace.counters().len());
    }
    let n = trace.slices().len();
    let gen = t0.elapsed();
    let t1 = Instant::now();
    let mut app = ViewerApp::from_trace(trace);
    let load = t1.elapsed();
    println!(
        "{name}: {n} slices, {ranks} ranks (generated in {}, sort + analysis + index in {})",
        ms(gen),
        ms(load)
    );
    let Some(index) = app.model.as_ref().map(|m| m.index.clone()) else {
        eprintln!("no model");
        return;
    };
    let ctx = Context::default();
    // Fonts and panel sizes settle in the first passes.
    for _ in 0..3 {
        ctx.run_ui(input(size), |ui| app.ui_root(ui))
            .textures_delta
            .clear();
    }
    let (a, b) = index.span_ns;
    let mid = a + (b - a) / 2;
    let mut width = b - a;
    let mut worst = (Duration::ZERO, String::new());
    println!("  window          median      worst of {FRAMES}   triangles  coverage cols");
    loop {
        if width == b - a {
            app.timeline.fit(&index);
        } else {
            app.timeline
                .show_exactly(&index, mid - width / 2, mid + width / 2);
        }
        let (med, max, tris) = frame_times(&ctx, size, &mut app);
        let cols: u32 = app.timeline.coverage_rows.iter().map(|r| r.1).sum();
        let label = streamscope_viewer::style::fmt_ns(app.timeline.view_dur_ns);
        println!(
            "  {label:>12}  {:>10}  {:>10}  {tris:>10}  {cols:>10}",
            ms(med),
            ms(max)
        );
        if med > worst.0 {
            worst = (med, label);
        }
        if width < 20_000 {
            break;
        }
        width /= 4;
    }
    println!(
        "  slowest zoom: {} median at a {} window ({} the {} budget)",
        ms(worst.0),
        worst.1,
        if worst.0 <= BUDGET { "within" } else { "OVER" },
        ms(BUDGET)
    );
}

/// Launch while loading: the time from `open_in_background` to the end of
/// the first frame, and to the loaded trace's first frame, on a Perfetto
/// file of `slices` slices written here (headless: no window creation).
fn first_frame(slices: usize, size: Vec2) {
    let dir = std::env::temp_dir().join(format!("streamscope-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("bench.pftrace");
    let trace = fsdp_like(&SynthOptions {
        target_slices: slices,
        ..Default::default()
    });
    let n = trace.slices().len();
    if let Err(e) = streamscope_core::perfetto::write_file(&trace, &file) {
        eprintln!("cannot write {}: {e}", file.display());
        return;
    }
    drop(trace);
    let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
    let ctx = Context::default();
    let t0 = Instant::now();
    let mut app = ViewerApp::open_in_background(vec![file.clone()]);
    let mut out = ctx.run_ui(input(size), |ui| app.ui_root(ui));
    out.textures_delta.clear();
    ctx.tessellate(out.shapes, out.pixels_per_point);
    let first = t0.elapsed();
    let loading = app.is_loading();
    let mut frames = 1;
    while app.is_loading() && t0.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(10));
        let mut out = ctx.run_ui(input(size), |ui| app.ui_root(ui));
        out.textures_delta.clear();
        ctx.tessellate(out.shapes, out.pixels_per_point);
        frames += 1;
    }
    // One more frame draws the trace.
    let mut out = ctx.run_ui(input(size), |ui| app.ui_root(ui));
    out.textures_delta.clear();
    ctx.tessellate(out.shapes, out.pixels_per_point);
    println!(
        "launch while loading a {:.0} MB file of {n} slices: first frame {} (still loading: {loading}), trace drawn after {} ({frames} frames meanwhile)",
        bytes as f64 / 1e6,
        ms(first),
        ms(t0.elapsed())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let target: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    // `metrics`: only the sweep with GPU metrics lanes.
    let only_metrics = std::env::args().any(|a| a == "metrics");
    let size = Vec2::new(1920.0, 1080.0);
    if !only_metrics {
        first_frame(target / 10, size);
        sweep("2 ranks", 2, target, size, None);
        sweep("64 ranks", 64, target, size, None);
    }
    sweep(
        "2 ranks + GPU metrics at 10 kHz",
        2,
        target,
        size,
        Some(100_000),
    );
}
