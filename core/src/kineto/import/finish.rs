//! The end of an import: what only the whole file tells (host pid, time
//! base, device properties, thread names), then flows and slice order.

use crate::diagnostic::{Diagnostic, Kind};
use serde_json::Value;

use super::Builder;
use crate::kineto::category::Cat;
use crate::kineto::devices::parse_device_properties;
use crate::kineto::document::TopInfo;
use crate::kineto::order::reorder;
use crate::kineto::process::describe_process;
use crate::kineto::time::ns_text_to_ns;
use crate::model::{Device, Trace, TrackId, TrackKind};

use super::HOST;

impl Builder {
    /// The host process: the pid most host-side events carry (GPU rows use
    /// the device ordinal as pid), ties to the smaller pid; else the pid
    /// labelled "CPU".
    fn host_pid(&self) -> i64 {
        self.host_events
            .iter()
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
            .map(|(p, _)| *p)
            .or(self.cpu_labelled)
            .unwrap_or(0)
    }

    pub(super) fn finish(mut self, info: &TopInfo) -> Trace {
        let host_pid = self.host_pid();
        for e in std::mem::take(&mut self.deferred) {
            if let Some(place) = self.place_deferred(&e, host_pid) {
                let start = Self::rel_ns(e.ts.as_deref()).unwrap_or(0);
                self.push_slice(&e, Cat::of(e.cat()), place, start);
            }
        }
        self.shift_to_epoch(info);
        self.fill_process(info, host_pid);
        self.fill_devices(info);
        self.name_tracks(host_pid);
        reorder(&mut self.trace, host_pid as u32);
        self.warn();
        self.trace.link_flows_by_correlation();
        self.trace.finish()
    }

    /// Newer traces give ts relative to `baseTimeNanoseconds`; older ones
    /// give epoch µs and no base. A base with ts that already look like
    /// epoch times (at least half the base) is not added twice. A base
    /// that is not a count of ns in range (negative, beyond 2^63, not an
    /// integer), or that would carry an event past 2^63 ns, is not added:
    /// the times stay relative, with a warning that says so.
    fn shift_to_epoch(&mut self, info: &TopInfo) {
        let Some(raw) = info.base_time_ns.as_deref().map(|r| r.get()) else {
            return;
        };
        if raw == "null" {
            return;
        }
        let events = self.trace.slices().len() + self.trace.counters().len();
        let (first, last) = self.event_range();
        let why = match ns_text_to_ns(raw) {
            None => Some("not a count of nanoseconds within ±2^63"),
            Some(b) if b < 0 => Some("negative"),
            Some(0) => None,
            // Already epoch times: not added twice.
            Some(b) if first >= b / 2 => return,
            Some(b) if last.checked_add(b).is_none() || first.checked_add(b).is_none() => {
                Some("would carry events past 2^63 ns")
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            if events > 0 {
                self.trace.push_diagnostic(
                    Diagnostic::new(
                        Kind::BadTimeBase,
                        events as u64,
                        format!(
                            "baseTimeNanoseconds {} is unusable ({why}): {events} events kept at their times relative to the trace's base",
                            raw.chars().take(40).collect::<String>()
                        ),
                    )
                    .in_file(&self.file),
                );
            }
            return;
        }
        let Some(base) = ns_text_to_ns(raw).filter(|&b| b > 0) else {
            return;
        };
        self.trace.shift_events(base);
        if let Some((s, e)) = self.capture.as_mut() {
            *s = s.saturating_add(base);
            *e = e.saturating_add(base);
        }
    }

    /// The earliest start and the latest end of the events (slices,
    /// counter samples and allocations); (0, 0) when there are none.
    fn event_range(&self) -> (i64, i64) {
        let sl = self.trace.slices();
        let ends = sl
            .start_ns()
            .iter()
            .zip(sl.dur_ns())
            .map(|(s, d)| s.saturating_add(*d));
        let starts = (sl.start_ns().iter())
            .chain(self.trace.counters().ts_ns())
            .chain(self.trace.allocations().ts_ns());
        let first = starts.clone().min().copied().unwrap_or(0);
        let last = ends.chain(starts.copied()).max().unwrap_or(0);
        (first, last)
    }

    fn fill_process(&mut self, info: &TopInfo, host_pid: i64) {
        let p = self.trace.process_mut(HOST);
        p.pid = host_pid as u32;
        p.name = self
            .process_names
            .get(&host_pid)
            .cloned()
            .unwrap_or_default();
        p.capture_start_ns = self.capture.map(|c| c.0);
        p.capture_end_ns = self.capture.map(|c| c.1);
        describe_process(p, info, &self.label);
    }

    /// Only the devices this rank's events use become devices (Kineto lists
    /// every visible GPU); their properties come from `deviceProperties`.
    fn fill_devices(&mut self, info: &TopInfo) {
        let Some(raw) = info.device_properties.as_deref() else {
            return;
        };
        let props = match serde_json::from_str::<Value>(raw.get()) {
            Ok(v) => parse_device_properties(&v),
            Err(e) => {
                self.trace.push_diagnostic(
                    Diagnostic::new(
                        Kind::UnreadableMetadata,
                        1,
                        format!("deviceProperties unreadable: {e}"),
                    )
                    .in_file(&self.file),
                );
                return;
            }
        };
        for (ordinal, &d) in &self.devices {
            if let Some(p) = props.get(ordinal) {
                let dev = self.trace.device_mut(d);
                *dev = Device {
                    process: dev.process,
                    ..p.clone()
                };
            }
        }
    }

    fn name_tracks(&mut self, host_pid: i64) {
        for i in 0..self.trace.tracks().len() {
            let name = match self.trace.tracks()[i].kind {
                TrackKind::Thread { tid } => match self.thread_names.get(&(host_pid, tid)) {
                    Some(n) => n.clone(),
                    None => match self.text_tids.iter().find(|(_, &t)| t == tid) {
                        Some((text, _)) => text.clone(),
                        None => format!("thread {}", tid as i32),
                    },
                },
                TrackKind::Gpu { device } => {
                    let d = &self.trace.devices()[device.index()];
                    format!("GPU {} · {}", d.ordinal, d.name)
                }
                _ => continue,
            };
            self.trace.set_track_name(TrackId::from_index(i), &name);
        }
    }

    fn warn(&mut self) {
        let s = &self.skipped;
        let mut list = vec![
            (
                Kind::MalformedEvents,
                s.malformed,
                format!("{} malformed events skipped", s.malformed),
            ),
            (
                Kind::MissingTimestamp,
                s.no_ts,
                format!("{} events without a valid ts skipped", s.no_ts),
            ),
            (
                Kind::BadDuration,
                s.bad_dur,
                format!(
                    "{} events with a missing, negative or out-of-range dur loaded with duration 0",
                    s.bad_dur
                ),
            ),
            (
                Kind::UnplacedEvents,
                s.unplaced,
                format!(
                    "{} events without a device/stream or thread skipped",
                    s.unplaced
                ),
            ),
        ];
        if !s.unknown_cats.is_empty() {
            let cats: Vec<String> = s
                .unknown_cats
                .iter()
                .map(|(c, n)| format!("{c} ({n})"))
                .collect();
            let n: u64 = s.unknown_cats.values().map(|n| *n as u64).sum();
            list.push((
                Kind::UnknownCategories,
                n as _,
                format!(
                    "events of unknown categories off the host process skipped: {}",
                    cats.join(", ")
                ),
            ));
        }
        for (kind, count, detail) in list {
            if count > 0 {
                self.trace.push_diagnostic(
                    Diagnostic::new(kind, count as u64, detail).in_file(&self.file),
                );
            }
        }
    }
}
