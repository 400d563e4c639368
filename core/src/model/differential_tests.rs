//! Differential tests of the slice sort and of the argument-set column:
//! random builders against a plain reference (every slice as a record,
//! sorted by `sort_by_key` on the whole key, as the sort before the
//! counting sort did), through finish, append, retain, replace and flush.

use super::*;
use crate::synth::XorShift;

/// An argument value with strings resolved, comparable across pools.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Int(i64),
    UInt(u64),
    Double(f64),
    Bool(bool),
    Str(String),
}

/// A slice as the reference keeps it.
#[derive(Debug, Clone, PartialEq)]
struct Rec {
    track: u32,
    start: i64,
    dur: i64,
    kind: SliceKind,
    /// Name id in the builder's pool (the sort compares ids, not text).
    name: u32,
    /// A unique tag, to follow a slice.
    tag: u32,
    args: Vec<(String, Val)>,
}

impl Rec {
    fn key(&self) -> (u32, i64, std::cmp::Reverse<i64>, u8, u32) {
        (
            self.track,
            self.start,
            std::cmp::Reverse(self.dur),
            self.kind as u8,
            self.name,
        )
    }
}

const KINDS: [SliceKind; 4] = [
    SliceKind::Runtime,
    SliceKind::Kernel,
    SliceKind::Range,
    SliceKind::Memcpy,
];

fn random_args(rng: &mut XorShift, b: &mut TraceBuilder) -> Vec<(String, Val)> {
    (0..[0, 0, 1, 2, 4][rng.below(5)])
        .map(|_| {
            let key = format!("k{}", rng.below(6));
            let v = match rng.below(5) {
                0 => Val::Int(rng.next_u64() as i64),
                1 => Val::UInt(rng.next_u64()),
                2 => Val::Double(rng.below(1000) as f64 / 8.0),
                3 => Val::Bool(rng.below(2) == 1),
                _ => Val::Str(format!("s{}", rng.below(9))),
            };
            // Interned here so that string ids vary with the draw order.
            b.intern(&key);
            (key, v)
        })
        .collect()
}

fn to_set(b: &mut TraceBuilder, args: &[(String, Val)]) -> ArgSet {
    args.iter()
        .map(|(k, v)| {
            let v = match v {
                Val::Int(x) => ArgValue::Int(*x),
                Val::UInt(x) => ArgValue::UInt(*x),
                Val::Double(x) => ArgValue::Double(*x),
                Val::Bool(x) => ArgValue::Bool(*x),
                Val::Str(s) => ArgValue::Str(b.intern(s)),
            };
            (b.intern(k), v)
        })
        .collect()
}

fn resolved(t: &Trace, id: SliceId) -> Vec<(String, Val)> {
    t.args_of(id)
        .iter()
        .map(|(k, v)| {
            let v = match *v {
                ArgValue::Int(x) => Val::Int(x),
                ArgValue::UInt(x) => Val::UInt(x),
                ArgValue::Double(x) => Val::Double(x),
                ArgValue::Bool(x) => Val::Bool(x),
                ArgValue::Str(s) => Val::Str(t.str(s).to_string()),
            };
            (t.str(*k).to_string(), v)
        })
        .collect()
}

/// Every slice of `t` as a record (names as ids of `t`'s pool).
fn records(t: &Trace) -> Vec<Rec> {
    let sl = t.slices();
    (0..sl.len())
        .map(|i| Rec {
            track: sl.track()[i].0,
            start: sl.start_ns()[i],
            dur: sl.dur_ns()[i],
            kind: sl.kind()[i],
            name: sl.name()[i].0,
            tag: sl.correlation()[i],
            args: resolved(t, SliceId::from_index(i)),
        })
        .collect()
}

/// Starts of `n` slices on one track, in one of the shapes importers and
/// tests give: in order, in a few sorted runs, reversed, shuffled, equal.
fn starts(rng: &mut XorShift, n: usize) -> Vec<i64> {
    let base = rng.below(1000) as i64 - 500;
    match rng.below(5) {
        0 => (0..n as i64)
            .map(|i| base + i * rng.below(3) as i64)
            .collect(),
        1 => {
            let runs = 1 + rng.below(4);
            (0..n).map(|i| base + (i % (n / runs + 1)) as i64).collect()
        }
        2 => (0..n as i64).rev().map(|i| base + i / 2).collect(),
        3 => (0..n).map(|_| base + rng.below(n / 2 + 1) as i64).collect(),
        _ => vec![base; n],
    }
}

/// A random builder (slices interleaved over tracks, each track's starts
/// in one of `starts`' shapes, many ties) and its records as pushed, tags
/// from `tag0`; some slices' args replaced before the end.
fn random_builder(rng: &mut XorShift, pid: u32, tag0: u32) -> (TraceBuilder, Vec<Rec>) {
    let mut b = TraceBuilder::new();
    let p = b.add_process(Process {
        pid,
        ..Default::default()
    });
    let ntracks = 1 + rng.below(12);
    let tracks: Vec<TrackId> = (0..ntracks)
        .map(|i| b.add_track(p, None, TrackKind::Thread { tid: i as u32 }, "t"))
        .collect();
    // Names interned in a random order: ids do not follow the text.
    let mut names: Vec<StrId> = (0..4).map(|i| b.intern(&format!("n{i}"))).collect();
    names.rotate_left(rng.below(4));
    let n = rng.below(300);
    // Which track each slice goes on; only some tracks used.
    let used = 1 + rng.below(ntracks);
    let on: Vec<usize> = (0..n).map(|_| rng.below(used)).collect();
    let mut per_track: Vec<std::vec::IntoIter<i64>> = (0..ntracks)
        .map(|t| starts(rng, on.iter().filter(|&&x| x == t).count()).into_iter())
        .collect();
    let mut recs = Vec::with_capacity(n);
    for (i, &t) in on.iter().enumerate() {
        let start = per_track[t].next().expect("a start per slice");
        let kind = KINDS[rng.below(KINDS.len())];
        let name = names[rng.below(names.len())];
        let dur = rng.below(4) as i64;
        let args = random_args(rng, &mut b);
        let mut s = NewSlice::new(tracks[t], kind, name, start, dur);
        s.correlation = tag0 + i as u32;
        s.args = to_set(&mut b, &args);
        let id = b.push_slice(s);
        assert_eq!(id.index(), i);
        recs.push(Rec {
            track: tracks[t].0,
            start,
            dur,
            kind,
            name: name.0,
            tag: tag0 + i as u32,
            args,
        });
    }
    // Replaced sets (some emptied): the old set stays in the column, unused.
    for _ in 0..rng.below(n / 4 + 1) {
        if n == 0 {
            break;
        }
        let i = rng.below(n);
        let args = random_args(rng, &mut b);
        let set = to_set(&mut b, &args);
        b.set_slice_args(SliceId::from_index(i), set);
        recs[i].args = args;
    }
    (b, recs)
}

/// A record with its name as text: (track, start, duration, name, tag,
/// args).
type Named = (u32, i64, i64, String, u32, Vec<(String, Val)>);

/// The reference: a stable sort by the whole key.
fn reference_sort(mut recs: Vec<Rec>) -> Vec<Rec> {
    recs.sort_by_key(Rec::key);
    recs
}

#[test]
fn finish_is_a_stable_sort_by_the_whole_key_and_args_follow() {
    let mut rng = XorShift(0xD1FF_5047_0000_0001);
    for round in 0..300 {
        let (mut b, recs) = random_builder(&mut rng, 1, 1);
        let n = recs.len();
        // Flows between random slices: they must follow their slices.
        let mut flows = Vec::new();
        for f in 0..rng.below(20) {
            if n == 0 {
                break;
            }
            let (from, to) = (rng.below(n), rng.below(n));
            b.add_flow(Flow {
                id: f as u64,
                from: SliceId::from_index(from),
                to: SliceId::from_index(to),
            });
            flows.push((recs[from].tag, recs[to].tag));
        }
        let sets = recs.iter().filter(|r| !r.args.is_empty()).count();
        let t = b.finish();
        let got = records(&t);
        assert_eq!(got, reference_sort(recs), "round {round}");
        assert!(t.arg_set_count() >= sets, "round {round}");
        let tag = |id: SliceId| t.slices().correlation()[id.index()];
        let got_flows: Vec<(u32, u32)> =
            t.flows().iter().map(|f| (tag(f.from), tag(f.to))).collect();
        assert_eq!(got_flows, flows, "round {round}");
    }
}

#[test]
fn append_retain_and_replace_keep_args_with_their_slices() {
    let mut rng = XorShift(0xD1FF_5047_0000_0002);
    for round in 0..100 {
        let (a, ra) = random_builder(&mut rng, 1, 1);
        let (b, rb) = random_builder(&mut rng, 2, 100_000);
        let (a, b) = (a.finish(), b.finish());
        let (ra, rb) = (reference_sort(ra), reference_sort(rb));
        let tracks_a = a.tracks().len() as u32;
        // Appended: b's slices after a's, on b's tracks moved past a's; names
        // compared as text (the pools differ).
        let text = |t: &Trace, r: &[Rec]| -> Vec<Named> {
            r.iter()
                .map(|r| {
                    (
                        r.track,
                        r.start,
                        r.dur,
                        t.str(StrId(r.name)).to_string(),
                        r.tag,
                        r.args.clone(),
                    )
                })
                .collect()
        };
        let mut want = text(&a, &ra);
        want.extend(text(&b, &rb).into_iter().map(|mut x| {
            x.0 += tracks_a;
            x
        }));
        let mut both = a.clone();
        both.append(b.clone());
        assert_eq!(text(&both, &records(&both)), want, "round {round}: append");
        assert_eq!(both.arg_set_count(), a.arg_set_count() + b.arg_set_count());
        // The same through a builder, then one set replaced and the whole
        // sorted again: nothing moves, the one slice's args change.
        let mut bb = a.clone().into_builder();
        bb.append(b);
        if !want.is_empty() {
            let i = rng.below(want.len());
            let args = random_args(&mut rng, &mut bb);
            let set = to_set(&mut bb, &args);
            bb.set_slice_args(SliceId::from_index(i), set);
            want[i].5 = args;
        }
        let t = bb.finish();
        assert_eq!(text(&t, &records(&t)), want, "round {round}: replace");
        // Retained: the kept slices keep their own args.
        let mut kept = t.clone();
        let keep: Vec<bool> = (0..want.len()).map(|_| rng.below(3) != 0).collect();
        kept.retain_slices(|id| keep[id.index()]);
        let want_kept: Vec<_> = (want.iter().zip(&keep))
            .filter(|(_, &k)| k)
            .map(|(w, _)| w.clone())
            .collect();
        assert_eq!(
            text(&kept, &records(&kept)),
            want_kept,
            "round {round}: retain"
        );
    }
}

#[test]
fn flushed_batches_each_hold_their_own_args() {
    // A streaming writer's builder: each batch is sorted and handed out,
    // then its slices and sets are dropped; the next batch's set indices
    // start again from zero.
    let mut rng = XorShift(0xD1FF_5047_0000_0003);
    let (proto, _) = random_builder(&mut rng, 1, 1);
    let mut b = proto.finish().into_builder();
    b.flush_events(|_| ());
    let tracks = b.tracks().len();
    let names: Vec<StrId> = (0..3).map(|i| b.intern(&format!("f{i}"))).collect();
    let mut tag = 1;
    for batch in 0..40 {
        let mut recs = Vec::new();
        for _ in 0..rng.below(60) {
            let track = TrackId::from_index(rng.below(tracks));
            let (start, dur) = (rng.below(50) as i64, rng.below(3) as i64);
            let (kind, name) = (KINDS[rng.below(4)], names[rng.below(3)]);
            let args = random_args(&mut rng, &mut b);
            let mut s = NewSlice::new(track, kind, name, start, dur);
            s.correlation = tag;
            s.args = to_set(&mut b, &args);
            b.push_slice(s);
            recs.push(Rec {
                track: track.0,
                start,
                dur,
                kind,
                name: name.0,
                tag,
                args,
            });
            tag += 1;
        }
        let got = b.flush_events(|t| (records(t), t.arg_set_count()));
        let sets = recs.iter().filter(|r| !r.args.is_empty()).count();
        assert_eq!(got.0, reference_sort(recs), "batch {batch}");
        assert_eq!(got.1, sets, "batch {batch}");
    }
}

#[test]
fn perfetto_round_trip_keeps_each_slices_args() {
    // Random sets on random slices of a generated two-rank trace (ranks
    // appended, so the second's set indices are offset): written whole and
    // in flushed batches, read back, every slice has its own args.
    use crate::perfetto::{read_stream, write_trace, PerfettoWriter};
    let mut rng = XorShift(0xD1FF_5047_0000_0004);
    let o = crate::synth::SynthOptions {
        ranks: 1,
        target_slices: 600,
        ..Default::default()
    };
    let mut t = crate::synth::fsdp_like_rank(&o, 0);
    t.append(crate::synth::fsdp_like_rank(&o, 1));
    let mut b = t.into_builder();
    let n = b.slices().len();
    for _ in 0..n / 2 {
        let i = rng.below(n);
        let args = random_args(&mut rng, &mut b);
        let set = to_set(&mut b, &args);
        b.set_slice_args(SliceId::from_index(i), set);
    }
    let t = b.finish();
    assert!(t.arg_set_count() > n / 4);
    let want = crate::dump::dump(&t);
    let path = std::path::Path::new("mem.pftrace");
    let bytes = write_trace(&t, Vec::new()).expect("write to memory");
    let back = read_stream(path, &bytes[..]).expect("read back");
    assert_eq!(crate::dump::dump(&back), want);
    // In batches of slices in time order, each batch flushed (its sets
    // dropped) after it is written.
    let mut batch = t.clone().into_builder();
    batch.flush_events(|_| ());
    let mut w = PerfettoWriter::new(Vec::new());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| t.slices().start_ns()[i]);
    for chunk in order.chunks(97) {
        for &j in chunk {
            let s = t.slices();
            let id = SliceId::from_index(j);
            let mut ns = NewSlice::new(
                s.track()[j],
                s.kind()[j],
                s.name()[j],
                s.start_ns()[j],
                s.dur_ns()[j],
            );
            ns.class = s.class()[j];
            ns.correlation = s.correlation()[j];
            ns.launch = t.launch_of(id).copied();
            ns.copy = t.copy_of(id).copied();
            ns.args = t.args_of(id).to_vec();
            batch.push_slice(ns);
        }
        batch.flush_events(|t| w.write_batch(t)).expect("batch");
    }
    let bytes = batch.flush_events(|t| w.finish(t)).expect("finish");
    let back = read_stream(path, &bytes[..]).expect("read back");
    assert_eq!(crate::dump::dump(&back), want);
}
