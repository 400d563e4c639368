//! Utilization when zoomed out: per GPU row, a multi-resolution summary of
//! how much of each stretch of time its slices cover, by class (compute,
//! communication, memory, other; the rest is idle).
//!
//! The summary is a pyramid of buckets. The finest level has about one
//! bucket per 8 slices of the row (a power of two, so at most one per 4),
//! each coarser level halves the bucket count; a bucket stores the share of
//! its time covered by each class as four `u16` (8 bytes). The whole pyramid
//! costs at most 2 × 8 / 4 = 4 bytes per slice, a tenth of the slice columns.
//!
//! A frame reads one level per row, the one whose buckets are just narrower
//! than a pixel column, so a column costs two or three buckets whatever the
//! slice count. Columns narrower than a finest bucket (zoomed in far enough
//! that a column holds a few slices) are computed from the slices
//! themselves, with a cap on the slices visited per column.

use streamscope_core::SliceId;
use streamscope_core::{SliceClass, SliceKind, Slices};

use super::index::Row;
use super::lod::partition_point;
use crate::style;

/// Coverage slots, bottom to top in a column.
pub const SLOTS: usize = 4;
/// Slot colours: the class colours of `style`.
pub const SLOT_COLORS: [egui::Color32; SLOTS] = [
    style::COMPUTE,
    style::COMMUNICATION,
    style::MEMORY,
    style::OTHER,
];
/// Slot names, for hover text.
pub const SLOT_NAMES: [&str; SLOTS] = ["compute", "communication", "memory", "other"];

/// Full share of a bucket in its `u16` encoding.
const FULL: f64 = u16::MAX as f64;
/// Target slices per finest bucket (rounded to a power-of-two bucket count).
const SLICES_PER_BUCKET: usize = 8;
/// Most slices visited for one column before falling back to the finest
/// level (a burst denser than the finest level).
const EXACT_CAP: usize = 64;

/// The slot a slice counts in: the slot whose colour `style::slice_color`
/// gives it, so coverage and slices agree on colours.
#[inline]
pub fn slot_of(kind: SliceKind, class: SliceClass) -> usize {
    let c = style::slice_color(kind, class);
    if c == style::COMPUTE {
        0
    } else if c == style::COMMUNICATION {
        1
    } else if c == style::MEMORY {
        2
    } else {
        3
    }
}

/// The coverage pyramid of one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    /// Start of bucket 0 of every level (the row's first start), absolute ns.
    origin_ns: i64,
    /// Width of a finest bucket in ns (at least 1).
    bucket_ns: i64,
    /// `levels[l]`: buckets of `bucket_ns << l` ns, finest first; the last
    /// level has one bucket.
    levels: Vec<Vec<[u16; SLOTS]>>,
}

/// Shares of an interval's time per slot (each in 0..=1; their sum is the
/// busy share, the rest is idle).
pub type Shares = [f64; SLOTS];

impl Coverage {
    /// Builds the pyramid of `row`; `None` for an empty row. Costs one pass
    /// over the row's slices plus the buckets they span.
    pub fn build(slices: &Slices, row: &Row) -> Option<Coverage> {
        let n = row.len();
        if n == 0 {
            return None;
        }
        let origin = slices.start_ns()[row.slice(0)];
        let mut end = origin;
        for p in 0..n {
            end = end.max(slices.end_ns(SliceId::from_index(row.slice(p))));
        }
        let span = (end as i128 - origin as i128).max(1);
        let target = (n / SLICES_PER_BUCKET).max(1).next_power_of_two() as i128;
        let bucket_ns = ((span + target - 1) / target).clamp(1, i64::MAX as i128);
        let count = ((span + bucket_ns - 1) / bucket_ns).max(1) as usize;
        let bucket_ns = bucket_ns as i64;
        let bw = bucket_ns as f64;
        let mut acc = vec![[0f32; SLOTS]; count];
        for p in 0..n {
            let s = row.slice(p);
            let slot = slot_of(slices.kind()[s], slices.class()[s]);
            let a = rel(slices.start_ns()[s], origin);
            let b = rel(slices.end_ns(SliceId::from_index(s)), origin);
            if b <= a {
                continue;
            }
            let first = (a / bucket_ns) as usize;
            let last = ((b - 1) / bucket_ns) as usize;
            for (i, cell) in acc
                .iter_mut()
                .enumerate()
                .take(last.saturating_add(1).min(count))
                .skip(first)
            {
                let lo = a.max(i as i64 * bucket_ns);
                let hi = b.min((i as i64).saturating_add(1).saturating_mul(bucket_ns));
                if hi > lo {
                    cell[slot] += ((hi - lo) as f64 / bw) as f32;
                }
            }
        }
        let finest: Vec<[u16; SLOTS]> = acc
            .into_iter()
            .map(|c| c.map(|v| (v.clamp(0.0, 1.0) as f64 * FULL).round() as u16))
            .collect();
        let mut levels = vec![finest];
        while let Some(prev) = levels.last().filter(|l| l.len() > 1) {
            let next: Vec<[u16; SLOTS]> = prev
                .chunks(2)
                .map(|pair| {
                    let a = pair[0];
                    let b = pair.get(1).copied().unwrap_or([0; SLOTS]);
                    std::array::from_fn(|k| (a[k] as u32 + b[k] as u32).div_ceil(2) as u16)
                })
                .collect();
            levels.push(next);
        }
        Some(Coverage {
            origin_ns: origin,
            bucket_ns,
            levels,
        })
    }

    /// Heap bytes of the pyramid.
    pub fn bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.len() * std::mem::size_of::<[u16; SLOTS]>())
            .sum::<usize>()
            + self.levels.len() * std::mem::size_of::<Vec<[u16; SLOTS]>>()
    }

    /// Number of finest buckets.
    pub fn finest_buckets(&self) -> usize {
        self.levels.first().map_or(0, |l| l.len())
    }

    /// The level whose buckets are at most `col_ns` wide (the coarsest such),
    /// or `None` when even a finest bucket is wider.
    fn level_for(&self, col_ns: f64) -> Option<usize> {
        let ratio = col_ns / self.bucket_ns as f64;
        if ratio.is_nan() || ratio < 1.0 {
            return None;
        }
        let l = ratio.log2().floor().max(0.0) as usize;
        Some(l.min(self.levels.len().saturating_sub(1)))
    }

    /// Covered ns per slot within `[a, b)` (relative to the origin) read
    /// from `level`, assuming coverage is spread evenly inside a bucket.
    fn level_covered(&self, level: usize, a: f64, b: f64) -> Shares {
        let mut out = [0.0; SLOTS];
        let Some(lv) = self.levels.get(level) else {
            return out;
        };
        let w = self.bucket_ns as f64 * (1u64 << level.min(62)) as f64;
        if b.partial_cmp(&a) != Some(std::cmp::Ordering::Greater) || w.is_nan() || w <= 0.0 {
            return out;
        }
        let i0 = (a / w).floor().max(0.0);
        let i1 = (b / w).ceil().min(lv.len() as f64);
        let mut i = i0;
        while i < i1 {
            let lo = a.max(i * w);
            let hi = b.min((i + 1.0) * w);
            if hi > lo {
                if let Some(cell) = lv.get(i as usize) {
                    for k in 0..SLOTS {
                        out[k] += cell[k] as f64 / FULL * (hi - lo);
                    }
                }
            }
            i += 1.0;
        }
        out
    }

    /// Covered ns per slot within absolute `[t0, t1)` counted from the
    /// slices, visiting at most `EXACT_CAP` of them from row position
    /// `*from` (advanced past slices ending before `t0`); `None` past the cap.
    fn exact_covered(
        slices: &Slices,
        row: &Row,
        from: &mut usize,
        t0: f64,
        t1: f64,
        origin: i64,
    ) -> Option<Shares> {
        let n = row.len();
        let end = |p: usize| rel(slices.end_ns(SliceId::from_index(row.slice(p))), origin) as f64;
        let start = |p: usize| rel(slices.start_ns()[row.slice(p)], origin) as f64;
        let mut steps = 0;
        while *from < n && end(*from) <= t0 {
            *from += 1;
            steps += 1;
            if steps > 16 {
                *from = partition_point(*from, n, |q| end(q) <= t0);
                break;
            }
        }
        let mut out = [0.0; SLOTS];
        let mut q = *from;
        let mut visited = 0;
        while q < n && start(q) < t1 {
            if visited == EXACT_CAP {
                return None;
            }
            let s = row.slice(q);
            let lo = start(q).max(t0);
            let hi = end(q).min(t1);
            if hi > lo {
                out[slot_of(slices.kind()[s], slices.class()[s])] += hi - lo;
            }
            visited += 1;
            q += 1;
        }
        Some(out)
    }

    /// Shares per slot of absolute `[t0, t1)`: from the pyramid level of
    /// that width, or from the slices when the interval is finer than the
    /// finest bucket.
    pub fn shares(&self, slices: &Slices, row: &Row, t0: i64, t1: i64) -> Shares {
        let a = rel(t0, self.origin_ns) as f64;
        let b = rel(t1, self.origin_ns) as f64;
        let mut cols = self.columns(slices, row, b - a);
        cols.covered(a, b).map(|c| c / (b - a).max(1.0))
    }

    /// A per-frame reader of columns `col_ns` wide.
    pub fn columns<'a>(&'a self, slices: &'a Slices, row: &'a Row, col_ns: f64) -> Columns<'a> {
        Columns {
            cov: self,
            slices,
            row,
            level: self.level_for(col_ns),
            from: 0,
            primed: false,
        }
    }

    /// `t_ns - origin` as f64 (exact in i128 first).
    pub fn rel_f64(&self, t_ns: i64) -> f64 {
        super::lod::rel_ns(t_ns, self.origin_ns)
    }
}

/// Reads the coverage of successive columns of one width, left to right.
pub struct Columns<'a> {
    cov: &'a Coverage,
    slices: &'a Slices,
    row: &'a Row,
    level: Option<usize>,
    from: usize,
    primed: bool,
}

impl Columns<'_> {
    /// Covered ns per slot of `[a, b)`, relative to the row's origin. Calls
    /// should move left to right (the slice cursor only advances).
    pub fn covered(&mut self, a: f64, b: f64) -> Shares {
        if let Some(l) = self.level {
            return self.cov.level_covered(l, a, b);
        }
        let origin = self.cov.origin_ns;
        if !self.primed {
            self.primed = true;
            let n = self.row.len();
            let (sl, row) = (self.slices, self.row);
            self.from = partition_point(0, n, |q| {
                rel(sl.end_ns(SliceId::from_index(row.slice(q))), origin) as f64 <= a
            });
        }
        match Coverage::exact_covered(self.slices, self.row, &mut self.from, a, b, origin) {
            Some(c) => c,
            None => self.cov.level_covered(0, a, b),
        }
    }
}

/// `t - origin` in i64, saturated (the row's times are at or after origin).
#[inline]
fn rel(t: i64, origin: i64) -> i64 {
    (t as i128 - origin as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::index::RowSlices;
    use streamscope_core::TraceBuilder;
    use streamscope_core::{NewSlice, Process, Trace, TrackKind};

    /// A row of alternating compute (60 ns) and communication (20 ns)
    /// kernels, every 100 ns.
    fn row_trace(n: i64) -> (Trace, Row) {
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
        let k = t.intern("k");
        for i in 0..n {
            let mut s = NewSlice::new(st, SliceKind::Kernel, k, 1_000 + i * 100, 60);
            s.class = SliceClass::Compute;
            t.push_slice(s);
            let mut c = NewSlice::new(st, SliceKind::Kernel, k, 1_000 + i * 100 + 70, 20);
            c.class = SliceClass::Communication;
            t.push_slice(c);
        }
        let row = Row {
            track: st,
            depth: 0,
            slices: RowSlices::Range(0..(2 * n) as u32),
        };
        (t.finish(), row)
    }

    #[test]
    fn shares_match_at_every_level_and_exactly_when_fine() {
        let (t, row) = row_trace(10_000);
        let cov = Coverage::build(t.slices(), &row).expect("non-empty");
        assert!(cov.levels.len() > 5);
        assert_eq!(cov.levels.last().map(|l| l.len()), Some(1));
        // Whole row, a coarse window, then single columns finer than a bucket.
        for (t0, t1, tol) in [
            (1_000, 1_000 + 1_000_000, 0.005),
            (200_000, 600_000, 0.01),
            (5_000, 5_100, 1e-9),
            (5_000, 5_070, 1e-9),
        ] {
            let s = cov.shares(t.slices(), &row, t0, t1);
            let (c, m) = if t1 - t0 == 70 {
                (60.0 / 70.0, 0.0)
            } else {
                (0.6, 0.2)
            };
            assert!((s[0] - c).abs() < tol, "{t0}..{t1}: {s:?}");
            assert!((s[1] - m).abs() < tol, "{t0}..{t1}: {s:?}");
            assert_eq!(s[2], 0.0);
        }
        // Outside the row: idle.
        assert_eq!(cov.shares(t.slices(), &row, 0, 900), [0.0; SLOTS]);
    }

    #[test]
    fn memory_is_a_few_bytes_per_slice() {
        for n in [1i64, 3, 50, 10_000, 100_000] {
            let (t, row) = row_trace(n);
            let cov = Coverage::build(t.slices(), &row).expect("non-empty");
            let per = cov.bytes() as f64 / (2 * n) as f64;
            assert!(cov.finest_buckets() <= ((2 * n) as usize / 4).max(1), "{n}");
            if n >= 10_000 {
                assert!(per <= 4.1, "{n}: {per} bytes per slice");
            }
        }
    }

    #[test]
    fn classes_map_to_their_colours() {
        assert_eq!(slot_of(SliceKind::Kernel, SliceClass::Compute), 0);
        assert_eq!(slot_of(SliceKind::Kernel, SliceClass::Communication), 1);
        assert_eq!(slot_of(SliceKind::Memcpy, SliceClass::None), 2);
        assert_eq!(slot_of(SliceKind::Kernel, SliceClass::None), 0);
        assert_eq!(slot_of(SliceKind::Sync, SliceClass::None), 3);
    }
}
