//! [`Allocations`]: the GPU memory blocks a trace saw allocated and freed,
//! one row per allocator event (torch.profiler's `[memory]` instants on a
//! GPU), column by column like the counters. The allocator's totals after
//! each event stay counter samples; this table keeps what the totals lose:
//! which block, how large, the host thread that allocated or freed it
//! (whose slices then enclose the event), and, when the allocator's own
//! history kept it, the Python line that allocated it. 36 bytes a row.

use super::{DeviceId, StrId, TrackId};

/// Allocations and frees of GPU memory blocks, column by column, in the
/// order they were added (an importer's file order; not sorted by time).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Allocations {
    pub(super) track: Vec<TrackId>,
    pub(super) device: Vec<DeviceId>,
    pub(super) ts_ns: Vec<i64>,
    pub(super) address: Vec<u64>,
    pub(super) bytes: Vec<i64>,
    /// The Python line of an allocation ([`StrId::EMPTY`]: not known).
    pub(super) site: Vec<StrId>,
}

impl Allocations {
    /// Number of events.
    #[inline]
    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }
    /// True when there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }
    /// The host thread track each event happened on.
    #[inline]
    pub fn track(&self) -> &[TrackId] {
        &self.track
    }
    /// The GPU whose memory each event allocated or freed.
    #[inline]
    pub fn device(&self) -> &[DeviceId] {
        &self.device
    }
    /// Time (ns) of each event.
    #[inline]
    pub fn ts_ns(&self) -> &[i64] {
        &self.ts_ns
    }
    /// Address of each event's block.
    #[inline]
    pub fn address(&self) -> &[u64] {
        &self.address
    }
    /// Bytes of each event: positive for an allocation, negative for a free.
    #[inline]
    pub fn bytes(&self) -> &[i64] {
        &self.bytes
    }
    /// The Python line ("file.py:L (function)") that made each
    /// allocation, when the trace says ([`StrId::EMPTY`] otherwise).
    #[inline]
    pub fn site(&self) -> &[StrId] {
        &self.site
    }

    pub(super) fn push(
        &mut self,
        track: TrackId,
        device: DeviceId,
        ts_ns: i64,
        address: u64,
        bytes: i64,
        site: StrId,
    ) {
        self.track.push(track);
        self.device.push(device);
        self.ts_ns.push(ts_ns);
        self.address.push(address);
        self.bytes.push(bytes);
        self.site.push(site);
    }
}
