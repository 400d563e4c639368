//! Utilization when zoomed out (egui_kittest, headless): GPU lanes whose
//! slices are narrower than 3 px are drawn as per-column coverage stacked by
//! class, with the trace's shares; zoomed in, the slices themselves.

use egui::epaint::{Mesh, Shape};
use egui_kittest::Harness;
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_core::TraceBuilder;
use streamscope_core::{ProcessId, SliceId};
use streamscope_core::{SliceClass, Trace, TrackKind};
use streamscope_viewer::style;
use streamscope_viewer::timeline::layout::{LineKind, ROW_H};
use streamscope_viewer::timeline::lod::Item;
use streamscope_viewer::ViewerApp;

fn harness(trace: Trace) -> Harness<'static, ViewerApp> {
    Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(
            |ui, app: &mut ViewerApp| app.ui_root(ui),
            ViewerApp::from_trace(trace),
        )
}

fn trace() -> Trace {
    fsdp_like(&SynthOptions {
        target_slices: 60_000,
        ..Default::default()
    })
}

/// The timeline's mesh (the one clipped to the lane area) and that area.
fn timeline_mesh(h: &Harness<'static, ViewerApp>) -> (Mesh, egui::Rect) {
    let width = h.state().timeline.last_width_px;
    h.output()
        .shapes
        .iter()
        .find_map(|c| match &c.shape {
            Shape::Mesh(m) if (c.clip_rect.width() - width).abs() < 0.5 => {
                Some(((**m).clone(), c.clip_rect))
            }
            _ => None,
        })
        .expect("the timeline paints one mesh clipped to the lanes")
}

/// Area of the mesh's triangles of colour `color` whose centre lies in the
/// band `y0..y1`.
fn area_of(mesh: &Mesh, color: egui::Color32, y0: f32, y1: f32) -> f64 {
    let mut area = 0.0;
    for tri in mesh.indices.chunks(3) {
        let v = [0, 1, 2].map(|k| &mesh.vertices[tri[k] as usize]);
        if v.iter().any(|v| v.color != color) {
            continue;
        }
        let cy = (v[0].pos.y + v[1].pos.y + v[2].pos.y) / 3.0;
        if cy < y0 || cy > y1 {
            continue;
        }
        let (a, b, c) = (v[0].pos, v[1].pos, v[2].pos);
        area += (((b - a).x * (c - a).y - (b - a).y * (c - a).x) / 2.0).abs() as f64;
    }
    area
}

/// Share of `[t0, t1)` covered by slices of `class` on `track`, counted
/// here from the slice columns.
fn share_in_trace(t: &Trace, track: u32, class: SliceClass, t0: i64, t1: i64) -> f64 {
    let sl = t.slices();
    let mut ns = 0i64;
    for i in 0..sl.len() {
        if sl.track()[i].get() == track && sl.class()[i] == class {
            let (a, b) = (
                sl.start_ns()[i].max(t0),
                sl.end_ns(SliceId::from_index(i)).min(t1),
            );
            ns += (b - a).max(0);
        }
    }
    ns as f64 / (t1 - t0) as f64
}

/// (row, screen y) of the first drawn row of the first stream of `what`.
fn gpu_row(h: &Harness<'static, ViewerApp>, class: SliceClass) -> (u32, u32, f32) {
    let app = h.state();
    let m = app.model.as_ref().expect("loaded");
    let lanes_top = timeline_mesh(h).1.top();
    app.timeline
        .lines
        .iter()
        .find_map(|l| match l.kind {
            LineKind::Row { row, first: true } => {
                let track = m.index.rows[row as usize].track;
                let is_stream = matches!(m.trace.track(track).kind, TrackKind::Stream { .. });
                let r = &m.index.rows[row as usize];
                let s = r.slice(0);
                (is_stream && m.trace.slices().class()[s] == class).then_some((
                    row,
                    track.get(),
                    lanes_top + l.y - app.timeline.scroll_y,
                ))
            }
            _ => None,
        })
        .expect("a GPU stream of that class is drawn")
}

#[test]
fn zoomed_out_gpu_lanes_show_the_class_shares_of_each_column() {
    let mut h = harness(trace());
    h.run();
    {
        let app = h.state_mut();
        let m = app.model.as_ref().expect("loaded");
        let index = m.index.clone();
        app.timeline.fit(&index);
    }
    h.run();
    let (mesh, lanes) = timeline_mesh(&h);
    let inner = ROW_H - 2.0;
    for class in [SliceClass::Compute, SliceClass::Communication] {
        let (row, track, y) = gpu_row(&h, class);
        let app = h.state();
        let m = app.model.as_ref().expect("loaded");
        let cols = app
            .timeline
            .coverage_rows
            .iter()
            .find(|r| r.0 == row)
            .map(|r| r.1)
            .expect("the GPU row is drawn as coverage");
        assert!(cols as f32 > lanes.width() * 0.5, "{cols} columns");
        let (v0, v1) = app.timeline.window_ns(&m.index);
        let (lo, hi) = (v0.max(m.index.span_ns.0), v1.min(m.index.span_ns.1));
        let full = (v1 - v0) as f64;
        for (c, color) in [
            (SliceClass::Compute, style::COMPUTE),
            (SliceClass::Communication, style::COMMUNICATION),
        ] {
            let want = share_in_trace(&m.trace, track, c, lo, hi) * (hi - lo) as f64 / full;
            let got = area_of(&mesh, color, y, y + ROW_H) / (lanes.width() as f64 * inner as f64);
            assert!(
                (got - want).abs() < 0.03 + want * 0.05,
                "{class:?} stream, {c:?}: drawn share {got:.3}, trace share {want:.3}"
            );
            if c == class {
                assert!(want > 0.05, "the stream holds {c:?}: {want}");
            }
        }
        // No "N kernels" block: every item of the row is either a fold or a
        // sliver, drawn as coverage (slices are narrower than 3 px here).
        assert!(app
            .timeline
            .items_of(row)
            .iter()
            .all(|it| !matches!(it, Item::Slice { x0, x1, .. } if x1 - x0 >= 3.0)));
    }
}

#[test]
fn zoomed_in_gpu_lanes_draw_slices() {
    let mut h = harness(trace());
    h.run();
    let (row, _, _) = gpu_row(&h, SliceClass::Compute);
    // Zoom onto a kernel in the middle of the row.
    let kernel = {
        let app = h.state_mut();
        let m = app.model.as_ref().expect("loaded");
        let r = &m.index.rows[row as usize];
        let k = r.slice(r.len() / 2);
        let (s, e) = (
            m.trace.slices().start_ns()[k],
            m.trace.slices().end_ns(SliceId::from_index(k)),
        );
        let index = m.index.clone();
        app.timeline.zoom_to(&index, s, e);
        k as u32
    };
    h.run();
    let (_, _, y) = gpu_row(&h, SliceClass::Compute);
    let app = h.state();
    let drawn = app
        .timeline
        .items_of(row)
        .iter()
        .find_map(|it| match *it {
            Item::Slice { slice, x0, x1 } if slice == kernel => Some((x0, x1)),
            _ => None,
        })
        .expect("the kernel is drawn as a slice");
    assert!(drawn.1 - drawn.0 > 100.0, "{drawn:?}");
    let cols = app
        .timeline
        .coverage_rows
        .iter()
        .find(|r| r.0 == row)
        .map_or(0, |r| r.1);
    assert!(cols < 20, "{cols} coverage columns at this zoom");
    // The slice is a full-height rectangle of its class colour.
    let (mesh, _) = timeline_mesh(&h);
    let area = area_of(&mesh, style::COMPUTE, y, y + ROW_H);
    assert!(
        area >= ((drawn.1 - drawn.0 - 1.0) * (ROW_H - 2.0)) as f64 * 0.99,
        "{area}"
    );
}

#[test]
fn the_summary_costs_a_few_bytes_per_gpu_slice() {
    let app = ViewerApp::from_trace(fsdp_like(&SynthOptions {
        target_slices: 200_000,
        ..Default::default()
    }));
    let m = app.model.as_ref().expect("loaded");
    let mut bytes = 0;
    let mut gpu_slices = 0;
    for (r, cov) in m.index.coverage.iter().enumerate() {
        let row = &m.index.rows[r];
        let gpu = matches!(
            m.trace.track(row.track).kind,
            TrackKind::Stream { .. } | TrackKind::Gpu { .. }
        );
        assert_eq!(cov.is_some(), gpu && !row.is_empty(), "row {r}");
        if let Some(c) = cov {
            bytes += c.bytes();
            gpu_slices += row.len();
        }
    }
    assert!(gpu_slices > 50_000, "{gpu_slices}");
    let per = bytes as f64 / gpu_slices as f64;
    assert!(per <= 4.5, "{per:.2} bytes per GPU slice");
    // The slice columns themselves cost 38 bytes per kernel.
    assert!(per * 8.0 < 38.0);
}

/// The serial fsdp-ref run (every kernel and collective on one stream, the
/// case where one-colour folds hid the mix): the stream's coverage shows
/// its compute and communication shares.
#[test]
fn a_serial_stream_shows_its_compute_and_communication_mix() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-serial-h200x2");
    let mut app = ViewerApp::empty();
    app.load(vec![dir]);
    assert!(app.model.is_some(), "{:?}", app.files);
    let mut h = Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    {
        let app = h.state_mut();
        let index = app.model.as_ref().expect("loaded").index.clone();
        app.timeline.fit(&index);
    }
    h.run();
    let (mesh, lanes) = timeline_mesh(&h);
    let app = h.state();
    let m = app.model.as_ref().expect("loaded");
    // Rank 0's busiest stream row.
    let (row, y) = app
        .timeline
        .lines
        .iter()
        .filter_map(|l| match l.kind {
            LineKind::Row { row, .. } => {
                let r = &m.index.rows[row as usize];
                let stream = matches!(m.trace.track(r.track).kind, TrackKind::Stream { .. });
                (stream && m.trace.track(r.track).process == ProcessId::from_index(0))
                    .then_some((row, lanes.top() + l.y - app.timeline.scroll_y))
            }
            _ => None,
        })
        .max_by_key(|&(row, _)| m.index.rows[row as usize].len())
        .expect("rank 0 has a stream");
    let track = m.index.rows[row as usize].track.get();
    assert!(app.timeline.coverage_rows.iter().any(|r| r.0 == row));
    let (v0, v1) = app.timeline.window_ns(&m.index);
    let inner = ROW_H - 2.0;
    for (c, color) in [
        (SliceClass::Compute, style::COMPUTE),
        (SliceClass::Communication, style::COMMUNICATION),
    ] {
        let want = share_in_trace(&m.trace, track, c, v0, v1);
        let got = area_of(&mesh, color, y, y + ROW_H) / (lanes.width() as f64 * inner as f64);
        assert!(want > 0.02, "the serial stream holds {c:?}: {want}");
        assert!(
            (got - want).abs() < 0.02 + want * 0.05,
            "{c:?}: drawn share {got:.3}, trace share {want:.3}"
        );
    }
}

/// The SM lane at full zoom-out: an estimate at the maximum for a tenth of
/// the time reads as a tenth, not as full (the mean over each column, not
/// the peak).
#[test]
fn a_counter_lane_shows_the_mean_of_each_column() {
    use streamscope_core::{NewSlice, Process, SliceKind};
    use streamscope_viewer::timeline::layout::COUNTER_H;
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process::default());
    let c = t.add_track(p, None, TrackKind::Counter { device: None }, "SMs in use");
    let th = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
    let n = t.intern("run");
    t.push_slice(NewSlice::new(th, SliceKind::Range, n, 0, 100_000_000));
    for i in 0..1_000_000i64 {
        t.push_counter(c, i * 100, 132.0);
        t.push_counter(c, i * 100 + 10, 0.0);
    }
    let mut h = harness(t.finish());
    h.run();
    let (mesh, lanes) = timeline_mesh(&h);
    let app = h.state();
    let line = app
        .timeline
        .lines
        .iter()
        .find(|l| matches!(l.kind, LineKind::Counter { .. }))
        .expect("the counter lane is drawn");
    let y = lanes.top() + line.y - app.timeline.scroll_y;
    let m = app.model.as_ref().expect("loaded");
    let (v0, v1) = app.timeline.window_ns(&m.index);
    // Inside the samples' span the mean is 13.2 of a 132 scale.
    let inside = (v1.min(100_000_000) - v0.max(0)) as f64 / (v1 - v0) as f64;
    let got = area_of(
        &mesh,
        egui::Color32::from_rgb(90, 170, 110),
        y,
        y + COUNTER_H,
    ) / (lanes.width() as f64 * (COUNTER_H - 2.0) as f64);
    assert!(
        (got - 0.1 * inside).abs() < 0.02,
        "drawn {got:.3}, mean {:.3}",
        0.1 * inside
    );
}
