//! Timeline input, as in Perfetto and Tracy: wheel and W/S zoom around the
//! pointer, drag, horizontal scroll and A/D/←/→ pan, ↑/↓ and wheel over the labels scroll,
//! shift-drag or right-drag selects a range, click selects a slice (a click
//! on a folded block zooms into it), F zooms to the selection.

use egui::{Key, PointerButton, Rect, Response, Ui};
use streamscope_core::SliceId;

use super::layout::LineKind;
use super::lod::Item;
use super::TimelineState;
use crate::model::Model;

/// Zoom factor per wheel point (exponential, so zoom feels uniform).
const WHEEL_ZOOM_PER_POINT: f64 = 0.0025;
const KEY_ZOOM: f64 = 0.8;
const KEY_PAN_FRAC: f64 = 0.1;
const KEY_SCROLL_PT: f32 = 40.0;

pub(super) fn handle(
    ui: &Ui,
    model: &Model,
    st: &mut TimelineState,
    response: &Response,
    lanes: Rect,
    label_hover: bool,
) {
    let index = &model.index;
    let width = lanes.width().max(1.0) as f64;
    let pointer = ui.input(|i| i.pointer.hover_pos());
    let frac_at = |x: f32| ((x - lanes.left()) as f64 / width).clamp(0.0, 1.0);

    // Wheel: zoom over the lanes, scroll over the labels.
    let (scroll, zoom) = ui.input(|i| (i.smooth_scroll_delta, i.zoom_delta()));
    if response.hovered() {
        let frac = pointer.map(|p| frac_at(p.x)).unwrap_or(0.5);
        if scroll.y != 0.0 {
            st.zoom_by(
                index,
                (-(scroll.y as f64) * WHEEL_ZOOM_PER_POINT).exp(),
                frac,
            );
        }
        // Horizontal scrolling (trackpad, or shift + wheel) pans.
        if scroll.x != 0.0 {
            st.pan_by(index, -(scroll.x as f64) / width);
        }
        if zoom != 1.0 {
            st.zoom_by(index, 1.0 / zoom as f64, frac);
        }
    } else if label_hover && scroll.y != 0.0 {
        st.scroll_y -= scroll.y;
    }

    // Keys, unless a text field has focus.
    if !ui.ctx().egui_wants_keyboard_input() {
        let frac = pointer
            .filter(|p| lanes.contains(*p))
            .map(|p| frac_at(p.x))
            .unwrap_or(0.5);
        ui.input(|i| {
            if i.key_pressed(Key::W) {
                st.zoom_by(index, KEY_ZOOM, frac);
            }
            if i.key_pressed(Key::S) {
                st.zoom_by(index, 1.0 / KEY_ZOOM, frac);
            }
            if i.key_pressed(Key::A) || i.key_pressed(Key::ArrowLeft) {
                st.pan_by(index, -KEY_PAN_FRAC);
            }
            if i.key_pressed(Key::D) || i.key_pressed(Key::ArrowRight) {
                st.pan_by(index, KEY_PAN_FRAC);
            }
            if i.key_pressed(Key::ArrowUp) {
                st.scroll_y -= KEY_SCROLL_PT;
            }
            if i.key_pressed(Key::ArrowDown) {
                st.scroll_y += KEY_SCROLL_PT;
            }
            if i.key_pressed(Key::F) {
                if let Some(sel) = st.selected.map(|s| s as usize) {
                    let sl = model.trace.slices();
                    st.zoom_to(
                        index,
                        sl.start_ns()[sel],
                        sl.end_ns(SliceId::from_index(sel)),
                    );
                }
            }
            if i.key_pressed(Key::Escape) {
                st.range_ns = None;
                st.highlight = None;
            }
        });
    }

    // Drag: pan, or select a range with shift / the secondary button.
    let map = st.time_map(index, lanes);
    let shift = ui.input(|i| i.modifiers.shift);
    let ranging = response.dragged_by(PointerButton::Secondary)
        || (shift && response.dragged_by(PointerButton::Primary));
    if response.drag_started() && (shift || response.dragged_by(PointerButton::Secondary)) {
        if let Some(p) = response.interact_pointer_pos() {
            let start = p - response.drag_delta();
            st.drag_range_from = Some(map.t(start.x as f64));
        }
    }
    if ranging {
        if let (Some(from), Some(p)) = (st.drag_range_from, response.interact_pointer_pos()) {
            let to = map.t(p.x as f64);
            st.range_ns = Some((from.min(to), from.max(to)));
        }
    } else if response.dragged_by(PointerButton::Primary) {
        let d = response.drag_delta();
        st.view_start_rel_ns -= d.x as f64 * map.ns_per_px;
        st.scroll_y -= d.y;
        st.clamp(index);
    }
    if response.drag_stopped() {
        st.drag_range_from = None;
    }

    if response.clicked() {
        if let Some(p) = response.interact_pointer_pos() {
            click(model, st, p, lanes);
        }
    }
}

/// The item under `p`, among those drawn at the last frame.
pub(super) fn hit_item(st: &TimelineState, p: egui::Pos2, lanes: Rect) -> Option<Item> {
    let y_rel = p.y - lanes.top() + st.scroll_y;
    let line = st
        .lines
        .iter()
        .find(|l| y_rel >= l.y && y_rel < l.y + l.h)?;
    let LineKind::Row { row, .. } = line.kind else {
        return None;
    };
    let &(_, a, b, _) = st.row_items.iter().find(|r| r.0 == row)?;
    st.items[a as usize..b as usize]
        .iter()
        .find(|it| {
            let (x0, x1) = match it {
                Item::Slice { x0, x1, .. } | Item::Folded { x0, x1, .. } => (*x0, *x1),
            };
            p.x >= x0 - 1.0 && p.x <= x1 + 1.0
        })
        .copied()
}

/// Click: select a slice, zoom into a fold, or clear the selection.
fn click(model: &Model, st: &mut TimelineState, p: egui::Pos2, lanes: Rect) {
    match hit_item(st, p, lanes) {
        Some(Item::Slice { slice, .. }) => st.select(model, Some(slice)),
        Some(Item::Folded { x0, x1, .. }) => {
            let map = st.time_map(&model.index, lanes);
            let (t0, t1) = (map.t(x0 as f64), map.t(x1 as f64));
            st.zoom_to(&model.index, t0, t1);
        }
        None => st.select(model, None),
    }
}
