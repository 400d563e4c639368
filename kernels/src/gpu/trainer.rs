//! One rank's ZeRO-3 training loop.
//!
//! Overlap mode uses two streams. Per step:
//! - forward: the all-gather of block l+P+1 (P = --prefetch) is issued on the
//!   communication stream once block l has finished with its weight buffer,
//!   so it runs under block l+1's compute; block l waits for its own gather.
//! - backward: the same in reverse order (weights are re-gathered), and each
//!   block's fp32 gradient is reduce-scattered on the communication stream
//!   while the next block computes its backward.
//! - optimizer: after the last reduce-scatter, AdamW/SGD on the fp32 shards,
//!   which also writes the bf16 shard the next step's all-gathers send.
//!
//! CUDA events are the only cross-stream dependencies (cudarc's own event
//! tracking is off): `gathered[slot]` (comm -> compute), `free[slot]`
//! (compute -> comm, the weight buffer may be overwritten), `grad_ready` /
//! `grad_free` for the two full-gradient buffers, `step_begin` and `rs_done`.
//! Serial mode runs the same calls on one stream with no events.
//! The loss stays on the GPU unless --item-sync copies it out each step.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits,
};
use serde::Serialize;

use super::block::{self, BackwardBufs, Compute, Dims, ForwardBufs};
use super::error::{Context, GpuError};
use super::gemm::Gemm;
use super::kernels::{AdamW, Kernels, LOSS_BLOCKS};
use super::nccl::{Communicator, Dtype, UNIQUE_ID_BYTES};
use crate::config::{Mode, Optimizer, Plan};
use crate::cpu_ref::{init_scales, INPUT_STREAM, PARAM_STREAM, TARGET_STREAM};
use crate::nvtx;

/// Which GPU and which rank a trainer is.
#[derive(Clone, Debug)]
pub struct RankSetup {
    pub ordinal: usize,
    pub rank: usize,
    pub world: usize,
    pub nccl_id: [u8; UNIQUE_ID_BYTES],
}

/// What one rank measured.
#[derive(Clone, Debug, Serialize)]
pub struct RankResult {
    pub rank: usize,
    pub device_name: String,
    /// Measured steps, CUDA events on the compute stream around the whole step.
    pub step_ms: Vec<f64>,
    /// Global loss (mean over all ranks' tokens) of every step, warmup included.
    pub loss: Vec<f32>,
    /// Per collective and per block compute, measured steps only.
    pub all_gather_fwd_ms: Vec<f64>,
    pub all_gather_bwd_ms: Vec<f64>,
    pub reduce_scatter_ms: Vec<f64>,
    pub forward_block_ms: Vec<f64>,
    pub backward_block_ms: Vec<f64>,
}

struct Layer {
    master: CudaSlice<f32>,
    m: CudaSlice<f32>,
    v: Option<CudaSlice<f32>>,
    grad: CudaSlice<f32>,
    shard_bf16: CudaSlice<u16>,
}

/// A timed interval: two timing events on one stream.
struct Span {
    start: CudaEvent,
    end: CudaEvent,
}

impl Span {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, GpuError> {
        let mk = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .ctx("creating a timing event")
        };
        Ok(Self {
            start: mk()?,
            end: mk()?,
        })
    }
    fn ms(&self) -> Result<f64, GpuError> {
        Ok(self
            .start
            .elapsed_ms(&self.end)
            .ctx("reading a timing event")? as f64)
    }
}

struct StepSpans {
    step: Span,
    ag_fwd: Vec<Span>,
    ag_bwd: Vec<Span>,
    rs: Vec<Span>,
    fwd: Vec<Span>,
    bwd: Vec<Span>,
}

impl StepSpans {
    fn new(ctx: &Arc<CudaContext>, layers: usize) -> Result<Self, GpuError> {
        let many = || {
            (0..layers)
                .map(|_| Span::new(ctx))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            step: Span::new(ctx)?,
            ag_fwd: many()?,
            ag_bwd: many()?,
            rs: many()?,
            fwd: many()?,
            bwd: many()?,
        })
    }
}

/// Cross-stream dependency events (no timing).
struct Deps {
    gathered: Vec<CudaEvent>,
    free: Vec<CudaEvent>,
    grad_ready: Vec<CudaEvent>,
    grad_free: Vec<CudaEvent>,
    step_begin: CudaEvent,
    rs_done: CudaEvent,
}

fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    // Event tracking is off, so the returned guard records nothing.
    let (p, _guard) = s.device_ptr(stream);
    p
}

fn alloc<T: DeviceRepr>(
    s: &Arc<CudaStream>,
    n: usize,
    what: &str,
) -> Result<CudaSlice<T>, GpuError> {
    let mib = (n * std::mem::size_of::<T>()) >> 20;
    // SAFETY: every buffer allocated here is written by the schedule before it is read.
    unsafe { s.alloc::<T>(n) }.ctx(format!("allocating {what} ({mib} MiB)"))
}

fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    s: &Arc<CudaStream>,
    n: usize,
    what: &str,
) -> Result<CudaSlice<T>, GpuError> {
    let mib = (n * std::mem::size_of::<T>()) >> 20;
    s.alloc_zeros::<T>(n)
        .ctx(format!("allocating {what} ({mib} MiB)"))
}

pub struct Trainer {
    plan: Plan,
    rank: usize,
    device_name: String,
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    comm_stream: Arc<CudaStream>,
    kernels: Kernels,
    gemm: Gemm,
    comm: Communicator,
    layers: Vec<Layer>,
    gathered: Vec<CudaSlice<u16>>,
    grads: Vec<CudaSlice<f32>>,
    xs: Vec<CudaSlice<u16>>,
    acts_a: Vec<CudaSlice<u16>>,
    acts_g: Vec<CudaSlice<u16>>,
    target: CudaSlice<u16>,
    dy: CudaSlice<u16>,
    scratch: CudaSlice<u16>,
    partial: CudaSlice<f32>,
    losses: CudaSlice<f32>,
    deps: Deps,
    dims: Dims,
}

impl Trainer {
    /// Creates the context, streams, communicator and every buffer, and
    /// initialises parameters and data from the seed.
    pub fn new(plan: &Plan, setup: &RankSetup) -> Result<Self, GpuError> {
        let gpu = setup.ordinal;
        let ctx = CudaContext::new(gpu).ctx(format!("creating a context on GPU {gpu}"))?;
        // SAFETY: fsdp-ref orders every cross-stream use with its own events
        // (see the module doc), and frees buffers only after a full synchronize.
        unsafe { ctx.disable_event_tracking() };
        let device_name = ctx.name().ctx("reading the device name")?;
        let need = plan.device_bytes();
        let (free, _total) = ctx.mem_get_info().ctx("reading free device memory")?;
        if need > free {
            return Err(GpuError::Invalid(format!(
                "GPU {gpu} has {:.1} GiB free but this configuration needs {:.1} GiB of buffers; \
                 lower --dim, --layers, --batch or --seq",
                free as f64 / (1u64 << 30) as f64,
                need as f64 / (1u64 << 30) as f64
            )));
        }
        let compute = ctx.new_stream().ctx("creating the compute stream")?;
        let comm_stream = match plan.mode {
            Mode::Overlap => ctx.new_stream().ctx("creating the communication stream")?,
            Mode::Serial => compute.clone(),
        };
        let kernels = Kernels::load(&ctx)?;
        let gemm = Gemm::new(compute.clone())?;
        ctx.bind_to_thread()
            .ctx("binding the context before NCCL init")?;
        let comm = {
            let _r = nvtx::range("ncclCommInitRank");
            Communicator::init(&setup.nccl_id, setup.rank, setup.world)?
        };

        let s = &compute;
        let shard = plan.shard.shard_params;
        let mut layers = Vec::with_capacity(plan.layers);
        for l in 0..plan.layers {
            layers.push(Layer {
                master: alloc(s, shard, &format!("block {l} fp32 master shard"))?,
                m: zeros(s, shard, &format!("block {l} first moment"))?,
                v: match plan.optimizer {
                    Optimizer::Adamw => Some(zeros(s, shard, &format!("block {l} second moment"))?),
                    Optimizer::Sgd => None,
                },
                grad: alloc(s, shard, &format!("block {l} gradient shard"))?,
                shard_bf16: alloc(s, shard, &format!("block {l} bf16 shard"))?,
            });
        }
        let block = plan.shard.block_params;
        let gathered = (0..plan.gather_slots())
            .map(|i| alloc(s, block, &format!("gathered weights slot {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let grads = (0..plan.grad_slots())
            .map(|i| alloc(s, block, &format!("full gradient slot {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let td = plan.tokens_local * plan.dim;
        let th = plan.tokens_local * 4 * plan.dim;
        let xs = (0..=plan.layers)
            .map(|l| alloc(s, td, &format!("activation x{l}")))
            .collect::<Result<Vec<_>, _>>()?;
        let acts_a = (0..plan.layers)
            .map(|l| alloc(s, th, &format!("block {l} pre-activation")))
            .collect::<Result<Vec<_>, _>>()?;
        let acts_g = (0..plan.layers)
            .map(|l| alloc(s, th, &format!("block {l} activation")))
            .collect::<Result<Vec<_>, _>>()?;
        let target = alloc(s, td, "target")?;
        let dy = alloc(s, td, "output gradient")?;
        let scratch = alloc(s, th, "backward scratch")?;
        let partial = alloc(s, LOSS_BLOCKS as usize, "loss partial sums")?;
        let losses = zeros(s, plan.warmup + plan.steps, "per-step losses")?;
        let dep = || ctx.new_event(None).ctx("creating a dependency event");
        let deps = Deps {
            gathered: (0..plan.gather_slots())
                .map(|_| dep())
                .collect::<Result<_, _>>()?,
            free: (0..plan.gather_slots())
                .map(|_| dep())
                .collect::<Result<_, _>>()?,
            grad_ready: (0..plan.grad_slots())
                .map(|_| dep())
                .collect::<Result<_, _>>()?,
            grad_free: (0..plan.grad_slots())
                .map(|_| dep())
                .collect::<Result<_, _>>()?,
            step_begin: dep()?,
            rs_done: dep()?,
        };
        let dims = Dims {
            tokens: plan.tokens_local,
            dim: plan.dim,
        };
        let t = Self {
            plan: plan.clone(),
            rank: setup.rank,
            device_name,
            ctx,
            compute,
            comm_stream,
            kernels,
            gemm,
            comm,
            layers,
            gathered,
            grads,
            xs,
            acts_a,
            acts_g,
            target,
            dy,
            scratch,
            partial,
            losses,
            deps,
            dims,
        };
        t.initialise()?;
        Ok(t)
    }

    /// Seeded parameters (each rank its own shard of the same global
    /// values), inputs and targets (each rank its own tokens).
    fn initialise(&self) -> Result<(), GpuError> {
        let _r = nvtx::range("initialise");
        let s = &self.compute;
        let p = &self.plan;
        let shard = p.shard.shard_params;
        let offset = p.shard.shard_offset(self.rank);
        for (l, layer) in self.layers.iter().enumerate() {
            let master = ptr(&layer.master, s);
            // SAFETY: buffers sized for the plan at construction, owned by the trainer.
            unsafe {
                self.kernels.init_uniform_f32(
                    s,
                    master,
                    shard,
                    p.seed,
                    PARAM_STREAM + l as u64,
                    offset,
                    p.shard.w1_params,
                    init_scales(p.dim),
                )
            }?;
            // SAFETY: buffers sized for the plan at construction, owned by the trainer.
            unsafe {
                self.kernels
                    .cast_f32_bf16(s, master, ptr(&layer.shard_bf16, s), shard)
            }?;
        }
        let td = p.tokens_local * p.dim;
        let first = self.rank * td;
        // SAFETY: buffers sized for the plan at construction, owned by the trainer.
        unsafe {
            self.kernels.init_uniform_bf16(
                s,
                ptr(&self.xs[0], s),
                td,
                p.seed,
                INPUT_STREAM,
                first,
                1.0,
            )
        }?;
        // SAFETY: buffers sized for the plan at construction, owned by the trainer.
        unsafe {
            self.kernels.init_uniform_bf16(
                s,
                ptr(&self.target, s),
                td,
                p.seed,
                TARGET_STREAM,
                first,
                1.0,
            )
        }?;
        s.synchronize().ctx("initialising parameters and data")?;
        Ok(())
    }

    fn overlap(&self) -> bool {
        self.plan.mode == Mode::Overlap
    }

    /// Makes `stream` wait for `event` (overlap mode only: serial has one stream).
    fn wait(
        &self,
        stream: &Arc<CudaStream>,
        event: &CudaEvent,
        what: &str,
    ) -> Result<(), GpuError> {
        if self.overlap() {
            stream.wait(event).ctx(format!("waiting for {what}"))?;
        }
        Ok(())
    }

    fn record(
        &self,
        event: &CudaEvent,
        stream: &Arc<CudaStream>,
        what: &str,
    ) -> Result<(), GpuError> {
        if self.overlap() {
            event.record(stream).ctx(format!("recording {what}"))?;
        }
        Ok(())
    }

    fn gather(&self, block: usize, slot: usize, span: &Span, phase: &str) -> Result<(), GpuError> {
        let bytes = self.plan.shard.gather_bytes();
        let label = format!("all_gather {phase} block {block} ({bytes} B)");
        if let Some((r, ms)) = self.plan.straggler {
            if r == self.rank && ms > 0.0 {
                let _s = nvtx::range("straggler sleep");
                std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1e3));
            }
        }
        let _r = nvtx::range(&label);
        let cs = &self.comm_stream;
        self.wait(
            cs,
            &self.deps.free[slot],
            &format!("weight slot {slot} to be free"),
        )?;
        span.start.record(cs).ctx("recording a timing event")?;
        let send = ptr(&self.layers[block].shard_bf16, cs);
        let recv = ptr(&self.gathered[slot], cs);
        // SAFETY: buffers sized for the plan at construction, owned by the trainer.
        unsafe {
            self.comm.all_gather(
                send,
                recv,
                self.plan.shard.shard_params,
                Dtype::Bf16,
                cs,
                &label,
            )
        }?;
        span.end.record(cs).ctx("recording a timing event")?;
        self.record(&self.deps.gathered[slot], cs, "a finished all-gather")
    }

    fn reduce_scatter(&self, block: usize, gslot: usize, span: &Span) -> Result<(), GpuError> {
        let bytes = self.plan.shard.reduce_scatter_bytes();
        let label = format!("reduce_scatter block {block} ({bytes} B)");
        let _r = nvtx::range(&label);
        let cs = &self.comm_stream;
        self.wait(cs, &self.deps.grad_ready[gslot], "a block's gradient")?;
        span.start.record(cs).ctx("recording a timing event")?;
        let send = ptr(&self.grads[gslot], cs);
        let recv = ptr(&self.layers[block].grad, cs);
        // SAFETY: buffers sized for the plan at construction, owned by the trainer.
        unsafe {
            self.comm.reduce_scatter_sum(
                send,
                recv,
                self.plan.shard.shard_params,
                Dtype::F32,
                cs,
                &label,
            )
        }?;
        span.end.record(cs).ctx("recording a timing event")?;
        self.record(&self.deps.grad_free[gslot], cs, "a finished reduce-scatter")
    }

    fn compute_ctx(&self) -> Compute<'_> {
        Compute {
            stream: &self.compute,
            gemm: &self.gemm,
            kernels: &self.kernels,
        }
    }

    fn forward(&self, spans: &StepSpans) -> Result<(), GpuError> {
        let _r = nvtx::range("forward");
        let (n, p, slots) = (
            self.plan.layers,
            self.plan.prefetch,
            self.plan.gather_slots(),
        );
        let cs = &self.compute;
        if self.overlap() {
            for l in 0..(p + 1).min(n) {
                self.gather(l, l % slots, &spans.ag_fwd[l], "forward")?;
            }
        }
        for l in 0..n {
            let slot = l % slots;
            if !self.overlap() {
                self.gather(l, slot, &spans.ag_fwd[l], "forward")?;
            }
            {
                let _b = nvtx::range(&format!("forward block {l}"));
                self.wait(
                    cs,
                    &self.deps.gathered[slot],
                    &format!("block {l}'s weights"),
                )?;
                spans.fwd[l]
                    .start
                    .record(cs)
                    .ctx("recording a timing event")?;
                let bufs = ForwardBufs {
                    x: ptr(&self.xs[l], cs),
                    w: ptr(&self.gathered[slot], cs),
                    a: ptr(&self.acts_a[l], cs),
                    g: ptr(&self.acts_g[l], cs),
                    y: ptr(&self.xs[l + 1], cs),
                };
                // SAFETY: buffers sized for the plan at construction, owned by the trainer.
                unsafe {
                    block::forward(
                        &self.compute_ctx(),
                        self.dims,
                        bufs,
                        &format!("forward block {l}"),
                    )
                }?;
                spans.fwd[l]
                    .end
                    .record(cs)
                    .ctx("recording a timing event")?;
                self.record(&self.deps.free[slot], cs, "a released weight slot")?;
            }
            if self.overlap() && l + p + 1 < n {
                let next = l + p + 1;
                self.gather(next, next % slots, &spans.ag_fwd[next], "forward")?;
            }
            let every = self.plan.sync_every;
            if every > 0 && (l + 1) % every == 0 {
                let _s = nvtx::range("planted cuStreamSynchronize");
                cs.synchronize().ctx("the planted stream synchronize")?;
            }
        }
        Ok(())
    }

    fn loss(&self, step: usize) -> Result<(), GpuError> {
        let _r = nvtx::range("loss");
        let cs = &self.compute;
        let n = self.plan.tokens_local * self.plan.dim;
        let inv_count = 1.0 / (self.plan.tokens_global * self.plan.dim) as f32;
        let loss_out = ptr(&self.losses, cs) + (step * 4) as u64;
        // SAFETY: buffers sized for the plan at construction, owned by the trainer.
        unsafe {
            self.kernels.mse_loss(
                cs,
                ptr(&self.xs[self.plan.layers], cs),
                ptr(&self.target, cs),
                ptr(&self.dy, cs),
                ptr(&self.partial, cs),
                loss_out,
                n,
                inv_count,
            )
        }?;
        if self.plan.item_sync {
            let _i = nvtx::range("loss.item()");
            let view = self.losses.slice(step..step + 1);
            let host = cs
                .clone_dtoh(&view)
                .ctx("copying the loss to the host (--item-sync)")?;
            if host.first().is_some_and(|v| !v.is_finite()) {
                return Err(GpuError::Invalid(format!(
                    "loss became {} at step {step}",
                    host[0]
                )));
            }
        }
        Ok(())
    }

    fn backward(&self, spans: &StepSpans) -> Result<(), GpuError> {
        let _r = nvtx::range("backward");
        let (n, p) = (self.plan.layers, self.plan.prefetch);
        let (slots, gslots) = (self.plan.gather_slots(), self.plan.grad_slots());
        let cs = &self.compute;
        let block_at = |j: usize| n - 1 - j;
        if self.overlap() {
            for j in 0..(p + 1).min(n) {
                self.gather(
                    block_at(j),
                    j % slots,
                    &spans.ag_bwd[block_at(j)],
                    "backward",
                )?;
            }
        }
        for j in 0..n {
            let l = block_at(j);
            let (slot, gslot) = (j % slots, j % gslots);
            if !self.overlap() {
                self.gather(l, slot, &spans.ag_bwd[l], "backward")?;
            }
            {
                let _b = nvtx::range(&format!("backward block {l}"));
                self.wait(
                    cs,
                    &self.deps.gathered[slot],
                    &format!("block {l}'s weights"),
                )?;
                self.wait(cs, &self.deps.grad_free[gslot], "a free gradient buffer")?;
                spans.bwd[l]
                    .start
                    .record(cs)
                    .ctx("recording a timing event")?;
                let bufs = BackwardBufs {
                    x: ptr(&self.xs[l], cs),
                    w: ptr(&self.gathered[slot], cs),
                    a: ptr(&self.acts_a[l], cs),
                    g: ptr(&self.acts_g[l], cs),
                    dy: ptr(&self.dy, cs),
                    scratch: ptr(&self.scratch, cs),
                    dw: ptr(&self.grads[gslot], cs),
                };
                // SAFETY: buffers sized for the plan at construction, owned by the trainer.
                unsafe {
                    block::backward(
                        &self.compute_ctx(),
                        self.dims,
                        bufs,
                        &format!("backward block {l}"),
                    )
                }?;
                spans.bwd[l]
                    .end
                    .record(cs)
                    .ctx("recording a timing event")?;
                self.record(&self.deps.free[slot], cs, "a released weight slot")?;
                self.record(&self.deps.grad_ready[gslot], cs, "a finished gradient")?;
            }
            if self.overlap() && j + p + 1 < n {
                let next = j + p + 1;
                self.gather(
                    block_at(next),
                    next % slots,
                    &spans.ag_bwd[block_at(next)],
                    "backward",
                )?;
            }
            self.reduce_scatter(l, gslot, &spans.rs[l])?;
        }
        Ok(())
    }

    fn optimizer(&self, step: usize) -> Result<(), GpuError> {
        let _r = nvtx::range("optimizer");
        let cs = &self.compute;
        self.record(
            &self.deps.rs_done,
            &self.comm_stream,
            "the last reduce-scatter",
        )?;
        self.wait(cs, &self.deps.rs_done, "the last reduce-scatter")?;
        let shard = self.plan.shard.shard_params;
        for layer in &self.layers {
            let (master, m, grad, out) = (
                ptr(&layer.master, cs),
                ptr(&layer.m, cs),
                ptr(&layer.grad, cs),
                ptr(&layer.shard_bf16, cs),
            );
            match (&layer.v, self.plan.optimizer) {
                (Some(v), Optimizer::Adamw) => {
                    let h = AdamW {
                        lr: self.plan.lr,
                        beta1: 0.9,
                        beta2: 0.95,
                        eps: 1e-8,
                        weight_decay: 0.0,
                        step: (step + 1) as u32,
                    };
                    // SAFETY: buffers sized for the plan at construction, owned by the trainer.
                    unsafe {
                        self.kernels
                            .adamw(cs, master, m, ptr(v, cs), grad, out, shard, h)
                    }?;
                }
                _ => {
                    // SAFETY: buffers sized for the plan at construction, owned by the trainer.
                    unsafe {
                        self.kernels.sgd_momentum(
                            cs,
                            master,
                            m,
                            grad,
                            out,
                            shard,
                            self.plan.lr,
                            0.9,
                        )
                    }?
                }
            }
        }
        Ok(())
    }

    fn step(&self, step: usize, spans: &StepSpans) -> Result<(), GpuError> {
        let _r = nvtx::range(&format!("step {step}"));
        let cs = &self.compute;
        spans
            .step
            .start
            .record(cs)
            .ctx("recording the step start")?;
        // The step's first all-gathers read the shards the last optimizer wrote.
        self.record(&self.deps.step_begin, cs, "the step start")?;
        self.wait(
            &self.comm_stream,
            &self.deps.step_begin,
            "the previous optimizer step",
        )?;
        self.forward(spans)?;
        self.loss(step)?;
        self.backward(spans)?;
        self.optimizer(step)?;
        spans.step.end.record(cs).ctx("recording the step end")?;
        Ok(())
    }

    /// Runs warmup and measured steps, then reads the timings and the global losses.
    pub fn run(self) -> Result<RankResult, GpuError> {
        nvtx::name_current_thread(&format!("rank {}", self.rank));
        let total = self.plan.warmup + self.plan.steps;
        let spans = (0..total)
            .map(|_| StepSpans::new(&self.ctx, self.plan.layers))
            .collect::<Result<Vec<_>, _>>()?;
        for (s, sp) in spans.iter().enumerate() {
            self.step(s, sp)?;
        }
        self.compute
            .synchronize()
            .ctx("finishing the steps (compute stream)")?;
        self.comm_stream
            .synchronize()
            .ctx("finishing the steps (communication stream)")?;
        // Global loss: each rank's loss is already divided by the global token count.
        let lp = ptr(&self.losses, &self.comm_stream);
        // SAFETY: buffers sized for the plan at construction, owned by the trainer.
        unsafe {
            self.comm.all_reduce_sum_f32(
                lp,
                total,
                &self.comm_stream,
                "summing the losses over ranks",
            )
        }?;
        let loss = self
            .comm_stream
            .clone_dtoh(&self.losses)
            .ctx("copying the losses to the host")?;
        let mut r = RankResult {
            rank: self.rank,
            device_name: self.device_name.clone(),
            step_ms: Vec::new(),
            loss,
            all_gather_fwd_ms: Vec::new(),
            all_gather_bwd_ms: Vec::new(),
            reduce_scatter_ms: Vec::new(),
            forward_block_ms: Vec::new(),
            backward_block_ms: Vec::new(),
        };
        for sp in &spans[self.plan.warmup..] {
            r.step_ms.push(sp.step.ms()?);
            for l in 0..self.plan.layers {
                r.all_gather_fwd_ms.push(sp.ag_fwd[l].ms()?);
                r.all_gather_bwd_ms.push(sp.ag_bwd[l].ms()?);
                r.reduce_scatter_ms.push(sp.rs[l].ms()?);
                r.forward_block_ms.push(sp.fwd[l].ms()?);
                r.backward_block_ms.push(sp.bwd[l].ms()?);
            }
        }
        self.comm.finish()?;
        Ok(r)
    }
}

impl RankResult {
    /// The numbers the report is built from.
    pub fn measured(&self) -> crate::report::Measured {
        crate::report::Measured {
            device_name: self.device_name.clone(),
            step_ms: self.step_ms.clone(),
            loss: self.loss.clone(),
            all_gather_fwd_ms: self.all_gather_fwd_ms.clone(),
            all_gather_bwd_ms: self.all_gather_bwd_ms.clone(),
            reduce_scatter_ms: self.reduce_scatter_ms.clone(),
            forward_block_ms: self.forward_block_ms.clone(),
            backward_block_ms: self.backward_block_ms.clone(),
        }
    }
}
