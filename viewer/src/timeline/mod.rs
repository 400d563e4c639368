//! The timeline: lanes, ruler, selection, zoom and pan.
//!
//! Each frame: flatten the lane tree, fold the visible window of every
//! visible row (`lod`), draw GPU rows' folded stretches as per-column class
//! coverage (`coverage`), put every rectangle into one mesh (`paint`), then
//! text, ruler and overlays. Nothing here walks all slices.

pub mod counters;
pub mod coverage;
pub mod flows;
pub mod index;
pub mod layout;
pub mod lod;
pub mod paint;

mod interact;
mod lines;

use std::collections::HashSet;
use streamscope_core::SliceId;

use egui::{Color32, Pos2, Rect, Sense, Shape, Stroke, StrokeKind, Ui, UiBuilder, Vec2};
use streamscope_core::TrackId;

use crate::model::Model;
use index::TimelineIndex;
use layout::{GroupKey, Line, LineKind};
use lod::{abs_ns, rel_ns, Item, TimeMap};

pub const RULER_H: f32 = 22.0;
pub const LABEL_W: f32 = 230.0;

/// A time range to point at (a sync warning), on one track when known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Highlight {
    pub start_ns: i64,
    pub end_ns: i64,
    pub track: Option<TrackId>,
}

/// The order of the ranks' lane groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RankOrder {
    /// As in the trace.
    #[default]
    Trace,
    /// Slowest median step first.
    StepTime,
    /// Most exposed communication first.
    ExposedComm,
    /// Most GPU idle first.
    Idle,
}

impl RankOrder {
    /// Every order, for the selector.
    pub const ALL: [RankOrder; 4] = [
        RankOrder::Trace,
        RankOrder::StepTime,
        RankOrder::ExposedComm,
        RankOrder::Idle,
    ];

    /// The selector's text.
    pub fn name(self) -> &'static str {
        match self {
            RankOrder::Trace => "trace order",
            RankOrder::StepTime => "step time",
            RankOrder::ExposedComm => "exposed communication",
            RankOrder::Idle => "GPU idle",
        }
    }

    /// Root indices of `model`'s lane tree in this order (None: as is).
    pub fn roots(self, model: &Model) -> Option<Vec<usize>> {
        if self == RankOrder::Trace {
            return None;
        }
        let r = &model.report;
        let metric = |process: u32| -> f64 {
            let Some(k) = r.ranks.iter().find(|k| k.process.get() == process) else {
                return f64::NEG_INFINITY;
            };
            match self {
                RankOrder::StepTime => r.median_step_us(k.rank).unwrap_or(f64::NEG_INFINITY),
                RankOrder::ExposedComm => k.breakdown.exposed_comm_us,
                RankOrder::Idle => k.breakdown.idle_pct.unwrap_or(f64::NEG_INFINITY),
                RankOrder::Trace => 0.0,
            }
        };
        let procs = model.lanes.root_processes();
        let mut idx: Vec<usize> = (0..procs.len()).collect();
        idx.sort_by(|&a, &b| {
            let m = |i: usize| procs[i].map_or(f64::NEG_INFINITY, metric);
            m(b).total_cmp(&m(a)).then(a.cmp(&b))
        });
        Some(idx)
    }
}

/// View and selection state of the timeline.
#[derive(Debug, Clone, Default)]
pub struct TimelineState {
    /// The order of the ranks' lane groups.
    pub rank_order: RankOrder,
    /// Visible window, relative to the trace start; `view_dur_ns == 0` means
    /// "fit everything" at the next frame.
    pub view_start_rel_ns: f64,
    pub view_dur_ns: f64,
    pub scroll_y: f32,
    pub collapsed: HashSet<GroupKey>,
    pub selected: Option<u32>,
    /// (launch, GPU work) pairs linked to the selection.
    pub links: Vec<(u32, u32)>,
    /// Range selected with shift-drag or right-drag, absolute ns.
    pub range_ns: Option<(i64, i64)>,
    pub highlight: Option<Highlight>,
    /// Scroll this track into view at the next frame.
    pub reveal: Option<TrackId>,
    /// Width of the lane area at the last frame (for zoom_to before a frame).
    pub last_width_px: f32,
    /// Lines of the last frame, for tests and hit testing.
    pub lines: Vec<Line>,
    drag_range_from: Option<i64>,
    items: Vec<Item>,
    /// (row, first item, end item, screen y) per painted row of the last frame.
    row_items: Vec<(u32, u32, u32, f32)>,
    /// (row, coverage columns) per GPU row drawn with coverage columns at
    /// the last frame (rows whose visible slices were all wide are absent).
    pub coverage_rows: Vec<(u32, u32)>,
    /// Summary strips of collapsed ranks, per process, with the view they
    /// were computed for (start, ns per px, left, right, height bits).
    summaries: std::collections::HashMap<u32, (SummaryView, Vec<paint::SummaryRun>)>,
}

/// What a cached summary strip depends on.
type SummaryView = (u64, u64, u32, u32, u8);

/// The trace's span in ns as f64 (at least 1), exact for any i64 bounds.
fn span_f64(index: &TimelineIndex) -> f64 {
    rel_ns(index.span_ns.1, index.span_ns.0).max(1.0)
}

impl TimelineState {
    /// Visible window in absolute ns (after the first frame).
    pub fn window_ns(&self, index: &TimelineIndex) -> (i64, i64) {
        let o = index.span_ns.0;
        (
            abs_ns(o, self.view_start_rel_ns),
            abs_ns(o, self.view_start_rel_ns + self.view_dur_ns),
        )
    }

    pub fn fit(&mut self, index: &TimelineIndex) {
        self.view_start_rel_ns = 0.0;
        self.view_dur_ns = span_f64(index);
        self.clamp(index);
    }

    /// Shows `start_ns..end_ns` (absolute) with a margin on both sides.
    pub fn zoom_to(&mut self, index: &TimelineIndex, start_ns: i64, end_ns: i64) {
        let (a, b) = (start_ns.min(end_ns), start_ns.max(end_ns));
        let len = rel_ns(b, a).max(1.0);
        let mid = rel_ns(a, index.span_ns.0) + len / 2.0;
        self.view_dur_ns = (len * 1.5).max(100.0);
        self.view_start_rel_ns = mid - self.view_dur_ns / 2.0;
        self.clamp(index);
    }

    /// Shows exactly `start_ns..end_ns` (absolute), within the limits of
    /// [`Self::zoom_to`]'s clamp.
    pub fn show_exactly(&mut self, index: &TimelineIndex, start_ns: i64, end_ns: i64) {
        let (a, b) = (start_ns.min(end_ns), start_ns.max(end_ns));
        self.view_start_rel_ns = rel_ns(a, index.span_ns.0);
        self.view_dur_ns = rel_ns(b, a).max(10.0);
        self.clamp(index);
    }

    /// Keeps the view within the trace (plus a margin) and above 10 ns
    /// wide. Whatever the state before (even NaN or infinite), the state
    /// after is finite with `view_dur_ns > 0`.
    fn clamp(&mut self, index: &TimelineIndex) {
        let span = span_f64(index);
        let margin = span * 0.05;
        let max_dur = (span + 2.0 * margin).max(10.0);
        if !self.view_dur_ns.is_finite() || self.view_dur_ns <= 0.0 {
            self.view_dur_ns = max_dur;
        }
        self.view_dur_ns = self.view_dur_ns.clamp(10.0, max_dur);
        if !self.view_start_rel_ns.is_finite() {
            self.view_start_rel_ns = 0.0;
        }
        // Rounding can put `span + margin - dur` a hair below `-margin` at
        // large magnitudes; the bounds are ordered by construction here.
        let lo = -margin;
        let hi = (span + margin - self.view_dur_ns).max(lo);
        self.view_start_rel_ns = self.view_start_rel_ns.clamp(lo, hi);
    }

    /// Zooms by `factor` (<1 zooms in) keeping the time under `frac` of the
    /// width (0 = left edge) in place.
    pub fn zoom_by(&mut self, index: &TimelineIndex, factor: f64, frac: f64) {
        let anchor = self.view_start_rel_ns + self.view_dur_ns * frac;
        self.view_dur_ns *= factor;
        self.view_start_rel_ns = anchor - self.view_dur_ns * frac;
        self.clamp(index);
    }

    pub fn pan_by(&mut self, index: &TimelineIndex, frac: f64) {
        self.view_start_rel_ns += self.view_dur_ns * frac;
        self.clamp(index);
    }

    /// Selects slice `s`: links it to its launch/GPU work, opens the groups
    /// that hide it and scrolls its lane into view.
    pub fn select(&mut self, model: &Model, s: Option<u32>) {
        self.selected = s;
        self.links.clear();
        if let Some(s) = s {
            self.links = flows::linked(&model.trace, s as usize);
            // An NCCL kernel: the same collective on every other rank.
            if let Some((inst, _)) = model.collective_of(s) {
                self.links.extend(
                    inst.parts
                        .iter()
                        .filter(|p| p.slice.get() != s)
                        .map(|p| (s, p.slice.get())),
                );
            }
            let track = model.trace.slices().track()[s as usize];
            for g in model.lanes.groups_of(track) {
                self.collapsed.remove(&g);
            }
            self.reveal = Some(track);
        }
    }

    /// Selects `s` and centres the view on it (zooming in only if it is
    /// narrower than a few pixels).
    pub fn select_and_show(&mut self, model: &Model, s: u32) {
        self.select(model, Some(s));
        let sl = model.trace.slices();
        let (st, dur) = (sl.start_ns()[s as usize], sl.dur_ns()[s as usize]);
        let width = self.last_width_px.max(200.0) as f64;
        if self.view_dur_ns <= 0.0
            || (dur as f64) < self.view_dur_ns / width * 20.0
            || dur as f64 > self.view_dur_ns
        {
            self.zoom_to(&model.index, st, st + dur);
        } else {
            let mid = rel_ns(st, model.index.span_ns.0) + dur as f64 / 2.0;
            self.view_start_rel_ns = mid - self.view_dur_ns / 2.0;
            self.clamp(&model.index);
        }
    }

    fn time_map(&self, index: &TimelineIndex, rect: Rect) -> TimeMap {
        TimeMap {
            origin_ns: index.span_ns.0,
            start_rel_ns: self.view_start_rel_ns,
            ns_per_px: self.view_dur_ns / rect.width().max(1.0) as f64,
            left_px: rect.left() as f64,
            width_px: rect.width() as f64,
        }
    }

    /// Number of painted rows at the last frame with at least one item.
    pub fn painted_rows(&self) -> usize {
        self.row_items.iter().filter(|r| r.2 > r.1).count()
    }

    /// The items of `row` drawn at the last frame (empty when not drawn).
    pub fn items_of(&self, row: u32) -> &[Item] {
        self.row_items
            .iter()
            .find(|r| r.0 == row)
            .and_then(|&(_, a, b, _)| self.items.get(a as usize..b as usize))
            .unwrap_or(&[])
    }
}

/// Opens a fresh view: everything, then zoomed to the steps the headline
/// numbers cover (startup and teardown, such as model build and
/// communicator setup, are rarely what one looks for).
fn open_view(model: &Model, st: &mut TimelineState) {
    st.fit(&model.index);
    let windows = model
        .report
        .ranks
        .iter()
        .filter_map(|r| Some((r.window.start_ns?, r.window.end_ns?)));
    if let Some((a, b)) = windows.reduce(|(a, b), (c, d)| (a.min(c), b.max(d))) {
        if b > a {
            st.zoom_to(&model.index, a, b);
        }
    }
}

/// Scrolls a track asked to be revealed into view, when it is off screen.
fn reveal_pending(model: &Model, st: &mut TimelineState, lanes: Rect) {
    if let Some(track) = st.reveal.take() {
        if let Some(line) = st
            .lines
            .iter()
            .find(|l| line_track(model, l) == Some(track))
        {
            if line.y < st.scroll_y || line.y + line.h > st.scroll_y + lanes.height() {
                st.scroll_y = line.y - lanes.height() / 3.0;
            }
        }
    }
}

/// The hover text of the item, else the counter, under the pointer.
fn hover_ui(
    model: &Model,
    st: &TimelineState,
    map: &TimeMap,
    lanes: Rect,
    response: egui::Response,
) {
    if let Some(p) = response.hover_pos().filter(|p| lanes.contains(*p)) {
        if let Some(it) = interact::hit_item(st, p, lanes) {
            response.on_hover_text_at_pointer(hover_text(model, it, map));
        } else if let Some(text) = counter_hover(model, st, map, lanes, p) {
            response.on_hover_text_at_pointer(text);
        }
    }
}

/// The time ruler above the lanes, with the length of the selected range.
fn ruler_ui(
    ui: &Ui,
    st: &TimelineState,
    map: &TimeMap,
    ruler: Rect,
    lanes: Rect,
    visuals: &egui::Visuals,
) {
    let text_color = visuals.text_color();
    let ruler_painter = ui.painter_at(ruler.union(lanes));
    ruler_painter.rect_filled(ruler, 0.0, visuals.extreme_bg_color);
    paint::paint_ruler(&ruler_painter, map, ruler, lanes, text_color);
    if let Some((a, b)) = st.range_ns {
        let (x0, x1) = (map.x(a) as f32, map.x(b) as f32);
        ruler_painter.text(
            Pos2::new((x0 + x1) / 2.0, ruler.bottom() - 2.0),
            egui::Align2::CENTER_BOTTOM,
            crate::style::fmt_ns(rel_ns(b, a)),
            egui::FontId::proportional(12.0),
            Color32::YELLOW,
        );
    }
}

/// The scrollbar's thumb in its track `thumb`, for lines `total_h` high.
fn paint_thumb(
    ui: &Ui,
    st: &TimelineState,
    thumb: Rect,
    lanes: Rect,
    total_h: f32,
    visuals: &egui::Visuals,
) {
    let t = Rect::from_min_max(
        Pos2::new(
            thumb.left(),
            lanes.top() + st.scroll_y / total_h * lanes.height(),
        ),
        Pos2::new(
            thumb.right(),
            lanes.top() + (st.scroll_y + lanes.height()) / total_h * lanes.height(),
        ),
    );
    ui.painter()
        .rect_filled(t, 3.0, visuals.widgets.inactive.bg_fill);
}

/// Draws the timeline into all of `ui`'s remaining space.
pub fn timeline_ui(ui: &mut Ui, model: &Model, st: &mut TimelineState) {
    let full = ui.available_rect_before_wrap();
    ui.allocate_rect(full, Sense::hover());
    let ruler = Rect::from_min_max(
        Pos2::new(full.left() + LABEL_W, full.top()),
        Pos2::new(full.right(), full.top() + RULER_H),
    );
    let labels = Rect::from_min_max(
        Pos2::new(full.left(), full.top() + RULER_H),
        Pos2::new(full.left() + LABEL_W, full.bottom()),
    );
    let lanes = Rect::from_min_max(
        Pos2::new(full.left() + LABEL_W, full.top() + RULER_H),
        full.max,
    );
    if lanes.width() < 10.0 || lanes.height() < 10.0 {
        return;
    }
    st.last_width_px = lanes.width();
    if st.view_dur_ns <= 0.0 {
        open_view(model, st);
    }

    let order = st.rank_order.roots(model);
    st.lines = model
        .lanes
        .lines_in_order(&model.index, &st.collapsed, order.as_deref());
    let total_h = st.lines.last().map(|l| l.y + l.h).unwrap_or(0.0);
    reveal_pending(model, st, lanes);

    let response = ui.interact(
        lanes.union(ruler),
        ui.scope_id().with("timeline"),
        Sense::click_and_drag(),
    );
    let label_hover = ui.rect_contains_pointer(labels);
    interact::handle(ui, model, st, &response, lanes, label_hover);
    let thumb = scrollbar_ui(ui, st, lanes, total_h);
    st.scroll_y = st
        .scroll_y
        .clamp(0.0, (total_h - lanes.height() + 20.0).max(0.0));

    let map = st.time_map(&model.index, lanes);
    let painter = ui.painter_at(lanes);
    let visuals = ui.visuals().clone();

    // Lines: header bands and rows.
    let (mesh, row_y) = lines::mesh_lines(model, st, &map, lanes, &visuals);
    painter.add(Shape::mesh(mesh));
    lines::label_rows(&painter, model, st, lanes);

    overlays_ui(ui, model, st, &map, lanes, &row_y);
    hover_ui(model, st, &map, lanes, response);
    ruler_ui(ui, st, &map, ruler, lanes, &visuals);
    labels_ui(ui, st, labels, lanes.top());
    if let Some(t) = thumb {
        paint_thumb(ui, st, t, lanes, total_h, &visuals);
    }
}

/// A draggable vertical scrollbar at the right edge of the lanes, when
/// they overflow; returns its track rectangle to paint the thumb in.
fn scrollbar_ui(ui: &Ui, st: &mut TimelineState, lanes: Rect, total_h: f32) -> Option<Rect> {
    if total_h <= lanes.height() {
        return None;
    }
    let track = Rect::from_min_max(Pos2::new(lanes.right() - 8.0, lanes.top()), lanes.max);
    let r = ui.interact(
        track,
        ui.scope_id().with("timeline_scrollbar"),
        Sense::drag(),
    );
    if r.dragged() {
        st.scroll_y += r.drag_delta().y * total_h / lanes.height();
    }
    Some(track)
}

fn hover_text(model: &Model, it: Item, map: &TimeMap) -> String {
    let sl = model.trace.slices();
    match it {
        Item::Slice { slice, .. } => {
            let s = slice as usize;
            format!(
                "{}\n{} · {}",
                model.trace.str(sl.name()[s]),
                sl.kind()[s].name(),
                crate::style::fmt_ns(sl.dur_ns()[s] as f64)
            )
        }
        Item::Folded {
            count,
            first_slice,
            x0,
            x1,
            ..
        } => {
            let mut text = format!(
                "{count} {}",
                it.folded_kind(sl)
                    .map_or("slices", crate::style::plural_kind)
            );
            // On a coverage row: what the fold's time holds, by class.
            let row = model.index.row_of(&model.trace, first_slice as usize);
            if let Some(r) = row {
                if let Some(Some(cov)) = model.index.coverage.get(r as usize) {
                    let (t0, t1) = (map.t(x0 as f64), map.t(x1 as f64));
                    let shares = cov.shares(sl, &model.index.rows[r as usize], t0, t1);
                    let busy: f64 = shares.iter().sum();
                    for (k, name) in coverage::SLOT_NAMES.iter().enumerate() {
                        if shares[k] >= 0.005 {
                            text.push_str(&format!("\n{name} {:.0}%", shares[k] * 100.0));
                        }
                    }
                    text.push_str(&format!("\nidle {:.0}%", (1.0 - busy).max(0.0) * 100.0));
                }
            }
            text.push_str("\n(click to zoom in)");
            text
        }
    }
}

/// The value of the counter lane under `p` (the pixel column's mean, and
/// its min–max when it holds several samples).
fn counter_hover(
    model: &Model,
    st: &TimelineState,
    map: &TimeMap,
    lanes: Rect,
    p: Pos2,
) -> Option<String> {
    let line = st.lines.iter().find(|l| {
        let y = lanes.top() + l.y - st.scroll_y;
        matches!(l.kind, LineKind::Counter { .. }) && p.y >= y && p.y < y + l.h
    })?;
    let LineKind::Counter { track } = line.kind else {
        return None;
    };
    let (t0, t1) = (map.t(p.x as f64), map.t(p.x as f64 + 2.0));
    let mut text = counters::hover_text(&model.trace, &model.index, track, t0, t1)?;
    // Within 4 px of a memory lane's peak: the blocks live then.
    if let Some(ts) = model
        .index
        .counter_peak
        .get(track.index())
        .copied()
        .flatten()
    {
        let near = (map.t(p.x as f64 - 4.0), map.t(p.x as f64 + 6.0));
        if ts >= near.0 && ts < near.1 {
            text.push_str(&peak_blocks_text(model, track));
        }
    }
    Some(text)
}

/// The report's largest blocks live at the peak of the memory lane
/// `track` (its process's rank, on the lane's GPU), one per line.
pub fn peak_blocks_text(model: &Model, track: TrackId) -> String {
    let t = &model.trace;
    let tr = t.track(track);
    let ordinal = match tr.kind {
        streamscope_core::TrackKind::Counter { device: Some(d) } => {
            t.devices().get(d.index()).map(|d| d.ordinal)
        }
        _ => None,
    };
    let Some(m) = model
        .report
        .ranks
        .iter()
        .filter(|k| k.process == tr.process)
        .filter_map(|k| k.memory.as_ref())
        .find(|m| ordinal.is_none_or(|o| o == m.gpu))
    else {
        return String::new();
    };
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let mut s = format!(
        "\npeak {:.1} MiB allocated, {:.1} MiB reserved then",
        mib(m.peak_allocated_bytes),
        mib(m.reserved_at_peak_bytes.unwrap_or(0))
    );
    if !m.live_at_peak.is_empty() {
        s.push_str("\nlargest blocks live then:");
    }
    for b in &m.live_at_peak {
        s.push_str(&format!(
            "\n  {:.1} MiB  {}{}",
            mib(b.bytes),
            if b.op.is_empty() { "-" } else { &b.op },
            b.python
                .as_deref()
                .map_or(String::new(), |p| format!("  {p}"))
        ));
    }
    if m.live_at_peak_other_blocks > 0 {
        s.push_str(&format!(
            "\n  {:.1} MiB in {} other blocks",
            mib(m.live_at_peak_other_bytes),
            m.live_at_peak_other_blocks
        ));
    }
    s
}

fn line_track(model: &Model, l: &Line) -> Option<TrackId> {
    match l.kind {
        LineKind::Row { row, .. } => Some(model.index.rows[row as usize].track),
        LineKind::Counter { track } => Some(track),
        LineKind::Header { .. } => None,
    }
}

/// Selection outline, flow arrows, sync highlight and range selection.
fn overlays_ui(
    ui: &Ui,
    model: &Model,
    st: &TimelineState,
    map: &TimeMap,
    lanes: Rect,
    row_y: &[f32],
) {
    let painter = ui.painter_at(lanes);
    let sl = model.trace.slices();
    let slice_rect = |s: usize| -> Option<Rect> {
        let row = model.index.row_of(&model.trace, s)?;
        let y = *row_y.get(row as usize)?;
        if y.is_nan() {
            return None;
        }
        let x0 = (map.x(sl.start_ns()[s]) as f32).clamp(lanes.left() - 5.0, lanes.right() + 5.0);
        let x1 = (map.x(sl.end_ns(SliceId::from_index(s))) as f32)
            .clamp(lanes.left() - 5.0, lanes.right() + 5.0)
            .max(x0 + 2.0);
        Some(Rect::from_min_max(
            Pos2::new(x0, y),
            Pos2::new(x1, y + layout::ROW_H),
        ))
    };
    // A bracket over the work of each CUDA graph launch, above its lane.
    let (w0, w1) = (
        map.t(f64::from(lanes.left())),
        map.t(f64::from(lanes.right())),
    );
    for (row, r) in model.index.rows.iter().enumerate() {
        let spans = match model.index.graph_spans.get(r.track.index()) {
            Some(v) if r.depth == 0 && !v.is_empty() => v,
            _ => continue,
        };
        let y = match row_y.get(row) {
            Some(&y) if !y.is_nan() => y,
            _ => continue,
        };
        let first = spans.partition_point(|s| s.1 < w0);
        let stroke = Stroke::new(1.0, Color32::from_rgb(200, 150, 255));
        for &(a, b) in spans[first..].iter().take_while(|s| s.0 <= w1) {
            let x0 = (map.x(a) as f32).max(lanes.left());
            let x1 = (map.x(b) as f32).min(lanes.right());
            if x1 - x0 < 3.0 {
                continue;
            }
            painter.hline(x0..=x1, y + 0.5, stroke);
            painter.vline(x0, (y + 0.5)..=(y + 3.0), stroke);
            painter.vline(x1, (y + 0.5)..=(y + 3.0), stroke);
        }
    }
    if let Some(h) = st.highlight {
        let x0 = (map.x(h.start_ns) as f32).max(lanes.left() - 5.0);
        let x1 = (map.x(h.end_ns) as f32)
            .min(lanes.right() + 5.0)
            .max(x0 + 3.0);
        let ys = match h.track.and_then(|t| model.index.track_rows.get(t.index())) {
            Some(rows) if !rows.is_empty() && !row_y[rows.start as usize].is_nan() => {
                let y = row_y[rows.start as usize];
                (y, y + layout::ROW_H * rows.len() as f32)
            }
            _ => (lanes.top(), lanes.bottom()),
        };
        let r = Rect::from_min_max(Pos2::new(x0, ys.0), Pos2::new(x1, ys.1));
        painter.rect_filled(
            lanes.intersect(Rect::from_x_y_ranges(r.x_range(), lanes.y_range())),
            0.0,
            Color32::from_rgba_unmultiplied(255, 60, 60, 28),
        );
        painter.rect_stroke(
            r.expand(2.0),
            2.0,
            Stroke::new(2.0, Color32::from_rgb(255, 80, 80)),
            StrokeKind::Outside,
        );
    }
    if let Some((a, b)) = st.range_ns {
        let x0 = (map.x(a) as f32).max(lanes.left());
        let x1 = (map.x(b) as f32).min(lanes.right());
        if x1 > x0 {
            painter.rect_filled(
                Rect::from_x_y_ranges(x0..=x1, lanes.y_range()),
                0.0,
                Color32::from_rgba_unmultiplied(255, 255, 120, 24),
            );
            painter.vline(x0, lanes.y_range(), Stroke::new(1.0, Color32::YELLOW));
            painter.vline(x1, lanes.y_range(), Stroke::new(1.0, Color32::YELLOW));
        }
    }
    if let Some(s) = st.selected {
        if let Some(r) = slice_rect(s as usize) {
            painter.rect_stroke(
                r,
                1.0,
                Stroke::new(2.0, ui.visuals().strong_text_color()),
                StrokeKind::Outside,
            );
        }
        for &(from, to) in &st.links {
            if let (Some(a), Some(b)) = (slice_rect(from as usize), slice_rect(to as usize)) {
                let (p0, p1) = if a.center().y < b.center().y {
                    (a.left_bottom(), b.left_top())
                } else {
                    (a.left_top(), b.left_bottom())
                };
                paint::paint_flow(&painter, p0, p1, Color32::from_rgb(250, 220, 90));
            }
        }
    }
}

/// The label column: collapsible group headers (buttons) and lane names.
fn labels_ui(ui: &mut Ui, st: &mut TimelineState, labels: Rect, lanes_top: f32) {
    let mut child = ui.new_child(UiBuilder::new().max_rect(labels));
    child.set_clip_rect(labels);
    let mut toggle = None;
    for line in &st.lines {
        let y = lanes_top + line.y - st.scroll_y;
        if y + line.h < labels.top() || y > labels.bottom() {
            continue;
        }
        let x = labels.left() + 4.0 + line.indent as f32 * layout::INDENT;
        let r = Rect::from_min_size(Pos2::new(x, y), Vec2::new(labels.right() - x - 4.0, line.h));
        match line.kind {
            LineKind::Header { key, collapsed } => {
                // The open/closed triangle is painted: the bundled font has no arrows.
                let c = Pos2::new(r.left() + 5.0, r.center().y);
                let tri = if collapsed {
                    vec![
                        c + Vec2::new(-3.0, -5.0),
                        c + Vec2::new(4.0, 0.0),
                        c + Vec2::new(-3.0, 5.0),
                    ]
                } else {
                    vec![
                        c + Vec2::new(-5.0, -3.0),
                        c + Vec2::new(5.0, -3.0),
                        c + Vec2::new(0.0, 4.0),
                    ]
                };
                let color = child.visuals().text_color();
                child
                    .painter()
                    .add(Shape::convex_polygon(tri, color, Stroke::NONE));
                let br = Rect::from_min_max(Pos2::new(r.left() + 12.0, r.top()), r.max);
                let b = egui::Button::new(egui::RichText::new(&line.label).strong()).frame(false);
                if left_aligned(&mut child, br, b)
                    .on_hover_text("collapse / expand")
                    .clicked()
                {
                    toggle = Some(key);
                }
            }
            LineKind::Row { first: true, .. } | LineKind::Counter { .. } => {
                left_aligned(
                    &mut child,
                    r,
                    egui::Label::new(egui::RichText::new(&line.label).small()).truncate(),
                );
            }
            LineKind::Row { .. } => {}
        }
    }
    if let Some(k) = toggle {
        if !st.collapsed.remove(&k) {
            st.collapsed.insert(k);
        }
    }
}

/// Adds `widget` at the left of `rect`, vertically centred.
fn left_aligned(ui: &mut Ui, rect: Rect, widget: impl egui::Widget) -> egui::Response {
    let layout = egui::Layout::left_to_right(egui::Align::Center);
    ui.scope_builder(UiBuilder::new().max_rect(rect).layout(layout), |ui| {
        ui.add(widget)
    })
    .inner
}
