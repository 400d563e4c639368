//! The slices linked to a selected one: its launch call or its GPU work, from
//! the trace's flows and, failing those, by CUDA correlation id.

use streamscope_core::SliceId;
use streamscope_core::{SliceKind, Trace};

/// Slices linked to `sel`, as (from, to) pairs in launch → GPU direction.
/// Runs once per selection: a scan of the correlation column is fine there.
pub fn linked(trace: &Trace, sel: usize) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = trace
        .flows()
        .iter()
        .filter(|f| f.from.index() == sel || f.to.index() == sel)
        .map(|f| (f.from.get(), f.to.get()))
        .collect();
    let sl = trace.slices();
    let corr = sl.correlation()[sel];
    if out.is_empty() && corr != 0 {
        let process = trace.slice_process(SliceId::from_index(sel));
        let sel_is_gpu = sl.kind()[sel].is_gpu_activity();
        for i in 0..sl.len() {
            if i == sel
                || sl.correlation()[i] != corr
                || trace.slice_process(SliceId::from_index(i)) != process
            {
                continue;
            }
            let is_host = matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver);
            if sel_is_gpu && is_host {
                out.push((i as u32, sel as u32));
            } else if !sel_is_gpu && sl.kind()[i].is_gpu_activity() {
                out.push((sel as u32, i as u32));
            }
        }
    }
    out
}

/// The launch call of GPU slice `sel`, if linked.
pub fn launch_call(trace: &Trace, links: &[(u32, u32)], sel: usize) -> Option<usize> {
    links
        .iter()
        .find(|(from, to)| {
            *to as usize == sel && !trace.slices().kind()[*from as usize].is_gpu_activity()
        })
        .map(|(from, _)| *from as usize)
}
