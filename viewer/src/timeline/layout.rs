//! The lane tree: rank → GPU → stream, host threads, counters; and its
//! flattening into screen lines given which groups are collapsed.

use std::collections::HashSet;
use streamscope_core::ProcessId;

use streamscope_core::{SliceClass, Trace, TrackId, TrackKind};

use super::index::TimelineIndex;

/// A collapsible group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKey {
    /// A rank (trace process).
    Process(u32),
    /// A GPU (model device index).
    Device(u32),
    /// The host threads of a process.
    Host(u32),
    /// Tracks of a process that fit nowhere else.
    Other(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Group {
        key: GroupKey,
        label: String,
        children: Vec<Node>,
    },
    /// A track with slices: one lane per row (nesting depth).
    Track { track: TrackId, label: String },
    /// A counter track.
    Counter { track: TrackId, label: String },
}

/// Heights in points.
pub const HEADER_H: f32 = 20.0;
pub const ROW_H: f32 = 18.0;
pub const COUNTER_H: f32 = 32.0;
pub const INDENT: f32 = 12.0;

/// One line of the flattened tree.
#[derive(Debug, Clone, PartialEq)]
pub enum LineKind {
    Header {
        key: GroupKey,
        collapsed: bool,
    },
    /// A slice row (index into `TimelineIndex::rows`); `first` is the track's
    /// first row, which carries the label.
    Row {
        row: u32,
        first: bool,
    },
    Counter {
        track: TrackId,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: LineKind,
    pub label: String,
    /// Top, relative to the top of the lane area (before scrolling).
    pub y: f32,
    pub h: f32,
    pub indent: u8,
}

/// The lane tree of a trace.
#[derive(Debug, Clone, Default)]
pub struct LaneTree {
    pub roots: Vec<Node>,
}

/// "stream 7 · NCCL": a stream named by the class of most of its time.
fn stream_label(trace: &Trace, index: &TimelineIndex, track: TrackId) -> String {
    let mut ns = [0i64; 4];
    if let Some(rows) = index.track_rows.get(track.index()) {
        for r in rows.clone() {
            let row = &index.rows[r as usize];
            for p in 0..row.len() {
                let s = row.slice(p);
                ns[trace.slices().class()[s] as usize] += trace.slices().dur_ns()[s];
            }
        }
    }
    let name = trace.track_name(track).to_string();
    let (best, &t) = ns
        .iter()
        .enumerate()
        .skip(1)
        .max_by_key(|(_, v)| **v)
        .unwrap_or((0, &0));
    let what = match SliceClass::from_u8(best as u8) {
        _ if t == 0 => return name,
        SliceClass::Communication => "NCCL",
        SliceClass::Memory => "copy",
        _ => "compute",
    };
    format!("{name} · {what}")
}

/// "SMs in use · max 132": the counter's name and its scale.
fn counter_label(trace: &Trace, index: &TimelineIndex, track: TrackId) -> String {
    super::counters::label(trace, index, track)
}

impl LaneTree {
    pub fn build(trace: &Trace, index: &TimelineIndex) -> Self {
        let has_slices = |t: TrackId| {
            index
                .track_rows
                .get(t.index())
                .is_some_and(|r| !r.is_empty())
        };
        let has_counter = |t: TrackId| {
            index
                .counter_samples
                .get(t.index())
                .is_some_and(|v| !v.is_empty())
        };
        let mut roots = Vec::new();
        for (p, proc_) in trace.processes().iter().enumerate() {
            let p = p as u32;
            let tracks: Vec<TrackId> = trace
                .track_ids()
                .filter(|&t| {
                    trace.track(t).process == ProcessId::from_index(p as usize)
                        && (has_slices(t) || has_counter(t))
                })
                .collect();
            let mut children = Vec::new();
            for d in trace.devices_of(ProcessId::from_index(p as usize)) {
                let dev = &trace.devices()[d.index()];
                let mut streams: Vec<(u32, TrackId)> = tracks
                    .iter()
                    .filter_map(|&t| match trace.track(t).kind {
                        TrackKind::Stream { device, stream } if device == d => Some((stream, t)),
                        TrackKind::Gpu { device } if device == d => Some((0, t)),
                        _ => None,
                    })
                    .collect();
                streams.sort();
                let mut lanes: Vec<Node> = streams
                    .into_iter()
                    .map(|(_, t)| Node::Track {
                        track: t,
                        label: stream_label(trace, index, t),
                    })
                    .collect();
                for &t in &tracks {
                    if trace.track(t).kind == (TrackKind::Counter { device: Some(d) }) {
                        lanes.push(Node::Counter {
                            track: t,
                            label: counter_label(trace, index, t),
                        });
                    }
                }
                if !lanes.is_empty() {
                    let label = if dev.name.is_empty() {
                        format!("GPU {}", dev.ordinal)
                    } else {
                        format!("GPU {} · {}", dev.ordinal, dev.name)
                    };
                    children.push(Node::Group {
                        key: GroupKey::Device(d.get()),
                        label,
                        children: lanes,
                    });
                }
            }
            let mut threads: Vec<(u32, TrackId)> = tracks
                .iter()
                .filter_map(|&t| match trace.track(t).kind {
                    TrackKind::Thread { tid } => Some((tid, t)),
                    _ => None,
                })
                .collect();
            threads.sort();
            if !threads.is_empty() {
                let lanes = threads
                    .into_iter()
                    .map(|(tid, t)| {
                        let name = trace.track_name(t);
                        let label = if name.is_empty() {
                            format!("thread {tid}")
                        } else {
                            name.to_string()
                        };
                        Node::Track { track: t, label }
                    })
                    .collect();
                children.push(Node::Group {
                    key: GroupKey::Host(p),
                    label: "CPU threads".into(),
                    children: lanes,
                });
            }
            let placed = |t: TrackId| match trace.track(t).kind {
                TrackKind::Thread { .. } => true,
                TrackKind::Stream { device, .. } | TrackKind::Gpu { device } => trace
                    .devices()
                    .get(device.index())
                    .is_some_and(|d| d.process == ProcessId::from_index(p as usize)),
                TrackKind::Counter {
                    device: Some(device),
                } => trace
                    .devices()
                    .get(device.index())
                    .is_some_and(|d| d.process == ProcessId::from_index(p as usize)),
                _ => false,
            };
            let other: Vec<Node> = tracks
                .iter()
                .filter(|&&t| !placed(t))
                .map(|&t| {
                    if has_slices(t) {
                        Node::Track {
                            track: t,
                            label: trace.track_name(t).to_string(),
                        }
                    } else {
                        Node::Counter {
                            track: t,
                            label: counter_label(trace, index, t),
                        }
                    }
                })
                .collect();
            if !other.is_empty() {
                children.push(Node::Group {
                    key: GroupKey::Other(p),
                    label: "other".into(),
                    children: other,
                });
            }
            let mut label = proc_.label();
            if !proc_.hostname.is_empty() {
                label = format!("{label} · {}", proc_.hostname);
            }
            roots.push(Node::Group {
                key: GroupKey::Process(p),
                label,
                children,
            });
        }
        LaneTree { roots }
    }

    /// Flattens the tree into lines, skipping the insides of collapsed groups.
    pub fn lines(&self, index: &TimelineIndex, collapsed: &HashSet<GroupKey>) -> Vec<Line> {
        self.lines_in_order(index, collapsed, None)
    }

    /// [`Self::lines`] with the process groups in `order` (indices into
    /// `roots`; the ones it leaves out follow in tree order).
    pub fn lines_in_order(
        &self,
        index: &TimelineIndex,
        collapsed: &HashSet<GroupKey>,
        order: Option<&[usize]>,
    ) -> Vec<Line> {
        let mut out = Vec::new();
        let mut y = 0.0;
        let mut seen = vec![false; self.roots.len()];
        let listed = order.unwrap_or(&[]).iter().copied();
        let all: Vec<usize> = listed
            .chain(0..self.roots.len())
            .filter(|&i| i < seen.len() && !std::mem::replace(&mut seen[i], true))
            .collect();
        for i in all {
            flatten(&self.roots[i], index, collapsed, 0, &mut y, &mut out);
        }
        out
    }

    /// The process of each root (None for a root that is not a process).
    pub fn root_processes(&self) -> Vec<Option<u32>> {
        self.roots
            .iter()
            .map(|n| match n {
                Node::Group {
                    key: GroupKey::Process(p),
                    ..
                } => Some(*p),
                _ => None,
            })
            .collect()
    }

    /// The groups enclosing `track` (outermost first).
    pub fn groups_of(&self, track: TrackId) -> Vec<GroupKey> {
        fn walk(n: &Node, track: TrackId, path: &mut Vec<GroupKey>) -> bool {
            match n {
                Node::Group { key, children, .. } => {
                    path.push(*key);
                    if children.iter().any(|c| walk(c, track, path)) {
                        return true;
                    }
                    path.pop();
                    false
                }
                Node::Track { track: t, .. } | Node::Counter { track: t, .. } => *t == track,
            }
        }
        let mut path = Vec::new();
        for n in &self.roots {
            if walk(n, track, &mut path) {
                break;
            }
        }
        path
    }
}

fn flatten(
    n: &Node,
    index: &TimelineIndex,
    collapsed: &HashSet<GroupKey>,
    indent: u8,
    y: &mut f32,
    out: &mut Vec<Line>,
) {
    match n {
        Node::Group {
            key,
            label,
            children,
        } => {
            let is_collapsed = collapsed.contains(key);
            out.push(Line {
                kind: LineKind::Header {
                    key: *key,
                    collapsed: is_collapsed,
                },
                label: label.clone(),
                y: *y,
                h: HEADER_H,
                indent,
            });
            *y += HEADER_H;
            if !is_collapsed {
                for c in children {
                    flatten(c, index, collapsed, indent + 1, y, out);
                }
            }
        }
        Node::Track { track, label } => {
            let rows = index.track_rows.get(track.index()).cloned().unwrap_or(0..0);
            for r in rows.clone() {
                out.push(Line {
                    kind: LineKind::Row {
                        row: r,
                        first: r == rows.start,
                    },
                    label: if r == rows.start {
                        label.clone()
                    } else {
                        String::new()
                    },
                    y: *y,
                    h: ROW_H,
                    indent,
                });
                *y += ROW_H;
            }
        }
        Node::Counter { track, label } => {
            out.push(Line {
                kind: LineKind::Counter { track: *track },
                label: label.clone(),
                y: *y,
                h: COUNTER_H,
                indent,
            });
            *y += COUNTER_H;
        }
    }
}
