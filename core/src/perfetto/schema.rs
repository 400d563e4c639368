//! Field numbers of the Perfetto protos we write and read
//! (protos/perfetto/trace/... as shipped by the perfetto_protos crate), and
//! the names of streamscope's own annotations.

/// `Trace.packet` field number.
pub const TRACE_PACKET: u32 = 1;

// TracePacket
/// `TracePacket.clock_snapshot` field number.
pub const PKT_CLOCK_SNAPSHOT: u32 = 6;
/// `TracePacket.timestamp` field number.
pub const PKT_TIMESTAMP: u32 = 8;
/// `TracePacket.trusted_packet_sequence_id` field number.
pub const PKT_SEQUENCE_ID: u32 = 10;
/// `TracePacket.track_event` field number.
pub const PKT_TRACK_EVENT: u32 = 11;
/// `TracePacket.interned_data` field number.
pub const PKT_INTERNED_DATA: u32 = 12;
/// `TracePacket.sequence_flags` field number.
pub const PKT_SEQUENCE_FLAGS: u32 = 13;
/// `TracePacket.trace_packet_defaults` field number.
pub const PKT_DEFAULTS: u32 = 59;
/// `TracePacket.track_descriptor` field number.
pub const PKT_TRACK_DESCRIPTOR: u32 = 60;
/// `TracePacket.first_packet_on_sequence` field number.
pub const PKT_FIRST_PACKET_ON_SEQUENCE: u32 = 87;
/// `TracePacket.SequenceFlags` value SEQ_INCREMENTAL_STATE_CLEARED.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
/// `TracePacket.SequenceFlags` value SEQ_NEEDS_INCREMENTAL_STATE.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;

// TracePacketDefaults
/// `TracePacketDefaults.timestamp_clock_id` field number.
pub const DEFAULTS_TIMESTAMP_CLOCK_ID: u32 = 58;
/// `TracePacketDefaults.track_event_defaults` field number.
pub const DEFAULTS_TRACK_EVENT_DEFAULTS: u32 = 11;
// TrackEventDefaults
/// `TrackEventDefaults.track_uuid` field number.
pub const TED_TRACK_UUID: u32 = 11;

// TrackDescriptor
/// `TrackDescriptor.uuid` field number.
pub const TD_UUID: u32 = 1;
/// `TrackDescriptor.name` field number.
pub const TD_NAME: u32 = 2;
/// `TrackDescriptor.process` field number.
pub const TD_PROCESS: u32 = 3;
/// `TrackDescriptor.thread` field number.
pub const TD_THREAD: u32 = 4;
/// `TrackDescriptor.parent_uuid` field number.
pub const TD_PARENT_UUID: u32 = 5;
/// `TrackDescriptor.counter` field number.
pub const TD_COUNTER: u32 = 8;
/// `TrackDescriptor.static_name` field number.
pub const TD_STATIC_NAME: u32 = 10;
/// `TrackDescriptor.child_ordering` field number.
pub const TD_CHILD_ORDERING: u32 = 11;
/// `TrackDescriptor.description` field number.
pub const TD_DESCRIPTION: u32 = 14;
// ProcessDescriptor
/// `ProcessDescriptor.pid` field number.
pub const PD_PID: u32 = 1;
/// `ProcessDescriptor.cmdline` field number.
pub const PD_CMDLINE: u32 = 2;
/// `ProcessDescriptor.process_name` field number.
pub const PD_PROCESS_NAME: u32 = 6;
/// `ProcessDescriptor.process_labels` field number.
pub const PD_PROCESS_LABELS: u32 = 8;
// ThreadDescriptor
/// `ThreadDescriptor.pid` field number.
pub const THD_PID: u32 = 1;
/// `ThreadDescriptor.tid` field number.
pub const THD_TID: u32 = 2;
/// `ThreadDescriptor.thread_name` field number.
pub const THD_THREAD_NAME: u32 = 5;
// CounterDescriptor
/// `CounterDescriptor.unit` field number.
pub const CD_UNIT: u32 = 3;
/// `CounterDescriptor.Unit` value UNIT_COUNT.
pub const CD_UNIT_COUNT: u64 = 2;

// TrackEvent
/// `TrackEvent.debug_annotations` field number.
pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
/// `TrackEvent.type` field number.
pub const TE_TYPE: u32 = 9;
/// `TrackEvent.name_iid` field number.
pub const TE_NAME_IID: u32 = 10;
/// `TrackEvent.track_uuid` field number.
pub const TE_TRACK_UUID: u32 = 11;
/// `TrackEvent.name` field number.
pub const TE_NAME: u32 = 23;
/// `TrackEvent.counter_value` field number.
pub const TE_COUNTER_VALUE: u32 = 30;
/// `TrackEvent.double_counter_value` field number.
pub const TE_DOUBLE_COUNTER_VALUE: u32 = 44;
/// `TrackEvent.flow_ids` field number.
pub const TE_FLOW_IDS: u32 = 47;
/// `TrackEvent.terminating_flow_ids` field number.
pub const TE_TERMINATING_FLOW_IDS: u32 = 48;
/// `TrackEvent.Type` value TYPE_SLICE_BEGIN.
pub const TE_TYPE_SLICE_BEGIN: u64 = 1;
/// `TrackEvent.Type` value TYPE_SLICE_END.
pub const TE_TYPE_SLICE_END: u64 = 2;
/// `TrackEvent.Type` value TYPE_INSTANT.
pub const TE_TYPE_INSTANT: u64 = 3;
/// `TrackEvent.Type` value TYPE_COUNTER.
pub const TE_TYPE_COUNTER: u64 = 4;

// DebugAnnotation
/// `DebugAnnotation.name_iid` field number.
pub const DA_NAME_IID: u32 = 1;
/// `DebugAnnotation.bool_value` field number.
pub const DA_BOOL: u32 = 2;
/// `DebugAnnotation.uint_value` field number.
pub const DA_UINT: u32 = 3;
/// `DebugAnnotation.int_value` field number.
pub const DA_INT: u32 = 4;
/// `DebugAnnotation.double_value` field number.
pub const DA_DOUBLE: u32 = 5;
/// `DebugAnnotation.string_value` field number.
pub const DA_STRING: u32 = 6;
/// `DebugAnnotation.name` field number.
pub const DA_NAME: u32 = 10;
/// `DebugAnnotation.dict_entries` field number.
pub const DA_DICT_ENTRIES: u32 = 11;
/// `DebugAnnotation.string_value_iid` field number.
pub const DA_STRING_VALUE_IID: u32 = 17;

// InternedData
/// `InternedData.event_names` field number.
pub const INTERNED_EVENT_NAMES: u32 = 2;
/// `InternedData.debug_annotation_names` field number.
pub const INTERNED_DEBUG_ANNOTATION_NAMES: u32 = 3;
/// `InternedData.debug_annotation_string_values` field number.
pub const INTERNED_DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;

/// Description of a process track written by streamscope.
pub const PROCESS_DESCRIPTION: &str = "streamscope process";

/// Name of the instant that carries process and device metadata.
pub const PROCESS_METADATA_EVENT: &str = "streamscope.process";

/// Name of the instant that carries one GPU memory allocation or free
/// (`Trace::allocations`), on the host thread that made it, with the
/// annotations `device` (CUDA ordinal), `address`, `bytes` (negative:
/// a free) and, when known, `site` (the Python line that allocated it).
pub const ALLOCATION_EVENT: &str = "streamscope.alloc";

/// Debug annotation names interned at the start of every sequence, with
/// iids 1.. in this order.
pub const RESERVED_NAMES: [&str; 16] = [
    "kind",
    "class",
    "correlation",
    "device",
    "stream",
    "grid",
    "block",
    "registers per thread",
    "static shared memory",
    "dynamic shared memory",
    "bytes",
    "copy kind",
    "pageable",
    "args",
    "process",
    "device properties",
];
/// Interned iid of the "kind" debug annotation name.
pub const AN_KIND: u32 = 1;
/// Interned iid of the "class" debug annotation name.
pub const AN_CLASS: u32 = 2;
/// Interned iid of the "correlation" debug annotation name.
pub const AN_CORRELATION: u32 = 3;
/// Interned iid of the "device" debug annotation name.
pub const AN_DEVICE: u32 = 4;
/// Interned iid of the "stream" debug annotation name.
pub const AN_STREAM: u32 = 5;
/// Interned iid of the "grid" debug annotation name.
pub const AN_GRID: u32 = 6;
/// Interned iid of the "block" debug annotation name.
pub const AN_BLOCK: u32 = 7;
/// Interned iid of the "registers per thread" debug annotation name.
pub const AN_REGISTERS: u32 = 8;
/// Interned iid of the "static shared memory" debug annotation name.
pub const AN_STATIC_SMEM: u32 = 9;
/// Interned iid of the "dynamic shared memory" debug annotation name.
pub const AN_DYNAMIC_SMEM: u32 = 10;
/// Interned iid of the "bytes" debug annotation name.
pub const AN_BYTES: u32 = 11;
/// Interned iid of the "copy kind" debug annotation name.
pub const AN_COPY_KIND: u32 = 12;
/// Interned iid of the "pageable" debug annotation name.
pub const AN_PAGEABLE: u32 = 13;
/// Interned iid of the "args" debug annotation name.
pub const AN_ARGS: u32 = 14;
/// Interned iid of the "process" debug annotation name.
pub const AN_PROCESS: u32 = 15;
/// Interned iid of the "device properties" debug annotation name.
pub const AN_DEVICE_PROPS: u32 = 16;

use crate::model::{CopyKind, SliceClass, SliceKind};

/// String values interned at the start of every sequence (iids 1..): the
/// slice kinds, then the classes, then the copy kinds.
pub const FIXED_STRING_VALUES: [&str; 20] = [
    "kernel",
    "memcpy",
    "memset",
    "sync",
    "runtime",
    "driver",
    "range",
    "cpu_op",
    "gpu_range",
    "other",
    "none",
    "compute",
    "communication",
    "memory",
    "unknown",
    "HtoD",
    "DtoH",
    "DtoD",
    "HtoH",
    "PtoP",
];
/// First string-value iid free after [`FIXED_STRING_VALUES`].
pub const FIRST_FREE_STR_IID: u32 = FIXED_STRING_VALUES.len() as u32 + 1;

/// Interned string-value iid of the name of a slice kind (see [`FIXED_STRING_VALUES`]).
pub fn kind_value_iid(k: SliceKind) -> u32 {
    k as u32 + 1
}
/// Interned string-value iid of the name of a slice class (see [`FIXED_STRING_VALUES`]).
pub fn class_value_iid(c: SliceClass) -> u32 {
    c as u32 + 11
}
/// Interned string-value iid of the name of a copy kind (see [`FIXED_STRING_VALUES`]).
pub fn copy_kind_value_iid(c: CopyKind) -> u32 {
    c as u32 + 15
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_value_tables_match_the_enums() {
        for k in SliceKind::ALL {
            assert_eq!(
                FIXED_STRING_VALUES[kind_value_iid(k) as usize - 1],
                k.name()
            );
        }
        for c in [
            SliceClass::None,
            SliceClass::Compute,
            SliceClass::Communication,
            SliceClass::Memory,
        ] {
            assert_eq!(
                FIXED_STRING_VALUES[class_value_iid(c) as usize - 1],
                c.name()
            );
        }
        for c in [
            CopyKind::Unknown,
            CopyKind::HostToDevice,
            CopyKind::DeviceToHost,
            CopyKind::DeviceToDevice,
            CopyKind::HostToHost,
            CopyKind::PeerToPeer,
        ] {
            assert_eq!(
                FIXED_STRING_VALUES[copy_kind_value_iid(c) as usize - 1],
                c.name()
            );
        }
    }
}
