//! GPU memory from `streamscope record` on a real job (issue 36):
//! examples/torch_fsdp2.py (FSDP2, one rank) recorded on one H100 with the
//! allocator history (`STREAMSCOPE_MEMORY=1`, scripts/gpu/memory.sh), its
//! peaks against the job's own `torch.cuda.max_memory_allocated()` and
//! `max_memory_reserved()` (job-timing.txt), and the same job made to run
//! out of memory (`--oom-step 5`): the report names the failed allocation
//! and its Python line.

use std::path::Path;

use streamscope_core::analysis::memory::MemorySource;
use streamscope_core::analysis::{analyze, AnalysisOptions};

fn load(folder: &str) -> streamscope_core::Trace {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(folder);
    streamscope_core::load::load_paths(&[dir]).expect("load")
}

#[test]
fn peaks_match_the_jobs_own_max_memory_within_1_pct() {
    let folder = "torch-fsdp2-memory-h100";
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(folder)
        .join("job-timing.txt");
    let text = std::fs::read_to_string(path).expect("job-timing.txt");
    let job: serde_json::Value = serde_json::from_str(text.trim()).expect("JSON");
    let truth_alloc = job["max_memory_allocated"].as_f64().expect("allocated");
    let truth_reserved = job["max_memory_reserved"].as_f64().expect("reserved");
    let t = load(folder);
    let r = analyze(&t, &AnalysisOptions::default());
    let m = r.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(m.source, MemorySource::Allocator);
    let err = |ours: f64, truth: f64| 100.0 * (ours - truth) / truth;
    let a = err(m.peak_allocated_bytes as f64, truth_alloc);
    assert!(
        a.abs() < 1.0,
        "allocated {} vs {truth_alloc} ({a:.2} %)",
        m.peak_allocated_bytes
    );
    let reserved = m.peak_reserved_bytes.expect("reserved") as f64;
    let b = err(reserved, truth_reserved);
    assert!(
        b.abs() < 1.0,
        "reserved {reserved} vs {truth_reserved} ({b:.2} %)"
    );
    // The largest blocks live at the peak, with the Python line that
    // allocated them (FSDP2's all-gather buffers among them).
    assert!(!m.live_at_peak.is_empty());
    assert!(
        m.live_at_peak
            .iter()
            .any(|b| b.python.as_deref().is_some_and(|p| p.contains(".py:"))),
        "{:?}",
        m.live_at_peak.first()
    );
    // CUPTI's device memory is there too, and holds more than the allocator.
    assert!(m
        .peak_device_bytes
        .is_some_and(|d| d as f64 >= truth_reserved));
}

#[test]
fn out_of_memory_names_the_allocation_and_its_line() {
    let t = load("torch-fsdp2-oom-h100");
    let r = analyze(&t, &AnalysisOptions::default());
    let m = r.ranks[0].memory.as_ref().expect("memory");
    assert_eq!(m.out_of_memory.len(), 1, "{:?}", m.out_of_memory);
    let oom = &m.out_of_memory[0];
    // "Tried to allocate 158.36 GiB": twice the job's card.
    assert_eq!(oom.bytes, 170_034_987_008);
    let src = include_str!("../../examples/torch_fsdp2.py");
    let line = src
        .lines()
        .position(|l| l.ends_with("# OOM: planted"))
        .expect("the planted line")
        + 1;
    let at = oom.python.as_deref().expect("a line");
    assert!(
        at.contains(&format!("torch_fsdp2.py:{line}")),
        "{at} vs line {line}"
    );
}
