//! CUPTI 13.0 activity records as plain-integer mirrors.
//!
//! cudarc's bindings type the enum fields as Rust enums, and reading a value
//! CUPTI added later into one would be undefined behaviour; these mirrors
//! hold the same bytes as `u32`/`u8` and stop at the last field we read (a
//! real record is at least as long). Tests pin every offset against
//! cudarc's CUDA 13.0 structs.

use std::ffi::c_char;

/// Activity kinds we enable (values of `CUpti_ActivityKind`).
pub mod kind {
    pub const MEMCPY: u32 = 1;
    pub const MEMSET: u32 = 2;
    pub const DRIVER: u32 = 4;
    pub const RUNTIME: u32 = 5;
    pub const CONCURRENT_KERNEL: u32 = 10;
    pub const MARKER: u32 = 12;
    pub const OVERHEAD: u32 = 17;
    pub const STREAM: u32 = 37;
    pub const MEMORY2: u32 = 49;
    pub const SYNCHRONIZATION: u32 = 38;
}

/// `CUpti_ActivityStreamFlag`: how a stream was created.
pub mod stream_flag {
    /// `cudaStreamDefault`: a blocking stream (it waits for the legacy
    /// default stream, and the legacy default stream waits for it).
    pub const DEFAULT: u32 = 1;
    /// `cudaStreamNonBlocking`.
    pub const NON_BLOCKING: u32 = 2;
    /// The NULL (legacy default) stream.
    pub const NULL: u32 = 3;
}

/// `CUpti_ActivityFlag` bits of marker records.
pub const MARKER_INSTANTANEOUS: u32 = 1;
pub const MARKER_START: u32 = 2;
pub const MARKER_END: u32 = 4;
/// `CUPTI_ACTIVITY_OBJECT_THREAD`.
pub const OBJECT_THREAD: u32 = 2;
/// `CUPTI_SYNCHRONIZATION_INVALID_VALUE` as stored in a u32 field.
pub const SYNC_INVALID: u32 = u32::MAX;

/// Prefix of `CUpti_ActivityKernel10`.
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawKernel {
    pub kind: u32,
    pub cache_config: u8,
    pub shared_memory_config: u8,
    pub registers_per_thread: u16,
    pub partitioned_global_cache_requested: u32,
    pub partitioned_global_cache_executed: u32,
    pub start: u64,
    pub end: u64,
    pub completed: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub grid_x: i32,
    pub grid_y: i32,
    pub grid_z: i32,
    pub block_x: i32,
    pub block_y: i32,
    pub block_z: i32,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub local_memory_per_thread: u32,
    pub local_memory_total: u32,
    pub correlation_id: u32,
    pub grid_id: i64,
    pub name: *const c_char,
    pub reserved0: *const std::ffi::c_void,
    pub queued: u64,
    pub submitted: u64,
    pub launch_type: u8,
    pub carveout_requested_flag: u8,
    pub carveout_requested: u8,
    pub padding: u8,
    pub shared_memory_executed: u32,
    /// The graph node that ran this kernel (0: not launched by a graph).
    pub graph_node_id: u64,
    pub shmem_limit_config: u32,
    /// The graph that ran this kernel (0: not launched by a graph).
    pub graph_id: u32,
}

/// Prefix of `CUpti_ActivityMemcpy6`.
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawMemcpy {
    pub kind: u32,
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub flags: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub runtime_correlation_id: u32,
    pub pad: u32,
    pub reserved0: *const std::ffi::c_void,
    /// The graph node of this copy (0: not run by a graph).
    pub graph_node_id: u64,
    /// The graph of this copy (0: not run by a graph).
    pub graph_id: u32,
}

/// Prefix of `CUpti_ActivityMemset4`.
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawMemset {
    pub kind: u32,
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub flags: u16,
    pub memory_kind: u16,
    pub pad: u32,
    pub reserved0: *const std::ffi::c_void,
    /// The graph node of this memset (0: not run by a graph).
    pub graph_node_id: u64,
    /// The graph of this memset (0: not run by a graph).
    pub graph_id: u32,
}

/// `CUpti_ActivityAPI` (runtime and driver calls).
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawApi {
    pub kind: u32,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

/// Prefix of `CUpti_ActivitySynchronization2`.
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawSync {
    pub kind: u32,
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub cuda_event_id: u32,
}

/// `CUpti_ActivityMarker2` (NVTX marks and range ends).
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawMarker {
    pub kind: u32,
    pub flags: u32,
    pub timestamp: u64,
    pub id: u32,
    pub object_kind: u32,
    /// `CUpti_ActivityObjectKindId`: (processId, threadId) for threads.
    pub object_id: [u32; 3],
    pub pad: u32,
    pub name: *const c_char,
    pub domain: *const c_char,
}

/// Prefix of `CUpti_ActivityOverhead3`.
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawOverhead {
    pub kind: u32,
    pub overhead_kind: u32,
    pub object_kind: u32,
    pub object_id: [u32; 3],
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
}

/// Prefix of `CUpti_ActivityMemory4` (`CUPTI_ACTIVITY_KIND_MEMORY2`): one
/// allocation or release of memory (cudaMalloc, cuMemAlloc, cudaFree, ...).
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawMemory {
    pub kind: u32,
    /// [`MEMORY_OP_ALLOCATION`] or [`MEMORY_OP_RELEASE`].
    pub operation: u32,
    /// [`MEMORY_KIND_DEVICE`] for device memory.
    pub memory_kind: u32,
    pub correlation_id: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub pc: u64,
    pub process_id: u32,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
}

/// `CUpti_ActivityMemoryOperationType`.
pub const MEMORY_OP_ALLOCATION: u32 = 1;
pub const MEMORY_OP_RELEASE: u32 = 2;
/// `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`.
pub const MEMORY_KIND_DEVICE: u32 = 3;

/// `CUpti_ActivityStream`: a stream of a context and how it was created
/// (CUPTI lists each context's streams, the NULL stream among them, when
/// the context is created, and each new stream as it is made).
#[repr(C, packed(8))]
#[derive(Clone, Copy)]
pub struct RawStream {
    pub kind: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub priority: u32,
    pub flag: u32,
    pub correlation_id: u32,
}

/// `CUpti_CallbackData` (runtime/driver API callbacks).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawCallbackData {
    pub callback_site: u32,
    pub function_name: *const c_char,
    pub function_params: *const std::ffi::c_void,
    pub function_return_value: *mut std::ffi::c_void,
    pub symbol_name: *const c_char,
    pub context: *mut std::ffi::c_void,
    pub context_uid: u32,
    pub correlation_data: *mut u64,
    pub correlation_id: u32,
}

/// `CUpti_ResourceData` (resource callbacks).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawResourceData {
    pub context: *mut std::ffi::c_void,
    pub resource_handle: u64,
    pub resource_descriptor: *const std::ffi::c_void,
}

/// `CUpti_GraphData` (the descriptor of graph resource callbacks).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawGraphData {
    pub graph: *mut std::ffi::c_void,
    pub original_graph: *mut std::ffi::c_void,
    pub node: *mut std::ffi::c_void,
    pub original_node: *mut std::ffi::c_void,
    pub node_type: u32,
    pub dependency: *mut std::ffi::c_void,
    pub graph_exec: *mut std::ffi::c_void,
}

/// `CUpti_NvtxData`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawNvtxData {
    pub function_name: *const c_char,
    pub function_params: *const std::ffi::c_void,
    pub function_return_value: *const std::ffi::c_void,
}

/// Name of an `overheadKind`.
pub fn overhead_name(kind: u32) -> &'static str {
    match kind {
        1 => "CUPTI overhead: driver compiler",
        0x10000 => "CUPTI overhead: buffer flush",
        0x20000 => "CUPTI overhead: instrumentation",
        0x30000 => "CUPTI overhead: resource",
        0x40000 => "CUPTI overhead: module loading",
        0x50000 => "CUPTI overhead: lazy function loading",
        0x60000 => "CUPTI overhead: command buffer full",
        0x70000 => "CUPTI overhead: activity buffer request",
        0x80000 => "CUPTI overhead: UVM init",
        _ => "CUPTI overhead",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::cupti::sys as c;
    use std::mem::offset_of;

    macro_rules! same {
        ($mine:ty, $theirs:ty, $($a:ident = $b:ident),+) => {
            $( assert_eq!(offset_of!($mine, $a), offset_of!($theirs, $b), concat!(stringify!($mine), ".", stringify!($a))); )+
        };
    }

    #[test]
    fn layouts_match_cuda_13_0_records() {
        same!(
            RawKernel,
            c::CUpti_ActivityKernel10,
            registers_per_thread = registersPerThread,
            start = start,
            end = end,
            device_id = deviceId,
            context_id = contextId,
            stream_id = streamId,
            grid_x = gridX,
            grid_z = gridZ,
            block_x = blockX,
            block_z = blockZ,
            static_shared_memory = staticSharedMemory,
            dynamic_shared_memory = dynamicSharedMemory,
            correlation_id = correlationId,
            grid_id = gridId,
            name = name,
            queued = queued,
            launch_type = launchType,
            shared_memory_executed = sharedMemoryExecuted,
            graph_node_id = graphNodeId,
            shmem_limit_config = shmemLimitConfig,
            graph_id = graphId
        );
        same!(
            RawStream,
            c::CUpti_ActivityStream,
            context_id = contextId,
            stream_id = streamId,
            priority = priority,
            flag = flag,
            correlation_id = correlationId
        );
        assert_eq!(size_of::<RawStream>(), size_of::<c::CUpti_ActivityStream>());
        same!(
            RawMemory,
            c::CUpti_ActivityMemory4,
            operation = memoryOperationType,
            memory_kind = memoryKind,
            correlation_id = correlationId,
            address = address,
            bytes = bytes,
            timestamp = timestamp,
            pc = PC,
            process_id = processId,
            device_id = deviceId,
            context_id = contextId,
            stream_id = streamId
        );
        assert_eq!(
            c::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2 as u32,
            kind::MEMORY2
        );
        assert_eq!(
            c::CUpti_ActivityMemoryOperationType::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                as u32,
            MEMORY_OP_RELEASE
        );
        assert_eq!(
            c::CUpti_ActivityMemoryKind::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u32,
            MEMORY_KIND_DEVICE
        );
        same!(
            RawMemcpy,
            c::CUpti_ActivityMemcpy6,
            copy_kind = copyKind,
            src_kind = srcKind,
            dst_kind = dstKind,
            bytes = bytes,
            start = start,
            end = end,
            device_id = deviceId,
            context_id = contextId,
            stream_id = streamId,
            correlation_id = correlationId,
            runtime_correlation_id = runtimeCorrelationId,
            graph_node_id = graphNodeId,
            graph_id = graphId
        );
        same!(
            RawMemset,
            c::CUpti_ActivityMemset4,
            bytes = bytes,
            start = start,
            end = end,
            device_id = deviceId,
            context_id = contextId,
            stream_id = streamId,
            correlation_id = correlationId,
            memory_kind = memoryKind,
            graph_node_id = graphNodeId,
            graph_id = graphId
        );
        same!(
            RawApi,
            c::CUpti_ActivityAPI,
            cbid = cbid,
            start = start,
            end = end,
            process_id = processId,
            thread_id = threadId,
            correlation_id = correlationId,
            return_value = returnValue
        );
        assert_eq!(size_of::<RawApi>(), size_of::<c::CUpti_ActivityAPI>());
        same!(
            RawSync,
            c::CUpti_ActivitySynchronization2,
            sync_type = type_,
            start = start,
            end = end,
            correlation_id = correlationId,
            context_id = contextId,
            stream_id = streamId,
            cuda_event_id = cudaEventId
        );
        same!(
            RawMarker,
            c::CUpti_ActivityMarker2,
            flags = flags,
            timestamp = timestamp,
            id = id,
            object_kind = objectKind,
            object_id = objectId,
            name = name,
            domain = domain
        );
        assert_eq!(
            size_of::<RawMarker>(),
            size_of::<c::CUpti_ActivityMarker2>()
        );
        same!(
            RawOverhead,
            c::CUpti_ActivityOverhead3,
            overhead_kind = overheadKind,
            object_kind = objectKind,
            object_id = objectId,
            start = start,
            end = end,
            correlation_id = correlationId
        );
        same!(
            RawCallbackData,
            c::CUpti_CallbackData,
            function_name = functionName,
            context = context,
            correlation_id = correlationId
        );
        same!(
            RawResourceData,
            c::CUpti_ResourceData,
            resource_handle = resourceHandle,
            resource_descriptor = resourceDescriptor
        );
        same!(
            RawGraphData,
            c::CUpti_GraphData,
            node = node,
            original_node = originalNode,
            node_type = nodeType,
            graph_exec = graphExec
        );
        assert_eq!(size_of::<RawGraphData>(), size_of::<c::CUpti_GraphData>());
        same!(
            RawNvtxData,
            c::CUpti_NvtxData,
            function_params = functionParams
        );
    }

    #[test]
    fn constants_match_cudarc() {
        use c::CUpti_ActivityKind as K;
        assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMCPY as u32, kind::MEMCPY);
        assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMSET as u32, kind::MEMSET);
        assert_eq!(K::CUPTI_ACTIVITY_KIND_DRIVER as u32, kind::DRIVER);
        assert_eq!(K::CUPTI_ACTIVITY_KIND_RUNTIME as u32, kind::RUNTIME);
        assert_eq!(
            K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32,
            kind::CONCURRENT_KERNEL
        );
        assert_eq!(K::CUPTI_ACTIVITY_KIND_MARKER as u32, kind::MARKER);
        use crate::cupti_api as a;
        assert_eq!(
            c::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE as u32,
            a::CB_DOMAIN_RESOURCE
        );
        assert_eq!(
            c::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED as u32,
            a::CBID_GRAPHNODE_CREATED
        );
        assert_eq!(
            c::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED as u32,
            a::CBID_GRAPHNODE_CLONED
        );
        assert_eq!(K::CUPTI_ACTIVITY_KIND_OVERHEAD as u32, kind::OVERHEAD);
        assert_eq!(
            K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION as u32,
            kind::SYNCHRONIZATION
        );
        assert_eq!(K::CUPTI_ACTIVITY_KIND_STREAM as u32, kind::STREAM);
        use c::CUpti_ActivityStreamFlag as F;
        assert_eq!(
            F::CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT as u32,
            stream_flag::DEFAULT
        );
        assert_eq!(
            F::CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING as u32,
            stream_flag::NON_BLOCKING
        );
        assert_eq!(
            F::CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL as u32,
            stream_flag::NULL
        );
        assert_eq!(
            c::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_MARKER_START as u32,
            MARKER_START
        );
        assert_eq!(
            c::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_MARKER_END as u32,
            MARKER_END
        );
        assert_eq!(
            c::CUpti_ActivityObjectKind::CUPTI_ACTIVITY_OBJECT_THREAD as u32,
            OBJECT_THREAD
        );
    }
}

/// One activity record, read out of a CUPTI buffer (strings borrowed from
/// CUPTI, valid while the buffer is being processed).
#[derive(Clone, Copy)]
pub enum Record<'a> {
    Kernel(RawKernel, &'a std::ffi::CStr),
    Memcpy(RawMemcpy),
    Memset(RawMemset),
    Api { raw: RawApi, driver: bool },
    Sync(RawSync),
    Marker(RawMarker, Option<&'a std::ffi::CStr>),
    Overhead(RawOverhead),
    Stream(RawStream),
    Memory(RawMemory),
    Other(u32),
}

/// Reads the record at `ptr`.
///
/// # Safety
/// `ptr` must point at a complete activity record handed out by
/// `cuptiActivityGetNextRecord`, and its string pointers must stay valid for `'a`.
pub unsafe fn parse<'a>(ptr: *const u8) -> Record<'a> {
    // SAFETY: every record starts with its u32 kind; the caller guarantees a
    // whole record of that kind, at least as long as our prefix mirror.
    unsafe {
        let k = std::ptr::read_unaligned(ptr as *const u32);
        match k {
            kind::CONCURRENT_KERNEL => {
                let r = std::ptr::read_unaligned(ptr as *const RawKernel);
                let name = if r.name.is_null() {
                    c""
                } else {
                    std::ffi::CStr::from_ptr(r.name)
                };
                Record::Kernel(r, name)
            }
            kind::MEMCPY => Record::Memcpy(std::ptr::read_unaligned(ptr as *const RawMemcpy)),
            kind::MEMSET => Record::Memset(std::ptr::read_unaligned(ptr as *const RawMemset)),
            kind::RUNTIME | kind::DRIVER => Record::Api {
                raw: std::ptr::read_unaligned(ptr as *const RawApi),
                driver: k == kind::DRIVER,
            },
            kind::SYNCHRONIZATION => Record::Sync(std::ptr::read_unaligned(ptr as *const RawSync)),
            kind::MARKER => {
                let r = std::ptr::read_unaligned(ptr as *const RawMarker);
                let name = if r.name.is_null() {
                    None
                } else {
                    Some(std::ffi::CStr::from_ptr(r.name))
                };
                Record::Marker(r, name)
            }
            kind::OVERHEAD => Record::Overhead(std::ptr::read_unaligned(ptr as *const RawOverhead)),
            kind::STREAM => Record::Stream(std::ptr::read_unaligned(ptr as *const RawStream)),
            kind::MEMORY2 => Record::Memory(std::ptr::read_unaligned(ptr as *const RawMemory)),
            other => Record::Other(other),
        }
    }
}
