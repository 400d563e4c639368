//! Measured GPU metrics lanes (counter tracks of `record --gpu-metrics`):
//! under each GPU's streams, with their unit on the axis label, an envelope
//! when zoomed out, and the value on hover. Headless (egui_kittest).

use egui_kittest::Harness;
use streamscope_core::synth::{add_gpu_metrics, fsdp_like, SynthOptions};
use streamscope_core::TrackKind;
use streamscope_viewer::timeline::counters;
use streamscope_viewer::timeline::layout::LineKind;
use streamscope_viewer::ViewerApp;

fn app() -> ViewerApp {
    let mut t = fsdp_like(&SynthOptions {
        target_slices: 6_000,
        ..Default::default()
    });
    add_gpu_metrics(&mut t, 10_000);
    ViewerApp::from_trace(t)
}

#[test]
fn metric_lanes_sit_under_their_gpu_with_units_and_values() {
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app());
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("trace loaded");
    let t = &m.trace;
    // Every metric track is a counter line, right after its GPU's streams.
    let lines = &app.timeline.lines;
    let pos = |name: &str| {
        lines
            .iter()
            .position(
                |l| matches!(l.kind, LineKind::Counter { track } if t.track_name(track) == name),
            )
            .unwrap_or_else(|| panic!("no lane {name}"))
    };
    let sm0 = pos("GPU 0 · SM active %");
    let dram0 = pos("GPU 0 · DRAM GB/s");
    assert!(dram0 > sm0);
    let last_stream_of_gpu0 = lines
        .iter()
        .rposition(|l| match l.kind {
            LineKind::Row { row, .. } => {
                let tr = m.index.rows[row as usize].track;
                matches!(
                    t.track(tr).kind,
                    TrackKind::Stream { device, .. } if device.index() == 0
                )
            }
            _ => false,
        })
        .expect("GPU 0 streams");
    assert!(sm0 > last_stream_of_gpu0 && sm0 < pos("GPU 1 · SM active %"));
    // No estimated lane beside measured ones.
    assert!(!t
        .tracks()
        .iter()
        .any(|tr| t.str(tr.name).contains("estimated")));
    // Axis labels: percentages on 0–100, throughputs on 0–max.
    let track = |name: &str| {
        t.track_ids()
            .find(|&k| t.track_name(k) == name)
            .expect("track")
    };
    let sm = track("GPU 0 · SM active %");
    assert_eq!(
        counters::label(t, &m.index, sm),
        "GPU 0 · SM active % · 0–100 %"
    );
    assert_eq!(
        counters::label(t, &m.index, track("GPU 0 · NVLink rx GB/s")),
        "GPU 0 · NVLink rx GB/s · 0–200 GB/s"
    );
    // Hover: a whole-trace column mixes 0 and 100: mean with its range.
    let (a, b) = t.time_span().expect("span");
    let text = counters::hover_text(t, &m.index, sm, a, b).expect("hover");
    assert!(text.starts_with("GPU 0 · SM active %\n"), "{text}");
    assert!(text.contains("0.00–100 %"), "{text}");
    // One sample's time: its value alone, no range.
    let first = (0..t.counters().len())
        .find(|&i| t.counters().track()[i] == sm && t.counters().value()[i] == 100.0)
        .expect("an active sample");
    let ts = t.counters().ts_ns()[first];
    let text = counters::hover_text(t, &m.index, sm, ts, ts + 1_000).expect("hover");
    assert_eq!(text, "GPU 0 · SM active %\n100 %");
    assert_eq!(
        counters::column_minmax(t, &m.index, sm.index(), a, b),
        Some((0.0, 100.0))
    );
}
