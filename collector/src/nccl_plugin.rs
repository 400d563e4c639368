//! NCCL profiler plugin: the collector library also exports
//! `ncclProfiler_v5` (NCCL 2.28) and `ncclProfiler_v4` (NCCL 2.27), so
//! NCCL, told by `NCCL_PROFILER_PLUGIN` (set by `streamscope record`),
//! reports every collective and point-to-point operation to us: its
//! communicator, sequence number, function, count, data type, root or peer,
//! algorithm, protocol and channels, with host start/stop times on
//! CLOCK_MONOTONIC. The writer thread turns them into slices on an "NCCL"
//! track per communicator ([`trace`]).
//!
//! NCCL calls the plugin on its own threads, in the middle of enqueueing
//! work: every callback catches panics and returns `ncclSuccess` whatever
//! happens. Start and stop allocate nothing (an operation lives in a fixed
//! slot table between the two; see `Slots`) but the buffer's growth past
//! 1,024 operations per batch: stop takes one short lock to push a
//! fixed-size [`Op`] into that bounded buffer (full: counted as lost).
//! `init`, once per communicator, copies the communicator's name.
//! Contexts and event handles are small integers, never pointers NCCL
//! could make us dereference after they are gone: a stale, repeated or
//! foreign handle is ignored.

pub mod abi;
pub mod link;
pub mod trace;

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use abi::*;

/// What `init` asks NCCL for: collectives and point-to-point operations
/// (their `Group` parents come along and are ignored). Kernel-channel and
/// proxy events are not asked for: NCCL then adds proxy work to every
/// operation (ncclProfilerNeedsProxy) and their times are GPU globaltimer
/// ticks; CUPTI's kernel records already time the NCCL kernels.
pub const ACTIVATION_MASK: u64 = PROFILE_COLL | PROFILE_P2P;

/// Operations kept between two writes at most; more are counted as lost.
pub const MAX_OPS: usize = 1 << 16;
/// Communicators remembered at most (their operations are lost past it).
pub const MAX_COMMS: usize = 4096;
/// Operations started and not yet stopped at most (NCCL stops each right
/// after starting it, on the same thread).
const SLOTS: usize = 1024;

/// A short C string copied inline (NCCL's function, data type, algorithm
/// and protocol names are static literals of at most 14 characters).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Name {
    len: u8,
    bytes: [u8; 23],
}

impl Name {
    /// Copies at most 23 bytes of the NUL-terminated string at `p` (null:
    /// empty).
    ///
    /// # Safety
    /// `p` is null or points to a NUL-terminated string.
    pub unsafe fn from_ptr(p: *const c_char) -> Name {
        let mut n = Name::default();
        if p.is_null() {
            return n;
        }
        for i in 0..n.bytes.len() {
            // SAFETY: the caller's contract; we stop at the NUL, never past it.
            let b = unsafe { *p.add(i) } as u8;
            if b == 0 {
                break;
            }
            n.bytes[i] = b;
            n.len += 1;
        }
        n
    }

    pub fn as_str(&self) -> &str {
        let b = &self.bytes[..self.len as usize];
        match std::str::from_utf8(b) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Collective or point-to-point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OpKind {
    #[default]
    Coll,
    P2p,
}

/// One NCCL operation as the plugin saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    /// Index into the communicator table ([`comms`]).
    pub comm: u32,
    /// The thread that started it (NCCL's launching thread, or CUDA's
    /// host-callback thread for graph-captured and blocking launches).
    pub tid: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    /// Collectives: NCCL's per-communicator, per-function sequence number.
    pub seq: u64,
    pub count: u64,
    /// Collectives: root; point-to-point: peer.
    pub root: i32,
    pub rank: i32,
    pub channels: u8,
    pub warps: u8,
    pub func: Name,
    pub dtype: Name,
    pub algo: Name,
    pub proto: Name,
}

/// A communicator NCCL initialized the plugin for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comm {
    pub hash: u64,
    pub name: Option<String>,
    pub rank: i32,
    pub nranks: i32,
    pub nnodes: i32,
    /// Interface version NCCL used (5 or 4).
    pub version: u32,
}

static COMMS: Mutex<Vec<Comm>> = Mutex::new(Vec::new());
static OPS: Mutex<Vec<Op>> = Mutex::new(Vec::new());
static LOST: AtomicU64 = AtomicU64::new(0);
/// Interface version of the last `init` (0: never called).
static VERSION: AtomicU32 = AtomicU32::new(0);
static INITS: AtomicU64 = AtomicU64::new(0);

const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const STARTED: u32 = 2;
const STOPPING: u32 = 3;

struct Slot {
    state: AtomicU32,
    op: UnsafeCell<Op>,
}

/// Operations between start and stop. A slot is claimed (FREE -> CLAIMED)
/// by the thread that fills it, published (-> STARTED, Release), and taken
/// by exactly one stop (STARTED -> STOPPING, Acquire), which copies it out
/// and frees it: a second stop of the same handle finds it not STARTED.
struct Slots {
    slots: [Slot; SLOTS],
    next: AtomicUsize,
}

// SAFETY: a slot's `op` is written only by the thread that moved its state
// from FREE to CLAIMED and read only by the one that moved it from STARTED
// to STOPPING; the Release/Acquire pair on `state` orders the two.
unsafe impl Sync for Slots {}

const NO_NAME: Name = Name {
    len: 0,
    bytes: [0; 23],
};
const NO_OP: Op = Op {
    kind: OpKind::Coll,
    comm: 0,
    tid: 0,
    start_ns: 0,
    end_ns: 0,
    seq: 0,
    count: 0,
    root: 0,
    rank: 0,
    channels: 0,
    warps: 0,
    func: NO_NAME,
    dtype: NO_NAME,
    algo: NO_NAME,
    proto: NO_NAME,
};

static PENDING: Slots = Slots {
    slots: [const {
        Slot {
            state: AtomicU32::new(FREE),
            op: UnsafeCell::new(NO_OP),
        }
    }; SLOTS],
    next: AtomicUsize::new(0),
};

/// Handles are slot index + this, so that no handle is a small number NCCL
/// could take for "none" and none is a real address we would dereference.
const HANDLE_BASE: usize = 0x5353_0000;
/// Contexts are communicator index + this.
const CONTEXT_BASE: usize = 0x5343_0000;

impl Slots {
    /// Stores `op`; its handle, or None when every slot probed is busy.
    fn start(&self, op: Op) -> Option<usize> {
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..64 {
            let i = (first + k) % SLOTS;
            let s = &self.slots[i];
            if s.state
                .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: CLAIMED by us: no other thread touches `op` (see Slots).
                unsafe { *s.op.get() = op };
                s.state.store(STARTED, Ordering::Release);
                return Some(HANDLE_BASE + i);
            }
        }
        None
    }

    /// Takes the operation of `handle` back, once.
    fn stop(&self, handle: usize) -> Option<Op> {
        let i = handle.checked_sub(HANDLE_BASE)?;
        let s = self.slots.get(i)?;
        s.state
            .compare_exchange(STARTED, STOPPING, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // SAFETY: STOPPING by us: the starter's writes are visible (Acquire)
        // and nobody else reads or writes `op` until we free the slot.
        let op = unsafe { *s.op.get() };
        s.state.store(FREE, Ordering::Release);
        Some(op)
    }
}

fn push(op: Op) {
    match OPS.lock() {
        Ok(mut v) if v.len() < MAX_OPS => v.push(op),
        _ => {
            LOST.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Takes the operations stopped so far (the writer calls it each batch),
/// and how many were lost since the start.
pub fn take_ops() -> (Vec<Op>, u64) {
    let mut fresh = Vec::with_capacity(1024);
    if let Ok(mut v) = OPS.lock() {
        std::mem::swap(&mut *v, &mut fresh);
    }
    (fresh, LOST.load(Ordering::Relaxed))
}

/// The communicators seen so far (index = [`Op::comm`]).
pub fn comms() -> Vec<Comm> {
    COMMS.lock().map(|c| c.clone()).unwrap_or_default()
}

/// (interface version of the last init, communicators initialized); (0, 0)
/// when NCCL never called init.
pub fn plugin_status() -> (u32, u64) {
    (
        VERSION.load(Ordering::Relaxed),
        INITS.load(Ordering::Relaxed),
    )
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// # Safety
/// The pointers are null or NCCL's arguments to `init`.
#[allow(clippy::too_many_arguments)]
unsafe fn init_common(
    version: u32,
    context: *mut *mut c_void,
    comm_hash: u64,
    mask: *mut c_int,
    name: *const c_char,
    nnodes: c_int,
    nranks: c_int,
    rank: c_int,
) {
    if !context.is_null() {
        // SAFETY: NCCL's out-parameter for the context.
        unsafe { *context = std::ptr::null_mut() };
    }
    let name = (!name.is_null()).then(|| {
        // SAFETY: NCCL passes the communicator's NUL-terminated name.
        let s = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        s.chars().take(128).collect::<String>()
    });
    let comm = Comm {
        hash: comm_hash,
        name: name.filter(|n| !n.is_empty()),
        rank,
        nranks,
        nnodes,
        version,
    };
    let index = match COMMS.lock() {
        Ok(mut c) if c.len() < MAX_COMMS => {
            c.push(comm);
            Some(c.len() - 1)
        }
        _ => None,
    };
    VERSION.store(version, Ordering::Relaxed);
    INITS.fetch_add(1, Ordering::Relaxed);
    if let (Some(i), false) = (index, context.is_null()) {
        // SAFETY: as above.
        unsafe { *context = (CONTEXT_BASE + i) as *mut c_void };
    }
    if !mask.is_null() {
        // SAFETY: NCCL's activation mask, an int it reads after init.
        unsafe { *mask = ACTIVATION_MASK as c_int };
    }
}

/// # Safety
/// `handle` is null or NCCL's out-parameter; `u` points to the descriptor's
/// union when `kind` is Coll or P2p.
unsafe fn start_common(
    context: *mut c_void,
    handle: *mut *mut c_void,
    kind: u64,
    rank: c_int,
    coll: *const CollDescr,
    p2p: *const P2pDescr,
) {
    if handle.is_null() {
        return;
    }
    // SAFETY: NCCL's out-parameter for the event handle.
    unsafe { *handle = std::ptr::null_mut() };
    if kind != PROFILE_COLL && kind != PROFILE_P2P {
        return; // Group and API events: no handle, so NCCL never stops them
    }
    let comm = match (context as usize).checked_sub(CONTEXT_BASE) {
        Some(c) if c < MAX_COMMS => c as u32,
        _ => {
            LOST.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let mut op = Op {
        comm,
        rank,
        tid: gettid(),
        ..Op::default()
    };
    if kind == PROFILE_COLL {
        // SAFETY: the caller's contract: `coll` is the live descriptor's union.
        let c = unsafe { std::ptr::read(coll) };
        op.kind = OpKind::Coll;
        op.seq = c.seq_number;
        op.count = c.count as u64;
        op.root = c.root;
        op.channels = c.n_channels;
        op.warps = c.n_warps;
        // SAFETY: NCCL's static name strings (or null).
        unsafe {
            op.func = Name::from_ptr(c.func);
            op.dtype = Name::from_ptr(c.datatype);
            op.algo = Name::from_ptr(c.algo);
            op.proto = Name::from_ptr(c.proto);
        }
    } else {
        // SAFETY: as above, the p2p member.
        let p = unsafe { std::ptr::read(p2p) };
        op.kind = OpKind::P2p;
        op.count = p.count as u64;
        op.root = p.peer;
        op.channels = p.n_channels;
        // SAFETY: NCCL's static name strings (or null).
        unsafe {
            op.func = Name::from_ptr(p.func);
            op.dtype = Name::from_ptr(p.datatype);
        }
    }
    op.start_ns = crate::process_info::monotonic_ns();
    match PENDING.start(op) {
        // SAFETY: as above.
        Some(h) => unsafe { *handle = h as *mut c_void },
        None => {
            LOST.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn guarded(f: impl FnOnce()) -> NcclResult {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    NCCL_SUCCESS
}

unsafe extern "C" fn init_v5(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    name: *const c_char,
    nnodes: c_int,
    nranks: c_int,
    rank: c_int,
    _log: LogFn,
) -> NcclResult {
    // SAFETY: NCCL's arguments, as init_common expects.
    guarded(|| unsafe { init_common(5, context, comm_id, mask, name, nnodes, nranks, rank) })
}

unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    name: *const c_char,
    comm_hash: u64,
    nnodes: c_int,
    nranks: c_int,
    rank: c_int,
    _log: LogFn,
) -> NcclResult {
    // SAFETY: NCCL's arguments, as init_common expects.
    guarded(|| unsafe { init_common(4, context, comm_hash, mask, name, nnodes, nranks, rank) })
}

unsafe extern "C" fn start_v5(
    context: *mut c_void,
    handle: *mut *mut c_void,
    d: *mut EventDescrV5,
) -> NcclResult {
    guarded(|| {
        if d.is_null() {
            return;
        }
        // SAFETY: NCCL's descriptor of the v5 layout, alive during the call;
        // only the members of its type are read.
        unsafe {
            let u = std::ptr::addr_of!((*d).u);
            start_common(
                context,
                handle,
                (*d).kind,
                (*d).rank,
                std::ptr::addr_of!((*u).coll),
                std::ptr::addr_of!((*u).p2p),
            )
        }
    })
}

unsafe extern "C" fn start_v4(
    context: *mut c_void,
    handle: *mut *mut c_void,
    d: *mut EventDescrV4,
) -> NcclResult {
    guarded(|| {
        if d.is_null() {
            return;
        }
        // SAFETY: NCCL's descriptor of the v4 layout, as in start_v5.
        unsafe {
            let u = std::ptr::addr_of!((*d).u);
            start_common(
                context,
                handle,
                u64::from((*d).kind),
                (*d).rank,
                std::ptr::addr_of!((*u).coll),
                std::ptr::addr_of!((*u).p2p),
            )
        }
    })
}

unsafe extern "C" fn stop_event(handle: *mut c_void) -> NcclResult {
    guarded(|| {
        if let Some(mut op) = PENDING.stop(handle as usize) {
            op.end_ns = crate::process_info::monotonic_ns().max(op.start_ns);
            push(op);
        }
    })
}

unsafe extern "C" fn record_event_state(
    _handle: *mut c_void,
    _state: c_int,
    _args: *mut c_void,
) -> NcclResult {
    // Coll and P2p events have no states; nothing else is asked for.
    NCCL_SUCCESS
}

unsafe extern "C" fn finalize(_context: *mut c_void) -> NcclResult {
    // The context is an index; the communicator stays in the table for the
    // writer (its operations may not be written yet).
    NCCL_SUCCESS
}

/// What NCCL logs as the plugin's name.
pub const PLUGIN_NAME: &CStr = c"streamscope";

/// The table NCCL 2.28 looks up (`dlsym(lib, "ncclProfiler_v5")`).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v5: ProfilerV5 = ProfilerV5 {
    name: PLUGIN_NAME.as_ptr(),
    init: init_v5,
    start_event: start_v5,
    stop_event,
    record_event_state,
    finalize,
};

/// The table NCCL 2.27 looks up (and 2.28 when v5 is missing).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v4: ProfilerV4 = ProfilerV4 {
    name: PLUGIN_NAME.as_ptr(),
    init: init_v4,
    start_event: start_v4,
    stop_event,
    record_event_state,
    finalize,
};

#[cfg(test)]
mod tests;
