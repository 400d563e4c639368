//! Field numbers of the Perfetto protos we write and read
//! (protos/perfetto/trace/... as shipped by the perfetto_protos crate), and
//! the names of streamscope's own annotations.

pub const TRACE_PACKET: u32 = 1;

// TracePacket
pub const PKT_CLOCK_SNAPSHOT: u32 = 6;
pub const PKT_TIMESTAMP: u32 = 8;
pub const PKT_SEQUENCE_ID: u32 = 10;
pub const PKT_TRACK_EVENT: u32 = 11;
pub const PKT_INTERNED_DATA: u32 = 12;
pub const PKT_SEQUENCE_FLAGS: u32 = 13;
pub const PKT_TIMESTAMP_CLOCK_ID: u32 = 58;
pub const PKT_DEFAULTS: u32 = 59;
pub const PKT_TRACK_DESCRIPTOR: u32 = 60;
pub const PKT_FIRST_PACKET_ON_SEQUENCE: u32 = 87;
pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;

// TracePacketDefaults
pub const DEFAULTS_TIMESTAMP_CLOCK_ID: u32 = 58;
pub const DEFAULTS_TRACK_EVENT_DEFAULTS: u32 = 11;
// TrackEventDefaults
pub const TED_TRACK_UUID: u32 = 11;

// TrackDescriptor
pub const TD_UUID: u32 = 1;
pub const TD_NAME: u32 = 2;
pub const TD_PROCESS: u32 = 3;
pub const TD_THREAD: u32 = 4;
pub const TD_PARENT_UUID: u32 = 5;
pub const TD_COUNTER: u32 = 8;
pub const TD_STATIC_NAME: u32 = 10;
pub const TD_CHILD_ORDERING: u32 = 11;
pub const TD_DESCRIPTION: u32 = 14;
// ProcessDescriptor
pub const PD_PID: u32 = 1;
pub const PD_CMDLINE: u32 = 2;
pub const PD_PROCESS_NAME: u32 = 6;
pub const PD_PROCESS_LABELS: u32 = 8;
// ThreadDescriptor
pub const THD_PID: u32 = 1;
pub const THD_TID: u32 = 2;
pub const THD_THREAD_NAME: u32 = 5;
// CounterDescriptor
pub const CD_UNIT: u32 = 3;
pub const CD_UNIT_COUNT: u64 = 2;

// TrackEvent
pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
pub const TE_TYPE: u32 = 9;
pub const TE_NAME_IID: u32 = 10;
pub const TE_TRACK_UUID: u32 = 11;
pub const TE_NAME: u32 = 23;
pub const TE_COUNTER_VALUE: u32 = 30;
pub const TE_DOUBLE_COUNTER_VALUE: u32 = 44;
pub const TE_FLOW_IDS: u32 = 47;
pub const TE_TERMINATING_FLOW_IDS: u32 = 48;
pub const TE_TYPE_SLICE_BEGIN: u64 = 1;
pub const TE_TYPE_SLICE_END: u64 = 2;
pub const TE_TYPE_INSTANT: u64 = 3;
pub const TE_TYPE_COUNTER: u64 = 4;

// DebugAnnotation
pub const DA_NAME_IID: u32 = 1;
pub const DA_BOOL: u32 = 2;
pub const DA_UINT: u32 = 3;
pub const DA_INT: u32 = 4;
pub const DA_DOUBLE: u32 = 5;
pub const DA_STRING: u32 = 6;
pub const DA_NAME: u32 = 10;
pub const DA_DICT_ENTRIES: u32 = 11;
pub const DA_ARRAY_VALUES: u32 = 12;
pub const DA_STRING_VALUE_IID: u32 = 17;

// InternedData
pub const INTERNED_EVENT_NAMES: u32 = 2;
pub const INTERNED_DEBUG_ANNOTATION_NAMES: u32 = 3;
pub const INTERNED_DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;

/// Description of a process track written by streamscope.
pub const PROCESS_DESCRIPTION: &str = "streamscope process";

/// Name of the instant that carries process and device metadata.
pub const PROCESS_METADATA_EVENT: &str = "streamscope.process";

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
pub const AN_KIND: u32 = 1;
pub const AN_CLASS: u32 = 2;
pub const AN_CORRELATION: u32 = 3;
pub const AN_DEVICE: u32 = 4;
pub const AN_STREAM: u32 = 5;
pub const AN_GRID: u32 = 6;
pub const AN_BLOCK: u32 = 7;
pub const AN_REGISTERS: u32 = 8;
pub const AN_STATIC_SMEM: u32 = 9;
pub const AN_DYNAMIC_SMEM: u32 = 10;
pub const AN_BYTES: u32 = 11;
pub const AN_COPY_KIND: u32 = 12;
pub const AN_PAGEABLE: u32 = 13;
pub const AN_ARGS: u32 = 14;
pub const AN_PROCESS: u32 = 15;
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
pub const FIRST_FREE_STR_IID: u32 = FIXED_STRING_VALUES.len() as u32 + 1;

pub fn kind_value_iid(k: SliceKind) -> u32 {
    k as u32 + 1
}
pub fn class_value_iid(c: SliceClass) -> u32 {
    c as u32 + 11
}
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
