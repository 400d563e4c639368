//! Search slices by name (substring, case-insensitive) or regex, with
//! next/previous. Names are matched once per string in the pool, then the
//! name column is scanned once per query, never per frame.

use egui::Ui;
use regex::Regex;
use streamscope_core::Trace;

#[derive(Debug, Clone, Default)]
pub struct SearchState {
    pub query: String,
    pub regex: bool,
    /// Matching slice ids, in start-time order.
    pub matches: Vec<u32>,
    /// Index into `matches` of the shown match.
    pub current: Option<usize>,
    pub error: Option<String>,
    /// (query, regex) the matches belong to.
    searched: Option<(String, bool)>,
}

impl SearchState {
    /// Recomputes the matches for the current query.
    pub fn run(&mut self, trace: &Trace) {
        self.matches.clear();
        self.current = None;
        self.error = None;
        self.searched = Some((self.query.clone(), self.regex));
        if self.query.is_empty() {
            return;
        }
        let names: Vec<bool> = if self.regex {
            match Regex::new(&self.query) {
                Ok(re) => (0..trace.strings().len())
                    .map(|i| re.is_match(trace.str(streamscope_core::StrId::from_index(i))))
                    .collect(),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        } else {
            let q = self.query.to_lowercase();
            (0..trace.strings().len())
                .map(|i| {
                    trace
                        .str(streamscope_core::StrId::from_index(i))
                        .to_lowercase()
                        .contains(&q)
                })
                .collect()
        };
        let sl = trace.slices();
        self.matches = (0..sl.len() as u32)
            .filter(|&i| names[sl.name()[i as usize].index()])
            .collect();
        self.matches.sort_by_key(|&i| sl.start_ns()[i as usize]);
    }

    fn stale(&self) -> bool {
        self.searched.as_ref() != Some(&(self.query.clone(), self.regex))
    }

    /// Steps to the next (`forward`) or previous match; returns its slice.
    pub fn step(&mut self, trace: &Trace, forward: bool) -> Option<u32> {
        if self.stale() {
            self.run(trace);
            if self.matches.is_empty() {
                return None;
            }
            self.current = Some(if forward { 0 } else { self.matches.len() - 1 });
        } else {
            let n = self.matches.len();
            if n == 0 {
                return None;
            }
            self.current = Some(match self.current {
                None => 0,
                Some(c) if forward => (c + 1) % n,
                Some(c) => (c + n - 1) % n,
            });
        }
        self.current.map(|c| self.matches[c])
    }
}

/// The search bar; returns a slice to select and show.
pub fn search_ui(ui: &mut Ui, trace: &Trace, st: &mut SearchState) -> Option<u32> {
    let mut jump = None;
    let label = ui.label("Search");
    let edit = ui
        .add(
            egui::TextEdit::singleline(&mut st.query)
                .hint_text("kernel name or regex")
                .desired_width(200.0),
        )
        .labelled_by(label.id);
    if edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)) {
        jump = st.step(trace, true);
        edit.request_focus();
    }
    ui.checkbox(&mut st.regex, "regex");
    if ui.button("prev").clicked() {
        jump = st.step(trace, false);
    }
    if ui.button("next").clicked() {
        jump = st.step(trace, true);
    }
    if let Some(e) = &st.error {
        ui.colored_label(ui.visuals().error_fg_color, format!("bad regex: {e}"));
    } else if !st.stale() && !st.query.is_empty() {
        match st.current {
            Some(c) => ui.label(format!("{} of {}", c + 1, st.matches.len())),
            None => ui.label(format!("{} matches", st.matches.len())),
        };
    }
    jump
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::TraceBuilder;
    use streamscope_core::{NewSlice, Process, SliceKind, TrackKind};

    #[test]
    fn substring_and_regex_cycle_in_time_order() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let d0 = t.add_device(streamscope_core::Device {
            process: p,
            ..Default::default()
        });
        let s = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d0,
                stream: 7,
            },
            "s",
        );
        let h = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "h");
        let g = t.intern("ampere_sgemm_128");
        let n = t.intern("ncclDevKernel_AllGather");
        t.push_slice(NewSlice::new(s, SliceKind::Kernel, g, 50, 5));
        t.push_slice(NewSlice::new(h, SliceKind::Range, g, 10, 5));
        t.push_slice(NewSlice::new(s, SliceKind::Kernel, n, 20, 5));
        let t = t.finish();
        let mut st = SearchState {
            query: "SGEMM".into(),
            ..Default::default()
        };
        // Slice ids in the trace's order (by track, then start): 0 is the
        // nccl kernel at 20, 1 the gemm at 50, 2 the range at 10.
        assert_eq!(st.step(&t, true), Some(2));
        assert_eq!(st.step(&t, true), Some(1));
        assert_eq!(st.step(&t, true), Some(2));
        assert_eq!(st.step(&t, false), Some(1));
        st.query = "^nccl.*Gather$".into();
        st.regex = true;
        assert_eq!(st.step(&t, true), Some(0));
        st.query = "(".into();
        assert_eq!(st.step(&t, true), None);
        assert!(st.error.is_some());
    }
}
