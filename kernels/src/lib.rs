//! streamscope-kernels: `fsdp-ref`, a reference ZeRO-3/FSDP training workload
//! whose communication, dependencies and synchronizations are known, so the
//! profiler's numbers can be checked against it.
//!
//! Pure parts (configuration, sharding, the analytic model, the CPU
//! reference, the rendezvous, the NVTX client) build and test without CUDA;
//! [`gpu`] loads the CUDA libraries only at run time.
// CUDA, cuBLAS, NCCL and NVTX FFI: every unsafe block carries a SAFETY comment (the workspace denies unsafe code elsewhere).
#![allow(unsafe_code)]

pub mod analytic;
pub mod bf16;
pub mod config;
pub mod cpu_ref;
pub mod gpu;
pub mod nvtx;
pub mod rendezvous;
pub mod report;
pub mod shard;
