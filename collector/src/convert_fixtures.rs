//! Raw CUPTI records for the converter's tests (convert_tests.rs).

use crate::records::*;

pub(crate) fn kernel(start: u64, end: u64, stream: u32, corr: u32) -> RawKernel {
    RawKernel {
        kind: kind::CONCURRENT_KERNEL,
        cache_config: 0,
        shared_memory_config: 0,
        registers_per_thread: 64,
        partitioned_global_cache_requested: 0,
        partitioned_global_cache_executed: 0,
        start,
        end,
        completed: end,
        device_id: 1,
        context_id: 5,
        stream_id: stream,
        grid_x: 132,
        grid_y: 2,
        grid_z: 1,
        block_x: 256,
        block_y: 1,
        block_z: 1,
        static_shared_memory: 1024,
        dynamic_shared_memory: 49152,
        local_memory_per_thread: 0,
        local_memory_total: 0,
        correlation_id: corr,
        grid_id: 1,
        name: std::ptr::null(),
        reserved0: std::ptr::null(),
        queued: 0,
        submitted: 0,
        launch_type: 0,
        carveout_requested_flag: 0,
        carveout_requested: 0,
        padding: 0,
        shared_memory_executed: 0,
        graph_node_id: 0,
        shmem_limit_config: 0,
        graph_id: 0,
    }
}

pub(crate) fn api(start: u64, end: u64, cbid: u32, tid: u32, corr: u32) -> RawApi {
    RawApi {
        kind: kind::RUNTIME,
        cbid,
        start,
        end,
        process_id: 100,
        thread_id: tid,
        correlation_id: corr,
        return_value: 0,
    }
}

pub(crate) fn sync(stream: u32, sync_type: u32, corr: u32) -> RawSync {
    RawSync {
        kind: kind::SYNCHRONIZATION,
        sync_type,
        start: 500,
        end: 900,
        correlation_id: corr,
        context_id: 5,
        stream_id: stream,
        cuda_event_id: 0,
    }
}
