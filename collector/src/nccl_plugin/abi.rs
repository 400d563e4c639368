//! The C interface of NCCL's profiler plugin, versions 4 (NCCL 2.27) and 5
//! (NCCL 2.28), as plain `repr(C)` mirrors.
//!
//! Written from `ext-profiler/example/nccl/profiler.h`, `profiler_v4.h` and
//! `profiler_v5.h` of NCCL v2.28.9-1 (the profiler headers are the same in
//! v2.28.3-1). Only the members the collector reads are named; the rest of
//! each union is covered by a padding member so the sizes match too (the
//! tests below pin every offset against the numbers taken from the header
//! with `offsetof` on x86-64 Linux).
//!
//! An event descriptor is laid out as `{ type; void* parentObj; int rank;
//! union { ... } }`: `type` is a `uint64_t` in v5 and a `uint8_t` in v4, and
//! the union starts at byte 24 in both. The `coll` and `p2p` members of v4
//! are those of v5 without v5's trailing `parentGroup` pointer, so both
//! versions share [`CollDescr`] and [`P2pDescr`] here (that pointer is not
//! read).

use std::ffi::{c_char, c_int, c_void};

/// `ncclResult_t` (a C enum).
pub type NcclResult = c_int;
/// `ncclSuccess`.
pub const NCCL_SUCCESS: NcclResult = 0;

/// Event type bits of `eActivationMask` and of a descriptor's `type`
/// (`profiler.h`, the same in v4 and v5).
pub const PROFILE_GROUP: u64 = 1 << 0;
pub const PROFILE_COLL: u64 = 1 << 1;
pub const PROFILE_P2P: u64 = 1 << 2;
pub const PROFILE_PROXY_OP: u64 = 1 << 3;
pub const PROFILE_KERNEL_CH: u64 = 1 << 6;

/// `ncclDebugLogger_t`: a variadic C function; never called here, so only
/// its pointer is carried.
pub type LogFn = *const c_void;

/// The `coll` member of the descriptor union (v5 without `parentGroup`,
/// which is the whole of v4's).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollDescr {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// The `p2p` member of the descriptor union (v5 without `parentGroup`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pDescr {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub n_channels: u8,
}

/// The descriptor union of v5: its largest member (`coll` with
/// `parentGroup`) is 88 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnionV5 {
    pub coll: CollDescr,
    pub p2p: P2pDescr,
    _size: [u64; 11],
}

/// The descriptor union of v4: its largest member (`coll`) is 80 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrUnionV4 {
    pub coll: CollDescr,
    pub p2p: P2pDescr,
    _size: [u64; 10],
}

/// `ncclProfilerEventDescr_v5_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EventDescrV5 {
    pub kind: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: DescrUnionV5,
}

/// `ncclProfilerEventDescr_v4_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EventDescrV4 {
    pub kind: u8,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: DescrUnionV4,
}

/// `init` of v5: (context out, commId, eActivationMask, commName, nNodes,
/// nranks, rank, logfn).
pub type InitV5 = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    *mut c_int,
    *const c_char,
    c_int,
    c_int,
    c_int,
    LogFn,
) -> NcclResult;
/// `init` of v4: (context out, eActivationMask, commName, commHash,
/// nNodes, nranks, rank, logfn).
pub type InitV4 = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_int,
    *const c_char,
    u64,
    c_int,
    c_int,
    c_int,
    LogFn,
) -> NcclResult;
/// `startEvent`: (context, event handle out, descriptor).
pub type StartV5 =
    unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut EventDescrV5) -> NcclResult;
pub type StartV4 =
    unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut EventDescrV4) -> NcclResult;
/// `stopEvent`: (event handle).
pub type StopFn = unsafe extern "C" fn(*mut c_void) -> NcclResult;
/// `recordEventState`: (event handle, state (a C enum), state args).
pub type RecordStateFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> NcclResult;
/// `finalize`: (context).
pub type FinalizeFn = unsafe extern "C" fn(*mut c_void) -> NcclResult;

/// `ncclProfiler_v5_t`: the table NCCL 2.28 looks up as `ncclProfiler_v5`.
#[repr(C)]
pub struct ProfilerV5 {
    pub name: *const c_char,
    pub init: InitV5,
    pub start_event: StartV5,
    pub stop_event: StopFn,
    pub record_event_state: RecordStateFn,
    pub finalize: FinalizeFn,
}

/// `ncclProfiler_v4_t`: the table NCCL 2.27 looks up as `ncclProfiler_v4`
/// (NCCL 2.28 too, when there is no v5).
#[repr(C)]
pub struct ProfilerV4 {
    pub name: *const c_char,
    pub init: InitV4,
    pub start_event: StartV4,
    pub stop_event: StopFn,
    pub record_event_state: RecordStateFn,
    pub finalize: FinalizeFn,
}

// SAFETY: the tables are immutable statics; `name` points to a static C
// string literal and the rest are function pointers, all valid to share.
unsafe impl Sync for ProfilerV5 {}
// SAFETY: as for ProfilerV5.
unsafe impl Sync for ProfilerV4 {}

/// Offsets (bytes) and sizes read from NCCL v2.28.9-1's
/// `ext-profiler/example/nccl/profiler_v5.h` and `profiler_v4.h` with
/// `offsetof`/`sizeof` (x86-64 Linux, gcc).
pub mod header {
    pub const V5_SIZE: usize = 112;
    pub const V4_SIZE: usize = 104;
    pub const TYPE: usize = 0;
    pub const PARENT_OBJ: usize = 8;
    pub const RANK: usize = 16;
    pub const UNION: usize = 24;
    pub const COLL_SEQ_NUMBER: usize = 24;
    pub const COLL_FUNC: usize = 32;
    pub const COLL_COUNT: usize = 56;
    pub const COLL_ROOT: usize = 64;
    pub const COLL_DATATYPE: usize = 72;
    pub const COLL_N_CHANNELS: usize = 80;
    pub const COLL_N_WARPS: usize = 81;
    pub const COLL_ALGO: usize = 88;
    pub const COLL_PROTO: usize = 96;
    pub const P2P_FUNC: usize = 24;
    pub const P2P_DATATYPE: usize = 40;
    pub const P2P_COUNT: usize = 48;
    pub const P2P_PEER: usize = 56;
    pub const P2P_N_CHANNELS: usize = 60;
    /// `ncclProfiler_v5_t` / `_v4_t`: six pointers.
    pub const TABLE_SIZE: usize = 48;
    pub const TABLE_FINALIZE: usize = 40;
}

#[cfg(test)]
mod tests {
    use super::header as h;
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn descriptors_match_the_headers() {
        assert_eq!(size_of::<EventDescrV5>(), h::V5_SIZE);
        assert_eq!(size_of::<EventDescrV4>(), h::V4_SIZE);
        for (kind, parent, rank, u) in [
            (
                offset_of!(EventDescrV5, kind),
                offset_of!(EventDescrV5, parent_obj),
                offset_of!(EventDescrV5, rank),
                offset_of!(EventDescrV5, u),
            ),
            (
                offset_of!(EventDescrV4, kind),
                offset_of!(EventDescrV4, parent_obj),
                offset_of!(EventDescrV4, rank),
                offset_of!(EventDescrV4, u),
            ),
        ] {
            assert_eq!(
                (kind, parent, rank, u),
                (h::TYPE, h::PARENT_OBJ, h::RANK, h::UNION)
            );
        }
        let c = |o: usize| h::UNION + o;
        assert_eq!(c(offset_of!(CollDescr, seq_number)), h::COLL_SEQ_NUMBER);
        assert_eq!(c(offset_of!(CollDescr, func)), h::COLL_FUNC);
        assert_eq!(c(offset_of!(CollDescr, count)), h::COLL_COUNT);
        assert_eq!(c(offset_of!(CollDescr, root)), h::COLL_ROOT);
        assert_eq!(c(offset_of!(CollDescr, datatype)), h::COLL_DATATYPE);
        assert_eq!(c(offset_of!(CollDescr, n_channels)), h::COLL_N_CHANNELS);
        assert_eq!(c(offset_of!(CollDescr, n_warps)), h::COLL_N_WARPS);
        assert_eq!(c(offset_of!(CollDescr, algo)), h::COLL_ALGO);
        assert_eq!(c(offset_of!(CollDescr, proto)), h::COLL_PROTO);
        assert_eq!(c(offset_of!(P2pDescr, func)), h::P2P_FUNC);
        assert_eq!(c(offset_of!(P2pDescr, datatype)), h::P2P_DATATYPE);
        assert_eq!(c(offset_of!(P2pDescr, count)), h::P2P_COUNT);
        assert_eq!(c(offset_of!(P2pDescr, peer)), h::P2P_PEER);
        assert_eq!(c(offset_of!(P2pDescr, n_channels)), h::P2P_N_CHANNELS);
    }

    #[test]
    fn tables_match_the_headers() {
        assert_eq!(size_of::<ProfilerV5>(), h::TABLE_SIZE);
        assert_eq!(size_of::<ProfilerV4>(), h::TABLE_SIZE);
        assert_eq!(offset_of!(ProfilerV5, finalize), h::TABLE_FINALIZE);
        assert_eq!(offset_of!(ProfilerV4, finalize), h::TABLE_FINALIZE);
    }
}
