//! Many ranks: past 8 ranks every rank opens collapsed to one utilization
//! strip, and ordering the ranks by a metric puts a straggler first.

use egui_kittest::Harness;
use streamscope_core::synth::{fsdp_like, SynthOptions};
use streamscope_viewer::timeline::layout::{GroupKey, LineKind};
use streamscope_viewer::timeline::RankOrder;
use streamscope_viewer::ViewerApp;

/// 16 ranks; rank `slow` runs everything 30 % slower (its steps too).
fn sixteen_ranks(slow: u32) -> streamscope_core::Trace {
    let mut t = fsdp_like(&SynthOptions {
        ranks: 16,
        target_slices: 60_000,
        ..Default::default()
    })
    .into_builder();
    let t0 = *t.slices().start_ns().iter().min().expect("slices");
    for id in t.slices().ids() {
        let p = t.slice_process(id);
        if t.processes()[p.index()].rank == Some(slow) {
            let (s, d) = (
                t.slices().start_ns()[id.index()],
                t.slices().dur_ns()[id.index()],
            );
            t.set_slice_start(id, t0 + (s - t0) * 13 / 10);
            t.set_slice_dur(id, d * 13 / 10);
        }
    }
    t.finish()
}

#[test]
fn sixteen_ranks_open_collapsed_and_a_straggler_sorts_first() {
    let app = ViewerApp::from_trace(sixteen_ranks(11));
    let m = app.model.as_ref().expect("model");
    let procs: Vec<u32> = m.lanes.root_processes().into_iter().flatten().collect();
    assert_eq!(procs.len(), 16);
    assert!(procs
        .iter()
        .all(|p| app.timeline.collapsed.contains(&GroupKey::Process(*p))));
    // Every rank has GPU rows for its strip.
    assert!(procs.iter().all(|&p| !m.gpu_rows[p as usize].is_empty()));
    let order = RankOrder::StepTime.roots(m).expect("an order");
    let first = procs[order[0]];
    assert_eq!(m.trace.processes()[first as usize].rank, Some(11));

    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.state_mut().timeline.rank_order = RankOrder::StepTime;
    h.run();
    let app = h.state();
    let headers: Vec<&str> = app
        .timeline
        .lines
        .iter()
        .filter(|l| matches!(l.kind, LineKind::Header { .. }))
        .map(|l| l.label.as_str())
        .collect();
    assert_eq!(headers.len(), 16, "{headers:?}");
    assert!(headers[0].starts_with("rank 11"), "{headers:?}");
}

#[test]
fn two_ranks_open_expanded() {
    let app = ViewerApp::from_trace(fsdp_like(&SynthOptions::default()));
    assert!(app.timeline.collapsed.is_empty());
}
