//! How the streams of a rank were created (`protocol::streams`, from the
//! collector's CUPTI stream records): which one is the legacy default
//! stream, and which streams synchronize with it.

use super::rank::RankCtx;
use crate::model::{DeviceId, ProcessId, Trace};
use crate::protocol::streams::{self, StreamCreation};

/// How each stream of `ctx` was created, in `ctx.streams` order; `None`
/// where the trace does not say (Kineto traces, older recordings, tracks
/// that are no CUDA stream).
pub(crate) fn of_ctx(t: &Trace, ctx: &RankCtx) -> Vec<Option<StreamCreation>> {
    let listed = of_process(t, ctx.process);
    ctx.streams
        .iter()
        .map(|s| {
            let (device, stream) = (s.device()?, s.stream()?);
            let (_, v) = listed.iter().find(|(d, _)| *d == device)?;
            v.iter().find(|(id, _)| *id == stream).map(|(_, c)| *c)
        })
        .collect()
}

/// Per device of `process` whose streams the metadata lists: the streams
/// and how each was created.
pub(crate) fn of_process(
    t: &Trace,
    process: ProcessId,
) -> Vec<(DeviceId, Vec<(u32, StreamCreation)>)> {
    let meta = &t.process(process).metadata;
    t.devices_of(process)
        .filter_map(|d| {
            let key = streams::key(t.device(d).ordinal);
            let v = meta.iter().find(|(k, _)| *k == key)?;
            Some((d, streams::parse(&v.1)))
        })
        .collect()
}
