//! `view --compare A B`: two real recordings side by side (egui_kittest).

use std::path::PathBuf;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_viewer::app::Tab;
use streamscope_viewer::ViewerApp;

fn bundled(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

#[test]
fn two_runs_open_side_by_side_with_the_compare_tab() {
    let app = ViewerApp::open_compare(
        bundled("fsdp-ref-serial-h200x2"),
        bundled("fsdp-ref-overlap-h200x2"),
        None,
    );
    assert_eq!(app.tab, Tab::Compare);
    let c = app.comparison.as_ref().expect("compared");
    assert_eq!(c.ranks.len(), 2);
    let m = app.model.as_ref().expect("one model over both runs");
    assert_eq!(m.trace.processes().len(), 4);
    let names: Vec<&str> = m
        .trace
        .processes()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert!(
        names[..2].iter().all(|n| n.starts_with("A · ")),
        "{names:?}"
    );
    assert!(
        names[2..].iter().all(|n| n.starts_with("B · ")),
        "{names:?}"
    );
    let mut h = Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(h.query_by_label("Compare").is_some(), "the tab is there");
    assert!(
        h.query_by_label_contains("Kernels, per step and rank")
            .is_some(),
        "the comparison is drawn"
    );
}

#[test]
fn a_run_that_does_not_load_says_so() {
    let app = ViewerApp::open_compare(
        bundled("fsdp-ref-serial-h200x2"),
        bundled("no-such-run"),
        None,
    );
    assert!(app.model.is_none());
    let msg = app.message.as_deref().unwrap_or("");
    assert!(
        msg.contains("cannot compare") && msg.contains("no-such-run"),
        "{msg}"
    );
}
