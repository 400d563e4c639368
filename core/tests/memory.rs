//! GPU memory from torch.profiler's `[memory]` events (issue 36): the
//! report's peak, its time and what was reserved then equal what the
//! trace's own allocator totals say, read here independently from the JSON.

use std::io::Read;
use std::path::Path;

use streamscope_core::analysis::{analyze, AnalysisOptions};

#[test]
fn peak_allocated_and_reserved_match_the_allocator_events() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/df_index_resolver/df_index_resolver.json.gz");
    // The expected figures, from the raw events: CUDA ("Device Type" 1).
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open"))
        .read_to_string(&mut text)
        .expect("inflate");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    let mut ev: Vec<(i64, u64, u64)> = doc["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == "[memory]" && e["args"]["Device Type"] == 1)
        .map(|e| {
            let a = &e["args"];
            (
                e["ts"].as_i64().expect("ts") * 1000,
                a["Total Allocated"].as_u64().expect("allocated"),
                a["Total Reserved"].as_u64().expect("reserved"),
            )
        })
        .collect();
    assert!(ev.len() > 1000, "{} memory events", ev.len());
    ev.sort_by_key(|x| x.0);
    let peak = ev.iter().map(|x| x.1).max().expect("peak");
    let at = ev.iter().find(|x| x.1 == peak).expect("at").0;
    let reserved_then = ev.iter().rfind(|x| x.0 <= at).expect("then").2;
    let peak_reserved = ev.iter().map(|x| x.2).max().expect("reserved");

    let t = streamscope_core::load::load_file(&path).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    assert_eq!(r.ranks.len(), 1);
    let m = r.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(m.peak_allocated_bytes, peak);
    assert_eq!(m.peak_at_ns, at);
    assert_eq!(m.reserved_at_peak_bytes, Some(reserved_then));
    assert_eq!(m.unused_reserved_at_peak_bytes, Some(reserved_then - peak));
    assert_eq!(m.peak_reserved_bytes, Some(peak_reserved));
    assert_eq!(m.samples, 2 * ev.len() as u64);
    // Each step's peak is at most the rank's; the peak's step reaches it.
    assert!(!r.steps.is_empty());
    for s in &r.steps {
        let sm = s.memory.as_ref().expect("step memory");
        assert!(sm.peak_allocated_bytes <= peak, "step {}", s.step);
        let in_force = ev.iter().rfind(|x| x.0 <= s.start_ns).map(|x| x.1);
        let inside = ev
            .iter()
            .filter(|x| x.0 > s.start_ns && x.0 <= s.end_ns)
            .map(|x| x.1)
            .max();
        assert_eq!(
            Some(sm.peak_allocated_bytes),
            inside.max(in_force),
            "step {}",
            s.step
        );
    }
    let step = m.peak_step.expect("a step holds the peak");
    let row = r.steps.iter().find(|s| s.step == step).expect("row");
    assert_eq!(
        row.memory.as_ref().map(|x| x.peak_allocated_bytes),
        Some(peak)
    );
}

#[test]
fn no_allocator_samples_no_memory() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/nccl_parser_config/nccl_data.json.gz");
    let t = streamscope_core::load::load_file(&path).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    assert!(!r.ranks.is_empty());
    assert!(r.ranks.iter().all(|k| k.memory.is_none()));
    assert!(r.steps.iter().all(|s| s.memory.is_none()));
}

/// One GPU allocator event of the raw JSON, in file order.
struct RawAlloc {
    ts_ns: i64,
    tid: i64,
    addr: u64,
    bytes: i64,
    total: u64,
}

#[test]
fn blocks_live_at_the_peak_match_a_replay_of_the_allocator_events() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/df_index_resolver/df_index_resolver.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open"))
        .read_to_string(&mut text)
        .expect("inflate");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    let events = doc["traceEvents"].as_array().expect("events");
    let mut ev: Vec<RawAlloc> = events
        .iter()
        .filter(|e| e["name"] == "[memory]" && e["args"]["Device Type"] == 1)
        .map(|e| {
            let a = &e["args"];
            RawAlloc {
                ts_ns: e["ts"].as_i64().expect("ts") * 1000,
                tid: e["tid"].as_i64().expect("tid"),
                addr: a["Addr"].as_u64().expect("addr"),
                bytes: a["Bytes"].as_i64().expect("bytes"),
                total: a["Total Allocated"].as_u64().expect("allocated"),
            }
        })
        .collect();
    // Stable: one instant's events stay in file order.
    ev.sort_by_key(|x| x.ts_ns);
    let peak = ev.iter().map(|x| x.total).max().expect("peak");
    let peak_i = ev.iter().position(|x| x.total == peak).expect("peak event");
    // Replay up to and including the peak event.
    let mut live: std::collections::HashMap<u64, usize> = Default::default();
    for (i, x) in ev[..=peak_i].iter().enumerate() {
        if x.bytes > 0 {
            live.insert(x.addr, i);
        } else if x.bytes < 0 {
            live.remove(&x.addr);
        }
    }
    let mut want: Vec<&RawAlloc> = live.values().map(|&i| &ev[i]).collect();
    want.sort_by_key(|x| (std::cmp::Reverse(x.bytes), x.ts_ns, x.addr));
    let live_sum: i64 = want.iter().map(|x| x.bytes).sum();
    assert!(want.len() > 10, "{} live blocks", want.len());

    let t = streamscope_core::load::load_file(&path).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    let m = r.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(m.peak_at_ns, ev[peak_i].ts_ns);
    assert_eq!(m.live_at_peak.len(), 10);
    for (got, want) in m.live_at_peak.iter().zip(&want) {
        assert_eq!(
            (got.bytes, got.address, got.allocated_at_ns),
            (want.bytes as u64, want.addr, want.ts_ns)
        );
    }
    // Figures this trace gives (checked against the replay above).
    assert_eq!(m.live_at_peak[0].bytes, want[0].bytes as u64);
    let listed: u64 = m.live_at_peak.iter().map(|b| b.bytes).sum();
    assert_eq!(listed + m.live_at_peak_other_bytes, live_sum as u64);
    assert_eq!(m.live_at_peak_other_blocks as usize, want.len() - 10);
    // Blocks allocated before the capture are unknown: the replay holds
    // no more than the allocator's total.
    assert!(live_sum as u64 <= peak);
    // Each op is a CPU op of the raw trace open on the allocating thread
    // at the allocation (no python_function in this trace).
    for (got, want) in m.live_at_peak.iter().zip(&want) {
        assert!(!got.op.is_empty(), "{:#x}", got.address);
        assert_eq!(got.python, None);
        let encloses = events.iter().any(|e| {
            let (Some(ts), Some(dur)) = (e["ts"].as_i64(), e["dur"].as_i64()) else {
                return false;
            };
            e["ph"] == "X"
                && e["cat"] == "cpu_op"
                && e["tid"].as_i64() == Some(want.tid)
                && e["name"] == got.op.as_str()
                && ts * 1000 <= want.ts_ns
                && want.ts_ns <= (ts + dur) * 1000
        });
        assert!(encloses, "{} around {:#x}", got.op, got.address);
    }
    eprintln!(
        "df_index_resolver: peak {} B at {} ns; top block {} B ({}); {} live blocks, {} B",
        peak,
        m.peak_at_ns,
        m.live_at_peak[0].bytes,
        m.live_at_peak[0].op,
        want.len(),
        live_sum
    );
    // The report's JSON carries them under ranks[].memory.live_at_peak.
    let json = serde_json::to_value(&r).expect("json");
    let first = &json["ranks"][0]["memory"]["live_at_peak"][0];
    assert_eq!(first["bytes"].as_u64(), Some(want[0].bytes as u64));
    assert_eq!(first["op"].as_str(), Some(m.live_at_peak[0].op.as_str()));
}

#[test]
fn live_blocks_replay_frees_and_reallocations_per_device() {
    // GPU 0: A and B allocated in aten::empty, A freed, A's address
    // allocated again (50 B) on another thread, C allocated at the peak
    // (550 B), B freed at the same microsecond just after it. GPU 1
    // allocates at A's address and frees B's: another device's blocks.
    let mem = |tid: u32, ts: u32, dev: u32, addr: u32, bytes: i64, total: i64| {
        format!(
            r#"{{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":{tid},"ts":{ts},"args":{{"Device Type":1,"Device Id":{dev},"Addr":{addr},"Bytes":{bytes},"Total Allocated":{total},"Total Reserved":4096}}}}"#
        )
    };
    let op = |cat: &str, name: &str, tid: u32, ts: u32, dur: u32| {
        format!(
            r#"{{"ph":"X","cat":"{cat}","name":"{name}","pid":1,"tid":{tid},"ts":{ts},"dur":{dur}}}"#
        )
    };
    let events = [
        op("python_function", "train.py(5): step", 10, 0, 1000),
        // PyTorch's own frame inside the program's: the program's is named.
        op("python_function", "torch/nn/modules/module.py(1500): _call_impl", 10, 1, 998),
        op("cpu_op", "aten::empty", 10, 5, 20),
        op("cpu_op", "aten::mul", 11, 35, 10),
        op("cpu_op", "aten::add", 10, 45, 10),
        r#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":60,"dur":5,"args":{"device":0,"stream":7,"correlation":1}}"#.to_string(),
        mem(10, 10, 0, 0x1000, 100, 100),
        mem(10, 20, 0, 0x2000, 300, 400),
        mem(10, 30, 0, 0x1000, -100, 300),
        mem(11, 40, 0, 0x1000, 50, 350),
        mem(11, 42, 1, 0x1000, 5000, 5000),
        mem(11, 43, 1, 0x2000, -300, 4700),
        mem(10, 50, 0, 0x3000, 200, 550),
        mem(10, 50, 0, 0x2000, -300, 250),
    ];
    let json = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
    let t = streamscope_core::kineto::read_bytes(Path::new("mem.json"), json.as_bytes())
        .expect("kineto");
    assert_eq!(t.allocations().len(), 8);
    let r = analyze(&t, &AnalysisOptions::default());
    let m = r.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(
        (m.gpu, m.peak_allocated_bytes, m.peak_at_ns),
        (0, 550, 50_000)
    );
    let got: Vec<_> = (m.live_at_peak.iter())
        .map(|b| {
            (
                b.bytes,
                b.address,
                b.allocated_at_ns,
                b.op.as_str(),
                b.python.as_deref(),
            )
        })
        .collect();
    let step = Some("train.py:5 (step)");
    assert_eq!(
        got,
        vec![
            (300, 0x2000, 20_000, "aten::empty", step),
            (200, 0x3000, 50_000, "aten::add", step),
            (50, 0x1000, 40_000, "aten::mul", None),
        ]
    );
    assert_eq!(
        (m.live_at_peak_other_bytes, m.live_at_peak_other_blocks),
        (0, 0)
    );
    // The full report lists them.
    let text = streamscope_core::analysis::render::markdown(&r);
    assert!(text.contains("Largest blocks live at the peak"), "{text}");
}

/// A Perfetto export carries the allocations: read back, they are the
/// source's (as a multiset: the reader's order is by track), and so is the
/// report's list of blocks live at the peak.
#[test]
fn allocations_survive_a_perfetto_round_trip() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hta/df_index_resolver/df_index_resolver.json.gz");
    let t = streamscope_core::load::load_file(&path).expect("load");
    assert!(t.allocations().len() > 20_000, "{}", t.allocations().len());
    let bytes = streamscope_core::perfetto::write_trace(&t, Vec::new()).expect("write");
    let back = streamscope_core::perfetto::read_stream(Path::new("back.pftrace"), &bytes[..])
        .expect("read back");
    let rows = |t: &streamscope_core::Trace| {
        let a = t.allocations();
        let mut v: Vec<(i64, u64, i64, u32, String)> = (0..a.len())
            .map(|i| {
                let track = t.track(a.track()[i]);
                let tid = match track.kind {
                    streamscope_core::TrackKind::Thread { tid } => tid,
                    _ => u32::MAX,
                };
                let dev = &t.devices()[a.device()[i].index()];
                (
                    a.ts_ns()[i],
                    a.address()[i],
                    a.bytes()[i],
                    tid,
                    format!("{}:{}", t.processes()[dev.process.index()].pid, dev.ordinal),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(rows(&back), rows(&t));
    let opts = AnalysisOptions::default();
    let (a, b) = (analyze(&t, &opts), analyze(&back, &opts));
    let live = |r: &streamscope_core::analysis::Report| {
        r.ranks
            .iter()
            .map(|k| k.memory.as_ref().map(|m| m.live_at_peak.clone()))
            .collect::<Vec<_>>()
    };
    assert!(live(&a)[0].as_ref().is_some_and(|v| v.len() == 10));
    assert_eq!(live(&b), live(&a));
}
