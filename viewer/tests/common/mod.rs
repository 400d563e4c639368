//! A small two-rank trace for the UI tests: compute and NCCL streams, launch
//! calls linked by correlation, ProfilerStep ranges, and a planted
//! `.item()`-like sync (4-byte DtoH copy, then cudaStreamSynchronize) in
//! every step.

#![allow(dead_code)]

use streamscope_core::{
    CopyInfo, CopyKind, Device, Flow, LaunchConfig, NewSlice, Process, SliceClass, SliceKind,
    Trace, TraceBuilder, TrackKind,
};

pub const STEPS: i64 = 4;
pub const STEP_NS: i64 = 10_000_000;
pub const UNIQUE_KERNEL: &str = "my_unique_softmax_kernel";

pub fn two_rank_trace() -> Trace {
    let mut t = TraceBuilder::new();
    for rank in 0..2u32 {
        rank_into(&mut t, rank);
    }
    t.finish()
}

fn rank_into(t: &mut TraceBuilder, rank: u32) {
    let p = t.add_process(Process {
        pid: 1000 + rank,
        name: "python".into(),
        rank: Some(rank),
        world_size: Some(2),
        hostname: "node0".into(),
        ..Default::default()
    });
    let d = t.add_device(Device {
        process: p,
        ordinal: rank,
        name: "NVIDIA H200".into(),
        compute_major: 9,
        compute_minor: 0,
        sm_count: 132,
        warp_size: 32,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        regs_per_sm: 65536,
        regs_per_block: 65536,
        smem_per_sm_bytes: 233472,
        smem_per_block_bytes: 232448,
        global_mem_bytes: 150_000_000_000,
    });
    let host = t.add_track(
        p,
        None,
        TrackKind::Thread { tid: 2000 + rank },
        "python main",
    );
    let gpu = t.add_track(p, None, TrackKind::Gpu { device: d }, "GPU");
    let compute = t.add_track(
        p,
        Some(gpu),
        TrackKind::Stream {
            device: d,
            stream: 7,
        },
        "stream 7",
    );
    let nccl = t.add_track(
        p,
        Some(gpu),
        TrackKind::Stream {
            device: d,
            stream: 20,
        },
        "stream 20",
    );
    let gemm = t.intern("ampere_sgemm_128x64_nn");
    let ag = t.intern("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
    let launch = t.intern("cudaLaunchKernel");
    let memcpy = t.intern("cudaMemcpyAsync");
    let sync = t.intern("cudaStreamSynchronize");
    let dtoh = t.intern("Memcpy DtoH (Device -> Pinned)");
    let unique = t.intern(UNIQUE_KERNEL);
    let base = 1_000_000_000i64;
    let mut corr = rank * 100_000 + 1;
    let lc = LaunchConfig {
        grid: [264, 1, 1],
        block: [256, 1, 1],
        registers_per_thread: 64,
        static_smem_bytes: 0,
        dynamic_smem_bytes: 49152,
    };
    for step in 0..STEPS {
        let s0 = base + step * STEP_NS;
        let sname = t.intern(&format!("ProfilerStep#{}", step + 1));
        t.push_slice(NewSlice::new(
            host,
            SliceKind::Range,
            sname,
            s0,
            STEP_NS - 1_000,
        ));
        for k in 0..20i64 {
            let at = s0 + 100_000 + k * 400_000;
            // Compute kernel launched from the host.
            let mut call = NewSlice::new(host, SliceKind::Runtime, launch, at, 5_000);
            call.correlation = corr;
            let from = t.push_slice(call);
            let name = if rank == 1 && step == 2 && k == 7 {
                unique
            } else {
                gemm
            };
            let mut kern = NewSlice::new(compute, SliceKind::Kernel, name, at + 20_000, 300_000);
            kern.class = SliceClass::Compute;
            kern.correlation = corr;
            kern.launch = Some(lc);
            let to = t.push_slice(kern);
            t.add_flow(Flow {
                id: corr as u64,
                from,
                to,
            });
            corr += 1;
            // An all-gather every other kernel, half hidden under compute.
            if k % 2 == 0 {
                let mut call = NewSlice::new(host, SliceKind::Runtime, launch, at + 6_000, 4_000);
                call.correlation = corr;
                let from = t.push_slice(call);
                let mut kern = NewSlice::new(nccl, SliceKind::Kernel, ag, at + 150_000, 300_000);
                kern.class = SliceClass::Communication;
                kern.correlation = corr;
                kern.launch = Some(LaunchConfig {
                    grid: [2, 1, 1],
                    block: [512, 1, 1],
                    ..Default::default()
                });
                let to = t.push_slice(kern);
                t.add_flow(Flow {
                    id: corr as u64,
                    from,
                    to,
                });
                corr += 1;
            }
        }
        // The planted .item(): 4-byte DtoH copy, then a stream sync that
        // blocks the host while the GPU drains; the GPU idles after it.
        let at = s0 + 8_200_000;
        let mut call = NewSlice::new(host, SliceKind::Runtime, memcpy, at, 8_000);
        call.correlation = corr;
        let from = t.push_slice(call);
        let mut cp = NewSlice::new(compute, SliceKind::Memcpy, dtoh, at + 10_000, 2_000);
        cp.class = SliceClass::Memory;
        cp.correlation = corr;
        cp.copy = Some(CopyInfo {
            bytes: 4,
            kind: CopyKind::DeviceToHost,
            pageable: false,
        });
        let to = t.push_slice(cp);
        t.add_flow(Flow {
            id: corr as u64,
            from,
            to,
        });
        corr += 1;
        let mut sc = NewSlice::new(host, SliceKind::Runtime, sync, at + 9_000, 400_000);
        sc.correlation = corr;
        t.push_slice(sc);
        corr += 1;
    }
}
