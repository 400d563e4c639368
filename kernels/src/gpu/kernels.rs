//! The CUDA C kernels of cuda/fsdp_kernels.cu, compiled with NVRTC for the
//! device's own architecture and launched on a given stream.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};

use super::error::{Context, GpuError};

const SOURCE: &str = include_str!("../../cuda/fsdp_kernels.cu");
const SOURCE_NAME: &str = "fsdp_kernels.cu";
const THREADS: u32 = 256;
/// Blocks of the loss kernel: fixed, so the reduction order never changes.
pub const LOSS_BLOCKS: u32 = 256;

pub struct Kernels {
    init_uniform_f32: CudaFunction,
    init_uniform_bf16: CudaFunction,
    cast_f32_bf16: CudaFunction,
    gelu_fwd: CudaFunction,
    gelu_bwd: CudaFunction,
    mse_loss_fwd_bwd: CudaFunction,
    sum_partials: CudaFunction,
    adamw_step: CudaFunction,
    sgd_momentum_step: CudaFunction,
    max_blocks: u32,
}

/// AdamW hyper-parameters of one step.
#[derive(Clone, Copy, Debug)]
pub struct AdamW {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// 1-based step count, for bias correction.
    pub step: u32,
}

fn compile_log(e: CompileError) -> String {
    match e {
        CompileError::CompileError { log, nvrtc, .. } => {
            format!("{nvrtc:?}: {}", log.to_string_lossy())
        }
        other => format!("{other:?}"),
    }
}

/// Every kernel of cuda/fsdp_kernels.cu, by its `extern "C"` name.
pub const KERNEL_NAMES: [&str; 9] = [
    "init_uniform_f32",
    "init_uniform_bf16",
    "cast_f32_bf16",
    "gelu_fwd",
    "gelu_bwd",
    "mse_loss_fwd_bwd",
    "sum_partials",
    "adamw_step",
    "sgd_momentum_step",
];

/// Compiles cuda/fsdp_kernels.cu to PTX for `compute_{cc}` (e.g. 90). Needs
/// only libnvrtc, no GPU.
pub fn compile_ptx(cc: u32) -> Result<Ptx, GpuError> {
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture=compute_{cc}")],
        name: Some(SOURCE_NAME.into()),
        ..Default::default()
    };
    compile_ptx_with_opts(SOURCE, opts).map_err(|e| GpuError::Compile {
        file: SOURCE_NAME,
        log: compile_log(e),
    })
}

impl Kernels {
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self, GpuError> {
        let (major, minor) = ctx
            .compute_capability()
            .ctx("reading the compute capability")?;
        let ptx = compile_ptx((major * 10 + minor) as u32)?;
        let module = ctx.load_module(ptx).ctx("loading the NVRTC module")?;
        let f = |name: &str| {
            module
                .load_function(name)
                .ctx(format!("finding kernel {name}"))
        };
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .ctx("reading the SM count")?;
        Ok(Self {
            init_uniform_f32: f("init_uniform_f32")?,
            init_uniform_bf16: f("init_uniform_bf16")?,
            cast_f32_bf16: f("cast_f32_bf16")?,
            gelu_fwd: f("gelu_fwd")?,
            gelu_bwd: f("gelu_bwd")?,
            mse_loss_fwd_bwd: f("mse_loss_fwd_bwd")?,
            sum_partials: f("sum_partials")?,
            adamw_step: f("adamw_step")?,
            sgd_momentum_step: f("sgd_momentum_step")?,
            max_blocks: (sms.max(1) as u32) * 8,
        })
    }

    fn grid(&self, n: usize) -> LaunchConfig {
        let blocks = n
            .div_ceil(THREADS as usize)
            .clamp(1, self.max_blocks as usize) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn init_uniform_f32(
        &self,
        s: &Arc<CudaStream>,
        out: u64,
        n: usize,
        seed: u64,
        stream_id: u64,
        offset: usize,
        split: usize,
        scales: (f32, f32),
    ) -> Result<(), GpuError> {
        let (n64, off, split) = (n as u64, offset as u64, split as u64);
        let mut b = s.launch_builder(&self.init_uniform_f32);
        b.arg(&out)
            .arg(&n64)
            .arg(&seed)
            .arg(&stream_id)
            .arg(&off)
            .arg(&split);
        b.arg(&scales.0).arg(&scales.1);
        // SAFETY: `out` holds n f32; the argument list matches the kernel's signature.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching init_uniform_f32")
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn init_uniform_bf16(
        &self,
        s: &Arc<CudaStream>,
        out: u64,
        n: usize,
        seed: u64,
        stream_id: u64,
        offset: usize,
        scale: f32,
    ) -> Result<(), GpuError> {
        let (n64, off) = (n as u64, offset as u64);
        let mut b = s.launch_builder(&self.init_uniform_bf16);
        b.arg(&out)
            .arg(&n64)
            .arg(&seed)
            .arg(&stream_id)
            .arg(&off)
            .arg(&scale);
        // SAFETY: `out` holds n bf16; arguments match the kernel.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching init_uniform_bf16")
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    pub unsafe fn cast_f32_bf16(
        &self,
        s: &Arc<CudaStream>,
        src: u64,
        dst: u64,
        n: usize,
    ) -> Result<(), GpuError> {
        let n64 = n as u64;
        let mut b = s.launch_builder(&self.cast_f32_bf16);
        b.arg(&src).arg(&dst).arg(&n64);
        // SAFETY: src holds n f32, dst n bf16.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching cast_f32_bf16")
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    pub unsafe fn gelu_fwd(
        &self,
        s: &Arc<CudaStream>,
        a: u64,
        g: u64,
        n: usize,
    ) -> Result<(), GpuError> {
        let n64 = n as u64;
        let mut b = s.launch_builder(&self.gelu_fwd);
        b.arg(&a).arg(&g).arg(&n64);
        // SAFETY: a and g hold n bf16.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching gelu_fwd")
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    pub unsafe fn gelu_bwd(
        &self,
        s: &Arc<CudaStream>,
        dg: u64,
        a: u64,
        da: u64,
        n: usize,
    ) -> Result<(), GpuError> {
        let n64 = n as u64;
        let mut b = s.launch_builder(&self.gelu_bwd);
        b.arg(&dg).arg(&a).arg(&da).arg(&n64);
        // SAFETY: dg, a, da hold n bf16.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching gelu_bwd")
    }

    /// Writes dy and LOSS_BLOCKS partial sums, then sums them into `loss_out[0]`.
    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn mse_loss(
        &self,
        s: &Arc<CudaStream>,
        y: u64,
        t: u64,
        dy: u64,
        partial: u64,
        loss_out: u64,
        n: usize,
        inv_count: f32,
    ) -> Result<(), GpuError> {
        let n64 = n as u64;
        let cfg = LaunchConfig {
            grid_dim: (LOSS_BLOCKS, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = s.launch_builder(&self.mse_loss_fwd_bwd);
        b.arg(&y)
            .arg(&t)
            .arg(&dy)
            .arg(&partial)
            .arg(&n64)
            .arg(&inv_count);
        // SAFETY: y, t, dy hold n bf16; partial holds LOSS_BLOCKS f32 (256 threads match the kernel's shared array).
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .ctx("launching mse_loss_fwd_bwd")?;
        let parts = LOSS_BLOCKS;
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = s.launch_builder(&self.sum_partials);
        b.arg(&partial).arg(&parts).arg(&loss_out);
        // SAFETY: partial holds LOSS_BLOCKS f32, loss_out at least one f32.
        unsafe { b.launch(one) }
            .map(|_| ())
            .ctx("launching sum_partials")
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn adamw(
        &self,
        s: &Arc<CudaStream>,
        master: u64,
        m: u64,
        v: u64,
        grad: u64,
        shard_bf16: u64,
        n: usize,
        h: AdamW,
    ) -> Result<(), GpuError> {
        let n64 = n as u64;
        let bias_c1 = 1.0 - h.beta1.powi(h.step as i32);
        let bias_c2 = 1.0 - h.beta2.powi(h.step as i32);
        let mut b = s.launch_builder(&self.adamw_step);
        b.arg(&master)
            .arg(&m)
            .arg(&v)
            .arg(&grad)
            .arg(&shard_bf16)
            .arg(&n64);
        b.arg(&h.lr)
            .arg(&h.beta1)
            .arg(&h.beta2)
            .arg(&h.eps)
            .arg(&h.weight_decay);
        b.arg(&bias_c1).arg(&bias_c2);
        // SAFETY: master, m, v, grad hold n f32 and shard_bf16 n bf16.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching adamw_step")
    }

    /// # Safety
    ///
    /// Every `u64` argument naming a buffer must be the address of a live
    /// device allocation on `s`'s context holding at least the elements the
    /// kernel touches (`n`, or the sizes documented above), staying alive
    /// until `s` has run the kernel.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sgd_momentum(
        &self,
        s: &Arc<CudaStream>,
        master: u64,
        m: u64,
        grad: u64,
        shard_bf16: u64,
        n: usize,
        lr: f32,
        momentum: f32,
    ) -> Result<(), GpuError> {
        let n64 = n as u64;
        let mut b = s.launch_builder(&self.sgd_momentum_step);
        b.arg(&master)
            .arg(&m)
            .arg(&grad)
            .arg(&shard_bf16)
            .arg(&n64)
            .arg(&lr)
            .arg(&momentum);
        // SAFETY: master, m, grad hold n f32 and shard_bf16 n bf16.
        unsafe { b.launch(self.grid(n)) }
            .map(|_| ())
            .ctx("launching sgd_momentum_step")
    }
}
