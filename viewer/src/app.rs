//! The eframe app: toolbar (files, search, legend), analysis panels on the
//! right, selection details at the bottom, the timeline in the middle.

use std::path::PathBuf;
use std::sync::mpsc;

use egui::{RichText, Ui};
use streamscope_core::Trace;

use crate::browse::{browse_ui, BrowseAction, BrowseState};
use crate::framing::Framing;
use crate::load::{load_all, FileStatus};
use crate::model::Model;
use crate::panels;
use crate::panels::search::SearchState;
use crate::panels::syncs::SyncsState;
use crate::timeline::{timeline_ui, Highlight, TimelineState};

/// Which analysis panel the right side shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tab {
    #[default]
    Overlap,
    Syncs,
    TopKernels,
}

/// Renders the first frame to a PNG, then closes the window.
#[derive(Debug, Clone)]
pub struct ScreenshotJob {
    pub path: PathBuf,
    /// Frames drawn so far (the shot is taken once layout has settled).
    pub frames: u32,
    pub requested: bool,
    /// Error of the write, reported by `run` after the window closes.
    pub result: std::sync::Arc<std::sync::Mutex<Option<Result<(), String>>>>,
}

/// A load running on a worker thread, so the window stays responsive.
struct PendingLoad {
    paths: Vec<PathBuf>,
    rx: mpsc::Receiver<(Option<Model>, Vec<FileStatus>)>,
}

pub struct ViewerApp {
    pub model: Option<Model>,
    pub paths: Vec<PathBuf>,
    pub files: Vec<FileStatus>,
    pub timeline: TimelineState,
    pub search: SearchState,
    pub syncs: SyncsState,
    pub tab: Tab,
    /// Text of the "open" box.
    pub open_text: String,
    /// A line shown above the timeline (no trace found, ...).
    pub message: Option<String>,
    pub screenshot: Option<ScreenshotJob>,
    pub browse: BrowseState,
    /// What the view opens on (`--step`, `--range`, `--rank`), applied to
    /// every trace set loaded.
    pub framing: Framing,
    pending: Option<PendingLoad>,
}

impl ViewerApp {
    /// An app over an in-memory trace (tests, benchmarks).
    pub fn from_trace(trace: Trace) -> Self {
        let mut app = Self::empty();
        app.set_model(Some(Model::new(trace)));
        app
    }

    pub fn empty() -> Self {
        ViewerApp {
            model: None,
            paths: Vec::new(),
            files: Vec::new(),
            timeline: TimelineState::default(),
            search: SearchState::default(),
            syncs: SyncsState::default(),
            tab: Tab::default(),
            open_text: String::new(),
            message: None,
            screenshot: None,
            browse: BrowseState::default(),
            framing: Framing::default(),
            pending: None,
        }
    }

    /// Opens `paths`, or the bundled trace when there are none.
    pub fn open(paths: Vec<PathBuf>) -> Self {
        let mut app = Self::empty();
        if paths.is_empty() {
            match crate::load::default_trace() {
                Some(p) => app.load(vec![p]),
                None => {
                    app.browse.show_dir(None);
                    app.message = Some(
                        "No trace given and no bundled trace found in traces/: press Browse, type a path above and press Open, or drop files here."
                            .into(),
                    )
                }
            }
        } else {
            app.load(paths);
        }
        app
    }

    /// Replaces the open set by `paths`.
    pub fn load(&mut self, paths: Vec<PathBuf>) {
        let (trace, files) = load_all(&paths);
        self.paths = paths;
        self.files = files;
        self.message = None;
        self.set_model(trace.map(Model::new));
    }

    /// Like [`Self::load`], on a worker thread; the result replaces the open
    /// set at the first frame after it is ready.
    pub fn load_in_background(&mut self, paths: Vec<PathBuf>, ctx: &egui::Context) {
        let (tx, rx) = mpsc::channel();
        let ctx = ctx.clone();
        let job_paths = paths.clone();
        std::thread::spawn(move || {
            let (trace, files) = load_all(&job_paths);
            // The receiver is gone only if the app closed meanwhile.
            let _ = tx.send((trace.map(Model::new), files));
            ctx.request_repaint();
        });
        self.pending = Some(PendingLoad { paths, rx });
    }

    /// True while a background load runs.
    pub fn is_loading(&self) -> bool {
        self.pending.is_some()
    }

    fn poll_pending(&mut self) {
        let Some(p) = &self.pending else { return };
        match p.rx.try_recv() {
            Ok((model, files)) => {
                self.paths = p.paths.clone();
                self.files = files;
                self.pending = None;
                if model.is_some() {
                    self.message = None;
                }
                self.set_model(model);
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => {
                self.message = Some("loading stopped: the loader thread failed".into());
                self.pending = None;
            }
        }
    }

    fn set_model(&mut self, model: Option<Model>) {
        self.model = model;
        self.timeline = TimelineState::default();
        self.search = SearchState::default();
        self.syncs = SyncsState::default();
        if let (Some(m), false) = (&self.model, self.framing.is_empty()) {
            if let Err(e) = self.framing.apply(m, &mut self.timeline) {
                self.message = Some(e);
            }
        }
    }

    /// Sets what the view opens on and applies it to the loaded trace set,
    /// if any (its error, e.g. no such step, is also shown in the window).
    pub fn set_framing(&mut self, framing: Framing) -> Result<(), String> {
        self.framing = framing;
        let Some(m) = &self.model else {
            return Ok(());
        };
        self.timeline = TimelineState::default();
        let r = framing.apply(m, &mut self.timeline);
        if let Err(e) = &r {
            self.message = Some(e.clone());
        }
        r
    }

    /// The whole UI, into `ui` (the root of a window or a test harness).
    pub fn ui_root(&mut self, ui: &mut Ui) {
        self.poll_pending();
        self.handle_dropped_files(ui);
        match browse_ui(ui.ctx(), &mut self.browse) {
            Some(BrowseAction::Open(paths)) => self.load_in_background(paths, ui.ctx()),
            Some(BrowseAction::Add(more)) => {
                let mut paths = self.paths.clone();
                paths.extend(more);
                self.load_in_background(paths, ui.ctx());
            }
            None => {}
        }
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui));
        if self.model.is_some() {
            egui::Panel::right("analysis")
                .default_size(400.0)
                .resizable(true)
                .show(ui, |ui| self.analysis_ui(ui));
            egui::Panel::bottom("details")
                .default_size(190.0)
                .min_size(150.0)
                .resizable(true)
                .show(ui, |ui| self.details_ui(ui));
        }
        egui::CentralPanel::default().show(ui, |ui| match &self.model {
            Some(model) => timeline_ui(ui, model, &mut self.timeline),
            None => {
                ui.add_space(24.0);
                ui.vertical_centered(|ui| {
                    ui.label(
                        self.message
                            .clone()
                            .unwrap_or_else(|| "No trace loaded.".into()),
                    );
                });
            }
        });
    }

    fn handle_dropped_files(&mut self, ui: &Ui) {
        let dropped: Vec<PathBuf> = ui.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        });
        if !dropped.is_empty() {
            let mut paths = self.paths.clone();
            paths.extend(dropped);
            self.load_in_background(paths, ui.ctx());
        }
    }

    fn toolbar_ui(&mut self, ui: &mut Ui) {
        ui.horizontal(|ui| {
            ui.strong("streamscope");
            ui.separator();
            if ui
                .button("Browse")
                .on_hover_text("pick trace files or a folder")
                .clicked()
            {
                let start = self.paths.first().and_then(|p| {
                    if p.is_dir() {
                        Some(p.clone())
                    } else {
                        p.parent().map(|d| d.to_path_buf())
                    }
                });
                self.browse.show_dir(start.as_deref());
            }
            let edit = ui.add(
                egui::TextEdit::singleline(&mut self.open_text)
                    .hint_text("trace file or folder")
                    .desired_width(260.0),
            );
            let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let path = PathBuf::from(self.open_text.trim());
            if (ui
                .button("Open")
                .on_hover_text("replace the open traces")
                .clicked()
                || enter)
                && !self.open_text.trim().is_empty()
            {
                self.load_in_background(vec![path.clone()], ui.ctx());
            }
            if ui
                .button("Add")
                .on_hover_text("open next to the current traces (another rank)")
                .clicked()
                && !self.open_text.trim().is_empty()
            {
                let mut paths = self.paths.clone();
                paths.push(path);
                self.load_in_background(paths, ui.ctx());
            }
            if let Some(p) = &self.pending {
                ui.spinner();
                ui.label(format!("loading {} file(s)", p.paths.len()));
            }
            ui.separator();
            if let Some(model) = &self.model {
                if let Some(s) = panels::search::search_ui(ui, &model.trace, &mut self.search) {
                    self.timeline.select_and_show(model, s);
                }
            }
        });
        ui.horizontal_wrapped(|ui| {
            for f in &self.files {
                let name = f.path.display().to_string();
                match &f.result {
                    Ok((ranks, slices)) => {
                        ui.label(
                            RichText::new(format!("{name}: {ranks} rank(s), {slices} slices"))
                                .small(),
                        );
                    }
                    Err(e) => {
                        ui.colored_label(
                            ui.visuals().error_fg_color,
                            RichText::new(format!("failed: {e}")).small(),
                        );
                    }
                }
            }
            if let Some(model) = &self.model {
                for w in model.trace.warnings.iter().take(3) {
                    ui.colored_label(ui.visuals().warn_fg_color, RichText::new(w).small());
                }
            }
            ui.separator();
            for (name, color) in crate::style::LEGEND {
                let (r, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
                ui.painter().rect_filled(r, 2.0, color);
                ui.label(RichText::new(name).small());
            }
        });
        if let Some(m) = &self.message {
            if self.model.is_some() {
                ui.label(m);
            }
        }
    }

    fn analysis_ui(&mut self, ui: &mut Ui) {
        let Some(model) = &mut self.model else { return };
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.tab, Tab::Overlap, "Overlap");
            ui.selectable_value(&mut self.tab, Tab::Syncs, "Syncs");
            ui.selectable_value(&mut self.tab, Tab::TopKernels, "Top kernels");
        });
        ui.separator();
        match self.tab {
            Tab::Overlap => {
                if let Some((a, b)) = panels::overlap::overlap_ui(ui, &model.report) {
                    self.timeline.zoom_to(&model.index, a, b);
                    self.timeline.range_ns = Some((a, b));
                }
            }
            Tab::Syncs => {
                let sl = &model.trace.slices;
                let bounds = |s: u32| (sl.start_ns[s as usize], sl.end_ns(s as usize));
                if let Some(t) = panels::syncs::syncs_ui(ui, &model.report, &mut self.syncs, bounds)
                {
                    self.timeline.zoom_to(&model.index, t.start_ns, t.end_ns);
                    let track = t.slice.map(|s| model.trace.slices.track[s as usize]);
                    self.timeline.highlight = Some(Highlight {
                        start_ns: t.start_ns,
                        end_ns: t.end_ns,
                        track,
                    });
                    if let Some(s) = t.slice {
                        self.timeline.select(model, Some(s));
                    }
                }
            }
            Tab::TopKernels => {
                if let Some(s) =
                    panels::top_kernels::top_kernels_ui(ui, &model.trace, &mut model.top)
                {
                    self.timeline.select_and_show(model, s);
                }
            }
        }
    }

    fn details_ui(&mut self, ui: &mut Ui) {
        let Some(model) = &self.model else { return };
        if let Some(s) = panels::details::details_ui(ui, model, &self.timeline) {
            self.timeline.select_and_show(model, s);
        }
    }
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        self.ui_root(ui);
        crate::screenshot::after_frame(ui.ctx(), self);
    }
}
