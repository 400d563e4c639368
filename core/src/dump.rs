//! A canonical text rendering of a whole model: one line per process,
//! device, track, slice, flow, counter sample and allocation, every
//! reference resolved to names. Two traces with the same content dump to the same text
//! whatever their string-pool order, which is what round-trip tests compare.

use std::fmt::Write;

use crate::model::*;

/// Renders `t` (see the module docs). Slices in canonical order (a
/// trace's own).
pub fn dump(t: &Trace) -> String {
    let mut out = String::new();
    for (i, p) in t.processes().iter().enumerate() {
        let _ = writeln!(out, "process {i}: {p:?}");
    }
    for (i, d) in t.devices().iter().enumerate() {
        let _ = writeln!(out, "device {i}: {d:?}");
    }
    let track_path = |id: TrackId| {
        let tr = t.track(id);
        let parent = tr
            .parent
            .map(|p| t.track_name(p).to_string())
            .unwrap_or_default();
        format!("p{}/{}/{}", tr.process.get(), parent, t.str(tr.name))
    };
    for (i, tr) in t.tracks().iter().enumerate() {
        let _ = writeln!(
            out,
            "track {i}: {} {:?}",
            track_path(TrackId::from_index(i)),
            tr.kind
        );
    }
    let sl = t.slices();
    for i in 0..sl.len() {
        let _ = write!(
            out,
            "slice {} {}+{} {:?} {:?} {:?} corr={}",
            track_path(sl.track()[i]),
            sl.start_ns()[i],
            sl.dur_ns()[i],
            t.str(sl.name()[i]),
            sl.kind()[i],
            sl.class()[i],
            sl.correlation()[i]
        );
        let id = SliceId::from_index(i);
        if let Some(lc) = t.launch_of(id) {
            let _ = write!(out, " {lc:?}");
        }
        if let Some(c) = t.copy_of(id) {
            let _ = write!(out, " {c:?}");
        }
        for (k, v) in t.args_of(id) {
            let v = match v {
                ArgValue::Str(s) => format!("{:?}", t.str(*s)),
                other => format!("{other:?}"),
            };
            let _ = write!(out, " {}={v}", t.str(*k));
        }
        out.push('\n');
    }
    let mut flows: Vec<String> = t
        .flows()
        .iter()
        .map(|f| {
            let (a, b) = (f.from.index(), f.to.index());
            format!(
                "flow {} {}@{} -> {}@{}",
                f.id,
                track_path(sl.track()[a]),
                sl.start_ns()[a],
                track_path(sl.track()[b]),
                sl.start_ns()[b]
            )
        })
        .collect();
    flows.sort();
    for f in flows {
        let _ = writeln!(out, "{f}");
    }
    let c = t.counters();
    for i in 0..c.len() {
        let _ = writeln!(
            out,
            "counter {} {} {}",
            track_path(c.track()[i]),
            c.ts_ns()[i],
            c.value()[i]
        );
    }
    let a = t.allocations();
    for i in 0..a.len() {
        let _ = writeln!(
            out,
            "allocation {} device {} {} {:#x} {:+} {}",
            track_path(a.track()[i]),
            a.device()[i].get(),
            a.ts_ns()[i],
            a.address()[i],
            a.bytes()[i],
            t.str(a.site()[i])
        );
    }
    out
}
