//! Theoretical SM occupancy of each kernel from its launch configuration and
//! the device's limits (the CUDA occupancy calculator's rules), the SMs
//! each kernel holds, a per-device "SMs in use" series, and the share of
//! SMs NCCL kernels hold while compute runs.
//!
//! Per-architecture limits (CUDA C Programming Guide, "Technical
//! Specifications per Compute Capability"): they fill in what the trace's
//! device record lacks; the device record wins where it has a value.

use super::rank::{IntMap, RankCtx};
use super::report::{DeviceOccupancy, KernelOccupancy, WHOLE_TRACE};
use crate::model::SliceId;
use crate::model::{Device, LaunchConfig, SliceClass, SliceKind, Trace};

/// Limits of one SM.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmLimits {
    /// Threads per warp.
    pub warp_size: u32,
    /// Maximum resident warps per SM.
    pub max_warps: u32,
    /// Maximum resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub regs: u32,
    /// Register allocation unit, per warp.
    pub reg_alloc_unit: u32,
    /// Register file sub-partitions (warps are allocated registers per sub-partition).
    pub reg_sub_partitions: u32,
    /// Maximum registers per thread.
    pub max_regs_per_thread: u32,
    /// Shared memory per SM, in bytes.
    pub smem_bytes: u64,
    /// Shared memory allocation unit, in bytes.
    pub smem_alloc_unit: u64,
    /// Shared memory the system reserves per block (1 KB from 8.0 on).
    pub smem_reserved_per_block: u64,
}

/// Documented limits per compute capability.
pub fn arch_limits(major: u32, minor: u32) -> Option<SmLimits> {
    let base = SmLimits {
        warp_size: 32,
        max_warps: 64,
        max_blocks: 32,
        regs: 65536,
        reg_alloc_unit: 256,
        reg_sub_partitions: 4,
        max_regs_per_thread: 255,
        smem_bytes: 96 * 1024,
        smem_alloc_unit: 256,
        smem_reserved_per_block: 0,
    };
    let kb = |k: u64| k * 1024;
    Some(match (major, minor) {
        (7, 0) | (7, 2) => base,
        (7, 5) => SmLimits {
            max_warps: 32,
            max_blocks: 16,
            smem_bytes: kb(64),
            ..base
        },
        (8, 0) => SmLimits {
            smem_bytes: kb(164),
            smem_alloc_unit: 128,
            smem_reserved_per_block: 1024,
            ..base
        },
        (8, 6) => SmLimits {
            max_warps: 48,
            max_blocks: 16,
            smem_bytes: kb(100),
            smem_alloc_unit: 128,
            smem_reserved_per_block: 1024,
            ..base
        },
        (8, 7) => SmLimits {
            max_warps: 48,
            max_blocks: 16,
            smem_bytes: kb(164),
            smem_alloc_unit: 128,
            smem_reserved_per_block: 1024,
            ..base
        },
        (8, 9) => SmLimits {
            max_warps: 48,
            max_blocks: 24,
            smem_bytes: kb(100),
            smem_alloc_unit: 128,
            smem_reserved_per_block: 1024,
            ..base
        },
        (9, 0) | (10, _) => SmLimits {
            smem_bytes: kb(228),
            smem_alloc_unit: 128,
            smem_reserved_per_block: 1024,
            ..base
        },
        _ => return None,
    })
}

/// Limits for a device: the architecture table, overridden by the device record.
pub fn device_limits(d: &Device) -> Option<SmLimits> {
    let mut l = arch_limits(d.compute_major, d.compute_minor)?;
    if d.warp_size > 0 {
        l.warp_size = d.warp_size;
    }
    if d.max_threads_per_sm > 0 {
        l.max_warps = d.max_threads_per_sm / l.warp_size;
    }
    if d.max_blocks_per_sm > 0 {
        l.max_blocks = d.max_blocks_per_sm;
    }
    if d.regs_per_sm > 0 {
        l.regs = d.regs_per_sm;
    }
    if d.smem_per_sm_bytes > 0 {
        l.smem_bytes = d.smem_per_sm_bytes;
    }
    Some(l)
}

/// Blocks per SM, the limiting resource and occupancy (% of max warps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Occupancy {
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// What bounds it: "warps", "registers", "shared memory" or "blocks".
    pub limiter: &'static str,
    /// Active warps / max warps per SM, %.
    pub occupancy_pct: f64,
}

fn round_up(x: u64, unit: u64) -> u64 {
    if unit == 0 {
        x
    } else {
        x.div_ceil(unit) * unit
    }
}

/// Theoretical occupancy of a launch on an SM with limits `l`.
pub fn occupancy(lc: &LaunchConfig, l: &SmLimits) -> Occupancy {
    let threads = lc.threads_per_block();
    let warps_per_block = threads.div_ceil(l.warp_size as u64).max(1);
    let mut best = (l.max_blocks as u64, "blocks");
    let mut limit = |n: u64, what: &'static str| {
        if n < best.0 {
            best = (n, what);
        }
    };
    limit(l.max_warps as u64 / warps_per_block, "warps");
    if lc.registers_per_thread > 0 {
        if lc.registers_per_thread > l.max_regs_per_thread {
            limit(0, "registers");
        } else {
            let regs_per_warp = round_up(
                lc.registers_per_thread as u64 * l.warp_size as u64,
                l.reg_alloc_unit as u64,
            );
            let per_partition = l.regs as u64 / l.reg_sub_partitions.max(1) as u64;
            let warps = (per_partition / regs_per_warp) * l.reg_sub_partitions.max(1) as u64;
            limit(warps / warps_per_block, "registers");
        }
    }
    let smem = lc.static_smem_bytes as u64 + lc.dynamic_smem_bytes as u64;
    if smem > 0 {
        let per_block = round_up(smem + l.smem_reserved_per_block, l.smem_alloc_unit);
        limit(l.smem_bytes / per_block, "shared memory");
    }
    let blocks = best.0.min(u32::MAX as u64) as u32;
    let occupancy_pct =
        100.0 * (blocks as u64 * warps_per_block) as f64 / l.max_warps.max(1) as f64;
    Occupancy {
        blocks_per_sm: blocks,
        limiter: best.1,
        occupancy_pct: occupancy_pct.min(100.0),
    }
}

/// Occupancy per device of a rank (whole trace).
pub fn devices(t: &Trace, ctx: &RankCtx, opts: &super::AnalysisOptions) -> Vec<DeviceOccupancy> {
    let sl = t.slices();
    let mut out = Vec::new();
    for dev in t.devices_of(ctx.process) {
        if ctx.device.is_some_and(|only| only != dev) {
            continue;
        }
        let d = &t.devices()[dev.index()];
        let limits = device_limits(d);
        let sm_count = d.sm_count;
        let mut occ = DeviceOccupancy {
            rank: ctx.rank,
            window: WHOLE_TRACE.to_string(),
            device: dev,
            name: d.name.clone(),
            sm_count,
            compute_capability: format!("{}.{}", d.compute_major, d.compute_minor),
            ..Default::default()
        };
        // Occupancy per launch configuration, computed once each.
        let per_launch: Vec<Option<Occupancy>> = t
            .launch_configs()
            .iter()
            .map(|lc| limits.as_ref().map(|l| occupancy(lc, l)))
            .collect();
        // (name, payload) -> row; start edges come in time order (ctx.gpu is
        // sorted by start), end edges are sorted once.
        let mut row_of: IntMap<u64, usize> = IntMap::default();
        let mut rows: Vec<KernelOccupancy> = Vec::new();
        // Sized once (no doubling copies left behind in the allocator).
        let kernels = ctx
            .gpu
            .iter()
            .filter(|e| {
                ctx.streams[e.stream as usize].device() == Some(dev)
                    && sl.kind()[e.id as usize] == SliceKind::Kernel
            })
            .count();
        let mut starts: Vec<Edge> = Vec::with_capacity(kernels);
        let mut ends: Vec<Edge> = Vec::with_capacity(kernels);
        let (mut occ_weighted, mut occ_time) = (0.0f64, 0i64);
        for e in ctx
            .gpu
            .iter()
            .filter(|e| ctx.streams[e.stream as usize].device() == Some(dev))
        {
            let i = e.id as usize;
            if sl.kind()[i] != SliceKind::Kernel {
                continue;
            }
            // ctx.gpu is sorted by e.s (µs-rounded for Kineto ranks): keeps `starts` sorted.
            let (s, end) = (e.s, e.e);
            let compute = (e.class == SliceClass::Compute) as i8;
            let known = t
                .launch_of(SliceId::from_index(i))
                .zip(per_launch.get(sl.payload()[i] as usize).copied().flatten());
            let Some((lc, o)) = known else {
                occ.kernels_unknown += 1;
                starts.push((s, 0, 0, compute));
                ends.push((end, 0, 0, -compute));
                continue;
            };
            occ.kernels_known += 1;
            let blocks = lc.blocks();
            let touched = blocks.min(sm_count as u64) as i32;
            let nccl = if e.class == SliceClass::Communication {
                touched.min(i16::MAX as i32) as i16
            } else {
                0
            };
            starts.push((s, touched, nccl, compute));
            ends.push((end, -touched, -nccl, -compute));
            if compute > 0 {
                occ_weighted += o.occupancy_pct * sl.dur_ns()[i] as f64;
                occ_time = occ_time.saturating_add(sl.dur_ns()[i]);
            }
            let key = ((sl.name()[i].get() as u64) << 32) | sl.payload()[i] as u64;
            let r = *row_of.entry(key).or_insert_with(|| {
                let filled = if o.blocks_per_sm == 0 {
                    0
                } else {
                    blocks.div_ceil(o.blocks_per_sm as u64).min(sm_count as u64) as u32
                };
                rows.push(KernelOccupancy {
                    name: t.str(sl.name()[i]).to_string(),
                    class: e.class.name().to_string(),
                    grid: lc.grid,
                    block: lc.block,
                    registers_per_thread: lc.registers_per_thread,
                    smem_bytes: lc.static_smem_bytes.saturating_add(lc.dynamic_smem_bytes),
                    blocks_per_sm: o.blocks_per_sm,
                    theoretical_occupancy_pct: o.occupancy_pct,
                    limiter: o.limiter.to_string(),
                    sms_filled: filled,
                    sms_touched: touched as u32,
                    ..Default::default()
                });
                rows.len() - 1
            });
            rows[r].count += 1;
            rows[r].total_us += sl.dur_ns()[i] as f64 / 1000.0;
        }
        occ.mean_compute_occupancy_pct = (occ_time > 0).then(|| occ_weighted / occ_time as f64);
        ends.sort_unstable_by_key(|e| e.0);
        let (series, share) = sweep(&starts, &ends, sm_count, opts.sm_series_max_points);
        occ.sms_in_use = series;
        occ.nccl_sm_share_pct = share;
        rows.sort_by(|a, b| {
            b.total_us
                .total_cmp(&a.total_us)
                .then_with(|| a.name.cmp(&b.name))
        });
        occ.kernels = rows;
        out.push(occ);
    }
    out
}

/// (ts, change of SMs held, change of SMs held by NCCL, change of running
/// compute kernels): 16 bytes.
type Edge = (i64, i32, i16, i8);

/// Sweeps start and end edges (each sorted by time; ends first at equal
/// times) into the SMs-in-use series, capped at the SM count, and the NCCL
/// share of SMs while at least one compute kernel runs.
fn sweep(
    starts: &[Edge],
    ends: &[Edge],
    sm_count: u32,
    max_points: usize,
) -> (Vec<(i64, u32)>, Option<f64>) {
    // Two sweeps: the first counts the points, so that the second keeps
    // only the downsampled ones (the full series is never stored).
    let mut points = 0usize;
    let share = sweep_points(starts, ends, sm_count, &mut |_, _| points += 1);
    let per = if max_points == 0 || points <= max_points {
        1
    } else {
        points.div_ceil(max_points)
    };
    let mut series: Vec<(i64, u32)> = Vec::with_capacity(points.div_ceil(per));
    let mut k = 0usize;
    sweep_points(starts, ends, sm_count, &mut |ts, v| {
        // The maximum of each bucket of `per` points, at its first time.
        if k.is_multiple_of(per) {
            series.push((ts, v));
        } else if let Some(last) = series.last_mut() {
            last.1 = last.1.max(v);
        }
        k += 1;
    });
    (series, share)
}

/// The sweep of [`sweep`]: each change of the SMs in use to `point`, and
/// the NCCL share.
fn sweep_points(
    starts: &[Edge],
    ends: &[Edge],
    sm_count: u32,
    point: &mut dyn FnMut(i64, u32),
) -> Option<f64> {
    let (mut sms, mut nccl, mut compute) = (0i64, 0i64, 0i64);
    let mut last: Option<u32> = None;
    let (mut nccl_area, mut compute_time) = (0f64, 0i64);
    let mut prev_t: Option<i64> = None;
    let cap = |v: i64| v.clamp(0, sm_count as i64);
    let (mut a, mut b) = (0usize, 0usize);
    while a < starts.len() || b < ends.len() {
        let ts = match (starts.get(a), ends.get(b)) {
            (Some(s), Some(e)) => s.0.min(e.0),
            (Some(s), None) => s.0,
            (None, Some(e)) => e.0,
            (None, None) => break,
        };
        if let Some(p) = prev_t {
            if compute > 0 && ts > p {
                nccl_area += cap(nccl) as f64 * ts.saturating_sub(p) as f64;
                compute_time = compute_time.saturating_add(ts.saturating_sub(p));
            }
        }
        let mut apply = |e: &Edge| {
            sms += e.1 as i64;
            nccl += e.2 as i64;
            compute += e.3 as i64;
        };
        while b < ends.len() && ends[b].0 == ts {
            apply(&ends[b]);
            b += 1;
        }
        while a < starts.len() && starts[a].0 == ts {
            apply(&starts[a]);
            a += 1;
        }
        let v = cap(sms) as u32;
        if last != Some(v) {
            point(ts, v);
            last = Some(v);
        }
        prev_t = Some(ts);
    }
    (compute_time > 0 && sm_count > 0)
        .then(|| 100.0 * nccl_area / (compute_time as f64 * sm_count as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lc(threads: u32, regs: u32, smem: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [1000, 1, 1],
            block: [threads, 1, 1],
            registers_per_thread: regs,
            static_smem_bytes: smem,
            dynamic_smem_bytes: 0,
        }
    }

    #[test]
    fn hopper_rules() {
        let Some(h) = arch_limits(9, 0) else {
            panic!("no Hopper limits in the table")
        };
        // 256 threads, 32 regs: 8 warps/block; warps limit 8 blocks; regs 65536/(32*32*8) = 8.
        let o = occupancy(&lc(256, 32, 0), &h);
        assert_eq!((o.blocks_per_sm, o.occupancy_pct), (8, 100.0));
        // 128 regs/thread: 4096 regs/warp -> 16 warps/SM -> 2 blocks of 8 warps: 25%.
        let o = occupancy(&lc(256, 128, 0), &h);
        assert_eq!((o.blocks_per_sm, o.limiter), (2, "registers"));
        assert_eq!(o.occupancy_pct, 25.0);
        // 100 KB smem + 1 KB reserved: 2 blocks in 228 KB.
        let o = occupancy(&lc(128, 0, 100 * 1024), &h);
        assert_eq!((o.blocks_per_sm, o.limiter), (2, "shared memory"));
        // Tiny blocks hit the 32-block cap.
        let o = occupancy(&lc(32, 16, 0), &h);
        assert_eq!((o.blocks_per_sm, o.limiter), (32, "blocks"));
        assert_eq!(o.occupancy_pct, 50.0);
    }

    #[test]
    fn per_arch_tables_and_device_overrides() {
        let Some(a86) = arch_limits(8, 6) else {
            panic!("8.6")
        };
        // 48 warps/SM: 6 blocks of 8 warps, full occupancy.
        let o = occupancy(&lc(256, 32, 0), &a86);
        assert_eq!((o.blocks_per_sm, o.occupancy_pct), (6, 100.0));
        let Some(a75) = arch_limits(7, 5) else {
            panic!("7.5")
        };
        assert_eq!(occupancy(&lc(256, 32, 0), &a75).blocks_per_sm, 4);
        // Volta reserves no shared memory per block: 48 KB blocks fit twice in 96 KB.
        let Some(a70) = arch_limits(7, 0) else {
            panic!("7.0")
        };
        assert_eq!(occupancy(&lc(128, 0, 48 * 1024), &a70).blocks_per_sm, 2);
        assert_eq!(arch_limits(6, 1), None);
        // The device record wins where it has a value.
        let d = Device {
            compute_major: 9,
            compute_minor: 0,
            max_threads_per_sm: 1024,
            ..Default::default()
        };
        let Some(l) = device_limits(&d) else {
            panic!("9.0")
        };
        assert_eq!(l.max_warps, 32);
        assert_eq!(l.smem_bytes, 228 * 1024);
    }

    #[test]
    fn series_caps_and_nccl_share() {
        // compute kernel holding 100 SMs over [0,100), NCCL holding 32 over [50,150); 132 SMs.
        let starts = vec![(0, 100, 0, 1), (50, 32, 32, 0)];
        let ends = vec![(100, -100, 0, -1), (150, -32, -32, 0)];
        let (series, share) = sweep(&starts, &ends, 132, 0);
        assert_eq!(series, vec![(0, 100), (50, 132), (100, 32), (150, 0)]);
        let expect = 100.0 * (32.0 * 50.0) / (100.0 * 132.0);
        assert!((share.unwrap_or(0.0) - expect).abs() < 1e-9);
        // At most 2 points: the maximum of each pair, at the pair's first time.
        let (series, _) = sweep(&starts, &ends, 132, 2);
        assert_eq!(series, vec![(0, 132), (100, 32)]);
        let (series, _) = sweep(&starts, &ends, 132, 3);
        assert_eq!(series, vec![(0, 132), (100, 32)]);
    }
}
