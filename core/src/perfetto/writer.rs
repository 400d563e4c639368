//! Streaming Perfetto writer.
//!
//! Packets go out as they come: [`PerfettoWriter::write_batch`] writes the
//! descriptors of processes and tracks it has not seen yet, then the slices and
//! counters of the batch, and keeps only per-track lane state (the ends of the
//! slices still open) and the interning tables between batches, so memory
//! stays bounded however long the capture runs. The collector calls it once
//! per CUPTI flush with a batch; [`write_trace`] writes a whole model.
//!
//! Layout (see docs/TRACE-SCHEMA.md):
//! - one trusted packet sequence per process, its first packet carrying
//!   SEQ_INCREMENTAL_STATE_CLEARED, every event packet
//!   SEQ_NEEDS_INCREMENTAL_STATE, names interned per sequence;
//! - a process track, thread tracks, a "GPU n" group track per device with a
//!   child track per stream, counter tracks;
//! - slices as SLICE_BEGIN/SLICE_END pairs; a slice that would partially
//!   overlap an open one on its track goes to a sibling lane track
//!   (description `streamscope lane=K of=UUID`), so nesting always holds;
//! - typed attributes of GPU work as top-level debug annotations, free-form
//!   arguments inside an `args` dictionary;
//! - flows from a launch API call to its GPU work, keyed by correlation id;
//! - a `streamscope.process` instant on the process track with the process
//!   and device metadata (written again at the end with final counts).
//!
//! - each of the model's allocations (`Trace::allocations`, GPU memory
//!   blocks allocated or freed) as a `streamscope.alloc` instant on its host
//!   thread's track, with the device ordinal, address and signed bytes;
//!   the reader makes them allocations again.

use std::collections::HashMap;
use std::io::{self, Write};

use super::schema::*;
use super::wire::Enc;
use crate::model::*;

/// Sequence state of one process.
struct Seq {
    id: u32,
    started: bool,
    /// StrId -> event name iid (0 = not interned yet).
    name_iid: Vec<u32>,
    next_name_iid: u32,
    /// Strings that are not in the pool (grid/block text).
    text_iid: HashMap<String, u32>,
    /// Launch-config index -> (grid iid, block iid), 0 = not interned yet.
    launch_iids: Vec<(u32, u32)>,
    next_str_iid: u32,
    last_ts: i64,
    meta_written: Option<(usize, u64)>,
    uuid: u64,
}

impl Seq {
    fn new(process: usize) -> Self {
        Seq {
            id: process as u32 + 1,
            started: false,
            name_iid: Vec::new(),
            next_name_iid: 1,
            text_iid: HashMap::new(),
            launch_iids: Vec::new(),
            next_str_iid: FIRST_FREE_STR_IID,
            last_ts: 0,
            meta_written: None,
            uuid: process_uuid(process),
        }
    }
}

/// Open slices of one lane: a stack of end times.
struct Lane {
    uuid: u64,
    last_start: i64,
    open_ends: Vec<i64>,
    /// Latest end of the slices already closed: a later slice starting
    /// before it would have had to nest in one of them, so it goes elsewhere.
    closed_until: i64,
}

/// Per model track: its lanes (lane 0 is the track itself).
#[derive(Default)]
struct TrackState {
    lanes: Vec<Lane>,
}

/// Uuid of the process track of model process `p`.
pub fn process_uuid(p: usize) -> u64 {
    ((p as u64 + 1) << 32) | 0xffff_fff0
}

/// Uuid of model track `t` of process `p`.
pub fn track_uuid(p: usize, t: usize) -> u64 {
    ((p as u64 + 1) << 32) | (t as u64 + 1)
}

/// Streams a model to a Perfetto trace. See the module docs.
pub struct PerfettoWriter<W: Write> {
    out: W,
    enc: Enc,
    seqs: Vec<Seq>,
    tracks: Vec<TrackState>,
    tracks_written: usize,
    bytes_written: u64,
    packets_written: u64,
    next_lane_uuid: u64,
    /// Added to every time written (see [`time_offset_ns`]).
    offset_ns: i64,
}

impl<W: Write> PerfettoWriter<W> {
    /// A writer that writes its packets to `out`.
    pub fn new(out: W) -> Self {
        PerfettoWriter {
            out,
            enc: Enc {
                buf: Vec::with_capacity(1 << 16),
            },
            seqs: Vec::new(),
            tracks: Vec::new(),
            tracks_written: 0,
            bytes_written: 0,
            packets_written: 0,
            next_lane_uuid: 0,
            offset_ns: 0,
        }
    }

    /// Writes every time `offset_ns` later ([`time_offset_ns`] of a whole
    /// model: Perfetto's timestamps are unsigned), and says so in each
    /// process's metadata (`time_offset_ns`).
    pub fn with_time_offset(mut self, offset_ns: i64) -> Self {
        self.offset_ns = offset_ns.max(0);
        self
    }

    /// `ts` as written: shifted by the offset, within Perfetto's u64.
    fn wire_ts(&self, ts: i64) -> u64 {
        (i128::from(ts) + i128::from(self.offset_ns)).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// Bytes handed to the output so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written + self.enc.buf.len() as u64
    }

    /// Packets written so far.
    pub fn packets_written(&self) -> u64 {
        self.packets_written
    }

    /// Writes everything of `trace` not written yet: new processes and tracks,
    /// then all slices and counters it holds (a streaming caller hands
    /// batches from [`TraceBuilder::flush_events`]). Slices of one track
    /// should come in start order across batches; one that does not goes
    /// to a new lane.
    pub fn write_batch(&mut self, trace: &Trace) -> io::Result<()> {
        while self.seqs.len() < trace.processes().len() {
            let p = self.seqs.len();
            self.seqs.push(Seq::new(p));
            self.start_sequence(trace, p);
        }
        while self.tracks_written < trace.tracks().len() {
            let t = self.tracks_written;
            self.track_descriptor(trace, t);
            self.tracks.push(TrackState::default());
            self.tracks_written += 1;
        }
        // A trace's slices are sorted by track, then start.
        let sl = trace.slices();
        let mut current_track = u32::MAX;
        for i in 0..sl.len() {
            let t = sl.track()[i].get();
            if t != current_track {
                if current_track != u32::MAX {
                    self.close_all(trace, current_track as usize);
                }
                current_track = t;
            }
            self.slice(trace, i)?;
        }
        if current_track != u32::MAX {
            self.close_all(trace, current_track as usize);
        }
        for i in 0..trace.counters().len() {
            self.counter(trace, i);
            self.maybe_flush()?;
        }
        for i in 0..trace.allocations().len() {
            self.allocation(trace, i);
            self.maybe_flush()?;
        }
        for p in 0..trace.processes().len() {
            let state = (
                trace
                    .devices()
                    .iter()
                    .filter(|d| d.process.index() == p)
                    .count(),
                trace.processes()[p].dropped_records,
            );
            if self.seqs[p].meta_written != Some(state) {
                self.process_metadata(trace, p);
            }
        }
        self.flush_buf()
    }

    /// Closes every open slice, writes final metadata and returns the output.
    pub fn finish(mut self, trace: &Trace) -> io::Result<W> {
        for t in 0..self.tracks.len() {
            self.close_all(trace, t);
        }
        for p in 0..self.seqs.len().min(trace.processes().len()) {
            self.process_metadata(trace, p);
        }
        self.flush_buf()?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.enc.buf.len() >= 1 << 16 {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        self.out.write_all(&self.enc.buf)?;
        self.bytes_written += self.enc.buf.len() as u64;
        self.enc.buf.clear();
        Ok(())
    }

    /// Opens a TracePacket on process `p`'s sequence.
    fn packet(&mut self, p: usize, ts: Option<i64>, needs_state: bool) -> usize {
        self.packets_written += 1;
        let at = self.enc.begin(TRACE_PACKET);
        let seq = &self.seqs[p];
        if let Some(ts) = ts {
            let ts = self.wire_ts(ts);
            self.enc.uint(PKT_TIMESTAMP, ts);
        }
        self.enc.uint(PKT_SEQUENCE_ID, seq.id as u64);
        if needs_state {
            self.enc
                .uint(PKT_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        }
        at
    }

    fn start_sequence(&mut self, trace: &Trace, p: usize) {
        let proc_ = &trace.processes()[p];
        // First packet: clears incremental state, sets the clock for the
        // sequence's timestamps, and interns the fixed annotation names and values.
        let at = self.enc.begin(TRACE_PACKET);
        self.enc.uint(PKT_SEQUENCE_ID, self.seqs[p].id as u64);
        self.enc.uint(
            PKT_SEQUENCE_FLAGS,
            SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE,
        );
        self.enc.uint(PKT_FIRST_PACKET_ON_SEQUENCE, 1);
        let d = self.enc.begin(PKT_DEFAULTS);
        self.enc.uint(
            DEFAULTS_TIMESTAMP_CLOCK_ID,
            proc_.clock.perfetto_id() as u64,
        );
        self.enc.end(d);
        let inter = self.enc.begin(PKT_INTERNED_DATA);
        for (i, name) in RESERVED_NAMES.iter().enumerate() {
            let e = self.enc.begin(INTERNED_DEBUG_ANNOTATION_NAMES);
            self.enc.uint(1, i as u64 + 1);
            self.enc.bytes(2, name.as_bytes());
            self.enc.end(e);
        }
        for (i, value) in FIXED_STRING_VALUES.iter().enumerate() {
            let e = self.enc.begin(INTERNED_DEBUG_ANNOTATION_STRING_VALUES);
            self.enc.uint(1, i as u64 + 1);
            self.enc.bytes(2, value.as_bytes());
            self.enc.end(e);
        }
        self.enc.end(inter);
        self.enc.end(at);
        self.seqs[p].started = true;
        self.seqs[p].next_name_iid = 1;

        // Clock snapshot: relates the process clock to Perfetto's trace clock.
        if proc_.clock != ClockDomain::Boottime {
            let at = self.enc.begin(TRACE_PACKET);
            self.enc.uint(PKT_SEQUENCE_ID, self.seqs[p].id as u64);
            let cs = self.enc.begin(PKT_CLOCK_SNAPSHOT);
            let snapshot = if proc_.clock_snapshot.is_empty() {
                // No measured pair: declare the clocks equal at the capture start.
                let t0 = proc_.capture_start_ns.unwrap_or(0);
                vec![
                    (proc_.clock.perfetto_id(), t0),
                    (ClockDomain::Boottime.perfetto_id(), t0),
                ]
            } else {
                proc_.clock_snapshot.clone()
            };
            for (clock, ts) in snapshot {
                let c = self.enc.begin(1);
                self.enc.uint(1, clock as u64);
                let ts = self.wire_ts(ts);
                self.enc.uint(2, ts);
                self.enc.end(c);
            }
            self.enc.end(cs);
            self.enc.end(at);
        }

        // The process track.
        let at = self.packet(p, None, false);
        let td = self.enc.begin(PKT_TRACK_DESCRIPTOR);
        self.enc.uint(TD_UUID, self.seqs[p].uuid);
        // Marks the file as ours before any slice (older readers decided
        // how to decode slices from the first "streamscope" description).
        self.enc
            .bytes(TD_DESCRIPTION, PROCESS_DESCRIPTION.as_bytes());
        let pd = self.enc.begin(TD_PROCESS);
        self.enc.int(PD_PID, proc_.pid as i32 as i64);
        if !proc_.cmdline.is_empty() {
            self.enc.bytes(PD_CMDLINE, proc_.cmdline.as_bytes());
        }
        let name = if proc_.name.is_empty() {
            proc_.label()
        } else {
            proc_.name.clone()
        };
        self.enc.bytes(PD_PROCESS_NAME, name.as_bytes());
        if let Some(r) = proc_.rank {
            self.enc
                .bytes(PD_PROCESS_LABELS, format!("rank {r}").as_bytes());
        }
        self.enc.end(pd);
        self.enc.end(td);
        self.enc.end(at);
    }

    /// Opens the packet and TrackDescriptor of `uuid`, a track (or lane)
    /// of model track `t`: under its parent track, else its process.
    fn open_descriptor(&mut self, trace: &Trace, t: usize, uuid: u64) -> (usize, usize) {
        let track = &trace.tracks()[t];
        let p = track.process.index();
        let parent = match track.parent {
            Some(pt) => track_uuid(p, pt.index()),
            None => self.seqs[p].uuid,
        };
        let at = self.packet(p, None, false);
        let td = self.enc.begin(PKT_TRACK_DESCRIPTOR);
        self.enc.uint(TD_UUID, uuid);
        self.enc.uint(TD_PARENT_UUID, parent);
        (at, td)
    }

    fn track_descriptor(&mut self, trace: &Trace, t: usize) {
        let track = &trace.tracks()[t];
        let p = track.process.index();
        let (at, td) = self.open_descriptor(trace, t, track_uuid(p, t));
        let name = trace.str(track.name);
        match track.kind {
            TrackKind::Thread { tid } => {
                let th = self.enc.begin(TD_THREAD);
                self.enc
                    .int(THD_PID, trace.processes()[p].pid as i32 as i64);
                // pid and tid are int32 in Perfetto: ids above 2^31 wrap, and the
                // reader wraps them back.
                self.enc.int(THD_TID, tid as i32 as i64);
                self.enc.bytes(THD_THREAD_NAME, name.as_bytes());
                self.enc.end(th);
            }
            kind => {
                self.enc.bytes(TD_NAME, name.as_bytes());
                let ordinal = |d: DeviceId| {
                    trace
                        .devices()
                        .get(d.index())
                        .map(|d| d.ordinal)
                        .unwrap_or(d.get())
                };
                let desc = match kind {
                    TrackKind::Gpu { device } => {
                        format!("streamscope gpu device={}", ordinal(device))
                    }
                    TrackKind::Stream { device, stream } => {
                        format!(
                            "streamscope stream device={} stream={stream}",
                            ordinal(device)
                        )
                    }
                    TrackKind::Counter { device: Some(d) } => {
                        format!("streamscope counter device={}", ordinal(d))
                    }
                    TrackKind::Counter { device: None } => "streamscope counter".to_string(),
                    _ => String::new(),
                };
                if !desc.is_empty() {
                    self.enc.bytes(TD_DESCRIPTION, desc.as_bytes());
                }
                if let TrackKind::Counter { .. } = kind {
                    let c = self.enc.begin(TD_COUNTER);
                    self.enc.uint(CD_UNIT, CD_UNIT_COUNT);
                    self.enc.end(c);
                }
                if let TrackKind::Gpu { .. } = kind {
                    self.enc.uint(TD_CHILD_ORDERING, 1);
                }
            }
        }
        self.enc.end(td);
        self.enc.end(at);
    }

    fn lane_descriptor(&mut self, trace: &Trace, t: usize, lane: usize, uuid: u64) {
        let track = &trace.tracks()[t];
        let base = track_uuid(track.process.index(), t);
        let (at, td) = self.open_descriptor(trace, t, uuid);
        self.enc.bytes(
            TD_NAME,
            format!("{} (overlapping {lane})", trace.str(track.name)).as_bytes(),
        );
        self.enc.bytes(
            TD_DESCRIPTION,
            format!("streamscope lane={lane} of={base}").as_bytes(),
        );
        self.enc.end(td);
        self.enc.end(at);
    }

    /// Ends every open slice of track `t`.
    fn close_all(&mut self, trace: &Trace, t: usize) {
        let p = trace.tracks()[t].process.index();
        let mut lanes = std::mem::take(&mut self.tracks[t].lanes);
        for lane in &mut lanes {
            while let Some(end) = lane.open_ends.pop() {
                lane.closed_until = lane.closed_until.max(end);
                self.end_event(p, lane.uuid, end);
            }
        }
        self.tracks[t].lanes = lanes;
    }

    fn end_event(&mut self, p: usize, uuid: u64, ts: i64) {
        let at = self.packet(p, Some(ts), false);
        let te = self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TE_TYPE_SLICE_END);
        self.enc.uint(TE_TRACK_UUID, uuid);
        self.enc.end(te);
        self.enc.end(at);
        let s = &mut self.seqs[p];
        s.last_ts = s.last_ts.max(ts);
    }

    /// Picks the lane where slice (start, end) nests, ending what it follows.
    fn place(&mut self, trace: &Trace, t: usize, start: i64, end: i64) -> u64 {
        let p = trace.tracks()[t].process.index();
        let base = track_uuid(p, t);
        let mut lanes = std::mem::take(&mut self.tracks[t].lanes);
        let mut chosen = None;
        for lane in lanes.iter_mut() {
            if start < lane.last_start {
                continue;
            }
            // Slices that ended by `start` are closed; the new one nests if it
            // fits inside the innermost still open.
            let mut depth = lane.open_ends.len();
            while depth > 0 && lane.open_ends[depth - 1] <= start {
                depth -= 1;
            }
            if depth == 0 || lane.open_ends[depth - 1] >= end {
                if depth == 0 && start < lane.closed_until {
                    continue;
                }
                while lane.open_ends.len() > depth {
                    if let Some(e) = lane.open_ends.pop() {
                        self.end_event(p, lane.uuid, e);
                    }
                }
                lane.last_start = start;
                lane.open_ends.push(end);
                chosen = Some(lane.uuid);
                break;
            }
        }
        let uuid = match chosen {
            Some(u) => u,
            None => {
                let k = lanes.len();
                // Lanes get uuids of their own space (top bit set), counted
                // per writer: they never meet a track's uuid, whatever the
                // number of lanes. The descriptor names the base track.
                let uuid = if k == 0 {
                    base
                } else {
                    self.next_lane_uuid += 1;
                    (1 << 63) | self.next_lane_uuid
                };
                if k > 0 {
                    self.lane_descriptor(trace, t, k, uuid);
                }
                lanes.push(Lane {
                    uuid,
                    last_start: start,
                    open_ends: vec![end],
                    closed_until: i64::MIN,
                });
                uuid
            }
        };
        self.tracks[t].lanes = lanes;
        uuid
    }

    fn slice(&mut self, trace: &Trace, i: usize) -> io::Result<()> {
        let sl = trace.slices();
        let t = sl.track()[i].index();
        let p = trace.tracks()[t].process.index();
        let start = sl.start_ns()[i];
        let end = start.saturating_add(sl.dur_ns()[i]);
        let uuid = self.place(trace, t, start, end);
        let kind = sl.kind()[i];

        // Intern what this event needs that the sequence has not seen.
        let name = sl.name()[i];
        let name_iid = self.intern_name(trace, p, name);
        let launch = trace
            .launch_of(SliceId::from_index(i))
            .map(|lc| (lc, self.launch_iids(p, sl.payload()[i] as usize, lc)));

        let at = self.packet(p, Some(start), true);
        let te = self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TE_TYPE_SLICE_BEGIN);
        self.enc.uint(TE_TRACK_UUID, uuid);
        self.enc.uint(TE_NAME_IID, name_iid as u64);
        self.annotate_str_iid(AN_KIND, kind_value_iid(kind));
        if sl.class()[i] != SliceClass::None {
            self.annotate_str_iid(AN_CLASS, class_value_iid(sl.class()[i]));
        }
        let corr = sl.correlation()[i];
        if corr != 0 {
            self.annotate_uint(AN_CORRELATION, corr as u64);
        }
        if let TrackKind::Stream { device, stream } = trace.tracks()[t].kind {
            if kind.is_gpu_activity() || kind == SliceKind::Sync {
                let ordinal = trace
                    .devices()
                    .get(device.index())
                    .map(|d| d.ordinal)
                    .unwrap_or(device.get());
                self.annotate_uint(AN_DEVICE, ordinal as u64);
                self.annotate_uint(AN_STREAM, stream as u64);
            }
        }
        if let Some((lc, (g, b))) = launch {
            self.annotate_str_iid(AN_GRID, g);
            self.annotate_str_iid(AN_BLOCK, b);
            self.annotate_uint(AN_REGISTERS, lc.registers_per_thread as u64);
            self.annotate_uint(AN_STATIC_SMEM, lc.static_smem_bytes as u64);
            self.annotate_uint(AN_DYNAMIC_SMEM, lc.dynamic_smem_bytes as u64);
        }
        if let Some(c) = trace.copy_of(SliceId::from_index(i)) {
            self.annotate_uint(AN_BYTES, c.bytes);
            self.annotate_str_iid(AN_COPY_KIND, copy_kind_value_iid(c.kind));
            if c.pageable {
                self.annotate_bool(AN_PAGEABLE, true);
            }
        }
        let args = trace.args_of(SliceId::from_index(i));
        if !args.is_empty() {
            let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
            self.enc.uint(DA_NAME_IID, AN_ARGS as u64);
            for (k, v) in args {
                let e = self.enc.begin(DA_DICT_ENTRIES);
                self.enc.bytes(DA_NAME, trace.str(*k).as_bytes());
                match v {
                    ArgValue::Int(x) => self.enc.int(DA_INT, *x),
                    ArgValue::UInt(x) => self.enc.uint(DA_UINT, *x),
                    ArgValue::Double(x) => self.enc.double(DA_DOUBLE, *x),
                    ArgValue::Bool(x) => self.enc.uint(DA_BOOL, *x as u64),
                    ArgValue::Str(s) => self.enc.bytes(DA_STRING, trace.str(*s).as_bytes()),
                }
                self.enc.end(e);
            }
            self.enc.end(d);
        }
        if corr != 0 {
            let flow = ((self.seqs[p].id as u64) << 32) | corr as u64;
            match kind {
                SliceKind::Runtime | SliceKind::Driver => self.enc.fixed64(TE_FLOW_IDS, flow),
                k if k.is_gpu_activity() => self.enc.fixed64(TE_TERMINATING_FLOW_IDS, flow),
                _ => {}
            }
        }
        self.enc.end(te);
        self.enc.end(at);
        let s = &mut self.seqs[p];
        s.last_ts = s.last_ts.max(start);
        self.maybe_flush()
    }

    fn annotate_str_iid(&mut self, name: u32, iid: u32) {
        let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
        self.enc.uint(DA_NAME_IID, name as u64);
        self.enc.uint(DA_STRING_VALUE_IID, iid as u64);
        self.enc.end(d);
    }

    fn annotate_uint(&mut self, name: u32, v: u64) {
        let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
        self.enc.uint(DA_NAME_IID, name as u64);
        self.enc.uint(DA_UINT, v);
        self.enc.end(d);
    }

    fn annotate_bool(&mut self, name: u32, v: bool) {
        let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
        self.enc.uint(DA_NAME_IID, name as u64);
        self.enc.uint(DA_BOOL, v as u64);
        self.enc.end(d);
    }

    /// Event-name iid of `name` on process `p`'s sequence, interning it with
    /// a packet of its own the first time.
    fn intern_name(&mut self, trace: &Trace, p: usize, name: StrId) -> u32 {
        let seq = &mut self.seqs[p];
        let idx = name.index();
        if idx >= seq.name_iid.len() {
            seq.name_iid.resize(idx + 1, 0);
        }
        if seq.name_iid[idx] != 0 {
            return seq.name_iid[idx];
        }
        let iid = seq.next_name_iid;
        seq.next_name_iid += 1;
        seq.name_iid[idx] = iid;
        let at = self.packet(p, None, true);
        let inter = self.enc.begin(PKT_INTERNED_DATA);
        let e = self.enc.begin(INTERNED_EVENT_NAMES);
        self.enc.uint(1, iid as u64);
        self.enc.bytes(2, trace.str(name).as_bytes());
        self.enc.end(e);
        self.enc.end(inter);
        self.enc.end(at);
        iid
    }

    /// Grid and block text iids of launch configuration `index`.
    fn launch_iids(&mut self, p: usize, index: usize, lc: &LaunchConfig) -> (u32, u32) {
        if let Some(&(g, b)) = self.seqs[p].launch_iids.get(index) {
            if g != 0 {
                return (g, b);
            }
        }
        let grid = format!("{}x{}x{}", lc.grid[0], lc.grid[1], lc.grid[2]);
        let block = format!("{}x{}x{}", lc.block[0], lc.block[1], lc.block[2]);
        let ids = (self.text_iid(p, grid), self.text_iid(p, block));
        let cache = &mut self.seqs[p].launch_iids;
        if cache.len() <= index {
            cache.resize(index + 1, (0, 0));
        }
        cache[index] = ids;
        ids
    }

    /// Interned string-value iid of a text on process `p`'s sequence,
    /// interning it with a packet of its own the first time (so call it
    /// before opening the event's packet).
    fn text_iid(&mut self, p: usize, text: String) -> u32 {
        if let Some(&iid) = self.seqs[p].text_iid.get(&text) {
            return iid;
        }
        let seq = &mut self.seqs[p];
        let iid = seq.next_str_iid;
        seq.next_str_iid += 1;
        let at = self.packet(p, None, true);
        let inter = self.enc.begin(PKT_INTERNED_DATA);
        let e = self.enc.begin(INTERNED_DEBUG_ANNOTATION_STRING_VALUES);
        self.enc.uint(1, iid as u64);
        self.enc.bytes(2, text.as_bytes());
        self.enc.end(e);
        self.enc.end(inter);
        self.enc.end(at);
        self.seqs[p].text_iid.insert(text, iid);
        iid
    }

    /// Allocation `i` as a [`ALLOCATION_EVENT`] instant on its thread's track.
    fn allocation(&mut self, trace: &Trace, i: usize) {
        let a = trace.allocations();
        let t = a.track()[i].index();
        let p = trace.tracks()[t].process.index();
        let ordinal = trace
            .devices()
            .get(a.device()[i].index())
            .map_or(0, |d| d.ordinal);
        // Interned before the event's packet opens.
        let site = a.site()[i];
        let site_iid =
            (site != StrId::EMPTY).then(|| self.text_iid(p, trace.str(site).to_string()));
        let at = self.packet(p, Some(a.ts_ns()[i]), true);
        let te = self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TE_TYPE_INSTANT);
        self.enc.uint(TE_TRACK_UUID, track_uuid(p, t));
        self.enc.bytes(TE_NAME, ALLOCATION_EVENT.as_bytes());
        for (k, v) in [
            ("device", ArgValue::UInt(ordinal as u64)),
            ("address", ArgValue::UInt(a.address()[i])),
            ("bytes", ArgValue::Int(a.bytes()[i])),
        ] {
            let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
            self.enc.bytes(DA_NAME, k.as_bytes());
            match v {
                ArgValue::Int(x) => self.enc.int(DA_INT, x),
                ArgValue::UInt(x) => self.enc.uint(DA_UINT, x),
                _ => {}
            }
            self.enc.end(d);
        }
        if let Some(iid) = site_iid {
            let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
            self.enc.bytes(DA_NAME, b"site");
            self.enc.uint(DA_STRING_VALUE_IID, iid as u64);
            self.enc.end(d);
        }
        self.enc.end(te);
        self.enc.end(at);
    }

    fn counter(&mut self, trace: &Trace, i: usize) {
        let c = trace.counters();
        let t = c.track()[i].index();
        let p = trace.tracks()[t].process.index();
        let at = self.packet(p, Some(c.ts_ns()[i]), true);
        let te = self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TE_TYPE_COUNTER);
        self.enc.uint(TE_TRACK_UUID, track_uuid(p, t));
        self.enc.double(TE_DOUBLE_COUNTER_VALUE, c.value()[i]);
        self.enc.end(te);
        self.enc.end(at);
    }

    /// The `streamscope.process` instant: process fields and devices.
    fn process_metadata(&mut self, trace: &Trace, p: usize) {
        let pr = &trace.processes()[p];
        let devices: Vec<&Device> = trace
            .devices()
            .iter()
            .filter(|d| d.process.index() == p)
            .collect();
        let ts = self.seqs[p].last_ts.max(pr.capture_start_ns.unwrap_or(0));
        let name_iid = {
            // Event names are interned from the pool when present; this one is fixed.
            let at = self.packet(p, None, true);
            let iid = self.seqs[p].next_name_iid;
            self.seqs[p].next_name_iid += 1;
            let inter = self.enc.begin(PKT_INTERNED_DATA);
            let e = self.enc.begin(INTERNED_EVENT_NAMES);
            self.enc.uint(1, iid as u64);
            self.enc.bytes(2, PROCESS_METADATA_EVENT.as_bytes());
            self.enc.end(e);
            self.enc.end(inter);
            self.enc.end(at);
            iid
        };
        let at = self.packet(p, Some(ts), true);
        let te = self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TE_TYPE_INSTANT);
        self.enc.uint(TE_TRACK_UUID, self.seqs[p].uuid);
        self.enc.uint(TE_NAME_IID, name_iid as u64);
        let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
        self.enc.uint(DA_NAME_IID, AN_PROCESS as u64);
        let kv = |enc: &mut Enc, k: &str, v: &dyn Fn(&mut Enc)| {
            let e = enc.begin(DA_DICT_ENTRIES);
            enc.bytes(DA_NAME, k.as_bytes());
            v(enc);
            enc.end(e);
        };
        kv(&mut self.enc, "pid", &|e| e.uint(DA_UINT, pr.pid as u64));
        kv(&mut self.enc, "name", &|e| {
            e.bytes(DA_STRING, pr.name.as_bytes())
        });
        if let Some(r) = pr.rank {
            kv(&mut self.enc, "rank", &|e| e.uint(DA_UINT, r as u64));
        }
        if let Some(r) = pr.local_rank {
            kv(&mut self.enc, "local_rank", &|e| e.uint(DA_UINT, r as u64));
        }
        if let Some(r) = pr.world_size {
            kv(&mut self.enc, "world_size", &|e| e.uint(DA_UINT, r as u64));
        }
        kv(&mut self.enc, "hostname", &|e| {
            e.bytes(DA_STRING, pr.hostname.as_bytes())
        });
        kv(&mut self.enc, "cmdline", &|e| {
            e.bytes(DA_STRING, pr.cmdline.as_bytes())
        });
        kv(&mut self.enc, "clock", &|e| {
            e.bytes(DA_STRING, pr.clock.name().as_bytes())
        });
        kv(&mut self.enc, "dropped_records", &|e| {
            e.uint(DA_UINT, pr.dropped_records)
        });
        // Times in the metadata move with the events.
        let off = self.offset_ns;
        if let Some(v) = pr.capture_start_ns {
            kv(&mut self.enc, "capture_start_ns", &|e| {
                e.int(DA_INT, v.saturating_add(off))
            });
        }
        if let Some(v) = pr.capture_end_ns {
            kv(&mut self.enc, "capture_end_ns", &|e| {
                e.int(DA_INT, v.saturating_add(off))
            });
        }
        for (clock, ts) in &pr.clock_snapshot {
            kv(&mut self.enc, &format!("clock_snapshot.{clock}"), &|e| {
                e.int(DA_INT, ts.saturating_add(off))
            });
        }
        if off != 0 {
            kv(&mut self.enc, "meta.time_offset_ns", &|e| {
                e.bytes(DA_STRING, off.to_string().as_bytes())
            });
        }
        for (k, v) in &pr.metadata {
            kv(&mut self.enc, &format!("meta.{k}"), &|e| {
                e.bytes(DA_STRING, v.as_bytes())
            });
        }
        self.enc.end(d);
        for dev in &devices {
            let d = self.enc.begin(TE_DEBUG_ANNOTATIONS);
            self.enc.uint(DA_NAME_IID, AN_DEVICE_PROPS as u64);
            let u = |enc: &mut Enc, k: &str, v: u64| {
                let e = enc.begin(DA_DICT_ENTRIES);
                enc.bytes(DA_NAME, k.as_bytes());
                enc.uint(DA_UINT, v);
                enc.end(e);
            };
            u(&mut self.enc, "ordinal", dev.ordinal as u64);
            let e = self.enc.begin(DA_DICT_ENTRIES);
            self.enc.bytes(DA_NAME, b"name");
            self.enc.bytes(DA_STRING, dev.name.as_bytes());
            self.enc.end(e);
            u(&mut self.enc, "compute_major", dev.compute_major as u64);
            u(&mut self.enc, "compute_minor", dev.compute_minor as u64);
            u(&mut self.enc, "sm_count", dev.sm_count as u64);
            u(&mut self.enc, "warp_size", dev.warp_size as u64);
            u(
                &mut self.enc,
                "max_threads_per_block",
                dev.max_threads_per_block as u64,
            );
            u(
                &mut self.enc,
                "max_threads_per_sm",
                dev.max_threads_per_sm as u64,
            );
            u(
                &mut self.enc,
                "max_blocks_per_sm",
                dev.max_blocks_per_sm as u64,
            );
            u(&mut self.enc, "regs_per_sm", dev.regs_per_sm as u64);
            u(&mut self.enc, "regs_per_block", dev.regs_per_block as u64);
            u(&mut self.enc, "smem_per_sm_bytes", dev.smem_per_sm_bytes);
            u(
                &mut self.enc,
                "smem_per_block_bytes",
                dev.smem_per_block_bytes,
            );
            u(&mut self.enc, "global_mem_bytes", dev.global_mem_bytes);
            self.enc.end(d);
        }
        self.enc.end(te);
        self.enc.end(at);
        self.seqs[p].meta_written = Some((devices.len(), pr.dropped_records));
    }
}

/// Writes a whole model as a Perfetto trace.
/// Times before 0 ns, which Perfetto's unsigned timestamps cannot hold,
/// are written [`time_offset_ns`] later, all of them, so that every
/// duration and distance keeps its meaning.
pub fn write_trace<W: Write>(trace: &Trace, out: W) -> io::Result<W> {
    let mut w = PerfettoWriter::new(out).with_time_offset(time_offset_ns(trace));
    w.write_batch(trace)?;
    w.finish(trace)
}

/// How much later a whole model's times are written: minus its earliest
/// time (slice start, counter sample or capture start) when that is before
/// 0 ns, else 0.
pub fn time_offset_ns(trace: &Trace) -> i64 {
    let earliest = (trace.slices().start_ns().iter())
        .chain(trace.counters().ts_ns())
        .chain(trace.allocations().ts_ns())
        .copied()
        .chain(trace.processes().iter().filter_map(|p| p.capture_start_ns))
        .min()
        .unwrap_or(0);
    earliest.min(0).saturating_neg()
}

/// Writes a whole model to `path`, replacing it (see [`write_new_file`]).
pub fn write_file(trace: &Trace, path: &std::path::Path) -> crate::Result<()> {
    write_new_file(trace, path, true)
}

/// Writes a whole model to `path` through a temporary file renamed into
/// place ([`crate::output::write_atomically`]); an existing `path` is
/// replaced only with `overwrite`. A trace without processes is an error
/// (it would be a 0-byte file).
pub fn write_new_file(trace: &Trace, path: &std::path::Path, overwrite: bool) -> crate::Result<()> {
    crate::output::write_model_file(trace, path, overwrite, |t, w| write_trace(t, w).map(|_| ()))
}
