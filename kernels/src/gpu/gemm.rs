//! Row-major bf16 GEMMs on cuBLAS (fp32 accumulation), bound to the compute stream.

use std::sync::Arc;

use cudarc::cublas::{result, sys, CudaBlas};
use cudarc::driver::CudaStream;

use super::error::{Context, GpuError};

/// Output element type: bf16 activations or fp32 weight gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Out {
    Bf16,
    F32,
}

pub struct Gemm {
    blas: CudaBlas,
}

/// One row-major product `C[m x n] = op(A)[m x k] op(B)[k x n] + beta C`.
#[derive(Clone, Copy, Debug)]
pub struct RowMajor {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub beta: f32,
    pub out: Out,
}

/// The column-major cuBLAS call that computes a [`RowMajor`] product: since a
/// row-major matrix is its column-major transpose, `C^T = op(B)^T op(A)^T`,
/// so B goes first. Returns (op for B, op for A, ld of B, ld of A, ld of C).
pub fn col_major_args(p: &RowMajor) -> (bool, bool, usize, usize, usize) {
    let ldb = if p.trans_b { p.k } else { p.n };
    let lda = if p.trans_a { p.m } else { p.k };
    (p.trans_b, p.trans_a, ldb, lda, p.n)
}

impl Gemm {
    pub fn new(stream: Arc<CudaStream>) -> Result<Self, GpuError> {
        let blas = CudaBlas::new(stream).ctx("creating the cuBLAS handle")?;
        Ok(Self { blas })
    }

    /// Runs `p` on device pointers `a`, `b` (bf16) and `c` (bf16 or f32).
    /// # Safety
    ///
    /// `a`, `b` and `c` must be addresses of live device buffers on this
    /// handle's context, at least as large as the row-major shapes `p`
    /// describes, alive until the stream has run the GEMM.
    pub unsafe fn run(
        &self,
        p: &RowMajor,
        a: u64,
        b: u64,
        c: u64,
        what: &str,
    ) -> Result<(), GpuError> {
        let (tb, ta, ldb, lda, ldc) = col_major_args(p);
        let op = |t: bool| {
            if t {
                sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let c_type = match p.out {
            Out::Bf16 => sys::cudaDataType::CUDA_R_16BF,
            Out::F32 => sys::cudaDataType::CUDA_R_32F,
        };
        let alpha = 1.0f32;
        let beta = p.beta;
        // SAFETY: a, b, c are device buffers of the row-major shapes `p`
        // describes (checked by the callers' allocation sizes); alpha and
        // beta are host f32 as CUBLAS_COMPUTE_32F expects in host pointer mode.
        unsafe {
            result::gemm_ex(
                *self.blas.handle(),
                op(tb),
                op(ta),
                p.n as i32,
                p.m as i32,
                p.k as i32,
                &alpha as *const f32 as *const _,
                b as *const _,
                sys::cudaDataType::CUDA_R_16BF,
                ldb as i32,
                a as *const _,
                sys::cudaDataType::CUDA_R_16BF,
                lda as i32,
                &beta as *const f32 as *const _,
                c as *mut _,
                c_type,
                ldc as i32,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .ctx(format!("GEMM {what} (m={} n={} k={})", p.m, p.n, p.k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Multiplies row-major matrices through the column-major convention the
    /// cuBLAS call uses, to check the argument mapping without a GPU.
    fn col_major_gemm(p: &RowMajor, a: &[f32], b: &[f32]) -> Vec<f32> {
        let (tb, ta, ldb, lda, ldc) = col_major_args(p);
        // Column-major: X(i, j) = x[i + j * ld]. cuBLAS computes
        // C'(n x m) = op(B') op(A') with B' = b and A' = a.
        let (m2, n2, k) = (p.n, p.m, p.k);
        let get = |x: &[f32], ld: usize, t: bool, i: usize, j: usize| {
            if t {
                x[j + i * ld]
            } else {
                x[i + j * ld]
            }
        };
        let mut c = vec![0.0f32; p.m * p.n];
        for i in 0..m2 {
            for j in 0..n2 {
                let mut s = 0.0;
                for l in 0..k {
                    s += get(b, ldb, tb, i, l) * get(a, lda, ta, l, j);
                }
                c[i + j * ldc] = s;
            }
        }
        c
    }

    fn reference(p: &RowMajor, a: &[f32], b: &[f32]) -> Vec<f32> {
        let at = |i: usize, l: usize| {
            if p.trans_a {
                a[l * p.m + i]
            } else {
                a[i * p.k + l]
            }
        };
        let bt = |l: usize, j: usize| {
            if p.trans_b {
                b[j * p.k + l]
            } else {
                b[l * p.n + j]
            }
        };
        let mut c = vec![0.0f32; p.m * p.n];
        for i in 0..p.m {
            for j in 0..p.n {
                c[i * p.n + j] = (0..p.k).map(|l| at(i, l) * bt(l, j)).sum();
            }
        }
        c
    }

    #[test]
    fn column_major_call_computes_the_row_major_product() {
        let (m, n, k) = (3, 5, 4);
        let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.5 - 2.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            let p = RowMajor {
                trans_a: ta,
                trans_b: tb,
                m,
                n,
                k,
                beta: 0.0,
                out: Out::F32,
            };
            assert_eq!(
                col_major_gemm(&p, &a, &b),
                reference(&p, &a, &b),
                "ta={ta} tb={tb}"
            );
        }
    }
}
