//! Colours by slice class and time formatting, shared by timeline and panels.

use egui::Color32;
use streamscope_core::{SliceClass, SliceKind};

/// The classes the legend shows, with their colours.
pub const LEGEND: [(&str, Color32); 7] = [
    ("compute", COMPUTE),
    ("communication", COMMUNICATION),
    ("comm waiting for peers", COMM_WAIT),
    ("memory", MEMORY),
    ("sync", SYNC),
    ("CUDA API", API),
    ("range / op", RANGE),
];

pub const COMPUTE: Color32 = Color32::from_rgb(76, 145, 214);
pub const COMMUNICATION: Color32 = Color32::from_rgb(232, 146, 46);
/// The part of an NCCL kernel spent waiting for the last rank to arrive.
pub const COMM_WAIT: Color32 = Color32::from_rgb(128, 84, 34);
pub const MEMORY: Color32 = Color32::from_rgb(160, 110, 200);
pub const SYNC: Color32 = Color32::from_rgb(220, 60, 60);
/// A folded block whose slices differ in class.
pub const MIXED: Color32 = Color32::from_rgb(140, 140, 150);
pub const API: Color32 = Color32::from_rgb(120, 140, 150);
pub const RANGE: Color32 = Color32::from_rgb(70, 160, 130);
pub const OTHER: Color32 = Color32::from_rgb(140, 140, 140);

/// Fill colour of a slice.
pub fn slice_color(kind: SliceKind, class: SliceClass) -> Color32 {
    if kind == SliceKind::Sync {
        return SYNC;
    }
    match class {
        SliceClass::Compute => COMPUTE,
        SliceClass::Communication => COMMUNICATION,
        SliceClass::Memory => MEMORY,
        SliceClass::None => match kind {
            SliceKind::Runtime | SliceKind::Driver => API,
            SliceKind::Range | SliceKind::CpuOp | SliceKind::GpuRange => RANGE,
            SliceKind::Kernel => COMPUTE,
            SliceKind::Memcpy | SliceKind::Memset => MEMORY,
            _ => OTHER,
        },
    }
}

/// A folded block: the first slice's colour, darkened, so folds read as
/// "many small things" next to real slices.
pub fn folded_color(c: Color32) -> Color32 {
    Color32::from_rgb(
        (c.r() as u16 * 2 / 3) as u8,
        (c.g() as u16 * 2 / 3) as u8,
        (c.b() as u16 * 2 / 3) as u8,
    )
}

/// "1.234 ms", "12.5 µs", "850 ns", "2.100 s".
pub fn fmt_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The "what is it" word for a track's folded block.
pub fn plural_kind(kind: SliceKind) -> &'static str {
    match kind {
        SliceKind::Kernel => "kernels",
        SliceKind::Memcpy => "copies",
        SliceKind::Memset => "memsets",
        SliceKind::Runtime | SliceKind::Driver => "calls",
        SliceKind::Sync => "syncs",
        _ => "slices",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(fmt_ns(850.0), "850 ns");
        assert_eq!(fmt_ns(12_500.0), "12.50 µs");
        assert_eq!(fmt_ns(1_234_000.0), "1.234 ms");
        assert_eq!(fmt_ns(2.1e9), "2.100 s");
    }

    #[test]
    fn sync_beats_class() {
        assert_eq!(slice_color(SliceKind::Sync, SliceClass::None), SYNC);
        assert_eq!(
            slice_color(SliceKind::Kernel, SliceClass::Communication),
            COMMUNICATION
        );
    }
}
