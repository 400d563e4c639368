//! Turning folded items into pixels: every rectangle of a frame goes into one
//! [`Mesh`] (one shape, cheap to tessellate); text only where it fits.

use egui::{Align2, Color32, FontId, Mesh, Painter, Pos2, Rect, Stroke, Vec2};
use streamscope_core::Trace;

use super::coverage::{Coverage, SLOTS, SLOT_COLORS};
use super::index::{Row, TimelineIndex};
use super::lod::{Item, TimeMap, MIN_SLICE_PX};
use crate::style::{fmt_ns, folded_color, plural_kind, slice_color};

/// Approximate width of one character of the slice font, to truncate names
/// without laying them out first.
const CHAR_PX: f32 = 6.2;
/// Slices narrower than this get no text.
const MIN_TEXT_PX: f32 = 28.0;
pub const SLICE_FONT: f32 = 10.5;

/// Clamps x into the visible range (plus a margin) so f32 stays precise.
#[inline]
fn clamp_x(x: f32, left: f32, right: f32) -> f32 {
    x.clamp(left - 2.0, right + 2.0)
}

/// Fill of slice `s`: by class, and host calls that block on the GPU
/// (cudaStreamSynchronize, ...) in the sync colour like sync records.
#[inline]
pub fn color_of(trace: &Trace, index: &TimelineIndex, s: usize) -> Color32 {
    let sl = trace.slices();
    if index
        .sync_name
        .get(sl.name()[s].index())
        .copied()
        .unwrap_or(false)
    {
        return crate::style::SYNC;
    }
    slice_color(sl.kind()[s], sl.class()[s])
}

/// Adds the rectangles of one row's items to `mesh`.
#[allow(clippy::too_many_arguments)]
pub fn mesh_items(
    mesh: &mut Mesh,
    trace: &Trace,
    index: &TimelineIndex,
    items: &[Item],
    y: f32,
    h: f32,
    left: f32,
    right: f32,
) {
    for it in items {
        let (x0, x1, color) = match *it {
            Item::Slice { slice, x0, x1 } => (x0, x1, color_of(trace, index, slice as usize)),
            Item::Folded {
                first_slice,
                mid_slice,
                last_slice,
                x0,
                x1,
                ..
            } => {
                // The colour two of the three samples share, else "mixed".
                let [a, b, c] = [first_slice, mid_slice, last_slice]
                    .map(|s| color_of(trace, index, s as usize));
                let color = if a == b || a == c {
                    a
                } else if b == c {
                    b
                } else {
                    crate::style::MIXED
                };
                (x0, x1, folded_color(color))
            }
        };
        slice_rect(mesh, x0, x1, y, h, left, right, color);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn slice_rect(
    mesh: &mut Mesh,
    x0: f32,
    x1: f32,
    y: f32,
    h: f32,
    left: f32,
    right: f32,
    color: Color32,
) {
    let x0 = clamp_x(x0, left, right);
    let x1 = clamp_x(x1, left, right).max(x0 + 1.0);
    // A 1-pt gap at the right edge separates neighbours when wide enough.
    let x1v = if x1 - x0 > 3.0 { x1 - 1.0 } else { x1 };
    mesh.add_colored_rect(
        Rect::from_min_max(Pos2::new(x0, y + 1.0), Pos2::new(x1v, y + h - 1.0)),
        color,
    );
}

/// Pixel heights of the slots of one column, stacked bottom-up: the
/// cumulative shares are rounded, so the heights add up to the busy share
/// of `inner`; a slot present in the column gets at least one pixel while
/// room is left.
pub fn stack_heights(covered: &[f64; SLOTS], col_ns: f64, inner: u8) -> [u8; SLOTS] {
    let mut out = [0u8; SLOTS];
    if col_ns.is_nan() || col_ns <= 0.0 {
        return out;
    }
    let mut cum = 0.0;
    let mut prev = 0u8;
    for k in 0..SLOTS {
        let f = covered[k] / col_ns;
        if f.is_nan() || f <= 0.0 {
            continue;
        }
        cum += f;
        let px = (cum.min(1.0) * inner as f64).round() as u8;
        let mut hk = px.saturating_sub(prev);
        if hk == 0 && prev < inner {
            hk = 1;
        }
        out[k] = hk;
        prev = prev.saturating_add(hk).min(inner);
    }
    out
}

/// A GPU row: slices at least [`MIN_SLICE_PX`] wide as slices, everything
/// narrower (folded runs, slivers) as one-pixel coverage columns stacked by
/// class from the row's pyramid, neighbouring equal columns merged into one
/// quad per class. Returns the number of coverage columns.
#[allow(clippy::too_many_arguments)]
pub fn mesh_row_coverage(
    mesh: &mut Mesh,
    trace: &Trace,
    index: &TimelineIndex,
    waits: &std::collections::HashMap<u32, f32>,
    cov: &Coverage,
    row: &Row,
    items: &[Item],
    map: &TimeMap,
    y: f32,
    h: f32,
    left: f32,
    right: f32,
) -> usize {
    let npp = map.ns_per_px;
    let mut cols = cov.columns(trace.slices(), row, npp);
    // Time at screen x, relative to the pyramid's origin.
    let off = cov.rel_f64(map.origin_ns) + map.start_rel_ns;
    let at = |x: f32| off + (x as f64 - map.left_px) * npp;
    let inner = (h - 2.0).clamp(1.0, 255.0) as u8;
    let base = y + h - 1.0;
    let (lo, hi) = (left.floor(), right.ceil());
    let mut columns = 0usize;
    let mut next_col = lo;
    // Current run: start x, end x, heights.
    let mut run: Option<(f32, f32, [u8; SLOTS])> = None;
    for it in items {
        let (x0, x1) = match *it {
            Item::Slice { x0, x1, .. } if x1 - x0 >= MIN_SLICE_PX as f32 => continue,
            Item::Slice { x0, x1, .. } | Item::Folded { x0, x1, .. } => (x0, x1),
        };
        let c1 = x1.ceil().min(hi);
        let mut x = x0.floor().max(next_col);
        while x < c1 {
            let a = at(x);
            let hs = stack_heights(&cols.covered(a, a + npp), npp, inner);
            match &mut run {
                Some((_, end, rh)) if *end == x && *rh == hs => *end = x + 1.0,
                _ => {
                    if let Some(r) = run.take() {
                        stacked_cell(mesh, r, base);
                    }
                    run = Some((x, x + 1.0, hs));
                }
            }
            columns += 1;
            x += 1.0;
        }
        next_col = next_col.max(c1);
    }
    if let Some(r) = run {
        stacked_cell(mesh, r, base);
    }
    // Wide slices on top.
    for it in items {
        if let Item::Slice { slice, x0, x1 } = *it {
            if x1 - x0 >= MIN_SLICE_PX as f32 {
                let color = color_of(trace, index, slice as usize);
                slice_rect(mesh, x0, x1, y, h, left, right, color);
                // An NCCL kernel's wait for its peers, drawn apart.
                if let Some(&w) = waits.get(&slice) {
                    let xw = x0 + (x1 - x0) * w;
                    if xw - x0 >= 1.0 {
                        slice_rect(mesh, x0, xw, y, h, left, right, crate::style::COMM_WAIT);
                    }
                }
            }
        }
    }
    columns
}

/// Pixel columns per cell of a rank's summary strip.
pub const SUMMARY_COL_PX: f32 = 3.0;

/// A run of equal summary cells: x from, x to, stacked heights per slot.
pub type SummaryRun = (f32, f32, [u8; SLOTS]);

/// A collapsed rank's summary strip: per cell of [`SUMMARY_COL_PX`]
/// columns, the busiest share of each class over the rank's GPU rows
/// (streams), stacked like a coverage column (scaled down to the cell when
/// the classes of different streams add up past it): an estimate of the
/// union, one sequential column reader per row. Equal neighbours merged.
#[allow(clippy::too_many_arguments)]
pub fn rank_summary(
    trace: &Trace,
    index: &TimelineIndex,
    rows: &[u32],
    map: &TimeMap,
    inner: u8,
    left: f32,
    right: f32,
) -> Vec<SummaryRun> {
    let col_ns = map.ns_per_px * SUMMARY_COL_PX as f64;
    let mut out = Vec::new();
    if rows.is_empty() || col_ns.is_nan() || col_ns <= 0.0 {
        return out;
    }
    let mut readers: Vec<(f64, super::coverage::Columns<'_>)> = rows
        .iter()
        .filter_map(|&r| {
            let row = index.rows.get(r as usize)?;
            let cov = index.coverage.get(r as usize)?.as_ref()?;
            let off = cov.rel_f64(map.origin_ns) + map.start_rel_ns;
            Some((off, cov.columns(trace.slices(), row, col_ns)))
        })
        .collect();
    let mut run: Option<SummaryRun> = None;
    let mut x = left.floor();
    while x < right {
        let mut most = [0f64; SLOTS];
        for (off, cols) in readers.iter_mut() {
            let a = *off + (x as f64 - map.left_px) * map.ns_per_px;
            let c = cols.covered(a, a + col_ns);
            for k in 0..SLOTS {
                most[k] = most[k].max(c[k]);
            }
        }
        let sum: f64 = most.iter().sum();
        if sum > col_ns {
            for m in &mut most {
                *m *= col_ns / sum;
            }
        }
        let hs = stack_heights(&most, col_ns, inner);
        match &mut run {
            Some((_, end, rh)) if *end == x && *rh == hs => *end = x + SUMMARY_COL_PX,
            _ => {
                out.extend(run.take());
                run = Some((x, x + SUMMARY_COL_PX, hs));
            }
        }
        x += SUMMARY_COL_PX;
    }
    out.extend(run);
    out
}

/// Paints summary runs in a strip whose bottom is `base`.
pub fn mesh_summary_runs(mesh: &mut Mesh, runs: &[SummaryRun], base: f32) {
    for &r in runs {
        stacked_cell(mesh, r, base);
    }
}

/// One run of equal columns: its slots' heights stacked up from `base`
/// in the slot colours.
fn stacked_cell(mesh: &mut Mesh, (x0, x1, hs): SummaryRun, base: f32) {
    let mut bottom = base;
    for k in 0..SLOTS {
        if hs[k] > 0 {
            let top = bottom - hs[k] as f32;
            mesh.add_colored_rect(
                Rect::from_min_max(Pos2::new(x0, top), Pos2::new(x1, bottom)),
                SLOT_COLORS[k],
            );
            bottom = top;
        }
    }
}

fn truncate(text: &str, width_px: f32) -> Option<String> {
    let max_chars = ((width_px - 4.0) / CHAR_PX).floor() as usize;
    if max_chars < 2 {
        return None;
    }
    if text.chars().count() <= max_chars {
        return Some(text.to_string());
    }
    let mut s: String = text.chars().take(max_chars - 1).collect();
    s.push('…');
    Some(s)
}

/// Names on the items wide enough to hold them (folds only when
/// `fold_labels`: coverage rows show what a fold holds by colour).
#[allow(clippy::too_many_arguments)]
pub fn label_items(
    painter: &Painter,
    trace: &Trace,
    items: &[Item],
    fold_labels: bool,
    y: f32,
    h: f32,
    left: f32,
    right: f32,
) {
    let sl = trace.slices();
    let font = FontId::proportional(SLICE_FONT);
    for it in items {
        let (x0, x1, text) = match *it {
            Item::Slice { slice, x0, x1 } if x1 - x0 >= MIN_TEXT_PX => {
                (x0, x1, trace.str(sl.name()[slice as usize]).to_string())
            }
            Item::Folded { count, x0, x1, .. } if fold_labels && x1 - x0 >= MIN_TEXT_PX => (
                x0,
                x1,
                format!(
                    "{count} {}",
                    it.folded_kind(sl).map_or("slices", plural_kind)
                ),
            ),
            _ => continue,
        };
        let x0 = clamp_x(x0, left, right);
        let x1 = clamp_x(x1, left, right);
        if let Some(t) = truncate(&text, x1 - x0) {
            painter.text(
                Pos2::new(x0 + 2.0, y + h / 2.0),
                Align2::LEFT_CENTER,
                t,
                font.clone(),
                Color32::WHITE,
            );
        }
    }
}

/// A counter track as a step area: the mean over each 2-px column, from
/// the prefix integrals (two binary searches), so the cost is independent
/// of the sample count.
pub fn mesh_counter(
    mesh: &mut Mesh,
    trace: &Trace,
    index: &TimelineIndex,
    track: u32,
    map: &TimeMap,
    rect: Rect,
) {
    let Some(samples) = index.counter_samples.get(track as usize) else {
        return;
    };
    let (max, _) = super::counters::scale(
        trace,
        index,
        streamscope_core::TrackId::from_index(track as usize),
    );
    if samples.is_empty() || max <= 0.0 {
        return;
    }
    let color = Color32::from_rgb(90, 170, 110);
    let envelope = Color32::from_rgba_unmultiplied(90, 170, 110, 70);
    let step = 2.0f32;
    let inner = (rect.height() - 2.0).max(1.0);
    let px_of = |v: f64| ((v / max).clamp(0.0, 1.0) as f32 * inner).round();
    let mut x = rect.left();
    // Runs of equal pixel height: (start x, height in px).
    let mut run: Option<(f32, f32)> = None;
    // Envelope runs: (start x, min px, max px).
    let mut env: Option<(f32, f32, f32)> = None;
    let Some(mut cols) = super::counters::Columns::new(trace, index, track as usize) else {
        return;
    };
    while x < rect.right() {
        let (t0, t1) = (map.t(x as f64), map.t((x + step) as f64));
        // Time-weighted mean over the column (not the peak: an estimate
        // that touches the maximum once per column would read as always
        // full), and the min/max band of its samples.
        let (v, minmax) = cols.column(t0, t1);
        let px = px_of(v);
        match run {
            Some((_, rp)) if rp == px => {}
            Some((rx, rp)) => {
                push_bar(mesh, rect, rx, x, rp, color);
                run = Some((x, px));
            }
            None => run = Some((x, px)),
        }
        // Zoomed out, several samples share the column: their min–max band.
        let band = minmax
            .map(|(lo, hi)| (px_of(lo), px_of(hi)))
            .filter(|(lo, hi)| hi > lo);
        match (env, band) {
            (Some((_, a, b)), Some((lo, hi))) if a == lo && b == hi => {}
            (Some((ex, a, b)), _) => {
                push_band(mesh, rect, ex, x, a, b, envelope);
                env = band.map(|(lo, hi)| (x, lo, hi));
            }
            (None, _) => env = band.map(|(lo, hi)| (x, lo, hi)),
        }
        x += step;
    }
    if let Some((rx, rp)) = run {
        push_bar(mesh, rect, rx, rect.right(), rp, color);
    }
    if let Some((ex, a, b)) = env {
        push_band(mesh, rect, ex, rect.right(), a, b, envelope);
    }
    // A memory lane's peak: a red line over the lane and a tick above it.
    if let Some(ts) = index.counter_peak.get(track as usize).copied().flatten() {
        let x = map.x(ts) as f32;
        if x >= rect.left() && x <= rect.right() {
            let red = Color32::from_rgb(200, 50, 50);
            mesh.add_colored_rect(
                Rect::from_min_max(
                    Pos2::new(x - 1.0, rect.top()),
                    Pos2::new(x + 1.0, rect.bottom()),
                ),
                red,
            );
            mesh.add_colored_rect(
                Rect::from_min_max(
                    Pos2::new(x - 4.0, rect.top()),
                    Pos2::new(x + 4.0, rect.top() + 3.0),
                ),
                red,
            );
        }
    }
}

fn push_band(mesh: &mut Mesh, rect: Rect, x0: f32, x1: f32, lo: f32, hi: f32, color: Color32) {
    mesh.add_colored_rect(
        Rect::from_min_max(
            Pos2::new(x0, rect.bottom() - hi),
            Pos2::new(x1, rect.bottom() - lo),
        ),
        color,
    );
}

fn push_bar(mesh: &mut Mesh, rect: Rect, x0: f32, x1: f32, px: f32, color: Color32) {
    if px <= 0.0 {
        return;
    }
    let top = rect.bottom() - px;
    mesh.add_colored_rect(
        Rect::from_min_max(Pos2::new(x0, top), Pos2::new(x1, rect.bottom())),
        color,
    );
}

/// A "nice" tick step (1, 2, 5 × 10^k ns) at least `min_ns` long.
pub fn tick_step_ns(min_ns: f64) -> f64 {
    let mut step = 1.0;
    loop {
        for m in [1.0, 2.0, 5.0] {
            if step * m >= min_ns {
                return step * m;
            }
        }
        step *= 10.0;
    }
}

/// Time ruler: ticks with times relative to the trace start, and grid lines
/// down through `grid` (the lane area).
pub fn paint_ruler(painter: &Painter, map: &TimeMap, rect: Rect, grid: Rect, text: Color32) {
    let step = tick_step_ns(map.ns_per_px * 110.0);
    let first = (map.start_rel_ns / step).floor() * step;
    let font = FontId::proportional(11.0);
    let line = Stroke::new(1.0, text.gamma_multiply(0.25));
    let mut t = first;
    let end = map.end_rel_ns();
    while t <= end {
        let x = (map.left_px + (t - map.start_rel_ns) / map.ns_per_px) as f32;
        if x >= rect.left() {
            painter.vline(
                x,
                rect.y_range(),
                Stroke::new(1.0, text.gamma_multiply(0.6)),
            );
            painter.vline(x, grid.y_range(), line);
            painter.text(
                Pos2::new(x + 3.0, rect.top() + 2.0),
                Align2::LEFT_TOP,
                fmt_ns(t),
                font.clone(),
                text,
            );
        }
        t += step;
    }
}

/// Arrow from the launch call to its GPU work.
pub fn paint_flow(painter: &Painter, from: Pos2, to: Pos2, color: Color32) {
    let stroke = Stroke::new(1.5, color);
    painter.line_segment([from, to], stroke);
    let dir = (to - from).normalized();
    if dir.is_finite() {
        let back = -dir * 8.0;
        let side = Vec2::new(-dir.y, dir.x) * 4.0;
        painter.line_segment([to, to + back + side], stroke);
        painter.line_segment([to, to + back - side], stroke);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step_ns(3.0), 5.0);
        assert_eq!(tick_step_ns(120.0), 200.0);
        assert_eq!(tick_step_ns(1_000_001.0), 2_000_000.0);
    }

    #[test]
    fn names_truncate_to_width() {
        assert_eq!(
            truncate("ampere_sgemm", 100.0).as_deref(),
            Some("ampere_sgemm")
        );
        assert_eq!(truncate("ampere_sgemm", 40.0).as_deref(), Some("ampe…"));
        assert_eq!(truncate("ampere_sgemm", 10.0), None);
    }
}
