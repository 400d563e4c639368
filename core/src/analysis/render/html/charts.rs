//! The page's plots: per-step stacked bars, GPU utilization strips,
//! measured GPU metrics per step, and (past `PER_RANK_MAX` ranks) the
//! ranks at a glance. The straggler heat map: `stragglers.rs`.

use super::super::super::report::StepReport;
use super::svg::{c, fmt_g, heat_paths, level, ramp_legend, sparkline, svg_open, Ramp};
use super::{esc, ms_cell, num, section, table, td, td_nowrap, Ctx, Val, MAX_ROWS};

/// Width of the wide plots (viewBox units; they scale down to the page).
pub(super) const W: f64 = 1200.0;
/// Left margin of the plots (labels).
pub(super) const PAD_L: f64 = 150.0;

/// Steps drawn per rank at most.
const MAX_BARS: usize = 240;

/// The parts of a step's stacked bar: name, colour, µs.
fn parts(s: &StepReport) -> [(&'static str, &'static str, f64); 5] {
    let b = &s.breakdown;
    let other = (b.non_compute_us - b.exposed_comm_us).max(0.0);
    [
        (
            "compute only",
            "#4e79a7",
            (b.compute_us - b.overlap_us).max(0.0),
        ),
        ("overlapped", "#59a14f", b.overlap_us.max(0.0)),
        ("communication only", "#e15759", b.exposed_comm_us.max(0.0)),
        ("other GPU work (copies)", "#b07aa1", other),
        ("idle", "#c9c4bf", b.idle_us.max(0.0)),
    ]
}

/// Per picked rank: one stacked bar per step (compute only, overlapped,
/// communication only, other, idle; the step time marked), and the
/// steps' figures in a folded table.
pub(super) fn steps(ctx: &Ctx) -> String {
    let r = ctx.r;
    if r.steps.is_empty() {
        return section("steps", "Per step", "<p>No steps found in the trace.</p>\n");
    }
    let mut s = String::from("<div class=\"legend\">");
    let some = StepReport::default();
    for (name, color, _) in parts(&some) {
        s.push_str(&format!("<span style=\"background:{color}\"></span>{name}"));
    }
    s.push_str(
        "<span style=\"background:#222;height:3px\"></span>step time (GPU clock) \
         &middot; faded: outside the headline window</div>\n",
    );
    for &(k, _) in &ctx.picks {
        let idx = &ctx.steps_of[k];
        if idx.is_empty() {
            continue;
        }
        let window = &r.ranks[k].window.steps;
        s.push_str(&format!("<h3>{}</h3>\n", esc(&ctx.label(k))));
        // A long trace: its first MAX_BARS steps.
        let shown = &idx[..idx.len().min(MAX_BARS)];
        s.push_str(&step_bars(r, shown, window));
        if shown.len() < idx.len() {
            s.push_str(&format!(
                "<p class=\"note\">The first {} of {} steps.</p>\n",
                shown.len(),
                idx.len()
            ));
        }
        s.push_str(&steps_table(r, idx, window));
    }
    section(
        "steps",
        "Per step: compute only, overlapped, communication only, idle",
        &s,
    )
}

/// The stacked bars of the steps `idx` (indexes into `r.steps`).
fn step_bars(r: &super::super::super::report::Report, idx: &[usize], window: &[i64]) -> String {
    let (h, pad_t, pad_b) = (190.0, 8.0, 20.0);
    let plot_w = W - PAD_L - 10.0;
    let plot_h = h - pad_t - pad_b;
    let n = idx.len() as f64;
    // Scaled to the headline window's steps (a warm-up step can be ten
    // times longer): taller bars are cut, their height written above.
    let top = |i: &usize| {
        let s = &r.steps[*i];
        s.breakdown.kernel_time_us.max(s.duration_us) / 1000.0
    };
    let in_window = idx
        .iter()
        .filter(|&&i| window.contains(&r.steps[i].step))
        .map(top)
        .fold(0.0f64, f64::max);
    let all = idx.iter().map(top).fold(0.0f64, f64::max);
    let ymax = if in_window > 0.0 && all > in_window * 1.25 {
        in_window * 1.25
    } else {
        all
    }
    .max(1e-3);
    let y = |ms: f64| pad_t + plot_h - ms.min(ymax) / ymax * plot_h;
    let bw = plot_w / n;
    let gap = if bw > 4.0 { bw * 0.15 } else { 0.0 };
    let mut s = format!(
        "{}<title>steps: GPU time by kind, ms</title>\n",
        svg_open(W, h)
    );
    for frac in [0.0, 0.5, 1.0] {
        let v = ymax * frac;
        s.push_str(&format!(
            "<line x1=\"{x1}\" x2=\"{x2}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#e3e3e3\"/>\
             <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{label} ms</text>\n",
            x1 = c(PAD_L),
            x2 = c(W - 10.0),
            yy = c(y(v)),
            tx = c(PAD_L - 6.0),
            ty = c(y(v) + 4.0),
            label = fmt_g(v)
        ));
    }
    let label_every = (idx.len() / 24).max(1);
    for (j, &i) in idx.iter().enumerate() {
        let st = &r.steps[i];
        let x = PAD_L + j as f64 * bw + gap / 2.0;
        let w = (bw - gap).max(0.5);
        let inside = window.contains(&st.step);
        let p = parts(st);
        let tip: Vec<String> = p
            .iter()
            .map(|(name, _, us)| format!("{name} {:.2} ms", us / 1000.0))
            .collect();
        s.push_str(&format!(
            "<g{}><title>step {}{}: step time {:.2} ms; {}</title>",
            if inside { "" } else { " opacity=\".35\"" },
            st.step,
            if inside { "" } else { " (outside the window)" },
            st.duration_us / 1000.0,
            esc(&tip.join(", "))
        ));
        let mut acc = 0.0;
        for (_, color, us) in p {
            let ms = us / 1000.0;
            if ms <= 0.0 {
                continue;
            }
            s.push_str(&format!(
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{color}\"/>",
                c(x),
                c(y(acc + ms)),
                c(w),
                c(y(acc) - y(acc + ms))
            ));
            acc += ms;
        }
        s.push_str(&format!(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"2\" fill=\"#222\"/></g>\n",
            c(x),
            c(y(st.duration_us / 1000.0) - 1.0),
            c(w)
        ));
        if top(&i) > ymax {
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">&#8593;{}</text>\n",
                c(x + w / 2.0),
                c(pad_t + 9.0),
                fmt_g(top(&i))
            ));
        }
        if j % label_every == 0 {
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                c(x + w / 2.0),
                c(h - 6.0),
                st.step
            ));
        }
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">step</text></svg>\n",
        c(PAD_L - 6.0),
        c(h - 6.0)
    ));
    s
}

/// The figures of the steps `idx`, folded (in the page, not on screen).
fn steps_table(r: &super::super::super::report::Report, idx: &[usize], window: &[i64]) -> String {
    let rows: Vec<String> = idx
        .iter()
        .take(MAX_ROWS)
        .map(|&i| {
            let st = &r.steps[i];
            let p = format!("steps.{i}");
            let b = format!("{p}.breakdown");
            format!(
                "<td class=\"n\">{}</td>{}{}{}{}{}{}{}{}{}",
                st.step,
                td(if window.contains(&st.step) { "yes" } else { "" }),
                ms_cell(&format!("{p}.duration_us"), Some(st.duration_us)),
                ms_cell(&format!("{b}.compute_us"), Some(st.breakdown.compute_us)),
                ms_cell(&format!("{b}.overlap_us"), Some(st.breakdown.overlap_us)),
                ms_cell(
                    &format!("{b}.exposed_comm_us"),
                    Some(st.breakdown.exposed_comm_us)
                ),
                ms_cell(&format!("{b}.idle_us"), Some(st.breakdown.idle_us)),
                num(
                    &format!("{b}.overlap_pct"),
                    Val::F(st.breakdown.overlap_pct),
                    1.0,
                    1
                ),
                ms_cell(&format!("{p}.comm_wait_us"), st.comm_wait_us),
                num(&format!("{p}.syncs"), Val::U(st.syncs), 1.0, 0)
            )
        })
        .collect();
    format!(
        "<details><summary>the steps' figures</summary>\n{}</details>\n",
        table(
            &[
                "step",
                "in window",
                "step ms",
                "compute ms",
                "overlapped ms",
                "exposed comm ms",
                "idle ms",
                "overlap %",
                "waiting for peers ms",
                "host syncs",
            ],
            &rows,
            rows.len(),
            idx.len()
        )
    )
}

/// Bins of a step function `pts` (value holds until the next point) over
/// [`t0`, `t1`): the time-weighted mean in each of `n` bins.
fn bins(pts: &[(i64, u32)], t0: i64, t1: i64, n: usize) -> Vec<f64> {
    let mut sum = vec![0.0f64; n];
    let span = (t1 - t0).max(1) as f64;
    let width = span / n as f64;
    for w in pts.windows(2) {
        let (a, b, v) = (w[0].0.max(t0), w[1].0.min(t1), f64::from(w[0].1));
        if b <= a || v == 0.0 {
            continue;
        }
        let (fa, fb) = ((a - t0) as f64 / width, (b - t0) as f64 / width);
        let (ia, ib) = (fa.floor() as usize, (fb.ceil() as usize).min(n));
        for (j, slot) in sum.iter_mut().enumerate().take(ib).skip(ia) {
            let lo = fa.max(j as f64);
            let hi = fb.min(j as f64 + 1.0);
            if hi > lo {
                *slot += v * (hi - lo);
            }
        }
    }
    sum
}

/// The GPU-clock span of `rank`'s headline-window steps (first GPU start
/// to the last step's end), within the series `pts`; the whole series
/// without steps.
fn span(ctx: &Ctx, rank: u32, pts: &[(i64, u32)]) -> (i64, i64) {
    let (lo, hi) = (pts[0].0, pts[pts.len() - 1].0);
    let Some(k) = ctx.index_of(rank) else {
        return (lo, hi);
    };
    let window = &ctx.r.ranks[k].window.steps;
    let mut t = None::<(i64, i64)>;
    for &i in &ctx.steps_of[k] {
        let st = &ctx.r.steps[i];
        let Some(g) = st.gpu_start_ns.filter(|_| window.contains(&st.step)) else {
            continue;
        };
        let end = g.saturating_add((st.duration_us * 1000.0) as i64);
        t = Some(t.map_or((g, end), |(a, b)| (a.min(g), b.max(end))));
    }
    match t {
        Some((a, b)) if a.max(lo) < b.min(hi) => (a.max(lo), b.min(hi)),
        _ => (lo, hi),
    }
}

/// Per GPU, how many of its SMs were in use over time (estimated from
/// launch configurations), one strip each up to 16 GPUs, else one row
/// each in a heat map; then idle time per stream of the picked ranks.
pub(super) fn utilization(ctx: &Ctx) -> String {
    let r = ctx.r;
    let devices: Vec<_> = r
        .occupancy
        .iter()
        .filter(|o| o.sms_in_use.len() >= 2)
        .collect();
    // Fewer columns for many GPUs: the heat map stays a few MB at most.
    let n_bins = if devices.len() > 256 { 120 } else { 240 };
    let mut s = String::new();
    if devices.is_empty() {
        s.push_str("<p>No kernel with a known launch configuration.</p>\n");
    } else {
        s.push_str(&ramp_legend(Ramp::Blue, 100.0, "% of the SMs", None));
        let strips = devices.len() <= 16;
        let ch = if strips {
            18.0
        } else if devices.len() <= 256 {
            4.0
        } else {
            2.0
        };
        let gap = if strips { 8.0 } else { 0.0 };
        let h = 6.0 + devices.len() as f64 * (ch + gap) + 18.0;
        s.push_str(&format!(
            "{}<title>SMs in use per GPU over its span</title>\n",
            svg_open(W, h)
        ));
        let plot_w = W - PAD_L - 10.0;
        let mut rows: Vec<Vec<Option<usize>>> = Vec::with_capacity(devices.len());
        for (i, o) in devices.iter().enumerate() {
            let (t0, t1) = span(ctx, o.rank, &o.sms_in_use);
            let sms = f64::from(o.sm_count.max(1));
            let b = bins(&o.sms_in_use, t0, t1, n_bins);
            let mean = b.iter().sum::<f64>() / n_bins as f64 / sms * 100.0;
            let row: Vec<Option<usize>> = b.iter().map(|v| Some(level(*v / sms, 1.0))).collect();
            let y = 6.0 + i as f64 * (ch + gap);
            if strips {
                s.push_str(&heat_paths(
                    std::slice::from_ref(&row),
                    PAD_L,
                    y,
                    plot_w / n_bins as f64,
                    ch,
                    Ramp::Blue,
                ));
                s.push_str(&format!(
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {} GPU {}</text>\
                     <rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#bbb\">\
                     <title>rank {}, {} ({} SMs): {:.1} % of the SMs in use on average over {:.1} ms</title></rect>\n",
                    c(PAD_L - 6.0),
                    c(y + ch - 5.0),
                    o.rank,
                    o.device.get(),
                    c(PAD_L),
                    c(y),
                    c(plot_w),
                    c(ch),
                    o.rank,
                    esc(&o.name),
                    o.sm_count,
                    mean,
                    (t1 - t0) as f64 / 1e6
                ));
                // Step starts (GPU clock) as ticks.
                if let Some(k) = ctx.index_of(o.rank) {
                    for &i in &ctx.steps_of[k] {
                        let Some(g) = r.steps[i].gpu_start_ns else {
                            continue;
                        };
                        if g < t0 || g > t1 {
                            continue;
                        }
                        let x = PAD_L + (g - t0) as f64 / (t1 - t0).max(1) as f64 * plot_w;
                        s.push_str(&format!(
                            "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e15759\" stroke-width=\"1\"/>",
                            c(x),
                            c(y - 2.0),
                            c(y + ch + 2.0)
                        ));
                    }
                }
            } else {
                rows.push(row);
                let every = (devices.len() / 16).max(1);
                if i % every == 0 {
                    s.push_str(&format!(
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>\n",
                        c(PAD_L - 6.0),
                        c(y + ch),
                        o.rank
                    ));
                }
            }
        }
        if !strips {
            s.push_str(&heat_paths(
                &rows,
                PAD_L,
                6.0,
                plot_w / n_bins as f64,
                ch,
                Ramp::Blue,
            ));
        }
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\">each GPU over its rank's headline-window steps \
             (no steps: first to last kernel){}</text></svg>\n",
            c(PAD_L),
            c(h - 4.0),
            if strips {
                "; red ticks: step starts"
            } else {
                ""
            }
        ));
    }
    s.push_str(&idle_table(ctx));
    section(
        "utilization",
        "GPU utilization over time (SMs in use, estimated from launch configurations)",
        &s,
    )
}

/// Idle time per stream of the picked ranks, by cause.
fn idle_table(ctx: &Ctx) -> String {
    let r = ctx.r;
    let mut rows = Vec::new();
    let mut total = 0;
    for &(k, _) in &ctx.picks {
        let Some(rk) = r.ranks.get(k) else { continue };
        total += rk.idle_by_stream.len();
        for (j, x) in rk.idle_by_stream.iter().enumerate().take(MAX_ROWS) {
            let p = format!("ranks.{k}.idle_by_stream.{j}");
            rows.push(format!(
                "{}<td class=\"n\">{}</td><td class=\"n\">{}</td>{}{}{}{}",
                td_nowrap(&ctx.label(k)),
                x.at.device()
                    .map_or("-".to_string(), |d| d.get().to_string()),
                x.at.stream_label(),
                ms_cell(&format!("{p}.host_wait_us"), Some(x.host_wait_us)),
                ms_cell(&format!("{p}.kernel_wait_us"), Some(x.kernel_wait_us)),
                ms_cell(&format!("{p}.other_us"), Some(x.other_us)),
                ms_cell(&format!("{p}.total_us"), Some(x.total_us))
            ));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    rows.truncate(MAX_ROWS);
    format!(
        "<h3>Idle time per stream (headline window)</h3>\n{}",
        table(
            &[
                "rank",
                "device",
                "stream",
                "host late ms",
                "short gaps ms",
                "other gaps ms",
                "idle ms",
            ],
            &rows,
            rows.len(),
            total
        )
    )
}

/// JSON field of each measured metric, in `Metric::ALL` order.
const METRIC_KEYS: [&str; 8] = [
    "sm_active_pct",
    "warps_active_pct",
    "tensor_active_pct",
    "dram_gbps",
    "nvlink_rx_gbps",
    "nvlink_tx_gbps",
    "pcie_read_gbps",
    "pcie_write_gbps",
];

/// Measured GPU metrics (when sampled): the headline window's means per
/// picked rank, and each metric per step as a small plot.
pub(super) fn measured(ctx: &Ctx) -> String {
    use crate::gpu_metrics::Metric;
    let r = ctx.r;
    let sampled =
        r.ranks.iter().any(|k| k.measured.any()) || r.steps.iter().any(|s| s.measured.any());
    if !sampled {
        return section(
            "metrics",
            "Measured GPU metrics",
            "<p>Not sampled in this trace (<code>record --gpu-metrics</code> samples them).</p>\n",
        );
    }
    let shown: Vec<usize> = (0..Metric::ALL.len())
        .filter(|&m| {
            r.ranks
                .iter()
                .any(|k| k.measured.get(Metric::ALL[m]).is_some())
                || r.steps
                    .iter()
                    .any(|s| s.measured.get(Metric::ALL[m]).is_some())
        })
        .collect();
    let mut headers: Vec<String> = vec!["rank".into()];
    headers.extend(
        shown
            .iter()
            .map(|&m| format!("{} {}", Metric::ALL[m].label(), Metric::ALL[m].unit())),
    );
    headers.push("samples".into());
    let rows: Vec<String> = ctx
        .picks
        .iter()
        .filter_map(|&(k, _)| r.ranks.get(k).map(|x| (k, x)))
        .map(|(k, x)| {
            let mut row = td_nowrap(&ctx.label(k));
            for &m in &shown {
                row.push_str(&num(
                    &format!("ranks.{k}.measured.{}", METRIC_KEYS[m]),
                    Val::F(x.measured.get(Metric::ALL[m])),
                    1.0,
                    if Metric::ALL[m].is_percent() { 1 } else { 2 },
                ));
            }
            row.push_str(&num(
                &format!("ranks.{k}.measured.samples"),
                Val::U(x.measured.samples),
                1.0,
                0,
            ));
            row
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut s = String::from("<p class=\"note\">Time-weighted means over the headline window's GPU span; the plots: per step.</p>\n");
    s.push_str(&table(&h, &rows, rows.len(), rows.len()));
    let colors = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
    ];
    for &(k, _) in ctx.picks.iter().take(4) {
        let mut plots = String::new();
        for &m in &shown {
            let pts: Vec<(f64, f64)> = ctx.steps_of[k]
                .iter()
                .filter_map(|&i| {
                    let st = &r.steps[i];
                    st.measured.get(Metric::ALL[m]).map(|v| (st.step as f64, v))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            let name = format!("{} {}", Metric::ALL[m].label(), Metric::ALL[m].unit());
            let (a, b) = (pts[0].0, pts[pts.len() - 1].0);
            plots.push_str(&format!(
                "<div class=\"plot\"><div class=\"t\">{}, steps {a}..{b}</div>{}</div>\n",
                esc(&name),
                sparkline(
                    &pts,
                    260.0,
                    70.0,
                    colors[m % colors.len()],
                    &format!("{name} per step")
                )
            ));
        }
        if !plots.is_empty() {
            s.push_str(&format!(
                "<h3>{}</h3>\n<div class=\"plots\">{plots}</div>\n",
                esc(&ctx.label(k))
            ));
        }
    }
    section("metrics", "Measured GPU metrics (CUPTI PM sampling)", &s)
}

/// Past `PER_RANK_MAX` ranks: every rank at a glance, one column each,
/// one row per headline figure (darker: worse, on that row's range).
pub(super) fn rank_overview(ctx: &Ctx) -> String {
    let h = &ctx.r.headline.ranks;
    let n = h.len();
    if n == 0 {
        return String::new();
    }
    type Get = fn(&super::super::super::headline::RankHeadline) -> Option<f64>;
    let figures: [(&str, Get, bool); 4] = [
        ("step ms", |x| x.median_step_ms, false),
        ("overlap %", |x| x.overlap_pct, true),
        (
            "exposed ms",
            |x| x.has_gpu_events.then_some(x.exposed_comm_ms_per_step),
            false,
        ),
        ("idle %", |x| x.idle_pct, false),
    ];
    let plot_w = W - PAD_L - 10.0;
    let cw = plot_w / n as f64;
    let ch = 16.0;
    let height = 8.0 + figures.len() as f64 * (ch + 4.0) + 20.0;
    let mut s =
        String::from("<h3>Every rank (darker: worse on the row's range; hover a column)</h3>\n");
    s.push_str(&format!(
        "{}<title>ranks at a glance</title>\n",
        svg_open(W, height)
    ));
    for (f, (name, get, higher_better)) in figures.iter().enumerate() {
        let vals: Vec<Option<f64>> = h.iter().map(get).collect();
        let (lo, hi) = vals
            .iter()
            .flatten()
            .fold((f64::MAX, f64::MIN), |a, &v| (a.0.min(v), a.1.max(v)));
        let row: Vec<Option<usize>> = vals
            .iter()
            .map(|v| {
                v.map(|v| {
                    let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
                    let t = if *higher_better { 1.0 - t } else { t };
                    level(t, 1.0)
                })
            })
            .collect();
        let y = 8.0 + f as f64 * (ch + 4.0);
        s.push_str(&heat_paths(
            std::slice::from_ref(&row),
            PAD_L,
            y,
            cw,
            ch,
            Ramp::Heat,
        ));
        let range = if hi >= lo {
            format!(" {}-{}", fmt_g(lo), fmt_g(hi))
        } else {
            String::new()
        };
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{name}{range}</text>\n",
            c(PAD_L - 6.0),
            c(y + ch - 4.0)
        ));
    }
    let col_h = figures.len() as f64 * (ch + 4.0);
    for (k, x) in h.iter().enumerate() {
        let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
        s.push_str(&format!(
            "<rect x=\"{}\" y=\"8\" width=\"{}\" height=\"{}\" fill=\"transparent\"><title>rank {}: step {} ms, overlap {} %, exposed {} ms/step, idle {} %</title></rect>\n",
            c(PAD_L + k as f64 * cw),
            c(cw.max(0.1)),
            c(col_h),
            x.rank,
            f(x.median_step_ms, 2),
            f(x.overlap_pct, 1),
            f(x.has_gpu_events.then_some(x.exposed_comm_ms_per_step), 2),
            f(x.idle_pct, 1)
        ));
    }
    let every = (n / 16).max(1);
    for k in (0..n).step_by(every) {
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\">{}</text>",
            c(PAD_L + k as f64 * cw),
            c(height - 6.0),
            h[k].rank
        ));
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank</text></svg>\n",
        c(PAD_L - 6.0),
        c(height - 6.0)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::bins;

    #[test]
    fn bins_weigh_a_step_function_by_time() {
        // 10 SMs over the first half, 0 after: 10 then 0.
        let b = bins(&[(0, 10), (50, 0), (100, 0)], 0, 100, 2);
        assert_eq!(b, vec![10.0, 0.0]);
        // A value across a bin edge counts in both, by share.
        let b = bins(&[(0, 0), (25, 8), (75, 0)], 0, 100, 2);
        assert_eq!(b, vec![4.0, 4.0]);
    }
}
