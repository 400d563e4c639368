//! Streaming Perfetto reader.
//!
//! Decodes the length-delimited packets one at a time from a buffered reader
//! (memory holds one packet plus the model being built). A file cut short
//! loads every whole packet and adds a warning saying where it stopped; a
//! damaged packet is skipped and counted (see [`read_stream`]);
//! a slice whose end was lost is closed at the last timestamp of its
//! sequence, with a warning, so nothing recorded is dropped.
//!
//! It reads back exactly what [`super::writer`] writes (the round-trip tests
//! pin this) and, more loosely, other producers' TrackEvent traces: their
//! tracks become [`TrackKind::Other`] or thread tracks, their slices
//! [`SliceKind::Other`].

use rustc_hash::FxHashMap as HashMap;
use std::io::Read;
use std::path::Path;

use super::schema::*;
use super::wire::{Dec, Val, WireError};
use crate::error::{Result, TraceError};
use crate::model::*;

mod resolve;

/// Reads a plain (not gzip-compressed) Perfetto trace file;
/// [`crate::load::load_file`] reads either.
pub fn read_file(path: &Path) -> Result<Trace> {
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    read_stream(path, f)
}

/// Reads a Perfetto trace from `input` (`path` names it in errors).
///
/// Reads in 8 MiB chunks and decodes the packets of each chunk in place; a
/// packet that crosses the end of a chunk is moved to the front before the
/// next read, so memory holds one chunk (or one larger packet).
///
/// Damage costs the damaged packets, not the file: a packet whose content
/// does not decode is skipped (when its framing holds, the next packet
/// starts right after it), and where the framing itself is broken (a bad
/// tag or length) the reader looks for the next well-formed packet that is
/// followed by another one (or the end), as trace_processor counts and
/// skips what it cannot parse. Each is counted in one warning.
pub fn read_stream<R: Read>(path: &Path, mut input: R) -> Result<Trace> {
    let mut r = Reader::new(path);
    let mut buf = vec![0u8; 8 << 20];
    let (mut lo, mut hi) = (0usize, 0usize);
    let mut eof = false;
    let mut base: u64 = 0; // file offset of buf[0]
                           // While looking for the next packet after broken framing: where the
                           // damage began, and whether it began with a packet longer than the rest
                           // of the file (a truncation, unless a good packet follows).
    let mut lost_from: Option<u64> = None;
    let mut cut_at: Option<u64> = None;
    let io = |e| TraceError::io(path, e);
    loop {
        if !eof && hi - lo < 16 {
            refill(
                &mut input, &mut buf, &mut lo, &mut hi, &mut base, &mut eof, 16,
            )
            .map_err(io)?;
        }
        if lo == hi {
            break;
        }
        let start = base + lo as u64;
        if buf[lo] != 0x0a {
            if start == 0 {
                return Err(TraceError::NotATrace {
                    path: path.to_path_buf(),
                    why: format!(
                        "starts with byte 0x{:02x}, not a Perfetto TracePacket (0x0a)",
                        buf[lo]
                    ),
                });
            }
            lost_from.get_or_insert(start);
            lo += 1;
            continue;
        }
        let Some((len, hdr)) = varint_at(&buf[lo + 1..hi]) else {
            if hi - (lo + 1) >= 10 || eof {
                // A runaway length varint (or one cut by the end).
                if eof && lost_from.is_none() {
                    cut_at.get_or_insert(start);
                }
                lost_from.get_or_insert(start);
                lo += 1;
                continue;
            }
            refill(
                &mut input, &mut buf, &mut lo, &mut hi, &mut base, &mut eof, 16,
            )
            .map_err(io)?;
            continue;
        };
        if len > 256 << 20 || (lost_from.is_some() && len > 16 << 20) {
            lost_from.get_or_insert(start);
            lo += 1;
            continue;
        }
        let end = lo + 1 + hdr + len as usize;
        // One byte past the packet shows whether the framing holds.
        if end >= hi && !eof {
            let need = 2 + hdr + len as usize;
            refill(
                &mut input, &mut buf, &mut lo, &mut hi, &mut base, &mut eof, need,
            )
            .map_err(io)?;
            continue;
        }
        if end > hi {
            // Longer than what is left: the file was cut here, or this
            // length is damaged and packets follow.
            if lost_from.is_none() {
                cut_at.get_or_insert(start);
            }
            lost_from.get_or_insert(start);
            lo += 1;
            continue;
        }
        let framed = end == hi || buf[end] == 0x0a;
        let body = &buf[lo + 1 + hdr..end];
        if lost_from.is_some() && !(framed && looks_like_packet(body)) {
            lo += 1;
            continue;
        }
        if let Some(from) = lost_from.take() {
            // Found the thread again: what lay between was damage.
            cut_at = None;
            r.damage(from, start - from);
        }
        match r.packet(body) {
            Ok(()) => {
                r.packets += 1;
                lo = end;
            }
            Err(_) if framed => {
                r.damage(start, (end - lo) as u64);
                lo = end;
            }
            Err(_) => {
                // The content and the framing are both off: its length
                // was damaged. Look for the next packet from here.
                lost_from = Some(start);
                lo += 1;
            }
        }
    }
    if base + hi as u64 == 0 {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    }
    if r.packets == 0 {
        // Not one whole packet: this is no Perfetto trace (a text file that
        // starts with a newline, 0x0a, looks like one for a byte).
        return Err(TraceError::NotATrace {
            path: path.to_path_buf(),
            why: "no whole Perfetto TracePacket in it".into(),
        });
    }
    match (cut_at, lost_from) {
        (Some(at), _) => r.truncated(at),
        (None, Some(from)) => r.damage(from, base + hi as u64 - from),
        (None, None) => {}
    }
    Ok(r.finish())
}

/// Whether `body` (a candidate packet found while looking past damage)
/// parses as a message with a field every TracePacket we read has.
fn looks_like_packet(body: &[u8]) -> bool {
    let mut d = Dec::new(body);
    let mut known = false;
    loop {
        match d.next() {
            Ok(Some((f, _))) => {
                known |= matches!(
                    f,
                    PKT_SEQUENCE_ID | PKT_TIMESTAMP | PKT_TRACK_EVENT | PKT_TRACK_DESCRIPTOR
                );
            }
            Ok(None) => return known,
            Err(_) => return false,
        }
    }
}

/// Moves the unread bytes to the front and reads until at least `need`
/// bytes are buffered or the input ends.
fn refill<R: Read>(
    input: &mut R,
    buf: &mut Vec<u8>,
    lo: &mut usize,
    hi: &mut usize,
    base: &mut u64,
    eof: &mut bool,
    need: usize,
) -> std::io::Result<()> {
    buf.copy_within(*lo..*hi, 0);
    *base += *lo as u64;
    *hi -= *lo;
    *lo = 0;
    if buf.len() < need {
        buf.resize(need.next_power_of_two(), 0);
    }
    while *hi < need.max(buf.len() / 2) && !*eof {
        match input.read(&mut buf[*hi..]) {
            Ok(0) => *eof = true,
            Ok(k) => *hi += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Decodes a varint at the start of `b`: (value, bytes used).
fn varint_at(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &x) in b.iter().take(10).enumerate() {
        v |= ((x & 0x7f) as u64) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// iid -> string id: a vector for the small dense iids writers use, a map
/// for the rest.
#[derive(Default)]
struct IidMap {
    dense: Vec<Option<StrId>>,
    sparse: HashMap<u64, StrId>,
}

impl IidMap {
    fn insert(&mut self, iid: u64, id: StrId) {
        if iid < 1 << 20 {
            let i = iid as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            self.dense[i] = Some(id);
        } else {
            self.sparse.insert(iid, id);
        }
    }
    #[inline]
    fn get(&self, iid: u64) -> Option<StrId> {
        if iid < 1 << 20 {
            self.dense.get(iid as usize).copied().flatten()
        } else {
            self.sparse.get(&iid).copied()
        }
    }
    fn clear(&mut self) {
        self.dense.clear();
        self.sparse.clear();
    }
}

/// Interning state of one packet sequence.
#[derive(Default)]
struct SeqState {
    cleared: bool,
    /// The sequence interned streamscope's reserved annotation names at
    /// their fixed iids (the writer's first packet): its slices' typed
    /// fields are decoded from the first slice on, whatever came before.
    ours: bool,
    /// trace_packet_defaults.track_event_defaults.track_uuid: the track of
    /// events that name none (the Perfetto SDK's thread events).
    default_track_uuid: Option<u64>,
    names: IidMap,
    annotation_names: IidMap,
    string_values: IidMap,
    last_ts: i64,
}

/// A track descriptor as read.
#[derive(Default, Clone)]
struct Desc {
    parent: Option<u64>,
    name: String,
    description: String,
    pid: Option<u32>,
    tid: Option<u32>,
    is_process: bool,
    is_counter: bool,
    process_name: String,
    cmdline: String,
    seen_order: usize,
}

/// Slices open on one track uuid (lanes have their own), and the sequence
/// that wrote them.
struct Slot {
    open: Vec<u32>,
    seq: usize,
}

struct Reader {
    path: std::path::PathBuf,
    trace: TraceBuilder,
    seqs: Vec<SeqState>,
    seq_index: HashMap<u32, usize>,
    last_seq: Option<(u32, usize)>,
    descs: HashMap<u64, Desc>,
    /// uuid -> dense index; slices hold the index until tracks are resolved.
    uuid_index: HashMap<u64, u32>,
    last_uuid: Option<(u64, u32)>,
    launch_cache: [Option<(LaunchConfig, u32)>; 8],
    /// Parsed "AxBxC" launch dimensions by string id.
    dims_cache: Vec<Option<[u32; 3]>>,
    uuids: Vec<u64>,
    slot_of: HashMap<u64, u32>,
    slots: Vec<Slot>,
    last_slot: Option<(u64, u32)>,
    /// slice -> sequence, for closing slices whose end was lost.
    process_meta: HashMap<u64, (Process, Vec<Device>)>,
    dropped_packets: u64,
    unmatched_ends: u64,
    truncated_at: Option<u64>,
    /// Damaged packets (or runs of bytes with broken framing) skipped.
    damaged: u64,
    damaged_bytes: u64,
    first_damage: Option<u64>,
    packets: u64,
    ours: bool,
    /// `streamscope.alloc` instants, placed once tracks and devices are known.
    allocations: Vec<PendingAllocation>,
}

/// An allocation read before its track and device are resolved.
struct PendingAllocation {
    /// Dense uuid index of its track.
    track: u32,
    ordinal: u32,
    ts: i64,
    address: u64,
    bytes: i64,
    /// The Python line that allocated it, when written.
    site: Option<StrId>,
}

impl Reader {
    fn new(path: &Path) -> Self {
        Reader {
            path: path.to_path_buf(),
            trace: TraceBuilder::new(),
            seqs: Vec::new(),
            seq_index: HashMap::default(),
            last_seq: None,
            descs: HashMap::default(),
            uuid_index: HashMap::default(),
            last_uuid: None,
            dims_cache: Vec::new(),
            launch_cache: [None; 8],
            uuids: Vec::new(),
            slot_of: HashMap::default(),
            slots: Vec::new(),
            last_slot: None,
            process_meta: HashMap::default(),
            dropped_packets: 0,
            unmatched_ends: 0,
            truncated_at: None,
            damaged: 0,
            damaged_bytes: 0,
            first_damage: None,
            allocations: Vec::new(),
            packets: 0,
            ours: false,
        }
    }

    fn truncated(&mut self, at: u64) {
        self.truncated_at = Some(at);
    }

    /// Counts `bytes` of damage at `at` that were skipped.
    fn damage(&mut self, at: u64, bytes: u64) {
        self.damaged += 1;
        self.damaged_bytes += bytes;
        self.first_damage.get_or_insert(at);
    }

    #[inline]
    fn seq_idx(&mut self, seq_id: u32) -> usize {
        if let Some((id, i)) = self.last_seq {
            if id == seq_id {
                return i;
            }
        }
        let n = self.seqs.len();
        let i = *self.seq_index.entry(seq_id).or_insert(n);
        if i == n {
            self.seqs.push(SeqState::default());
        }
        self.last_seq = Some((seq_id, i));
        i
    }

    #[inline]
    fn slot(&mut self, uuid: u64, seq: usize) -> usize {
        if let Some((u, i)) = self.last_slot {
            if u == uuid {
                return i as usize;
            }
        }
        let n = self.slots.len() as u32;
        let i = *self.slot_of.entry(uuid).or_insert(n);
        if i == n {
            self.slots.push(Slot {
                open: Vec::new(),
                seq,
            });
        }
        self.last_slot = Some((uuid, i));
        i as usize
    }

    fn uuid_idx(&mut self, uuid: u64) -> u32 {
        if let Some((u, i)) = self.last_uuid {
            if u == uuid {
                return i;
            }
        }
        if let Some(&i) = self.uuid_index.get(&uuid) {
            self.last_uuid = Some((uuid, i));
            return i;
        }
        let i = self.uuids.len() as u32;
        self.uuids.push(uuid);
        self.uuid_index.insert(uuid, i);
        i
    }

    fn packet(&mut self, buf: &[u8]) -> std::result::Result<(), WireError> {
        let mut d = Dec::new(buf);
        let mut ts: Option<i64> = None;
        let mut seq_id = 0u32;
        let mut flags = 0u64;
        let mut track_event: Option<&[u8]> = None;
        let mut interned: Option<&[u8]> = None;
        let mut descriptor: Option<&[u8]> = None;
        let mut defaults: Option<&[u8]> = None;
        while let Some((f, v)) = d.next()? {
            match f {
                PKT_TIMESTAMP => {
                    let t = v.as_u64();
                    if t > i64::MAX as u64 {
                        return Err(WireError {
                            offset: 0,
                            why: "timestamp beyond 2^63 ns",
                        });
                    }
                    ts = Some(t as i64)
                }
                PKT_SEQUENCE_ID => seq_id = v.as_u64() as u32,
                PKT_SEQUENCE_FLAGS => flags = v.as_u64(),
                PKT_TRACK_EVENT => track_event = Some(v.as_bytes()),
                PKT_INTERNED_DATA => interned = Some(v.as_bytes()),
                PKT_TRACK_DESCRIPTOR => descriptor = Some(v.as_bytes()),
                PKT_DEFAULTS => defaults = Some(v.as_bytes()),
                _ => {}
            }
        }
        let sq = self.seq_idx(seq_id);
        if flags & SEQ_INCREMENTAL_STATE_CLEARED != 0 {
            let s = &mut self.seqs[sq];
            s.default_track_uuid = None;
            s.names.clear();
            s.annotation_names.clear();
            s.string_values.clear();
            s.ours = false;
            s.cleared = true;
        }
        if flags & SEQ_NEEDS_INCREMENTAL_STATE != 0 && !self.seqs[sq].cleared {
            self.dropped_packets += 1;
            return Ok(());
        }
        if let Some(b) = defaults {
            let mut d = Dec::new(b);
            while let Some((f, v)) = d.next()? {
                if f == DEFAULTS_TRACK_EVENT_DEFAULTS {
                    let mut e = Dec::new(v.as_bytes());
                    while let Some((ef, ev)) = e.next()? {
                        if ef == TED_TRACK_UUID {
                            self.seqs[sq].default_track_uuid = Some(ev.as_u64());
                        }
                    }
                }
            }
        }
        if let Some(b) = interned {
            self.interned(sq, b)?;
        }
        if let Some(b) = descriptor {
            self.descriptor(b)?;
        }
        if let Some(b) = track_event {
            self.track_event(sq, ts.unwrap_or(0), b)?;
        }
        Ok(())
    }

    fn interned(&mut self, sq: usize, buf: &[u8]) -> std::result::Result<(), WireError> {
        let mut d = Dec::new(buf);
        let mut annotation_names = false;
        while let Some((f, v)) = d.next()? {
            annotation_names |= f == INTERNED_DEBUG_ANNOTATION_NAMES;
            if !matches!(
                f,
                INTERNED_EVENT_NAMES
                    | INTERNED_DEBUG_ANNOTATION_NAMES
                    | INTERNED_DEBUG_ANNOTATION_STRING_VALUES
            ) {
                continue;
            }
            let mut e = Dec::new(v.as_bytes());
            let (mut iid, mut s) = (0u64, "");
            while let Some((ef, ev)) = e.next()? {
                match ef {
                    1 => iid = ev.as_u64(),
                    2 => s = ev.as_str(),
                    _ => {}
                }
            }
            let id = self.trace.intern(s);
            let st = &mut self.seqs[sq];
            let table = match f {
                INTERNED_EVENT_NAMES => &mut st.names,
                INTERNED_DEBUG_ANNOTATION_NAMES => &mut st.annotation_names,
                _ => &mut st.string_values,
            };
            table.insert(iid, id);
        }
        if annotation_names {
            let st = &self.seqs[sq];
            let ours = RESERVED_NAMES.iter().enumerate().all(|(i, n)| {
                st.annotation_names
                    .get(i as u64 + 1)
                    .is_some_and(|id| self.trace.str(id) == *n)
            });
            self.seqs[sq].ours = ours;
            self.ours |= ours;
        }
        Ok(())
    }

    fn descriptor(&mut self, buf: &[u8]) -> std::result::Result<(), WireError> {
        let mut d = Dec::new(buf);
        let mut uuid = 0u64;
        let mut desc = Desc {
            seen_order: self.descs.len(),
            ..Default::default()
        };
        while let Some((f, v)) = d.next()? {
            match f {
                TD_UUID => uuid = v.as_u64(),
                TD_PARENT_UUID => desc.parent = Some(v.as_u64()),
                TD_NAME | TD_STATIC_NAME => desc.name = v.as_str().to_string(),
                TD_DESCRIPTION => desc.description = v.as_str().to_string(),
                TD_COUNTER => desc.is_counter = true,
                TD_PROCESS => {
                    desc.is_process = true;
                    let mut p = Dec::new(v.as_bytes());
                    while let Some((pf, pv)) = p.next()? {
                        match pf {
                            PD_PID => desc.pid = Some(pv.as_u64() as i32 as u32),
                            PD_PROCESS_NAME => desc.process_name = pv.as_str().to_string(),
                            PD_CMDLINE => {
                                if !desc.cmdline.is_empty() {
                                    desc.cmdline.push(' ');
                                }
                                desc.cmdline.push_str(pv.as_str())
                            }
                            _ => {}
                        }
                    }
                }
                TD_THREAD => {
                    let mut t = Dec::new(v.as_bytes());
                    while let Some((tf, tv)) = t.next()? {
                        match tf {
                            THD_PID => desc.pid = Some(tv.as_u64() as i32 as u32),
                            THD_TID => desc.tid = Some(tv.as_u64() as i32 as u32),
                            THD_THREAD_NAME => desc.name = tv.as_str().to_string(),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if desc.description.starts_with("streamscope") {
            self.ours = true;
        }
        // Lane tracks of ours map onto their base track.
        self.last_uuid = None;
        if let Some(base) = desc
            .description
            .strip_prefix("streamscope lane=")
            .and_then(|s| s.split(" of=").nth(1))
        {
            if let Ok(base) = base.parse::<u64>() {
                let i = self.uuid_idx(base);
                self.uuid_index.insert(uuid, i);
                return Ok(());
            }
        }
        self.uuid_idx(uuid);
        self.descs.entry(uuid).or_insert(desc);
        Ok(())
    }

    fn track_event(
        &mut self,
        sq: usize,
        ts: i64,
        buf: &[u8],
    ) -> std::result::Result<(), WireError> {
        let mut d = Dec::new(buf);
        let mut ty = 0u64;
        let mut uuid = self.seqs[sq].default_track_uuid.unwrap_or(0);
        let mut name: Option<StrId> = None;
        let mut counter_value = None;
        // Annotation messages, kept from the first pass (a kernel has about
        // a dozen); more than fit are decoded by a second pass.
        let mut anns: [&[u8]; 24] = [&[]; 24];
        let mut n_anns = 0usize;
        while let Some((f, v)) = d.next()? {
            match f {
                TE_TYPE => ty = v.as_u64(),
                TE_TRACK_UUID => uuid = v.as_u64(),
                TE_NAME_IID => name = self.seqs[sq].names.get(v.as_u64()),
                TE_NAME => name = Some(self.trace.intern(v.as_str())),
                TE_DEBUG_ANNOTATIONS => {
                    if n_anns < anns.len() {
                        anns[n_anns] = v.as_bytes();
                    }
                    n_anns += 1;
                }
                TE_COUNTER_VALUE => counter_value = Some(v.as_u64() as i64 as f64),
                TE_DOUBLE_COUNTER_VALUE => counter_value = Some(v.as_f64()),
                _ => {}
            }
        }
        let st = &mut self.seqs[sq];
        st.last_ts = st.last_ts.max(ts);
        let slot = self.slot(uuid, sq);
        match ty {
            TE_TYPE_SLICE_END => match self.slots[slot].open.pop() {
                Some(i) => {
                    self.trace.end_slice(SliceId::from_index(i as usize), ts);
                }
                None => self.unmatched_ends += 1,
            },
            TE_TYPE_COUNTER => {
                if let Some(v) = counter_value {
                    let idx = self.uuid_idx(uuid);
                    self.trace
                        .push_counter(TrackId::from_index(idx as usize), ts, v);
                }
            }
            TE_TYPE_SLICE_BEGIN | TE_TYPE_INSTANT => {
                let name = name.unwrap_or(StrId::EMPTY);
                if ty == TE_TYPE_INSTANT && self.trace.str(name) == PROCESS_METADATA_EVENT {
                    let mut anns = Vec::new();
                    let mut d = Dec::new(buf);
                    while let Some((f, v)) = d.next()? {
                        if f == TE_DEBUG_ANNOTATIONS {
                            anns.push(v.as_bytes());
                        }
                    }
                    return self.process_metadata(uuid, sq, &anns);
                }
                if ty == TE_TYPE_INSTANT && self.trace.str(name) == ALLOCATION_EVENT {
                    return self.allocation(uuid, sq, ts, &anns[..n_anns.min(anns.len())]);
                }
                let mut g = GpuFields::default();
                let mut args: ArgSet = Vec::new();
                if n_anns <= anns.len() {
                    for a in &anns[..n_anns] {
                        self.annotation(sq, a, &mut g, &mut args)?;
                    }
                } else {
                    let mut d = Dec::new(buf);
                    while let Some((f, v)) = d.next()? {
                        if f == TE_DEBUG_ANNOTATIONS {
                            self.annotation(sq, v.as_bytes(), &mut g, &mut args)?;
                        }
                    }
                }
                let payload = match g.kind {
                    SliceKind::Kernel if g.has_launch => {
                        // Kernels cycle through a few launch configurations:
                        // a small cache saves most hash lookups.
                        let slot = (g.launch.grid[0]
                            ^ g.launch.block[0].rotate_left(5)
                            ^ g.launch.registers_per_thread)
                            as usize
                            % 8;
                        match self.launch_cache[slot] {
                            Some((lc, idx)) if lc == g.launch => idx,
                            _ => {
                                let idx = self.trace.intern_launch(g.launch);
                                self.launch_cache[slot] = Some((g.launch, idx));
                                idx
                            }
                        }
                    }
                    SliceKind::Memcpy | SliceKind::Memset => self.trace.intern_copy(g.copy),
                    _ => NO_PAYLOAD,
                };
                let args = self.trace.push_args(&args);
                let idx = self.uuid_idx(uuid);
                let id = self.trace.push_slice_raw(
                    TrackId::from_index(idx as usize),
                    ts,
                    0,
                    name,
                    g.kind,
                    g.class,
                    g.correlation,
                    payload,
                    args,
                );
                if ty == TE_TYPE_SLICE_BEGIN {
                    self.slots[slot].open.push(id.get());
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// One top-level debug annotation of a slice.
    fn annotation(
        &mut self,
        sq: usize,
        buf: &[u8],
        g: &mut GpuFields,
        args: &mut ArgSet,
    ) -> std::result::Result<(), WireError> {
        let mut d = Dec::new(buf);
        let mut name_iid = None;
        let mut name: Option<StrId> = None;
        let mut value: Option<(u32, Val)> = None;
        let mut dict = false;
        while let Some((f, v)) = d.next()? {
            match f {
                DA_NAME_IID => name_iid = Some(v.as_u64()),
                DA_NAME => name = Some(self.trace.intern(v.as_str())),
                DA_BOOL | DA_UINT | DA_INT | DA_DOUBLE | DA_STRING | DA_STRING_VALUE_IID => {
                    value = Some((f, v))
                }
                DA_DICT_ENTRIES => dict = true,
                _ => {}
            }
        }
        // Reserved names of ours have fixed iids on our sequences.
        let fixed = if (self.seqs[sq].ours || self.ours) && name.is_none() {
            name_iid.map(|i| i as u32)
        } else {
            None
        };
        match fixed {
            Some(AN_ARGS) if dict => {
                let mut d = Dec::new(buf);
                while let Some((f, v)) = d.next()? {
                    if f == DA_DICT_ENTRIES {
                        if let Some(kv) = self.plain_annotation(sq, v.as_bytes())? {
                            args.push(kv);
                        }
                    }
                }
                return Ok(());
            }
            Some(n @ AN_KIND..=AN_PAGEABLE) => {
                let (vk, val) = value.unwrap_or((0, Val::Varint(0)));
                let v = val.as_u64();
                let text = || {
                    if vk == DA_STRING_VALUE_IID && v >= 1 {
                        FIXED_STRING_VALUES
                            .get(v as usize - 1)
                            .copied()
                            .unwrap_or("")
                    } else {
                        ""
                    }
                };
                match n {
                    // The fixed values are interned in enum order (schema.rs).
                    AN_KIND if vk == DA_STRING_VALUE_IID && (1..=10).contains(&v) => {
                        g.kind = SliceKind::from_u8(v as u8 - 1)
                    }
                    AN_CLASS if vk == DA_STRING_VALUE_IID && (11..=14).contains(&v) => {
                        g.class = SliceClass::from_u8(v as u8 - 11)
                    }
                    AN_KIND => g.kind = SliceKind::from_name(text()).unwrap_or(SliceKind::Other),
                    AN_CLASS => g.class = SliceClass::from_name(text()).unwrap_or(SliceClass::None),
                    AN_CORRELATION => g.correlation = v as u32,
                    AN_GRID | AN_BLOCK => {
                        let t = self.seqs[sq].string_values.get(v).unwrap_or(StrId::EMPTY);
                        let dims = match self.dims_cache.get(t.index()) {
                            Some(Some(d)) => *d,
                            _ => {
                                let d = parse_dims(self.trace.str(t));
                                let i = t.index();
                                if self.dims_cache.len() <= i {
                                    self.dims_cache.resize(i + 1, None);
                                }
                                self.dims_cache[i] = Some(d);
                                d
                            }
                        };
                        if n == AN_GRID {
                            g.launch.grid = dims;
                        } else {
                            g.launch.block = dims;
                        }
                        g.has_launch = true;
                    }
                    AN_REGISTERS => g.launch.registers_per_thread = v as u32,
                    AN_STATIC_SMEM => g.launch.static_smem_bytes = v as u32,
                    AN_DYNAMIC_SMEM => g.launch.dynamic_smem_bytes = v as u32,
                    AN_BYTES => g.copy.bytes = v,
                    AN_COPY_KIND => g.copy.kind = CopyKind::from_name(text()),
                    AN_PAGEABLE => g.copy.pageable = v != 0,
                    _ => {} // device and stream come from the track
                }
                return Ok(());
            }
            _ => {}
        }
        // A foreign annotation: keep it as an argument.
        let key = match (name, name_iid) {
            (Some(n), _) => n,
            (None, Some(i)) => match self.seqs[sq].annotation_names.get(i) {
                Some(n) => n,
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        if let Some(v) = value.and_then(|(f, v)| self.arg_value(sq, f, v)) {
            args.push((key, v));
        }
        Ok(())
    }

    /// A dict entry of ours: a named scalar.
    fn plain_annotation(
        &mut self,
        sq: usize,
        buf: &[u8],
    ) -> std::result::Result<Option<(StrId, ArgValue)>, WireError> {
        let mut d = Dec::new(buf);
        let mut name = None;
        let mut value = None;
        while let Some((f, v)) = d.next()? {
            match f {
                DA_NAME => name = Some(self.trace.intern(v.as_str())),
                DA_NAME_IID => name = self.seqs[sq].annotation_names.get(v.as_u64()),
                DA_BOOL | DA_UINT | DA_INT | DA_DOUBLE | DA_STRING | DA_STRING_VALUE_IID => {
                    value = Some((f, v))
                }
                _ => {}
            }
        }
        Ok(match (name, value) {
            (Some(n), Some((f, v))) => self.arg_value(sq, f, v).map(|v| (n, v)),
            _ => None,
        })
    }

    fn arg_value(&mut self, sq: usize, field: u32, v: Val) -> Option<ArgValue> {
        Some(match field {
            DA_BOOL => ArgValue::Bool(v.as_u64() != 0),
            DA_UINT => ArgValue::UInt(v.as_u64()),
            DA_INT => ArgValue::Int(v.as_u64() as i64),
            DA_DOUBLE => ArgValue::Double(v.as_f64()),
            DA_STRING => ArgValue::Str(self.trace.intern(v.as_str())),
            DA_STRING_VALUE_IID => ArgValue::Str(self.seqs[sq].string_values.get(v.as_u64())?),
            _ => return None,
        })
    }

    /// A `streamscope.alloc` instant: one allocation, kept until its track
    /// and device are resolved. One without an address or bytes is skipped.
    fn allocation(
        &mut self,
        uuid: u64,
        sq: usize,
        ts: i64,
        annotations: &[&[u8]],
    ) -> std::result::Result<(), WireError> {
        let (mut ordinal, mut address, mut bytes, mut site) = (0u32, None, None, None);
        for a in annotations {
            if let Some((k, v)) = self.plain_annotation(sq, a)? {
                if let ArgValue::Str(s) = v {
                    if self.trace.str(k) == "site" && s != StrId::EMPTY {
                        site = Some(s);
                    }
                    continue;
                }
                let n = match v {
                    ArgValue::UInt(x) => x as i64,
                    ArgValue::Int(x) => x,
                    _ => continue,
                };
                match self.trace.str(k) {
                    "device" => ordinal = u32::try_from(n).unwrap_or(0),
                    "address" => address = Some(n as u64),
                    "bytes" => bytes = Some(n),
                    _ => {}
                }
            }
        }
        if let (Some(address), Some(bytes)) = (address, bytes) {
            let track = self.uuid_idx(uuid);
            self.allocations.push(PendingAllocation {
                track,
                ordinal,
                ts,
                address,
                bytes,
                site,
            });
        }
        Ok(())
    }

    /// The `streamscope.process` instant: process fields and devices.
    fn process_metadata(
        &mut self,
        uuid: u64,
        sq: usize,
        annotations: &[&[u8]],
    ) -> std::result::Result<(), WireError> {
        self.ours = true;
        let mut p = Process::default();
        let mut devices = Vec::new();
        for a in annotations {
            let mut d = Dec::new(a);
            let mut name_iid = 0u64;
            let mut entries = Vec::new();
            while let Some((f, v)) = d.next()? {
                match f {
                    DA_NAME_IID => name_iid = v.as_u64(),
                    DA_DICT_ENTRIES => entries.push(v.as_bytes()),
                    _ => {}
                }
            }
            let mut kv: Vec<(String, ArgValue)> = Vec::new();
            for e in entries {
                if let Some((k, v)) = self.plain_annotation(sq, e)? {
                    kv.push((self.trace.str(k).to_string(), v));
                }
            }
            let text = |v: &ArgValue, t: &TraceBuilder| match v {
                ArgValue::Str(s) => t.str(*s).to_string(),
                other => t.arg_value_string(other),
            };
            let num = |v: &ArgValue| match v {
                ArgValue::UInt(x) => *x as i64,
                ArgValue::Int(x) => *x,
                _ => 0,
            };
            match name_iid as u32 {
                AN_PROCESS => {
                    for (k, v) in &kv {
                        match k.as_str() {
                            "pid" => p.pid = num(v) as u32,
                            "name" => p.name = text(v, &self.trace),
                            "rank" => p.rank = Some(num(v) as u32),
                            "local_rank" => p.local_rank = Some(num(v) as u32),
                            "world_size" => p.world_size = Some(num(v) as u32),
                            "hostname" => p.hostname = text(v, &self.trace),
                            "cmdline" => p.cmdline = text(v, &self.trace),
                            "clock" => {
                                p.clock = match text(v, &self.trace).as_str() {
                                    "realtime" => ClockDomain::Realtime,
                                    "monotonic" => ClockDomain::Monotonic,
                                    _ => ClockDomain::Boottime,
                                }
                            }
                            "dropped_records" => p.dropped_records = num(v) as u64,
                            "capture_start_ns" => p.capture_start_ns = Some(num(v)),
                            "capture_end_ns" => p.capture_end_ns = Some(num(v)),
                            k => {
                                if let Some(c) = k.strip_prefix("clock_snapshot.") {
                                    p.clock_snapshot.push((c.parse().unwrap_or(0), num(v)));
                                } else if let Some(m) = k.strip_prefix("meta.") {
                                    p.metadata.push((m.to_string(), text(v, &self.trace)));
                                }
                            }
                        }
                    }
                }
                AN_DEVICE_PROPS => {
                    let mut dev = Device::default();
                    for (k, v) in &kv {
                        let n = num(v);
                        match k.as_str() {
                            "ordinal" => dev.ordinal = n as u32,
                            "name" => dev.name = text(v, &self.trace),
                            "compute_major" => dev.compute_major = n as u32,
                            "compute_minor" => dev.compute_minor = n as u32,
                            "sm_count" => dev.sm_count = n as u32,
                            "warp_size" => dev.warp_size = n as u32,
                            "max_threads_per_block" => dev.max_threads_per_block = n as u32,
                            "max_threads_per_sm" => dev.max_threads_per_sm = n as u32,
                            "max_blocks_per_sm" => dev.max_blocks_per_sm = n as u32,
                            "regs_per_sm" => dev.regs_per_sm = n as u32,
                            "regs_per_block" => dev.regs_per_block = n as u32,
                            "smem_per_sm_bytes" => dev.smem_per_sm_bytes = n as u64,
                            "smem_per_block_bytes" => dev.smem_per_block_bytes = n as u64,
                            "global_mem_bytes" => dev.global_mem_bytes = n as u64,
                            _ => {}
                        }
                    }
                    devices.push(dev);
                }
                _ => {}
            }
        }
        // The last metadata event of a process wins (it has the final counts).
        self.process_meta.insert(uuid, (p, devices));
        Ok(())
    }
}

/// Typed fields of a slice, from our reserved annotations.
struct GpuFields {
    kind: SliceKind,
    class: SliceClass,
    correlation: u32,
    launch: LaunchConfig,
    has_launch: bool,
    copy: CopyInfo,
}

impl Default for GpuFields {
    fn default() -> Self {
        GpuFields {
            kind: SliceKind::Other,
            class: SliceClass::None,
            correlation: 0,
            launch: LaunchConfig::default(),
            has_launch: false,
            copy: CopyInfo {
                bytes: 0,
                kind: CopyKind::Unknown,
                pageable: false,
            },
        }
    }
}

fn parse_dims(s: &str) -> [u32; 3] {
    let mut out = [0u32; 3];
    for (i, p) in s.split('x').take(3).enumerate() {
        out[i] = p.parse().unwrap_or(0);
    }
    out
}
