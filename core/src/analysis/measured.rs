//! Measured GPU metrics over a window (the PM sampling counter tracks of
//! `record --gpu-metrics`, see [`crate::gpu_metrics`]) and SM contention
//! between compute and NCCL kernels (from kernel times alone, on any trace).

use serde::{Deserialize, Serialize};

use super::intervals;
use super::rank::{Ev, IntMap, RankCtx, NONE};
use crate::gpu_metrics::{parse_track_name, Metric};
use crate::model::{SliceClass, SliceKind, Trace, TrackKind};

/// Time-weighted means of the measured GPU metrics over a window; `None`
/// (JSON `null`) for a metric with no sample in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Measured {
    /// SM active: cycles with a warp resident, % of elapsed cycles.
    pub sm_active_pct: Option<f64>,
    /// Achieved occupancy: resident warps, % of the SM's maximum, over the
    /// active cycles.
    pub warps_active_pct: Option<f64>,
    /// Tensor pipes active, % of elapsed cycles.
    pub tensor_active_pct: Option<f64>,
    /// DRAM read + write, GB/s.
    pub dram_gbps: Option<f64>,
    /// NVLink received, GB/s.
    pub nvlink_rx_gbps: Option<f64>,
    /// NVLink transmitted, GB/s.
    pub nvlink_tx_gbps: Option<f64>,
    /// PCIe read (into the GPU), GB/s.
    pub pcie_read_gbps: Option<f64>,
    /// PCIe write (out of the GPU), GB/s.
    pub pcie_write_gbps: Option<f64>,
    /// Counter samples inside the window, all metrics together.
    pub samples: u64,
    /// Length of the span the means cover, µs (GB/s × this / 1e6 = GB).
    pub span_us: f64,
    /// SM active averaged over the time compute kernels ran in the span
    /// (the union of their intervals): the GEMM phases' figure. From the
    /// samples wholly inside that union (one across its edge also holds
    /// the gap beyond), else, when compute ran only in pieces shorter than
    /// a sample, time-weighted over the union.
    pub sm_active_compute_pct: Option<f64>,
    /// NVLink bytes sent over the span, GB (`nvlink_tx_gbps` × span).
    pub nvlink_tx_gb: Option<f64>,
    /// NVLink bytes received over the span, GB.
    pub nvlink_rx_gb: Option<f64>,
    /// What the window's collectives move per rank on the links, GB: their
    /// bytes × the nccl-tests bus factor (bus / algorithm bandwidth:
    /// (n-1)/n for all-gather and reduce-scatter, 2(n-1)/n for
    /// all-reduce); `None` without collectives of known size.
    pub collective_link_gb: Option<f64>,
}

impl Measured {
    fn slot(&mut self, m: Metric) -> &mut Option<f64> {
        match m {
            Metric::SmActive => &mut self.sm_active_pct,
            Metric::WarpsActive => &mut self.warps_active_pct,
            Metric::TensorActive => &mut self.tensor_active_pct,
            Metric::Dram => &mut self.dram_gbps,
            Metric::NvlinkRx => &mut self.nvlink_rx_gbps,
            Metric::NvlinkTx => &mut self.nvlink_tx_gbps,
            Metric::PcieRead => &mut self.pcie_read_gbps,
            Metric::PcieWrite => &mut self.pcie_write_gbps,
        }
    }

    /// The value of `m`.
    pub fn get(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::SmActive => self.sm_active_pct,
            Metric::WarpsActive => self.warps_active_pct,
            Metric::TensorActive => self.tensor_active_pct,
            Metric::Dram => self.dram_gbps,
            Metric::NvlinkRx => self.nvlink_rx_gbps,
            Metric::NvlinkTx => self.nvlink_tx_gbps,
            Metric::PcieRead => self.pcie_read_gbps,
            Metric::PcieWrite => self.pcie_write_gbps,
        }
    }

    /// True when any metric has a value.
    pub fn any(&self) -> bool {
        Metric::ALL.iter().any(|&m| self.get(m).is_some())
    }
}

/// One metric's samples on a device: each value holds from its time until
/// the next sample, at most `cap_ns` (so a gap in the sampling does not
/// stretch a value over it).
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Sample times, ascending.
    pub ts: Vec<i64>,
    /// Values.
    pub v: Vec<f64>,
    /// Longest time one sample covers: 4 × the median spacing.
    pub cap_ns: i64,
}

impl Series {
    /// Builds a series from unordered (time, value) points.
    pub fn new(mut pts: Vec<(i64, f64)>) -> Series {
        pts.sort_by_key(|p| p.0);
        pts.dedup_by_key(|p| p.0);
        let mut gaps: Vec<i64> = pts
            .windows(2)
            .map(|w| w[1].0.saturating_sub(w[0].0))
            .collect();
        gaps.sort_unstable();
        let median = gaps.get(gaps.len() / 2).copied().unwrap_or(0);
        Series {
            ts: pts.iter().map(|p| p.0).collect(),
            v: pts.iter().map(|p| p.1).collect(),
            cap_ns: median.saturating_mul(4).max(1),
        }
    }

    /// The time-weighted mean over [a, b) and the samples that count.
    pub fn mean(&self, a: i64, b: i64) -> Option<(f64, u64)> {
        let (sum, w, n) = self.integral(a, b);
        (w > 0).then(|| (sum / w as f64, n))
    }

    /// The time-weighted mean over disjoint intervals `u`.
    pub fn mean_over(&self, u: &[(i64, i64)]) -> Option<f64> {
        let (mut sum, mut w) = (0.0, 0i64);
        for &(a, b) in u {
            let (s, ww, _) = self.integral(a, b);
            sum += s;
            w = w.saturating_add(ww);
        }
        (w > 0).then(|| sum / w as f64)
    }

    /// The time-weighted mean of the samples that lie wholly inside one of
    /// the disjoint, sorted intervals `u`: a sample's value is its mean
    /// over its whole interval, so one straddling an edge of `u` mixes in
    /// what ran (or did not) outside. `None` when no sample lies wholly
    /// inside (intervals shorter than the sampling period).
    pub fn mean_within(&self, u: &[(i64, i64)]) -> Option<f64> {
        let (mut sum, mut w) = (0.0f64, 0i64);
        for &(a, b) in u {
            // Samples starting at or after `a`, ending by `b`.
            let first = self.ts.partition_point(|&t| t < a);
            for i in first..self.ts.len() {
                let (s, e) = self.covers(i);
                if s >= b {
                    break;
                }
                if e <= b && e > s {
                    sum += self.v[i] * (e - s) as f64;
                    w = w.saturating_add(e.saturating_sub(s));
                }
            }
        }
        (w > 0).then(|| sum / w as f64)
    }

    /// The time sample `i` stands for: from its stamp to the next one, at
    /// most [`Series::cap_ns`].
    fn covers(&self, i: usize) -> (i64, i64) {
        let s = self.ts[i];
        let next = self.ts.get(i + 1).copied().unwrap_or(i64::MAX);
        (s, next.min(s.saturating_add(self.cap_ns)))
    }

    /// Σ value × covered time over [a, b), the covered time, the samples.
    fn integral(&self, a: i64, b: i64) -> (f64, i64, u64) {
        if b <= a || self.ts.is_empty() {
            return (0.0, 0, 0);
        }
        // The sample covering `a` may start before it.
        let first = self.ts.partition_point(|&t| t <= a).saturating_sub(1);
        let (mut sum, mut w, mut n) = (0.0f64, 0i64, 0u64);
        for i in first..self.ts.len() {
            let (s, e) = self.covers(i);
            if s >= b {
                break;
            }
            let (lo, hi) = (s.max(a), e.min(b));
            if hi > lo {
                sum += self.v[i] * (hi - lo) as f64;
                w = w.saturating_add(hi.saturating_sub(lo));
                n += 1;
            }
        }
        (sum, w, n)
    }
}

/// The measured series of one rank: the counter tracks of its process on
/// its device(s) that [`parse_track_name`] recognizes.
pub fn rank_series(t: &Trace, ctx: &RankCtx) -> Vec<(Metric, Series)> {
    let mut devices: Vec<u32> = ctx
        .streams
        .iter()
        .filter_map(|k| k.device())
        .map(|d| d.get())
        .collect();
    if let Some(d) = ctx.device {
        devices = vec![d.get()];
    }
    let mut want: Vec<(u32, Metric)> = Vec::new();
    for (i, tr) in t.tracks().iter().enumerate() {
        let TrackKind::Counter { device: Some(d) } = tr.kind else {
            continue;
        };
        if tr.process != ctx.process || !devices.contains(&d.get()) {
            continue;
        }
        if let Some((_, m)) = parse_track_name(t.str(tr.name)) {
            want.push((i as u32, m));
        }
    }
    if want.is_empty() {
        return Vec::new();
    }
    let mut pts: Vec<Vec<(i64, f64)>> = vec![Vec::new(); want.len()];
    let c = t.counters();
    for k in 0..c.len() {
        if let Some(j) = want.iter().position(|w| w.0 == c.track()[k].get()) {
            pts[j].push((c.ts_ns()[k], c.value()[k]));
        }
    }
    want.into_iter()
        .zip(pts)
        .filter(|(_, p)| !p.is_empty())
        .map(|((_, m), p)| (m, Series::new(p)))
        .collect()
}

/// Means of `series` over [a, b); `compute`: the compute kernels' union
/// (for `sm_active_compute_pct`).
pub fn measure(series: &[(Metric, Series)], a: i64, b: i64, compute: &[(i64, i64)]) -> Measured {
    let mut out = Measured {
        span_us: (b - a).max(0) as f64 / 1000.0,
        ..Default::default()
    };
    for (m, s) in series {
        if let Some((v, n)) = s.mean(a, b) {
            *out.slot(*m) = Some(v);
            out.samples += n;
        }
        let gb = |v: Option<f64>| v.map(|g| g * out.span_us / 1e6);
        match m {
            Metric::NvlinkTx => out.nvlink_tx_gb = gb(out.nvlink_tx_gbps),
            Metric::NvlinkRx => out.nvlink_rx_gb = gb(out.nvlink_rx_gbps),
            _ => {}
        }
        if *m == Metric::SmActive {
            let clipped: Vec<(i64, i64)> = compute
                .iter()
                .map(|&(s, e)| (s.max(a), e.min(b)))
                .filter(|(s, e)| e > s)
                .collect();
            out.sm_active_compute_pct = s.mean_within(&clipped).or_else(|| s.mean_over(&clipped));
        }
    }
    out
}

/// GB the collectives of `rows` move per rank on the links: bytes × the
/// bus factor (bus / algorithm bandwidth) of each row. `None` unless every
/// collective's size is known: a sum over some of them would understate
/// what the links carried (without NCCL's profiler plugin most kernels
/// have no size).
pub fn collective_link_gb(rows: &[super::CollectiveStats]) -> Option<f64> {
    let mut total = None;
    for r in rows.iter().filter(|r| r.count > 0) {
        match (r.bytes, r.alg_bw_gbps, r.bus_bw_gbps) {
            (Some(b), Some(alg), Some(bus)) if alg > 0.0 && r.sized >= r.count => {
                *total.get_or_insert(0.0) += b as f64 * (bus / alg) / 1e9;
            }
            _ => return None,
        }
    }
    total
}

/// SM contention: compute kernels that ran both alone and under NCCL
/// kernels on the same GPU, compared by name and launch shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SmContention {
    /// 100 × (Σ overlapped durations / Σ their alone medians − 1) over the
    /// kernel groups seen both ways; `None` when no group was.
    pub compute_slowdown_pct: Option<f64>,
    /// Kernel groups (same name and launch configuration) seen both ways.
    pub groups: u64,
    /// Kernels of those groups that ran alone (no NCCL kernel at all).
    pub kernels_alone: u64,
    /// Kernels of those groups that ran at least 90 % under NCCL kernels.
    pub kernels_overlapped: u64,
    /// Compute time beyond the alone medians, over the window: an upper
    /// bound on the step time contention costs (equal when compute is the
    /// critical path).
    pub extra_compute_us: f64,
    /// `extra_compute_us` per step of the window; `None` without steps.
    pub cost_per_step_us: Option<f64>,
    /// The groups costing most, at most 10.
    pub top: Vec<ContentionRow>,
}

/// One kernel group of [`SmContention`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ContentionRow {
    /// Kernel name.
    pub name: String,
    /// "grid x,y,z block x,y,z" ("" when unknown).
    pub shape: String,
    /// Kernels alone / overlapped.
    pub alone: u64,
    /// See `alone`.
    pub overlapped: u64,
    /// Median duration alone, µs.
    pub alone_median_us: f64,
    /// Median duration overlapped, µs.
    pub overlapped_median_us: f64,
    /// 100 × (overlapped median / alone median − 1).
    pub slowdown_pct: f64,
    /// Overlapped time beyond the alone median, µs.
    pub extra_us: f64,
}

/// Share of a kernel's time under NCCL kernels for it to count as
/// overlapped; a kernel with none counts as alone, others not at all.
const OVERLAPPED_SHARE: f64 = 0.9;

fn median(v: &mut [i64]) -> f64 {
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
    }
}

/// Time of [s, e) under the disjoint ascending intervals `u`.
pub(crate) fn covered(u: &[(i64, i64)], s: i64, e: i64) -> i64 {
    let mut k = u.partition_point(|&(_, ue)| ue <= s);
    let mut total = 0i64;
    while k < u.len() && u[k].0 < e {
        total = total.saturating_add(u[k].1.min(e).saturating_sub(u[k].0.max(s)));
        k += 1;
    }
    total
}

/// SM contention of a rank over `head` (its headline window), and the extra
/// compute time per step (indexed like the rank's steps) over all its GPU
/// work. `window_steps`: steps in the headline window.
pub fn sm_contention(
    t: &Trace,
    ctx: &RankCtx,
    head: &[&Ev],
    nsteps: usize,
    window_steps: usize,
) -> (SmContention, Vec<Option<f64>>) {
    let comm = intervals::union(
        ctx.gpu
            .iter()
            .filter(|e| e.class == SliceClass::Communication)
            .map(|e| (e.s, e.e))
            .collect(),
    );
    let sl = t.slices();
    // (name, launch) -> (alone durations, overlapped (dur, in head)).
    type Group = (Vec<i64>, Vec<i64>);
    // (name, launch configuration) in one integer key, for the fast hasher.
    let key = |e: &Ev| {
        let i = e.id as usize;
        ((sl.name()[i].get() as u64) << 32) | sl.payload()[i] as u64
    };
    let kind_ok = |e: &Ev| {
        e.class == SliceClass::Compute && sl.kind()[e.id as usize] == SliceKind::Kernel && e.e > e.s
    };
    let state = |e: &Ev| {
        let c = covered(&comm, e.s, e.e);
        if c == 0 {
            Some(false)
        } else if c as f64 >= OVERLAPPED_SHARE * (e.e - e.s) as f64 {
            Some(true)
        } else {
            None
        }
    };
    let mut groups: IntMap<u64, Group> = Default::default();
    for e in head.iter().filter(|e| kind_ok(e)) {
        if let Some(over) = state(e) {
            let g = groups.entry(key(e)).or_default();
            if over {
                g.1.push(e.e.saturating_sub(e.s));
            } else {
                g.0.push(e.e.saturating_sub(e.s));
            }
        }
    }
    let mut medians: IntMap<u64, f64> = Default::default();
    let mut rows = Vec::new();
    let (mut num, mut den) = (0.0f64, 0.0f64);
    let (mut alone_n, mut over_n) = (0u64, 0u64);
    for (k, (alone, over)) in groups.iter_mut() {
        if alone.is_empty() || over.is_empty() {
            continue;
        }
        let am = median(alone);
        if am <= 0.0 {
            continue;
        }
        let sum_over: i64 = over.iter().fold(0i64, |s, &x| s.saturating_add(x));
        let om = median(over);
        num += sum_over as f64;
        den += over.len() as f64 * am;
        alone_n += alone.len() as u64;
        over_n += over.len() as u64;
        medians.insert(*k, am);
        let (name, launch) = ((k >> 32) as u32, *k as u32);
        let lc = t.launch_configs().get(launch as usize);
        rows.push(ContentionRow {
            name: t
                .str(crate::model::StrId::from_index(name as usize))
                .to_string(),
            shape: lc
                .map(|l| {
                    format!(
                        "grid {},{},{} block {},{},{}",
                        l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2]
                    )
                })
                .unwrap_or_default(),
            alone: alone.len() as u64,
            overlapped: over.len() as u64,
            alone_median_us: am / 1000.0,
            overlapped_median_us: om / 1000.0,
            slowdown_pct: 100.0 * (om / am - 1.0),
            extra_us: (sum_over as f64 - over.len() as f64 * am) / 1000.0,
        });
    }
    rows.sort_by(|a, b| b.extra_us.total_cmp(&a.extra_us).then(a.name.cmp(&b.name)));
    let extra_us = (num - den) / 1000.0;
    rows.truncate(10);
    // Per step, over all the rank's GPU work, with the window's medians.
    let mut per_step = vec![None; nsteps];
    if !medians.is_empty() {
        for e in ctx.gpu.iter().filter(|e| kind_ok(e) && e.step != NONE) {
            if state(e) != Some(true) {
                continue;
            }
            if let (Some(&am), Some(slot)) =
                (medians.get(&key(e)), per_step.get_mut(e.step as usize))
            {
                let v: &mut Option<f64> = slot;
                *v = Some(v.unwrap_or(0.0) + ((e.e - e.s) as f64 - am) / 1000.0);
            }
        }
    }
    let c = SmContention {
        compute_slowdown_pct: (den > 0.0).then(|| 100.0 * (num / den - 1.0)),
        groups: medians.len() as u64,
        kernels_alone: alone_n,
        kernels_overlapped: over_n,
        extra_compute_us: if den > 0.0 { extra_us } else { 0.0 },
        cost_per_step_us: (den > 0.0 && window_steps > 0).then(|| extra_us / window_steps as f64),
        top: rows,
    };
    (c, per_step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_are_time_weighted_and_gaps_are_capped() {
        // 0..100 at 10, 100..200 at 30, then a gap, 1000 at 50.
        let s = Series::new(vec![(100, 30.0), (0, 10.0), (200, 20.0), (1000, 50.0)]);
        assert_eq!(s.cap_ns, 400); // median spacing 100
        let (m, n) = s.mean(0, 200).expect("as set up");
        assert!((m - 20.0).abs() < 1e-9);
        assert_eq!(n, 2);
        // Half of the first sample and all of the second: (10*50 + 30*100) / 150.
        let (m, _) = s.mean(50, 200).expect("as set up");
        assert!((m - 3500.0 / 150.0).abs() < 1e-9);
        // 200..600 holds 20 (capped at 4 × 100), 600..1000 has nothing.
        let (m, n) = s.mean(200, 1000).expect("as set up");
        assert!((m - 20.0).abs() < 1e-9);
        assert_eq!(n, 1);
        assert!(s.mean(700, 900).is_none());
        assert!(s.mean(5, 5).is_none());
    }

    #[test]
    fn within_counts_only_samples_wholly_inside_and_falls_back_to_weighting() {
        // Samples every 100: busy (90) over 0..1000, then one straddling
        // the end of compute (45: half busy, half idle), then idle.
        let mut pts: Vec<(i64, f64)> = (0..10).map(|i| (i * 100, 90.0)).collect();
        pts.push((1000, 45.0));
        pts.extend((11..20).map(|i| (i * 100, 0.0)));
        let s = Series::new(pts);
        let compute = [(0, 1050)];
        assert_eq!(s.mean_within(&compute), Some(90.0));
        // Time-weighted over the union mixes in the straddling sample.
        let weighted = s.mean_over(&compute).expect("covered");
        assert!((weighted - (90.0 * 1000.0 + 45.0 * 50.0) / 1050.0).abs() < 1e-9);
        assert!(weighted < 90.0);
        // Compute shorter than a sample: none wholly inside.
        assert_eq!(s.mean_within(&[(120, 180)]), None);
        let m = measure(&[(Metric::SmActive, s)], 0, 2000, &[(120, 180)]);
        assert_eq!(
            m.sm_active_compute_pct,
            Some(90.0),
            "falls back to weighting"
        );
        // Several intervals: each sample counted once, by its own interval.
        let s = Series::new((0..10).map(|i| (i * 100, i as f64)).collect());
        assert_eq!(
            s.mean_within(&[(0, 200), (500, 700)]),
            Some((0.0 + 1.0 + 5.0 + 6.0) / 4.0)
        );
    }

    #[test]
    fn collectives_move_their_bus_share_on_the_links() {
        let row = |bytes: u64, alg: f64, bus: f64| super::super::CollectiveStats {
            count: 4,
            sized: 4,
            bytes: Some(bytes),
            alg_bw_gbps: Some(alg),
            bus_bw_gbps: Some(bus),
            ..Default::default()
        };
        // Two ranks: an all-gather of 2 GB moves half; an all-reduce of
        // 1 GB moves all of it (2(n-1)/n = 1).
        let rows = vec![
            row(2_000_000_000, 100.0, 50.0),
            row(1_000_000_000, 100.0, 100.0),
        ];
        assert!((collective_link_gb(&rows).expect("sized") - 2.0).abs() < 1e-9);
        let none = super::super::CollectiveStats {
            count: 4,
            ..Default::default()
        };
        assert_eq!(collective_link_gb(std::slice::from_ref(&none)), None);
        // Some kernels of a row without a size: unknown, not a part.
        let mut partial = rows.clone();
        partial[1].sized = 3;
        assert_eq!(collective_link_gb(&partial), None);
        assert_eq!(collective_link_gb(&[rows[0].clone(), none]), None);
    }

    #[test]
    fn coverage_counts_only_the_overlap() {
        let u = vec![(10, 20), (30, 40)];
        assert_eq!(covered(&u, 0, 10), 0);
        assert_eq!(covered(&u, 15, 35), 10);
        assert_eq!(covered(&u, 0, 100), 20);
        assert_eq!(covered(&u, 40, 50), 0);
    }
}
