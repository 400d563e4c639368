//! The GPU memory tables (`report --full`, markdown): per rank, the peak of
//! allocated memory, when, and what the allocator reserved; then the
//! largest blocks live at that peak, with the op that allocated them
//! (docs/METRICS.md, "Memory").

use super::super::report::Report;
use super::Table;

/// Bytes in GiB, 2 decimals.
fn gib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 30) as f64)
}

/// Bytes in MiB, 2 decimals.
fn mib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 20) as f64)
}

/// The peaks table, then the live blocks table (each only with rows).
pub(super) fn tables(r: &Report) -> Vec<Table> {
    table(r)
        .into_iter()
        .chain(live_table(r))
        .chain(oom_table(r))
        .collect()
}

/// The allocations that failed (CUDA out of memory), one row each.
fn oom_table(r: &Report) -> Option<Table> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for k in &r.ranks {
        let Some(m) = k.memory.as_ref() else { continue };
        for o in &m.out_of_memory {
            let opt = |v: Option<u64>| v.map_or("-".to_string(), gib);
            rows.push(vec![
                k.rank.to_string(),
                m.gpu.to_string(),
                o.step.map_or("-".to_string(), |s| s.to_string()),
                gib(o.bytes),
                opt(o.allocated_bytes),
                opt(o.free_bytes),
                o.python.clone().unwrap_or_else(|| "-".to_string()),
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Out of memory: allocations that failed".into(),
        headers: vec![
            "rank",
            "GPU",
            "step",
            "asked GiB",
            "allocated then GiB",
            "free then GiB",
            "python line",
        ],
        rows,
    })
}

/// One row per rank with allocator samples; none without.
fn table(r: &Report) -> Option<Table> {
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
                opt(m.peak_device_bytes),
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
            "peak device GiB",
            "samples",
        ],
        rows,
    })
}

/// Per rank whose trace kept its blocks, the largest live at the peak
/// (largest first), then one row for the live blocks the list leaves out.
fn live_table(r: &Report) -> Option<Table> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for k in &r.ranks {
        let Some(m) = k.memory.as_ref() else { continue };
        for b in &m.live_at_peak {
            let before_ns = m.peak_at_ns.saturating_sub(b.allocated_at_ns);
            rows.push(vec![
                k.rank.to_string(),
                mib(b.bytes),
                format!("{:.3}", before_ns as f64 / 1e6),
                if b.op.is_empty() { "-" } else { &b.op }.to_string(),
                b.python.clone().unwrap_or_else(|| "-".to_string()),
            ]);
        }
        if m.live_at_peak_other_blocks > 0 {
            rows.push(vec![
                k.rank.to_string(),
                mib(m.live_at_peak_other_bytes),
                "-".to_string(),
                format!("({} other blocks)", m.live_at_peak_other_blocks),
                "-".to_string(),
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Largest blocks live at the peak".into(),
        headers: vec![
            "rank",
            "MiB",
            "allocated ms before peak",
            "op",
            "python line",
        ],
        rows,
    })
}
