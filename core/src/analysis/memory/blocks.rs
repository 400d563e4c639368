//! The GPU memory blocks live at a rank's peak: the allocations and frees
//! of the trace's allocation table (`Trace::allocations`, torch.profiler's
//! `[memory]` events on a GPU) replayed by address up to and including the
//! event that reached the peak, the largest blocks kept with the CPU op
//! (and Python frame) their allocation happened in on its host thread.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::sync::{is_library_frame, python_location};
use crate::model::{ProcessId, SliceKind, StrId, Trace, TrackId};

/// Blocks listed at the peak, largest first.
pub const LIVE_BLOCKS_LISTED: usize = 10;

/// A GPU memory block allocated and not yet freed at the peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LiveBlock {
    /// Size of the block (bytes).
    pub bytes: u64,
    /// Its address on the GPU.
    pub address: u64,
    /// When it was allocated (ns, the trace's clock).
    pub allocated_at_ns: i64,
    /// The innermost CPU op on the allocating thread open at that instant
    /// (else the innermost other host slice that is no Python frame; ""
    /// when none is).
    pub op: String,
    /// The Python line that allocated it, "file.py:L (func)": the one the
    /// allocator's history kept (`streamscope record`), else of the Kineto
    /// python_function frames open there (traces recorded with stacks),
    /// the innermost of the program's own, else the innermost.
    pub python: Option<String>,
}

/// What the replay found live at the peak.
#[derive(Debug, Default)]
pub(super) struct LiveAtPeak {
    /// The largest blocks, at most [`LIVE_BLOCKS_LISTED`].
    pub blocks: Vec<LiveBlock>,
    /// Bytes of the live blocks the list leaves out.
    pub other_bytes: u64,
    /// How many live blocks the list leaves out.
    pub other_blocks: u64,
}

/// The blocks of GPU `gpu` (CUDA ordinal) of `process` live just after its
/// peak event: every allocation event before `peak_at`, and the first
/// `at_peak` of those at `peak_at` (in the order the trace holds them; the
/// peak is the `at_peak`-th allocator sample at its instant). An address
/// allocated again without a free replaces its block; a free of an address
/// never allocated in the trace (allocated before the capture) frees
/// nothing. O(n log n) in the allocation events, and a backward walk over
/// the allocating thread's slices per listed block.
pub(super) fn live_at_peak(
    t: &Trace,
    process: ProcessId,
    gpu: u32,
    peak_at: i64,
    at_peak: usize,
) -> LiveAtPeak {
    let a = t.allocations();
    let on_gpu: Vec<bool> = (t.devices().iter())
        .map(|d| d.process == process && d.ordinal == gpu)
        .collect();
    let mut rows: Vec<usize> = (0..a.len())
        .filter(|&i| on_gpu.get(a.device()[i].index()).copied().unwrap_or(false))
        .filter(|&i| a.ts_ns()[i] <= peak_at)
        .collect();
    // Stable: events at one instant keep the trace's order.
    rows.sort_by_key(|&i| a.ts_ns()[i]);
    let before = rows.partition_point(|&i| a.ts_ns()[i] < peak_at);
    rows.truncate(before.saturating_add(at_peak));
    // Address -> the row that allocated the block there.
    let mut live: HashMap<u64, usize> = HashMap::default();
    for &i in &rows {
        let addr = a.address()[i];
        match a.bytes()[i] {
            b if b > 0 => {
                live.insert(addr, i);
            }
            b if b < 0 => {
                live.remove(&addr);
            }
            _ => {}
        }
    }
    let mut blocks: Vec<usize> = live.into_values().collect();
    let size = |i: usize| a.bytes()[i].unsigned_abs();
    blocks.sort_unstable_by_key(|&i| (std::cmp::Reverse(size(i)), a.ts_ns()[i], a.address()[i]));
    let rest = blocks.get(LIVE_BLOCKS_LISTED..).unwrap_or(&[]);
    let other_bytes = rest.iter().fold(0u64, |s, &i| s.saturating_add(size(i)));
    let other_blocks = rest.len() as u64;
    blocks.truncate(LIVE_BLOCKS_LISTED);
    let blocks = blocks
        .into_iter()
        .map(|i| {
            let at = a.ts_ns()[i];
            let (op, found) = enclosing(t, a.track()[i], at);
            // The allocator's own history names the line itself.
            let site = a.site()[i];
            let python = if site == StrId::EMPTY {
                found
            } else {
                Some(t.str(site).to_string())
            };
            LiveBlock {
                bytes: size(i),
                address: a.address()[i],
                allocated_at_ns: at,
                op,
                python,
            }
        })
        .collect();
    LiveAtPeak {
        blocks,
        other_bytes,
        other_blocks,
    }
}

/// The innermost CPU op (else other host slice that is no Python frame)
/// open at `at` on `track`, and the Python line that made it: of the
/// Python frames open then, the innermost of the program's own (not of
/// PyTorch or an installed package, as sync reports pick them), else the
/// innermost, as "file.py:L (func)". Open: started at or before `at` and
/// ending at or after it.
fn enclosing(t: &Trace, track: TrackId, at: i64) -> (String, Option<String>) {
    let sl = t.slices();
    let tracks = sl.track();
    let lo = tracks.partition_point(|&x| x < track);
    let hi = tracks.partition_point(|&x| x <= track);
    let starts = &sl.start_ns()[lo..hi];
    let to = lo + starts.partition_point(|&s| s <= at);
    let (mut op, mut other) = (None, None);
    // Innermost first.
    let mut frames: Vec<String> = Vec::new();
    for j in (lo..to).rev() {
        if sl.start_ns()[j].saturating_add(sl.dur_ns()[j]) < at {
            continue;
        }
        let name = t.str(sl.name()[j]);
        let kind = sl.kind()[j];
        match python_location(name) {
            Some(loc) if kind == SliceKind::CpuOp => frames.push(loc),
            _ if kind == SliceKind::CpuOp => {
                op.get_or_insert(name);
            }
            _ => {
                other.get_or_insert(name);
            }
        }
    }
    let python = frames
        .iter()
        .find(|f| !is_library_frame(f))
        .or(frames.first())
        .cloned();
    (op.or(other).unwrap_or("").to_string(), python)
}
