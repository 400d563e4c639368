//! The detailed tables of a report (`report --full`, markdown): every
//! time in ms, every column defined in docs/METRICS.md ("Report columns").

use super::super::rank::StreamKey;
use super::super::report::Report;
use super::{ms, opt_ms, pct, short, Table, COLLECTIVE_HEADERS};

/// Every table with something to say, in reading order.
pub(super) fn tables(r: &Report) -> Vec<Table> {
    let mut out: Vec<Table> = super::findings::table(r).into_iter().collect();
    out.push(breakdown_table(r));
    out.extend(top_kernels_table(r));
    out.extend(steps_table(r));
    out.extend(idle_table(r));
    out.extend(stalls_table(r));
    out.extend(prefetch_layers_table(r));
    out.extend(collectives_table(r));
    out.extend(cross_rank_tables(r));
    out.extend(occupancy_table(r));
    out.extend(measured_tables(r));
    out.extend(super::memory::tables(r));
    out.extend(syncs_table(r));
    out
}

/// The GPU of `rank` at model device index `device`: its name when the
/// occupancy rows know it, else "device N".
fn gpu_name(r: &Report, rank: u32, at: StreamKey) -> String {
    let Some(device) = at.device() else {
        return "-".to_string();
    };
    r.occupancy
        .iter()
        .find(|o| o.rank == rank && o.device == device)
        .map_or_else(|| format!("device {}", device.get()), |o| o.name.clone())
}

/// Per rank, the kernels with the most time in the headline window (none
/// without kernels).
fn top_kernels_table(r: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .flat_map(|k| {
            k.top_kernels.iter().map(move |t| {
                vec![
                    k.rank.to_string(),
                    short(&super::kernel_name(&t.name), 60),
                    t.class.clone(),
                    t.count.to_string(),
                    ms(t.total_ms * 1000.0),
                    ms(t.mean_ms * 1000.0),
                    t.per_step_ms.map_or("-".into(), |v| ms(v * 1000.0)),
                    pct(t.share_pct),
                    if t.python.is_empty() {
                        "-".into()
                    } else {
                        t.python.clone()
                    },
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Top kernels (headline window)".into(),
        headers: vec![
            "rank",
            "kernel",
            "class",
            "count",
            "total ms",
            "mean ms",
            "ms per step",
            "GPU time %",
            "launched at",
        ],
        rows,
    })
}

/// Per rank: overlap and the temporal breakdown of the headline window.
fn breakdown_table(r: &Report) -> Table {
    Table {
        title: "Overlap and temporal breakdown (HTA definitions; headline window)".into(),
        headers: vec![
            "rank",
            "GPU",
            "median step ms",
            "overlap %",
            "exposed comm ms",
            "overlap of min(comm, compute) %",
            "compute ms",
            "comm ms",
            "GPU span ms",
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
                    k.median_step_ms.map_or("-".into(), |v| ms(v * 1000.0)),
                    pct(k.breakdown.overlap_pct),
                    ms(k.breakdown.exposed_comm_us),
                    pct(k.breakdown.overlap_efficiency_pct),
                    ms(k.breakdown.compute_us),
                    ms(k.breakdown.comm_us),
                    ms(k.breakdown.kernel_time_us),
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
            "duration ms",
            "overlap %",
            "exposed comm ms",
            "compute ms",
            "comm ms",
            "idle %",
            "comm stall ms",
            "late all-gathers",
            "host syncs",
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
                    ms(s.duration_us),
                    pct(b.overlap_pct),
                    ms(b.exposed_comm_us),
                    ms(b.compute_us),
                    ms(b.comm_us),
                    pct(b.idle_pct),
                    ms(s.comm_stall_us),
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
                    gpu_name(r, k.rank, s.at),
                    s.at.stream_label(),
                    ms(s.host_wait_us),
                    ms(s.kernel_wait_us),
                    ms(s.other_us),
                    ms(s.total_us),
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
            "GPU",
            "stream",
            "host late ms",
            "short gaps ms",
            "other gaps ms",
            "idle ms",
        ],
        rows: idle_rows,
    })
}

/// Per rank: communication stalls and all-gather prefetch slack (none
/// when no rank has a stall or an all-gather).
fn stalls_table(r: &Report) -> Option<Table> {
    if r.ranks
        .iter()
        .all(|k| k.comm_stalls.count == 0 && k.prefetch.all_gathers == 0)
    {
        return None;
    }
    Some(Table {
        title: "Communication stalls and all-gather prefetch (headline window)".into(),
        headers: vec![
            "rank",
            "comm stalls",
            "stall ms",
            "all-gathers",
            "late all-gathers",
            "late ms",
            "min slack ms",
            "median slack ms",
            "held early GB·ms",
        ],
        rows: r
            .ranks
            .iter()
            .map(|k| {
                vec![
                    k.rank.to_string(),
                    k.comm_stalls.count.to_string(),
                    ms(k.comm_stalls.total_us),
                    k.prefetch.all_gathers.to_string(),
                    k.prefetch.late.to_string(),
                    ms(k.prefetch.late_us),
                    opt_ms(k.prefetch.min_us),
                    opt_ms(k.prefetch.median_us),
                    k.prefetch
                        .held_early_byte_s
                        .map_or("-".to_string(), |b| format!("{:.1}", b / 1e6)),
                ]
            })
            .collect(),
    })
}

/// Per rank, the all-gathers at each position in the step (none when no
/// rank has all-gathers in steps).
fn prefetch_layers_table(r: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .flat_map(|k| {
            k.prefetch.per_layer.iter().map(move |l| {
                vec![
                    k.rank.to_string(),
                    l.position.to_string(),
                    l.label.as_deref().map_or("-".to_string(), |s| short(s, 40)),
                    l.all_gathers.to_string(),
                    l.late.to_string(),
                    ms(l.late_us),
                    opt_ms(l.mean_slack_us),
                    l.bytes
                        .map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1e6)),
                    l.held_early_byte_s
                        .map_or("-".to_string(), |b| format!("{:.2}", b / 1e6)),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "All-gather prefetch per layer (position in the step, headline window)".into(),
        headers: vec![
            "rank",
            "position",
            "annotation",
            "all-gathers",
            "late",
            "late ms",
            "mean slack ms",
            "MB",
            "held early GB·ms",
        ],
        rows,
    })
}

/// Per rank and collective kind (none without collectives).
fn collectives_table(r: &Report) -> Option<Table> {
    if r.collectives.is_empty() {
        return None;
    }
    Some(Table {
        title: "Collectives (headline window)".into(),
        headers: COLLECTIVE_HEADERS.to_vec(),
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
                    ms(c.total_us),
                    ms(c.mean_us),
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
            "GPU",
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

/// Host synchronizations: each call site of the headline window, and one
/// row per rank for those before it (start-up) and after it (none
/// without syncs).
fn syncs_table(r: &Report) -> Option<Table> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for k in &r.ranks {
        rows.extend(k.syncs.iter().map(|s| {
            vec![
                s.rank.to_string(),
                "headline".into(),
                s.pattern.clone(),
                s.api.clone(),
                s.where_.clone(),
                s.count.to_string(),
                s.per_step.map_or("-".into(), |p| format!("{p:.2}")),
                ms(s.host_blocked_us),
                ms(s.gpu_idle_us),
                s.warning.clone().unwrap_or_default(),
            ]
        }));
        for (label, groups) in [
            ("start-up", &k.startup_syncs),
            ("after", &k.after_window_syncs),
        ] {
            if groups.is_empty() {
                continue;
            }
            let sum = |f: fn(&super::super::report::SyncGroup) -> f64| -> f64 {
                groups.iter().map(f).sum()
            };
            rows.push(vec![
                k.rank.to_string(),
                label.into(),
                format!("{} call site(s)", groups.len()),
                String::new(),
                String::new(),
                groups.iter().map(|g| g.count).sum::<u64>().to_string(),
                "-".into(),
                ms(sum(|g| g.host_blocked_us)),
                ms(sum(|g| g.gpu_idle_us)),
                String::new(),
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Host synchronizations (window: headline, or summed over start-up / after it; JSON lists each)"
            .into(),
        headers: vec![
            "rank",
            "window",
            "pattern",
            "api",
            "where",
            "count",
            "per step",
            "host blocked ms",
            "GPU idle ms",
            "warning",
        ],
        rows,
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
    let v = |m: &super::super::measured::Measured, k: Metric| {
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
    let row = |rank: u32, window: String, m: &super::super::measured::Measured| {
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
                ms(c.extra_compute_us),
                opt_ms(c.cost_per_step_us),
            ]];
            rows.extend(c.top.iter().take(5).map(|t| {
                vec![
                    k.rank.to_string(),
                    t.name.chars().take(60).collect(),
                    t.shape.clone(),
                    format!("{} / {}", t.alone, t.overlapped),
                    format!("{:.2}", t.slowdown_pct),
                    ms(t.extra_us),
                    format!(
                        "{} -> {} ms",
                        ms(t.alone_median_us),
                        ms(t.overlapped_median_us)
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
                "extra compute ms",
                "per step ms (median alone -> overlapped)",
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
                        .map_or("-".into(), |w| format!("{k}: {}", ms(w)))
                })
                .collect();
            first
                .comm_wait_us
                .or(rows.iter().find_map(|s| s.comm_wait_us))?;
            Some(vec![
                n.to_string(),
                first.straggler_rank.map_or("-".into(), |k| k.to_string()),
                opt_ms(first.straggler_wait_us),
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
            "longest wait for it ms",
            "each rank's wait for peers ms",
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
            headers: vec!["host", "clock", "ranks", "offset ms", "drift us/s", "residual ms", "instances"],
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
                        format!("{:.6}", o.offset_ns as f64 / 1e6),
                        format!("{:.2}", o.drift_us_per_s),
                        format!("{:.6}", o.residual_us / 1000.0),
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
                .map(|w| format!("rank {}: {} ms in {}", w.for_rank, ms(w.wait_us), w.count))
                .collect();
            vec![
                k.rank.to_string(),
                ms(k.breakdown.exposed_comm_us),
                opt_ms(k.exposed_wait_us),
                opt_ms(k.exposed_transfer_us),
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
            "exposed comm ms",
            "waiting for peers ms",
            "transferring ms",
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
                opt_ms(c.skew_median_us),
                opt_ms(c.skew_p95_us),
                opt_ms(c.skew_max_us),
                ms(c.wait_us),
                ms(c.transfer_us),
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
            "skew p50 ms",
            "skew p95 ms",
            "skew max ms",
            "wait ms",
            "transfer ms",
            "last to arrive (rank: count)",
            "bytes",
            "busbw GB/s (transfer)",
        ],
        rows,
    })
}
