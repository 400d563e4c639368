//! The GPU memory table (`report --full`, markdown): per rank, the peak of
//! allocated memory, when, and what the allocator reserved
//! (docs/METRICS.md, "Memory").

use super::super::report::Report;
use super::Table;

/// Bytes in GiB, 2 decimals.
fn gib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 30) as f64)
}

/// One row per rank with allocator samples; none without.
pub(super) fn table(r: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .filter_map(|k| {
            let m = k.memory.as_ref()?;
            let opt = |v: Option<u64>| v.map_or("-".to_string(), gib);
            Some(vec![
                k.rank.to_string(),
                m.gpu.to_string(),
                gib(m.peak_allocated_bytes),
                m.peak_step.map_or("-".to_string(), |s| s.to_string()),
                opt(m.reserved_at_peak_bytes),
                opt(m.unused_reserved_at_peak_bytes),
                opt(m.peak_reserved_bytes),
                m.samples.to_string(),
            ])
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "GPU memory (allocator samples)".into(),
        headers: vec![
            "rank",
            "GPU",
            "peak allocated GiB",
            "at step",
            "reserved then GiB",
            "reserved unused then GiB",
            "peak reserved GiB",
            "samples",
        ],
        rows,
    })
}
