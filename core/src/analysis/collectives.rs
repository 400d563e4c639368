//! Per-collective statistics: count, time, bytes and bus bandwidth.
//!
//! Sizes come from the kernel's own arguments (Kineto copies
//! record_param_comms' "In msg nelems", "Out msg nelems", "Group size",
//! "dtype" onto NCCL kernels) or from the record_param_comms op that
//! encloses the kernel's launch call on its host thread.

use std::collections::HashMap;

use super::nccl::{bus_factor, canonical_collective, dtype_bytes, parse_kernel_name, NcclInfo};
use super::rank::{Ev, RankCtx};
use super::report::CollectiveStats;
use crate::model::{SliceClass, SliceKind, Trace, TrackId};

/// NCCL kernel-name parses, cached per interned name.
pub struct NcclNames {
    by_name: HashMap<u32, Option<NcclInfo>>,
}

impl NcclNames {
    pub fn new(t: &Trace) -> NcclNames {
        let mut by_name = HashMap::new();
        let sl = &t.slices;
        for i in 0..sl.len() {
            if sl.kind[i] == SliceKind::Kernel && !by_name.contains_key(&sl.name[i].0) {
                let n = t.str(sl.name[i]);
                let info = if n.contains("nccl") {
                    parse_kernel_name(n)
                } else {
                    None
                };
                by_name.insert(sl.name[i].0, info);
            }
        }
        NcclNames { by_name }
    }

    pub fn info(&self, t: &Trace, id: u32) -> Option<&NcclInfo> {
        self.by_name
            .get(&t.slices.name[id as usize].0)
            .and_then(|o| o.as_ref())
    }

    pub fn is_all_gather(&self, t: &Trace, id: u32) -> bool {
        self.info(t, id)
            .is_some_and(|i| i.collective == "AllGather")
    }
}

/// What the arguments say about one collective call.
#[derive(Debug, Default, Clone)]
struct CommArgs {
    collective: Option<String>,
    in_nelems: Option<u64>,
    out_nelems: Option<u64>,
    group_size: Option<u32>,
    dtype: Option<String>,
}

fn comm_args(t: &Trace, i: usize) -> CommArgs {
    let num = |k: &str| {
        t.arg_string(i, k)
            .and_then(|s| s.trim().parse::<f64>().ok())
            .map(|v| v.max(0.0) as u64)
    };
    CommArgs {
        collective: t.arg_string(i, "Collective name"),
        in_nelems: num("In msg nelems"),
        out_nelems: num("Out msg nelems"),
        group_size: num("Group size").map(|v| v as u32),
        dtype: t.arg_string(i, "dtype"),
    }
}

/// record_param_comms ops of each host thread, sorted by start.
fn param_comms_by_track(t: &Trace, ctx: &RankCtx) -> HashMap<TrackId, Vec<u32>> {
    let sl = &t.slices;
    let Some(name) = t.strings.lookup("record_param_comms") else {
        return HashMap::new();
    };
    let mut m: HashMap<TrackId, Vec<u32>> = HashMap::new();
    for &h in &ctx.host {
        if sl.name[h as usize] == name {
            m.entry(sl.track[h as usize]).or_default().push(h);
        }
    }
    for v in m.values_mut() {
        v.sort_by_key(|&h| sl.start_ns[h as usize]);
    }
    m
}

/// Statistics per (collective, algorithm, protocol, dtype, op) over `events`.
pub fn stats(t: &Trace, ctx: &RankCtx, events: &[&Ev], names: &NcclNames) -> Vec<CollectiveStats> {
    let sl = &t.slices;
    let world = t
        .processes
        .get(ctx.process as usize)
        .and_then(|p| p.world_size);
    let param_comms = param_comms_by_track(t, ctx);
    let enclosing = |launch: u32| -> Option<u32> {
        let l = launch as usize;
        let v = param_comms.get(&sl.track[l])?;
        let k = v.partition_point(|&h| sl.start_ns[h as usize] <= sl.start_ns[l]);
        let h = *v.get(k.checked_sub(1)?)?;
        (sl.start_ns[h as usize] + sl.dur_ns[h as usize] >= sl.start_ns[l] + sl.dur_ns[l])
            .then_some(h)
    };
    #[derive(Default)]
    struct Acc {
        count: u64,
        total_ns: i64,
        bytes: u64,
        bus_bytes: f64,
        sized: u64,
        sized_ns: i64,
        bus_known: bool,
    }
    let mut acc: HashMap<(String, String, String, String, String), Acc> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e.class == SliceClass::Communication)
    {
        let i = e.id as usize;
        let mut args = comm_args(t, i);
        if args.in_nelems.is_none() && args.out_nelems.is_none() {
            if let Some(h) = ctx.corr.get(sl.correlation[i]).and_then(enclosing) {
                args = comm_args(t, h as usize);
            }
        }
        let parsed = names.info(t, e.id).cloned().unwrap_or_default();
        let collective = if !parsed.collective.is_empty() {
            parsed.collective.clone()
        } else {
            args.collective
                .as_deref()
                .map(|c| {
                    canonical_collective(c)
                        .map(str::to_string)
                        .unwrap_or_else(|| c.to_string())
                })
                .unwrap_or_else(|| "unknown".to_string())
        };
        let dtype = args.dtype.clone().unwrap_or_else(|| parsed.dtype.clone());
        let key = (
            collective.clone(),
            parsed.algorithm,
            parsed.protocol,
            dtype.clone(),
            parsed.reduce_op,
        );
        let a = acc.entry(key).or_default();
        let dur = sl.dur_ns[i];
        a.count += 1;
        a.total_ns += dur;
        let elems = args
            .in_nelems
            .unwrap_or(0)
            .max(args.out_nelems.unwrap_or(0));
        if let (true, Some(size)) = (elems > 0, dtype_bytes(&dtype)) {
            let bytes = elems * size;
            a.bytes += bytes;
            a.sized += 1;
            a.sized_ns += dur;
            if let Some(f) = bus_factor(&collective, args.group_size.or(world).unwrap_or(0)) {
                a.bus_bytes += bytes as f64 * f;
                a.bus_known = true;
            }
        }
    }
    let mut out: Vec<CollectiveStats> = acc
        .into_iter()
        .map(|((collective, algorithm, protocol, dtype, reduce_op), a)| {
            let secs = a.sized_ns as f64 * 1e-9;
            CollectiveStats {
                rank: ctx.rank,
                collective,
                algorithm,
                protocol,
                dtype,
                reduce_op,
                count: a.count,
                total_us: a.total_ns as f64 / 1000.0,
                mean_us: a.total_ns as f64 / 1000.0 / a.count.max(1) as f64,
                bytes: (a.sized > 0).then_some(a.bytes),
                sized: a.sized,
                alg_bw_gbps: (a.sized > 0 && secs > 0.0).then(|| a.bytes as f64 / secs / 1e9),
                bus_bw_gbps: (a.bus_known && secs > 0.0).then(|| a.bus_bytes / secs / 1e9),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.total_us
            .total_cmp(&a.total_us)
            .then_with(|| a.collective.cmp(&b.collective))
    });
    out
}
