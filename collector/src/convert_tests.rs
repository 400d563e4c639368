//! Converter tests on records built in memory, as CUPTI would hand them out.

use std::path::Path;
use std::sync::Arc;

use streamscope_core::perfetto::read_stream;
use streamscope_core::perfetto::PerfettoWriter;
use streamscope_core::*;

use crate::capture::{CaptureSpec, CaptureWindow, Trigger};
use crate::convert::*;
use crate::convert_fixtures::{api, kernel, sync};
use crate::python::PyLines;
use crate::records::*;

struct FakeHost;

impl HostInfo for FakeHost {
    fn device(&mut self, ordinal: u32) -> Device {
        Device {
            ordinal,
            name: "NVIDIA H200".into(),
            sm_count: 132,
            ..Default::default()
        }
    }
    fn api_name(&mut self, driver: bool, cbid: u32) -> String {
        match (driver, cbid) {
            (false, 131) => "cudaStreamSynchronize_v3020".into(),
            (false, 211) => "cudaLaunchKernel_v7000".into(),
            (true, 307) => "cuLaunchKernel".into(),
            _ => format!("api{cbid}"),
        }
    }
    fn thread_name(&mut self, tid: u32) -> Option<String> {
        (tid == 100).then(|| "python3".to_string())
    }
}

fn converter(window: CaptureWindow) -> (Converter, Arc<PyLines>) {
    let py = Arc::new(PyLines::default());
    let p = Process {
        pid: 100,
        name: "rank 0 · h · 100".into(),
        rank: Some(0),
        ..Default::default()
    };
    (
        Converter::new(p, Box::new(FakeHost), Arc::new(window), py.clone()),
        py,
    )
}

fn all() -> CaptureWindow {
    CaptureWindow::new(
        CaptureSpec {
            trigger: Trigger::Always,
            delay_ns: 0,
            duration_ns: None,
        },
        0,
    )
}

/// A profiler-API window opened at `open` and closed at `close` (ns).
fn closed_window(open: i64, close: i64) -> CaptureWindow {
    let w = CaptureWindow::new(
        CaptureSpec {
            trigger: Trigger::ProfilerApi,
            delay_ns: 0,
            duration_ns: None,
        },
        0,
    );
    w.open(open);
    w.close(close);
    w
}

/// The converter's batch as a trace (sorted, as the writer gets it).
fn batch(c: &Converter) -> Trace {
    c.trace.clone().finish()
}

fn names(t: &Trace) -> Vec<&str> {
    (0..t.slices().len())
        .map(|i| t.str(t.slices().name()[i]))
        .collect()
}

#[test]
fn records_without_an_end_are_skipped_and_counted() {
    let (mut c, _) = converter(all());
    c.push(Record::Kernel(kernel(1000, 0, 7, 11), c"still_running"));
    c.push(Record::Kernel(kernel(1000, 3000, 7, 12), c"done"));
    assert_eq!(names(&batch(&c)), vec!["done"]);
    assert_eq!(c.incomplete_records, 1);
}

#[test]
fn kernels_go_on_stream_tracks_under_their_gpu() {
    let (mut c, _) = converter(all());
    c.push(Record::Kernel(
        kernel(1000, 3000, 7, 11),
        c"_Z9my_kernelPfi",
    ));
    c.push(Record::Kernel(
        kernel(2000, 2500, 13, 12),
        c"ncclDevKernel_AllGather_RING_LL",
    ));
    let t = &batch(&c);
    assert_eq!(t.devices().len(), 1);
    assert_eq!(t.devices()[0].ordinal, 1);
    assert_eq!(t.devices()[0].sm_count, 132);
    let k0 = t.slices().track()[0];
    assert_eq!(
        t.track(k0).kind,
        TrackKind::Stream {
            device: DeviceId::from_index(0),
            stream: 7
        }
    );
    assert_eq!(t.track_name(k0), "stream 7");
    let gpu = t.track(k0).parent.expect("stream has a parent");
    assert_eq!(
        t.track(gpu).kind,
        TrackKind::Gpu {
            device: DeviceId::from_index(0)
        }
    );
    assert_eq!(t.track_name(gpu), "GPU 1 · NVIDIA H200");
    assert_eq!(
        t.track(t.slices().track()[1]).parent,
        Some(gpu),
        "both streams under one GPU track"
    );
    assert_eq!(
        names(t),
        vec!["my_kernel(float*, int)", "ncclDevKernel_AllGather_RING_LL"]
    );
    assert_eq!(
        t.slices().class(),
        vec![SliceClass::Compute, SliceClass::Communication]
    );
    assert_eq!(
        (
            t.slices().start_ns()[0],
            t.slices().dur_ns()[0],
            t.slices().correlation()[0]
        ),
        (1000, 2000, 11)
    );
    let lc = t.launch_of(SliceId::from_index(0)).expect("launch config");
    assert_eq!(lc.grid, [132, 2, 1]);
    assert_eq!(lc.block, [256, 1, 1]);
    assert_eq!(
        (
            lc.registers_per_thread,
            lc.static_smem_bytes,
            lc.dynamic_smem_bytes
        ),
        (64, 1024, 49152)
    );
}

#[test]
fn copies_carry_bytes_direction_and_pageability() {
    let (mut c, _) = converter(all());
    c.push(Record::Memcpy(RawMemcpy {
        kind: kind::MEMCPY,
        copy_kind: 2,
        src_kind: 3,
        dst_kind: 1,
        flags: 0,
        bytes: 4,
        start: 10,
        end: 20,
        device_id: 0,
        context_id: 1,
        stream_id: 7,
        correlation_id: 3,
        runtime_correlation_id: 0,
        pad: 0,
        reserved0: std::ptr::null(),
        graph_node_id: 0,
        graph_id: 0,
    }));
    c.push(Record::Memset(RawMemset {
        kind: kind::MEMSET,
        value: 0,
        bytes: 4096,
        start: 30,
        end: 40,
        device_id: 0,
        context_id: 1,
        stream_id: 7,
        correlation_id: 4,
        flags: 0,
        memory_kind: 3,
        pad: 0,
        reserved0: std::ptr::null(),
        graph_node_id: 0,
        graph_id: 0,
    }));
    let t = &batch(&c);
    assert_eq!(
        names(t),
        vec!["Memcpy DtoH (Device -> Pageable)", "Memset (Device)"]
    );
    let cp = t.copy_of(SliceId::from_index(0)).expect("copy info");
    assert_eq!(
        (cp.bytes, cp.kind, cp.pageable),
        (4, CopyKind::DeviceToHost, true)
    );
    assert_eq!(
        t.slices().kind(),
        vec![SliceKind::Memcpy, SliceKind::Memset]
    );
    assert_eq!(
        t.slices().class(),
        vec![SliceClass::Memory, SliceClass::Memory]
    );
    assert_eq!(
        t.copy_of(SliceId::from_index(1)).map(|c| c.bytes),
        Some(4096)
    );
}

#[test]
fn api_calls_get_thread_tracks_names_and_python_lines() {
    let (mut c, py) = converter(all());
    c.own_tid = Some(999);
    py.insert(42, "train.py:7 (step)".into());
    c.push(Record::Api {
        raw: api(100, 900, 131, 100, 42),
        driver: false,
    });
    c.push(Record::Api {
        raw: api(50, 60, 211, 101, 43),
        driver: false,
    });
    c.push(Record::Api {
        raw: api(52, 58, 307, 101, 44),
        driver: true,
    });
    c.push(Record::Api {
        raw: api(70, 80, 211, 999, 45),
        driver: false,
    }); // the collector's own call
    let t = &batch(&c);
    assert_eq!(
        names(t),
        vec![
            "cudaStreamSynchronize",
            "cudaLaunchKernel",
            "cuLaunchKernel"
        ]
    );
    assert_eq!(
        t.slices().kind(),
        vec![SliceKind::Runtime, SliceKind::Runtime, SliceKind::Driver]
    );
    assert_eq!(
        t.track(t.slices().track()[0]).kind,
        TrackKind::Thread { tid: 100 }
    );
    assert_eq!(
        t.track_name(t.slices().track()[0]),
        "python3 (main thread 100)"
    );
    assert_eq!(t.track_name(t.slices().track()[1]), "thread 101");
    assert_eq!(
        t.arg_string(SliceId::from_index(0), "python").as_deref(),
        Some("train.py:7 (step)")
    );
    assert_eq!(t.arg_string(SliceId::from_index(1), "python"), None);
    assert!(py.is_empty(), "the location was claimed");
}

#[test]
fn syncs_go_on_their_stream_or_their_calling_thread() {
    let (mut c, _) = converter(all());
    c.push(Record::Kernel(kernel(1, 2, 7, 1), c"k")); // teaches context 5 -> device 1
    c.push(Record::Sync(sync(7, 3, 20)));
    c.push(Record::Sync(sync(SYNC_INVALID, 4, 21))); // context sync: needs its API call
    c.push(Record::Api {
        raw: api(400, 950, 131, 100, 21),
        driver: false,
    });
    c.finish_batch(false);
    let t = &batch(&c);
    let syncs: Vec<usize> = (0..t.slices().len())
        .filter(|&i| t.slices().kind()[i] == SliceKind::Sync)
        .collect();
    assert_eq!(syncs.len(), 2);
    let (a, b) = (syncs[0], syncs[1]);
    assert_eq!(t.str(t.slices().name()[a]), "Stream Sync");
    assert_eq!(
        t.track(t.slices().track()[a]).kind,
        TrackKind::Stream {
            device: DeviceId::from_index(0),
            stream: 7
        }
    );
    assert_eq!(t.str(t.slices().name()[b]), "Context Sync");
    assert_eq!(
        t.track(t.slices().track()[b]).kind,
        TrackKind::Thread { tid: 100 }
    );
    assert_eq!(
        (t.slices().start_ns()[b], t.slices().dur_ns()[b]),
        (500, 400)
    );
}

#[test]
fn a_sync_whose_call_never_comes_lands_on_an_unknown_thread() {
    let (mut c, _) = converter(all());
    c.push(Record::Sync(sync(SYNC_INVALID, 1, 77)));
    for _ in 0..3 {
        c.finish_batch(false);
        assert!(
            c.trace.slices().is_empty(),
            "still waiting for the API record"
        );
    }
    c.finish_batch(false);
    assert_eq!(c.trace.slices().len(), 1);
    assert_eq!(
        batch(&c).track_name(c.trace.slices().track()[0]),
        "host (thread unknown)"
    );
    assert_eq!(sync_name(2), "Stream Wait Event");
}

#[test]
fn nvtx_ranges_and_marks_become_range_slices() {
    let (mut c, _) = converter(all());
    let marker = |flags, id, ts| RawMarker {
        kind: kind::MARKER,
        flags,
        timestamp: ts,
        id,
        object_kind: OBJECT_THREAD,
        object_id: [100, 100, 0],
        pad: 0,
        name: std::ptr::null(),
        domain: std::ptr::null(),
    };
    c.push(Record::Marker(
        marker(MARKER_START, 1, 100),
        Some(c"step 0"),
    ));
    c.push(Record::Marker(
        marker(MARKER_INSTANTANEOUS, 2, 150),
        Some(c"checkpoint"),
    ));
    c.push(Record::Marker(marker(MARKER_END, 1, 400), None));
    let t = &batch(&c);
    // In the trace's order: by start on the thread's track.
    assert_eq!(names(t), vec!["step 0", "checkpoint"]);
    assert_eq!(t.slices().kind(), vec![SliceKind::Range, SliceKind::Range]);
    assert_eq!(
        (t.slices().start_ns()[0], t.slices().dur_ns()[0]),
        (100, 300)
    );
    assert_eq!(
        t.track(t.slices().track()[0]).kind,
        TrackKind::Thread { tid: 100 }
    );
}

#[test]
fn nvtx_ranges_that_never_end_are_forgotten_and_counted() {
    let (mut c, _) = converter(all());
    c.marker_max_batches = 2;
    let marker = |flags, id, ts| RawMarker {
        kind: kind::MARKER,
        flags,
        timestamp: ts,
        id,
        object_kind: OBJECT_THREAD,
        object_id: [100, 100, 0],
        pad: 0,
        name: std::ptr::null(),
        domain: std::ptr::null(),
    };
    c.push(Record::Marker(
        marker(MARKER_START, 1, 100),
        Some(c"leaked"),
    ));
    c.push(Record::Marker(marker(MARKER_START, 2, 110), Some(c"long")));
    c.finish_batch(false);
    c.finish_batch(false);
    // Still within the limit: the long range ends and is kept.
    c.push(Record::Marker(marker(MARKER_END, 2, 900), None));
    assert_eq!(names(&batch(&c)), vec!["long"]);
    assert_eq!(c.markers_abandoned, 0);
    c.finish_batch(false);
    assert_eq!(c.markers_abandoned, 1);
    // Its end, arriving after it was forgotten, adds nothing.
    c.push(Record::Marker(marker(MARKER_END, 1, 950), None));
    assert_eq!(c.trace.slices().len(), 1);
    let meta = &c.trace.processes()[0].metadata;
    assert!(meta
        .iter()
        .any(|(k, v)| k == crate::convert::ABANDONED_KEY && v == "1"));
}

#[test]
fn unique_nvtx_names_past_the_limit_share_normalized_names() {
    let (mut c, _) = converter(all());
    let mark = |id| RawMarker {
        kind: kind::MARKER,
        flags: MARKER_INSTANTANEOUS,
        timestamp: 100 + id as u64,
        id,
        object_kind: OBJECT_THREAD,
        object_id: [100, 100, 0],
        pad: 0,
        name: std::ptr::null(),
        domain: std::ptr::null(),
    };
    let limit = crate::marker_names::MAX_MARKER_NAMES as u32;
    for i in 0..limit + 1000 {
        let name = std::ffi::CString::new(format!("aten::mul, seq = {i}")).unwrap_or_default();
        c.push(Record::Marker(mark(i), Some(&name)));
    }
    let pool = c.trace.strings().len();
    for i in 0..1000 {
        let name = std::ffi::CString::new(format!("aten::add, seq = {i}")).unwrap_or_default();
        c.push(Record::Marker(mark(i), Some(&name)));
    }
    // One new string ("aten::add") for a thousand new names.
    assert_eq!(c.trace.strings().len(), pool + 1);
    let last = *c
        .trace
        .slices()
        .name()
        .last()
        .unwrap_or(&StrId::from_index(0));
    assert_eq!(c.trace.strings().get(last), "aten::add");
    c.finish_batch(false);
    let meta = &c.trace.processes()[0].metadata;
    assert!(meta
        .iter()
        .any(|(k, _)| k == crate::marker_names::LIMIT_KEY));
}

#[test]
fn records_outside_the_capture_window_are_dropped_and_offsets_apply() {
    let (mut c, _) = converter(closed_window(1_000, 2_000));
    c.ts_offset_ns = 500;
    c.push(Record::Kernel(kernel(100, 200, 7, 1), c"before")); // 600..700
    c.push(Record::Kernel(kernel(800, 900, 7, 2), c"inside")); // 1300..1400
    c.push(Record::Kernel(kernel(3000, 3100, 7, 3), c"after"));
    c.push(Record::Kernel(kernel(0, 0, 7, 4), c"no timestamps"));
    assert_eq!(names(&batch(&c)), vec!["inside"]);
    assert_eq!(c.trace.slices().start_ns(), vec![1300]);
    assert_eq!(c.records_seen, 4);
}

#[test]
fn unfinished_work_counts_as_lost_only_inside_a_closed_window() {
    let (mut c, _) = converter(closed_window(1_000, 2_000));
    // Began inside the window, cut off by the flush: lost.
    c.push(Record::Kernel(kernel(1_500, 0, 7, 1), c"cut"));
    // Began after the window closed, or not begun at all: outside it.
    c.push(Record::Kernel(kernel(2_500, 0, 7, 2), c"later"));
    c.push(Record::Kernel(kernel(0, 0, 7, 3), c"queued"));
    assert!(names(&batch(&c)).is_empty());
    assert_eq!(c.incomplete_records, 1);
    // A whole recording (window never closed): queued work is lost too.
    let (mut c, _) = converter(all());
    c.push(Record::Kernel(kernel(0, 0, 7, 3), c"queued"));
    assert_eq!(c.incomplete_records, 1);
}

#[test]
fn api_names_lose_their_version_suffix_only() {
    assert_eq!(
        normalize_api_name("cudaStreamSynchronize_v3020"),
        "cudaStreamSynchronize"
    );
    assert_eq!(
        normalize_api_name("cudaStreamSynchronize_ptsz_v7000"),
        "cudaStreamSynchronize_ptsz"
    );
    assert_eq!(normalize_api_name("cuMemcpyDtoH_v2"), "cuMemcpyDtoH_v2");
    assert_eq!(normalize_api_name("cuLaunchKernel"), "cuLaunchKernel");
    assert_eq!(
        demangle("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"),
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"
    );
}

#[test]
fn batches_stream_through_the_writer_and_read_back() {
    let (mut c, py) = converter(all());
    let mut w = PerfettoWriter::new(Vec::new());
    for batch in 0..3u64 {
        let base = batch * 10_000;
        let corr = batch as u32 * 2 + 1;
        py.insert(corr + 1, format!("train.py:{batch} (step)"));
        c.push(Record::Api {
            raw: api(base + 10, base + 20, 211, 100, corr),
            driver: false,
        });
        c.push(Record::Kernel(
            kernel(base + 30, base + 90, 7, corr),
            c"ncclDevKernel_AllGather_RING_LL",
        ));
        c.push(Record::Api {
            raw: api(base + 25, base + 95, 131, 100, corr + 1),
            driver: false,
        });
        c.finish_batch(false);
        c.process_mut().dropped_records = batch;
        c.trace.flush_events(|t| w.write_batch(t)).expect("batch");
    }
    let bytes = c.trace.flush_events(|t| w.finish(t)).expect("finish");
    let back = read_stream(Path::new("mem.pftrace"), bytes.as_slice()).expect("read back");
    assert_eq!(back.processes().len(), 1);
    assert_eq!(back.processes()[0].dropped_records, 2);
    assert_eq!(back.devices()[0].name, "NVIDIA H200");
    let kernels = (0..back.slices().len())
        .filter(|&i| back.slices().kind()[i] == SliceKind::Kernel)
        .count();
    assert_eq!(kernels, 3);
    let lines: Vec<String> = (0..back.slices().len())
        .filter_map(|i| back.arg_string(SliceId::from_index(i), "python"))
        .collect();
    assert_eq!(
        lines,
        vec![
            "train.py:0 (step)",
            "train.py:1 (step)",
            "train.py:2 (step)"
        ]
    );
}

#[test]
fn optimizer_steps_become_ranges_on_their_thread() {
    use streamscope_core::protocol::OPTIMIZER_STEP_RANGE;
    let spec = crate::capture::CaptureSpec {
        trigger: crate::capture::Trigger::Always,
        delay_ns: 1_000,
        duration_ns: Some(1_000),
    };
    let (mut c, _) = converter(CaptureWindow::new(spec, 0));
    c.optimizer_step(42, 1_200, 1_500, 9);
    c.optimizer_step(42, 5_000, 6_000, 9); // outside the window
    c.optimizer_step(43, 1_900, 1_800, 0); // end before start: empty; no key said
    let t = &batch(&c);
    assert_eq!(t.slices().len(), 2);
    // Which optimizer stepped, when said.
    let key = |i: usize| {
        t.arg(
            SliceId::from_index(i),
            streamscope_core::protocol::OPTIMIZER_KEY_ARG,
        )
        .copied()
    };
    assert_eq!(key(0), Some(ArgValue::UInt(9)));
    assert_eq!(key(1), None);
    for i in 0..2 {
        assert_eq!(t.slices().kind()[i], SliceKind::Range);
        assert_eq!(t.str(t.slices().name()[i]), OPTIMIZER_STEP_RANGE);
        assert!(matches!(
            t.track(t.slices().track()[i]).kind,
            TrackKind::Thread { .. }
        ));
    }
    assert_eq!(
        (t.slices().start_ns()[0], t.slices().dur_ns()[0]),
        (1_200, 300)
    );
    assert_eq!(
        (t.slices().start_ns()[1], t.slices().dur_ns()[1]),
        (1_900, 0)
    );
    assert!(matches!(
        t.track(t.slices().track()[0]).kind,
        TrackKind::Thread { tid: 42 }
    ));
}

/// The NCCL plugin's operations are linked to the NCCL kernel launched on
/// their thread right before them (collector/src/nccl_plugin/link.rs).
#[test]
fn nccl_operations_link_to_their_kernel() {
    use crate::nccl_plugin::trace::{keys, NcclWriter};
    use crate::nccl_plugin::{Comm, Op};
    let (mut c, _) = converter(all());
    // Plan 1 (corr 1) launched at 10-20, plan 2 (corr 3) at 60-70, both on
    // thread 100; a compute kernel (corr 2) in between.
    c.push(Record::Api {
        raw: api(10, 20, 211, 100, 1),
        driver: false,
    });
    c.push(Record::Api {
        raw: api(30, 40, 211, 100, 2),
        driver: false,
    });
    c.push(Record::Kernel(
        kernel(100, 200, 7, 1),
        c"ncclDevKernel_AllGather_RING_LL",
    ));
    c.push(Record::Kernel(kernel(100, 200, 8, 2), c"matmul"));
    c.push(Record::Api {
        raw: api(60, 70, 211, 100, 3),
        driver: false,
    });
    c.finish_batch(false);
    let op = |start: i64, end: i64| Op {
        tid: 100,
        start_ns: start,
        end_ns: end,
        ..Op::default()
    };
    // Two operations of plan 1 (started together, stopped together), one
    // of plan 2, whose kernel record is missing: not linked to plan 1's.
    let ops = [op(45, 50), op(46, 50), op(75, 80)];
    let mut w = NcclWriter::with_comms(vec![Comm::default()]);
    w.add(&mut c, &ops);
    let linked: Vec<Option<String>> = (0..c.trace.slices().len())
        .filter(|&i| c.trace.slices().kind()[i] == SliceKind::Other)
        .map(|i| {
            c.trace
                .arg_string(SliceId::from_index(i), keys::KERNEL_CORRELATION)
        })
        .collect();
    assert_eq!(linked, [Some("1".into()), Some("1".into()), None]);
}

/// The host runs ahead of the GPU: an NCCL kernel's record (which comes
/// when it ends) arrives many batches after its launch call and its
/// operation. The operation waits for it, and the operations behind it on
/// its thread wait too; one whose kernel never comes is written unlinked
/// after MAX_DEFER_BATCHES.
#[test]
fn nccl_operations_wait_for_a_kernel_that_ends_late() {
    use crate::nccl_plugin::trace::{keys, NcclWriter, MAX_DEFER_BATCHES};
    use crate::nccl_plugin::{Comm, Op};
    let (mut c, _) = converter(all());
    let op = |tid: u32, start: i64, end: i64| Op {
        tid,
        start_ns: start,
        end_ns: end,
        ..Op::default()
    };
    let mut w = NcclWriter::with_comms(vec![Comm::default()]);
    let ops_written = |c: &Converter| {
        (0..c.trace.slices().len())
            .filter(|&i| c.trace.slices().kind()[i] == SliceKind::Other)
            .map(|i| {
                c.trace
                    .arg_string(SliceId::from_index(i), keys::KERNEL_CORRELATION)
            })
            .collect::<Vec<_>>()
    };
    // Batch 0: plan 1 launched (corr 1) and its operation; thread 200's
    // operation has no kernel at all.
    c.push(Record::Api {
        raw: api(10, 20, 211, 100, 1),
        driver: false,
    });
    c.finish_batch(false);
    w.write_ops(&mut c, vec![op(100, 45, 50), op(200, 46, 50)], 0, false);
    // Batch 1: plan 2 (corr 3) and its operation, behind plan 1's.
    c.push(Record::Api {
        raw: api(60, 70, 211, 100, 3),
        driver: false,
    });
    c.finish_batch(false);
    w.write_ops(&mut c, vec![op(100, 75, 80)], 0, false);
    for _ in 0..10 {
        c.finish_batch(false);
        w.write_ops(&mut c, vec![], 0, false);
    }
    assert!(ops_written(&c).is_empty());
    // Twelve batches on, both kernels end: both operations go, linked.
    c.push(Record::Kernel(
        kernel(100, 200, 7, 1),
        c"ncclDevKernel_AllGather_RING_LL",
    ));
    c.push(Record::Kernel(
        kernel(300, 400, 7, 3),
        c"ncclDevKernel_AllGather_RING_LL",
    ));
    c.finish_batch(false);
    w.write_ops(&mut c, vec![], 0, false);
    assert_eq!(ops_written(&c), [Some("1".into()), Some("3".into())]);
    // Thread 200's goes unlinked once it waited MAX_DEFER_BATCHES.
    for _ in 0..MAX_DEFER_BATCHES {
        c.finish_batch(false);
        w.write_ops(&mut c, vec![], 0, false);
    }
    assert_eq!(ops_written(&c), [Some("1".into()), Some("3".into()), None]);
}

#[test]
fn gpu_metrics_feeds_become_counters_of_this_process_device() {
    use crate::pm_sampling::feed::Feed;
    use streamscope_core::protocol::{self, feed_meta, FeedPart};
    let dir = std::env::temp_dir().join(format!("ss-feed-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("as set up");
    let path = |p| dir.join(protocol::gpu_metrics_feed_name("h", "0000:02:00", p));
    std::fs::write(path(FeedPart::Series), "SM active %\nDRAM GB/s\n").expect("as set up");
    let mut pts = Vec::new();
    pts.extend_from_slice(&protocol::encode_feed_point(0, 1_000, 87.5));
    pts.extend_from_slice(&protocol::encode_feed_point(1, 1_000, 120.0));
    // Half a record: left for the next batch.
    pts.extend_from_slice(&protocol::encode_feed_point(0, 2_000, 90.0)[..10]);
    std::fs::write(path(FeedPart::Points), &pts).expect("as set up");
    let meta = vec![
        ("config".to_string(), "10000 Hz".to_string()),
        (feed_meta::DECODED_UNTIL.to_string(), i64::MAX.to_string()),
    ];
    std::fs::write(path(FeedPart::Meta), protocol::format_feed_meta(&meta)).expect("as set up");
    let (mut conv, _) = converter(all());
    // The sampler's GPU is this process's device 1.
    conv.gpu_track(1);
    let mut feed = Feed::new(dir.clone(), "h".into(), None);
    feed.add_device(1, "0000:02:00");
    feed.write(&mut conv, false);
    let name_of = |conv: &Converter, i: usize| {
        let t = conv.trace.counters().track()[i];
        conv.trace
            .str(conv.trace.tracks()[t.index()].name)
            .to_string()
    };
    assert_eq!(conv.trace.counters().len(), 2);
    assert_eq!(name_of(&conv, 0), "GPU 1 · SM active %");
    assert_eq!(name_of(&conv, 1), "GPU 1 · DRAM GB/s");
    assert_eq!(conv.trace.counters().value()[0], 87.5);
    assert!(conv.process_mut().metadata.contains(&(
        "gpu_metrics.device1.config".to_string(),
        "10000 Hz".to_string()
    )));
    // The rest of the cut record arrives: only it is read.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path(FeedPart::Points))
        .expect("as set up");
    use std::io::Write;
    f.write_all(&protocol::encode_feed_point(0, 2_000, 90.0)[10..])
        .expect("as set up");
    feed.write(&mut conv, true);
    assert_eq!(conv.trace.counters().len(), 3);
    assert_eq!(conv.trace.counters().ts_ns()[2], 2_000);
    assert_eq!(name_of(&conv, 2), "GPU 1 · SM active %");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stream_records_say_which_stream_is_the_legacy_default_per_device() {
    let (mut c, _) = converter(all());
    let stream = |context_id, stream_id, flag| {
        Record::Stream(RawStream {
            kind: kind::STREAM,
            context_id,
            stream_id,
            priority: 0,
            flag,
            correlation_id: 0,
        })
    };
    // Context 5 (device 1, once a kernel names it) and context 9, whose
    // device no record names yet.
    c.push(stream(5, 7, stream_flag::NULL));
    c.push(stream(5, 13, stream_flag::DEFAULT));
    c.push(stream(5, 14, stream_flag::NON_BLOCKING));
    c.push(stream(9, 3, stream_flag::NULL));
    c.finish_batch(false);
    let key = streamscope_core::protocol::streams::key(1);
    let meta = |c: &Converter| c.trace.processes()[0].metadata.clone();
    assert!(meta(&c).iter().all(|(k, _)| !k.starts_with("cuda_streams")));
    // The kernel names context 5's device: its streams are written.
    c.push(Record::Kernel(kernel(1000, 2000, 13, 1), c""));
    c.finish_batch(false);
    let m = meta(&c);
    let v = m.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str());
    assert_eq!(v, Some("7:legacy 13:blocking 14:non-blocking"));
    assert_eq!(
        streamscope_core::protocol::streams::parse(v.expect("written"))[0],
        (
            7,
            streamscope_core::protocol::streams::StreamCreation::Legacy
        )
    );
    // Context 9 is still waiting for its device; nothing else is written.
    assert_eq!(
        m.iter()
            .filter(|(k, _)| k.starts_with("cuda_streams"))
            .count(),
        1
    );
}
