//! Per-rank view of a trace: its GPU events (with class, stream, launch
//! time and µs rounding applied once) and a correlation index to its host
//! launch calls. Built in one pass over the slices.

use std::collections::HashMap;

use crate::model::{DeviceId, ProcessId, SliceClass, SliceKind, StrId, Trace, TrackKind};

/// No slice / no step.
pub const NONE: u32 = u32::MAX;

/// A multiply-rotate hasher for small integer keys on hot paths (the
/// default SipHash costs more than the work per slice).
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl std::hash::Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// HashMap with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IntHasher>>;

/// Correlation id -> host slice that carries it (the launch call).
#[derive(Clone)]
pub enum CorrIndex {
    /// Indexed by correlation id ([`NONE`] when absent).
    Dense(Vec<u32>),
    /// Correlation id to slice, for sparse ids.
    Sparse(IntMap<u32, u32>),
}

impl CorrIndex {
    fn build(pairs: &[(u32, u32)], sl_kind: &[SliceKind]) -> CorrIndex {
        let max = pairs.iter().map(|&(c, _)| c).max().unwrap_or(0) as usize;
        // Runtime/driver calls win over other host slices with the same id.
        let better = |old: u32, new: u32| {
            let launch =
                |i: u32| matches!(sl_kind[i as usize], SliceKind::Runtime | SliceKind::Driver);
            old == NONE || (!launch(old) && launch(new))
        };
        if max <= pairs.len() * 4 + 1024 {
            let mut v = vec![NONE; max + 1];
            for &(c, i) in pairs {
                if better(v[c as usize], i) {
                    v[c as usize] = i;
                }
            }
            CorrIndex::Dense(v)
        } else {
            let mut m = IntMap::default();
            m.reserve(pairs.len());
            for &(c, i) in pairs {
                let e = m.entry(c).or_insert(NONE);
                if better(*e, i) {
                    *e = i;
                }
            }
            CorrIndex::Sparse(m)
        }
    }

    /// The host slice with correlation `c` (0 = none).
    pub fn get(&self, c: u32) -> Option<u32> {
        if c == 0 {
            return None;
        }
        let v = match self {
            CorrIndex::Dense(v) => v.get(c as usize).copied().unwrap_or(NONE),
            CorrIndex::Sparse(m) => m.get(&c).copied().unwrap_or(NONE),
        };
        (v != NONE).then_some(v)
    }
}

/// One GPU slice (kernel, memcpy, memset) of a rank.
#[derive(Debug, Clone, Copy)]
pub struct Ev {
    /// Start and end, µs-rounded when the rank uses HTA rounding.
    pub s: i64,
    /// See `s`.
    pub e: i64,
    /// Slice id.
    pub id: u32,
    /// Index into `RankCtx::streams`.
    pub stream: u16,
    /// HTA class.
    pub class: SliceClass,
    /// Index into the rank's steps, or `NONE`.
    pub step: u32,
}

/// A (device, stream) pair of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// Model device index, a [`DeviceId`]'s (`u32::MAX` for a track not
    /// on a device).
    pub device: u32,
    /// CUDA stream id (`u32::MAX` for a GPU group track; the track id for a track not on a device).
    pub stream: u32,
}

/// Per-rank view of a trace: its GPU events and the index to their launch calls.
pub struct RankCtx {
    /// The process in the trace.
    pub process: ProcessId,
    /// Rank number.
    pub rank: u32,
    /// The one device this context covers when its process drives several
    /// GPUs (one context per device then); None when the process has one.
    pub device: Option<DeviceId>,
    /// Host-side slices (everything that is not GPU activity), in slice order.
    pub host: Vec<u32>,
    /// GPU events sorted by (rounded) start.
    pub gpu: Vec<Ev>,
    /// The (device, stream) pairs that `Ev::stream` indexes.
    pub streams: Vec<StreamKey>,
    /// Correlation id to host launch call.
    pub corr: CorrIndex,
    /// Times are HTA-rounded (ceil start, floor end, in µs).
    pub rounded: bool,
}

impl RankCtx {
    /// Start of the host call that launched GPU slice `id`, rounded like the GPU times.
    pub fn launch_start(&self, t: &Trace, id: u32) -> Option<i64> {
        let h = self.corr.get(t.slices().correlation()[id as usize])?;
        let s = t.slices().start_ns()[h as usize];
        Some(if self.rounded { ceil_us(s) } else { s })
    }
}

/// `ns` rounded up to a whole microsecond (still in ns).
pub fn ceil_us(ns: i64) -> i64 {
    ns.div_euclid(1000) * 1000 + if ns.rem_euclid(1000) > 0 { 1000 } else { 0 }
}

/// `ns` rounded down to a whole microsecond (still in ns).
pub fn floor_us(ns: i64) -> i64 {
    ns.div_euclid(1000) * 1000
}

/// HTA's class of a GPU slice: the stored class, or derived from its name.
pub fn class_table(t: &Trace) -> impl Fn(usize) -> SliceClass + '_ {
    let mut by_name: Vec<u8> = vec![u8::MAX; t.strings().len()];
    let sl = t.slices();
    for i in 0..sl.len() {
        if sl.kind()[i].is_gpu_activity() && sl.class()[i] == SliceClass::None {
            let n = sl.name()[i].0 as usize;
            if by_name.get(n) == Some(&u8::MAX) {
                by_name[n] = SliceClass::of_gpu_name(sl.kind()[i], t.str(StrId(n as u32))) as u8;
            }
        }
    }
    move |i| match sl.class()[i] {
        SliceClass::None => {
            SliceClass::from_u8(by_name.get(sl.name()[i].0 as usize).copied().unwrap_or(0))
        }
        c => c,
    }
}

/// Whether a process's times came from a µs-resolution source (Kineto),
/// where HTA rounds to whole µs.
pub fn uses_hta_rounding(t: &Trace, process: ProcessId) -> bool {
    let Some(p) = t.processes().get(process.index()) else {
        return false;
    };
    let kineto = p.metadata.iter().any(|(k, v)| {
        let k = k.to_ascii_lowercase();
        (k.contains("source") || k.contains("format") || k.contains("importer"))
            && v.to_ascii_lowercase().contains("kineto")
    });
    kineto || p.clock == crate::model::ClockDomain::Realtime
}

/// Splits the trace into per-process contexts (one pass over the slices).
pub fn build(t: &Trace, rounding: Option<bool>) -> Vec<RankCtx> {
    let np = t.processes().len();
    let sl = t.slices();
    let class_of = class_table(t);
    let track_proc: Vec<u32> = t.tracks().iter().map(|tr| tr.process.0).collect();
    let mut host: Vec<Vec<u32>> = vec![Vec::new(); np];
    let mut gpu_ids: Vec<Vec<u32>> = vec![Vec::new(); np];
    let mut corr_pairs: Vec<Vec<(u32, u32)>> = vec![Vec::new(); np];
    for i in 0..sl.len() {
        let p = track_proc
            .get(sl.track()[i].0 as usize)
            .copied()
            .unwrap_or(u32::MAX) as usize;
        if p >= np {
            continue;
        }
        if sl.kind()[i].is_gpu_activity() {
            gpu_ids[p].push(i as u32);
        } else {
            host[p].push(i as u32);
            if sl.correlation()[i] != 0 {
                corr_pairs[p].push((sl.correlation()[i], i as u32));
            }
        }
    }
    let mut out = Vec::with_capacity(np);
    for p in 0..np {
        let rounded = rounding.unwrap_or_else(|| uses_hta_rounding(t, ProcessId::from_index(p)));
        let mut streams: Vec<StreamKey> = Vec::new();
        let mut stream_of_track: Vec<u16> = vec![u16::MAX; t.tracks().len()];
        let mut gpu: Vec<Ev> = Vec::with_capacity(gpu_ids[p].len());
        for &id in &gpu_ids[p] {
            let i = id as usize;
            let tr = sl.track()[i].0;
            let mut stream = stream_of_track[tr as usize];
            if stream == u16::MAX {
                let key = match t.tracks()[tr as usize].kind {
                    TrackKind::Stream { device, stream } => StreamKey {
                        device: device.0,
                        stream,
                    },
                    TrackKind::Gpu { device } => StreamKey {
                        device: device.0,
                        stream: u32::MAX,
                    },
                    _ => StreamKey {
                        device: u32::MAX,
                        stream: tr,
                    },
                };
                stream = match streams.iter().position(|k| *k == key) {
                    Some(x) => x as u16,
                    None => {
                        streams.push(key);
                        (streams.len() - 1).min(u16::MAX as usize - 1) as u16
                    }
                };
                stream_of_track[tr as usize] = stream;
            }
            let (mut s, mut e) = (
                sl.start_ns()[i],
                sl.start_ns()[i].saturating_add(sl.dur_ns()[i]),
            );
            if rounded {
                s = ceil_us(s);
                e = floor_us(e).max(s);
            }
            gpu.push(Ev {
                s,
                e,
                id,
                stream,
                class: class_of(i),
                step: NONE,
            });
        }
        gpu.sort_by_key(|e| (e.s, e.id));
        let corr = CorrIndex::build(&corr_pairs[p], sl.kind());
        let rank = t.processes()[p].rank.unwrap_or(p as u32);
        let mut devices: Vec<u32> = streams
            .iter()
            .map(|k| k.device)
            .filter(|&d| d != u32::MAX)
            .collect();
        devices.sort_unstable();
        devices.dedup();
        let host = std::mem::take(&mut host[p]);
        if devices.len() <= 1 {
            out.push(RankCtx {
                process: ProcessId::from_index(p),
                rank,
                device: None,
                host,
                gpu,
                streams,
                corr,
                rounded,
            });
            continue;
        }
        // One process driving several GPUs (a thread per GPU, or one thread
        // for all): each GPU is a rank of its own, numbered from the
        // process's rank, sharing the host side.
        for (k, &dev) in devices.iter().enumerate() {
            let mut remap = vec![u16::MAX; streams.len()];
            let mut dev_streams = Vec::new();
            for (i, key) in streams.iter().enumerate() {
                if key.device == dev {
                    remap[i] = dev_streams.len() as u16;
                    dev_streams.push(*key);
                }
            }
            let dev_gpu: Vec<Ev> = gpu
                .iter()
                .filter(|e| remap.get(e.stream as usize).is_some_and(|&r| r != u16::MAX))
                .map(|e| Ev {
                    stream: remap[e.stream as usize],
                    ..*e
                })
                .collect();
            out.push(RankCtx {
                process: ProcessId::from_index(p),
                // R·n + k: distinct across processes that each drive n GPUs.
                rank: rank
                    .saturating_mul(devices.len() as u32)
                    .saturating_add(k as u32),
                device: Some(DeviceId(dev)),
                host: host.clone(),
                gpu: dev_gpu,
                streams: dev_streams,
                corr: corr.clone(),
                rounded,
            });
        }
    }
    out
}

/// The rank a process states without RANK: LOCAL_RANK, else an NCCL rank
/// in its metadata ("nccl_rank", "NCCL rank", ...).
fn stated_rank(p: &crate::model::Process) -> Option<u32> {
    p.rank.or(p.local_rank).or_else(|| {
        p.metadata.iter().find_map(|(k, v)| {
            let k = k.to_ascii_lowercase();
            (k.contains("nccl") && k.contains("rank") && !k.contains("nranks"))
                .then(|| v.trim().parse::<u32>().ok())
                .flatten()
        })
    })
}

/// What a rank context's number comes from (see [`number`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RankClaim {
    /// The rank its process states (RANK, LOCAL_RANK, NCCL rank).
    pub stated: Option<u32>,
    /// For one GPU of a process that drives several: (the process's RANK,
    /// GPUs of the process, this GPU's index among them).
    pub multi: Option<(Option<u32>, u32, u32)>,
    /// Index of its process in the trace.
    pub process: u32,
}

/// The claims of the contexts `build` made of `t` (a process's GPUs in a row).
pub fn claims(t: &Trace, ctxs: &[RankCtx]) -> Vec<RankClaim> {
    ctxs.iter()
        .enumerate()
        .map(|(k, c)| {
            let p = t.processes().get(c.process.index());
            let multi = c.device.map(|_| {
                let same = |x: &RankCtx| x.process == c.process && x.device.is_some();
                let first = (0..=k)
                    .rev()
                    .take_while(|&i| same(&ctxs[i]))
                    .last()
                    .unwrap_or(k);
                let n = ctxs[first..].iter().take_while(|x| same(x)).count() as u32;
                (p.and_then(|p| p.rank), n, (k - first) as u32)
            });
            RankClaim {
                stated: p.and_then(stated_rank),
                multi,
                process: c.process.0,
            }
        })
        .collect()
}

/// Numbers the ranks: RANK, else LOCAL_RANK, else the NCCL rank, else the
/// smallest number no other rank uses, so each rank has one row. A GPU of
/// a process that drives n of them is R·n + k (R: the process's RANK, else
/// its index).
pub fn number(claims: &[RankClaim]) -> Vec<u32> {
    let mut out = vec![0u32; claims.len()];
    let mut used: Vec<u32> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    for (k, c) in claims.iter().enumerate() {
        if let Some((rank, n, i)) = c.multi {
            out[k] = rank
                .unwrap_or(c.process)
                .saturating_mul(n)
                .saturating_add(i);
            used.push(out[k]);
            continue;
        }
        match c.stated {
            Some(r) if !used.contains(&r) => {
                out[k] = r;
                used.push(r);
            }
            _ => pending.push(k),
        }
    }
    let mut next = 0u32;
    for k in pending {
        while used.contains(&next) {
            next += 1;
        }
        out[k] = next;
        used.push(next);
    }
    out
}

/// [`number`] applied to the contexts of `t`.
pub fn number_ranks(t: &Trace, ctxs: &mut [RankCtx]) {
    let claims = claims(t, ctxs);
    for (c, r) in ctxs.iter_mut().zip(number(&claims)) {
        c.rank = r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hta_rounding_in_integer_math() {
        assert_eq!(ceil_us(1_000), 1_000);
        assert_eq!(ceil_us(1_001), 2_000);
        assert_eq!(floor_us(1_999), 1_000);
        assert_eq!(ceil_us(-1), 0);
        assert_eq!(floor_us(-1), -1_000);
    }
}
