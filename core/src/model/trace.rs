//! The sealed [`Trace`] and its column tables, read through accessors.

use super::{
    Allocations, ArgValue, CopyInfo, Device, DeviceId, Flow, LaunchConfig, Process, ProcessId,
    SliceClass, SliceId, SliceKind, StrId, StringPool, TraceBuilder, Track, TrackId, TrackKind,
    NO_ARGS, NO_PAYLOAD,
};
use crate::diagnostic::Diagnostic;
use rustc_hash::FxHashMap as HashMap;

/// Slices, column by column. Index `i` of every column is slice
/// `SliceId(i)`. In a [`Trace`], slices are sorted by (track, start,
/// longest first, kind, name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slices {
    pub(super) start_ns: Vec<i64>,
    pub(super) dur_ns: Vec<i64>,
    pub(super) track: Vec<TrackId>,
    pub(super) name: Vec<StrId>,
    pub(super) kind: Vec<SliceKind>,
    pub(super) class: Vec<SliceClass>,
    pub(super) correlation: Vec<u32>,
    pub(super) payload: Vec<u32>,
    pub(super) args: Vec<u32>,
}

impl Slices {
    /// Number of slices.
    #[inline]
    pub fn len(&self) -> usize {
        self.start_ns.len()
    }
    /// True when there are no slices.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start_ns.is_empty()
    }
    /// Every slice id, in order.
    pub fn ids(&self) -> impl Iterator<Item = SliceId> + use<> {
        (0..self.len() as u32).map(SliceId)
    }
    /// Start time (ns) of each slice.
    #[inline]
    pub fn start_ns(&self) -> &[i64] {
        &self.start_ns
    }
    /// Duration (ns) of each slice (never negative).
    #[inline]
    pub fn dur_ns(&self) -> &[i64] {
        &self.dur_ns
    }
    /// Track of each slice.
    #[inline]
    pub fn track(&self) -> &[TrackId] {
        &self.track
    }
    /// Name of each slice.
    #[inline]
    pub fn name(&self) -> &[StrId] {
        &self.name
    }
    /// What each slice is.
    #[inline]
    pub fn kind(&self) -> &[SliceKind] {
        &self.kind
    }
    /// HTA class of each slice (GPU slices).
    #[inline]
    pub fn class(&self) -> &[SliceClass] {
        &self.class
    }
    /// CUDA correlation id of each slice (0 when none).
    #[inline]
    pub fn correlation(&self) -> &[u32] {
        &self.correlation
    }
    /// Kernel: index into [`Trace::launch_configs`]; memcpy/memset: into
    /// [`Trace::copies`]; otherwise [`NO_PAYLOAD`].
    #[inline]
    pub fn payload(&self) -> &[u32] {
        &self.payload
    }
    /// Index of each slice's argument set (read with [`Trace::args_of`]),
    /// or [`NO_ARGS`].
    #[inline]
    pub fn args(&self) -> &[u32] {
        &self.args
    }
    /// End time (ns) of slice `id`: start + duration, saturating.
    #[inline]
    pub fn end_ns(&self, id: SliceId) -> i64 {
        let i = id.index();
        self.start_ns[i].saturating_add(self.dur_ns[i])
    }
    /// Bytes of column data per slice.
    pub const fn slice_column_bytes() -> usize {
        std::mem::size_of::<i64>() * 2
            + std::mem::size_of::<TrackId>()
            + std::mem::size_of::<StrId>()
            + std::mem::size_of::<SliceKind>()
            + std::mem::size_of::<SliceClass>()
            + std::mem::size_of::<u32>() * 3
    }
    /// Heap bytes the columns hold (capacity).
    pub fn heap_bytes(&self) -> usize {
        self.start_ns.capacity() * 8
            + self.dur_ns.capacity() * 8
            + self.track.capacity() * 4
            + self.name.capacity() * 4
            + self.kind.capacity()
            + self.class.capacity()
            + (self.correlation.capacity() + self.payload.capacity() + self.args.capacity()) * 4
    }
    pub(super) fn reserve(&mut self, n: usize) {
        self.start_ns.reserve(n);
        self.dur_ns.reserve(n);
        self.track.reserve(n);
        self.name.reserve(n);
        self.kind.reserve(n);
        self.class.reserve(n);
        self.correlation.reserve(n);
        self.payload.reserve(n);
        self.args.reserve(n);
    }
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push(
        &mut self,
        track: TrackId,
        start_ns: i64,
        dur_ns: i64,
        name: StrId,
        kind: SliceKind,
        class: SliceClass,
        correlation: u32,
        payload: u32,
        args: u32,
    ) -> SliceId {
        self.start_ns.push(start_ns);
        self.dur_ns.push(dur_ns.max(0));
        self.track.push(track);
        self.name.push(name);
        self.kind.push(kind);
        self.class.push(class);
        self.correlation.push(correlation);
        self.payload.push(payload);
        self.args.push(args);
        SliceId((self.len() - 1) as u32)
    }
    pub(super) fn clear(&mut self) {
        self.start_ns.clear();
        self.dur_ns.clear();
        self.track.clear();
        self.name.clear();
        self.kind.clear();
        self.class.clear();
        self.correlation.clear();
        self.payload.clear();
        self.args.clear();
    }
    fn key(&self, i: usize) -> (u32, i64, std::cmp::Reverse<i64>, u8, u32) {
        (
            self.track[i].0,
            self.start_ns[i],
            std::cmp::Reverse(self.dur_ns[i]),
            self.kind[i] as u8,
            self.name[i].0,
        )
    }
    /// Whether the slices are in the canonical order.
    pub(super) fn is_sorted(&self) -> bool {
        (1..self.len()).all(|i| self.key(i - 1) <= self.key(i))
    }
    /// Slice indices in the canonical order: a stable counting sort by
    /// track, then each track's slices (in their order here) sorted by the
    /// rest of the key where they are not already in it. The same order as
    /// a stable sort by the whole key, in about linear time when each
    /// track's slices are nearly in order.
    fn sorted_order(&self) -> Vec<u32> {
        let tracks = self.track.iter().map(|t| t.index() + 1).max().unwrap_or(0);
        let mut bounds = vec![0usize; tracks + 1];
        for t in &self.track {
            bounds[t.index() + 1] += 1;
        }
        for i in 1..bounds.len() {
            bounds[i] += bounds[i - 1];
        }
        let mut next = bounds.clone();
        let mut order = vec![0u32; self.len()];
        for (i, t) in self.track.iter().enumerate() {
            let at = &mut next[t.index()];
            order[*at] = i as u32;
            *at += 1;
        }
        // The start decides almost every comparison: the other columns are
        // read only on a tie.
        let cmp = |&a: &u32, &b: &u32| {
            let (a, b) = (a as usize, b as usize);
            (self.start_ns[a].cmp(&self.start_ns[b]))
                .then_with(|| self.dur_ns[b].cmp(&self.dur_ns[a]))
                .then_with(|| (self.kind[a] as u8).cmp(&(self.kind[b] as u8)))
                .then_with(|| self.name[a].0.cmp(&self.name[b].0))
        };
        for w in bounds.windows(2) {
            let track = &mut order[w[0]..w[1]];
            if !track.is_sorted_by(|a, b| cmp(a, b).is_le()) {
                track.sort_by(cmp);
            }
        }
        order
    }
}

/// Free-form argument sets, one after the other in one column (one
/// allocation for all, not one per set): set `i` is
/// `values[ends[i - 1]..ends[i]]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ArgSets {
    values: Vec<(StrId, ArgValue)>,
    ends: Vec<usize>,
}

impl ArgSets {
    /// Number of sets.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }
    /// Set `i` (empty when out of range).
    pub(super) fn get(&self, i: usize) -> &[(StrId, ArgValue)] {
        let Some(&end) = self.ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.values[start..end]
    }
    /// Appends a set; returns its index.
    pub(super) fn push(&mut self, set: impl IntoIterator<Item = (StrId, ArgValue)>) -> usize {
        self.values.extend(set);
        self.ends.push(self.values.len());
        self.ends.len() - 1
    }
    pub(super) fn clear(&mut self) {
        self.values.clear();
        self.ends.clear();
    }
}

/// Counter samples, column by column.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub(super) track: Vec<TrackId>,
    pub(super) ts_ns: Vec<i64>,
    pub(super) value: Vec<f64>,
}

impl Counters {
    /// Number of samples.
    #[inline]
    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }
    /// True when there are no samples.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }
    /// Counter track of each sample.
    #[inline]
    pub fn track(&self) -> &[TrackId] {
        &self.track
    }
    /// Time (ns) of each sample.
    #[inline]
    pub fn ts_ns(&self) -> &[i64] {
        &self.ts_ns
    }
    /// Value of each sample.
    #[inline]
    pub fn value(&self) -> &[f64] {
        &self.value
    }
}

/// A string pool compared by content (ids and strings), for round-trip tests.
#[derive(Debug, Clone, Default)]
pub(super) struct StringPoolEq(pub(super) StringPool);

impl PartialEq for StringPoolEq {
    fn eq(&self, other: &Self) -> bool {
        self.0.strings == other.0.strings
    }
}

/// A whole trace: one or more processes (ranks). Made by a
/// [`TraceBuilder`]; its tables are read through accessors, and its slices
/// are sorted by (track, start, longest first, kind, name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub(super) strings: StringPoolEq,
    pub(super) processes: Vec<Process>,
    pub(super) devices: Vec<Device>,
    pub(super) tracks: Vec<Track>,
    pub(super) slices: Slices,
    pub(super) launch_configs: Vec<LaunchConfig>,
    pub(super) copies: Vec<CopyInfo>,
    pub(super) arg_sets: ArgSets,
    pub(super) flows: Vec<Flow>,
    pub(super) counters: Counters,
    pub(super) allocations: Allocations,
    pub(super) diagnostics: Vec<Diagnostic>,
}

impl Trace {
    /// Interned strings.
    #[inline]
    pub fn strings(&self) -> &StringPool {
        &self.strings.0
    }
    /// The string for `id`.
    #[inline]
    pub fn str(&self, id: StrId) -> &str {
        self.strings.0.get(id)
    }
    /// Processes (ranks), indexed by [`ProcessId`].
    #[inline]
    pub fn processes(&self) -> &[Process] {
        &self.processes
    }
    /// Process `id`.
    #[inline]
    pub fn process(&self, id: ProcessId) -> &Process {
        &self.processes[id.index()]
    }
    /// Every process id, in order.
    pub fn process_ids(&self) -> impl Iterator<Item = ProcessId> + use<> {
        (0..self.processes.len() as u32).map(ProcessId)
    }
    /// GPUs of all processes, indexed by [`DeviceId`].
    #[inline]
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }
    /// Device `id`.
    #[inline]
    pub fn device(&self, id: DeviceId) -> &Device {
        &self.devices[id.index()]
    }
    /// Tracks, indexed by [`TrackId`].
    #[inline]
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
    }
    /// Every track id, in order.
    pub fn track_ids(&self) -> impl Iterator<Item = TrackId> + use<> {
        (0..self.tracks.len() as u32).map(TrackId)
    }
    /// The track `id`.
    #[inline]
    pub fn track(&self, id: TrackId) -> &Track {
        &self.tracks[id.index()]
    }
    /// Slices, column by column.
    #[inline]
    pub fn slices(&self) -> &Slices {
        &self.slices
    }
    /// Distinct kernel launch configurations (kernel slices' payload).
    #[inline]
    pub fn launch_configs(&self) -> &[LaunchConfig] {
        &self.launch_configs
    }
    /// Distinct copy descriptions (memcpy/memset slices' payload).
    #[inline]
    pub fn copies(&self) -> &[CopyInfo] {
        &self.copies
    }
    /// Number of free-form argument sets (what slices' `args` index).
    #[inline]
    pub fn arg_set_count(&self) -> usize {
        self.arg_sets.len()
    }
    /// Flow arrows.
    #[inline]
    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }
    /// Counter samples.
    #[inline]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// GPU memory blocks allocated and freed (allocator events), in the
    /// order they were added.
    #[inline]
    pub fn allocations(&self) -> &Allocations {
        &self.allocations
    }
    /// Problems met while loading (truncation, skipped events, ...).
    #[inline]
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
    /// Adds problems found about this trace (after loading).
    pub fn add_diagnostics(&mut self, found: impl IntoIterator<Item = Diagnostic>) {
        self.diagnostics.extend(found);
    }

    /// Takes the diagnostics out of the trace (leaving none).
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.diagnostics)
    }

    /// A builder holding this trace, to add to it or change it; its slice
    /// ids are this trace's until slices are added or moved.
    pub fn into_builder(self) -> TraceBuilder {
        TraceBuilder::from_trace(self)
    }

    /// Finds a track of `process` with this kind, if any.
    pub fn find_track(&self, process: ProcessId, kind: TrackKind) -> Option<TrackId> {
        self.tracks
            .iter()
            .position(|t| t.process == process && t.kind == kind)
            .map(TrackId::from_index)
    }

    /// Name of track `id`.
    pub fn track_name(&self, id: TrackId) -> &str {
        self.str(self.track(id).name)
    }

    /// The device a track belongs to (stream, GPU group or device counter).
    pub fn track_device(&self, id: TrackId) -> Option<DeviceId> {
        match self.track(id).kind {
            TrackKind::Stream { device, .. } | TrackKind::Gpu { device } => Some(device),
            TrackKind::Counter { device } => device,
            _ => None,
        }
    }

    /// Launch configuration of kernel slice `id`.
    pub fn launch_of(&self, id: SliceId) -> Option<&LaunchConfig> {
        let i = id.index();
        if self.slices.kind[i] != SliceKind::Kernel {
            return None;
        }
        self.launch_configs.get(self.slices.payload[i] as usize)
    }

    /// Copy description of memcpy/memset slice `id`.
    pub fn copy_of(&self, id: SliceId) -> Option<&CopyInfo> {
        let i = id.index();
        if !matches!(self.slices.kind[i], SliceKind::Memcpy | SliceKind::Memset) {
            return None;
        }
        self.copies.get(self.slices.payload[i] as usize)
    }

    /// Free-form arguments of slice `id`.
    pub fn args_of(&self, id: SliceId) -> &[(StrId, ArgValue)] {
        match self.slices.args[id.index()] {
            NO_ARGS => &[],
            a => self.arg_sets.get(a as usize),
        }
    }

    /// Argument `key` of slice `id`.
    pub fn arg(&self, id: SliceId, key: &str) -> Option<&ArgValue> {
        let k = self.strings.0.lookup(key)?;
        self.args_of(id)
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v)
    }

    /// Argument `key` of slice `id` as text.
    pub fn arg_string(&self, id: SliceId, key: &str) -> Option<String> {
        self.arg(id, key).map(|v| self.arg_value_string(v))
    }

    /// An argument value as text.
    pub fn arg_value_string(&self, v: &ArgValue) -> String {
        match v {
            ArgValue::Int(x) => x.to_string(),
            ArgValue::UInt(x) => x.to_string(),
            ArgValue::Double(x) => x.to_string(),
            ArgValue::Bool(x) => x.to_string(),
            ArgValue::Str(s) => self.str(*s).to_string(),
        }
    }

    /// Process of slice `id`.
    #[inline]
    pub fn slice_process(&self, id: SliceId) -> ProcessId {
        self.track(self.slices.track[id.index()]).process
    }

    /// Count of slices per kind.
    pub fn count_by_kind(&self) -> Vec<(SliceKind, usize)> {
        let mut counts = [0usize; 10];
        for k in &self.slices.kind {
            counts[*k as usize] += 1;
        }
        SliceKind::ALL
            .iter()
            .map(|&k| (k, counts[k as usize]))
            .filter(|(_, c)| *c > 0)
            .collect()
    }

    /// (first start, last end) over all slices, if any.
    pub fn time_span(&self) -> Option<(i64, i64)> {
        let sl = &self.slices;
        if sl.is_empty() {
            return None;
        }
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for i in 0..sl.len() {
            lo = lo.min(sl.start_ns[i]);
            hi = hi.max(sl.start_ns[i].saturating_add(sl.dur_ns[i]));
        }
        Some((lo, hi))
    }

    /// Devices of `process`.
    pub fn devices_of(&self, process: ProcessId) -> impl Iterator<Item = DeviceId> + '_ {
        self.devices
            .iter()
            .enumerate()
            .filter(move |(_, d)| d.process == process)
            .map(|(i, _)| DeviceId::from_index(i))
    }

    /// Total dropped records over all processes.
    pub fn dropped_records(&self) -> u64 {
        self.processes.iter().map(|p| p.dropped_records).sum()
    }

    /// Moves every timestamp by `dt_ns` (saturating): slices, counters,
    /// allocations and capture bounds. Used to lay one run next to another. The order
    /// stays canonical (re-sorted if saturation made ties).
    pub fn shift_time(&mut self, dt_ns: i64) {
        let mut saturated = false;
        for s in &mut self.slices.start_ns {
            let (v, o) = s.overflowing_add(dt_ns);
            saturated |= o;
            *s = if o { s.saturating_add(dt_ns) } else { v };
        }
        for t in (self.counters.ts_ns.iter_mut()).chain(&mut self.allocations.ts_ns) {
            *t = t.saturating_add(dt_ns);
        }
        for p in &mut self.processes {
            for b in [&mut p.capture_start_ns, &mut p.capture_end_ns]
                .into_iter()
                .flatten()
            {
                *b = b.saturating_add(dt_ns);
            }
        }
        if saturated {
            self.sort_slices();
        }
    }

    /// Marks every process as one of run `run` ("A" or "B") of a
    /// comparison: its name is led by the run, and its metadata has
    /// [`COMPARE_RUN_KEY`](super::COMPARE_RUN_KEY).
    pub fn mark_compare_run(&mut self, run: &str) {
        for p in &mut self.processes {
            p.name = format!("{run} · {}", p.name);
            (p.metadata).push((super::COMPARE_RUN_KEY.to_string(), run.to_string()));
        }
    }

    /// Moves everything of `other` into `self` (a multi-rank trace). Its
    /// tracks come after ours, so the slices stay sorted.
    pub fn append(&mut self, other: Trace) {
        let mut b = std::mem::take(self).into_builder();
        b.append(other);
        *self = b.finish_sorted();
    }

    /// Keeps only the slices `keep` says yes to (a capture window, a
    /// process left out, a test's damaged rank); the others go, with the
    /// flows that touch them. The order stays canonical.
    pub fn retain_slices(&mut self, mut keep: impl FnMut(SliceId) -> bool) {
        let n = self.slices.len();
        let mut new_of_old = vec![u32::MAX; n];
        let mut kept = 0u32;
        for (i, slot) in new_of_old.iter_mut().enumerate() {
            if keep(SliceId::from_index(i)) {
                *slot = kept;
                kept += 1;
            }
        }
        fn retain<T>(v: &mut Vec<T>, map: &[u32]) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                map[i - 1] != u32::MAX
            });
        }
        let sl = &mut self.slices;
        retain(&mut sl.start_ns, &new_of_old);
        retain(&mut sl.dur_ns, &new_of_old);
        retain(&mut sl.track, &new_of_old);
        retain(&mut sl.name, &new_of_old);
        retain(&mut sl.kind, &new_of_old);
        retain(&mut sl.class, &new_of_old);
        retain(&mut sl.correlation, &new_of_old);
        retain(&mut sl.payload, &new_of_old);
        retain(&mut sl.args, &new_of_old);
        self.flows.retain_mut(|f| {
            let (a, b) = (new_of_old[f.from.index()], new_of_old[f.to.index()]);
            f.from = SliceId(a);
            f.to = SliceId(b);
            a != u32::MAX && b != u32::MAX
        });
    }

    /// Sorts slices by (track, start, longest first, kind, name) and remaps
    /// flows: the canonical order. Cheap when already sorted, and cheap
    /// when each track's slices are already nearly in order, as an
    /// importer's usually are.
    pub(super) fn sort_slices(&mut self) {
        /// Slices from which the columns are permuted on two threads.
        const PARALLEL_PERMUTE: usize = 1 << 16;
        if self.slices.is_sorted() {
            return;
        }
        let n = self.slices.len();
        let order = self.slices.sorted_order();
        // One column at a time on each of two threads (the gathers are
        // independent), so the transient is two columns (at most 16 bytes a
        // slice), not a second copy of every column.
        fn permute<T: Copy>(v: &mut Vec<T>, order: &[u32]) {
            let sorted: Vec<T> = order.iter().map(|&i| v[i as usize]).collect();
            *v = sorted;
        }
        let Slices {
            start_ns,
            dur_ns,
            track,
            name,
            kind,
            class,
            correlation,
            payload,
            args,
        } = &mut self.slices;
        let mut first = || {
            permute(start_ns, &order);
            permute(dur_ns, &order);
            permute(track, &order);
        };
        let mut second = || {
            permute(name, &order);
            permute(kind, &order);
            permute(class, &order);
            permute(correlation, &order);
            permute(payload, &order);
            permute(args, &order);
        };
        let two_cores = std::thread::available_parallelism().is_ok_and(|c| c.get() > 1);
        if n >= PARALLEL_PERMUTE && two_cores {
            crate::par::beside(first, second);
        } else {
            first();
            second();
        }
        if self.flows.is_empty() {
            return;
        }
        let mut inverse = vec![0u32; n];
        for (new_i, &old_i) in order.iter().enumerate() {
            inverse[old_i as usize] = new_i as u32;
        }
        drop(order);
        for f in &mut self.flows {
            f.from = SliceId(inverse[f.from.index()]);
            f.to = SliceId(inverse[f.to.index()]);
        }
    }

    /// Rebuilds the flows from CUDA correlation ids: per process, each GPU
    /// activity slice (kernel, memcpy, memset) with a nonzero correlation
    /// gets a flow from the runtime/driver call of that process with the same
    /// id (the earliest, if several), with the correlation as flow id.
    pub(super) fn link_flows_by_correlation(&mut self) {
        let t = self;
        t.flows.clear();
        let sl = &t.slices;
        let tracks = &t.tracks;
        let process_of = |i: usize| tracks[sl.track[i].index()].process.0;
        // Correlation ids are dense per process (CUPTI and Kineto count up),
        // so a table indexed by (process, correlation) beats hashing; fall
        // back to a map when they are not.
        let max_corr = sl.correlation.iter().copied().max().unwrap_or(0) as usize;
        let nproc = t.processes.len().max(1);
        let dense = (max_corr + 1).saturating_mul(nproc) <= 4 * sl.len() + 1024;
        let mut table: Vec<u32> = if dense {
            vec![u32::MAX; (max_corr + 1) * nproc]
        } else {
            Vec::new()
        };
        let mut map: HashMap<(u32, u32), u32> = HashMap::default();
        let key = |p: u32, c: u32| p as usize * (max_corr + 1) + c as usize;
        for i in 0..sl.len() {
            if sl.correlation[i] == 0
                || !matches!(sl.kind[i], SliceKind::Runtime | SliceKind::Driver)
            {
                continue;
            }
            let (p, c) = (process_of(i), sl.correlation[i]);
            let e = if dense {
                &mut table[key(p, c)]
            } else {
                map.entry((p, c)).or_insert(u32::MAX)
            };
            if *e == u32::MAX || (sl.start_ns[i], i) < (sl.start_ns[*e as usize], *e as usize) {
                *e = i as u32;
            }
        }
        for i in 0..sl.len() {
            if sl.correlation[i] == 0 || !sl.kind[i].is_gpu_activity() {
                continue;
            }
            let (p, c) = (process_of(i), sl.correlation[i]);
            let from = if dense {
                table[key(p, c)]
            } else {
                map.get(&(p, c)).copied().unwrap_or(u32::MAX)
            };
            if from != u32::MAX {
                t.flows.push(Flow {
                    id: u64::from(c),
                    from: SliceId(from),
                    to: SliceId::from_index(i),
                });
            }
        }
    }

    /// Payload index of a slice pushed with `launch`/`copy` (see
    /// [`TraceBuilder`]), for the payload check of a finished trace.
    pub(super) fn payload_in_range(&self, i: usize) -> bool {
        let p = self.slices.payload[i];
        p == NO_PAYLOAD
            || match self.slices.kind[i] {
                SliceKind::Kernel => (p as usize) < self.launch_configs.len(),
                SliceKind::Memcpy | SliceKind::Memset => (p as usize) < self.copies.len(),
                _ => true,
            }
    }
}
