//! Report -> text tables (like `nsys stats`), markdown (for a PR) or JSON.
//!
//! Text and markdown are built from the same tables so they never disagree.

pub mod pretty;

use super::report::Report;

/// A titled table of already-formatted cells.
pub(super) struct Table {
    pub(super) title: String,
    pub(super) headers: Vec<&'static str>,
    pub(super) rows: Vec<Vec<String>>,
}

pub(super) fn f1(v: f64) -> String {
    format!("{v:.1}")
}

pub(super) fn pct(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |p| format!("{p:.2}"))
}

pub(super) fn opt1(v: Option<f64>) -> String {
    v.map_or("-".to_string(), f1)
}

fn tables(r: &Report) -> Vec<Table> {
    let mut out = vec![breakdown_table(r)];
    out.extend(steps_table(r));
    out.extend(idle_table(r));
    out.push(stalls_table(r));
    out.extend(collectives_table(r));
    out.extend(cross_rank_tables(r));
    out.extend(occupancy_table(r));
    out.extend(measured_tables(r));
    out.extend(syncs_table(r));
    out
}

/// Per rank: overlap and the temporal breakdown of the headline window.
fn breakdown_table(r: &Report) -> Table {
    Table {
        title: "Overlap and temporal breakdown (HTA definitions)".into(),
        headers: vec![
            "rank",
            "device",
            "window",
            "overlap %",
            "exposed comm us",
            "overlap eff %",
            "compute us",
            "comm us",
            "kernel time us",
            "idle %",
            "compute %",
            "non-compute %",
        ],
        rows: r
            .ranks
            .iter()
            .map(|k| {
                if !k.has_gpu_events {
                    let mut row = vec![
                        k.rank.to_string(),
                        k.device.clone(),
                        "no GPU events".to_string(),
                    ];
                    row.extend(std::iter::repeat_n("-".to_string(), 9));
                    return row;
                }
                vec![
                    k.rank.to_string(),
                    k.device.clone(),
                    k.window.label.clone(),
                    pct(k.breakdown.overlap_pct),
                    f1(k.breakdown.exposed_comm_us),
                    pct(k.breakdown.overlap_efficiency_pct),
                    f1(k.breakdown.compute_us),
                    f1(k.breakdown.comm_us),
                    f1(k.breakdown.kernel_time_us),
                    pct(k.breakdown.idle_pct),
                    pct(k.breakdown.compute_pct),
                    pct(k.breakdown.non_compute_pct),
                ]
            })
            .collect(),
    }
}

/// Per step and rank (none without steps).
fn steps_table(r: &Report) -> Option<Table> {
    if r.steps.is_empty() {
        return None;
    }
    Some(Table {
        title: "Per step (GPU work launched in the step)".into(),
        headers: vec![
            "rank",
            "step",
            "source",
            "duration us",
            "overlap %",
            "exposed comm us",
            "compute us",
            "comm us",
            "idle %",
            "comm stall us",
            "late prefetches",
            "syncs",
        ],
        rows: r
            .steps
            .iter()
            .map(|s| {
                let b = &s.breakdown;
                vec![
                    s.rank.to_string(),
                    s.step.to_string(),
                    s.source.clone(),
                    f1(s.duration_us),
                    pct(b.overlap_pct),
                    f1(b.exposed_comm_us),
                    f1(b.compute_us),
                    f1(b.comm_us),
                    pct(b.idle_pct),
                    f1(s.comm_stall_us),
                    s.prefetch.late.to_string(),
                    s.syncs.to_string(),
                ]
            })
            .collect(),
    })
}

/// Idle time per stream, by cause (none without idle streams).
fn idle_table(r: &Report) -> Option<Table> {
    let idle_rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .flat_map(|k| {
            k.idle_by_stream.iter().map(move |s| {
                vec![
                    k.rank.to_string(),
                    s.device.to_string(),
                    s.stream.to_string(),
                    f1(s.host_wait_us),
                    f1(s.kernel_wait_us),
                    f1(s.other_us),
                    f1(s.total_us),
                ]
            })
        })
        .collect();
    if idle_rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Idle time per stream (headline window)".into(),
        headers: vec![
            "rank",
            "device",
            "stream",
            "host wait us",
            "kernel wait us",
            "other us",
            "total us",
        ],
        rows: idle_rows,
    })
}

/// Per rank: communication stalls and all-gather prefetch slack.
fn stalls_table(r: &Report) -> Table {
    Table {
        title: "Communication stalls and all-gather prefetch (headline window)".into(),
        headers: vec![
            "rank",
            "stalls",
            "stall us",
            "all-gathers",
            "late prefetches",
            "late us",
            "min slack us",
            "median slack us",
        ],
        rows: r
            .ranks
            .iter()
            .map(|k| {
                vec![
                    k.rank.to_string(),
                    k.comm_stalls.count.to_string(),
                    f1(k.comm_stalls.total_us),
                    k.prefetch.all_gathers.to_string(),
                    k.prefetch.late.to_string(),
                    f1(k.prefetch.late_us),
                    opt1(k.prefetch.min_us),
                    opt1(k.prefetch.median_us),
                ]
            })
            .collect(),
    }
}

/// Per rank and collective kind (none without collectives).
fn collectives_table(r: &Report) -> Option<Table> {
    if r.collectives.is_empty() {
        return None;
    }
    Some(Table {
        title: "Collectives (headline window)".into(),
        headers: vec![
            "rank",
            "collective",
            "algo",
            "proto",
            "dtype",
            "count",
            "total us",
            "mean us",
            "bytes",
            "algbw GB/s",
            "busbw GB/s",
        ],
        rows: r
            .collectives
            .iter()
            .map(|c| {
                vec![
                    c.rank.to_string(),
                    c.collective.clone(),
                    c.algorithm.clone(),
                    c.protocol.clone(),
                    c.dtype.clone(),
                    c.count.to_string(),
                    f1(c.total_us),
                    f1(c.mean_us),
                    c.bytes.map_or("-".into(), |b| b.to_string()),
                    c.alg_bw_gbps.map_or("-".into(), |b| format!("{b:.2}")),
                    c.bus_bw_gbps.map_or("-".into(), |b| format!("{b:.2}")),
                ]
            })
            .collect(),
    })
}

/// Estimated SM occupancy per device (none without launch configurations).
fn occupancy_table(r: &Report) -> Option<Table> {
    if r.occupancy.is_empty() {
        return None;
    }
    Some(Table {
        title: if r.ranks.iter().any(|k| k.measured.any()) {
            "SM occupancy, estimated from launch configurations (whole trace; measured figures below)"
                    .into()
        } else {
            "SM occupancy, estimated from launch configurations (whole trace)".into()
        },
        headers: vec![
            "rank",
            "device",
            "name",
            "SMs",
            "cc",
            "kernels known",
            "unknown",
            "mean compute occupancy %",
            "NCCL SM share while computing %",
            "peak SMs in use",
        ],
        rows: r
            .occupancy
            .iter()
            .map(|o| {
                vec![
                    o.rank.to_string(),
                    o.device.to_string(),
                    o.name.clone(),
                    o.sm_count.to_string(),
                    o.compute_capability.clone(),
                    o.kernels_known.to_string(),
                    o.kernels_unknown.to_string(),
                    pct(o.mean_compute_occupancy_pct),
                    pct(o.nccl_sm_share_pct),
                    o.sms_in_use
                        .iter()
                        .map(|p| p.1)
                        .max()
                        .unwrap_or(0)
                        .to_string(),
                ]
            })
            .collect(),
    })
}

/// Host synchronizations of every window (none without syncs).
fn syncs_table(r: &Report) -> Option<Table> {
    let sync_rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .flat_map(|k| {
            k.syncs
                .iter()
                .chain(&k.startup_syncs)
                .chain(&k.after_window_syncs)
        })
        .map(|s| {
            vec![
                s.rank.to_string(),
                s.window.clone(),
                s.pattern.clone(),
                s.api.clone(),
                s.where_.clone(),
                s.count.to_string(),
                s.per_step.map_or("-".into(), |p| format!("{p:.2}")),
                f1(s.host_blocked_us),
                f1(s.gpu_idle_us),
                s.warning.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if sync_rows.is_empty() {
        return None;
    }
    Some(Table {
            title: "Host synchronizations (GPU idle charged inside each window; warnings only in the headline window)".into(),
            headers: vec![
                "rank",
                "window",
                "pattern",
                "api",
                "where",
                "count",
                "per step",
                "host blocked us",
                "GPU idle us",
                "warning",
            ],
            rows: sync_rows,
    })
}

/// Measured GPU metrics (when sampled) and SM contention (when seen).
fn measured_tables(r: &Report) -> Vec<Table> {
    [measured_table(r), contention_table(r)]
        .into_iter()
        .flatten()
        .collect()
}

/// Measured GPU metrics per rank and step (none when not sampled).
fn measured_table(r: &Report) -> Option<Table> {
    use crate::gpu_metrics::Metric;
    let v = |m: &super::measured::Measured, k: Metric| {
        m.get(k).map_or("-".into(), |x| format!("{x:.1}"))
    };
    let headers = vec![
        "rank",
        "window",
        "SM active %",
        "occupancy %",
        "tensor %",
        "DRAM GB/s",
        "NVLink rx GB/s",
        "NVLink tx GB/s",
        "PCIe rd GB/s",
        "PCIe wr GB/s",
        "SM active in compute %",
        "samples",
    ];
    let row = |rank: u32, window: String, m: &super::measured::Measured| {
        let mut row = vec![rank.to_string(), window];
        row.extend(Metric::ALL.iter().map(|&k| v(m, k)));
        row.push(
            m.sm_active_compute_pct
                .map_or("-".into(), |x| format!("{x:.1}")),
        );
        row.push(m.samples.to_string());
        row
    };
    if !r.ranks.iter().any(|k| k.measured.any()) {
        return None;
    }
    let mut rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .map(|k| row(k.rank, k.window.label.clone(), &k.measured))
        .collect();
    rows.extend(
        r.steps
            .iter()
            .filter(|s| s.measured.any())
            .map(|s| row(s.rank, format!("step {}", s.step), &s.measured)),
    );
    Some(Table {
        title: "Measured GPU metrics (CUPTI PM sampling; time-weighted means over the GPU span)"
            .into(),
        headers,
        rows,
    })
}

/// SM contention per rank, with its top kernels (none when not seen).
fn contention_table(r: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .filter(|k| k.sm_contention.compute_slowdown_pct.is_some())
        .flat_map(|k| {
            let c = &k.sm_contention;
            let mut rows = vec![vec![
                k.rank.to_string(),
                "all compared kernels".into(),
                String::new(),
                format!("{} / {}", c.kernels_alone, c.kernels_overlapped),
                pct(c.compute_slowdown_pct),
                f1(c.extra_compute_us),
                opt1(c.cost_per_step_us),
            ]];
            rows.extend(c.top.iter().take(5).map(|t| {
                vec![
                    k.rank.to_string(),
                    t.name.chars().take(60).collect(),
                    t.shape.clone(),
                    format!("{} / {}", t.alone, t.overlapped),
                    format!("{:.2}", t.slowdown_pct),
                    f1(t.extra_us),
                    format!(
                        "{:.1} -> {:.1} us",
                        t.alone_median_us, t.overlapped_median_us
                    ),
                ]
            }));
            rows
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(Table {
            title: "SM contention: compute kernels under NCCL kernels against the same kernels alone (headline window)".into(),
            headers: vec![
                "rank",
                "kernel",
                "shape",
                "alone / overlapped",
                "slowdown %",
                "extra compute us",
                "per step us (median alone -> overlapped)",
            ],
            rows,
        })
}

/// Who waits for whom: collectives matched across ranks (empty when none were).
fn cross_rank_tables(r: &Report) -> Vec<Table> {
    if r.cross_rank.instances == 0 {
        return Vec::new();
    }
    [
        straggler_table(r),
        clock_offsets_table(r),
        exposed_wait_table(r),
        skew_table(r),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Per step: the straggler and each rank's wait for its peers (none
/// without a step with a matched wait).
fn straggler_table(r: &Report) -> Option<Table> {
    let x = &r.cross_rank;
    let mut ranks: Vec<u32> = r.steps.iter().map(|s| s.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut numbers: Vec<i64> = r.steps.iter().map(|s| s.step).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let step_rows: Vec<Vec<String>> = numbers
        .iter()
        .filter_map(|&n| {
            let rows: Vec<_> = r.steps.iter().filter(|s| s.step == n).collect();
            let first = rows.first()?;
            let own: Vec<String> = ranks
                .iter()
                .map(|&k| {
                    rows.iter()
                        .find(|s| s.rank == k)
                        .and_then(|s| s.comm_wait_us)
                        .map_or("-".into(), |w| format!("{k}: {w:.1}"))
                })
                .collect();
            first
                .comm_wait_us
                .or(rows.iter().find_map(|s| s.comm_wait_us))?;
            Some(vec![
                n.to_string(),
                first.straggler_rank.map_or("-".into(), |k| k.to_string()),
                opt1(first.straggler_wait_us),
                own.join("  "),
            ])
        })
        .collect();
    if step_rows.is_empty() {
        return None;
    }
    Some(Table {
        title: format!(
            "Who waits for whom, per step (NCCL kernels matched across ranks by {}; clocks: {})",
            x.method, x.clocks
        ),
        headers: vec![
            "step",
            "straggler",
            "longest wait for it us",
            "each rank's wait for peers us",
        ],
        rows: step_rows,
    })
}

/// The offset of each host's clock to the first rank's (none when all
/// ranks share one clock).
fn clock_offsets_table(r: &Report) -> Option<Table> {
    let x = &r.cross_rank;
    if x.clock_offsets.is_empty() {
        return None;
    }
    Some(Table {
            title: "Clock offsets to the first rank's clock (from matched collectives' kernel ends; offset at the middle of them, drift)".into(),
            headers: vec!["host", "clock", "ranks", "offset us", "drift us/s", "residual us", "instances"],
            rows: x
                .clock_offsets
                .iter()
                .map(|o| {
                    vec![
                        o.host.clone(),
                        o.clock.clone(),
                        o.ranks
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                        format!("{:.3}", o.offset_ns as f64 / 1000.0),
                        format!("{:.2}", o.drift_us_per_s),
                        format!("{:.3}", o.residual_us),
                        o.instances.to_string(),
                    ]
                })
                .collect(),
    })
}

/// Per rank: exposed communication split into waiting for peers and
/// transfer (none without the split).
fn exposed_wait_table(r: &Report) -> Option<Table> {
    let x = &r.cross_rank;
    let rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .filter(|k| k.exposed_wait_us.is_some())
        .map(|k| {
            let waited: Vec<String> = x
                .waits
                .iter()
                .filter(|w| w.waiting_rank == k.rank)
                .map(|w| format!("rank {}: {:.1} us in {}", w.for_rank, w.wait_us, w.count))
                .collect();
            vec![
                k.rank.to_string(),
                f1(k.breakdown.exposed_comm_us),
                opt1(k.exposed_wait_us),
                opt1(k.exposed_transfer_us),
                waited.join(", "),
            ]
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: format!(
            "Exposed communication: waiting for peers vs transfer ({})",
            x.window
        ),
        headers: vec![
            "rank",
            "exposed comm us",
            "exposed wait us",
            "exposed transfer us",
            "waited for (kernel time)",
        ],
        rows,
    })
}

/// Per collective kind: arrival skew across ranks, wait and transfer.
fn skew_table(r: &Report) -> Option<Table> {
    let x = &r.cross_rank;
    let rows: Vec<Vec<String>> = x
        .kinds
        .iter()
        .map(|c| {
            vec![
                c.collective.clone(),
                c.group.clone(),
                c.count.to_string(),
                opt1(c.skew_median_us),
                opt1(c.skew_p95_us),
                opt1(c.skew_max_us),
                f1(c.wait_us),
                f1(c.transfer_us),
                c.last_rank
                    .iter()
                    .map(|(k, n)| format!("{k}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                c.bytes.map_or("-".into(), |b| b.to_string()),
                c.bus_bw_gbps.map_or("-".into(), |b| format!("{b:.2}")),
            ]
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: format!("Collective skew across ranks ({})", x.window),
        headers: vec![
            "collective",
            "group",
            "count",
            "skew p50 us",
            "skew p95 us",
            "skew max us",
            "wait us",
            "transfer us",
            "last to arrive (rank: count)",
            "bytes",
            "busbw GB/s (transfer)",
        ],
        rows,
    })
}

fn header_lines(r: &Report) -> Vec<String> {
    let mut v = vec![format!(
        "streamscope report: {} rank(s), {} sync warning(s), dropped records: {}",
        r.ranks.len(),
        r.sync_warnings.len(),
        r.dropped_records
    )];
    for k in r.ranks.iter().filter(|k| !k.has_gpu_events) {
        v.push(format!("{} ({}): no GPU events", k.label, k.rank));
    }
    if !r.other_processes.is_empty() {
        let list: Vec<String> = r
            .other_processes
            .iter()
            .map(|o| format!("{} {}", o.label, o.name).trim_end().to_string())
            .collect();
        v.push(format!(
            "other processes (no GPU work, not ranks): {}",
            list.join(", ")
        ));
    }
    v
}

/// Aligned plain-text tables.
pub fn text(r: &Report) -> String {
    text_of(&header_lines(r), &tables(r), &r.diagnostics)
}

/// Header lines, aligned tables, then one `note:` line per diagnostic.
pub(super) fn text_of(
    header: &[String],
    tables: &[Table],
    diagnostics: &[crate::diagnostic::Diagnostic],
) -> String {
    let mut s = header.join("\n");
    s.push('\n');
    for t in tables {
        let n = t.headers.len();
        let mut w: Vec<usize> = t.headers.iter().map(|h| h.chars().count()).collect();
        for row in &t.rows {
            for (k, c) in row.iter().enumerate().take(n) {
                w[k] = w[k].max(c.chars().count());
            }
        }
        s.push_str(&format!("\n{}\n\n", t.title));
        let line = |cells: Vec<&str>| {
            let mut l = String::new();
            for (k, c) in cells.iter().enumerate() {
                let pad = w[k].saturating_sub(c.chars().count());
                if k > 0 {
                    l.push_str("  ");
                }
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            }
            l.trim_end().to_string() + "\n"
        };
        s.push_str(&line(t.headers.clone()));
        s.push_str(&line(
            w.iter()
                .map(|&x| "-".repeat(x))
                .collect::<Vec<_>>()
                .iter()
                .map(|x| x.as_str())
                .collect(),
        ));
        for row in &t.rows {
            s.push_str(&line(row.iter().map(|c| c.as_str()).collect()));
        }
    }
    for n in diagnostics {
        s.push_str(&format!("\nnote: {n}"));
    }
    if !diagnostics.is_empty() {
        s.push('\n');
    }
    s
}

fn md_cell(c: &str) -> String {
    c.replace('|', "\\|").replace('\n', " ")
}

/// GitHub-flavoured markdown tables.
pub fn markdown(r: &Report) -> String {
    markdown_of(
        "streamscope report",
        &header_lines(r),
        &tables(r),
        &r.diagnostics,
    )
}

/// A `## title`, the header lines, the tables and a Notes list.
pub(super) fn markdown_of(
    title: &str,
    header: &[String],
    tables: &[Table],
    diagnostics: &[crate::diagnostic::Diagnostic],
) -> String {
    let mut s = format!("## {title}\n\n");
    for l in header {
        s.push_str(&format!("{l}  \n"));
    }
    for t in tables {
        s.push_str(&format!("\n### {}\n\n", t.title));
        s.push_str(&format!(
            "| {} |\n",
            t.headers
                .iter()
                .map(|h| md_cell(h))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        s.push_str(&format!("|{}\n", "---|".repeat(t.headers.len())));
        for row in &t.rows {
            s.push_str(&format!(
                "| {} |\n",
                row.iter()
                    .map(|c| md_cell(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
    }
    if !diagnostics.is_empty() {
        s.push_str("\n### Notes\n\n");
        for n in diagnostics {
            s.push_str(&format!("- {}\n", md_cell(&n.to_string())));
        }
    }
    s
}

/// Pretty JSON of the whole report.
pub fn json(r: &Report) -> String {
    let mut out = Vec::new();
    match pretty::to_writer(&mut out, r) {
        Ok(()) => String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => format!("{{\"error\": \"{e}\"}}"),
    }
}
