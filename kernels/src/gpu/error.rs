//! The one error type of the GPU path: every CUDA, cuBLAS, NCCL and NVRTC
//! failure carries what was being done, so a first run on a new machine
//! says which step broke.

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use cudarc::nccl::result::NcclError;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("{library} could not be loaded: {hint}")]
    MissingLibrary { library: &'static str, hint: String },
    #[error("no CUDA device is visible ({detail})")]
    NoDevice { detail: String },
    #[error("CUDA driver error while {what}: {source}")]
    Driver { what: String, source: DriverError },
    #[error("cuBLAS error while {what}: {source}")]
    Cublas { what: String, source: CublasError },
    #[error(
        "NCCL error while {what}: {code}{detail} (set NCCL_DEBUG=WARN for NCCL's own account)"
    )]
    Nccl {
        what: String,
        code: String,
        detail: String,
    },
    #[error("NVRTC could not compile {file}: {log}")]
    Compile { file: &'static str, log: String },
    #[error("{0}")]
    Invalid(String),
}

/// Adds "while ..." context to a CUDA/cuBLAS result.
pub trait Context<T> {
    fn ctx(self, what: impl Into<String>) -> Result<T, GpuError>;
}

impl<T> Context<T> for Result<T, DriverError> {
    fn ctx(self, what: impl Into<String>) -> Result<T, GpuError> {
        self.map_err(|source| {
            let what = what.into();
            if source.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE {
                return GpuError::NoDevice {
                    detail: format!("cuInit reported no device while {what}"),
                };
            }
            GpuError::Driver { what, source }
        })
    }
}

impl<T> Context<T> for Result<T, CublasError> {
    fn ctx(self, what: impl Into<String>) -> Result<T, GpuError> {
        self.map_err(|source| GpuError::Cublas {
            what: what.into(),
            source,
        })
    }
}

/// Turns an NCCL error into a [`GpuError`] with NCCL's own error string.
pub fn nccl_error(what: impl Into<String>, e: NcclError) -> GpuError {
    // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
    let text = unsafe {
        let p = cudarc::nccl::sys::ncclGetErrorString(e.0);
        if p.is_null() {
            String::new()
        } else {
            format!(" ({})", std::ffi::CStr::from_ptr(p).to_string_lossy())
        }
    };
    GpuError::Nccl {
        what: what.into(),
        code: format!("{:?}", e.0),
        detail: text,
    }
}
