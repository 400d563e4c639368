//! Counter lanes: each track's min/max pyramid (for the envelope drawn when
//! a pixel column holds many samples), its axis (0–100 for percentages,
//! 0–max otherwise, with the unit from the track name) and the hover text.
//! A column costs two binary searches and a pyramid walk: drawing stays
//! O(pixels · log samples) whatever the sampling rate.

use streamscope_core::gpu_metrics::unit_of_track;
use streamscope_core::{Trace, TrackId};

use super::index::TimelineIndex;

/// Samples per block at each level of the pyramid.
const FANOUT: usize = 16;

/// Min and max of a track's values over blocks of 16, 256, ... samples (in
/// the track's time order), as f32 pairs: about half a byte per sample.
#[derive(Debug, Clone, Default)]
pub struct MinMax {
    levels: Vec<Vec<(f32, f32)>>,
}

impl MinMax {
    /// Builds the pyramid over `values` (in time order).
    pub fn build(values: impl Iterator<Item = f64>) -> MinMax {
        let mut levels = Vec::new();
        let mut cur: Vec<(f32, f32)> = Vec::new();
        let mut acc: Option<(f32, f32)> = None;
        let mut n = 0;
        for v in values {
            let v = v as f32;
            acc = Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))));
            n += 1;
            if n == FANOUT {
                cur.extend(acc.take());
                n = 0;
            }
        }
        cur.extend(acc);
        while cur.len() > 1 {
            let next: Vec<(f32, f32)> = cur
                .chunks(FANOUT)
                .map(|c| {
                    c.iter()
                        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &(x, y)| {
                            (a.min(x), b.max(y))
                        })
                })
                .collect();
            levels.push(std::mem::replace(&mut cur, next));
        }
        levels.push(cur);
        MinMax { levels }
    }

    /// Min and max of the samples `i..j` (indices in time order); `value(k)`
    /// reads sample k.
    pub fn range(&self, i: usize, j: usize, value: impl Fn(usize) -> f64) -> Option<(f64, f64)> {
        self.range_with(i, j, false, value)
    }

    /// As [`MinMax::range`], but a range of 256 units or more at a level is
    /// widened to whole blocks of that level (at most 15 units each side):
    /// for drawing a column of hundreds of samples, where the few samples
    /// beside its edges do not show and reading them one by one would cost.
    pub fn range_coarse(
        &self,
        i: usize,
        j: usize,
        value: impl Fn(usize) -> f64,
    ) -> Option<(f64, f64)> {
        self.range_with(i, j, true, value)
    }

    fn range_with(
        &self,
        mut i: usize,
        mut j: usize,
        coarse: bool,
        value: impl Fn(usize) -> f64,
    ) -> Option<(f64, f64)> {
        if i >= j {
            return None;
        }
        let widen = |i: &mut usize, j: &mut usize, units: usize| {
            if coarse && *j - *i >= FANOUT * FANOUT {
                *i -= *i % FANOUT;
                *j = (j.div_ceil(FANOUT) * FANOUT).min(units.div_ceil(FANOUT) * FANOUT);
            }
        };
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut take = |v: (f64, f64)| {
            lo = lo.min(v.0);
            hi = hi.max(v.1);
        };
        // Level 0: the samples themselves, up to a block boundary (the last,
        // partial block of samples has its entry in levels[0]).
        widen(
            &mut i,
            &mut j,
            self.levels.first().map_or(0, |l| l.len() * FANOUT),
        );
        while i < j && !i.is_multiple_of(FANOUT) {
            let v = value(i);
            take((v, v));
            i += 1;
        }
        while j > i && !j.is_multiple_of(FANOUT) {
            j -= 1;
            let v = value(j);
            take((v, v));
        }
        let (mut i, mut j) = (i / FANOUT, j / FANOUT);
        for level in &self.levels {
            if i >= j {
                break;
            }
            widen(&mut i, &mut j, level.len());
            while i < j && (!i.is_multiple_of(FANOUT) || j - i < FANOUT) {
                if let Some(&(a, b)) = level.get(i) {
                    take((a as f64, b as f64));
                }
                i += 1;
            }
            while j > i && !j.is_multiple_of(FANOUT) {
                j -= 1;
                if let Some(&(a, b)) = level.get(j) {
                    take((a as f64, b as f64));
                }
            }
            i /= FANOUT;
            j /= FANOUT;
        }
        (lo <= hi).then_some((lo, hi))
    }
}

/// The lane's axis: (top of the scale, unit).
pub fn scale(trace: &Trace, index: &TimelineIndex, track: TrackId) -> (f64, &'static str) {
    let max = index.counter_max.get(track.index()).copied().unwrap_or(0.0);
    let unit = unit_of_track(trace.track_name(track));
    if unit == "%" {
        (max.max(100.0), unit)
    } else {
        (max, unit)
    }
}

/// "1.23", "45.6", "789", "12,345": enough digits for an axis or a hover.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        let s = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (k, ch) in s.chars().enumerate() {
            if k > 0 && (s.len() - k) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        if v < 0.0 {
            format!("-{out}")
        } else {
            out
        }
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The lane label: the track name and its axis ("GPU 0 · SM active % ·
/// 0–100 %"; "… · max N" for a counter without a unit).
pub fn label(trace: &Trace, index: &TimelineIndex, track: TrackId) -> String {
    let (top, unit) = scale(trace, index, track);
    let name = trace.track_name(track);
    if unit.is_empty() {
        format!("{name} · max {top}")
    } else {
        format!("{name} · 0–{} {unit}", fmt_value(top))
    }
}

/// Sample positions (in the track's time order) of the samples that hold
/// some time in [t0, t1): the one holding at t0 and those starting inside.
pub fn column_samples(trace: &Trace, samples: &[u32], t0: i64, t1: i64) -> (usize, usize) {
    let ts = |k: &u32| trace.counters().ts_ns()[*k as usize];
    let a = samples.partition_point(|k| ts(k) <= t0).saturating_sub(1);
    let b = samples.partition_point(|k| ts(k) < t1);
    (a, b.max(a))
}

/// Min and max of counter `track` over [t0, t1).
pub fn column_minmax(
    trace: &Trace,
    index: &TimelineIndex,
    track: usize,
    t0: i64,
    t1: i64,
) -> Option<(f64, f64)> {
    let samples = index.counter_samples.get(track)?;
    let env = index.counter_env.get(track)?;
    let (a, b) = column_samples(trace, samples, t0, t1);
    env.range(a, b, |k| trace.counters().value()[samples[k] as usize])
}

/// Walks a counter track's columns left to right: each column's mean and
/// min/max from positions found by galloping forward from the previous
/// column's (memory stays local; no search from scratch per column).
pub struct Columns<'a> {
    trace: &'a Trace,
    samples: &'a [u32],
    ts: &'a [i64],
    integral: &'a [f64],
    env: &'a MinMax,
    /// Samples with a time <= the last column's end.
    pos: usize,
}

impl<'a> Columns<'a> {
    /// The walker of counter `track`; None without samples.
    pub fn new(trace: &'a Trace, index: &'a TimelineIndex, track: usize) -> Option<Columns<'a>> {
        let samples = index.counter_samples.get(track)?;
        samples.first()?;
        Some(Columns {
            trace,
            samples,
            ts: index.counter_ts.get(track)?,
            integral: index.counter_integral.get(track)?,
            env: index.counter_env.get(track)?,
            pos: 0,
        })
    }

    fn ts(&self, k: usize) -> i64 {
        self.ts[k]
    }

    fn value(&self, k: usize) -> f64 {
        self.trace.counters().value()[self.samples[k] as usize]
    }

    /// Samples with a time <= `t`, for `t` not below the previous call's.
    fn advance(&mut self, t: i64) -> usize {
        let n = self.samples.len();
        if self.pos > 0 && self.ts(self.pos - 1) > t {
            // Went back: search from scratch.
            self.pos = self.ts.partition_point(|&x| x <= t);
            return self.pos;
        }
        let mut step = 1;
        let mut lo = self.pos;
        while lo + step <= n && self.ts(lo + step - 1) <= t {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step).min(n);
        // The answer is in [lo, hi]: samples before lo are <= t.
        let (mut a, mut b) = (lo, hi);
        while a < b {
            let m = (a + b) / 2;
            if self.ts(m) <= t {
                a = m + 1;
            } else {
                b = m;
            }
        }
        self.pos = a;
        a
    }

    fn upto(&self, k: usize, t: i64) -> f64 {
        if k == 0 {
            return 0.0;
        }
        self.integral[k - 1] + self.value(k - 1) * super::lod::rel_ns(t, self.ts(k - 1))
    }

    /// The time-weighted mean of [t0, t1) (`t0` from the previous column's
    /// `t1` on) and the min/max of the samples holding in it.
    pub fn column(&mut self, t0: i64, t1: i64) -> (f64, Option<(f64, f64)>) {
        let k0 = self.advance(t0);
        let u0 = self.upto(k0, t0);
        let k1 = self.advance(t1);
        let u1 = self.upto(k1, t1);
        let dt = super::lod::rel_ns(t1, t0);
        let mean = if dt > 0.0 {
            (u1 - u0) / dt
        } else if k0 > 0 {
            self.value(k0 - 1)
        } else {
            0.0
        };
        let mm = self
            .env
            .range_coarse(k0.saturating_sub(1), k1, |k| self.value(k));
        (mean, mm)
    }
}

/// Hover text of a counter lane over the pixel column [t0, t1).
pub fn hover_text(
    trace: &Trace,
    index: &TimelineIndex,
    track: TrackId,
    t0: i64,
    t1: i64,
) -> Option<String> {
    let (_, unit) = scale(trace, index, track);
    let name = trace.track_name(track);
    let mean = index.counter_mean(trace, track.index(), t0, t1)?;
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    let mut text = format!("{name}\n{}{unit}", fmt_value(mean));
    if let Some((lo, hi)) = column_minmax(trace, index, track.index(), t0, t1) {
        if hi > lo {
            text.push_str(&format!(
                " (mean; {}–{}{unit} in this pixel)",
                fmt_value(lo),
                fmt_value(hi)
            ));
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::TraceBuilder;

    #[test]
    fn the_pyramid_gives_the_min_and_max_of_any_range() {
        let vals: Vec<f64> = (0..5000).map(|i| ((i * 7919) % 1000) as f64).collect();
        let mm = MinMax::build(vals.iter().copied());
        for &(i, j) in &[
            (0, 5000),
            (3, 4),
            (15, 17),
            (16, 32),
            (100, 4097),
            (4090, 5000),
            (7, 7),
        ] {
            let want = vals[i..j].iter().fold(None, |acc: Option<(f64, f64)>, &v| {
                Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))))
            });
            assert_eq!(mm.range(i, j, |k| vals[k]), want, "{i}..{j}");
            // Coarse: contains the exact band (widened by whole blocks).
            if let (Some((a, b)), Some((x, y))) = (mm.range_coarse(i, j, |k| vals[k]), want) {
                assert!(a <= x && b >= y, "{i}..{j}");
            }
        }
    }

    #[test]
    fn column_walks_agree_with_searches_from_scratch() {
        use streamscope_core::{Process, TrackKind};
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let tr = t.add_track(
            p,
            None,
            TrackKind::Counter { device: None },
            "GPU 0 · SM active %",
        );
        for i in 0..10_000i64 {
            t.push_counter(tr, i * 100, ((i * 37) % 101) as f64);
        }
        let t = t.finish();
        let index = TimelineIndex::build(&t);
        let mut w = Columns::new(&t, &index, tr.index()).expect("samples");
        let mut t0 = -500;
        while t0 < 1_000_500 {
            let t1 = t0 + 1234;
            let (mean, mm) = w.column(t0, t1);
            let want = index.counter_mean(&t, tr.index(), t0, t1).expect("mean");
            assert!((mean - want).abs() < 1e-6, "{t0}: {mean} vs {want}");
            // Coarse: never narrower than the exact band, within the data.
            let exact = column_minmax(&t, &index, tr.index(), t0, t1);
            match (mm, exact) {
                (Some((a, b)), Some((x, y))) => {
                    assert!(a <= x && b >= y && a >= 0.0 && b <= 100.0, "{t0}")
                }
                (m, e) => assert_eq!(m, e, "{t0}"),
            }
            t0 = t1;
        }
    }

    #[test]
    fn values_read_well() {
        assert_eq!(fmt_value(1.23456), "1.23");
        assert_eq!(fmt_value(45.67), "45.7");
        assert_eq!(fmt_value(456.7), "457");
        assert_eq!(fmt_value(1234567.0), "1,234,567");
    }
}
