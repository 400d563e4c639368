//! A small file dialog drawn with egui: rfd's portal backend needs the
//! system wayland-client library to build, so the viewer browses folders
//! itself. Folders open on click; trace files are picked, then opened
//! (replacing the open set) or added (more ranks).

use std::path::{Path, PathBuf};

use egui::{Context, RichText, Ui};

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum BrowseAction {
    Open(Vec<PathBuf>),
    Add(Vec<PathBuf>),
}

#[derive(Debug, Clone, Default)]
pub struct BrowseState {
    pub open: bool,
    pub dir: PathBuf,
    /// (name, is a folder), folders first.
    pub entries: Vec<(String, bool)>,
    pub picked: Vec<PathBuf>,
    pub all_files: bool,
    pub error: Option<String>,
}

/// File names a trace loader accepts (gzip-compressed ones too).
pub fn is_trace_name(name: &str) -> bool {
    let n = name.to_lowercase();
    let n = n.strip_suffix(".gz").unwrap_or(&n);
    [".pftrace", ".perfetto-trace", ".json", ".pb"]
        .iter()
        .any(|e| n.ends_with(e))
}

impl BrowseState {
    /// Opens the dialog in `dir` (or the current folder).
    pub fn show_dir(&mut self, dir: Option<&Path>) {
        let dir = dir
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        self.open = true;
        self.cd(dir);
    }

    fn cd(&mut self, dir: PathBuf) {
        self.picked.clear();
        self.entries.clear();
        self.error = None;
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') {
                        continue;
                    }
                    self.entries.push((name, e.path().is_dir()));
                }
                self.entries
                    .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            }
            Err(e) => self.error = Some(format!("{}: {e}", dir.display())),
        }
        self.dir = dir;
    }
}

/// The dialog window, when open.
pub fn browse_ui(ctx: &Context, st: &mut BrowseState) -> Option<BrowseAction> {
    if !st.open {
        return None;
    }
    let mut action = None;
    let mut open = st.open;
    egui::Window::new("Open traces")
        .open(&mut open)
        .pivot(egui::Align2::CENTER_CENTER)
        .default_pos(ctx.content_rect().center())
        .default_size([520.0, 420.0])
        .show(ctx, |ui| {
            action = dialog_ui(ui, st);
        });
    st.open = open && action.is_none();
    action
}

fn dialog_ui(ui: &mut Ui, st: &mut BrowseState) -> Option<BrowseAction> {
    let mut action = None;
    let mut go: Option<PathBuf> = None;
    ui.horizontal(|ui| {
        if ui.button("Up").clicked() {
            go = st.dir.parent().map(Path::to_path_buf);
        }
        ui.label(RichText::new(st.dir.display().to_string()).monospace());
    });
    ui.checkbox(&mut st.all_files, "show all files");
    if let Some(e) = &st.error {
        ui.colored_label(ui.visuals().error_fg_color, e);
    }
    egui::ScrollArea::vertical()
        .id_salt("browse")
        .max_height(280.0)
        .show(ui, |ui| {
            for (name, is_dir) in &st.entries {
                let path = st.dir.join(name);
                if *is_dir {
                    if ui.selectable_label(false, format!("{name}/")).clicked() {
                        go = Some(path);
                    }
                } else if st.all_files || is_trace_name(name) {
                    let picked = st.picked.contains(&path);
                    if ui.selectable_label(picked, name.as_str()).clicked() {
                        if picked {
                            st.picked.retain(|p| p != &path);
                        } else {
                            st.picked.push(path);
                        }
                    }
                }
            }
        });
    ui.separator();
    ui.horizontal(|ui| {
        let n = st.picked.len();
        if ui
            .add_enabled(n > 0, egui::Button::new(format!("Open {n} picked")))
            .clicked()
        {
            action = Some(BrowseAction::Open(st.picked.clone()));
        }
        if ui
            .add_enabled(n > 0, egui::Button::new(format!("Add {n} picked")))
            .clicked()
        {
            action = Some(BrowseAction::Add(st.picked.clone()));
        }
        if ui
            .button("Open this folder")
            .on_hover_text("every trace in it, one rank each")
            .clicked()
        {
            action = Some(BrowseAction::Open(vec![st.dir.clone()]));
        }
    });
    if let Some(d) = go {
        st.cd(d);
    }
    action
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_names() {
        assert!(is_trace_name("rank0.pftrace"));
        assert!(is_trace_name("worker.pt.trace.JSON.gz"));
        assert!(is_trace_name("rank-0.capture-1.pftrace.gz"));
        assert!(!is_trace_name("notes.txt"));
        assert!(!is_trace_name("notes.txt.gz"));
    }
}
