//! UI tests with egui_kittest (no display, no GPU): the real app over a
//! generated two-rank trace, driven by clicks on labelled widgets.

mod common;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::{ProcessId, SliceId};
use streamscope_viewer::app::Tab;
use streamscope_viewer::timeline::layout::{GroupKey, LineKind};
use streamscope_viewer::ViewerApp;

fn harness(app: ViewerApp) -> Harness<'static, ViewerApp> {
    Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app)
}

fn app() -> ViewerApp {
    ViewerApp::from_trace(common::two_rank_trace())
}

fn rows_of_process(app: &ViewerApp, process: u32) -> usize {
    let Some(model) = &app.model else { return 0 };
    app.timeline
        .lines
        .iter()
        .filter(|l| match l.kind {
            LineKind::Row { row, .. } => {
                let track = model.index.rows[row as usize].track;
                model.trace.track(track).process == ProcessId::from_index(process as usize)
            }
            _ => false,
        })
        .count()
}

#[test]
fn clicking_a_sync_warning_moves_the_view_onto_it() {
    let mut h = harness(app());
    h.run();
    let full = {
        let app = h.state();
        let m = app.model.as_ref().expect("trace loaded");
        app.timeline.window_ns(&m.index)
    };
    let warning = {
        let m = h.state().model.as_ref().expect("trace loaded");
        let w = m
            .report
            .sync_warnings
            .iter()
            .find(|g| g.pattern == "item-like");
        w.cloned().expect("the planted item-like sync is a warning")
    };
    h.state_mut().tab = Tab::Syncs;
    h.run();
    let title = streamscope_viewer::panels::syncs::group_title(&warning);
    h.get_by_label(&title).click();
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("trace loaded");
    let (a, b) = app.timeline.window_ns(&m.index);
    let first = warning.slices[0].index();
    let (s, e) = (
        m.trace.slices().start_ns()[first],
        m.trace.slices().end_ns(SliceId::from_index(first)),
    );
    assert!(
        a <= s && e <= b,
        "window {a}..{b} does not show the sync {s}..{e}"
    );
    assert!(
        b - a < (full.1 - full.0) / 10,
        "the view did not zoom in: {a}..{b} vs {full:?}"
    );
    assert_eq!(app.timeline.selected, Some(first as u32));
    let hl = app.timeline.highlight.expect("the sync is highlighted");
    assert_eq!((hl.start_ns, hl.end_ns), (s, e));
}

#[test]
fn search_finds_a_kernel_and_selects_it() {
    let mut h = harness(app());
    h.run();
    h.get_by_label("Search").focus();
    h.run();
    h.get_by_label("Search").type_text("UNIQUE_softmax");
    h.run();
    h.key_press(egui::Key::Enter);
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("trace loaded");
    let sel = app.timeline.selected.expect("a match is selected") as usize;
    assert_eq!(
        m.trace.str(m.trace.slices().name()[sel]),
        common::UNIQUE_KERNEL
    );
    let (a, b) = app.timeline.window_ns(&m.index);
    assert!(
        a <= m.trace.slices().start_ns()[sel]
            && m.trace.slices().end_ns(SliceId::from_index(sel)) <= b
    );
    assert_eq!(
        m.trace.slice_process(SliceId::from_index(sel)),
        ProcessId::from_index(1)
    );
    // The details panel names the selection and its launch call.
    assert!(h.query_by_label("launched by").is_some());
    assert!(h.query_by_label("1 of 1").is_some());
}

#[test]
fn overlap_panel_shows_the_analysis_numbers() {
    let report = analyze(&common::two_rank_trace(), &AnalysisOptions::default());
    let mut h = harness(app());
    h.run();
    for r in &report.ranks {
        let pct = r.breakdown.overlap_pct.expect("the ranks communicate");
        assert!(pct > 0.0 && pct < 100.0, "{pct}");
        let text = format!("{pct:.1}% of communication hidden");
        assert!(
            !h.query_all_by_label(&text).collect::<Vec<_>>().is_empty(),
            "missing {text}"
        );
        let eff = format!(
            "{:.1}%",
            r.breakdown
                .overlap_efficiency_pct
                .expect("both compute and comm")
        );
        assert!(h.query_all_by_label(&eff).next().is_some(), "missing {eff}");
    }
}

#[test]
fn collapsing_a_rank_hides_its_lanes() {
    let mut h = harness(app());
    h.run();
    let before = rows_of_process(h.state(), 1);
    assert!(
        before >= 3,
        "rank 1 shows its thread and both streams: {before}"
    );
    let label = h
        .state()
        .timeline
        .lines
        .iter()
        .find(|l| {
            matches!(
                l.kind,
                LineKind::Header {
                    key: GroupKey::Process(1),
                    ..
                }
            )
        })
        .map(|l| l.label.clone())
        .expect("a header for rank 1");
    h.get_by_label(&label).click();
    h.run();
    assert_eq!(rows_of_process(h.state(), 1), 0);
    assert!(rows_of_process(h.state(), 0) > 0, "rank 0 stays open");
    assert!(h.state().timeline.collapsed.contains(&GroupKey::Process(1)));
    h.get_by_label(&label).click();
    h.run();
    assert_eq!(rows_of_process(h.state(), 1), before);
}

#[test]
fn streams_are_labelled_by_content() {
    let mut h = harness(app());
    h.run();
    assert!(h.query_all_by_label("stream 7 · compute").next().is_some());
    assert!(h.query_all_by_label("stream 20 · NCCL").next().is_some());
    // Both slices and folds were drawn.
    assert!(h.state().timeline.painted_rows() >= 6);
}

#[test]
fn keys_zoom_and_pan() {
    let mut h = harness(app());
    h.run();
    let (d0, s0) = (
        h.state().timeline.view_dur_ns,
        h.state().timeline.view_start_rel_ns,
    );
    h.key_press(egui::Key::W);
    h.run();
    let d1 = h.state().timeline.view_dur_ns;
    assert!(d1 < d0 * 0.9, "W zooms in: {d0} -> {d1}");
    h.key_press(egui::Key::D);
    h.run();
    assert!(h.state().timeline.view_start_rel_ns > s0, "D pans right");
    h.key_press(egui::Key::S);
    h.run();
    assert!(h.state().timeline.view_dur_ns > d1, "S zooms out");
    // F zooms to the selection.
    let sel = {
        let m = h.state().model.as_ref().expect("trace loaded");
        let s = (0..m.trace.slices().len())
            .find(|&i| m.trace.str(m.trace.slices().name()[i]) == common::UNIQUE_KERNEL)
            .expect("the unique kernel");
        s as u32
    };
    h.state_mut().timeline.selected = Some(sel);
    h.key_press(egui::Key::F);
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("trace loaded");
    let (a, b) = app.timeline.window_ns(&m.index);
    let (s, e) = (
        m.trace.slices().start_ns()[sel as usize],
        m.trace.slices().end_ns(SliceId::from_index(sel as usize)),
    );
    assert!(
        a <= s && e <= b && (b - a) < 4 * (e - s),
        "F shows the selection: {a}..{b} vs {s}..{e}"
    );
}

#[test]
fn next_and_prev_cycle_through_matches() {
    let mut h = harness(app());
    h.run();
    h.state_mut().search.query = "ampere_sgemm".into();
    h.get_by_label("next").click();
    h.run();
    let first = h.state().timeline.selected.expect("first match selected");
    h.get_by_label("next").click();
    h.run();
    let second = h.state().timeline.selected.expect("second match selected");
    assert_ne!(first, second);
    h.get_by_label("prev").click();
    h.run();
    assert_eq!(h.state().timeline.selected, Some(first));
    // 2 ranks x 4 steps x 20 launches, one of which is the unique kernel.
    assert_eq!(h.state().search.matches.len(), 159);
}

#[test]
fn right_drag_selects_a_range_and_drag_pans() {
    use egui::{Event, PointerButton, Pos2};
    let mut h = harness(app());
    h.run();
    let press =
        |h: &mut Harness<'static, ViewerApp>, pos: Pos2, button: PointerButton, pressed: bool| {
            h.event(Event::PointerButton {
                pos,
                button,
                pressed,
                modifiers: egui::Modifiers::NONE,
            });
        };
    let (a, b) = (Pos2::new(400.0, 300.0), Pos2::new(600.0, 300.0));
    h.event(Event::PointerMoved(a));
    press(&mut h, a, PointerButton::Secondary, true);
    h.run();
    for k in 1..=10 {
        h.event(Event::PointerMoved(a + (b - a) * (k as f32 / 10.0)));
        h.run();
    }
    press(&mut h, b, PointerButton::Secondary, false);
    h.run();
    let (r0, r1) = h.state().timeline.range_ns.expect("a range is selected");
    let view = h.state().timeline.view_dur_ns;
    let width = h.state().timeline.last_width_px as f64;
    let expect = view * 200.0 / width;
    let got = (r1 - r0) as f64;
    assert!(
        (got - expect).abs() < expect * 0.1,
        "range {got} ns, expected about {expect}"
    );

    // A primary drag to the left moves the view later in time (from the
    // trace's start, so there is room to pan).
    h.state_mut().timeline.view_start_rel_ns = 0.0;
    h.state_mut().timeline.view_dur_ns *= 0.5;
    h.run();
    let s0 = h.state().timeline.view_start_rel_ns;
    h.event(Event::PointerMoved(b));
    press(&mut h, b, PointerButton::Primary, true);
    h.run();
    for k in 1..=10 {
        h.event(Event::PointerMoved(b - (b - a) * (k as f32 / 10.0)));
        h.run();
    }
    press(&mut h, a, PointerButton::Primary, false);
    h.run();
    assert!(h.state().timeline.view_start_rel_ns > s0, "drag pans");
}

#[test]
fn the_wheel_zooms_around_the_pointer() {
    use egui::{Event, MouseWheelSource, MouseWheelUnit, Pos2, TouchPhase, Vec2};
    let mut h = harness(app());
    h.run();
    let p = Pos2::new(700.0, 300.0);
    let view = |app: &ViewerApp| (app.timeline.view_dur_ns, app.timeline.view_start_rel_ns);
    let (d0, s0) = view(h.state());
    h.event(Event::PointerMoved(p));
    h.event(Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta: Vec2::new(0.0, 120.0),
        phase: TouchPhase::Move,
        source: MouseWheelSource::Wheel,
        modifiers: egui::Modifiers::NONE,
    });
    for _ in 0..30 {
        h.step();
    }
    let (d1, s1) = view(h.state());
    assert!(d1 < d0 * 0.9, "wheel up zooms in: {d0} -> {d1}");
    // Zooming around a pointer right of the left edge moves the start later.
    assert!(
        s1 > s0,
        "the time under the pointer stays put: start {s0} -> {s1}"
    );
}

#[test]
fn details_show_the_kernel_occupancy_from_the_analysis() {
    let mut h = harness(app());
    h.run();
    h.state_mut().search.query = "ampere_sgemm".into();
    h.get_by_label("next").click();
    h.run();
    let expected = {
        let m = h.state().model.as_ref().expect("trace loaded");
        let k = m
            .report
            .occupancy
            .iter()
            .flat_map(|o| o.kernels.iter())
            .find(|k| k.name == "ampere_sgemm_128x64_nn")
            .cloned()
            .expect("the analysis has the gemm's occupancy");
        format!(
            "{:.0}% theoretical ({} blocks/SM",
            k.theoretical_occupancy_pct, k.blocks_per_sm
        )
    };
    assert!(
        h.query_by_label_contains(&expected).is_some(),
        "missing {expected}"
    );
    assert!(h.query_by_label("264 × 1 × 1 (264 blocks)").is_some());
}

#[test]
fn opens_on_the_steps_the_headline_covers() {
    let mut h = harness(app());
    h.run();
    let app = h.state();
    let model = app.model.as_ref().expect("loaded");
    let (a, b) = model
        .report
        .ranks
        .iter()
        .filter_map(|r| Some((r.window.start_ns?, r.window.end_ns?)))
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
        .expect("the generated trace has steps");
    let (v0, v1) = app.timeline.window_ns(&model.index);
    assert!(
        v0 <= a && v1 >= b,
        "view {v0}..{v1} misses the window {a}..{b}"
    );
    let (s0, s1) = model.index.span_ns;
    // Zoomed onto the steps (with a margin), not the whole trace.
    let want = (1.5 * (b - a) as f64).min(1.1 * (s1 - s0) as f64);
    assert!(
        ((v1 - v0) as f64 - want).abs() <= want * 0.01 + 2.0,
        "view {} ns, want {want}",
        v1 - v0
    );
}

#[test]
fn clicking_a_finding_moves_the_view_onto_it() {
    let mut h = harness(app());
    h.run();
    let full = {
        let app = h.state();
        let m = app.model.as_ref().expect("trace loaded");
        app.timeline.window_ns(&m.index)
    };
    let (i, finding) = {
        let m = h.state().model.as_ref().expect("trace loaded");
        let (i, f) = m
            .report
            .findings
            .iter()
            .enumerate()
            .find(|(_, f)| f.slice.is_some())
            .expect("a finding with a slice to show");
        (i, f.clone())
    };
    h.state_mut().tab = Tab::Findings;
    h.state_mut().findings.show_all = true;
    h.run();
    let title = streamscope_viewer::panels::findings::finding_title(i, &finding);
    h.get_by_label(&title).click();
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("trace loaded");
    let (a, b) = app.timeline.window_ns(&m.index);
    let id = finding.slice.expect("slice").index();
    let (s, e) = (
        m.trace.slices().start_ns()[id],
        m.trace.slices().end_ns(SliceId::from_index(id)),
    );
    assert!(a <= s && e <= b, "window {a}..{b} does not show {s}..{e}");
    assert!(
        b - a < (full.1 - full.0) / 10,
        "no zoom: {a}..{b} vs {full:?}"
    );
    assert_eq!(app.timeline.selected, Some(id as u32));
    let hl = app.timeline.highlight.expect("highlighted");
    assert_eq!((hl.start_ns, hl.end_ns), (s, e));
}
