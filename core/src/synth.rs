//! Generated traces for tests and benchmarks.
//!
//! [`fsdp_like`] builds what a ZeRO-3/FSDP job looks like to the collector:
//! per rank a host thread launching kernels (runtime API slices with
//! correlation ids and flows), a compute stream with GEMM-like kernels, a
//! communication stream with NCCL all-gathers (forward prefetch) and
//! reduce-scatters (backward), ProfilerStep ranges, and optionally planted
//! `.item()`-like synchronizations (a 4-byte D2H copy, then a stream sync
//! that blocks the host while the GPU drains). Deterministic for a seed.

use crate::model::*;

/// Shape of a generated trace.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Number of ranks (processes).
    pub ranks: u32,
    /// Stop adding steps once the trace holds at least this many slices.
    pub target_slices: usize,
    /// Layers per step (one all-gather in the forward, one reduce-scatter in the backward each).
    pub layers: u32,
    /// Plant an item-like sync at the end of every step.
    pub item_sync: bool,
    /// Random seed (0 is treated as 1).
    pub seed: u64,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            ranks: 2,
            target_slices: 10_000,
            layers: 8,
            item_sync: true,
            seed: 1,
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// `base` ± 10 %.
    fn jitter(&mut self, base: i64) -> i64 {
        base + (self.next() as i64 % (base / 5 + 1)) - base / 10
    }
}

/// xorshift64*: a fixed, dependency-free sequence for seeded tests and
/// fuzzing (the same seed gives the same inputs on every machine).
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64 bits (a nonzero seed never reaches zero).
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// In `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// In `[0, 1)`, 24 bits of it.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// An H200 as CUDA reports it.
pub fn h200(process: ProcessId, ordinal: u32) -> Device {
    Device {
        process,
        ordinal,
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
        smem_per_block_bytes: 49152,
        global_mem_bytes: 150_754_820_096,
    }
}

/// The start of a hand-made trace: process `pid` (rank 0 of 1, with
/// `metadata`), one H200, its host thread "main" (tid 1), and one track per
/// CUDA stream id of `streams`. Returns the builder, the thread's track and
/// the streams' tracks, in the order given.
pub fn one_gpu(
    pid: u32,
    metadata: Vec<(String, String)>,
    streams: &[u32],
) -> (TraceBuilder, TrackId, Vec<TrackId>) {
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process {
        pid,
        rank: Some(0),
        world_size: Some(1),
        metadata,
        ..Default::default()
    });
    let d = t.add_device(h200(p, 0));
    let host = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "main");
    let g = t.add_track(p, None, TrackKind::Gpu { device: d }, "GPU 0");
    let lanes = streams
        .iter()
        .map(|&id| {
            let kind = TrackKind::Stream {
                device: d,
                stream: id,
            };
            t.add_track(p, Some(g), kind, &format!("stream {id}"))
        })
        .collect();
    (t, host, lanes)
}

/// Per-rank tracks and counters of a generated trace.
struct RankTracks {
    host: TrackId,
    compute: TrackId,
    comm: TrackId,
}

/// Builds an FSDP-like multi-rank trace (see the module docs).
pub fn fsdp_like(o: &SynthOptions) -> Trace {
    let ranks: Vec<u32> = (0..o.ranks).collect();
    generate(o, &ranks, o.seed.max(1), &|_| "synth".to_string(), &|r| r)
}

/// Rank `rank` alone of an `o.ranks`-rank FSDP-like job, as the collector
/// writes one file per rank: about `o.target_slices` slices, the same
/// collectives in the same order on every rank (so they match across
/// ranks), eight ranks per host (`node-K`), its own random durations.
pub fn fsdp_like_rank(o: &SynthOptions, rank: u32) -> Trace {
    let seed = o.seed.max(1) ^ (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    generate(
        o,
        &[rank],
        seed.max(1),
        &|r| format!("node-{}", r / 8),
        &|r| r % 8,
    )
}

fn generate(
    o: &SynthOptions,
    rank_ids: &[u32],
    seed: u64,
    host: &dyn Fn(u32) -> String,
    ordinal: &dyn Fn(u32) -> u32,
) -> Trace {
    let mut t = TraceBuilder::new();
    t.reserve_slices(o.target_slices + 1024);
    let mut rng = Rng(seed);
    let mut ranks = Vec::new();
    for &r in rank_ids {
        let p = t.add_process(Process {
            pid: 1000 + r,
            name: format!("python train.py (rank {r})"),
            rank: Some(r),
            local_rank: Some(ordinal(r)),
            world_size: Some(o.ranks),
            hostname: host(r),
            cmdline: "python train.py".into(),
            clock: ClockDomain::Boottime,
            metadata: vec![("generator".into(), "streamscope synth::fsdp_like".into())],
            ..Default::default()
        });
        let d = t.add_device(h200(p, ordinal(r)));
        let host = t.add_track(p, None, TrackKind::Thread { tid: 1000 + r }, "python");
        let gpu = t.add_track(
            p,
            None,
            TrackKind::Gpu { device: d },
            &format!("GPU {r} · NVIDIA H200"),
        );
        let compute = t.add_track(
            p,
            Some(gpu),
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "stream 7",
        );
        let comm = t.add_track(
            p,
            Some(gpu),
            TrackKind::Stream {
                device: d,
                stream: 20,
            },
            "stream 20",
        );
        ranks.push(RankTracks {
            host,
            compute,
            comm,
        });
    }
    let names = Names::new(&mut t, o.layers);
    let gemm = t.intern_launch(LaunchConfig {
        grid: [132, 4, 1],
        block: [256, 1, 1],
        registers_per_thread: 168,
        static_smem_bytes: 0,
        dynamic_smem_bytes: 200704,
    });
    let elementwise = t.intern_launch(LaunchConfig {
        grid: [4096, 1, 1],
        block: [256, 1, 1],
        registers_per_thread: 32,
        static_smem_bytes: 0,
        dynamic_smem_bytes: 0,
    });
    let nccl = t.intern_launch(LaunchConfig {
        grid: [16, 1, 1],
        block: [640, 1, 1],
        registers_per_thread: 96,
        static_smem_bytes: 4096,
        dynamic_smem_bytes: 0,
    });
    let d2h = t.intern_copy(CopyInfo {
        bytes: 4,
        kind: CopyKind::DeviceToHost,
        pageable: false,
    });

    let t0: i64 = 1_000_000_000;
    let mut step = 0u32;
    let mut now = vec![t0; rank_ids.len()];
    let mut corr = vec![1u32; rank_ids.len()];
    while t.slices().len() < o.target_slices {
        for (r, rt) in ranks.iter().enumerate() {
            let mut cpu = now[r];
            let step_start = cpu;
            let mut gpu_compute = cpu + 5_000;
            let mut gpu_comm = cpu + 2_000;
            let launch = |t: &mut TraceBuilder, cpu: &mut i64, corr: &mut u32, api: StrId| -> u32 {
                let c = *corr;
                *corr += 1;
                t.push_slice_raw(
                    rt.host,
                    *cpu,
                    4_000,
                    api,
                    SliceKind::Runtime,
                    SliceClass::None,
                    c,
                    NO_PAYLOAD,
                    NO_ARGS,
                );
                *cpu += 5_000;
                c
            };
            for phase in 0..2 {
                for l in 0..o.layers {
                    // Communication: all-gather (forward) or reduce-scatter (backward).
                    let c = launch(&mut t, &mut cpu, &mut corr[r], names.launch);
                    let dur = rng.jitter(if phase == 0 { 60_000 } else { 90_000 });
                    let start = gpu_comm.max(cpu);
                    let name = if phase == 0 {
                        names.all_gather
                    } else {
                        names.reduce_scatter
                    };
                    t.push_slice_raw(
                        rt.comm,
                        start,
                        dur,
                        name,
                        SliceKind::Kernel,
                        SliceClass::Communication,
                        c,
                        nccl,
                        NO_ARGS,
                    );
                    gpu_comm = start + dur;
                    // Compute: the layer's GEMMs and an elementwise kernel;
                    // it waits for its all-gather in forward.
                    let ready = if phase == 0 { start + dur } else { gpu_compute };
                    gpu_compute = gpu_compute.max(ready);
                    for k in 0..3 {
                        let c = launch(&mut t, &mut cpu, &mut corr[r], names.launch);
                        let (name, lc, base) = if k < 2 {
                            (names.gemm[l as usize % names.gemm.len()], gemm, 30_000)
                        } else {
                            (names.gelu, elementwise, 8_000)
                        };
                        let dur = rng.jitter(base * (phase as i64 + 1));
                        let start = gpu_compute.max(cpu);
                        t.push_slice_raw(
                            rt.compute,
                            start,
                            dur,
                            name,
                            SliceKind::Kernel,
                            SliceClass::Compute,
                            c,
                            lc,
                            NO_ARGS,
                        );
                        gpu_compute = start + dur;
                    }
                }
            }
            if o.item_sync {
                // loss.item(): a 4-byte D2H copy queued behind the step's
                // work, then the host blocks until it lands.
                let c = launch(&mut t, &mut cpu, &mut corr[r], names.memcpy_async);
                let start = gpu_compute.max(cpu);
                t.push_slice_raw(
                    rt.compute,
                    start,
                    2_000,
                    names.memcpy_d2h,
                    SliceKind::Memcpy,
                    SliceClass::Memory,
                    c,
                    d2h,
                    NO_ARGS,
                );
                gpu_compute = start + 2_000;
                let sync_end = gpu_compute + 3_000;
                t.push_slice_raw(
                    rt.host,
                    cpu,
                    sync_end - cpu,
                    names.stream_sync,
                    SliceKind::Runtime,
                    SliceClass::None,
                    0,
                    NO_PAYLOAD,
                    NO_ARGS,
                );
                cpu = sync_end + 40_000; // the host prepares the next batch while the GPU idles
            }
            let end = cpu.max(gpu_compute).max(gpu_comm);
            let step_name = t.intern(&format!("ProfilerStep#{step}"));
            t.push_slice_raw(
                rt.host,
                step_start,
                end - step_start,
                step_name,
                SliceKind::Range,
                SliceClass::None,
                0,
                NO_PAYLOAD,
                NO_ARGS,
            );
            now[r] = end + 1_000;
        }
        step += 1;
    }
    t.link_flows_by_correlation();
    t.finish()
}

struct Names {
    launch: StrId,
    memcpy_async: StrId,
    stream_sync: StrId,
    memcpy_d2h: StrId,
    all_gather: StrId,
    reduce_scatter: StrId,
    gemm: Vec<StrId>,
    gelu: StrId,
}

impl Names {
    fn new(t: &mut TraceBuilder, layers: u32) -> Self {
        Names {
            launch: t.intern("cudaLaunchKernel"),
            memcpy_async: t.intern("cudaMemcpyAsync"),
            stream_sync: t.intern("cudaStreamSynchronize"),
            memcpy_d2h: t.intern("Memcpy DtoH (Device -> Pinned)"),
            all_gather: t.intern("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            reduce_scatter: t.intern("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            gemm: (0..layers.clamp(1, 4))
                .map(|i| t.intern(&format!("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas_{i}")))
                .collect(),
            gelu: t.intern("gelu_forward_bf16"),
        }
    }
}

/// Adds measured-GPU-metrics counter tracks (as `record --gpu-metrics`
/// writes them) to every GPU of `t`, one sample every `interval_ns` over
/// the span of the GPU's work: "SM active %" is 100 while a compute kernel
/// of the GPU runs at the sample's time and 0 otherwise, "NVLink rx/tx
/// GB/s" 200 while a communication kernel runs, "DRAM GB/s" a constant
/// 1000; the other metrics are left out (not sampled).
pub fn add_gpu_metrics(t: &mut Trace, interval_ns: i64) {
    use crate::gpu_metrics::{track_name, Metric};
    let interval_ns = interval_ns.max(1);
    // (device, its GPU track, compute and communication busy spans)
    let mut busy_of = Vec::new();
    for d in (0..t.devices().len()).map(DeviceId::from_index) {
        let (mut compute, mut comm) = (Vec::new(), Vec::new());
        let sl = t.slices();
        for i in 0..sl.len() {
            if t.track_device(sl.track()[i]) != Some(d) || !sl.kind()[i].is_gpu_activity() {
                continue;
            }
            let iv = (sl.start_ns()[i], sl.start_ns()[i] + sl.dur_ns()[i]);
            match sl.class()[i] {
                SliceClass::Communication => comm.push(iv),
                SliceClass::Compute => compute.push(iv),
                _ => {}
            }
        }
        let (Some(a), Some(b)) = (
            compute.iter().chain(&comm).map(|x| x.0).min(),
            compute.iter().chain(&comm).map(|x| x.1).max(),
        ) else {
            continue;
        };
        let compute = crate::analysis::intervals::union(compute);
        let comm = crate::analysis::intervals::union(comm);
        let gpu = (t.tracks().iter())
            .position(|tr| tr.kind == TrackKind::Gpu { device: d })
            .map(TrackId::from_index);
        busy_of.push((d, gpu, (a, b), compute, comm));
    }
    let mut b = std::mem::take(t).into_builder();
    for (d, gpu, (start, end), compute, comm) in busy_of {
        let dev = b.devices()[d.index()].clone();
        let mut track = |m: Metric| {
            b.add_track(
                dev.process,
                gpu,
                TrackKind::Counter { device: Some(d) },
                &track_name(dev.ordinal, m),
            )
        };
        let sm = track(Metric::SmActive);
        let rx = track(Metric::NvlinkRx);
        let tx = track(Metric::NvlinkTx);
        let dram = track(Metric::Dram);
        let mut ts = start;
        while ts < end {
            let busy = |u: &[(i64, i64)]| crate::analysis::intervals::contains(u, ts);
            b.push_counter(sm, ts, if busy(&compute) { 100.0 } else { 0.0 });
            let link = if busy(&comm) { 200.0 } else { 0.0 };
            b.push_counter(rx, ts, link);
            b.push_counter(tx, ts, link);
            b.push_counter(dram, ts, 1000.0);
            ts += interval_ns;
        }
    }
    *t = b.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_the_requested_size_deterministically() {
        let o = SynthOptions {
            target_slices: 5_000,
            ..Default::default()
        };
        let a = fsdp_like(&o);
        let b = fsdp_like(&o);
        assert!(a.slices().len() >= 5_000);
        assert_eq!(a.slices(), b.slices());
        assert_eq!(a.processes().len(), 2);
        assert!(!a.flows().is_empty());
        let comm = a
            .slices()
            .class()
            .iter()
            .filter(|c| **c == SliceClass::Communication)
            .count();
        assert!(comm > 0);
    }
}
