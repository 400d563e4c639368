//! The eframe app: toolbar (files, search, legend), analysis panels on the
//! right, selection details at the bottom, the timeline in the middle.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use streamscope_core::SliceId;

use egui::{RichText, Ui};
use streamscope_core::Trace;

use crate::browse::{browse_ui, BrowseAction, BrowseState};
use crate::framing::Framing;
use crate::load::{load_all, load_all_with, FileStatus, Progress, STAGE_ANALYZING, STAGE_DONE};
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
    /// What to fix first, ranked by predicted gain.
    Findings,
    Syncs,
    TopKernels,
    /// Per step, the rank the others waited for.
    Stragglers,
    /// Two runs side by side (`view --compare A B`).
    Compare,
    /// The steps replayed with a communication scale (`streamscope whatif`).
    WhatIf,
}

/// Renders the first frame to a PNG, then closes the window.
#[derive(Debug, Clone)]
pub struct ScreenshotJob {
    pub path: PathBuf,
    /// Frames drawn so far (the shot is taken once layout has settled).
    pub frames: u32,
    pub requested: bool,
    /// Error of the write, reported by `run` after the window closes.
    pub result: std::sync::Arc<std::sync::Mutex<Option<Result<(), crate::error::ScreenshotError>>>>,
}

/// A load running on a worker thread, so the window stays responsive.
struct PendingLoad {
    paths: Vec<PathBuf>,
    rx: mpsc::Receiver<(Option<Model>, Vec<FileStatus>)>,
    progress: Arc<Progress>,
}

pub struct ViewerApp {
    pub model: Option<Model>,
    pub paths: Vec<PathBuf>,
    pub files: Vec<FileStatus>,
    pub timeline: TimelineState,
    pub search: SearchState,
    pub syncs: SyncsState,
    pub findings: crate::panels::findings::FindingsState,
    /// The What-if tab's slider and replay.
    pub whatif: crate::panels::whatif::WhatIfState,
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
    /// With `view --compare A B`: the comparison shown in its tab.
    pub comparison: Option<streamscope_core::analysis::compare::Comparison>,
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
            findings: Default::default(),
            whatif: Default::default(),
            tab: Tab::default(),
            open_text: String::new(),
            message: None,
            screenshot: None,
            browse: BrowseState::default(),
            framing: Framing::default(),
            comparison: None,
            pending: None,
        }
    }

    /// Opens two runs side by side (loaded before this returns): the test
    /// run aligned at the control's first headline step, and the
    /// "Compare" tab. A run that does not load leaves a message.
    pub fn open_compare(control: PathBuf, test: PathBuf, align_at: Option<i64>) -> Self {
        let mut app = Self::empty();
        let (a, fa) = load_all(std::slice::from_ref(&control));
        let (b, fb) = load_all(std::slice::from_ref(&test));
        app.files = fa.into_iter().chain(fb).collect();
        app.paths = vec![control.clone(), test.clone()];
        match (a, b) {
            (Some(a), Some(b)) => {
                let labels = (control.display().to_string(), test.display().to_string());
                let (merged, c) = streamscope_core::analysis::compare::side_by_side(
                    &a,
                    &b,
                    (&labels.0, &labels.1),
                    align_at,
                    &Default::default(),
                );
                app.comparison = Some(c);
                app.tab = Tab::Compare;
                app.set_model(Some(Model::new(merged)));
            }
            _ => {
                let errors: Vec<String> = app
                    .files
                    .iter()
                    .filter_map(|f| f.result.as_ref().err().map(|e| e.to_string()))
                    .collect();
                app.message = Some(format!("cannot compare: {}", errors.join("; ")));
            }
        }
        app
    }

    /// Opens `paths`, or the bundled trace when there are none (loaded
    /// before this returns).
    pub fn open(paths: Vec<PathBuf>) -> Self {
        Self::open_with(paths, false)
    }

    /// Like [`Self::open`], loading on a worker thread: the window can show
    /// its first frame (with the progress) at once.
    pub fn open_in_background(paths: Vec<PathBuf>) -> Self {
        Self::open_with(paths, true)
    }

    fn open_with(paths: Vec<PathBuf>, background: bool) -> Self {
        let mut app = Self::empty();
        let load = |app: &mut Self, paths: Vec<PathBuf>| {
            if background {
                app.start_load(paths, None);
            } else {
                app.load(paths);
            }
        };
        if paths.is_empty() {
            match crate::load::default_trace() {
                Some(p) => load(&mut app, vec![p]),
                None => {
                    app.browse.show_dir(None);
                    app.message = Some(
                        "No trace given and no bundled trace found in traces/: press Browse, type a path above and press Open, or drop files here."
                            .into(),
                    )
                }
            }
        } else {
            load(&mut app, paths);
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
        self.start_load(paths, Some(ctx.clone()));
    }

    /// Starts loading `paths` on a worker thread (a load already running is
    /// cancelled); `ctx`, when given, is woken when the result is ready.
    pub fn start_load(&mut self, paths: Vec<PathBuf>, ctx: Option<egui::Context>) {
        self.cancel_load();
        let (tx, rx) = mpsc::channel();
        let progress = Arc::new(Progress::default());
        let job_paths = paths.clone();
        let job_progress = progress.clone();
        let spawned = std::thread::Builder::new()
            .name("streamscope-load".into())
            .spawn(move || {
                let (trace, files) = load_all_with(&job_paths, &job_progress);
                if job_progress.cancelled() {
                    return;
                }
                job_progress.stage.store(STAGE_ANALYZING, Ordering::Relaxed);
                let model = trace.map(Model::new);
                job_progress.stage.store(STAGE_DONE, Ordering::Relaxed);
                // The receiver is gone only if the load was cancelled or
                // the app closed meanwhile.
                let _ = tx.send((model, files));
                if let Some(ctx) = ctx {
                    ctx.request_repaint();
                }
            });
        match spawned {
            Ok(_) => {
                self.pending = Some(PendingLoad {
                    paths,
                    rx,
                    progress,
                })
            }
            Err(e) => self.message = Some(format!("cannot start loading: {e}")),
        }
    }

    /// Stops a running load: no further file is read and its result is
    /// dropped (a file being parsed finishes in the background).
    pub fn cancel_load(&mut self) {
        if let Some(p) = self.pending.take() {
            p.progress
                .cancel
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.message = Some("loading cancelled".into());
        }
    }

    /// True while a background load runs.
    pub fn is_loading(&self) -> bool {
        self.pending.is_some()
    }

    /// One line on the running load: stage, files, bytes and events read.
    pub fn load_status(&self) -> Option<(String, f32)> {
        let p = &self.pending.as_ref()?.progress;
        let files = p.files_read.load(Ordering::Relaxed);
        let total = p.files_total.load(Ordering::Relaxed);
        let (b, bt) = (
            p.bytes_read.load(Ordering::Relaxed),
            p.bytes_total.load(Ordering::Relaxed),
        );
        let events = p.events.load(Ordering::Relaxed);
        let mb = |x: u64| x as f64 / 1e6;
        let text = match p.stage.load(Ordering::Relaxed) {
            STAGE_ANALYZING | STAGE_DONE => {
                format!("analyzing {events} events from {total} file(s)")
            }
            _ => format!(
                "reading {files} of {total} file(s): {:.1} of {:.1} MB, {events} events parsed",
                mb(b),
                mb(bt)
            ),
        };
        let frac = if p.stage.load(Ordering::Relaxed) >= STAGE_ANALYZING {
            1.0
        } else if bt > 0 {
            b as f32 / bt as f32
        } else {
            0.0
        };
        Some((text, frac))
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
        self.findings = Default::default();
        self.whatif = Default::default();
        if let Some(m) = &self.model {
            let procs: Vec<u32> = m.lanes.root_processes().into_iter().flatten().collect();
            if procs.len() > COLLAPSE_RANKS_ABOVE {
                self.timeline.collapsed.extend(
                    procs
                        .into_iter()
                        .map(crate::timeline::layout::GroupKey::Process),
                );
            }
        }
        if let (Some(m), false) = (&self.model, self.framing.is_empty()) {
            if let Err(e) = self.framing.apply(m, &mut self.timeline) {
                self.message = Some(e.to_string());
            }
        }
    }

    /// Sets what the view opens on and applies it to the loaded trace set,
    /// if any (its error, e.g. no such step, is also shown in the window).
    pub fn set_framing(&mut self, framing: Framing) -> Result<(), crate::error::FramingError> {
        self.framing = framing;
        let Some(m) = &self.model else {
            return Ok(());
        };
        self.timeline = TimelineState::default();
        let r = framing.apply(m, &mut self.timeline);
        if let Err(e) = &r {
            self.message = Some(e.to_string());
        }
        r
    }

    /// The whole UI, into `ui` (the root of a window or a test harness).
    pub fn ui_root(&mut self, ui: &mut Ui) {
        self.poll_pending();
        if self.pending.is_some() {
            // Progress moves without input events.
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(100));
        }
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
            None if self.pending.is_some() => {
                ui.add_space(24.0);
                ui.vertical_centered(|ui| {
                    // Loading next to an open trace (the central panel shows the
                    // progress otherwise).
                    if let Some((text, frac)) = self.load_status().filter(|_| self.model.is_some())
                    {
                        ui.add(
                            egui::ProgressBar::new(frac)
                                .desired_width(420.0)
                                .animate(true),
                        );
                        ui.label(text);
                    }
                    if ui.button("Cancel").clicked() {
                        self.cancel_load();
                    }
                });
            }
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
            // Loading next to an open trace (the central panel shows the
            // progress otherwise).
            if let Some((text, frac)) = self.load_status().filter(|_| self.model.is_some()) {
                ui.add(
                    egui::ProgressBar::new(frac)
                        .desired_width(120.0)
                        .animate(true),
                )
                .on_hover_text(text);
                if ui.button("Cancel").on_hover_text("stop loading").clicked() {
                    self.cancel_load();
                }
            }
            ui.separator();
            if let Some(model) = &self.model {
                if let Some(s) = panels::search::search_ui(ui, &model.trace, &mut self.search) {
                    self.timeline.select_and_show(model, s);
                }
                if model.report.ranks.len() > 1 {
                    ui.separator();
                    rank_order_ui(ui, model, &mut self.timeline);
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
                for w in model.trace.diagnostics().iter().take(3) {
                    ui.colored_label(
                        ui.visuals().warn_fg_color,
                        RichText::new(w.to_string()).small(),
                    );
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
            ui.selectable_value(&mut self.tab, Tab::Findings, "Findings");
            ui.selectable_value(&mut self.tab, Tab::Syncs, "Syncs");
            ui.selectable_value(&mut self.tab, Tab::TopKernels, "Top kernels");
            if model.report.ranks.len() > 1 {
                ui.selectable_value(&mut self.tab, Tab::Stragglers, "Stragglers");
            }
            if self.comparison.is_some() {
                ui.selectable_value(&mut self.tab, Tab::Compare, "Compare");
            }
            ui.selectable_value(&mut self.tab, Tab::WhatIf, "What-if");
        });
        ui.separator();
        match self.tab {
            Tab::Overlap => {
                if let Some((a, b)) = panels::overlap::overlap_ui(ui, &model.report) {
                    self.timeline.zoom_to(&model.index, a, b);
                    self.timeline.range_ns = Some((a, b));
                }
            }
            Tab::Syncs | Tab::Findings => {
                let sl = model.trace.slices();
                let bounds = |s: u32| {
                    (
                        sl.start_ns()[s as usize],
                        sl.end_ns(SliceId::from_index(s as usize)),
                    )
                };
                let target = if self.tab == Tab::Syncs {
                    panels::syncs::syncs_ui(ui, &model.report, &mut self.syncs, bounds)
                } else {
                    panels::findings::findings_ui(ui, &model.report, &mut self.findings, bounds)
                };
                if let Some(t) = target {
                    self.timeline.zoom_to(&model.index, t.start_ns, t.end_ns);
                    let track = t.slice.map(|s| model.trace.slices().track()[s as usize]);
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
            Tab::Stragglers => {
                if let Some(j) = panels::stragglers::stragglers_ui(ui, model) {
                    self.timeline.zoom_to(&model.index, j.start_ns, j.end_ns);
                    if let Some(&first) = j.kernels.first() {
                        self.timeline.select(model, Some(first));
                    }
                }
            }
            Tab::WhatIf => panels::whatif::whatif_ui(ui, model, &mut self.whatif),
            Tab::Compare => match &self.comparison {
                Some(c) => panels::compare::compare_ui(ui, c),
                None => {
                    ui.label("Open two runs with `streamscope view --compare A B`.");
                }
            },
        }
    }

    fn details_ui(&mut self, ui: &mut Ui) {
        let Some(model) = &self.model else { return };
        if let Some(s) = panels::details::details_ui(ui, model, &self.timeline) {
            self.timeline.select_and_show(model, s);
        }
    }
}

/// "ranks by [order]" and "collapse all" / "expand all".
fn rank_order_ui(ui: &mut Ui, model: &Model, st: &mut crate::timeline::TimelineState) {
    use crate::timeline::layout::GroupKey;
    use crate::timeline::RankOrder;
    ui.label("ranks by");
    egui::ComboBox::from_id_salt("rank_order")
        .selected_text(st.rank_order.name())
        .show_ui(ui, |ui| {
            for o in RankOrder::ALL {
                ui.selectable_value(&mut st.rank_order, o, o.name());
            }
        })
        .response
        .on_hover_text(
            "order of the ranks (largest first); a collapsed rank shows one utilization strip",
        );
    let procs: Vec<u32> = model.lanes.root_processes().into_iter().flatten().collect();
    let all_collapsed = procs
        .iter()
        .all(|p| st.collapsed.contains(&GroupKey::Process(*p)));
    let text = if all_collapsed {
        "expand all"
    } else {
        "collapse all"
    };
    if ui.small_button(text).clicked() {
        for p in procs {
            if all_collapsed {
                st.collapsed.remove(&GroupKey::Process(p));
            } else {
                st.collapsed.insert(GroupKey::Process(p));
            }
        }
    }
}

/// Ranks beyond which a trace opens with every rank collapsed to its
/// summary strip.
pub const COLLAPSE_RANKS_ABOVE: usize = 8;

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        self.ui_root(ui);
        crate::screenshot::after_frame(ui.ctx(), self);
    }
}
