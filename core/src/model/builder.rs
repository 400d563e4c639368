//! [`TraceBuilder`]: the one way to make a [`Trace`].
//!
//! Every importer (Perfetto reader, Kineto import, chrome-json, the
//! collector's conversion, the generators) adds processes, devices, tracks,
//! slices, counters and allocations here, in any order; [`TraceBuilder::finish`] sorts
//! the slices and remaps flows, so a `Trace` is sorted by construction.

use rustc_hash::FxHashMap as HashMap;

use super::{
    Allocations, ArgSet, ArgValue, CopyInfo, Counters, Device, DeviceId, Flow, LaunchConfig,
    Process, ProcessId, SliceClass, SliceId, SliceKind, Slices, StrId, StringPool, Trace, Track,
    TrackId, TrackKind, NO_ARGS, NO_PAYLOAD,
};
use crate::diagnostic::Diagnostic;

/// A new slice, for [`TraceBuilder::push_slice`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewSlice {
    /// Track the slice goes on.
    pub track: TrackId,
    /// Start time (ns).
    pub start_ns: i64,
    /// Duration (ns).
    pub dur_ns: i64,
    /// Slice name.
    pub name: StrId,
    /// What the slice is.
    pub kind: SliceKind,
    /// HTA class.
    pub class: SliceClass,
    /// CUDA correlation id (0 when none).
    pub correlation: u32,
    /// Launch configuration (kernels).
    pub launch: Option<LaunchConfig>,
    /// Copy description (memcpy/memset).
    pub copy: Option<CopyInfo>,
    /// Free-form arguments.
    pub args: ArgSet,
}

impl NewSlice {
    /// A slice with no class, correlation, payload or arguments.
    pub fn new(track: TrackId, kind: SliceKind, name: StrId, start_ns: i64, dur_ns: i64) -> Self {
        NewSlice {
            track,
            start_ns,
            dur_ns,
            name,
            kind,
            class: SliceClass::None,
            correlation: 0,
            launch: None,
            copy: None,
            args: Vec::new(),
        }
    }
}

/// Builds a [`Trace`]: add processes, devices, tracks, slices, counters and
/// flows in any order, then [`finish`](TraceBuilder::finish). Ids it hands
/// out index its tables; slice ids are the builder's own (`finish`
/// reorders slices and remaps the flows that use them).
#[derive(Debug, Clone, Default)]
pub struct TraceBuilder {
    t: Trace,
    /// Flows are rebuilt from correlation ids in `finish`.
    link_flows: bool,
    launch_index: HashMap<LaunchConfig, u32>,
    copy_index: HashMap<CopyInfo, u32>,
}

impl TraceBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    pub(super) fn from_trace(t: Trace) -> Self {
        let launch_index = (t.launch_configs.iter().enumerate())
            .map(|(i, &l)| (l, i as u32))
            .collect();
        let copy_index = (t.copies.iter().enumerate())
            .map(|(i, &c)| (c, i as u32))
            .collect();
        TraceBuilder {
            t,
            link_flows: false,
            launch_index,
            copy_index,
        }
    }

    /// The trace as it is, for slices known to be in order already.
    pub(super) fn finish_sorted(mut self) -> Trace {
        debug_assert!(self.t.slices.is_sorted());
        if self.link_flows {
            self.t.link_flows_by_correlation();
        }
        self.t
    }

    /// The trace: slices sorted by (track, start, longest first, kind,
    /// name), flows remapped to the sorted slice ids. Slice ids of a builder
    /// whose slices were already in that order do not change.
    pub fn finish(mut self) -> Trace {
        self.t.sort_slices();
        if self.link_flows {
            self.t.link_flows_by_correlation();
        }
        debug_assert!(self.references_in_range(), "TraceBuilder: id out of range");
        self.t
    }

    fn references_in_range(&self) -> bool {
        let t = &self.t;
        let (np, nd, nt, ns) = (
            t.processes.len(),
            t.devices.len(),
            t.tracks.len(),
            t.slices.len(),
        );
        let dev_ok = |d: &DeviceId| d.index() < nd;
        t.devices.iter().all(|d| d.process.index() < np)
            && t.tracks.iter().all(|tr| {
                tr.process.index() < np
                    && tr.parent.is_none_or(|p| p.index() < nt)
                    && match &tr.kind {
                        TrackKind::Gpu { device } | TrackKind::Stream { device, .. } => {
                            dev_ok(device)
                        }
                        TrackKind::Counter { device } => device.as_ref().is_none_or(dev_ok),
                        _ => true,
                    }
            })
            && t.slices.track.iter().all(|tr| tr.index() < nt)
            && t.counters.track.iter().all(|tr| tr.index() < nt)
            && t.allocations.track.iter().all(|tr| tr.index() < nt)
            && t.allocations.device.iter().all(dev_ok)
            && t.flows
                .iter()
                .all(|f| f.from.index() < ns && f.to.index() < ns)
            && (0..ns).all(|i| t.payload_in_range(i))
            && (t.slices.args.iter()).all(|&a| a == NO_ARGS || (a as usize) < t.arg_sets.len())
    }

    // ---- strings

    /// Interns `s` in the trace's string pool.
    pub fn intern(&mut self, s: &str) -> StrId {
        self.t.strings.0.intern(s)
    }
    /// The string for `id`.
    pub fn str(&self, id: StrId) -> &str {
        self.t.str(id)
    }
    /// The interned strings.
    pub fn strings(&self) -> &StringPool {
        self.t.strings()
    }

    // ---- processes, devices, tracks

    /// Adds a process; returns its id.
    pub fn add_process(&mut self, p: Process) -> ProcessId {
        self.t.processes.push(p);
        ProcessId::from_index(self.t.processes.len() - 1)
    }
    /// Processes so far.
    pub fn processes(&self) -> &[Process] {
        &self.t.processes
    }
    /// Processes, to fill in (names, ranks, metadata).
    pub fn processes_mut(&mut self) -> &mut [Process] {
        &mut self.t.processes
    }
    /// Process `id`, to fill in.
    pub fn process_mut(&mut self, id: ProcessId) -> &mut Process {
        &mut self.t.processes[id.index()]
    }
    /// Adds a device; returns its id.
    pub fn add_device(&mut self, d: Device) -> DeviceId {
        self.t.devices.push(d);
        DeviceId::from_index(self.t.devices.len() - 1)
    }
    /// Devices so far.
    pub fn devices(&self) -> &[Device] {
        &self.t.devices
    }
    /// Device `id`, to fill in (its process stays as it is).
    pub fn device_mut(&mut self, id: DeviceId) -> &mut Device {
        &mut self.t.devices[id.index()]
    }
    /// Adds a track of `process`; returns its id.
    pub fn add_track(
        &mut self,
        process: ProcessId,
        parent: Option<TrackId>,
        kind: TrackKind,
        name: &str,
    ) -> TrackId {
        let name = self.intern(name);
        self.t.tracks.push(Track {
            process,
            parent,
            kind,
            name,
        });
        TrackId::from_index(self.t.tracks.len() - 1)
    }
    /// Tracks so far.
    pub fn tracks(&self) -> &[Track] {
        &self.t.tracks
    }
    /// Finds a track of `process` with this kind, if any.
    pub fn find_track(&self, process: ProcessId, kind: TrackKind) -> Option<TrackId> {
        self.t.find_track(process, kind)
    }
    /// Renames track `id`.
    pub fn set_track_name(&mut self, id: TrackId, name: &str) {
        let name = self.intern(name);
        self.t.tracks[id.index()].name = name;
    }
    /// Sets the parent of track `id`.
    pub fn set_track_parent(&mut self, id: TrackId, parent: Option<TrackId>) {
        self.t.tracks[id.index()].parent = parent;
    }

    /// Clears the parent of any track whose chain of parents loops or
    /// leaves the table (damaged or hostile descriptors), so that walking up
    /// a track tree always ends. Returns how many parents were cleared.
    pub fn break_parent_cycles(&mut self) -> usize {
        let tracks = &mut self.t.tracks;
        let n = tracks.len();
        let mut cleared = 0;
        for i in 0..n {
            let mut at = tracks[i].parent;
            let mut steps = 0;
            while let Some(p) = at {
                if p.index() == i || steps > n || p.index() >= n {
                    tracks[i].parent = None;
                    cleared += 1;
                    break;
                }
                at = tracks[p.index()].parent;
                steps += 1;
            }
        }
        cleared
    }

    /// Puts devices in a new order: `order[new]` is the old id of the
    /// device at `new`; tracks follow.
    pub fn reorder_devices(&mut self, order: &[DeviceId]) {
        let mut new_of_old = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of_old[old.index()] = new as u32;
        }
        self.t.devices = order
            .iter()
            .map(|&i| self.t.devices[i.index()].clone())
            .collect();
        let map = |d: DeviceId| DeviceId(new_of_old.get(d.index()).copied().unwrap_or(d.0));
        for t in &mut self.t.tracks {
            t.kind = match t.kind {
                TrackKind::Gpu { device } => TrackKind::Gpu {
                    device: map(device),
                },
                TrackKind::Stream { device, stream } => TrackKind::Stream {
                    device: map(device),
                    stream,
                },
                TrackKind::Counter { device } => TrackKind::Counter {
                    device: device.map(map),
                },
                k => k,
            };
        }
        for d in &mut self.t.allocations.device {
            *d = map(*d);
        }
    }

    /// Puts tracks in a new order: `order[new]` is the old id of the track
    /// at `new`; parents, slices, counters and allocations follow.
    pub fn reorder_tracks(&mut self, order: &[TrackId]) {
        let mut new_of_old = vec![TrackId(0); order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of_old[old.index()] = TrackId::from_index(new);
        }
        let tracks = &self.t.tracks;
        self.t.tracks = order
            .iter()
            .map(|&i| {
                let mut t = tracks[i.index()].clone();
                t.parent = t.parent.map(|p| new_of_old[p.index()]);
                t
            })
            .collect();
        self.map_event_tracks(|t| new_of_old[t.index()]);
    }

    /// Replaces the track of every slice, counter sample and allocation by
    /// `f` of it.
    pub fn map_event_tracks(&mut self, mut f: impl FnMut(TrackId) -> TrackId) {
        let t = &mut self.t;
        let tracks = (t.slices.track.iter_mut()).chain(t.counters.track.iter_mut());
        for t in tracks.chain(t.allocations.track.iter_mut()) {
            *t = f(*t);
        }
    }

    // ---- slices, counters, flows

    /// Index of `lc` in the launch configurations, adding it if new.
    pub(crate) fn intern_launch(&mut self, lc: LaunchConfig) -> u32 {
        if let Some(&i) = self.launch_index.get(&lc) {
            return i;
        }
        let i = self.t.launch_configs.len() as u32;
        self.t.launch_configs.push(lc);
        self.launch_index.insert(lc, i);
        i
    }

    /// Index of `c` in the copy descriptions, adding it if new.
    pub(crate) fn intern_copy(&mut self, c: CopyInfo) -> u32 {
        if let Some(&i) = self.copy_index.get(&c) {
            return i;
        }
        let i = self.t.copies.len() as u32;
        self.t.copies.push(c);
        self.copy_index.insert(c, i);
        i
    }

    /// Index of a new argument set (or [`NO_ARGS`] for an empty one).
    pub(crate) fn push_args(&mut self, args: &[(StrId, ArgValue)]) -> u32 {
        if args.is_empty() {
            return NO_ARGS;
        }
        self.t.arg_sets.push(args.iter().copied()) as u32
    }

    /// Reserves room for `n` more slices.
    pub fn reserve_slices(&mut self, n: usize) {
        self.t.slices.reserve(n);
    }

    /// Adds a slice, interning its payload and arguments; returns its id.
    pub fn push_slice(&mut self, mut s: NewSlice) -> SliceId {
        let args = std::mem::take(&mut s.args);
        self.push_slice_with_args(s, &args)
    }

    /// [`TraceBuilder::push_slice`] with the arguments `args` (those of `s`
    /// are ignored), which the caller may reuse.
    pub(crate) fn push_slice_with_args(
        &mut self,
        s: NewSlice,
        args: &[(StrId, ArgValue)],
    ) -> SliceId {
        let payload = match (s.launch, s.copy) {
            (Some(lc), _) => self.intern_launch(lc),
            (None, Some(c)) => self.intern_copy(c),
            (None, None) => NO_PAYLOAD,
        };
        let args = self.push_args(args);
        self.t.slices.push(
            s.track,
            s.start_ns,
            s.dur_ns,
            s.name,
            s.kind,
            s.class,
            s.correlation,
            payload,
            args,
        )
    }

    /// Adds a slice whose payload and args are already indices (from
    /// `intern_launch`, `intern_copy`, `push_args`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_slice_raw(
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
        self.t.slices.push(
            track,
            start_ns,
            dur_ns,
            name,
            kind,
            class,
            correlation,
            payload,
            args,
        )
    }

    /// Ends slice `id` at `end_ns` (a duration of at least 0).
    pub fn end_slice(&mut self, id: SliceId, end_ns: i64) {
        let i = id.index();
        let sl = &mut self.t.slices;
        sl.dur_ns[i] = end_ns.saturating_sub(sl.start_ns[i]).max(0);
    }

    /// Renames slice `id`.
    pub fn set_slice_name(&mut self, id: SliceId, name: StrId) {
        self.t.slices.name[id.index()] = name;
    }

    /// Changes what slice `id` is.
    pub fn set_slice_kind(&mut self, id: SliceId, kind: SliceKind) {
        self.t.slices.kind[id.index()] = kind;
    }

    /// Moves slice `id` to start at `start_ns` (its duration stays).
    pub fn set_slice_start(&mut self, id: SliceId, start_ns: i64) {
        self.t.slices.start_ns[id.index()] = start_ns;
    }

    /// Sets the duration of slice `id` (at least 0).
    pub fn set_slice_dur(&mut self, id: SliceId, dur_ns: i64) {
        self.t.slices.dur_ns[id.index()] = dur_ns.max(0);
    }

    /// Process of slice `id`.
    pub fn slice_process(&self, id: SliceId) -> ProcessId {
        self.t.slice_process(id)
    }

    /// Replaces the free-form arguments of slice `id`.
    pub fn set_slice_args(&mut self, id: SliceId, args: ArgSet) {
        let a = self.push_args(&args);
        self.t.slices.args[id.index()] = a;
    }

    /// Slices so far (in the order added).
    pub fn slices(&self) -> &Slices {
        &self.t.slices
    }

    /// Free-form arguments of slice `id`.
    pub fn args_of(&self, id: SliceId) -> &[(StrId, ArgValue)] {
        self.t.args_of(id)
    }

    /// Argument `key` of slice `id` as text.
    pub fn arg_string(&self, id: SliceId, key: &str) -> Option<String> {
        self.t.arg_string(id, key)
    }

    /// An argument value as text.
    pub fn arg_value_string(&self, v: &ArgValue) -> String {
        self.t.arg_value_string(v)
    }

    /// Adds a counter sample.
    pub fn push_counter(&mut self, track: TrackId, ts_ns: i64, value: f64) {
        let c = &mut self.t.counters;
        c.track.push(track);
        c.ts_ns.push(ts_ns);
        c.value.push(value);
    }

    /// Counter samples so far.
    pub fn counters(&self) -> &Counters {
        &self.t.counters
    }

    /// Adds an allocation (`bytes` > 0) or free (`bytes` < 0) of the GPU
    /// memory block at `address` on `device`, made on the host thread
    /// `track` at `ts_ns`, by the Python line `site` when known.
    pub fn push_allocation(
        &mut self,
        track: TrackId,
        device: DeviceId,
        ts_ns: i64,
        address: u64,
        bytes: i64,
        site: Option<StrId>,
    ) {
        self.t.allocations.push(
            track,
            device,
            ts_ns,
            address,
            bytes,
            site.unwrap_or(StrId::EMPTY),
        );
    }

    /// Allocations so far.
    pub fn allocations(&self) -> &Allocations {
        &self.t.allocations
    }

    /// Adds a flow arrow between two slices of this builder.
    pub fn add_flow(&mut self, flow: Flow) {
        self.t.flows.push(flow);
    }

    /// Flows so far (between this builder's slice ids).
    pub fn flows(&self) -> &[Flow] {
        &self.t.flows
    }

    /// Adds a problem found while loading.
    pub fn push_diagnostic(&mut self, d: Diagnostic) {
        self.t.diagnostics.push(d);
    }

    /// Moves every slice start, counter sample and allocation by `dt_ns`
    /// (saturating).
    pub fn shift_events(&mut self, dt_ns: i64) {
        let t = &mut self.t;
        let times = (t.slices.start_ns.iter_mut()).chain(t.counters.ts_ns.iter_mut());
        for t in times.chain(t.allocations.ts_ns.iter_mut()) {
            *t = t.saturating_add(dt_ns);
        }
    }

    /// Drops slices, counters, allocations, flows and argument sets but
    /// keeps processes, devices, tracks and strings.
    fn clear_events(&mut self) {
        self.t.slices.clear();
        self.t.arg_sets.clear();
        self.t.flows.clear();
        self.t.counters = Counters::default();
        self.t.allocations = Allocations::default();
    }

    /// For a streaming writer (the collector's batches): sorts the slices
    /// added since the last call, hands the trace so far to `f`, then drops
    /// its slices, counters, allocations, flows and argument sets (processes, devices,
    /// tracks and strings stay, and so do launch and copy payloads).
    pub fn flush_events<R>(&mut self, f: impl FnOnce(&Trace) -> R) -> R {
        self.t.sort_slices();
        let r = f(&self.t);
        self.clear_events();
        r
    }

    /// Keeps only the slices `keep` says yes to, with the flows between
    /// them (a capture's batch cut at its window's end).
    pub fn retain_slices(&mut self, keep: impl FnMut(SliceId) -> bool) {
        self.t.retain_slices(keep);
    }

    /// Has [`finish`](TraceBuilder::finish) rebuild the flows from CUDA
    /// correlation ids, after the sort (the flows added so far go): per
    /// process, each GPU activity slice (kernel, memcpy, memset) with a
    /// nonzero correlation gets a flow from the runtime/driver call of that
    /// process with the same id (the earliest, if several), with the
    /// correlation as flow id.
    pub fn link_flows_by_correlation(&mut self) {
        self.link_flows = true;
    }

    /// Moves everything of `other` into this builder (a multi-rank trace):
    /// its processes, devices, tracks and slices come after ours.
    pub fn append(&mut self, other: Trace) {
        let p0 = self.t.processes.len() as u32;
        let d0 = self.t.devices.len() as u32;
        let t0 = self.t.tracks.len() as u32;
        let s0 = self.t.slices.len() as u32;
        let mut smap = Vec::with_capacity(other.strings.0.len());
        for i in 0..other.strings.0.len() {
            smap.push(self.intern(other.strings.0.get(StrId(i as u32))));
        }
        let ms = |s: StrId| smap[s.0 as usize];
        let t = &mut self.t;
        t.processes.extend(other.processes);
        for mut d in other.devices {
            d.process.0 += p0;
            t.devices.push(d);
        }
        let md = |d: DeviceId| DeviceId(d.0 + d0);
        for tr in &other.tracks {
            let kind = match tr.kind {
                TrackKind::Gpu { device } => TrackKind::Gpu { device: md(device) },
                TrackKind::Stream { device, stream } => TrackKind::Stream {
                    device: md(device),
                    stream,
                },
                TrackKind::Counter { device } => TrackKind::Counter {
                    device: device.map(md),
                },
                k => k,
            };
            t.tracks.push(Track {
                process: ProcessId(tr.process.0 + p0),
                parent: tr.parent.map(|p| TrackId(p.0 + t0)),
                kind,
                name: ms(tr.name),
            });
        }
        let lmap: Vec<u32> = (other.launch_configs.iter())
            .map(|&l| self.intern_launch(l))
            .collect();
        let cmap: Vec<u32> = other.copies.iter().map(|&c| self.intern_copy(c)).collect();
        let t = &mut self.t;
        let a0 = t.arg_sets.len() as u32;
        for i in 0..other.arg_sets.len() {
            t.arg_sets.push(other.arg_sets.get(i).iter().map(|&(k, v)| {
                let v = match v {
                    ArgValue::Str(s) => ArgValue::Str(ms(s)),
                    v => v,
                };
                (ms(k), v)
            }));
        }
        let o = &other.slices;
        t.slices.reserve(o.len());
        for i in 0..o.len() {
            let payload = match o.kind[i] {
                _ if o.payload[i] == NO_PAYLOAD => NO_PAYLOAD,
                SliceKind::Kernel => lmap[o.payload[i] as usize],
                SliceKind::Memcpy | SliceKind::Memset => cmap[o.payload[i] as usize],
                _ => NO_PAYLOAD,
            };
            let args = if o.args[i] == NO_ARGS {
                NO_ARGS
            } else {
                o.args[i] + a0
            };
            t.slices.push(
                TrackId(o.track[i].0 + t0),
                o.start_ns[i],
                o.dur_ns[i],
                ms(o.name[i]),
                o.kind[i],
                o.class[i],
                o.correlation[i],
                payload,
                args,
            );
        }
        for f in other.flows {
            t.flows.push(Flow {
                id: f.id,
                from: SliceId(f.from.0 + s0),
                to: SliceId(f.to.0 + s0),
            });
        }
        let c = &other.counters;
        for i in 0..c.len() {
            t.counters.track.push(TrackId(c.track[i].0 + t0));
            t.counters.ts_ns.push(c.ts_ns[i]);
            t.counters.value.push(c.value[i]);
        }
        let a = &other.allocations;
        for i in 0..a.len() {
            t.allocations.push(
                TrackId(a.track[i].0 + t0),
                md(a.device[i]),
                a.ts_ns[i],
                a.address[i],
                a.bytes[i],
                ms(a.site[i]),
            );
        }
        t.diagnostics.extend(other.diagnostics);
    }
}
