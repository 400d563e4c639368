//! The GPU path: CUDA driver, NVRTC, cuBLAS and NCCL, all opened at run time.

pub mod block;
pub mod error;
pub mod gemm;
pub mod kernels;
pub mod launch;
pub mod libs;
pub mod nccl;
pub mod trainer;

pub use error::GpuError;
