//! `--step`, `--range`, `--rank`: what the view opens on (egui_kittest).

mod common;

use egui_kittest::Harness;
use streamscope_viewer::error::FramingError;
use streamscope_viewer::timeline::layout::{GroupKey, LineKind};
use streamscope_viewer::{FrameTarget, Framing, ViewerApp};

fn harness(app: ViewerApp) -> Harness<'static, ViewerApp> {
    Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app)
}

#[test]
fn step_and_rank_frame_one_step_of_one_rank() {
    let mut app = ViewerApp::from_trace(common::two_rank_trace());
    let (n, s, e) = {
        let m = app.model.as_ref().expect("loaded");
        let st = m
            .report
            .steps
            .iter()
            .filter(|s| s.rank == 1)
            .nth(2)
            .expect("rank 1 has steps");
        (st.step, st.start_ns, st.end_ns)
    };
    app.set_framing(Framing {
        target: Some(FrameTarget::Step(n)),
        rank: Some(1),
    })
    .expect("the step exists");
    let mut h = harness(app);
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("loaded");
    let (a, b) = app.timeline.window_ns(&m.index);
    assert!(a <= s && e <= b, "view {a}..{b} misses step {s}..{e}");
    assert!(
        ((b - a) as f64) < 2.0 * (e - s) as f64,
        "view {a}..{b} is not about one step ({s}..{e})"
    );
    assert_eq!(app.timeline.range_ns, Some((s, e)), "the step is marked");
    assert!(app.timeline.collapsed.contains(&GroupKey::Process(0)));
    assert!(!app.timeline.collapsed.contains(&GroupKey::Process(1)));
    // Only rank 1's lanes are drawn.
    let rows: Vec<u32> = app
        .timeline
        .lines
        .iter()
        .filter_map(|l| match l.kind {
            LineKind::Row { row, .. } => Some(
                m.trace
                    .track(m.index.rows[row as usize].track)
                    .process
                    .get(),
            ),
            _ => None,
        })
        .collect();
    assert!(!rows.is_empty() && rows.iter().all(|&p| p == 1), "{rows:?}");
}

#[test]
fn a_range_is_shown_exactly() {
    let mut app = ViewerApp::from_trace(common::two_rank_trace());
    app.set_framing(Framing {
        target: Some(FrameTarget::Range(12e6, 14.5e6)),
        rank: None,
    })
    .expect("a range always applies");
    let mut h = harness(app);
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("loaded");
    let (a, b) = app.timeline.window_ns(&m.index);
    let o = m.index.span_ns.0;
    assert_eq!((a - o, b - o), (12_000_000, 14_500_000));
}

#[test]
fn a_missing_step_or_rank_is_an_error_shown_in_the_window() {
    let mut app = ViewerApp::from_trace(common::two_rank_trace());
    let e = app
        .set_framing(Framing {
            target: Some(FrameTarget::Step(999)),
            rank: None,
        })
        .expect_err("no step 999");
    assert!(matches!(e, FramingError::NoStep { step: 999, .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("no step 999 (steps: "), "{e}");
    assert_eq!(app.message.as_deref(), Some(e.as_str()));
    let e = app
        .set_framing(Framing {
            target: None,
            rank: Some(7),
        })
        .expect_err("no rank 7");
    assert_eq!(
        e,
        FramingError::NoRank {
            rank: 7,
            ranks: "0, 1".into()
        }
    );
    assert!(
        e.to_string()
            .contains("no rank 7 in the trace (ranks: 0, 1)"),
        "{e}"
    );
    let mut h = harness(app);
    h.run();
    use egui_kittest::kittest::Queryable;
    assert!(h.query_by_label_contains("no rank 7").is_some());
}
