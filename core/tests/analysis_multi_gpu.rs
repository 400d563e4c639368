//! A process that drives several GPUs (one thread per GPU, or one thread for
//! all, as `fsdp-ref --gpus 2` does) is analyzed per GPU: compute on one GPU
//! never hides communication on another.

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::synth::h200;
use streamscope_core::*;

#[test]
fn each_gpu_of_a_process_is_its_own_rank() {
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process {
        pid: 7,
        rank: Some(0),
        ..Default::default()
    });
    let mut streams = Vec::new();
    for d in 0..2 {
        let dev = t.add_device(h200(p, d));
        let g = t.add_track(p, None, TrackKind::Gpu { device: dev }, "GPU");
        streams.push(t.add_track(
            p,
            Some(g),
            TrackKind::Stream {
                device: dev,
                stream: 7,
            },
            "stream 7",
        ));
    }
    let gemm = t.intern("gemm");
    let ag = t.intern("ncclDevKernel_AllGather_RING_LL");
    // GPU 0 computes 0..100 µs; GPU 1 communicates over the same time.
    let mut k = NewSlice::new(streams[0], SliceKind::Kernel, gemm, 0, 100_000);
    k.class = SliceClass::Compute;
    t.push_slice(k);
    let mut c = NewSlice::new(streams[1], SliceKind::Kernel, ag, 0, 100_000);
    c.class = SliceClass::Communication;
    t.push_slice(c);
    let r = analyze(&t.clone().finish(), &AnalysisOptions::default());
    assert_eq!(
        r.ranks.len(),
        2,
        "{:?}",
        r.ranks.iter().map(|x| &x.label).collect::<Vec<_>>()
    );
    assert_eq!(r.ranks[0].rank, 0);
    assert_eq!(r.ranks[1].rank, 1);
    assert!(r.ranks[1].label.contains("GPU 1"), "{}", r.ranks[1].label);
    // GPU 1's communication is all exposed: GPU 0's compute does not hide it.
    assert_eq!(r.ranks[1].breakdown.overlap_pct, Some(0.0));
    assert!((r.ranks[1].breakdown.exposed_comm_us - 100.0).abs() < 1e-6);
    assert_eq!(
        r.ranks[0].breakdown.overlap_pct, None,
        "no communication on GPU 0"
    );
    assert_eq!(r.occupancy.len(), 2);
}
