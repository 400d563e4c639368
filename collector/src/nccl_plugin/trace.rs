//! The writer's side of the NCCL profiler plugin: each batch it takes the
//! operations the plugin kept and adds one slice per operation
//! (`SliceKind::Other`, named "NCCL AllReduce", "NCCL Send", ...) on a
//! track per communicator (`TrackKind::Other`, "NCCL · comm 0x... · rank
//! R/N"), with the operation's fields as slice args (keys in [`keys`]).
//! Also the process metadata saying whether NCCL loaded the plugin.

use std::collections::{HashMap, VecDeque};

use streamscope_core::protocol;
use streamscope_core::{ArgValue, NewSlice, SliceKind, TrackId, TrackKind};

use super::{comms, plugin_status, take_ops, Comm, Op, OpKind};
use crate::convert::Converter;

/// Slice arg keys of an NCCL operation.
pub mod keys {
    /// Communicator hash, "0x" and 16 hex digits (NCCL's commHash, the same
    /// on every rank of the communicator).
    pub const COMM: &str = "comm";
    /// Communicator name, when the program gave one.
    pub const COMM_NAME: &str = "comm_name";
    pub const RANK: &str = "rank";
    pub const NRANKS: &str = "nranks";
    /// Collectives: sequence number per communicator and function (the
    /// same operation has the same number on every rank).
    pub const SEQ: &str = "seq";
    /// "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Send", ...
    pub const FUNC: &str = "func";
    /// Elements, as NCCL was called (per rank for AllGather/ReduceScatter).
    pub const COUNT: &str = "count";
    /// "ncclFloat32", "ncclBfloat16", ...
    pub const DTYPE: &str = "dtype";
    /// count × the data type's size (absent for a type NCCL calls Unknown).
    pub const BYTES: &str = "bytes";
    /// Collectives: root rank.
    pub const ROOT: &str = "root";
    /// Point-to-point: the peer rank.
    pub const PEER: &str = "peer";
    /// Collectives: "RING", "TREE", "NVLS", ...
    pub const ALGO: &str = "algo";
    /// Collectives: "LL", "LL128", "SIMPLE".
    pub const PROTO: &str = "proto";
    pub const CHANNELS: &str = "channels";
    /// Collectives: warps per block.
    pub const WARPS: &str = "warps";
    /// The thread that started the operation.
    pub const TID: &str = "tid";
    /// CUDA correlation id of the operation's NCCL kernel (the kernel slice
    /// with this correlation), when [`super::super::link`] found it.
    pub const KERNEL_CORRELATION: &str = "kernel_correlation";
}

/// Bytes per element of an NCCL data type name (ncclDatatypeToString).
pub fn dtype_size(name: &str) -> Option<u64> {
    Some(match name.strip_prefix("nccl")? {
        "Int8" | "Uint8" | "Char" | "Float8e4m3" | "Float8e5m2" => 1,
        "Float16" | "Half" | "Bfloat16" => 2,
        "Int32" | "Uint32" | "Int" | "Float32" | "Float" => 4,
        "Int64" | "Uint64" | "Float64" | "Double" => 8,
        _ => return None,
    })
}

/// "NCCL · comm 0x0123456789abcdef (name) · rank R/N".
pub fn track_name(c: &Comm) -> String {
    let name = c
        .name
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!(
        "{}0x{:016x}{name} · rank {}/{}",
        protocol::NCCL_TRACK_PREFIX,
        c.hash,
        c.rank,
        c.nranks
    )
}

/// Batches an operation waits at least before it is written, so that its
/// kernel's record (which comes when the kernel ends) may be there.
pub const DEFER_BATCHES: u8 = 3;
/// Batches an operation waits at most for its kernel's record (the GPU
/// may run seconds behind the host): then it is written unlinked.
pub const MAX_DEFER_BATCHES: u8 = 50;

/// The writer's state for NCCL operations.
#[derive(Default)]
pub struct NcclWriter {
    tracks: HashMap<u32, TrackId>,
    comms: Vec<Comm>,
    said: (u32, u64, u64),
    /// Operations waiting for their kernel, with their age in batches.
    waiting: Vec<(Op, u8)>,
    /// Per thread: stop times of the last operations written.
    stops: HashMap<u32, VecDeque<i64>>,
}

impl NcclWriter {
    /// A writer that knows these communicators already (tests).
    pub fn with_comms(comms: Vec<Comm>) -> Self {
        NcclWriter {
            comms,
            ..Default::default()
        }
    }

    /// Adds the operations kept since the last call to the batch, and the
    /// plugin's metadata when it changed (`last`: the final batch, where a
    /// plugin never loaded is said too).
    pub fn write(&mut self, conv: &mut Converter, last: bool) {
        let (ops, lost) = take_ops();
        self.write_ops(conv, ops, lost, last);
    }

    /// [`Self::write`] with the plugin's operations and lost count given.
    pub fn write_ops(&mut self, conv: &mut Converter, ops: Vec<Op>, lost: u64, last: bool) {
        self.waiting.extend(ops.into_iter().map(|o| (o, 0)));
        // Per thread in order of start: an operation goes once its kernel
        // is found (or it waited too long); the ones after it wait with it,
        // so each is linked knowing where the one before it stopped.
        let mut waiting = std::mem::take(&mut self.waiting);
        waiting.sort_by_key(|(o, _)| (o.tid, o.start_ns));
        let mut blocked: Option<u32> = None;
        for (op, mut age) in waiting {
            age = age.saturating_add(1);
            let kernel = (blocked != Some(op.tid)).then(|| self.kernel_of(conv, &op));
            let go = kernel.is_some_and(|k| {
                last || (age > DEFER_BATCHES && (k.is_some() || age > MAX_DEFER_BATCHES))
            });
            match kernel {
                Some(k) if go => self.add_one(conv, &op, k),
                _ => {
                    blocked = Some(op.tid);
                    self.waiting.push((op, age));
                }
            }
        }
        let (version, inits) = plugin_status();
        if (version, inits, lost) != self.said || last {
            self.said = (version, inits, lost);
            if version > 0 {
                conv.set_process_metadata(
                    protocol::NCCL_PLUGIN_KEY,
                    format!("v{version}: init called for {inits} communicator(s)"),
                );
            } else if last {
                conv.set_process_metadata(
                    protocol::NCCL_PLUGIN_KEY,
                    match std::env::var(protocol::env::NCCL_PROFILER_PLUGIN) {
                        Ok(v) => format!(
                            "not loaded (NCCL_PROFILER_PLUGIN={v}; no communicator called init)"
                        ),
                        Err(_) => "not loaded (NCCL_PROFILER_PLUGIN unset)".into(),
                    },
                );
            }
            if lost > 0 {
                conv.set_process_metadata(protocol::NCCL_RECORDS_LOST_KEY, lost.to_string());
            }
        }
    }

    /// The NCCL kernel of `op` (see [`super::link`]): launched on its
    /// thread last before it started, after the last operation of that
    /// thread that stopped before it started (None: not known yet).
    fn kernel_of(&self, conv: &Converter, op: &Op) -> Option<u32> {
        let after = self
            .stops
            .get(&op.tid)
            .and_then(|s| s.iter().copied().filter(|&s| s < op.start_ns).max())
            .unwrap_or(i64::MIN);
        conv.nccl_links.kernel_for(op.tid, op.start_ns, after)
    }

    /// Adds `ops` to the batch (those inside the capture window), in order
    /// of start per thread, each linked to its kernel if known now.
    pub fn add(&mut self, conv: &mut Converter, ops: &[Op]) {
        for op in ops {
            let kernel = self.kernel_of(conv, op);
            self.add_one(conv, op, kernel);
        }
    }

    /// Adds `op`, linked to `kernel`; later operations of its thread are
    /// linked only to kernels launched after it stopped.
    fn add_one(&mut self, conv: &mut Converter, op: &Op, kernel: Option<u32>) {
        let stops = self.stops.entry(op.tid).or_default();
        if stops.len() >= 64 {
            stops.pop_front();
        }
        stops.push_back(op.end_ns);
        if !conv.in_window(op.start_ns, op.end_ns) {
            return;
        }
        if op.comm as usize >= self.comms.len() {
            self.comms = comms();
        }
        let Some(comm) = self.comms.get(op.comm as usize).cloned() else {
            return;
        };
        let track = *self.tracks.entry(op.comm).or_insert_with(|| {
            let p = conv.process_index();
            conv.trace
                .add_track(p, None, TrackKind::Other, &track_name(&comm))
        });
        let t = &mut conv.trace;
        let name = t.intern(&format!(
            "{}{}",
            protocol::NCCL_SLICE_PREFIX,
            op.func.as_str()
        ));
        let mut s = NewSlice::new(
            track,
            SliceKind::Other,
            name,
            op.start_ns,
            op.end_ns - op.start_ns,
        );
        let mut str_arg = |t: &mut streamscope_core::TraceBuilder, k: &str, v: &str| {
            let (k, v) = (t.intern(k), t.intern(v));
            s.args.push((k, ArgValue::Str(v)));
        };
        str_arg(t, keys::COMM, &format!("0x{:016x}", comm.hash));
        if let Some(n) = &comm.name {
            str_arg(t, keys::COMM_NAME, n);
        }
        str_arg(t, keys::FUNC, op.func.as_str());
        str_arg(t, keys::DTYPE, op.dtype.as_str());
        if op.kind == OpKind::Coll {
            str_arg(t, keys::ALGO, op.algo.as_str());
            str_arg(t, keys::PROTO, op.proto.as_str());
        }
        let mut num = |k: &str, v: ArgValue| {
            let k = t.intern(k);
            s.args.push((k, v));
        };
        num(keys::RANK, ArgValue::Int(op.rank.into()));
        num(keys::NRANKS, ArgValue::Int(comm.nranks.into()));
        num(keys::COUNT, ArgValue::UInt(op.count));
        if let Some(size) = dtype_size(op.dtype.as_str()) {
            num(keys::BYTES, ArgValue::UInt(op.count.saturating_mul(size)));
        }
        num(keys::CHANNELS, ArgValue::UInt(op.channels.into()));
        match op.kind {
            OpKind::Coll => {
                num(keys::SEQ, ArgValue::UInt(op.seq));
                num(keys::ROOT, ArgValue::Int(op.root.into()));
                num(keys::WARPS, ArgValue::UInt(op.warps.into()));
            }
            OpKind::P2p => num(keys::PEER, ArgValue::Int(op.root.into())),
        }
        num(keys::TID, ArgValue::UInt(op.tid.into()));
        if let Some(k) = kernel {
            num(keys::KERNEL_CORRELATION, ArgValue::UInt(k.into()));
        }
        t.push_slice(s);
    }
}
