//! One MLP block's forward and backward on device pointers, on the compute
//! stream: the same calls the trainer makes and tests/gpu.rs checks against
//! the CPU reference (src/cpu_ref.rs has the math).

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::error::{Context, GpuError};
use super::gemm::{Gemm, Out, RowMajor};
use super::kernels::Kernels;

/// Shapes of one block on one rank.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub tokens: usize,
    pub dim: usize,
}

impl Dims {
    pub fn hidden(&self) -> usize {
        4 * self.dim
    }
    /// Byte offset of W2 inside the flat bf16 block `[W1 | W2]`.
    pub fn w2_offset_bytes(&self) -> u64 {
        (4 * self.dim * self.dim * 2) as u64
    }
    /// Byte offset of dW2 inside the flat f32 gradient.
    pub fn dw2_offset_bytes(&self) -> u64 {
        (4 * self.dim * self.dim * 4) as u64
    }
}

/// What a block computes with: the compute stream, its cuBLAS handle, the kernels.
pub struct Compute<'a> {
    pub stream: &'a Arc<CudaStream>,
    pub gemm: &'a Gemm,
    pub kernels: &'a Kernels,
}

/// Device pointers of one block's forward.
#[derive(Clone, Copy, Debug)]
pub struct ForwardBufs {
    /// Input, T x d bf16 (kept for backward).
    pub x: u64,
    /// Gathered flat weights `[W1 | W2]`, 8 d^2 bf16.
    pub w: u64,
    /// Pre-activation and activation, T x 4d bf16 each (kept for backward).
    pub a: u64,
    pub g: u64,
    /// Output, T x d bf16.
    pub y: u64,
}

/// `a = x W1^T; g = gelu(a); y = x + g W2^T`.
/// # Safety
///
/// Every pointer of `b` must address a live device buffer on `c`'s context
/// of the size documented on its field for the shapes `d`, alive until the
/// compute stream has run the block; `x` and `y` must not overlap.
pub unsafe fn forward(c: &Compute, d: Dims, b: ForwardBufs, label: &str) -> Result<(), GpuError> {
    let h = d.hidden();
    // SAFETY: x and y are distinct device buffers of T*d bf16 on this context.
    unsafe {
        cudarc::driver::result::memcpy_dtod_async(
            b.y,
            b.x,
            d.tokens * d.dim * 2,
            c.stream.cu_stream(),
        )
    }
    .ctx(format!("copying the residual of {label}"))?;
    let up = RowMajor {
        trans_a: false,
        trans_b: true,
        m: d.tokens,
        n: h,
        k: d.dim,
        beta: 0.0,
        out: Out::Bf16,
    };
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe { c.gemm.run(&up, b.x, b.w, b.a, &format!("{label} x*W1^T")) }?;
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe { c.kernels.gelu_fwd(c.stream, b.a, b.g, d.tokens * h) }?;
    let down = RowMajor {
        trans_a: false,
        trans_b: true,
        m: d.tokens,
        n: d.dim,
        k: h,
        beta: 1.0,
        out: Out::Bf16,
    };
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe {
        c.gemm.run(
            &down,
            b.g,
            b.w + d.w2_offset_bytes(),
            b.y,
            &format!("{label} x+g*W2^T"),
        )
    }
}

/// Device pointers of one block's backward.
#[derive(Clone, Copy, Debug)]
pub struct BackwardBufs {
    pub x: u64,
    pub w: u64,
    pub a: u64,
    pub g: u64,
    /// In: dL/dy (T x d bf16). Out: dL/dx, written in place.
    pub dy: u64,
    /// Scratch T x 4d bf16 (dg, then da in place).
    pub scratch: u64,
    /// Out: flat `[dW1 | dW2]`, 8 d^2 f32.
    pub dw: u64,
}

/// `dW2 = dy^T g; dg = dy W2; da = dg gelu'(a); dW1 = da^T x; dx = dy + da W1`.
/// # Safety
///
/// Every pointer of `b` must address a live device buffer on `c`'s context
/// of the size documented on its field for the shapes `d`, alive until the
/// compute stream has run the block; `x` and `y` must not overlap.
pub unsafe fn backward(c: &Compute, d: Dims, b: BackwardBufs, label: &str) -> Result<(), GpuError> {
    let h = d.hidden();
    let t = d.tokens;
    let dw2 = RowMajor {
        trans_a: true,
        trans_b: false,
        m: d.dim,
        n: h,
        k: t,
        beta: 0.0,
        out: Out::F32,
    };
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe {
        c.gemm.run(
            &dw2,
            b.dy,
            b.g,
            b.dw + d.dw2_offset_bytes(),
            &format!("{label} dW2=dy^T*g"),
        )
    }?;
    let dg = RowMajor {
        trans_a: false,
        trans_b: false,
        m: t,
        n: h,
        k: d.dim,
        beta: 0.0,
        out: Out::Bf16,
    };
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe {
        c.gemm.run(
            &dg,
            b.dy,
            b.w + d.w2_offset_bytes(),
            b.scratch,
            &format!("{label} dg=dy*W2"),
        )
    }?;
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe {
        c.kernels
            .gelu_bwd(c.stream, b.scratch, b.a, b.scratch, t * h)
    }?;
    let dw1 = RowMajor {
        trans_a: true,
        trans_b: false,
        m: h,
        n: d.dim,
        k: t,
        beta: 0.0,
        out: Out::F32,
    };
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe {
        c.gemm
            .run(&dw1, b.scratch, b.x, b.dw, &format!("{label} dW1=da^T*x"))
    }?;
    let dx = RowMajor {
        trans_a: false,
        trans_b: false,
        m: t,
        n: d.dim,
        k: h,
        beta: 1.0,
        out: Out::Bf16,
    };
    // SAFETY: `b` is sized for `d` (this function's contract).
    unsafe {
        c.gemm
            .run(&dx, b.scratch, b.w, b.dy, &format!("{label} dx=dy+da*W1"))
    }
}
