//! Checks that the CUDA libraries cudarc opens at run time are there, before
//! anything touches them: cudarc panics on a missing library, and a missing
//! library deserves one clear line instead.

use super::error::GpuError;

const CUDA_LIB_HINT: &str =
    "add the CUDA toolkit's library folder (e.g. /usr/local/cuda-13.0/targets/x86_64-linux/lib) to LD_LIBRARY_PATH";

/// Fails with the first missing library among libcuda, NVRTC, cuBLAS and NCCL.
pub fn check_libraries() -> Result<(), GpuError> {
    // SAFETY: each probe only dlopens and closes candidate file names.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    if !driver {
        return Err(GpuError::MissingLibrary {
            library: "libcuda (the CUDA driver)",
            hint: "no NVIDIA driver on this machine, or libcuda.so.1 is not on the loader path"
                .into(),
        });
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::MissingLibrary {
            library: "libnvrtc",
            hint: CUDA_LIB_HINT.into(),
        });
    }
    // SAFETY: as above.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err(GpuError::MissingLibrary {
            library: "libcublas (with libcublasLt)",
            hint: CUDA_LIB_HINT.into(),
        });
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Err(GpuError::MissingLibrary {
            library: "libnccl",
            hint: "cudarc looks for libnccl.so (not libnccl.so.2): put a symlink libnccl.so -> \
                   libnccl.so.2 in a folder on LD_LIBRARY_PATH (scripts/gpu/fsdp-ref.sh does this)"
                .into(),
        });
    }
    Ok(())
}
