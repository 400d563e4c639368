//! The end of a read: slices left open closed, processes, devices and
//! tracks made from the descriptors, the events moved onto their tracks,
//! and what was found wrong with the file reported.

use crate::diagnostic::{Diagnostic, Kind};
use crate::model::*;
use rustc_hash::FxHashMap as HashMap;

use super::{Desc, Reader};

/// The processes and devices added so far, for placing tracks.
#[derive(Default)]
struct Owners {
    of_uuid: HashMap<u64, ProcessId>,
    of_pid: HashMap<u32, ProcessId>,
    device_of: HashMap<(ProcessId, u32), DeviceId>,
    /// "unknown process", added when first needed.
    fallback: Option<ProcessId>,
}

impl Owners {
    /// The process of tracks that belong to none.
    fn fallback(&mut self, trace: &mut TraceBuilder) -> ProcessId {
        *self.fallback.get_or_insert_with(|| {
            trace.add_process(Process {
                name: "unknown process".into(),
                ..Default::default()
            })
        })
    }

    /// Device `ord` (0 when unnamed) of `process`, added when unknown.
    fn device(&mut self, process: ProcessId, ord: Option<u32>, t: &mut TraceBuilder) -> DeviceId {
        let ord = ord.unwrap_or(0);
        *self.device_of.entry((process, ord)).or_insert_with(|| {
            t.add_device(Device {
                process,
                ordinal: ord,
                name: "unknown".into(),
                ..Default::default()
            })
        })
    }

    /// The process of track `uuid`: the process descriptor above it, or
    /// the process of the first thread's pid above it.
    fn find_process(&self, uuid: u64, descs: &HashMap<u64, Desc>) -> Option<ProcessId> {
        let mut u = uuid;
        for _ in 0..64 {
            let d = descs.get(&u)?;
            if d.is_process {
                return self.of_uuid.get(&u).copied();
            }
            if d.tid.is_some() {
                if let Some(p) = d.pid.and_then(|pid| self.of_pid.get(&pid)) {
                    return Some(*p);
                }
            }
            u = d.parent?;
        }
        None
    }
}

impl Reader {
    /// Resolves tracks, processes and devices, closes what was left open.
    pub(super) fn finish(mut self) -> Trace {
        let unterminated = self.close_open_slices();
        let offset = self.undo_time_offset();
        let mut owners = self.add_processes();
        self.add_orphan_processes(&mut owners);
        let order = self.track_order();
        let mut track_of_index = self.add_tracks(&order, &mut owners);
        self.link_track_parents(&order, &track_of_index);
        self.place_events(&mut track_of_index, &mut owners);
        if offset != 0 {
            self.trace.shift_events(-offset);
        }
        self.push_read_diagnostics(unterminated);
        self.trace.finish()
    }

    /// A trace our writer shifted later (times before 0 ns: see
    /// `perfetto::time_offset_ns`) says by how much in its processes'
    /// `time_offset_ns`: the processes' times are moved back here (the
    /// events after they are placed), and the key is dropped, so the
    /// model reads as it was written and a re-export shifts it again.
    fn undo_time_offset(&mut self) -> i64 {
        let offset = self
            .process_meta
            .values()
            .filter_map(|(p, _)| {
                p.metadata
                    .iter()
                    .find(|(k, _)| k == "time_offset_ns")
                    .and_then(|(_, v)| v.trim().parse::<i64>().ok())
            })
            .find(|&o| o > 0)
            .unwrap_or(0);
        if offset == 0 {
            return 0;
        }
        for (p, _) in self.process_meta.values_mut() {
            p.metadata.retain(|(k, _)| k != "time_offset_ns");
            for b in [&mut p.capture_start_ns, &mut p.capture_end_ns]
                .into_iter()
                .flatten()
            {
                *b = b.saturating_sub(offset);
            }
            for (_, ts) in &mut p.clock_snapshot {
                *ts = ts.saturating_sub(offset);
            }
        }
        offset
    }

    /// Slices whose end was lost: closes them at the last timestamp seen
    /// on their sequence; returns how many.
    fn close_open_slices(&mut self) -> u64 {
        let mut unterminated = 0u64;
        for slot in std::mem::take(&mut self.slots) {
            let last = self.seqs[slot.seq].last_ts;
            for i in slot.open {
                self.trace.end_slice(SliceId::from_index(i as usize), last);
                unterminated += 1;
            }
        }
        unterminated
    }

    /// Processes: one per process descriptor, in uuid order for our files
    /// (the writer numbers them), else in the order seen; with the devices
    /// of their metadata.
    fn add_processes(&mut self) -> Owners {
        let mut proc_uuids: Vec<u64> = self
            .descs
            .iter()
            .filter(|(_, d)| d.is_process)
            .map(|(u, _)| *u)
            .collect();
        if self.ours {
            proc_uuids.sort_unstable();
        } else {
            proc_uuids.sort_by_key(|u| self.descs[u].seen_order);
        }
        let mut owners = Owners::default();
        for u in &proc_uuids {
            let d = &self.descs[u];
            let (mut p, devices) = self.process_meta.remove(u).unwrap_or_default();
            if p.pid == 0 {
                p.pid = d.pid.unwrap_or(0);
            }
            if p.name.is_empty() && !self.ours {
                p.name = d.process_name.clone();
            }
            if p.cmdline.is_empty() && !self.ours {
                p.cmdline = d.cmdline.clone();
            }
            let pi = self.trace.add_process(p);
            for mut dev in devices {
                dev.process = pi;
                let ord = dev.ordinal;
                let di = self.trace.add_device(dev);
                owners.device_of.insert((pi, ord), di);
            }
            owners.of_uuid.insert(*u, pi);
            if let Some(pid) = d.pid {
                owners.of_pid.entry(pid).or_insert(pi);
            }
        }
        owners
    }

    /// Threads whose pid has no process descriptor still get a process of
    /// their own pid (not one shared "unknown" process).
    fn add_orphan_processes(&mut self, owners: &mut Owners) {
        let mut orphan_pids: Vec<u32> = self
            .descs
            .values()
            .filter(|d| d.tid.is_some())
            .filter_map(|d| d.pid)
            .filter(|pid| !owners.of_pid.contains_key(pid))
            .collect();
        orphan_pids.sort_unstable();
        orphan_pids.dedup();
        for pid in orphan_pids {
            let pi = self.trace.add_process(Process {
                pid,
                name: format!("pid {pid}"),
                ..Default::default()
            });
            owners.of_pid.insert(pid, pi);
        }
    }

    /// Tracks: every uuid that is a descriptor (not a process) or that
    /// events used without a descriptor, as (sort key, dense index) in
    /// track order.
    fn track_order(&self) -> Vec<(u64, u32)> {
        let mut order: Vec<(u64, u32)> = Vec::new();
        for (i, &uuid) in self.uuids.iter().enumerate() {
            if self.uuid_index.get(&uuid) != Some(&(i as u32)) {
                continue;
            }
            if self.descs.get(&uuid).is_some_and(|d| d.is_process) {
                continue;
            }
            let key = match self.descs.get(&uuid) {
                Some(_) if self.ours => uuid & 0xffff_ffff,
                Some(d) => d.seen_order as u64,
                None => u64::MAX - (self.uuids.len() - i) as u64,
            };
            order.push((key, i as u32));
        }
        order.sort_unstable();
        order
    }

    /// Adds the tracks of `order`, their kind from the descriptor; returns
    /// the track of each dense uuid index (none for process tracks yet).
    fn add_tracks(&mut self, order: &[(u64, u32)], owners: &mut Owners) -> Vec<Option<TrackId>> {
        let mut track_of_index: Vec<Option<TrackId>> = vec![None; self.uuids.len()];
        // Process tracks keep their events (metadata only for ours): foreign
        // events on a process track go to a track named after the process.
        for &(_, i) in order {
            let uuid = self.uuids[i as usize];
            let desc = self.descs.get(&uuid).cloned().unwrap_or_default();
            let process = match owners.find_process(uuid, &self.descs) {
                Some(p) => p,
                None => owners.fallback(&mut self.trace),
            };
            let field = |key: &str| -> Option<u32> {
                desc.description
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .and_then(|v| v.parse().ok())
            };
            let kind = if let Some(tid) = desc.tid {
                TrackKind::Thread { tid }
            } else if desc.description.starts_with("streamscope gpu") {
                TrackKind::Gpu {
                    device: owners.device(process, field("device="), &mut self.trace),
                }
            } else if desc.description.starts_with("streamscope stream") {
                TrackKind::Stream {
                    device: owners.device(process, field("device="), &mut self.trace),
                    stream: field("stream=").unwrap_or(0),
                }
            } else if desc.description.starts_with("streamscope counter") {
                TrackKind::Counter {
                    device: field("device=")
                        .map(|o| owners.device(process, Some(o), &mut self.trace)),
                }
            } else if desc.is_counter {
                TrackKind::Counter { device: None }
            } else {
                TrackKind::Other
            };
            let name = if desc.name.is_empty() {
                format!("track {uuid}")
            } else {
                desc.name.clone()
            };
            let id = self.trace.add_track(process, None, kind, &name);
            track_of_index[i as usize] = Some(id);
        }
        track_of_index
    }

    /// Parents (after all tracks exist); parent loops are broken and
    /// reported.
    fn link_track_parents(&mut self, order: &[(u64, u32)], track_of_index: &[Option<TrackId>]) {
        for &(_, i) in order {
            let uuid = self.uuids[i as usize];
            let Some(id) = track_of_index[i as usize] else {
                continue;
            };
            let parent = self.descs.get(&uuid).and_then(|d| d.parent);
            if let Some(pu) = parent {
                if let Some(&pi) = self.uuid_index.get(&pu) {
                    self.trace.set_track_parent(id, track_of_index[pi as usize]);
                }
            }
        }
        let loops = self.trace.break_parent_cycles();
        if loops > 0 {
            self.trace.push_diagnostic(
                Diagnostic::new(
                    Kind::TrackParentLoop,
                    loops as u64,
                    format!("{loops} track descriptors whose parents form a loop; shown at the top level"),
                )
                .in_file(self.path.display()),
            );
        }
    }

    /// Moves the events from uuid indices onto their tracks, links flows
    /// and attaches the NCCL plugin's operations to their kernels.
    fn place_events(&mut self, track_of_index: &mut [Option<TrackId>], owners: &mut Owners) {
        // Events on process tracks (foreign traces) or on uuids without a
        // descriptor: give them a track of their own.
        let mut track_for = |i: usize, trace: &mut TraceBuilder| -> TrackId {
            if let Some(t) = track_of_index[i] {
                return t;
            }
            let uuid = self.uuids[i];
            let process = match owners.of_uuid.get(&uuid).copied() {
                Some(p) => p,
                None => owners.fallback(trace),
            };
            let t = trace.add_track(process, None, TrackKind::Other, "process events");
            track_of_index[i] = Some(t);
            t
        };
        // Tracks for every uuid index an event uses, then the events onto them.
        for s in 0..self.trace.slices().len() {
            let i = self.trace.slices().track()[s].index();
            track_for(i, &mut self.trace);
        }
        for c in 0..self.trace.counters().len() {
            let i = self.trace.counters().track()[c].index();
            track_for(i, &mut self.trace);
        }
        // Allocations: their thread's track, their process's device.
        let pending = std::mem::take(&mut self.allocations);
        let processes: Vec<ProcessId> = pending
            .iter()
            .map(|a| {
                let t = track_for(a.track as usize, &mut self.trace);
                self.trace.tracks()[t.index()].process
            })
            .collect();
        for (a, process) in pending.into_iter().zip(processes) {
            let device = owners.device(process, Some(a.ordinal), &mut self.trace);
            self.trace.push_allocation(
                TrackId::from_index(a.track as usize),
                device,
                a.ts,
                a.address,
                a.bytes,
                a.site,
            );
        }
        self.trace
            .map_event_tracks(|t| track_of_index[t.index()].unwrap_or(t));
        self.trace.link_flows_by_correlation();
        // The NCCL profiler plugin's operations describe their kernels.
        crate::comms::attach_plugin_operations(&mut self.trace);
    }

    /// One diagnostic per kind of damage met while reading.
    fn push_read_diagnostics(&mut self, unterminated: u64) {
        let mut found = Vec::new();
        if let Some(at) = self.truncated_at {
            found.push((
                Kind::Truncated,
                1,
                format!(
                    "truncated at byte {at}: loaded the {} whole packets before it",
                    self.packets
                ),
            ));
        }
        if self.damaged > 0 {
            found.push((
                Kind::DamagedPackets,
                self.damaged,
                format!(
                    "skipped {} damaged packets ({} bytes, the first at byte {}); loaded the rest",
                    self.damaged,
                    self.damaged_bytes,
                    self.first_damage.unwrap_or(0)
                ),
            ));
        }
        if unterminated > 0 {
            found.push((
                Kind::UnterminatedSlices,
                unterminated,
                format!("{unterminated} slices had no end; closed at the last timestamp of their sequence"),
            ));
        }
        if self.dropped_packets > 0 {
            found.push((
                Kind::IncrementalStateLost,
                self.dropped_packets,
                format!(
                    "{} packets needed incremental state their sequence never cleared; skipped",
                    self.dropped_packets
                ),
            ));
        }
        if self.unmatched_ends > 0 {
            found.push((
                Kind::UnmatchedSliceEnds,
                self.unmatched_ends,
                format!("{} slice ends had no matching begin", self.unmatched_ends),
            ));
        }
        let path = self.path.display().to_string();
        for (kind, count, detail) in found {
            self.trace
                .push_diagnostic(Diagnostic::new(kind, count, detail).in_file(&path));
        }
    }
}
