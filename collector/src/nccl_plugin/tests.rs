//! The exported tables called as NCCL calls them (init, startEvent for a
//! Group, a Coll and a P2p, recordEventState, stopEvent, finalize), then the
//! operations through the writer's conversion and a Perfetto round trip.

use std::ffi::{c_int, c_void};
use std::path::Path;
use std::sync::Arc;

use streamscope_core::perfetto::read_stream;
use streamscope_core::perfetto::PerfettoWriter;
use streamscope_core::protocol;
use streamscope_core::*;

use super::trace::{dtype_size, keys, NcclWriter};
use super::*;
use crate::capture::{CaptureSpec, CaptureWindow, Trigger};
use crate::convert::{Converter, HostInfo};
use crate::python::PyLines;

struct NoHost;

impl HostInfo for NoHost {
    fn device(&mut self, ordinal: u32) -> Device {
        Device {
            ordinal,
            ..Default::default()
        }
    }
    fn api_name(&mut self, _driver: bool, cbid: u32) -> String {
        format!("api{cbid}")
    }
    fn thread_name(&mut self, _tid: u32) -> Option<String> {
        None
    }
}

fn converter() -> Converter {
    let window = CaptureWindow::new(
        CaptureSpec {
            trigger: Trigger::Always,
            delay_ns: 0,
            duration_ns: None,
        },
        0,
    );
    let p = Process {
        pid: 100,
        name: "rank 1 · h · 100".into(),
        rank: Some(1),
        ..Default::default()
    };
    Converter::new(
        p,
        Box::new(NoHost),
        Arc::new(window),
        Arc::new(PyLines::default()),
    )
}

fn zeroed_v5(kind: u64) -> EventDescrV5 {
    // SAFETY: every field of the descriptor is an integer or a raw pointer,
    // for which all-zero bytes are valid (NCCL starts from `= { 0 }` too).
    let mut d: EventDescrV5 = unsafe { std::mem::zeroed() };
    d.kind = kind;
    d.rank = 1;
    d
}

/// One test for everything that goes through the plugin's process-wide
/// buffers (tests run in parallel threads).
#[test]
fn nccl_calls_reach_the_trace() {
    let t = &ncclProfiler_v5;
    let mut ctx: *mut c_void = std::ptr::null_mut();
    let mut mask: c_int = 0;
    // SAFETY: the arguments NCCL passes: out-pointers to live locals and a
    // NUL-terminated name.
    let rc = unsafe {
        (t.init)(
            &mut ctx,
            0x1234_5678_9abc_def0,
            &mut mask,
            c"fsdp-pg".as_ptr(),
            1,
            2,
            1,
            std::ptr::null(),
        )
    };
    assert_eq!(rc, NCCL_SUCCESS);
    assert!(!ctx.is_null());
    assert_eq!(mask as u64, ACTIVATION_MASK);
    assert_eq!(plugin_status().0, 5);

    // A Group event (its parent): no handle, so NCCL never stops it.
    let mut group: *mut c_void = std::ptr::dangling_mut::<c_void>();
    let mut d = zeroed_v5(abi::PROFILE_GROUP);
    // SAFETY: NCCL's arguments: our context, an out-handle, a live descriptor.
    let rc = unsafe { (t.start_event)(ctx, &mut group, &mut d) };
    assert_eq!(rc, NCCL_SUCCESS);
    assert!(group.is_null());

    let mut coll = zeroed_v5(abi::PROFILE_COLL);
    coll.u.coll = CollDescr {
        seq_number: 41,
        func: c"AllGather".as_ptr(),
        send_buff: std::ptr::null(),
        recv_buff: std::ptr::null_mut(),
        count: 1000,
        root: 0,
        datatype: c"ncclBfloat16".as_ptr(),
        n_channels: 8,
        n_warps: 16,
        algo: c"RING".as_ptr(),
        proto: c"SIMPLE".as_ptr(),
    };
    let mut h_coll: *mut c_void = std::ptr::null_mut();
    // SAFETY: as above.
    unsafe { (t.start_event)(ctx, &mut h_coll, &mut coll) };
    assert!(!h_coll.is_null());
    let mut p2p = zeroed_v5(abi::PROFILE_P2P);
    p2p.u.p2p = P2pDescr {
        func: c"Send".as_ptr(),
        buff: std::ptr::null_mut(),
        datatype: c"ncclFloat32".as_ptr(),
        count: 256,
        peer: 0,
        n_channels: 2,
    };
    let mut h_p2p: *mut c_void = std::ptr::null_mut();
    // SAFETY: as above.
    unsafe { (t.start_event)(ctx, &mut h_p2p, &mut p2p) };
    assert!(!h_p2p.is_null() && h_p2p != h_coll);
    // SAFETY: a handle we gave out, no state args (NCCL passes NULL for some).
    unsafe {
        assert_eq!(
            (t.record_event_state)(h_coll, 22, std::ptr::null_mut()),
            NCCL_SUCCESS
        );
        assert_eq!((t.stop_event)(h_coll), NCCL_SUCCESS);
        assert_eq!((t.stop_event)(h_p2p), NCCL_SUCCESS);
        // A second stop, a null and a foreign handle are ignored.
        assert_eq!((t.stop_event)(h_coll), NCCL_SUCCESS);
        assert_eq!((t.stop_event)(std::ptr::null_mut()), NCCL_SUCCESS);
        assert_eq!((t.stop_event)(0xdead_beef as *mut c_void), NCCL_SUCCESS);
        // A null context (init failed for that communicator): no handle.
        let mut h: *mut c_void = std::ptr::null_mut();
        (t.start_event)(std::ptr::null_mut(), &mut h, &mut coll);
        assert!(h.is_null());
        assert_eq!((t.finalize)(ctx), NCCL_SUCCESS);
    }

    // The v4 table: same descriptor union, a one-byte type, another init order.
    let t4 = &ncclProfiler_v4;
    let mut ctx4: *mut c_void = std::ptr::null_mut();
    // SAFETY: as for v5, in v4's argument order.
    unsafe {
        (t4.init)(
            &mut ctx4,
            &mut mask,
            std::ptr::null(),
            0xfeed,
            1,
            2,
            0,
            std::ptr::null(),
        )
    };
    // SAFETY: all-zero is a valid descriptor (integers and pointers).
    let mut d4: EventDescrV4 = unsafe { std::mem::zeroed() };
    d4.kind = abi::PROFILE_COLL as u8;
    // SAFETY: the coll member was the one written above.
    d4.u.coll = unsafe { coll.u.coll };
    let mut h4: *mut c_void = std::ptr::null_mut();
    // SAFETY: as above.
    unsafe {
        (t4.start_event)(ctx4, &mut h4, &mut d4);
        (t4.stop_event)(h4);
    }
    assert_eq!(plugin_status(), (4, 2));

    let (ops, lost) = take_ops();
    assert_eq!(lost, 1, "the start without a context");
    assert_eq!(ops.len(), 3, "{ops:?}");
    let c = ops[0];
    assert_eq!(c.kind, OpKind::Coll);
    assert_eq!(
        (c.seq, c.count, c.channels, c.warps, c.rank),
        (41, 1000, 8, 16, 1)
    );
    assert_eq!(
        [
            c.func.as_str(),
            c.dtype.as_str(),
            c.algo.as_str(),
            c.proto.as_str()
        ],
        ["AllGather", "ncclBfloat16", "RING", "SIMPLE"]
    );
    assert!(c.end_ns >= c.start_ns && c.start_ns > 0);
    assert_eq!(ops[1].kind, OpKind::P2p);
    assert_eq!((ops[1].root, ops[1].count), (0, 256));

    // The writer's conversion and a Perfetto round trip.
    let mut conv = converter();
    let mut nw = NcclWriter::default();
    nw.add(&mut conv, &ops);
    conv.set_process_metadata(protocol::NCCL_PLUGIN_KEY, "v5".into());
    let mut w = PerfettoWriter::new(Vec::new());
    conv.trace
        .flush_events(|t| w.write_batch(t))
        .expect("batch");
    let bytes = conv.trace.flush_events(|t| w.finish(t)).expect("finish");
    let back = read_stream(Path::new("mem.pftrace"), bytes.as_slice()).expect("read back");
    let nccl: Vec<usize> = (0..back.slices().len())
        .filter(|&i| {
            back.str(back.slices().name()[i])
                .starts_with(protocol::NCCL_SLICE_PREFIX)
        })
        .collect();
    assert_eq!(nccl.len(), 3);
    let i = nccl[0];
    assert_eq!(back.str(back.slices().name()[i]), "NCCL AllGather");
    assert_eq!(back.slices().kind()[i], SliceKind::Other);
    let track = back.track_name(back.slices().track()[i]);
    assert_eq!(track, "NCCL · comm 0x123456789abcdef0 (fsdp-pg) · rank 1/2");
    let arg = |i: usize, k: &str| back.arg_string(SliceId::from_index(i), k);
    assert_eq!(arg(i, keys::COMM).as_deref(), Some("0x123456789abcdef0"));
    assert_eq!(arg(i, keys::COMM_NAME).as_deref(), Some("fsdp-pg"));
    assert_eq!(arg(i, keys::SEQ).as_deref(), Some("41"));
    assert_eq!(arg(i, keys::BYTES).as_deref(), Some("2000"));
    assert_eq!(arg(i, keys::ALGO).as_deref(), Some("RING"));
    assert_eq!(arg(i, keys::PROTO).as_deref(), Some("SIMPLE"));
    assert_eq!(arg(i, keys::CHANNELS).as_deref(), Some("8"));
    assert_eq!(arg(i, keys::NRANKS).as_deref(), Some("2"));
    assert!(arg(i, keys::TID).is_some());
    let s = nccl[1];
    assert_eq!(back.str(back.slices().name()[s]), "NCCL Send");
    assert_eq!(arg(s, keys::PEER).as_deref(), Some("0"));
    assert_eq!(arg(s, keys::BYTES).as_deref(), Some("1024"));
    assert_eq!(arg(s, keys::SEQ), None);
    // The v4 communicator had no name.
    assert_eq!(
        back.track_name(back.slices().track()[nccl[2]]),
        "NCCL · comm 0x000000000000feed · rank 0/2"
    );
    assert!(back.processes()[0]
        .metadata
        .iter()
        .any(|(k, v)| k == protocol::NCCL_PLUGIN_KEY && v == "v5"));
}

#[test]
fn names_are_copied_short_and_safe() {
    // SAFETY: null and NUL-terminated strings.
    unsafe {
        assert_eq!(Name::from_ptr(std::ptr::null()).as_str(), "");
        assert_eq!(Name::from_ptr(c"LL128".as_ptr()).as_str(), "LL128");
        let long = Name::from_ptr(c"abcdefghijklmnopqrstuvwxyz".as_ptr());
        assert_eq!(long.as_str(), "abcdefghijklmnopqrstuvw");
    }
    assert_eq!(dtype_size("ncclBfloat16"), Some(2));
    assert_eq!(dtype_size("ncclFloat8e4m3"), Some(1));
    assert_eq!(dtype_size("ncclUint64"), Some(8));
    assert_eq!(dtype_size("Unknown"), None);
}

#[test]
fn slots_are_freed_once_and_bounded() {
    let s = Slots {
        slots: [const {
            Slot {
                state: AtomicU32::new(FREE),
                op: UnsafeCell::new(NO_OP),
            }
        }; SLOTS],
        next: AtomicUsize::new(0),
    };
    let mut handles = Vec::new();
    while let Some(h) = s.start(NO_OP) {
        handles.push(h);
        assert!(handles.len() <= SLOTS);
    }
    assert_eq!(handles.len(), SLOTS, "every slot can be used");
    assert!(s.stop(handles[3]).is_some());
    assert!(s.stop(handles[3]).is_none(), "stopped once");
    assert!(s.stop(HANDLE_BASE + SLOTS).is_none());
    assert!(s.stop(7).is_none());
    assert!(s.start(NO_OP).is_some(), "a freed slot is found again");
}
