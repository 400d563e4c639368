//! GPU memory as `streamscope record` writes it (issue 36): the caching
//! allocator's totals and blocks with the Python line of each allocation,
//! a failed allocation, and device memory from CUPTI's records for a
//! program without PyTorch's allocator. The trace is built the way the
//! collector's converter builds it (collector/src/memory.rs), then read
//! back from Perfetto.

use std::path::Path;

use streamscope_core::analysis::memory::MemorySource;
use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::protocol::{DEVICE_MEMORY_COUNTER_SUFFIX, OOM_EVENT};
use streamscope_core::{
    ArgValue, NewSlice, Process, SliceClass, SliceKind, Trace, TraceBuilder, TrackKind,
};

/// One process, GPU 0, a kernel; `allocator`: the allocator's counters and
/// blocks (two with lines, one without) and an out-of-memory instant;
/// always the device-memory counter.
fn job(allocator: bool) -> Trace {
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process {
        pid: 100,
        rank: Some(0),
        ..Default::default()
    });
    let d = t.add_device(streamscope_core::synth::h200(p, 0));
    let main = t.add_track(p, None, TrackKind::Thread { tid: 100 }, "main");
    let unknown = t.add_track(
        p,
        None,
        TrackKind::Thread { tid: 0 },
        "host (thread unknown)",
    );
    let stream = t.add_track(
        p,
        None,
        TrackKind::Stream {
            device: d,
            stream: 7,
        },
        "s",
    );
    let n = t.intern("gemm");
    let mut k = NewSlice::new(stream, SliceKind::Kernel, n, 0, 10_000);
    k.class = SliceClass::of_gpu_name(SliceKind::Kernel, "gemm");
    t.push_slice(k);
    let counter = |t: &mut TraceBuilder, name: &str| {
        t.add_track(p, None, TrackKind::Counter { device: Some(d) }, name)
    };
    let dev = counter(&mut t, &format!("GPU 0 {DEVICE_MEMORY_COUNTER_SUFFIX}"));
    for (at, v) in [(0, 0.0), (100, 1e9), (5_000, 3e9), (9_000, 1e9)] {
        t.push_counter(dev, at, v);
    }
    if allocator {
        let alloc = counter(&mut t, "GPU 0 memory allocated (bytes)");
        let res = counter(&mut t, "GPU 0 memory reserved (bytes)");
        let a = t.intern("train.py:12 (forward)");
        let b = t.intern("train.py:20 (step)");
        t.push_counter(res, 99, 1e9);
        t.push_counter(alloc, 99, 0.0);
        for (at, addr, bytes, site, total) in [
            (200, 0x1000, 400_000_000, Some(a), 4e8),
            (300, 0x2000, 100_000_000, None, 5e8),
            (400, 0x3000, 300_000_000, Some(b), 8e8),
            (500, 0x1000, -400_000_000, None, 4e8),
        ] {
            t.push_allocation(unknown, d, at, addr, bytes, site);
            t.push_counter(alloc, at, total);
        }
        let name = t.intern(OOM_EVENT);
        let mut s = NewSlice::new(main, SliceKind::Other, name, 600, 0);
        let py = t.intern("train.py:30 (step)");
        s.args = vec![
            (t.intern("device"), ArgValue::UInt(0)),
            (t.intern("bytes"), ArgValue::UInt(300_000_000_000)),
            (t.intern("allocated_bytes"), ArgValue::UInt(400_000_000)),
            (t.intern("free_bytes"), ArgValue::UInt(7_000_000_000)),
            (t.intern("python"), ArgValue::Str(py)),
        ];
        t.push_slice(s);
    }
    let t = t.finish();
    // Through Perfetto, as `record` writes it.
    let bytes = streamscope_core::perfetto::write_trace(&t, Vec::new()).expect("write");
    streamscope_core::perfetto::read_stream(Path::new("mem.pftrace"), &bytes[..]).expect("read")
}

fn report(t: &Trace) -> Report {
    analyze(t, &AnalysisOptions::default())
}

#[test]
fn allocator_history_names_each_block_s_line_and_the_failed_allocation() {
    let t = job(true);
    let r = report(&t);
    let m = r.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(m.source, MemorySource::Allocator);
    assert_eq!((m.peak_allocated_bytes, m.peak_at_ns), (800_000_000, 400));
    assert_eq!(m.reserved_at_peak_bytes, Some(1_000_000_000));
    assert_eq!(m.peak_device_bytes, Some(3_000_000_000));
    let live: Vec<_> = (m.live_at_peak.iter())
        .map(|b| (b.bytes, b.python.as_deref()))
        .collect();
    assert_eq!(
        live,
        vec![
            (400_000_000, Some("train.py:12 (forward)")),
            (300_000_000, Some("train.py:20 (step)")),
            (100_000_000, None),
        ]
    );
    assert_eq!(m.out_of_memory.len(), 1);
    let o = &m.out_of_memory[0];
    assert_eq!(
        (
            o.at_ns,
            o.bytes,
            o.allocated_bytes,
            o.free_bytes,
            o.python.as_deref()
        ),
        (
            600,
            300_000_000_000,
            Some(400_000_000),
            Some(7_000_000_000),
            Some("train.py:30 (step)")
        )
    );
    let text = streamscope_core::analysis::render::markdown(&r);
    assert!(text.contains("train.py:30 (step)"), "{text}");
    assert!(text.contains("Out of memory"), "{text}");
}

#[test]
fn without_the_allocator_device_memory_is_the_figure() {
    let t = job(false);
    let m = report(&t).ranks[0].memory.clone().expect("memory");
    assert_eq!(m.source, MemorySource::Device);
    assert_eq!(
        (m.peak_allocated_bytes, m.peak_at_ns),
        (3_000_000_000, 5_000)
    );
    assert_eq!(m.peak_device_bytes, Some(3_000_000_000));
    assert_eq!(m.reserved_at_peak_bytes, None);
    assert!(m.out_of_memory.is_empty() && m.live_at_peak.is_empty());
}
