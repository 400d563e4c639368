//! Unit tests of the model and its builder.

use super::*;

#[test]
fn kernel_slice_fits_in_48_bytes() {
    assert!(
        Slices::slice_column_bytes() <= 48,
        "{}",
        Slices::slice_column_bytes()
    );
    // Measure what a million kernels really hold, launch configs shared.
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process::default());
    let d = t.add_device(Device {
        process: p,
        ..Default::default()
    });
    let tr = t.add_track(
        p,
        None,
        TrackKind::Stream {
            device: d,
            stream: 7,
        },
        "stream 7",
    );
    let n = 1_000_000;
    t.reserve_slices(n);
    let names: Vec<StrId> = (0..50).map(|i| t.intern(&format!("kernel_{i}"))).collect();
    for i in 0..n {
        let mut s = NewSlice::new(tr, SliceKind::Kernel, names[i % 50], i as i64 * 10, 5);
        s.class = SliceClass::Compute;
        s.correlation = i as u32;
        s.launch = Some(LaunchConfig {
            grid: [(i % 8) as u32 + 1, 1, 1],
            block: [128, 1, 1],
            ..Default::default()
        });
        t.push_slice(s);
    }
    let t = t.finish();
    let per_slice =
        (t.slices().heap_bytes() + std::mem::size_of_val(t.launch_configs())) as f64 / n as f64;
    assert!(
        per_slice <= 48.0,
        "resident bytes per kernel slice: {per_slice}"
    );
    assert_eq!(t.launch_configs().len(), 8);
}

#[test]
fn hta_classification() {
    use SliceClass::*;
    let k = SliceKind::Kernel;
    assert_eq!(
        SliceClass::of_gpu_name(k, "ncclDevKernel_AllGather_RING_LL(x)"),
        Communication
    );
    assert_eq!(
        SliceClass::of_gpu_name(k, "void ncclKernel_AllReduce_RING_LL_Sum_float(x)"),
        Communication
    );
    assert_eq!(
        SliceClass::of_gpu_name(k, "Memcpy DtoH (Device -> Pinned)"),
        Memory
    );
    assert_eq!(
        SliceClass::of_gpu_name(SliceKind::Memset, "anything"),
        Memory
    );
    assert_eq!(
        SliceClass::of_gpu_name(k, "ampere_sgemm_128x64_nn"),
        Compute
    );
}

#[test]
fn sort_remaps_flows() {
    let mut t = TraceBuilder::new();
    let p = t.add_process(Process::default());
    let tr = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "t");
    let n = t.intern("x");
    let a = t.push_slice(NewSlice::new(tr, SliceKind::Runtime, n, 100, 5));
    let b = t.push_slice(NewSlice::new(tr, SliceKind::Runtime, n, 10, 5));
    t.add_flow(Flow {
        id: 1,
        from: a,
        to: b,
    });
    let t = t.finish();
    assert_eq!(t.slices().start_ns(), &[10, 100]);
    assert_eq!(t.flows()[0].from, SliceId(1));
    assert_eq!(t.flows()[0].to, SliceId(0));
}

#[test]
fn append_offsets_everything() {
    let mk = |pid| {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process {
            pid,
            ..Default::default()
        });
        let d = t.add_device(Device {
            process: p,
            ..Default::default()
        });
        let tr = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "stream 7",
        );
        let nm = t.intern(&format!("k{pid}"));
        let mut s = NewSlice::new(tr, SliceKind::Kernel, nm, 1, 2);
        s.launch = Some(LaunchConfig {
            grid: [pid, 1, 1],
            ..Default::default()
        });
        t.push_slice(s);
        t.finish()
    };
    let mut a = mk(1);
    a.append(mk(2));
    let s1 = SliceId(1);
    assert_eq!(a.processes().len(), 2);
    assert_eq!(a.track(a.slices().track()[1]).process, ProcessId(1));
    assert_eq!(a.track_device(a.slices().track()[1]), Some(DeviceId(1)));
    assert_eq!(a.str(a.slices().name()[1]), "k2");
    assert_eq!(a.launch_of(s1).map(|l| l.grid[0]), Some(2));
    assert_eq!(a.slice_process(s1), ProcessId(1));
}

#[test]
fn flows_link_gpu_work_to_earliest_launch_per_process() {
    let mut t = TraceBuilder::new();
    let mut tracks = Vec::new();
    for pid in [1, 2] {
        let p = t.add_process(Process {
            pid,
            ..Default::default()
        });
        let d = t.add_device(Device {
            process: p,
            ..Default::default()
        });
        let host = t.add_track(p, None, TrackKind::Thread { tid: pid }, "t");
        let stream = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d,
                stream: 7,
            },
            "s",
        );
        tracks.push((host, stream));
    }
    let n = t.intern("x");
    let push = |t: &mut TraceBuilder, track, kind, start, corr| {
        let mut s = NewSlice::new(track, kind, n, start, 1);
        s.correlation = corr;
        t.push_slice(s)
    };
    let (h1, s1) = tracks[0];
    let (h2, s2) = tracks[1];
    let late = push(&mut t, h1, SliceKind::Runtime, 50, 9);
    push(&mut t, h1, SliceKind::Driver, 40, 9);
    push(&mut t, s1, SliceKind::Kernel, 60, 9);
    push(&mut t, s1, SliceKind::Memcpy, 70, 9);
    push(&mut t, h2, SliceKind::Runtime, 10, 9);
    push(&mut t, s2, SliceKind::Kernel, 20, 9);
    push(&mut t, s2, SliceKind::Kernel, 30, 0);
    push(&mut t, s2, SliceKind::Kernel, 31, 77);
    push(&mut t, h2, SliceKind::CpuOp, 5, 3);
    push(&mut t, s2, SliceKind::Memset, 32, 3);
    t.add_flow(Flow {
        id: 1,
        from: late,
        to: late,
    });
    t.link_flows_by_correlation();
    let t = t.finish();
    // (track, start) of each end, in the finished trace's ids.
    let at = |id: SliceId| {
        (
            t.slices().track()[id.index()],
            t.slices().start_ns()[id.index()],
        )
    };
    let got: Vec<_> = (t.flows().iter())
        .map(|f| (f.id, at(f.from), at(f.to)))
        .collect();
    assert_eq!(
        got,
        vec![
            (9, (h1, 40), (s1, 60)),
            (9, (h1, 40), (s1, 70)),
            (9, (h2, 10), (s2, 20)),
        ],
        "earliest launch of the process; the hand-made flow replaced"
    );
}

#[test]
fn finish_sorts_by_track_then_start_and_keeps_sorted_ids() {
    let mut b = TraceBuilder::new();
    let p = b.add_process(Process::default());
    let t1 = b.add_track(p, None, TrackKind::Thread { tid: 1 }, "a");
    let t0 = b.add_track(p, None, TrackKind::Thread { tid: 2 }, "b");
    let n = b.intern("x");
    b.push_slice(NewSlice::new(t0, SliceKind::Runtime, n, 5, 1));
    b.push_slice(NewSlice::new(t1, SliceKind::Runtime, n, 9, 1));
    b.push_slice(NewSlice::new(t1, SliceKind::Runtime, n, 3, 1));
    let t = b.finish();
    let sl = t.slices();
    assert_eq!(sl.track(), &[t1, t1, t0]);
    assert_eq!(sl.start_ns(), &[3, 9, 5]);
    // A sorted trace through a builder and back keeps its slice ids.
    let mut b = t.clone().into_builder();
    let c = b.add_track(p, None, TrackKind::Counter { device: None }, "c");
    b.push_counter(c, 1, 2.0);
    let u = b.finish();
    assert_eq!(u.slices(), t.slices());
    assert_eq!(u.counters().value(), &[2.0]);
}

#[test]
fn shift_time_saturating_keeps_the_order() {
    let mut b = TraceBuilder::new();
    let p = b.add_process(Process::default());
    let tr = b.add_track(p, None, TrackKind::Thread { tid: 1 }, "a");
    let (x, y) = (b.intern("x"), b.intern("y"));
    b.push_slice(NewSlice::new(tr, SliceKind::Runtime, y, i64::MAX - 10, 1));
    b.push_slice(NewSlice::new(tr, SliceKind::Runtime, x, i64::MAX - 5, 1));
    let mut t = b.finish();
    t.shift_time(100);
    assert_eq!(t.slices().start_ns(), &[i64::MAX, i64::MAX]);
    assert!(t.slices().is_sorted(), "ties re-sorted by kind, then name");
    assert_eq!(t.slices().name(), &[x, y]);
}

#[test]
fn flush_events_hands_sorted_batches_and_keeps_tables() {
    let mut b = TraceBuilder::new();
    let p = b.add_process(Process::default());
    let tr = b.add_track(p, None, TrackKind::Thread { tid: 1 }, "a");
    let n = b.intern("x");
    b.push_slice(NewSlice::new(tr, SliceKind::Runtime, n, 9, 1));
    b.push_slice(NewSlice::new(tr, SliceKind::Runtime, n, 3, 1));
    let starts = b.flush_events(|t| t.slices().start_ns().to_vec());
    assert_eq!(starts, vec![3, 9]);
    assert!(b.slices().is_empty());
    assert_eq!(b.tracks().len(), 1);
    assert_eq!(b.str(n), "x");
}

#[test]
fn sort_is_a_stable_sort_by_the_whole_key() {
    // Many ties (start, duration, kind, name), tracks interleaved, each
    // track's slices in a few sorted runs or shuffled: the order must be
    // that of a stable sort of the slices as pushed by (track, start,
    // longest first, kind, name), and flows must follow their slices.
    let mut rng = crate::synth::XorShift(0x9E37_79B9_7F4A_7C15);
    for shuffled in [false, true] {
        let mut b = TraceBuilder::new();
        let p = b.add_process(Process::default());
        let tracks: Vec<TrackId> = (0..5)
            .map(|i| b.add_track(p, None, TrackKind::Thread { tid: i }, "t"))
            .collect();
        let names = [b.intern("a"), b.intern("b")];
        let kinds = [SliceKind::Runtime, SliceKind::Kernel];
        let mut pushed = Vec::new();
        for i in 0..3000u32 {
            let track = tracks[rng.below(tracks.len())];
            let start = if shuffled {
                rng.below(40) as i64
            } else {
                // Three runs in start order, as an importer's tracks often are.
                ((i % 1000) / 10) as i64
            };
            let mut s = NewSlice::new(
                track,
                kinds[rng.below(2)],
                names[rng.below(2)],
                start,
                rng.below(3) as i64,
            );
            s.correlation = i + 1;
            pushed.push((
                track.0,
                start,
                std::cmp::Reverse(s.dur_ns),
                s.kind as u8,
                s.name.0,
                i + 1,
            ));
            b.push_slice(s);
        }
        for i in 0..200u32 {
            b.add_flow(Flow {
                id: u64::from(i),
                from: SliceId(i * 7),
                to: SliceId(i * 11),
            });
        }
        let t = b.finish();
        pushed.sort_by_key(|k| (k.0, k.1, k.2, k.3, k.4));
        let sl = t.slices();
        let got: Vec<_> = (0..sl.len())
            .map(|i| {
                (
                    sl.track()[i].0,
                    sl.start_ns()[i],
                    std::cmp::Reverse(sl.dur_ns()[i]),
                    sl.kind()[i] as u8,
                    sl.name()[i].0,
                    sl.correlation()[i],
                )
            })
            .collect();
        assert_eq!(got, pushed, "shuffled: {shuffled}");
        for (i, f) in t.flows().iter().enumerate() {
            let i = i as u32;
            assert_eq!(sl.correlation()[f.from.index()], i * 7 + 1);
            assert_eq!(sl.correlation()[f.to.index()], i * 11 + 1);
        }
    }
}

#[test]
fn arg_sets_follow_their_slices_through_sort_append_and_replace() {
    let mk = |pid: u32, base: i64| {
        let mut b = TraceBuilder::new();
        let p = b.add_process(Process {
            pid,
            ..Default::default()
        });
        let tr = b.add_track(p, None, TrackKind::Thread { tid: 1 }, "t");
        let (n, k, v) = (b.intern("x"), b.intern("key"), b.intern("value"));
        // Pushed out of order: the sort moves the slices, not their sets.
        for (i, start) in [30, 10, 20].into_iter().enumerate() {
            let mut s = NewSlice::new(tr, SliceKind::Runtime, n, base + start, 1);
            if i != 2 {
                s.args = vec![(k, ArgValue::Int(base + start)), (v, ArgValue::Str(v))];
            }
            b.push_slice(s);
        }
        b.finish()
    };
    let ints = |t: &Trace| -> Vec<Vec<i64>> {
        (0..t.slices().len())
            .map(|i| {
                (t.args_of(SliceId::from_index(i)).iter())
                    .filter_map(|(_, v)| match v {
                        ArgValue::Int(x) => Some(*x),
                        _ => None,
                    })
                    .collect()
            })
            .collect()
    };
    let a = mk(1, 0);
    assert_eq!(ints(&a), vec![vec![10], vec![], vec![30]]);
    assert_eq!(a.arg_set_count(), 2);
    assert_eq!(
        a.str(match a.args_of(SliceId(0))[1].1 {
            ArgValue::Str(s) => s,
            _ => panic!("a string arg"),
        }),
        "value"
    );
    let mut b = a.clone().into_builder();
    b.append(mk(2, 100));
    let id = SliceId(2);
    let key = b.intern("key");
    b.set_slice_args(id, vec![(key, ArgValue::UInt(7))]);
    let t = b.finish();
    assert_eq!(t.arg_set_count(), 5);
    assert_eq!(
        ints(&t),
        vec![vec![10], vec![], vec![], vec![110], vec![], vec![130]]
    );
    assert_eq!(t.args_of(SliceId(2)), &[(key, ArgValue::UInt(7))]);
    assert_eq!(
        t.arg(SliceId(3), "value"),
        Some(&ArgValue::Str(
            t.strings().lookup("value").expect("interned")
        ))
    );
}

#[test]
fn allocations_follow_their_tracks_devices_and_times() {
    let mut b = TraceBuilder::new();
    let p = b.add_process(Process::default());
    let d1 = b.add_device(Device {
        process: p,
        ordinal: 1,
        ..Default::default()
    });
    let d0 = b.add_device(Device {
        process: p,
        ordinal: 0,
        ..Default::default()
    });
    let a = b.add_track(p, None, TrackKind::Thread { tid: 7 }, "a");
    let c = b.add_track(p, None, TrackKind::Thread { tid: 8 }, "c");
    let site = b.intern("train.py:3 (main)");
    b.push_allocation(c, d1, 10, 0x100, 64, Some(site));
    b.push_allocation(a, d0, 20, 0x100, -64, None);
    // Tracks and devices renumbered: the rows keep pointing at theirs.
    b.reorder_tracks(&[c, a]);
    b.reorder_devices(&[d0, d1]);
    b.shift_events(5);
    let t = b.finish();
    let al = t.allocations();
    assert_eq!(al.len(), 2);
    let tid = |i: usize| t.track(al.track()[i]).kind;
    assert_eq!(tid(0), TrackKind::Thread { tid: 8 });
    assert_eq!(tid(1), TrackKind::Thread { tid: 7 });
    let ordinal = |i: usize| t.device(al.device()[i]).ordinal;
    assert_eq!((ordinal(0), ordinal(1)), (1, 0));
    assert_eq!(al.ts_ns(), &[15, 25]);
    assert_eq!(al.address(), &[0x100, 0x100]);
    assert_eq!(al.bytes(), &[64, -64]);
    // Appended after another trace: moved by its tracks and devices.
    let mut two = t.clone();
    two.append(t.clone());
    let al2 = two.allocations();
    assert_eq!(al2.len(), 4);
    assert_eq!(
        al2.track()[2].index(),
        al.track()[0].index() + t.tracks().len()
    );
    assert_eq!(
        al2.device()[3].index(),
        al.device()[1].index() + t.devices().len()
    );
    two.shift_time(-15);
    assert_eq!(two.allocations().ts_ns(), &[0, 10, 0, 10]);
}
