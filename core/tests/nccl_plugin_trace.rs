//! traces/fsdp-ref-nccl-h200x2: fsdp-ref on 2 x H200 recorded with the
//! collector as NCCL's profiler plugin. The plugin's operations describe
//! their kernels, so a collector trace gets what a Kineto trace has: bytes,
//! bus bandwidth, and cross-rank matching by sequence number.

use std::path::PathBuf;

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::load::load_paths;

fn bundled(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

#[test]
fn plugin_operations_give_bytes_bandwidth_and_sequence_matching() {
    let t = load_paths(&[bundled("fsdp-ref-nccl-h200x2")]).expect("loads");
    let r = analyze(&t, &AnalysisOptions::default());
    assert_eq!(r.ranks.len(), 2);
    // fsdp-ref --layers 8 --dim 4096: each block has 2 x 4096 x 16384
    // parameters in bf16; an all-gather brings the whole block to every
    // rank (268,435,456 bytes), a reduce-scatter reduces its f32 gradients
    // (536,870,912 bytes).
    let per_block_bf16 = 2 * 4096 * 16384 * 2u64;
    for c in &r.collectives {
        let bytes = c.bytes.unwrap_or_else(|| panic!("{c:?}: no bytes"));
        assert_eq!(c.sized, c.count, "every kernel sized: {c:?}");
        let each = bytes / c.count;
        match c.collective.as_str() {
            "AllGather" => assert_eq!(each, per_block_bf16, "{c:?}"),
            "ReduceScatter" => assert_eq!(each, per_block_bf16 * 2, "{c:?}"),
            _ => {}
        }
        let bw = c.bus_bw_gbps.expect("bus bandwidth");
        // NVLink between two H200s: tens to hundreds of GB/s, never more
        // than the link's 450 GB/s per direction.
        assert!(bw > 10.0 && bw < 450.0, "{c:?}");
    }
    assert!(r.collectives.iter().any(|c| c.collective == "AllGather"));
    assert!(r
        .collectives
        .iter()
        .any(|c| c.collective == "ReduceScatter"));
    // Sequence numbers from the plugin: matched by (communicator, seq).
    let x = &r.cross_rank;
    assert!(x.method.contains("seq"), "{}", x.method);
    assert_eq!(x.matched_kernels, x.comm_kernels, "{x:?}");
    assert_eq!(x.instances * 2, x.comm_kernels);
}
