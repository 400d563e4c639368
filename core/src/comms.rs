//! Collective metadata in the model: a typed record per NCCL kernel.
//!
//! The model keeps what is known about a collective call as arguments of
//! its slices, under the keys PyTorch's `record_param_comms` uses (Kineto
//! copies them onto the NCCL kernel, and they sit on the
//! `record_param_comms` CPU op around the launch). A collector source (an
//! NCCL profiler plugin) writes the same keys onto the kernel slice, so
//! both sources feed one analysis. [`CollectiveRecord`] is the typed view
//! of them: the analyses read it, never the argument text.
//!
//! Keys ([`keys`]): "Collective name", "In msg nelems", "Out msg nelems",
//! "dtype", "Group size", "Process Group Name", "Process Group Ranks",
//! "Seq" (ProcessGroupNCCL's sequence number of the call in its group).
//! The "Sequence number" of other CPU ops is autograd's, not a collective's,
//! and is not read.

use crate::model::{ArgValue, ProcessId, SliceId, StrId, Trace, TraceBuilder};
use crate::nccl::{canonical_collective, dtype_bytes};

/// Argument keys of collective metadata.
pub mod keys {
    /// Collective name ("allreduce", "_allgather_base", ...).
    pub const COLLECTIVE: &str = "Collective name";
    /// Elements of the input buffer.
    pub const IN_NELEMS: &str = "In msg nelems";
    /// Elements of the output buffer.
    pub const OUT_NELEMS: &str = "Out msg nelems";
    /// Element type ("Float", "BFloat16", ...).
    pub const DTYPE: &str = "dtype";
    /// Ranks in the communicator.
    pub const GROUP_SIZE: &str = "Group size";
    /// Process group (communicator) name.
    pub const PG_NAME: &str = "Process Group Name";
    /// Global ranks of the process group ("[0, 1]").
    pub const PG_RANKS: &str = "Process Group Ranks";
    /// Sequence number of the call in its process group.
    pub const SEQ: &str = "Seq";
    /// All of them, in [`super::CommKeys`] order.
    pub const ALL: [&str; 8] = [
        COLLECTIVE, IN_NELEMS, OUT_NELEMS, DTYPE, GROUP_SIZE, PG_NAME, PG_RANKS, SEQ,
    ];
}

/// Interned ids of the [`keys`] in one trace (None when the trace never uses one).
#[derive(Debug, Clone)]
pub struct CommKeys([Option<StrId>; 8]);

impl CommKeys {
    /// Looks the keys up in the trace's string pool.
    pub fn new(t: &Trace) -> CommKeys {
        CommKeys(keys::ALL.map(|k| t.strings().lookup(k)))
    }

    /// Whether the trace uses none of the keys (collector traces today).
    pub fn none(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

/// What the trace says about one collective call (a NCCL kernel).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CollectiveRecord {
    /// Canonical collective (AllReduce, AllGather, ...), from the arguments.
    pub collective: Option<String>,
    /// Process group (communicator) name.
    pub process_group: Option<String>,
    /// Global ranks of the process group, as written ("[0, 1]").
    pub group_ranks: Option<String>,
    /// Sequence number of the call in its process group.
    pub seq: Option<u64>,
    /// Input and output elements.
    pub in_nelems: Option<u64>,
    /// Output elements.
    pub out_nelems: Option<u64>,
    /// Element type as written ("Float").
    pub dtype: Option<String>,
    /// Ranks in the communicator.
    pub group_size: Option<u32>,
}

impl CollectiveRecord {
    /// Fills the fields still unknown from the arguments of slice `id`.
    pub fn fill_from(&mut self, t: &Trace, k: &CommKeys, id: SliceId) {
        if id.index() >= t.slices().len() {
            return;
        }
        for (key, v) in t.args_of(id) {
            let Some(slot) = k.0.iter().position(|x| *x == Some(*key)) else {
                continue;
            };
            let num = match v {
                ArgValue::Int(x) => u64::try_from(*x).ok(),
                ArgValue::UInt(x) => Some(*x),
                ArgValue::Double(x) if x.is_finite() && *x >= 0.0 => Some(*x as u64),
                ArgValue::Str(s) => t.str(*s).trim().parse::<u64>().ok(),
                _ => None,
            };
            let text = match v {
                ArgValue::Str(s) => Some(t.str(*s).to_string()),
                ArgValue::Int(x) => Some(x.to_string()),
                ArgValue::UInt(x) => Some(x.to_string()),
                _ => None,
            };
            match slot {
                0 if self.collective.is_none() => {
                    self.collective =
                        text.map(|c| canonical_collective(&c).map(str::to_string).unwrap_or(c))
                }
                1 if self.in_nelems.is_none() => self.in_nelems = num,
                2 if self.out_nelems.is_none() => self.out_nelems = num,
                3 if self.dtype.is_none() => self.dtype = text,
                4 if self.group_size.is_none() => {
                    self.group_size = num.and_then(|n| u32::try_from(n).ok())
                }
                5 if self.process_group.is_none() => self.process_group = text,
                6 if self.group_ranks.is_none() => self.group_ranks = text,
                7 if self.seq.is_none() => self.seq = num,
                _ => {}
            }
        }
    }

    /// The record of slice `id` from its own arguments.
    pub fn of_slice(t: &Trace, k: &CommKeys, id: SliceId) -> CollectiveRecord {
        let mut r = CollectiveRecord::default();
        r.fill_from(t, k, id);
        r
    }

    /// Message bytes: max(in, out) elements × the dtype's size, when both are known.
    pub fn bytes(&self) -> Option<u64> {
        let elems = self
            .in_nelems
            .unwrap_or(0)
            .max(self.out_nelems.unwrap_or(0));
        let size = dtype_bytes(self.dtype.as_deref()?)?;
        (elems > 0).then(|| elems.saturating_mul(size))
    }

    /// Whether nothing is known.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        *self == CollectiveRecord::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewSlice, SliceKind, TrackKind};

    #[test]
    fn reads_typed_fields_from_args() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Default::default());
        let tr = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "t");
        let name = t.intern("ncclDevKernel_AllGather_RING_LL");
        let mut s = NewSlice::new(tr, SliceKind::Kernel, name, 0, 10);
        let kv = |t: &mut TraceBuilder, k: &str, v: ArgValue| (t.intern(k), v);
        let float = t.intern("BFloat16");
        let pg = t.intern("7");
        let coll = t.intern("_allgather_base");
        s.args = vec![
            kv(&mut t, keys::COLLECTIVE, ArgValue::Str(coll)),
            kv(&mut t, keys::IN_NELEMS, ArgValue::Int(1000)),
            kv(&mut t, keys::OUT_NELEMS, ArgValue::Int(2000)),
            kv(&mut t, keys::DTYPE, ArgValue::Str(float)),
            kv(&mut t, keys::GROUP_SIZE, ArgValue::Int(2)),
            kv(&mut t, keys::PG_NAME, ArgValue::Str(pg)),
            kv(&mut t, keys::SEQ, ArgValue::UInt(42)),
        ];
        t.push_slice(s);
        let t = t.finish();
        let k = CommKeys::new(&t);
        let r = CollectiveRecord::of_slice(&t, &k, SliceId::from_index(0));
        assert_eq!(r.collective.as_deref(), Some("AllGather"));
        assert_eq!(r.process_group.as_deref(), Some("7"));
        assert_eq!((r.seq, r.group_size), (Some(42), Some(2)));
        assert_eq!(r.bytes(), Some(4000));
        assert!(CollectiveRecord::of_slice(&t, &k, SliceId::from_index(99)).is_empty());
    }
}

/// Arguments the collector's NCCL profiler plugin writes on its operation
/// slices ("NCCL AllGather" on an "NCCL · comm ..." track; collector
/// README, "NCCL profiler plugin").
pub mod plugin {
    /// Correlation id of the NCCL kernel the operation launched.
    pub const KERNEL_CORRELATION: &str = "kernel_correlation";
    /// NCCL function ("AllGather", "ReduceScatter", "Send", ...).
    pub const FUNC: &str = "func";
    /// NCCL's count argument (elements per rank, as NCCL defines it).
    pub const COUNT: &str = "count";
    /// NCCL data type ("ncclBfloat16").
    pub const DTYPE: &str = "dtype";
    /// Ranks in the communicator.
    pub const NRANKS: &str = "nranks";
    /// Communicator hash.
    pub const COMM: &str = "comm";
    /// Sequence number of the operation in its communicator.
    pub const SEQ: &str = "seq";
}

/// (input, output) elements of an NCCL call of `func` with NCCL's `count`
/// over `n` ranks: an all-gather sends `count` and receives `count × n`, a
/// reduce-scatter the reverse, the others move `count` each way.
fn plugin_nelems(func: &str, count: u64, n: u64) -> (u64, u64) {
    match func {
        "AllGather" => (count, count.saturating_mul(n)),
        "ReduceScatter" => (count.saturating_mul(n), count),
        _ => (count, count),
    }
}

/// Copies what the collector's NCCL profiler plugin recorded about each
/// operation onto the NCCL kernel it launched (same process, the
/// operation's `kernel_correlation`), under the [`keys`] Kineto uses:
/// collective, input and output elements, dtype, group size, process group
/// (the communicator hash) and sequence number. Keys the kernel already
/// has are kept. Returns how many kernels gained arguments. A trace
/// without plugin operations is left alone at the cost of one lookup.
pub(crate) fn attach_plugin_operations(t: &mut TraceBuilder) -> usize {
    use crate::model::SliceKind;
    use std::collections::HashMap;
    let Some(kc) = t.strings().lookup(plugin::KERNEL_CORRELATION) else {
        return 0;
    };
    let proc_of = |t: &TraceBuilder, i: usize| t.tracks()[t.slices().track()[i].index()].process;
    // Operations: (process, kernel correlation) -> operation slice.
    let mut ops: HashMap<(ProcessId, u64), SliceId> = HashMap::new();
    for i in 0..t.slices().len() {
        if let Some((_, v)) = t
            .args_of(SliceId::from_index(i))
            .iter()
            .find(|(k, _)| *k == kc)
        {
            let corr = match v {
                ArgValue::Int(x) => u64::try_from(*x).ok(),
                ArgValue::UInt(x) => Some(*x),
                _ => None,
            };
            if let Some(c) = corr.filter(|&c| c > 0) {
                ops.insert((proc_of(t, i), c), SliceId::from_index(i));
            }
        }
    }
    if ops.is_empty() {
        return 0;
    }
    let key_ids = keys::ALL.map(|k| t.intern(k));
    let mut gained = 0;
    for i in 0..t.slices().len() {
        let id = SliceId::from_index(i);
        if t.slices().kind()[i] != SliceKind::Kernel || t.slices().correlation()[i] == 0 {
            continue;
        }
        let Some(&op) = ops.get(&(proc_of(t, i), t.slices().correlation()[i] as u64)) else {
            continue;
        };
        let text = |t: &TraceBuilder, key: &str| t.arg_string(op, key);
        let num =
            |t: &TraceBuilder, key: &str| text(t, key).and_then(|s| s.trim().parse::<u64>().ok());
        let (Some(func), Some(count)) = (text(t, plugin::FUNC), num(t, plugin::COUNT)) else {
            continue;
        };
        let n = num(t, plugin::NRANKS).unwrap_or(1).max(1);
        let (inn, out) = plugin_nelems(&func, count, n);
        let dtype = text(t, plugin::DTYPE).map(|d| {
            d.strip_prefix("nccl")
                .map_or(d.clone(), str::to_ascii_lowercase)
        });
        let mut values: [Option<ArgValue>; 8] = Default::default();
        values[0] = Some(ArgValue::Str(t.intern(&func)));
        values[1] = Some(ArgValue::UInt(inn));
        values[2] = Some(ArgValue::UInt(out));
        values[3] = dtype.map(|d| ArgValue::Str(t.intern(&d)));
        values[4] = Some(ArgValue::UInt(n));
        values[5] = text(t, plugin::COMM).map(|c| ArgValue::Str(t.intern(&c)));
        values[7] = num(t, plugin::SEQ).map(ArgValue::UInt);
        let mut set: Vec<(StrId, ArgValue)> = t.args_of(id).to_vec();
        let before = set.len();
        for (k, v) in key_ids.iter().zip(values) {
            if let Some(v) = v {
                if !set.iter().any(|(x, _)| x == k) {
                    set.push((*k, v));
                }
            }
        }
        if set.len() > before {
            t.set_slice_args(id, set);
            gained += 1;
        }
    }
    gained
}
