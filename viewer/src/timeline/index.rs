//! One-off preprocessing of a loaded trace for drawing: slices split into
//! rows (track, nesting depth) whose slices are disjoint and sorted by start,
//! and counter samples grouped per track in time order.
//!
//! Within one row both starts and ends increase, so the visible window of a
//! row is two binary searches, whatever the row's length (see `lod.rs`).

use std::ops::Range;

use streamscope_core::{Trace, TrackId, TrackKind};

use super::coverage::Coverage;

/// The slices of one row, as positions into the trace's slice columns.
#[derive(Debug, Clone, PartialEq)]
pub enum RowSlices {
    /// A track without nesting: its contiguous slice range is the row.
    Range(Range<u32>),
    /// A nested track's depth: slice ids in start order.
    List(Vec<u32>),
}

/// A row: one depth of one track.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub track: TrackId,
    pub depth: u8,
    pub slices: RowSlices,
}

impl Row {
    pub fn len(&self) -> usize {
        match &self.slices {
            RowSlices::Range(r) => (r.end - r.start) as usize,
            RowSlices::List(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slice id at row position `pos`.
    #[inline]
    pub fn slice(&self, pos: usize) -> usize {
        match &self.slices {
            RowSlices::Range(r) => r.start as usize + pos,
            RowSlices::List(v) => v[pos] as usize,
        }
    }
}

/// Nesting depths deeper than this share the last row (keeps rows bounded).
pub const MAX_DEPTH: u8 = 31;

/// Drawing index of a trace; built once per load.
#[derive(Debug, Clone, Default)]
pub struct TimelineIndex {
    pub rows: Vec<Row>,
    /// Rows of each track (indexed by track id).
    pub track_rows: Vec<Range<u32>>,
    /// Nesting depth of every slice (its row is `track_rows[track].start + depth`).
    pub depth: Vec<u8>,
    /// Counter sample ids per track, in time order (indexed by track id).
    pub counter_samples: Vec<Vec<u32>>,
    /// Largest counter value per track, for the lane scale.
    pub counter_max: Vec<f64>,
    /// Per track: for a GPU's allocated-memory lane ("GPU N memory
    /// allocated (bytes)"), the time its peak was first reached (marked on
    /// the lane); None for other counters.
    pub counter_peak: Vec<Option<i64>>,
    /// Per track, aligned with `counter_samples`: the integral of the
    /// counter (value × ns, the value held until the next sample) from the
    /// track's first sample up to each sample, so the mean over any
    /// interval is two binary searches.
    pub counter_integral: Vec<Vec<f64>>,
    /// Per track: min/max pyramid of its samples (the zoomed-out envelope).
    pub counter_env: Vec<super::counters::MinMax>,
    /// Per track: its samples' times, contiguous (aligned with
    /// `counter_samples`), so a column walk reads nearby memory.
    pub counter_ts: Vec<Vec<i64>>,
    /// Coverage pyramid per row (indexed like `rows`): GPU rows (stream and
    /// GPU tracks) only; CPU rows fold.
    pub coverage: Vec<Option<Coverage>>,
    /// Per track (indexed by track id): the GPU span of each CUDA graph
    /// launch's work on that track (first start, last end), by start;
    /// empty for tracks without graph work.
    pub graph_spans: Vec<Vec<(i64, i64)>>,
    /// First start and last end of the whole trace.
    pub span_ns: (i64, i64),
    /// Per string id: the name of a host call that blocks on the GPU.
    pub sync_name: Vec<bool>,
}

/// The GPU span of each graph launch's work per track: slices carrying a
/// `graph_id` argument, grouped by correlation id (one launch). Costs
/// nothing on traces without graph work.
fn graph_spans(trace: &Trace) -> Vec<Vec<(i64, i64)>> {
    let mut out = vec![Vec::new(); trace.tracks().len()];
    let Some(key) = trace
        .strings()
        .lookup(streamscope_core::protocol::GRAPH_ID_ARG)
    else {
        return out;
    };
    let sl = trace.slices();
    let mut open: std::collections::HashMap<(u32, u32), (i64, i64)> = Default::default();
    for id in sl.ids() {
        let i = id.index();
        if !sl.kind()[i].is_gpu_activity() || sl.correlation()[i] == 0 {
            continue;
        }
        if !trace.args_of(id).iter().any(|(k, _)| *k == key) {
            continue;
        }
        let (s, e) = (sl.start_ns()[i], sl.end_ns(id));
        let span = open
            .entry((sl.track()[i].get(), sl.correlation()[i]))
            .or_insert((s, e));
        *span = (span.0.min(s), span.1.max(e));
    }
    for ((track, _), span) in open {
        if let Some(v) = out.get_mut(track as usize) {
            v.push(span);
        }
    }
    for v in &mut out {
        v.sort_unstable();
    }
    out
}

impl TimelineIndex {
    /// Builds the index. `trace` must be sorted ([`Trace::sort_slices`]).
    pub fn build(trace: &Trace) -> Self {
        let sl = trace.slices();
        let n = sl.len();
        let ntracks = trace.tracks().len();
        let mut depth = vec![0u8; n];
        let mut rows = Vec::new();
        let mut track_rows = vec![0..0; ntracks];
        let mut stack: Vec<i64> = Vec::new();
        let mut i = 0usize;
        while i < n {
            let track = sl.track()[i];
            let mut j = i;
            while j < n && sl.track()[j] == track {
                j += 1;
            }
            // Stack sweep: a slice sits one deeper than the slices still open
            // at its start. A slice is popped only once a later start passes
            // its end, so slices of one depth never overlap.
            stack.clear();
            let mut max_depth = 0u8;
            for (k, dk) in depth.iter_mut().enumerate().take(j).skip(i) {
                let start = sl.start_ns()[k];
                while stack.last().is_some_and(|&end| end <= start) {
                    stack.pop();
                }
                let d = stack.len().min(MAX_DEPTH as usize) as u8;
                *dk = d;
                max_depth = max_depth.max(d);
                // Past MAX_DEPTH, slices share the last row (which may then
                // overlap); the deepest open end grows instead of the stack.
                if stack.len() > MAX_DEPTH as usize {
                    if let Some(top) = stack.last_mut() {
                        *top = (*top).max(start + sl.dur_ns()[k]);
                    }
                } else {
                    stack.push(start + sl.dur_ns()[k]);
                }
            }
            let first_row = rows.len() as u32;
            if max_depth == 0 {
                rows.push(Row {
                    track,
                    depth: 0,
                    slices: RowSlices::Range(i as u32..j as u32),
                });
            } else {
                let mut lists: Vec<Vec<u32>> = vec![Vec::new(); max_depth as usize + 1];
                for k in i..j {
                    lists[depth[k] as usize].push(k as u32);
                }
                for (d, list) in lists.into_iter().enumerate() {
                    rows.push(Row {
                        track,
                        depth: d as u8,
                        slices: RowSlices::List(list),
                    });
                }
            }
            if let Some(r) = track_rows.get_mut(track.index()) {
                *r = first_row..rows.len() as u32;
            }
            i = j;
        }

        let mut counter_samples: Vec<Vec<u32>> = vec![Vec::new(); ntracks];
        let mut counter_max = vec![0f64; ntracks];
        let c = trace.counters();
        for k in 0..c.len() {
            let t = c.track()[k].index();
            if let Some(list) = counter_samples.get_mut(t) {
                list.push(k as u32);
                counter_max[t] = counter_max[t].max(c.value()[k]);
            }
        }
        for list in &mut counter_samples {
            list.sort_by_key(|&k| c.ts_ns()[k as usize]);
        }
        let counter_peak = counter_samples
            .iter()
            .enumerate()
            .map(|(t, list)| {
                let name = trace.track_name(TrackId::from_index(t));
                if !is_allocated_lane(name) {
                    return None;
                }
                let mut best: Option<(f64, i64)> = None;
                for &k in list {
                    let (v, ts) = (c.value()[k as usize], c.ts_ns()[k as usize]);
                    if best.is_none_or(|(b, _)| v > b) {
                        best = Some((v, ts));
                    }
                }
                best.map(|(_, ts)| ts)
            })
            .collect();
        let counter_integral = counter_samples
            .iter()
            .map(|list| {
                let mut acc = 0.0;
                let mut out = Vec::with_capacity(list.len());
                for (j, &k) in list.iter().enumerate() {
                    out.push(acc);
                    if let Some(&next) = list.get(j + 1) {
                        let dt =
                            super::lod::rel_ns(c.ts_ns()[next as usize], c.ts_ns()[k as usize]);
                        acc += c.value()[k as usize] * dt;
                    }
                }
                out
            })
            .collect();
        let counter_ts = counter_samples
            .iter()
            .map(|list| list.iter().map(|&k| c.ts_ns()[k as usize]).collect())
            .collect();
        let counter_env = counter_samples
            .iter()
            .map(|list| super::counters::MinMax::build(list.iter().map(|&k| c.value()[k as usize])))
            .collect();
        let coverage = rows
            .iter()
            .map(|row| match trace.track(row.track).kind {
                TrackKind::Stream { .. } | TrackKind::Gpu { .. } => Coverage::build(sl, row),
                _ => None,
            })
            .collect();

        let mut span = trace.time_span().unwrap_or((0, 0));
        if let (Some(lo), Some(hi)) = (c.ts_ns().iter().min(), c.ts_ns().iter().max()) {
            if sl.is_empty() {
                span = (*lo, *hi);
            } else {
                span = (span.0.min(*lo), span.1.max(*hi));
            }
        }
        if span.1 <= span.0 {
            span.1 = span.0 + 1;
        }
        let sync_name = (0..trace.strings().len())
            .map(|i| {
                trace
                    .str(streamscope_core::StrId::from_index(i))
                    .contains("Synchronize")
            })
            .collect();
        let graph_spans = graph_spans(trace);
        TimelineIndex {
            graph_spans,
            rows,
            track_rows,
            depth,
            counter_samples,
            counter_max,
            counter_peak,
            counter_integral,
            counter_env,
            counter_ts,
            coverage,
            span_ns: span,
            sync_name,
        }
    }

    /// Time-weighted mean of counter `track` over absolute `[t0, t1)` (the
    /// value before the first sample counts as 0); `None` without samples.
    pub fn counter_mean(&self, trace: &Trace, track: usize, t0: i64, t1: i64) -> Option<f64> {
        let samples = self.counter_samples.get(track)?;
        let integral = self.counter_integral.get(track)?;
        samples.first()?;
        let c = trace.counters();
        // Integral from the first sample up to t.
        let upto = |t: i64| -> f64 {
            let k = samples.partition_point(|&s| c.ts_ns()[s as usize] <= t);
            if k == 0 {
                return 0.0;
            }
            let s = samples[k - 1] as usize;
            integral[k - 1] + c.value()[s] * super::lod::rel_ns(t, c.ts_ns()[s])
        };
        let dt = super::lod::rel_ns(t1, t0);
        if dt <= 0.0 {
            // A point: the value held at t0.
            let k = samples.partition_point(|&s| c.ts_ns()[s as usize] <= t0);
            return Some(if k == 0 {
                0.0
            } else {
                c.value()[samples[k - 1] as usize]
            });
        }
        Some((upto(t1) - upto(t0)) / dt)
    }

    /// Row holding slice `i`.
    pub fn row_of(&self, trace: &Trace, i: usize) -> Option<u32> {
        let r = self.track_rows.get(trace.slices().track()[i].index())?;
        let row = r.start + self.depth[i] as u32;
        (row < r.end).then_some(row)
    }
}

/// Whether a counter track is a GPU's allocated-memory lane (Kineto's
/// allocator totals: "GPU N memory allocated (bytes)").
pub fn is_allocated_lane(name: &str) -> bool {
    name.starts_with("GPU ") && name.ends_with(" memory allocated (bytes)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::TraceBuilder;
    use streamscope_core::{NewSlice, Process, SliceKind, TrackKind};

    #[test]
    fn graph_launches_get_one_span_per_track() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let d = t.add_device(streamscope_core::Device {
            process: p,
            ..Default::default()
        });
        let st = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "s",
        );
        let key = t.intern(streamscope_core::protocol::GRAPH_ID_ARG);
        let k = t.intern("k");
        // Two launches of 3 kernels (correlations 5 and 6), one eager kernel.
        for (corr, t0) in [(5u32, 0i64), (6, 1000)] {
            for j in 0..3 {
                let mut s = NewSlice::new(st, SliceKind::Kernel, k, t0 + j * 100, 50);
                s.correlation = corr;
                s.args.push((key, streamscope_core::ArgValue::UInt(1)));
                t.push_slice(s);
            }
        }
        let mut eager = NewSlice::new(st, SliceKind::Kernel, k, 2000, 50);
        eager.correlation = 9;
        t.push_slice(eager);
        let idx = TimelineIndex::build(&t.finish());
        assert_eq!(idx.graph_spans[st.index()], vec![(0, 250), (1000, 1250)]);
    }

    #[test]
    fn nested_slices_get_depths_and_disjoint_rows() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let th = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
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
            "stream 7",
        );
        let n = t.intern("x");
        for (s, d) in [(0, 100), (10, 20), (15, 5), (40, 10), (200, 10)] {
            t.push_slice(NewSlice::new(th, SliceKind::Range, n, s, d));
        }
        for s in 0..5 {
            t.push_slice(NewSlice::new(st, SliceKind::Kernel, n, s * 10, 5));
        }
        let t = t.finish();
        let ix = TimelineIndex::build(&t);
        assert_eq!(&ix.depth[..5], &[0, 1, 2, 1, 0]);
        assert_eq!(ix.track_rows[th.index()], 0..3);
        assert_eq!(ix.track_rows[st.index()], 3..4);
        assert_eq!(ix.rows[3].slices, RowSlices::Range(5..10));
        assert_eq!(ix.rows[1].slices, RowSlices::List(vec![1, 3]));
        assert_eq!(ix.row_of(&t, 2), Some(2));
        assert_eq!(ix.span_ns, (0, 210));
    }

    #[test]
    fn counter_mean_is_time_weighted() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let c = t.add_track(p, None, TrackKind::Counter { device: None }, "SMs");
        // 132 for 10 ns of every 100 ns: the peak is 132, the mean 13.2.
        for i in 0..1000i64 {
            t.push_counter(c, i * 100, 132.0);
            t.push_counter(c, i * 100 + 10, 0.0);
        }
        let t = t.finish();
        let ix = TimelineIndex::build(&t);
        let m = |a, b| ix.counter_mean(&t, c.index(), a, b).expect("samples");
        assert!((m(0, 50_000) - 13.2).abs() < 1e-9, "{}", m(0, 50_000));
        assert!((m(1_000, 1_005) - 132.0).abs() < 1e-9);
        assert!((m(1_050, 1_060)).abs() < 1e-9);
        assert!((m(-100, 0)).abs() < 1e-9, "before the first sample: 0");
        assert!((m(5, 15) - 66.0).abs() < 1e-9);
        assert_eq!(ix.counter_mean(&t, 5, 0, 10), None);
    }
}
