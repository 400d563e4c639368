//! A thin NCCL communicator on raw device pointers. cudarc's safe `Comm`
//! knows no bf16 without its `f16` feature and hides its handle; fsdp-ref
//! needs bf16 all-gathers, fp32 reduce-scatters, and the stream chosen per
//! call (the communication stream, or the compute stream in serial mode).

use cudarc::driver::CudaStream;
use cudarc::nccl::{result, sys};

use super::error::{nccl_error, GpuError};

/// Size of `ncclUniqueId`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// Creates a fresh unique id (rank 0 only).
pub fn unique_id() -> Result<[u8; UNIQUE_ID_BYTES], GpuError> {
    let id = result::get_uniqueid().map_err(|e| nccl_error("creating the NCCL unique id", e))?;
    let mut out = [0u8; UNIQUE_ID_BYTES];
    for (o, c) in out.iter_mut().zip(id.internal.iter()) {
        *o = *c as u8;
    }
    Ok(out)
}

/// Element type of a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Bf16,
    F32,
}

impl Dtype {
    fn nccl(self) -> sys::ncclDataType_t {
        match self {
            Dtype::Bf16 => sys::ncclDataType_t::ncclBfloat16,
            Dtype::F32 => sys::ncclDataType_t::ncclFloat32,
        }
    }
}

pub struct Communicator {
    comm: sys::ncclComm_t,
    pub rank: usize,
    pub world: usize,
}

// SAFETY: an NCCL communicator may be used from any one thread at a time;
// fsdp-ref moves it into its rank's thread and uses it only there.
unsafe impl Send for Communicator {}

impl Communicator {
    /// Joins the communicator `id` as `rank` of `world`; the calling thread's
    /// current CUDA context must be the rank's device. Blocks until every
    /// rank has joined (the caller guarantees they are all alive).
    pub fn init(id: &[u8; UNIQUE_ID_BYTES], rank: usize, world: usize) -> Result<Self, GpuError> {
        let mut internal = [0 as std::ffi::c_char; UNIQUE_ID_BYTES];
        for (o, b) in internal.iter_mut().zip(id.iter()) {
            *o = *b as std::ffi::c_char;
        }
        let uid = sys::ncclUniqueId { internal };
        let mut comm = std::mem::MaybeUninit::<sys::ncclComm_t>::uninit();
        let what = format!("initialising the NCCL communicator (rank {rank} of {world})");
        // SAFETY: `comm` is a valid out pointer; rank < world was validated by the caller.
        unsafe { result::comm_init_rank(comm.as_mut_ptr(), world as i32, uid, rank as i32) }
            .map_err(|e| nccl_error(what, e))?;
        // SAFETY: ncclCommInitRank succeeded, so it wrote the handle.
        let comm = unsafe { comm.assume_init() };
        Ok(Self { comm, rank, world })
    }

    /// `recv[world * count] <- concat over ranks of send[count]`, on `stream`.
    /// # Safety
    ///
    /// `send` and `recv` (or `buf`) must be addresses of live device buffers
    /// on this rank's device holding the element counts this collective
    /// reads and writes, alive until `stream` has run it.
    pub unsafe fn all_gather(
        &self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
        stream: &CudaStream,
        what: &str,
    ) -> Result<(), GpuError> {
        // SAFETY: the caller passes device buffers of count and world*count
        // elements of `dtype`, alive until `stream` has run the collective.
        unsafe {
            result::all_gather(
                send as *const _,
                recv as *mut _,
                count,
                dtype.nccl(),
                self.comm,
                stream.cu_stream() as _,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_error(what.to_string(), e))
    }

    /// `recv[count] <- sum over ranks of send[rank*count ..]`, on `stream`.
    /// # Safety
    ///
    /// `send` and `recv` (or `buf`) must be addresses of live device buffers
    /// on this rank's device holding the element counts this collective
    /// reads and writes, alive until `stream` has run it.
    pub unsafe fn reduce_scatter_sum(
        &self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: Dtype,
        stream: &CudaStream,
        what: &str,
    ) -> Result<(), GpuError> {
        // SAFETY: device buffers of world*count and count elements, alive
        // until `stream` has run the collective.
        unsafe {
            result::reduce_scatter(
                send as *const _,
                recv as *mut _,
                count,
                dtype.nccl(),
                sys::ncclRedOp_t::ncclSum,
                self.comm,
                stream.cu_stream() as _,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_error(what.to_string(), e))
    }

    /// In-place sum over ranks of `count` f32 values, on `stream`.
    /// # Safety
    ///
    /// `send` and `recv` (or `buf`) must be addresses of live device buffers
    /// on this rank's device holding the element counts this collective
    /// reads and writes, alive until `stream` has run it.
    pub unsafe fn all_reduce_sum_f32(
        &self,
        buf: u64,
        count: usize,
        stream: &CudaStream,
        what: &str,
    ) -> Result<(), GpuError> {
        // SAFETY: a device buffer of `count` f32, alive until the stream ran it.
        unsafe {
            result::all_reduce(
                buf as *const _,
                buf as *mut _,
                count,
                sys::ncclDataType_t::ncclFloat32,
                sys::ncclRedOp_t::ncclSum,
                self.comm,
                stream.cu_stream() as _,
            )
        }
        .map(|_| ())
        .map_err(|e| nccl_error(what.to_string(), e))
    }
}

impl Communicator {
    /// Orderly end after a successful run: waits for this rank's outstanding
    /// NCCL work (ncclCommFinalize), then frees the communicator.
    pub fn finish(mut self) -> Result<(), GpuError> {
        let comm = std::mem::replace(&mut self.comm, std::ptr::null_mut());
        // SAFETY: `comm` is a live communicator; after this it is never used again
        // (Drop sees null).
        unsafe { result::comm_finalize(comm) }
            .map_err(|e| nccl_error("finalising the NCCL communicator", e))?;
        // SAFETY: as above; finalized communicators are released with destroy.
        unsafe { result::comm_destroy(comm) }
            .map_err(|e| nccl_error("destroying the NCCL communicator", e))?;
        Ok(())
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        if self.comm.is_null() {
            return;
        }
        // SAFETY: the handle came from ncclCommInitRank and is released once.
        // Abort (not destroy) so a rank whose peer failed does not block here.
        let _ = unsafe { result::comm_abort(self.comm) };
    }
}
