//! Puts devices and tracks of an imported process in display order.
//!
//! The importer creates them as events first mention them (file order);
//! afterwards devices go by CUDA ordinal and tracks go: host threads (main
//! thread first, then by tid), then per device its GPU track, its streams by
//! number and its counters, then counters of no device.

use crate::model::{DeviceId, TraceBuilder, TrackId, TrackKind};

pub fn reorder(trace: &mut TraceBuilder, main_tid: u32) {
    reorder_devices(trace);
    reorder_tracks(trace, main_tid);
}

fn reorder_devices(trace: &mut TraceBuilder) {
    let devices = trace.devices();
    let mut order: Vec<DeviceId> = (0..devices.len()).map(DeviceId::from_index).collect();
    order.sort_by_key(|&i| (devices[i.index()].process, devices[i.index()].ordinal));
    trace.reorder_devices(&order);
}

fn reorder_tracks(trace: &mut TraceBuilder, main_tid: u32) {
    let key = |i: usize| {
        let t = &trace.tracks()[i];
        let name = trace.str(t.name).to_string();
        match t.kind {
            TrackKind::Thread { tid } => (0, u32::from(tid != main_tid), 0, tid, String::new()),
            TrackKind::Gpu { device } => (1, device.get(), 0, 0, String::new()),
            TrackKind::Stream { device, stream } => (1, device.get(), 1, stream, String::new()),
            TrackKind::Counter {
                device: Some(device),
            } => (1, device.get(), 2, 0, name),
            TrackKind::Counter { device: None } => (2, 0, 0, 0, name),
            TrackKind::Other => (3, 0, 0, i as u32, String::new()),
        }
    };
    let mut order: Vec<TrackId> = (0..trace.tracks().len()).map(TrackId::from_index).collect();
    order.sort_by_cached_key(|&i| key(i.index()));
    trace.reorder_tracks(&order);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Device, NewSlice, Process, SliceKind};

    #[test]
    fn devices_by_ordinal_tracks_grouped_and_remapped() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process {
            pid: 5,
            ..Default::default()
        });
        let d3 = t.add_device(Device {
            ordinal: 3,
            ..Default::default()
        });
        let d1 = t.add_device(Device {
            ordinal: 1,
            ..Default::default()
        });
        let g3 = t.add_track(p, None, TrackKind::Gpu { device: d3 }, "GPU 3");
        let s3 = t.add_track(
            p,
            Some(g3),
            TrackKind::Stream {
                device: d3,
                stream: 9,
            },
            "stream 9",
        );
        let worker = t.add_track(p, None, TrackKind::Thread { tid: 7 }, "worker");
        let g1 = t.add_track(p, None, TrackKind::Gpu { device: d1 }, "GPU 1");
        let _s1b = t.add_track(
            p,
            Some(g1),
            TrackKind::Stream {
                device: d1,
                stream: 20,
            },
            "stream 20",
        );
        let _s1a = t.add_track(
            p,
            Some(g1),
            TrackKind::Stream {
                device: d1,
                stream: 7,
            },
            "stream 7",
        );
        let main = t.add_track(p, None, TrackKind::Thread { tid: 5 }, "main");
        let n = t.intern("k");
        t.push_slice(NewSlice::new(s3, SliceKind::Kernel, n, 1, 1));
        t.push_slice(NewSlice::new(main, SliceKind::Runtime, n, 1, 1));
        t.push_counter(worker, 1, 2.0);
        reorder(&mut t, 5);
        let t = t.finish();
        assert_eq!(
            t.devices().iter().map(|d| d.ordinal).collect::<Vec<_>>(),
            vec![1, 3]
        );
        let names: Vec<&str> = t.tracks().iter().map(|tr| t.str(tr.name)).collect();
        assert_eq!(
            names,
            vec![
                "main",
                "worker",
                "GPU 1",
                "stream 7",
                "stream 20",
                "GPU 3",
                "stream 9"
            ]
        );
        assert_eq!(
            t.tracks()[6].kind,
            TrackKind::Stream {
                device: DeviceId::from_index(1),
                stream: 9
            }
        );
        assert_eq!(t.tracks()[6].parent, Some(TrackId::from_index(5)));
        assert_eq!(t.tracks()[3].parent, Some(TrackId::from_index(2)));
        // Slices follow their tracks (and sort by them).
        assert_eq!(t.track_name(t.slices().track()[0]), "main");
        assert_eq!(t.track_name(t.slices().track()[1]), "stream 9");
        assert_eq!(t.track_name(t.counters().track()[0]), "worker");
    }
}
