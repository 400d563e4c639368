//! Per-rank view of a trace: its GPU events (with class, stream, launch
//! time and µs rounding applied once) and a correlation index to its host
//! launch calls. Built in one pass over the slices.

use std::collections::HashMap;

pub use super::stream_key::StreamKey;
use crate::model::{DeviceId, ProcessId, SliceClass, SliceKind, StrId, Trace, TrackId};

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
    /// Indexed by correlation id less `base` ([`NONE`] when absent).
    Dense { base: u32, slices: Vec<u32> },
    /// Correlation id to slice, for sparse ids.
    Sparse(IntMap<u32, u32>),
}

impl CorrIndex {
    /// The index of the host slices `host` that carry a correlation id.
    fn build(host: &[u32], sl: &crate::model::Slices) -> CorrIndex {
        let corr = &sl.correlation();
        let (mut min, mut max, mut n) = (u32::MAX, 0u32, 0usize);
        for &i in host {
            let c = corr[i as usize];
            if c != 0 {
                min = min.min(c);
                max = max.max(c);
                n += 1;
            }
        }
        let pairs = host
            .iter()
            .map(|&i| (corr[i as usize], i))
            .filter(|&(c, _)| c != 0);
        // Runtime/driver calls win over other host slices with the same id.
        let better = |old: u32, new: u32| {
            let launch = |i: u32| {
                matches!(
                    sl.kind()[i as usize],
                    SliceKind::Runtime | SliceKind::Driver
                )
            };
            old == NONE || (!launch(old) && launch(new))
        };
        // A table of the ids' range while it costs at most ~32 bytes per
        // id (Kineto's ids start high and skip those of other threads'
        // calls); a map beyond.
        let base = min.min(max);
        if ((max - base) as usize) <= n * 8 + 1024 {
            let mut v = vec![NONE; (max - base) as usize + 1];
            for (c, i) in pairs {
                let k = (c - base) as usize;
                if better(v[k], i) {
                    v[k] = i;
                }
            }
            CorrIndex::Dense { base, slices: v }
        } else {
            let mut m = IntMap::default();
            m.reserve(n);
            for (c, i) in pairs {
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
            CorrIndex::Dense { base, slices } => c
                .checked_sub(*base)
                .and_then(|k| slices.get(k as usize))
                .copied()
                .unwrap_or(NONE),
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

impl Ev {
    /// Its slice's id.
    #[inline]
    pub fn slice(&self) -> crate::model::SliceId {
        crate::model::SliceId::from_index(self.id as usize)
    }
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
    floor_us(ns).saturating_add(if ns.rem_euclid(1000) > 0 { 1000 } else { 0 })
}

/// `ns` rounded down to a whole microsecond (still in ns).
pub fn floor_us(ns: i64) -> i64 {
    ns.saturating_sub(ns.rem_euclid(1000))
}

/// HTA's class of GPU slices stored without one, per name (string id).
pub struct ClassTable(Vec<u8>);

impl ClassTable {
    /// The classes derived from the names of `t`'s unclassified GPU slices.
    pub fn new(t: &Trace) -> Self {
        let mut by_name: Vec<u8> = vec![u8::MAX; t.strings().len()];
        let sl = t.slices();
        for i in 0..sl.len() {
            if sl.kind()[i].is_gpu_activity() && sl.class()[i] == SliceClass::None {
                let n = sl.name()[i].index();
                if by_name.get(n) == Some(&u8::MAX) {
                    by_name[n] =
                        SliceClass::of_gpu_name(sl.kind()[i], t.str(StrId::from_index(n))) as u8;
                }
            }
        }
        ClassTable(by_name)
    }

    /// HTA's class of slice `i` of `t`: the stored class, or derived from its name.
    pub fn of(&self, t: &Trace, i: usize) -> SliceClass {
        let sl = t.slices();
        match sl.class()[i] {
            SliceClass::None => {
                SliceClass::from_u8(self.0.get(sl.name()[i].index()).copied().unwrap_or(0))
            }
            c => c,
        }
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
    let classes = ClassTable::new(t);
    plan(t, rounding)
        .into_iter()
        .map(|p| p.fill(t, &classes))
        .collect()
}

/// A rank context whose GPU events are not gathered yet: its slice ids
/// only (4 bytes a GPU slice instead of an [`Ev`]'s 32), so that the
/// contexts of every rank can be numbered and split before any is
/// analyzed, and each rank's events exist only while it is analyzed.
pub struct PlannedRank {
    /// The context; `gpu` is empty until [`PlannedRank::fill`].
    pub ctx: RankCtx,
    /// Its GPU slice ids, in slice order.
    ids: Vec<u32>,
    /// (track, index into `ctx.streams`) of the tracks of `ids`.
    track_streams: Vec<(u32, u16)>,
}

impl PlannedRank {
    /// The context with its GPU events, sorted by (rounded) start, and its
    /// correlation index.
    pub fn fill(self, t: &Trace, classes: &ClassTable) -> RankCtx {
        let PlannedRank {
            mut ctx,
            ids,
            track_streams,
        } = self;
        let sl = t.slices();
        let mut stream_of_track = vec![u16::MAX; t.tracks().len()];
        for &(tr, s) in &track_streams {
            stream_of_track[tr as usize] = s;
        }
        let mut gpu: Vec<Ev> = Vec::with_capacity(ids.len());
        for &id in &ids {
            let i = id as usize;
            let (mut s, mut e) = (
                sl.start_ns()[i],
                sl.start_ns()[i].saturating_add(sl.dur_ns()[i]),
            );
            if ctx.rounded {
                s = ceil_us(s);
                e = floor_us(e).max(s);
            }
            gpu.push(Ev {
                s,
                e,
                id,
                stream: stream_of_track[sl.track()[i].index()],
                class: classes.of(t, i),
                step: NONE,
            });
        }
        drop(ids);
        // Ids come track by track, each track in start order: the stable
        // sort merges those runs (keys are distinct, so the order is the
        // same as any sort's).
        gpu.sort_by_key(|e| (e.s, e.id));
        ctx.gpu = gpu;
        ctx.corr = CorrIndex::build(&ctx.host, sl);
        ctx
    }
}

/// A rank context, with its GPU events gathered or only planned.
pub trait RankLike: AsRef<RankCtx> + AsMut<RankCtx> {
    /// Its number of GPU events.
    fn gpu_events(&self) -> usize;
}

impl RankLike for RankCtx {
    fn gpu_events(&self) -> usize {
        self.gpu.len()
    }
}

impl RankLike for PlannedRank {
    fn gpu_events(&self) -> usize {
        self.ids.len()
    }
}

impl AsRef<RankCtx> for RankCtx {
    fn as_ref(&self) -> &RankCtx {
        self
    }
}

impl AsMut<RankCtx> for RankCtx {
    fn as_mut(&mut self) -> &mut RankCtx {
        self
    }
}

impl AsRef<RankCtx> for PlannedRank {
    fn as_ref(&self) -> &RankCtx {
        &self.ctx
    }
}

impl AsMut<RankCtx> for PlannedRank {
    fn as_mut(&mut self) -> &mut RankCtx {
        &mut self.ctx
    }
}

/// The contexts [`build`] makes, planned (one pass over the slices): each
/// with its host slices and streams, its GPU events and correlation index
/// left to [`PlannedRank::fill`].
pub fn plan(t: &Trace, rounding: Option<bool>) -> Vec<PlannedRank> {
    let np = t.processes().len();
    let sl = t.slices();
    let track_proc: Vec<u32> = t.tracks().iter().map(|tr| tr.process.get()).collect();
    let process_of = |i: usize| {
        track_proc
            .get(sl.track()[i].index())
            .copied()
            .unwrap_or(u32::MAX) as usize
    };
    // Counted first, so that each list is allocated once at its size (no
    // doubling, no freed smaller copies left in the allocator).
    let mut counts = vec![(0usize, 0usize); np];
    for i in 0..sl.len() {
        if let Some(c) = counts.get_mut(process_of(i)) {
            if sl.kind()[i].is_gpu_activity() {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
    }
    let mut gpu_ids: Vec<Vec<u32>> = counts.iter().map(|c| Vec::with_capacity(c.0)).collect();
    let mut host: Vec<Vec<u32>> = counts.iter().map(|c| Vec::with_capacity(c.1)).collect();
    for i in 0..sl.len() {
        let p = process_of(i);
        if p >= np {
            continue;
        }
        if sl.kind()[i].is_gpu_activity() {
            gpu_ids[p].push(i as u32);
        } else {
            host[p].push(i as u32);
        }
    }
    let mut out = Vec::with_capacity(np);
    let mut stream_of_track: Vec<u16> = vec![u16::MAX; t.tracks().len()];
    for p in 0..np {
        let rounded = rounding.unwrap_or_else(|| uses_hta_rounding(t, ProcessId::from_index(p)));
        let mut streams: Vec<StreamKey> = Vec::new();
        let mut track_streams: Vec<(u32, u16)> = Vec::new();
        let ids = std::mem::take(&mut gpu_ids[p]);
        for &id in &ids {
            let tr = sl.track()[id as usize].get();
            if stream_of_track[tr as usize] != u16::MAX {
                continue;
            }
            let key = StreamKey::of_track(t, TrackId::from_index(tr as usize));
            let stream = match streams.iter().position(|k| *k == key) {
                Some(x) => x as u16,
                None => {
                    streams.push(key);
                    (streams.len() - 1).min(u16::MAX as usize - 1) as u16
                }
            };
            stream_of_track[tr as usize] = stream;
            track_streams.push((tr, stream));
        }
        for &(tr, _) in &track_streams {
            stream_of_track[tr as usize] = u16::MAX;
        }
        let host = std::mem::take(&mut host[p]);
        // Built by `fill`, with the events.
        let corr = CorrIndex::Dense {
            base: 0,
            slices: Vec::new(),
        };
        let rank = t.processes()[p].rank.unwrap_or(p as u32);
        let mut devices: Vec<DeviceId> = streams.iter().filter_map(|k| k.device()).collect();
        devices.sort_unstable();
        devices.dedup();
        if devices.len() <= 1 {
            out.push(PlannedRank {
                ctx: RankCtx {
                    process: ProcessId::from_index(p),
                    rank,
                    device: None,
                    host,
                    gpu: Vec::new(),
                    streams,
                    corr,
                    rounded,
                },
                ids,
                track_streams,
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
                if key.device() == Some(dev) {
                    remap[i] = dev_streams.len() as u16;
                    dev_streams.push(*key);
                }
            }
            let dev_tracks: Vec<(u32, u16)> = track_streams
                .iter()
                .filter(|&&(_, s)| remap[s as usize] != u16::MAX)
                .map(|&(tr, s)| (tr, remap[s as usize]))
                .collect();
            let dev_ids: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|&id| {
                    let tr = sl.track()[id as usize].get();
                    dev_tracks.iter().any(|&(x, _)| x == tr)
                })
                .collect();
            out.push(PlannedRank {
                ctx: RankCtx {
                    process: ProcessId::from_index(p),
                    // R·n + k: distinct across processes that each drive n GPUs.
                    rank: rank
                        .saturating_mul(devices.len() as u32)
                        .saturating_add(k as u32),
                    device: Some(dev),
                    host: host.clone(),
                    gpu: Vec::new(),
                    streams: dev_streams,
                    corr: corr.clone(),
                    rounded,
                },
                ids: dev_ids,
                track_streams: dev_tracks,
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
    /// Its process in the trace.
    pub process: ProcessId,
}

/// The claims of the contexts `build` made of `t` (a process's GPUs in a row).
pub fn claims<C: AsRef<RankCtx>>(t: &Trace, ctxs: &[C]) -> Vec<RankClaim> {
    ctxs.iter()
        .map(AsRef::as_ref)
        .enumerate()
        .map(|(k, c)| {
            let p = t.processes().get(c.process.index());
            let multi = c.device.map(|_| {
                let same = |x: &C| {
                    let x = x.as_ref();
                    x.process == c.process && x.device.is_some()
                };
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
                process: c.process,
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
                .unwrap_or(c.process.get())
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
pub fn number_ranks<C: AsRef<RankCtx> + AsMut<RankCtx>>(t: &Trace, ctxs: &mut [C]) {
    let claims = claims(t, ctxs);
    for (c, r) in ctxs.iter_mut().zip(number(&claims)) {
        c.as_mut().rank = r;
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

    #[test]
    fn correlation_index_finds_every_launch_dense_or_sparse() {
        use crate::model::{NewSlice, Process, StrId, TraceBuilder, TrackKind};
        use crate::synth::XorShift;
        let mut rng = XorShift(7);
        // Ids packed from 0, packed from far up, spread thin, and none.
        for (first, step, count) in [(1, 1, 500), (900_000, 3, 500), (10, 50_000, 200), (1, 1, 0)] {
            let mut b = TraceBuilder::new();
            let p = b.add_process(Process::default());
            let tr = b.add_track(p, None, TrackKind::Thread { tid: 1 }, "t");
            let mut want = std::collections::HashMap::new();
            for k in 0..count {
                let c = first + step * k as u32;
                // Some ids twice: the runtime call wins over another host slice.
                for kind in [SliceKind::Other, SliceKind::Runtime] {
                    if kind == SliceKind::Other && rng.below(4) != 0 {
                        continue;
                    }
                    let mut s = NewSlice::new(tr, kind, StrId::EMPTY, 10 * k as i64, 1);
                    s.correlation = c;
                    let id = b.push_slice(s);
                    if kind == SliceKind::Runtime {
                        want.insert(c, id);
                    }
                }
            }
            let t = b.finish();
            let sl = t.slices();
            let host: Vec<u32> = (0..sl.len() as u32).collect();
            let idx = CorrIndex::build(&host, sl);
            if step == 1 {
                assert!(matches!(idx, CorrIndex::Dense { .. }), "ids {first}..");
            }
            for &c in want.keys() {
                let i = idx.get(c).expect("indexed") as usize;
                assert_eq!(sl.correlation()[i], c);
                assert_eq!(sl.kind()[i], SliceKind::Runtime);
            }
            for c in [
                0,
                first.wrapping_sub(1),
                first + step * count as u32 + 1,
                u32::MAX,
            ] {
                assert_eq!(idx.get(c), None, "id {c}");
            }
        }
    }
}
