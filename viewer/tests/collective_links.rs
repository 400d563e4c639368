//! Clicking an NCCL kernel shows the same collective on every rank: links
//! to the other ranks' kernels and the wait/transfer split in the details.

use std::path::PathBuf;
use streamscope_core::{ProcessId, SliceId};

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_core::SliceKind;
use streamscope_viewer::ViewerApp;

#[test]
fn an_nccl_kernel_links_to_its_peers_on_the_other_rank() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-overlap-h200x2");
    let mut app = ViewerApp::open(vec![dir]);
    let (s, peer_process) = {
        let m = app.model.as_ref().expect("loads");
        let t = &m.trace;
        let s = (0..t.slices().len())
            .find(|&i| {
                t.slices().kind()[i] == SliceKind::Kernel
                    && t.str(t.slices().name()[i])
                        .starts_with("ncclDevKernel_AllGather")
                    && t.tracks()[t.slices().track()[i].index()].process == ProcessId::from_index(0)
            })
            .expect("an all-gather kernel on rank 0") as u32;
        let (inst, part) = m.collective_of(s).expect("matched across ranks");
        assert_eq!(inst.parts.len(), 2);
        assert_eq!(part.slice.get(), s);
        let peer = inst
            .parts
            .iter()
            .find(|p| p.slice.get() != s)
            .expect("peer");
        (
            s,
            t.tracks()[t.slices().track()[peer.slice.index()].index()].process,
        )
    };
    assert_eq!(peer_process, ProcessId::from_index(1));
    {
        let m = app.model.as_ref().expect("model");
        let w = m.wait_share().expect("matched at load: a small trace");
        assert!(!w.is_empty(), "waits to draw");
        assert!(w.values().all(|w| *w > 0.0 && *w <= 1.0));
    }
    {
        let m = app.model.take().expect("model");
        app.timeline.select(&m, Some(s));
        let t = &m.trace;
        let peers: Vec<u32> = app
            .timeline
            .links
            .iter()
            .filter(|&&(a, b)| a == s && t.slices().kind()[b as usize] == SliceKind::Kernel)
            .map(|&(_, b)| b)
            .collect();
        assert_eq!(peers.len(), 1, "{:?}", app.timeline.links);
        assert!(t
            .str(t.slices().name()[peers[0] as usize])
            .starts_with("ncclDevKernel_AllGather"));
        app.model = Some(m);
    }
    let mut h = Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(h.query_by_label("this collective on every rank").is_some());
    assert!(h.query_by_label("same collective").is_some());
}

#[test]
fn the_stragglers_tab_zooms_to_a_steps_worst_collective() {
    use streamscope_viewer::app::Tab;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../traces/torch-fsdp2-h200x2");
    let mut app = ViewerApp::open(vec![dir]);
    app.tab = Tab::Stragglers;
    let step = {
        let m = app.model.as_ref().expect("loads");
        m.report
            .steps
            .iter()
            .find(|s| s.straggler_rank.is_some())
            .expect("a step with a straggler")
            .step
    };
    let mut h = Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    h.get_by_label(&format!("step {step}")).click();
    h.run();
    let app = h.state();
    let m = app.model.as_ref().expect("model");
    let s = app.timeline.selected.expect("a kernel selected") as usize;
    let t = &m.trace;
    assert_eq!(t.slices().kind()[s], SliceKind::Kernel);
    assert!(
        t.str(t.slices().name()[s]).starts_with("ncclDevKernel"),
        "{}",
        t.str(t.slices().name()[s])
    );
    let (a, b) = app.timeline.window_ns(&m.index);
    assert!(
        a <= t.slices().start_ns()[s] && t.slices().end_ns(SliceId::from_index(s)) <= b,
        "the kernel is in view"
    );
    // Linked to the same collective on the other rank.
    assert!(app
        .timeline
        .links
        .iter()
        .any(|&(x, y)| x as usize == s && t.slices().kind()[y as usize] == SliceKind::Kernel));
}
