//! How the streams of a rank were created (`protocol::streams`, from the
//! collector's CUPTI stream records): which one is the legacy default
//! stream, and which streams synchronize with it.

use super::rank::RankCtx;
use crate::model::Trace;
use crate::protocol::streams::{self, StreamCreation};

/// How each stream of `ctx` was created, in `ctx.streams` order; `None`
/// where the trace does not say (Kineto traces, older recordings, tracks
/// that are no CUDA stream).
pub(crate) fn of_ctx(t: &Trace, ctx: &RankCtx) -> Vec<Option<StreamCreation>> {
    let process = t.process(ctx.process);
    let listed: Vec<(crate::model::DeviceId, Vec<(u32, StreamCreation)>)> = t
        .devices_of(ctx.process)
        .filter_map(|d| {
            let key = streams::key(t.device(d).ordinal);
            let v = process.metadata.iter().find(|(k, _)| *k == key)?;
            Some((d, streams::parse(&v.1)))
        })
        .collect();
    ctx.streams
        .iter()
        .map(|s| {
            let (device, stream) = (s.device()?, s.stream()?);
            let (_, v) = listed.iter().find(|(d, _)| *d == device)?;
            v.iter().find(|(id, _)| *id == stream).map(|(_, c)| *c)
        })
        .collect()
}
