//! Opening files: several ranks at once (Perfetto and Kineto alike), and a
//! file that fails to load shows its error while the others stay open.

mod common;

use std::path::PathBuf;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_viewer::error::LoadError;
use streamscope_viewer::ViewerApp;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("streamscope-viewer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).ok();
    d
}

#[test]
fn a_bad_file_shows_its_error_and_the_good_ones_stay_open() {
    let dir = temp_dir("files");
    let good = dir.join("ranks.pftrace");
    streamscope_core::perfetto::write_file(&common::two_rank_trace(), &good).expect("write trace");
    let bad = dir.join("broken.json");
    std::fs::write(&bad, b"{\"traceEvents\": [ {\"ph\": ").expect("write bad file");

    let mut app = ViewerApp::empty();
    app.load(vec![good.clone(), bad.clone()]);
    let model = app.model.as_ref().expect("the good file is open");
    assert_eq!(model.trace.processes().len(), 2);
    assert!(app.files[0].result.is_ok());
    let err = app.files[1]
        .result
        .clone()
        .expect_err("the broken file fails");
    assert!(matches!(err, LoadError::Trace(_)), "{err:?}");
    assert!(err.to_string().contains("broken.json"), "{err}");

    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(
        h.query_by_label_contains("failed:").is_some(),
        "the error is shown"
    );
    assert!(
        h.state().timeline.painted_rows() > 0,
        "the good trace is drawn"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_trace_shows_the_open_prompt() {
    let mut app = ViewerApp::empty();
    app.message = Some("No trace given".into());
    let mut h = Harness::builder()
        .with_size([800.0, 600.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(h.query_by_label("No trace given").is_some());
    assert!(h.query_by_label("Open").is_some());
}

/// A file as a desktop integration hands it over.
#[derive(Debug)]
struct Dropped(PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn dropping_a_file_adds_its_ranks() {
    let dir = temp_dir("drop");
    let first = dir.join("a.pftrace");
    let second = dir.join("b.pftrace");
    let trace = common::two_rank_trace();
    streamscope_core::perfetto::write_file(&trace, &first).expect("write trace");
    streamscope_core::perfetto::write_file(&trace, &second).expect("write trace");
    let mut app = ViewerApp::empty();
    app.load(vec![first]);
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert_eq!(
        h.state().model.as_ref().map(|m| m.trace.processes().len()),
        Some(2)
    );
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped(second)));
    h.step();
    assert!(h.state().is_loading(), "the drop starts a background load");
    for _ in 0..500 {
        if !h.state().is_loading() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        h.step();
    }
    h.run();
    assert_eq!(h.state().files.len(), 2);
    assert_eq!(
        h.state().model.as_ref().map(|m| m.trace.processes().len()),
        Some(4)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_file_dialog_opens_a_picked_trace() {
    let dir = temp_dir("browse");
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    let file = dir.join("sub").join("ranks.pftrace");
    streamscope_core::perfetto::write_file(&common::two_rank_trace(), &file).expect("write trace");
    std::fs::write(dir.join("sub").join("notes.txt"), b"not a trace").expect("write");
    let mut app = ViewerApp::empty();
    app.browse.show_dir(Some(&dir));
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    h.get_by_label("sub/").click();
    h.run();
    assert!(
        h.query_by_label("notes.txt").is_none(),
        "non-trace files are hidden"
    );
    h.get_by_label("ranks.pftrace").click();
    h.run();
    h.get_by_label("Open 1 picked").click();
    h.step();
    for _ in 0..500 {
        if !h.state().is_loading() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        h.step();
    }
    h.run();
    assert!(!h.state().browse.open, "the dialog closes");
    assert_eq!(h.state().paths, vec![file]);
    assert_eq!(
        h.state().model.as_ref().map(|m| m.trace.processes().len()),
        Some(2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace file big enough that loading it takes a while.
fn big_trace(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let file = dir.join("big.pftrace");
    let t = streamscope_core::synth::fsdp_like(&streamscope_core::synth::SynthOptions {
        target_slices: 300_000,
        ..Default::default()
    });
    streamscope_core::perfetto::write_file(&t, &file).expect("write trace");
    (dir, file)
}

fn step_until_loaded(h: &mut Harness<'static, ViewerApp>) {
    for _ in 0..6000 {
        if !h.state().is_loading() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        h.step();
    }
    panic!("the load did not finish within a minute");
}

#[test]
fn the_window_comes_first_and_the_trace_loads_behind_a_progress_bar() {
    let (dir, file) = big_trace("background");
    let app = ViewerApp::open_in_background(vec![file.clone()]);
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.step();
    // (The time to the first frame is measured by benches/frame.rs.)
    assert!(
        h.state().is_loading(),
        "the first frame comes before the trace"
    );
    assert!(h.query_by_label("Cancel").is_some());
    let status = h.state().load_status().expect("loading").0;
    assert!(
        status.contains("of 1 file(s)") || status.starts_with("analyzing"),
        "{status}"
    );
    step_until_loaded(&mut h);
    h.run();
    assert!(h.query_by_label("Cancel").is_none());
    assert_eq!(
        h.state().model.as_ref().map(|m| m.trace.processes().len()),
        Some(2)
    );
    assert!(h.state().timeline.painted_rows() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cancel_stops_a_load() {
    let (dir, file) = big_trace("cancel");
    let app = ViewerApp::open_in_background(vec![file]);
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.step();
    assert!(h.state().is_loading());
    h.get_by_label("Cancel").click();
    h.step();
    h.step();
    assert!(!h.state().is_loading());
    assert!(h.state().model.is_none());
    assert!(h.query_by_label("loading cancelled").is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_background_load_shows_its_error_in_the_window() {
    let missing = PathBuf::from("/nonexistent/streamscope/missing.pftrace");
    let app = ViewerApp::open_in_background(vec![missing]);
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.step();
    step_until_loaded(&mut h);
    h.run();
    assert!(h.state().model.is_none());
    assert!(h.query_by_label_contains("missing.pftrace").is_some());
}
