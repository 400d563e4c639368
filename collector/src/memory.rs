//! GPU memory over time, from two sources:
//!
//! - PyTorch's caching allocator, through its own history
//!   (`torch.cuda.memory._record_memory_history`, switched on by
//!   python/sitecustomize.py when CUDA initializes). At exit, and when an
//!   allocation fails, the Python side hands the events not yet handed
//!   over to [`streamscope_memory_events`]: one call per GPU, with the
//!   allocator's totals at that instant. The totals after each event are
//!   found walking back from those (the history is a bounded ring: its
//!   first event is not the process's first), and written as the counter
//!   tracks "GPU N memory allocated (bytes)" and "GPU N memory reserved
//!   (bytes)" (the names torch.profiler's memory events import to), each
//!   block allocated or freed as an allocation row with the Python line
//!   that allocated it.
//! - CUPTI's memory records (`CUPTI_ACTIVITY_KIND_MEMORY2`): every
//!   cudaMalloc / cuMemAlloc / cudaFree of device memory, by any library
//!   (PyTorch's segments, NCCL's buffers, cuBLAS's workspace) or a native
//!   program, as the running total "GPU N device memory (bytes)" and
//!   allocation rows on the calling thread.
//!
//! An allocation that fails in PyTorch (a CUDA out-of-memory) is said by
//! [`streamscope_memory_oom`]: an instant [`protocol::OOM_EVENT`] on the
//! thread that asked, with the bytes asked, the allocator's total and the
//! free device memory then, and the Python line.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use streamscope_core::protocol;
use streamscope_core::{ArgValue, NewSlice, SliceKind};

use crate::convert::Converter;

/// The allocator actions the Python side hands over (sitecustomize.py's
/// `_ACTIONS`).
pub mod action {
    pub const ALLOC: i64 = 1;
    pub const FREE_REQUESTED: i64 = 2;
    pub const FREE_COMPLETED: i64 = 3;
    pub const SEGMENT_ALLOC: i64 = 4;
    pub const SEGMENT_FREE: i64 = 5;
    pub const SEGMENT_MAP: i64 = 6;
    pub const SEGMENT_UNMAP: i64 = 7;
    pub const OOM: i64 = 8;
}

/// One allocator event: action, address, bytes, time (CLOCK_MONOTONIC
/// ns), stream, index of its Python line in the batch's sites (−1: none).
pub type Row = [i64; 6];

/// The events of one GPU handed over at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub device: u32,
    pub rows: Vec<Row>,
    pub sites: Vec<String>,
    /// The allocator's allocated and reserved totals just after the last row.
    pub allocated_now: u64,
    pub reserved_now: u64,
    /// When the batch was handed over (CLOCK_MONOTONIC ns).
    pub at_ns: i64,
}

/// A failed allocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Oom {
    pub device: u32,
    pub tid: u32,
    pub at_ns: i64,
    pub bytes: u64,
    pub allocated: u64,
    pub free: u64,
    pub python: String,
}

static BATCHES: Mutex<Vec<Batch>> = Mutex::new(Vec::new());
static OOMS: Mutex<Vec<Oom>> = Mutex::new(Vec::new());
/// Events not kept (past [`MAX_ROWS`] waiting).
static LOST: AtomicU64 = AtomicU64::new(0);
/// Events waiting for the writer, at most (48 bytes each).
const MAX_ROWS: usize = 8 << 20;

/// Takes the batches and failed allocations handed over so far, and how
/// many events were not kept.
pub fn take() -> (Vec<Batch>, Vec<Oom>, u64) {
    let b = BATCHES
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    let o = OOMS
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    (b, o, LOST.load(Ordering::Relaxed))
}

/// Called by python/sitecustomize.py (ctypes.PyDLL, GIL held): `n` rows of
/// six i64 at `rows` for GPU `device`, `sites` the '\n'-separated Python
/// lines the rows index, and the allocator's totals now. Returns 0 when
/// kept, −1 when not (bad arguments, or too many events waiting).
///
/// # Safety
/// `rows` points at `n` × 6 i64 (or is null with `n` 0) and `sites` at a
/// NUL-terminated string (or is null), both alive for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamscope_memory_events(
    device: i32,
    rows: *const i64,
    n: usize,
    sites: *const c_char,
    allocated_now: u64,
    reserved_now: u64,
) -> c_int {
    std::panic::catch_unwind(|| {
        if device < 0 || (rows.is_null() && n > 0) {
            return -1;
        }
        let Some(len) = n.checked_mul(6) else {
            return -1;
        };
        let flat: &[i64] = if n == 0 {
            &[]
        } else {
            // SAFETY: the caller passes an array('q') of n rows of six i64
            // it keeps alive for the call; checked non-null above.
            unsafe { std::slice::from_raw_parts(rows, len) }
        };
        let sites = if sites.is_null() {
            Vec::new()
        } else {
            // SAFETY: a NUL-terminated bytes object the caller keeps alive.
            let s = unsafe { CStr::from_ptr(sites) }.to_string_lossy();
            if s.is_empty() {
                Vec::new()
            } else {
                s.split('\n').map(str::to_string).collect()
            }
        };
        let batch = Batch {
            device: device as u32,
            rows: flat
                .chunks_exact(6)
                .map(|c| [c[0], c[1], c[2], c[3], c[4], c[5]])
                .collect(),
            sites,
            allocated_now,
            reserved_now,
            at_ns: crate::process_info::monotonic_ns(),
        };
        match BATCHES.lock() {
            Ok(mut v) => {
                let waiting: usize = v.iter().map(|b| b.rows.len()).sum();
                if waiting + batch.rows.len() > MAX_ROWS {
                    LOST.fetch_add(batch.rows.len() as u64, Ordering::Relaxed);
                    return -1;
                }
                v.push(batch);
                0
            }
            Err(_) => -1,
        }
    })
    .unwrap_or(-1)
}

/// Called by python/sitecustomize.py's out-of-memory observer (GIL held,
/// on the thread whose allocation failed): GPU, when, bytes asked, the
/// allocator's allocated total and the device's free memory then, and the
/// Python line that asked.
///
/// # Safety
/// `python` is a NUL-terminated string alive for the call, or null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamscope_memory_oom(
    device: i32,
    at_ns: i64,
    bytes: u64,
    allocated: u64,
    free: u64,
    python: *const c_char,
) {
    let _ = std::panic::catch_unwind(|| {
        let python = if python.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated bytes object the caller keeps alive.
            unsafe { CStr::from_ptr(python) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() } as u32;
        if let Ok(mut v) = OOMS.lock() {
            if v.len() < 64 {
                v.push(Oom {
                    device: device.max(0) as u32,
                    tid,
                    at_ns,
                    bytes,
                    allocated,
                    free,
                    python,
                });
            }
        }
    });
}

/// Counter track names (the Kineto import's, so one analysis reads both).
pub fn allocated_track(device: u32) -> String {
    format!("GPU {device} memory allocated (bytes)")
}
pub fn reserved_track(device: u32) -> String {
    format!("GPU {device} memory reserved (bytes)")
}
pub fn device_track(device: u32) -> String {
    format!("GPU {device} {}", protocol::DEVICE_MEMORY_COUNTER_SUFFIX)
}

/// The allocator's (allocated, reserved) totals just after each row,
/// walking back from the totals after the last one; and the totals before
/// the first. A total that would go below zero (the ring began after
/// memory the batch's own rows free) stays at zero.
pub fn totals(b: &Batch) -> (Vec<(u64, u64)>, (u64, u64)) {
    let mut alloc = b.allocated_now as i128;
    let mut res = b.reserved_now as i128;
    let mut after = vec![(0, 0); b.rows.len()];
    for (i, r) in b.rows.iter().enumerate().rev() {
        after[i] = (alloc.max(0) as u64, res.max(0) as u64);
        let size = r[2].max(0) as i128;
        match r[0] {
            action::ALLOC => alloc -= size,
            action::FREE_REQUESTED => alloc += size,
            action::SEGMENT_ALLOC | action::SEGMENT_MAP => res -= size,
            action::SEGMENT_FREE | action::SEGMENT_UNMAP => res += size,
            _ => {}
        }
    }
    (after, (alloc.max(0) as u64, res.max(0) as u64))
}

/// Writes a batch: counter samples of both totals at each event that
/// moves them (and the totals in force just before the first event and
/// at the hand-over), an allocation row for each block allocated or freed
/// (on the "host (thread unknown)" track: the history does not say which
/// thread; the Python line does), all within the capture window.
pub fn write_batch(conv: &mut Converter, b: &Batch) {
    let (after, before) = totals(b);
    let a_track = conv.counter_track(b.device, &allocated_track(b.device));
    let r_track = conv.counter_track(b.device, &reserved_track(b.device));
    let (device, _) = conv.gpu_track(b.device);
    let thread = conv.unknown_thread_track();
    let sites: Vec<_> = b.sites.iter().map(|s| conv.trace.intern(s)).collect();
    let mut first = true;
    let mut last = before;
    for (r, &(alloc, res)) in b.rows.iter().zip(&after) {
        let at = r[3];
        if !conv.in_window(at, at) {
            last = (alloc, res);
            continue;
        }
        if first {
            first = false;
            // Just before: the samples at an instant stay one per row.
            conv.trace.push_counter(a_track, at - 1, last.0 as f64);
            conv.trace.push_counter(r_track, at - 1, last.1 as f64);
        }
        match r[0] {
            action::ALLOC | action::FREE_REQUESTED => {
                conv.trace.push_counter(a_track, at, alloc as f64);
                let signed = if r[0] == action::ALLOC { r[2] } else { -r[2] };
                let site = usize::try_from(r[5])
                    .ok()
                    .and_then(|k| sites.get(k).copied());
                conv.trace
                    .push_allocation(thread, device, at, r[1] as u64, signed, site);
            }
            action::SEGMENT_ALLOC
            | action::SEGMENT_MAP
            | action::SEGMENT_FREE
            | action::SEGMENT_UNMAP => conv.trace.push_counter(r_track, at, res as f64),
            _ => {}
        }
        last = (alloc, res);
    }
    if conv.in_window(b.at_ns, b.at_ns) {
        conv.trace
            .push_counter(a_track, b.at_ns, b.allocated_now as f64);
        conv.trace
            .push_counter(r_track, b.at_ns, b.reserved_now as f64);
    }
}

/// Writes a failed allocation: an instant on the asking thread.
pub fn write_oom(conv: &mut Converter, o: &Oom) {
    if !conv.in_window(o.at_ns, o.at_ns) {
        return;
    }
    let track = conv.thread_track(o.tid);
    let name = conv.trace.intern(protocol::OOM_EVENT);
    let mut s = NewSlice::new(track, SliceKind::Other, name, o.at_ns, 0);
    let mut args = vec![
        (conv.trace.intern("device"), ArgValue::UInt(o.device as u64)),
        (conv.trace.intern("bytes"), ArgValue::UInt(o.bytes)),
        (
            conv.trace.intern("allocated_bytes"),
            ArgValue::UInt(o.allocated),
        ),
        (conv.trace.intern("free_bytes"), ArgValue::UInt(o.free)),
    ];
    if !o.python.is_empty() {
        let v = conv.trace.intern(&o.python);
        args.push((conv.trace.intern("python"), ArgValue::Str(v)));
    }
    s.args = args;
    conv.trace.push_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(rows: Vec<Row>, allocated_now: u64, reserved_now: u64) -> Batch {
        Batch {
            device: 0,
            rows,
            sites: vec!["train.py:3 (main)".into()],
            allocated_now,
            reserved_now,
            at_ns: 1000,
        }
    }

    #[test]
    fn totals_walk_back_from_the_hand_over() {
        // 100 reserved and 40 allocated before the ring's first event.
        let b = batch(
            vec![
                [action::SEGMENT_ALLOC, 0x1000, 200, 10, 0, -1],
                [action::ALLOC, 0x1000, 64, 11, 0, 0],
                [action::FREE_REQUESTED, 0x1000, 64, 12, 0, -1],
                [action::FREE_COMPLETED, 0x1000, 64, 13, 0, -1],
                [action::ALLOC, 0x2000, 32, 14, 0, 0],
            ],
            72,
            300,
        );
        let (after, before) = totals(&b);
        assert_eq!(before, (40, 100));
        assert_eq!(
            after,
            vec![(40, 300), (104, 300), (40, 300), (40, 300), (72, 300)]
        );
    }

    #[test]
    fn totals_never_go_below_zero() {
        // The allocator says 0 now, but the ring holds a free of a block
        // allocated before it: the total before it is 64, not -64.
        let b = batch(vec![[action::FREE_REQUESTED, 0x1, 64, 5, 0, -1]], 0, 0);
        let (after, before) = totals(&b);
        assert_eq!(after, vec![(0, 0)]);
        assert_eq!(before, (64, 0));
        let b = batch(vec![[action::ALLOC, 0x1, 64, 5, 0, -1]], 0, 0);
        assert_eq!(totals(&b).1, (0, 0));
    }

    #[test]
    fn rows_are_read_from_the_python_side_layout() {
        let rows: Vec<i64> = vec![1, 0x10, 64, 100, 7, 0, 2, 0x10, 64, 200, 7, -1];
        let sites = c"a.py:1 (f)\nb.py:2 (g)";
        // SAFETY: rows holds 2 × 6 i64 and sites is NUL-terminated, both
        // alive for each call; the null rows are refused before any read.
        let (rc, bad_device, no_rows) = unsafe {
            (
                streamscope_memory_events(3, rows.as_ptr(), 2, sites.as_ptr(), 5, 9),
                streamscope_memory_events(-1, rows.as_ptr(), 2, sites.as_ptr(), 0, 0),
                streamscope_memory_events(0, std::ptr::null(), 2, sites.as_ptr(), 0, 0),
            )
        };
        assert_eq!((rc, bad_device, no_rows), (0, -1, -1));
        let (b, _, _) = take();
        let b: Vec<_> = b.into_iter().filter(|b| b.device == 3).collect();
        assert_eq!(b.len(), 1);
        assert_eq!(
            b[0].rows,
            vec![[1, 0x10, 64, 100, 7, 0], [2, 0x10, 64, 200, 7, -1]]
        );
        assert_eq!(b[0].sites, vec!["a.py:1 (f)", "b.py:2 (g)"]);
        assert_eq!((b[0].allocated_now, b[0].reserved_now), (5, 9));
    }
}
