//! GPU memory of a rank over time, from the caching allocator's totals
//! after each allocation and free: torch.profiler's `[memory]` events
//! (`profile_memory=True`), which the Kineto import keeps as the counter
//! tracks "GPU N memory allocated (bytes)" and "GPU N memory reserved
//! (bytes)". Per rank: the peak of allocated memory, when it happened and
//! in which step, what was reserved then (and so reserved but free:
//! fragmentation and cache), and the peak of reserved memory; per step:
//! the peaks within the step's bounds. Where the trace kept each block
//! allocated and freed (`Trace::allocations`), the largest blocks live at
//! the peak, with the op that allocated them (`blocks`). Docs:
//! docs/METRICS.md, "Memory".

mod blocks;

pub use blocks::{LiveBlock, LIVE_BLOCKS_LISTED};

use serde::{Deserialize, Serialize};

use super::rank::RankCtx;
use crate::model::{ArgValue, Trace, TrackKind};
use crate::protocol;

/// A rank's GPU memory (one GPU: the rank's, or the one it allocated most on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RankMemory {
    /// CUDA ordinal of the GPU.
    pub gpu: u32,
    /// Highest allocated total (bytes held by tensors).
    pub peak_allocated_bytes: u64,
    /// When it was first reached (ns, the trace's clock).
    pub peak_at_ns: i64,
    /// The step it was reached in, when steps are known and one holds it.
    pub peak_step: Option<i64>,
    /// Reserved total (held by the caching allocator) at that peak.
    pub reserved_at_peak_bytes: Option<u64>,
    /// Reserved − allocated at the peak: cached or fragmented, not in use.
    pub unused_reserved_at_peak_bytes: Option<u64>,
    /// Highest reserved total.
    pub peak_reserved_bytes: Option<u64>,
    /// Allocator samples (allocations and frees) read.
    pub samples: u64,
    /// The largest blocks allocated and not freed at the peak (at most
    /// [`LIVE_BLOCKS_LISTED`], largest first), from the allocation events
    /// up to and including the one that reached it; empty when the trace
    /// kept no blocks (a Perfetto trace, or allocation events without
    /// addresses). Blocks allocated before the capture are not known, so
    /// the blocks may sum to less than the peak.
    #[serde(default)]
    pub live_at_peak: Vec<LiveBlock>,
    /// Bytes of the blocks live at the peak that the list leaves out.
    #[serde(default)]
    pub live_at_peak_other_bytes: u64,
    /// How many blocks live at the peak the list leaves out.
    #[serde(default)]
    pub live_at_peak_other_blocks: u64,
    /// Where the allocated figures come from.
    #[serde(default)]
    pub source: MemorySource,
    /// Highest device memory held by cudaMalloc-style calls on the GPU
    /// (every library's: the allocator's segments, NCCL's buffers,
    /// cuBLAS's workspace), from CUPTI's memory records; `None` without
    /// them.
    #[serde(default)]
    pub peak_device_bytes: Option<u64>,
    /// The allocations that failed (CUDA out of memory) on the GPU, in
    /// time order.
    #[serde(default)]
    pub out_of_memory: Vec<OutOfMemory>,
}

/// A GPU memory allocation that failed (CUDA out of memory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct OutOfMemory {
    /// When (ns, the trace's clock).
    pub at_ns: i64,
    /// The step it happened in, when steps are known and one holds it.
    pub step: Option<i64>,
    /// Bytes asked for.
    pub bytes: u64,
    /// The allocator's allocated total then, when said.
    pub allocated_bytes: Option<u64>,
    /// Free device memory then, when said.
    pub free_bytes: Option<u64>,
    /// The Python line that asked, when known.
    pub python: Option<String>,
}

/// One step's GPU memory peaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StepMemory {
    /// Highest allocated total within the step's bounds (or, when no
    /// sample falls in it, the total in force at its start).
    pub peak_allocated_bytes: u64,
    /// Highest reserved total, the same way.
    pub peak_reserved_bytes: Option<u64>,
}

/// The allocated, reserved and device-memory series of one GPU: (ns,
/// bytes), in time order.
struct Series {
    gpu: u32,
    allocated: Vec<(i64, u64)>,
    reserved: Vec<(i64, u64)>,
    device: Vec<(i64, u64)>,
    /// Where `allocated` came from.
    source: MemorySource,
}

/// Where a rank's allocated series came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// PyTorch's caching allocator: torch.profiler's memory events, or
    /// the allocator history `streamscope record` keeps.
    #[default]
    Allocator,
    /// Device memory held by cudaMalloc-style calls (CUPTI's memory
    /// records): a program without PyTorch's allocator.
    Device,
}

/// Bytes from a counter value (negative or not finite: none).
fn bytes(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0).then(|| v.min(u64::MAX as f64) as u64)
}

/// The memory series of the rank's process on its GPU(s); the GPU with
/// the most allocator samples when several.
fn series(t: &Trace, ctx: &RankCtx) -> Option<Series> {
    let only = ctx.device;
    // Track index -> (GPU, which series: 0 allocated, 1 reserved, 2 device).
    let mut tracks: Vec<(u32, u32, u8)> = Vec::new();
    for (i, tr) in t.tracks().iter().enumerate() {
        let TrackKind::Counter { device: Some(d) } = tr.kind else {
            continue;
        };
        if tr.process != ctx.process || only.is_some_and(|o| o != d) {
            continue;
        }
        let name = t.str(tr.name);
        let Some(rest) = name.strip_prefix("GPU ") else {
            continue;
        };
        let which = if rest.ends_with(" memory allocated (bytes)") {
            0
        } else if rest.ends_with(" memory reserved (bytes)") {
            1
        } else if rest.ends_with(protocol::DEVICE_MEMORY_COUNTER_SUFFIX) {
            2
        } else {
            continue;
        };
        tracks.push((i as u32, t.devices()[d.index()].ordinal, which));
    }
    if tracks.is_empty() {
        return None;
    }
    let mut per_gpu: Vec<Series> = Vec::new();
    let c = t.counters();
    for k in 0..c.len() {
        let Some(&(_, gpu, which)) = tracks.iter().find(|x| x.0 == c.track()[k].get()) else {
            continue;
        };
        let Some(v) = bytes(c.value()[k]) else {
            continue;
        };
        let s = match per_gpu.iter().position(|s| s.gpu == gpu) {
            Some(p) => &mut per_gpu[p],
            None => {
                per_gpu.push(Series {
                    gpu,
                    allocated: Vec::new(),
                    reserved: Vec::new(),
                    device: Vec::new(),
                    source: MemorySource::Allocator,
                });
                per_gpu.last_mut()?
            }
        };
        let at = c.ts_ns()[k];
        match which {
            0 => s.allocated.push((at, v)),
            1 => s.reserved.push((at, v)),
            _ => s.device.push((at, v)),
        }
    }
    // The allocator's series where there is one; else device memory.
    let with_allocator = per_gpu.iter().any(|s| !s.allocated.is_empty());
    let mut best = per_gpu
        .into_iter()
        .filter(|s| !s.allocated.is_empty() || (!with_allocator && !s.device.is_empty()))
        .max_by_key(|s| {
            (
                s.allocated.len().max(s.device.len()),
                std::cmp::Reverse(s.gpu),
            )
        })?;
    // Stable: samples at one instant keep their order (the last is in force).
    best.allocated.sort_by_key(|x| x.0);
    best.reserved.sort_by_key(|x| x.0);
    best.device.sort_by_key(|x| x.0);
    if best.allocated.is_empty() {
        best.allocated = best.device.clone();
        best.source = MemorySource::Device;
    }
    Some(best)
}

/// The value in force at `at`: the last sample at or before it.
fn at_time(v: &[(i64, u64)], at: i64) -> Option<u64> {
    let k = v.partition_point(|x| x.0 <= at);
    k.checked_sub(1).map(|k| v[k].1)
}

/// Highest value within [a, b], counting the one in force at `a`.
fn peak_within(v: &[(i64, u64)], a: i64, b: i64) -> Option<u64> {
    let from = v.partition_point(|x| x.0 <= a);
    let to = v.partition_point(|x| x.0 <= b).max(from);
    let inside = v[from..to].iter().map(|x| x.1).max();
    inside.max(at_time(v, a))
}

/// The rank's memory and each step's, for steps given as (number, start,
/// end) (ns); `None` when the rank's process has no allocator samples.
pub fn of_rank(
    t: &Trace,
    ctx: &RankCtx,
    steps: &[(i64, i64, i64)],
) -> Option<(RankMemory, Vec<Option<StepMemory>>)> {
    let s = series(t, ctx)?;
    let (mut peak_i, mut peak) = (0, s.allocated[0].1);
    for (i, &(_, v)) in s.allocated.iter().enumerate() {
        if v > peak {
            (peak_i, peak) = (i, v);
        }
    }
    let peak_at = s.allocated[peak_i].0;
    // The peak's place among the samples of its instant (1 for the first).
    let at_peak = (peak_i + 1).saturating_sub(s.allocated.partition_point(|x| x.0 < peak_at));
    let live = blocks::live_at_peak(t, ctx.process, s.gpu, peak_at, at_peak);
    let reserved_at_peak = at_time(&s.reserved, peak_at);
    let rank = RankMemory {
        gpu: s.gpu,
        peak_allocated_bytes: peak,
        peak_at_ns: peak_at,
        peak_step: steps
            .iter()
            .find(|&&(_, a, b)| a <= peak_at && peak_at < b)
            .map(|x| x.0),
        reserved_at_peak_bytes: reserved_at_peak,
        unused_reserved_at_peak_bytes: reserved_at_peak.map(|r| r.saturating_sub(peak)),
        peak_reserved_bytes: s.reserved.iter().map(|x| x.1).max(),
        samples: (s.allocated.len() + s.reserved.len()) as u64,
        live_at_peak: live.blocks,
        live_at_peak_other_bytes: live.other_bytes,
        live_at_peak_other_blocks: live.other_blocks,
        source: s.source,
        peak_device_bytes: s.device.iter().map(|x| x.1).max(),
        out_of_memory: out_of_memory(t, ctx, s.gpu, steps),
    };
    let per_step = steps
        .iter()
        .map(|&(_, a, b)| {
            Some(StepMemory {
                peak_allocated_bytes: peak_within(&s.allocated, a, b)?,
                peak_reserved_bytes: peak_within(&s.reserved, a, b),
            })
        })
        .collect();
    Some((rank, per_step))
}

/// The failed allocations of the rank's process on GPU `gpu`: the
/// collector's [`protocol::OOM_EVENT`] instants, and torch.profiler's
/// `[OutOfMemory]` instants (`profile_memory=True`), in time order.
fn out_of_memory(
    t: &Trace,
    ctx: &RankCtx,
    gpu: u32,
    steps: &[(i64, i64, i64)],
) -> Vec<OutOfMemory> {
    let sl = t.slices();
    let mut out = Vec::new();
    let names: Vec<_> = [protocol::OOM_EVENT, "[OutOfMemory]"]
        .iter()
        .filter_map(|n| t.strings().lookup(n))
        .collect();
    if names.is_empty() {
        return out;
    }
    for i in 0..sl.len() {
        if !names.contains(&sl.name()[i]) || sl.kind()[i].is_gpu_activity() {
            continue;
        }
        let track = sl.track()[i];
        if t.tracks()[track.index()].process != ctx.process {
            continue;
        }
        let id = crate::model::SliceId::from_index(i);
        let num = |keys: &[&str]| {
            t.args_of(id).iter().find_map(|(k, v)| {
                keys.contains(&t.str(*k)).then_some(())?;
                match *v {
                    ArgValue::UInt(x) => Some(x),
                    ArgValue::Int(x) => u64::try_from(x).ok(),
                    ArgValue::Double(x) if x >= 0.0 && x.is_finite() => Some(x as u64),
                    _ => None,
                }
            })
        };
        let device = num(&["device", "Device Id"]);
        if device.is_some_and(|d| d != u64::from(gpu)) {
            continue;
        }
        let at = sl.start_ns()[i];
        out.push(OutOfMemory {
            at_ns: at,
            step: steps
                .iter()
                .find(|&&(_, a, b)| a <= at && at < b)
                .map(|x| x.0),
            bytes: num(&["bytes", "Bytes"]).unwrap_or(0),
            allocated_bytes: num(&["allocated_bytes", "Total Allocated"]),
            free_bytes: num(&["free_bytes"]),
            python: t.arg_string(id, "python").filter(|s| !s.is_empty()),
        });
    }
    out.sort_by_key(|o| o.at_ns);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_count_the_value_in_force_at_the_start() {
        let v = [(10, 5), (20, 9), (30, 2), (40, 7)];
        assert_eq!(at_time(&v, 5), None);
        assert_eq!(at_time(&v, 25), Some(9));
        // In force at 25: 9, then 2 at 30.
        assert_eq!(peak_within(&v, 25, 35), Some(9));
        assert_eq!(peak_within(&v, 30, 39), Some(2));
        assert_eq!(peak_within(&v, 31, 45), Some(7));
        assert_eq!(peak_within(&v, 0, 5), None);
        assert_eq!(bytes(-1.0), None);
        assert_eq!(bytes(f64::NAN), None);
        assert_eq!(bytes(3.0), Some(3));
    }
}
