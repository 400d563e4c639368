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
