//! Per-collective statistics: count, time, bytes and bus bandwidth.
//!
//! Sizes come from the kernel's own arguments (Kineto copies
//! record_param_comms' "In msg nelems", "Out msg nelems", "Group size",
//! "dtype" onto NCCL kernels) or from the record_param_comms op that
//! encloses the kernel's launch call on its host thread.

use crate::model::SliceId;
use rustc_hash::FxHashMap as HashMap;

use super::nccl::{
    bus_factor, canonical_collective, canonical_dtype, dtype_bytes, parse_kernel_name, NcclInfo,
};
use super::rank::{Ev, IntMap, RankCtx};
use super::report::CollectiveStats;
use crate::model::{ArgValue, SliceClass, StrId, Trace, TrackId};

/// NCCL kernel-name parses, cached per interned name.
pub struct NcclNames {
    by_name: Vec<Option<NcclInfo>>,
}

impl NcclNames {
    /// Parses every string of the trace's pool that contains "nccl".
    pub fn new(t: &Trace) -> NcclNames {
        // Only names that contain "nccl" are parsed: a scan of the string pool, not of the slices.
        let by_name = (0..t.strings().len())
            .map(|i| {
                let n = t.str(crate::model::StrId::from_index(i));
                if n.contains("nccl") {
                    parse_kernel_name(n)
                } else {
                    None
                }
            })
            .collect();
        NcclNames { by_name }
    }

    /// The parse of the name of slice `id`, if it is a NCCL kernel name.
    pub fn info(&self, t: &Trace, id: u32) -> Option<&NcclInfo> {
        self.by_name
            .get(t.slices().name()[id as usize].index())
            .and_then(|o| o.as_ref())
    }

    /// Whether slice `id` is an all-gather NCCL kernel.
    pub fn is_all_gather(&self, t: &Trace, id: u32) -> bool {
        self.info(t, id)
            .is_some_and(|i| i.collective == "AllGather")
    }
}

/// What the arguments say about one collective call (strings as pool ids).
#[derive(Debug, Default, Clone)]
struct CommArgs {
    collective: Option<StrId>,
    in_nelems: Option<u64>,
    out_nelems: Option<u64>,
    group_size: Option<u32>,
    dtype: Option<StrId>,
}

/// Interned ids of the argument names (None when the trace never uses them).
struct ArgKeys([Option<StrId>; 5]);

impl ArgKeys {
    fn new(t: &Trace) -> ArgKeys {
        let k = |s: &str| t.strings().lookup(s);
        ArgKeys([
            k("Collective name"),
            k("In msg nelems"),
            k("Out msg nelems"),
            k("Group size"),
            k("dtype"),
        ])
    }
}

fn comm_args(t: &Trace, keys: &ArgKeys, i: SliceId) -> CommArgs {
    let mut a = CommArgs::default();
    for (k, v) in t.args_of(i) {
        let Some(slot) = keys.0.iter().position(|x| *x == Some(*k)) else {
            continue;
        };
        let num = || match v {
            ArgValue::Int(x) => Some((*x).max(0) as u64),
            ArgValue::UInt(x) => Some(*x),
            ArgValue::Double(x) => Some(x.max(0.0) as u64),
            ArgValue::Str(s) => t.str(*s).trim().parse::<u64>().ok(),
            ArgValue::Bool(_) => None,
        };
        let text = || match v {
            ArgValue::Str(s) => Some(*s),
            _ => None,
        };
        match slot {
            0 => a.collective = text(),
            1 => a.in_nelems = num(),
            2 => a.out_nelems = num(),
            3 => a.group_size = num().map(|v| v as u32),
            _ => a.dtype = text(),
        }
    }
    a
}

/// record_param_comms ops of each host thread, sorted by start.
pub fn param_comms_by_track(t: &Trace, ctx: &RankCtx) -> HashMap<TrackId, Vec<u32>> {
    let sl = t.slices();
    let Some(name) = t.strings().lookup("record_param_comms") else {
        return HashMap::default();
    };
    let mut m: HashMap<TrackId, Vec<u32>> = HashMap::default();
    for &h in &ctx.host {
        if sl.name()[h as usize] == name {
            m.entry(sl.track()[h as usize]).or_default().push(h);
        }
    }
    for v in m.values_mut() {
        v.sort_by_key(|&h| sl.start_ns()[h as usize]);
    }
    m
}

/// The record_param_comms op of `param_comms` that encloses host slice
/// `launch` on its thread, if one does.
fn enclosing_param_comm(
    t: &Trace,
    param_comms: &HashMap<TrackId, Vec<u32>>,
    launch: u32,
) -> Option<u32> {
    let sl = t.slices();
    let l = launch as usize;
    let v = param_comms.get(&sl.track()[l])?;
    let k = v.partition_point(|&h| sl.start_ns()[h as usize] <= sl.start_ns()[l]);
    let h = *v.get(k.checked_sub(1)?)?;
    (sl.start_ns()[h as usize].saturating_add(sl.dur_ns()[h as usize])
        >= sl.start_ns()[l].saturating_add(sl.dur_ns()[l]))
    .then_some(h)
}

/// The bytes each communication kernel of a rank moved: its elements
/// (from its own collective arguments, else its launch's record_param_comms
/// op) times its dtype's size (the argument's, else the kernel name's), as
/// [`stats_with`] counts them; `None` when either is unknown.
pub struct Sizer<'a> {
    t: &'a Trace,
    ctx: &'a RankCtx,
    names: &'a NcclNames,
    keys: ArgKeys,
    param_comms: HashMap<TrackId, Vec<u32>>,
}

impl<'a> Sizer<'a> {
    /// The sizer of rank `ctx`.
    pub fn new(t: &'a Trace, ctx: &'a RankCtx, names: &'a NcclNames) -> Sizer<'a> {
        Sizer {
            t,
            ctx,
            names,
            keys: ArgKeys::new(t),
            param_comms: param_comms_by_track(t, ctx),
        }
    }

    /// The collective arguments of communication kernel `id`: its own,
    /// else (without element counts) those of the record_param_comms op
    /// enclosing its launch, when one does.
    fn args(&self, id: u32) -> CommArgs {
        let (t, sl) = (self.t, self.t.slices());
        let i = id as usize;
        let args = comm_args(t, &self.keys, SliceId::from_index(i));
        if args.in_nelems.is_some() || args.out_nelems.is_some() {
            return args;
        }
        self.ctx
            .corr
            .get(sl.correlation()[i])
            .and_then(|l| enclosing_param_comm(t, &self.param_comms, l))
            .map_or(args, |h| {
                comm_args(t, &self.keys, SliceId::from_index(h as usize))
            })
    }

    /// Bytes of communication kernel `id`, when known.
    pub fn bytes(&self, id: u32) -> Option<u64> {
        let t = self.t;
        let args = self.args(id);
        let elems = args
            .in_nelems
            .unwrap_or(0)
            .max(args.out_nelems.unwrap_or(0));
        if elems == 0 {
            return None;
        }
        let dtype = match args.dtype {
            Some(d) => t.str(d).to_string(),
            None => self.names.info(t, id)?.dtype.clone(),
        };
        Some(elems.saturating_mul(dtype_bytes(&canonical_dtype(&dtype))?))
    }
}

/// Statistics per (collective, algorithm, protocol, dtype, op) over
/// `events`, each kernel's arguments from the rank's `sizer` (one sizer,
/// its record_param_comms ops indexed once, serves every step of a rank).
pub fn stats_with(
    t: &Trace,
    ctx: &RankCtx,
    events: &[&Ev],
    names: &NcclNames,
    sizer: &Sizer,
) -> Vec<CollectiveStats> {
    let sl = t.slices();
    let world = t
        .processes()
        .get(ctx.process.index())
        .and_then(|p| p.world_size);
    /// Sums per cheap key (kernel name, collective arg, dtype arg, group size).
    #[derive(Default)]
    struct Acc {
        count: u64,
        total_ns: i64,
        elems: u64,
        sized: u64,
        sized_ns: i64,
    }
    let mut by_id: IntMap<(u32, u32, u32, u32), Acc> = IntMap::default();
    let id = |s: Option<StrId>| s.map_or(u32::MAX, |x| x.get());
    for e in events
        .iter()
        .filter(|e| e.class == SliceClass::Communication)
    {
        let i = e.id as usize;
        let args = sizer.args(e.id);
        let key = (
            sl.name()[i].get(),
            id(args.collective),
            id(args.dtype),
            args.group_size.unwrap_or(0),
        );
        let a = by_id.entry(key).or_default();
        let dur = sl.dur_ns()[i];
        a.count += 1;
        a.total_ns = a.total_ns.saturating_add(dur);
        let elems = args
            .in_nelems
            .unwrap_or(0)
            .max(args.out_nelems.unwrap_or(0));
        if elems > 0 {
            a.elems = a.elems.saturating_add(elems);
            a.sized += 1;
            a.sized_ns = a.sized_ns.saturating_add(dur);
        }
    }
    /// Sums per reported row.
    #[derive(Default)]
    struct Row {
        count: u64,
        total_ns: i64,
        bytes: u64,
        bus_bytes: f64,
        sized: u64,
        sized_ns: i64,
        bus_known: bool,
    }
    let mut acc: HashMap<(String, String, String, String, String), Row> = HashMap::default();
    let text = |x: u32| (x != u32::MAX).then(|| t.str(StrId::from_index(x as usize)).to_string());
    for ((name, coll_arg, dtype_arg, group), a) in by_id {
        let parsed = names
            .by_name
            .get(name as usize)
            .cloned()
            .flatten()
            .unwrap_or_default();
        let collective = if !parsed.collective.is_empty() {
            parsed.collective.clone()
        } else {
            text(coll_arg)
                .map(|c| canonical_collective(&c).map(str::to_string).unwrap_or(c))
                .unwrap_or_else(|| "unknown".to_string())
        };
        let dtype = canonical_dtype(&text(dtype_arg).unwrap_or_else(|| parsed.dtype.clone()));
        let key = (
            collective.clone(),
            parsed.algorithm,
            parsed.protocol,
            dtype.clone(),
            parsed.reduce_op,
        );
        let r = acc.entry(key).or_default();
        r.count = r.count.saturating_add(a.count);
        r.total_ns = r.total_ns.saturating_add(a.total_ns);
        if let (true, Some(size)) = (a.sized > 0, dtype_bytes(&dtype)) {
            let bytes = a.elems.saturating_mul(size);
            r.bytes = r.bytes.saturating_add(bytes);
            r.sized = r.sized.saturating_add(a.sized);
            r.sized_ns = r.sized_ns.saturating_add(a.sized_ns);
            let n = if group > 0 { Some(group) } else { world };
            if let Some(f) = bus_factor(&collective, n.unwrap_or(0)) {
                r.bus_bytes += bytes as f64 * f;
                r.bus_known = true;
            }
        }
    }
    let mut out: Vec<CollectiveStats> = acc
        .into_iter()
        .map(|((collective, algorithm, protocol, dtype, reduce_op), a)| {
            let secs = a.sized_ns as f64 * 1e-9;
            CollectiveStats {
                rank: ctx.rank,
                window: String::new(),
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
