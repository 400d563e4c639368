//! Which synchronous `cudaMemcpy` calls are host syncs: CUDA's "API
//! synchronization behavior" makes the host wait for a copy to or from
//! host memory, not for a device-to-device one. A native cuBLAS loop (the
//! held-out scripts/gpu/heldout/cublas_loop.cu) listed its device-to-device
//! `cudaMemcpy` as a "stream-sync" with no line, beside the real ones.

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::*;

const US: i64 = 1000;

/// One thread, one stream: per step a kernel, then three synchronous
/// `cudaMemcpy` calls (host to device, device to device, device to host),
/// each with its copy on the GPU.
fn copies(steps: usize) -> Trace {
    let (mut t, host, lanes) = streamscope_core::synth::one_gpu(30, Vec::new(), &[7]);
    let s7 = lanes[0];
    let launch = t.intern("cudaLaunchKernel");
    let memcpy = t.intern("cudaMemcpy");
    let kernel = t.intern("gemm");
    let mut corr = 1u32;
    let mut now = 100 * US;
    for _ in 0..steps {
        let mut a = NewSlice::new(host, SliceKind::Runtime, launch, now, 5 * US);
        a.correlation = corr;
        t.push_slice(a);
        let mut k = NewSlice::new(s7, SliceKind::Kernel, kernel, now + 10 * US, 500 * US);
        k.class = SliceClass::Compute;
        k.correlation = corr;
        t.push_slice(k);
        corr += 1;
        now += 5 * US;
        let mut gpu = now + 510 * US;
        for (name, kind) in [
            ("Memcpy HtoD", CopyKind::HostToDevice),
            ("Memcpy DtoD", CopyKind::DeviceToDevice),
            ("Memcpy DtoH", CopyKind::DeviceToHost),
        ] {
            // The call returns once its copy is done (the host-bound ones
            // waited for the kernel before it).
            let end = gpu + 20 * US;
            let mut c = NewSlice::new(host, SliceKind::Runtime, memcpy, now, end - now);
            c.correlation = corr;
            t.push_slice(c);
            let n = t.intern(name);
            let mut cp = NewSlice::new(s7, SliceKind::Memcpy, n, gpu, 20 * US);
            cp.class = SliceClass::Memory;
            cp.correlation = corr;
            cp.copy = Some(CopyInfo {
                bytes: 1 << 20,
                kind,
                pageable: true,
            });
            t.push_slice(cp);
            corr += 1;
            now = end + 2 * US;
            gpu = now + 10 * US;
        }
        now += 50 * US;
    }
    t.finish()
}

#[test]
fn a_device_to_device_cudamemcpy_is_not_a_host_sync() {
    let t = copies(12);
    let r = analyze(&t, &AnalysisOptions::default());
    let k = &r.ranks[0];
    let all: Vec<_> = k
        .syncs
        .iter()
        .chain(&k.startup_syncs)
        .chain(&k.after_window_syncs)
        .collect();
    let calls: u64 = all.iter().map(|g| g.count).sum();
    // Two of the three copies a step make the host wait.
    assert_eq!(calls, 24, "{all:#?}");
    assert!(all.iter().any(|g| g.pattern == "stream-sync"), "{all:#?}");
    assert!(all.iter().any(|g| g.pattern == "cpu-copy"), "{all:#?}");
}
