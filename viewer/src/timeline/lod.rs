//! Level of detail: the visible window of a row, with runs of slices
//! narrower than [`MIN_SLICE_PX`] folded into one "N kernels" item.
//!
//! As in Tracy, the window is found by binary search and a fold skips ahead
//! with another binary search, so the work per row is bounded by the number
//! of items drawn (about width / MIN_SLICE_PX), never by the row's length.

use streamscope_core::Slices;

use super::index::Row;

/// Slices narrower than this (in points) are folded with their neighbours.
pub const MIN_SLICE_PX: f64 = 3.0;

/// Maps trace time to screen x. Times are relative to `origin_ns` in f64 so
/// that epoch-based clocks (1.7e18 ns) keep nanosecond precision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeMap {
    pub origin_ns: i64,
    /// Visible window, relative to `origin_ns`.
    pub start_rel_ns: f64,
    pub ns_per_px: f64,
    /// Screen x of `start_rel_ns`.
    pub left_px: f64,
    pub width_px: f64,
}

/// `t_ns - origin_ns` as f64, exact in i128 first, so timestamps anywhere
/// in i64 (epoch-based Kineto µs, negative after alignment) never overflow.
#[inline]
pub fn rel_ns(t_ns: i64, origin_ns: i64) -> f64 {
    (t_ns as i128 - origin_ns as i128) as f64
}

/// `origin_ns + rel_ns`, rounded and saturated to i64 (NaN gives the origin).
#[inline]
pub fn abs_ns(origin_ns: i64, rel_ns: f64) -> i64 {
    let r = if rel_ns.is_finite() {
        rel_ns.round() as i128
    } else {
        0
    };
    (origin_ns as i128 + r).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl TimeMap {
    #[inline]
    pub fn x(&self, t_ns: i64) -> f64 {
        self.left_px + (rel_ns(t_ns, self.origin_ns) - self.start_rel_ns) / self.ns_per_px
    }

    /// Absolute time at screen x.
    #[inline]
    pub fn t(&self, x: f64) -> i64 {
        abs_ns(
            self.origin_ns,
            self.start_rel_ns + (x - self.left_px) * self.ns_per_px,
        )
    }

    pub fn end_rel_ns(&self) -> f64 {
        self.start_rel_ns + self.width_px * self.ns_per_px
    }

    /// Visible window in absolute ns.
    pub fn window_ns(&self) -> (i64, i64) {
        (
            abs_ns(self.origin_ns, self.start_rel_ns.floor()),
            abs_ns(self.origin_ns, self.end_rel_ns().ceil()),
        )
    }
}

/// One drawable item of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item {
    /// A slice wide enough to draw alone.
    Slice { slice: u32, x0: f32, x1: f32 },
    /// Row positions `first..=last` folded into one block. The first,
    /// middle and last slices stand for its content (label and colour)
    /// without visiting every slice, so a frame stays independent of the
    /// slice count.
    Folded {
        first_slice: u32,
        mid_slice: u32,
        last_slice: u32,
        count: u32,
        x0: f32,
        x1: f32,
    },
}

/// First position in `lo..hi` where `pred` turns false (pred must be monotone).
#[inline]
pub(super) fn partition_point(mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl Item {
    /// The kind every sampled slice of a folded block shares, if they agree.
    pub fn folded_kind(&self, slices: &Slices) -> Option<streamscope_core::SliceKind> {
        match *self {
            Item::Folded {
                first_slice,
                mid_slice,
                last_slice,
                ..
            } => {
                let k = slices.kind()[first_slice as usize];
                (slices.kind()[mid_slice as usize] == k && slices.kind()[last_slice as usize] == k)
                    .then_some(k)
            }
            Item::Slice { slice, .. } => Some(slices.kind()[slice as usize]),
        }
    }
}

/// Appends the items of `row` visible through `map` to `out`.
pub fn fold_row(slices: &Slices, row: &Row, map: &TimeMap, out: &mut Vec<Item>) {
    let n = row.len();
    if n == 0 {
        return;
    }
    let (t0, t1) = map.window_ns();
    let start = |p: usize| slices.start_ns()[row.slice(p)];
    let end = |p: usize| {
        let s = row.slice(p);
        slices.start_ns()[s].saturating_add(slices.dur_ns()[s])
    };
    let min_ns = MIN_SLICE_PX * map.ns_per_px;
    // First slice ending inside or after the window (ends increase along a row).
    let mut p = partition_point(0, n, |q| end(q) < t0);
    let stop = partition_point(p, n, |q| start(q) <= t1);
    while p < stop {
        let (s0, e0) = (start(p), end(p));
        if rel_ns(e0, s0) >= min_ns {
            out.push(Item::Slice {
                slice: row.slice(p) as u32,
                x0: map.x(s0) as f32,
                x1: map.x(e0) as f32,
            });
            p += 1;
            continue;
        }
        // Fold: absorb every slice ending within MIN_SLICE_PX of the group's
        // end, then the next one too if it is narrow and close; each step
        // grows the group by at least MIN_SLICE_PX.
        let first = p;
        let mut group_end = e0;
        loop {
            let reach = group_end.saturating_add(min_ns.ceil() as i64);
            let q = partition_point(p + 1, stop, |k| end(k) <= reach);
            if q > p + 1 {
                group_end = group_end.max(end(q - 1));
            }
            p = q - 1;
            if q >= stop {
                p = stop - 1;
                break;
            }
            let (sq, eq) = (start(q), end(q));
            if sq <= group_end.saturating_add(min_ns.ceil() as i64) && rel_ns(eq, sq) < min_ns {
                group_end = group_end.max(eq);
                p = q;
            } else {
                break;
            }
        }
        let count = (p + 1 - first) as u32;
        let x0 = map.x(s0) as f32;
        let x1 = (map.x(group_end) as f32).max(x0 + 1.0);
        if count == 1 {
            out.push(Item::Slice {
                slice: row.slice(first) as u32,
                x0,
                x1,
            });
        } else {
            out.push(Item::Folded {
                first_slice: row.slice(first) as u32,
                mid_slice: row.slice((first + p) / 2) as u32,
                last_slice: row.slice(p) as u32,
                count,
                x0,
                x1,
            });
        }
        p += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::index::RowSlices;
    use streamscope_core::TraceBuilder;
    use streamscope_core::{NewSlice, Process, SliceKind, Trace, TrackKind};

    fn trace_with(slices: &[(i64, i64)]) -> Trace {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let d0 = t.add_device(streamscope_core::Device {
            process: p,
            ..Default::default()
        });
        let st = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d0,
                stream: 7,
            },
            "s",
        );
        let n = t.intern("k");
        for &(s, d) in slices {
            t.push_slice(NewSlice::new(st, SliceKind::Kernel, n, s, d));
        }
        t.finish()
    }

    fn map(start: f64, ns_per_px: f64, width: f64) -> TimeMap {
        TimeMap {
            origin_ns: 0,
            start_rel_ns: start,
            ns_per_px,
            left_px: 0.0,
            width_px: width,
        }
    }

    #[test]
    fn wide_slices_are_kept_and_off_screen_culled() {
        let t = trace_with(&[(0, 100), (200, 100), (1000, 100)]);
        let row = Row {
            track: t.slices().track()[0],
            depth: 0,
            slices: RowSlices::Range(0..3),
        };
        let mut out = Vec::new();
        fold_row(t.slices(), &row, &map(150.0, 1.0, 500.0), &mut out);
        assert_eq!(
            out,
            vec![Item::Slice {
                slice: 1,
                x0: 50.0,
                x1: 150.0
            }]
        );
    }

    #[test]
    fn many_thin_slices_fold_into_few_items() {
        // 100k slices of 1 ns every 2 ns seen at 1000 ns per px: all fold.
        let v: Vec<(i64, i64)> = (0..100_000).map(|i| (i * 2, 1)).collect();
        let t = trace_with(&v);
        let row = Row {
            track: t.slices().track()[0],
            depth: 0,
            slices: RowSlices::Range(0..100_000),
        };
        let mut out = Vec::new();
        fold_row(t.slices(), &row, &map(0.0, 1000.0, 200.0), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        match out[0] {
            Item::Folded {
                count, first_slice, ..
            } => {
                assert_eq!(count, 100_000);
                assert_eq!(first_slice, 0);
            }
            other => panic!("expected a fold, got {other:?}"),
        }
    }

    #[test]
    fn gaps_wider_than_the_threshold_split_folds() {
        // Two bursts of thin slices 10 px apart, then one wide slice.
        let mut v: Vec<(i64, i64)> = (0..50).map(|i| (i * 2, 1)).collect();
        v.extend((0..50).map(|i| (2000 + i * 2, 1)));
        v.push((5000, 1000));
        let t = trace_with(&v);
        let row = Row {
            track: t.slices().track()[0],
            depth: 0,
            slices: RowSlices::Range(0..101),
        };
        let mut out = Vec::new();
        fold_row(t.slices(), &row, &map(0.0, 100.0, 100.0), &mut out);
        let counts: Vec<u32> = out
            .iter()
            .map(|it| match it {
                Item::Folded { count, .. } => *count,
                Item::Slice { .. } => 1,
            })
            .collect();
        assert_eq!(counts, vec![50, 50, 1]);
    }
}
