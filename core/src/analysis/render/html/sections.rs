//! The page's tables: header, headline per rank, host syncs, collectives,
//! top kernels, diagnostics.

use super::super::kernel_name;
use super::{
    esc, median, ms_cell, ms_cell_ms, num, plain_ms, section, table, td, td_nowrap, Ctx, Val,
    MAX_ROWS,
};

/// Title, inputs, counts and the links to each section.
pub(super) fn header(ctx: &Ctx, sources: &str) -> String {
    let r = ctx.r;
    let mut s = String::from("<header><h1>streamscope report</h1>\n");
    s.push_str(&format!("<p class=\"sub\">{}</p>\n", esc(sources)));
    s.push_str(&format!(
        "<p class=\"sub\">{} rank(s), {} sync warning(s), dropped records: {}</p>\n",
        r.ranks.len(),
        r.sync_warnings.len(),
        r.dropped_records
    ));
    let mut windows: Vec<&str> = r.ranks.iter().map(|k| k.window.label.as_str()).collect();
    windows.dedup();
    if let [one] = windows.as_slice() {
        s.push_str(&format!(
            "<p class=\"sub\">headline window: {}</p>\n",
            esc(one)
        ));
    }
    for k in r.ranks.iter().filter(|k| !k.has_gpu_events).take(MAX_ROWS) {
        s.push_str(&format!(
            "<p class=\"sub\">{} ({}): no GPU events</p>\n",
            esc(&k.label),
            k.rank
        ));
    }
    if !r.other_processes.is_empty() {
        let list: Vec<String> = r
            .other_processes
            .iter()
            .take(MAX_ROWS)
            .map(|o| esc(format!("{} {}", o.label, o.name).trim_end()))
            .collect();
        s.push_str(&format!(
            "<p class=\"sub\">other processes (no GPU work, not ranks): {}</p>\n",
            list.join(", ")
        ));
    }
    s.push_str(
        "<nav><a href=\"#headline\">headline</a><a href=\"#findings\">fix first</a>\
         <a href=\"#steps\">steps</a>\
         <a href=\"#utilization\">utilization</a><a href=\"#syncs\">host syncs</a>\
         <a href=\"#collectives\">collectives</a><a href=\"#stragglers\">stragglers</a>\
         <a href=\"#kernels\">top kernels</a><a href=\"#metrics\">GPU metrics</a>\
         <a href=\"#diagnostics\">diagnostics</a></nav></header>\n",
    );
    s
}

/// Cards for the job, the per-rank headline table (the picked ranks and
/// a summary over all past `PER_RANK_MAX`), the straggler.
pub(super) fn headline(ctx: &Ctx) -> String {
    let r = ctx.r;
    let h = &r.headline.ranks;
    let mut s = String::new();
    let mut step: Vec<f64> = h.iter().filter_map(|x| x.median_step_ms).collect();
    let mut overlap: Vec<f64> = h.iter().filter_map(|x| x.overlap_pct).collect();
    let exposed = h
        .iter()
        .filter(|x| x.has_gpu_events)
        .map(|x| x.exposed_comm_ms_per_step)
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    let idle = h
        .iter()
        .filter_map(|x| x.idle_pct)
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    let card = |v: String, l: &str| {
        format!(
            "<div class=\"card\"><div class=\"v\">{}</div><div class=\"l\">{}</div></div>",
            esc(&v),
            esc(l)
        )
    };
    let g = |v: Option<f64>, dp: usize| v.map_or("-".to_string(), |x| format!("{x:.dp$}"));
    s.push_str("<div class=\"cards\">");
    s.push_str(&card(r.ranks.len().to_string(), "ranks"));
    s.push_str(&card(
        g(median(&mut step), 2),
        "median step time, ms (median over ranks)",
    ));
    s.push_str(&card(
        g(median(&mut overlap), 1),
        "communication under compute, % (median over ranks)",
    ));
    s.push_str(&card(
        g(exposed, 2),
        "exposed communication, ms/step (worst rank)",
    ));
    s.push_str(&card(g(idle, 1), "GPU idle, % (worst rank)"));
    if let Some(st) = &r.headline.straggler {
        s.push_str(&card(
            format!("rank {}", st.rank),
            &format!("straggler: last in {} of {} steps", st.steps, st.of_steps),
        ));
    }
    s.push_str("</div>\n");
    if ctx.many() {
        s.push_str(&summary_over_ranks(ctx));
        s.push_str(&super::charts::rank_overview(ctx));
        s.push_str(&format!(
            "<h3>Picked ranks ({} of {})</h3>\n",
            ctx.picks.len(),
            r.ranks.len()
        ));
    }
    let mut rows = Vec::new();
    for &(k, _) in &ctx.picks {
        let (Some(x), Some(rk)) = (h.get(k), r.ranks.get(k)) else {
            continue;
        };
        let p = format!("headline.ranks.{k}");
        let mut row = td_nowrap(&ctx.label(k));
        row.push_str(&format!("<td>{}</td>", esc(&x.device)));
        if !x.has_gpu_events {
            row.push_str("<td colspan=\"10\">no GPU events</td>");
            rows.push(row);
            continue;
        }
        row.push_str(&num(&format!("{p}.steps"), Val::U(x.steps), 1.0, 0));
        row.push_str(&ms_cell_ms(
            &format!("{p}.median_step_ms"),
            x.median_step_ms,
        ));
        row.push_str(&ms_cell_ms(&format!("{p}.min_step_ms"), x.min_step_ms));
        row.push_str(&ms_cell_ms(&format!("{p}.max_step_ms"), x.max_step_ms));
        row.push_str(&num(
            &format!("{p}.overlap_pct"),
            Val::F(x.overlap_pct),
            1.0,
            1,
        ));
        row.push_str(&ms_cell_ms(
            &format!("{p}.exposed_comm_ms_per_step"),
            Some(x.exposed_comm_ms_per_step),
        ));
        row.push_str(&ms_cell(
            &format!("ranks.{k}.exposed_wait_us"),
            rk.exposed_wait_us,
        ));
        row.push_str(&num(&format!("{p}.idle_pct"), Val::F(x.idle_pct), 1.0, 1));
        row.push_str(&num(
            &format!("ranks.{k}.overlap_efficiency_pct"),
            Val::F(rk.breakdown.overlap_efficiency_pct),
            1.0,
            1,
        ));
        match &x.costliest_sync {
            Some(c) => {
                row.push_str(&format!(
                    "<td class=\"w\">{} ({}, x{})</td>",
                    esc(&c.where_),
                    esc(&c.pattern),
                    c.count
                ));
                row.push_str(&ms_cell_ms(
                    &format!("{p}.costliest_sync.gpu_idle_ms_per_step"),
                    c.gpu_idle_ms_per_step,
                ));
            }
            None => row.push_str("<td>-</td><td class=\"n\">-</td>"),
        }
        rows.push(row);
    }
    let n = rows.len();
    s.push_str(&table(
        &[
            "rank",
            "GPU",
            "steps",
            "median step ms",
            "min ms",
            "max ms",
            "overlap %",
            "exposed comm ms/step",
            "exposed waiting for peers ms (window)",
            "GPU idle %",
            "overlap of min(comm, compute) %",
            "costliest host sync",
            "its GPU idle ms/step",
        ],
        &rows,
        n,
        n,
    ));
    if let Some(st) = &r.headline.straggler {
        let row = format!(
            "{}{}{}{}",
            num(
                "headline.straggler.rank",
                Val::U(u64::from(st.rank)),
                1.0,
                0
            ),
            num("headline.straggler.steps", Val::U(st.steps), 1.0, 0),
            num("headline.straggler.of_steps", Val::U(st.of_steps), 1.0, 0),
            ms_cell_ms("headline.straggler.median_wait_ms", st.median_wait_ms)
        );
        s.push_str("<h3>Straggler</h3>\n");
        s.push_str(&table(
            &[
                "rank",
                "steps it was last in",
                "of steps",
                "longest wait for it, ms/step (median)",
            ],
            &[row],
            1,
            1,
        ));
    }
    let windows: Vec<&str> = {
        let mut w: Vec<&str> = r.ranks.iter().map(|k| k.window.label.as_str()).collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    let note = if windows.len() > 1 {
        format!("Headline windows: {}. ", esc(&windows.join("; ")))
    } else {
        String::new()
    };
    s.push_str(&format!(
        "<p class=\"note\">{note}Overlap: share of the communication time under compute \
         (HTA's definition); exposed communication: communication not under compute.</p>\n"
    ));
    section("headline", "Headline", &s)
}

/// Min, median and max over every rank of the headline figures.
fn summary_over_ranks(ctx: &Ctx) -> String {
    let h = &ctx.r.headline.ranks;
    type Get = fn(&super::super::super::headline::RankHeadline) -> Option<f64>;
    let cols: [(&str, Get, usize); 4] = [
        ("median step ms", |x| x.median_step_ms, 2),
        ("overlap %", |x| x.overlap_pct, 1),
        (
            "exposed comm ms/step",
            |x| x.has_gpu_events.then_some(x.exposed_comm_ms_per_step),
            2,
        ),
        ("GPU idle %", |x| x.idle_pct, 1),
    ];
    let mut rows = Vec::new();
    for (name, get, dp) in cols {
        let mut v: Vec<f64> = h.iter().filter_map(get).collect();
        let m = median(&mut v);
        let cell = |x: Option<f64>| {
            x.map_or("<td class=\"n\">-</td>".into(), |x| {
                format!("<td class=\"n\">{x:.dp$}</td>")
            })
        };
        rows.push(format!(
            "{}<td class=\"n\">{}</td>{}{}{}",
            td(name),
            v.len(),
            cell(v.first().copied()),
            cell(m),
            cell(v.last().copied())
        ));
    }
    format!(
        "<h3>Over all {} ranks</h3>\n{}",
        h.len(),
        table(&["figure", "ranks", "min", "median", "max"], &rows, 4, 4)
    )
}

/// The host syncs of the picked ranks (costliest first) and, past
/// `PER_RANK_MAX` ranks, each call site summed over every rank.
pub(super) fn syncs(ctx: &Ctx) -> String {
    let r = ctx.r;
    let mut all: Vec<(usize, usize)> = Vec::new();
    for &(k, _) in &ctx.picks {
        if let Some(rk) = r.ranks.get(k) {
            all.extend((0..rk.syncs.len()).map(|j| (k, j)));
        }
    }
    all.sort_by(|a, b| {
        let g = |x: &(usize, usize)| r.ranks[x.0].syncs[x.1].gpu_idle_us;
        g(b).total_cmp(&g(a))
    });
    let mut s = String::new();
    if ctx.many() {
        s.push_str(&sync_sites(ctx));
        s.push_str("<h3>Picked ranks</h3>\n");
    }
    let rows: Vec<String> = all
        .iter()
        .take(MAX_ROWS)
        .map(|&(k, j)| {
            let g = &r.ranks[k].syncs[j];
            let p = format!("ranks.{k}.syncs.{j}");
            let warn = g.warning.as_deref().unwrap_or("");
            format!(
                "{}{}{}<td class=\"w\">{}</td>{}{}{}{}{}<td class=\"warn\">{}</td>",
                td_nowrap(&ctx.label(k)),
                td(&g.pattern),
                td(&g.api),
                esc(&g.where_),
                td(if g.op.is_empty() { "-" } else { &g.op }),
                num(&format!("{p}.count"), Val::U(g.count), 1.0, 0),
                num(&format!("{p}.per_step"), Val::F(g.per_step), 1.0, 2),
                ms_cell(&format!("{p}.host_blocked_us"), Some(g.host_blocked_us)),
                ms_cell(&format!("{p}.gpu_idle_us"), Some(g.gpu_idle_us)),
                esc(warn)
            )
        })
        .collect();
    if rows.is_empty() {
        s.push_str("<p>No host synchronization in the headline window.</p>\n");
    } else {
        s.push_str(&table(
            &[
                "rank",
                "pattern",
                "api",
                "where (Python line, else NVTX range, else API)",
                "operator",
                "count",
                "per step",
                "host blocked ms",
                "GPU idle ms",
                "warning",
            ],
            &rows,
            rows.len(),
            all.len(),
        ));
    }
    let outside: Vec<String> = ctx
        .picks
        .iter()
        .filter_map(|&(k, _)| r.ranks.get(k).map(|rk| (k, rk)))
        .flat_map(|(k, rk)| {
            [
                ("start-up", &rk.startup_syncs),
                ("after", &rk.after_window_syncs),
            ]
            .into_iter()
            .filter(|(_, g)| !g.is_empty())
            .map(move |(label, g)| {
                format!(
                    "{}{}<td class=\"n\">{}</td><td class=\"n\">{}</td>{}{}",
                    td_nowrap(&ctx.label(k)),
                    td(label),
                    g.len(),
                    g.iter().map(|x| x.count).sum::<u64>(),
                    plain_ms(Some(g.iter().map(|x| x.host_blocked_us).sum())),
                    plain_ms(Some(g.iter().map(|x| x.gpu_idle_us).sum()))
                )
            })
        })
        .collect();
    if !outside.is_empty() {
        s.push_str("<h3>Outside the headline window (summed)</h3>\n");
        let n = outside.len().min(MAX_ROWS);
        s.push_str(&table(
            &[
                "rank",
                "when",
                "call sites",
                "count",
                "host blocked ms",
                "GPU idle ms",
            ],
            &outside[..n],
            n,
            outside.len(),
        ));
    }
    section("syncs", "Host synchronizations (headline window)", &s)
}

/// Each (pattern, where) call site summed over every rank, costliest first.
fn sync_sites(ctx: &Ctx) -> String {
    // (pattern, where) -> (ranks, count, GPU idle µs, max per rank µs)
    type Site<'a> = ((&'a str, &'a str), (u64, u64, f64, f64));
    let mut sites: Vec<Site> = Vec::new();
    let mut at: std::collections::HashMap<(&str, &str), usize> = Default::default();
    for rk in &ctx.r.ranks {
        for g in &rk.syncs {
            let key = (g.pattern.as_str(), g.where_.as_str());
            let i = *at.entry(key).or_insert_with(|| {
                sites.push((key, (0, 0, 0.0, 0.0)));
                sites.len() - 1
            });
            let v = &mut sites[i].1;
            v.0 += 1;
            v.1 += g.count;
            v.2 += g.gpu_idle_us;
            v.3 = v.3.max(g.gpu_idle_us);
        }
    }
    sites.sort_by(|a, b| b.1 .2.total_cmp(&a.1 .2));
    let rows: Vec<String> = sites
        .iter()
        .take(MAX_ROWS)
        .map(|((pattern, where_), (ranks, count, idle, max))| {
            format!(
                "{}<td class=\"w\">{}</td><td class=\"n\">{ranks}</td><td class=\"n\">{count}</td>{}{}",
                td(pattern),
                esc(where_),
                plain_ms(Some(*idle)),
                plain_ms(Some(*max))
            )
        })
        .collect();
    format!(
        "<h3>Call sites over all {} ranks</h3>\n{}",
        ctx.r.ranks.len(),
        table(
            &[
                "pattern",
                "where",
                "ranks",
                "count",
                "GPU idle ms (all ranks)",
                "GPU idle ms (worst rank)",
            ],
            &rows,
            rows.len(),
            sites.len()
        )
    )
}

/// Collectives per picked rank and kind (bytes, bandwidths), then across
/// ranks: skew, waiting and bus bandwidth per kind.
pub(super) fn collectives(ctx: &Ctx) -> String {
    let r = ctx.r;
    let mut s = String::new();
    let picked: Vec<u32> = ctx
        .picks
        .iter()
        .filter_map(|&(k, _)| r.ranks.get(k).map(|x| x.rank))
        .collect();
    let idx: Vec<usize> = (0..r.collectives.len())
        .filter(|&i| picked.contains(&r.collectives[i].rank))
        .collect();
    let rows: Vec<String> = idx
        .iter()
        .take(MAX_ROWS)
        .map(|&i| {
            let c = &r.collectives[i];
            let p = format!("collectives.{i}");
            let k = ctx.index_of(c.rank).unwrap_or(0);
            format!(
                "{}{}{}{}{}{}{}{}{}{}{}",
                td_nowrap(&ctx.label(k)),
                td(&c.collective),
                td(&c.algorithm),
                td(&c.protocol),
                td(&c.dtype),
                num(&format!("{p}.count"), Val::U(c.count), 1.0, 0),
                ms_cell(&format!("{p}.total_us"), Some(c.total_us)),
                ms_cell(&format!("{p}.mean_us"), Some(c.mean_us)),
                match c.bytes {
                    Some(b) => num(&format!("{p}.bytes"), Val::U(b), 1.0, 0),
                    None => num(&format!("{p}.bytes"), Val::F(None), 1.0, 0),
                },
                num(&format!("{p}.alg_bw_gbps"), Val::F(c.alg_bw_gbps), 1.0, 2),
                num(&format!("{p}.bus_bw_gbps"), Val::F(c.bus_bw_gbps), 1.0, 2)
            )
        })
        .collect();
    if rows.is_empty() {
        s.push_str("<p>No collective in the headline window.</p>\n");
        return section("collectives", "Collectives (headline window)", &s);
    }
    if ctx.many() {
        s.push_str(&kinds_over_ranks(ctx));
        s.push_str("<h3>Picked ranks</h3>\n");
    }
    s.push_str(&table(
        super::super::COLLECTIVE_HEADERS,
        &rows,
        rows.len(),
        idx.len(),
    ));
    let x = &r.cross_rank;
    if !x.kinds.is_empty() {
        let rows: Vec<String> = x
            .kinds
            .iter()
            .enumerate()
            .take(MAX_ROWS)
            .map(|(i, k)| {
                let p = format!("cross_rank.kinds.{i}");
                format!(
                    "{}{}{}{}{}{}{}{}{}",
                    td(&k.collective),
                    td(&k.group),
                    num(&format!("{p}.count"), Val::U(k.count), 1.0, 0),
                    ms_cell(&format!("{p}.skew_median_us"), k.skew_median_us),
                    ms_cell(&format!("{p}.skew_max_us"), k.skew_max_us),
                    ms_cell(&format!("{p}.wait_us"), Some(k.wait_us)),
                    ms_cell(&format!("{p}.transfer_us"), Some(k.transfer_us)),
                    match k.bytes {
                        Some(b) => num(&format!("{p}.bytes"), Val::U(b), 1.0, 0),
                        None => num(&format!("{p}.bytes"), Val::F(None), 1.0, 0),
                    },
                    num(&format!("{p}.bus_bw_gbps"), Val::F(k.bus_bw_gbps), 1.0, 2)
                )
            })
            .collect();
        s.push_str(&format!(
            "<h3>Across ranks ({}, matched by {})</h3>\n",
            esc(&x.window),
            esc(if x.method.is_empty() { "-" } else { &x.method })
        ));
        s.push_str(&table(
            &[
                "collective",
                "group",
                "instances",
                "skew median ms",
                "skew max ms",
                "waiting ms (all ranks)",
                "transfer ms (all ranks)",
                "bytes",
                "busbw GB/s (transfer)",
            ],
            &rows,
            rows.len(),
            x.kinds.len(),
        ));
    }
    section("collectives", "Collectives (headline window)", &s)
}

/// Per collective kind and configuration, over every rank: ranks, count,
/// bus bandwidth min / median / max.
fn kinds_over_ranks(ctx: &Ctx) -> String {
    type Key<'a> = (&'a str, &'a str, &'a str, &'a str);
    let mut kinds: Vec<(Key, u64, u64, Vec<f64>)> = Vec::new();
    for c in &ctx.r.collectives {
        let key = (
            c.collective.as_str(),
            c.algorithm.as_str(),
            c.protocol.as_str(),
            c.dtype.as_str(),
        );
        let i = match kinds.iter().position(|x| x.0 == key) {
            Some(i) => i,
            None => {
                kinds.push((key, 0, 0, Vec::new()));
                kinds.len() - 1
            }
        };
        let e = &mut kinds[i];
        e.1 += 1;
        e.2 += c.count;
        e.3.extend(c.bus_bw_gbps);
    }
    let rows: Vec<String> = kinds
        .iter_mut()
        .take(MAX_ROWS)
        .map(|(k, ranks, count, bw)| {
            let m = median(bw);
            let f = |v: Option<f64>| {
                v.map_or("<td class=\"n\">-</td>".into(), |x| {
                    format!("<td class=\"n\">{x:.2}</td>")
                })
            };
            format!(
                "{}{}{}{}<td class=\"n\">{ranks}</td><td class=\"n\">{count}</td>{}{}{}",
                td(k.0),
                td(k.1),
                td(k.2),
                td(k.3),
                f(bw.first().copied()),
                f(m),
                f(bw.last().copied())
            )
        })
        .collect();
    format!(
        "<h3>Over all {} ranks</h3>\n{}",
        ctx.r.ranks.len(),
        table(
            &[
                "collective",
                "algo",
                "proto",
                "dtype",
                "ranks",
                "count",
                "busbw min",
                "busbw median",
                "busbw max",
            ],
            &rows,
            rows.len(),
            kinds.len()
        )
    )
}

/// The top kernels of each picked rank.
pub(super) fn top_kernels(ctx: &Ctx) -> String {
    let r = ctx.r;
    let mut rows = Vec::new();
    let mut total = 0;
    for &(k, _) in &ctx.picks {
        let Some(rk) = r.ranks.get(k) else { continue };
        total += rk.top_kernels.len();
        for (j, t) in rk.top_kernels.iter().enumerate() {
            if rows.len() >= MAX_ROWS {
                break;
            }
            let p = format!("ranks.{k}.top_kernels.{j}");
            let share = t.share_pct.unwrap_or(0.0).clamp(0.0, 100.0);
            let bar = format!(
                "<td><svg width=\"60\" height=\"8\"><rect width=\"60\" height=\"8\" \
                 fill=\"#e4e7ea\"/><rect width=\"{}\" height=\"8\" fill=\"#4e79a7\"/></svg></td>",
                super::svg::c(share * 0.6)
            );
            rows.push(format!(
                "{}<td class=\"w\" title=\"{}\">{}</td>{}{}{}{}{}{}{bar}<td class=\"w\">{}</td>",
                td_nowrap(&ctx.label(k)),
                esc(&t.name),
                esc(&kernel_name(&t.name)),
                td(&t.class),
                num(&format!("{p}.count"), Val::U(t.count), 1.0, 0),
                ms_cell_ms(&format!("{p}.total_ms"), Some(t.total_ms)),
                ms_cell_ms(&format!("{p}.mean_ms"), Some(t.mean_ms)),
                ms_cell_ms(&format!("{p}.per_step_ms"), t.per_step_ms),
                num(&format!("{p}.share_pct"), Val::F(t.share_pct), 1.0, 1),
                esc(if t.python.is_empty() { "-" } else { &t.python })
            ));
        }
    }
    let s = if rows.is_empty() {
        "<p>No kernel in the headline window.</p>\n".to_string()
    } else {
        let n = rows.len();
        table(
            &[
                "rank",
                "kernel",
                "class",
                "count",
                "total ms",
                "mean ms",
                "ms per step",
                "GPU time %",
                "",
                "launched at",
            ],
            &rows,
            n,
            total,
        )
    };
    section("kernels", "Top kernels (headline window)", &s)
}

/// Every diagnostic: severity, kind, count, file, what happened.
pub(super) fn diagnostics(ctx: &Ctx) -> String {
    let d = &ctx.r.diagnostics;
    let name = |v: serde_json::Result<serde_json::Value>| match v {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    let rows: Vec<String> = d
        .iter()
        .enumerate()
        .take(MAX_ROWS * 5)
        .map(|(i, x)| {
            let sev = name(serde_json::to_value(x.severity));
            format!(
                "<td class=\"sev-{}\">{}</td>{}{}<td class=\"w\">{}</td><td class=\"w\">{}</td>",
                esc(&sev),
                esc(&sev),
                td(&name(serde_json::to_value(x.kind))),
                num(&format!("diagnostics.{i}.count"), Val::U(x.count), 1.0, 0),
                esc(x.file.as_deref().unwrap_or("-")),
                esc(&x.detail)
            )
        })
        .collect();
    let s = if rows.is_empty() {
        "<p>None: nothing was lost or guessed while loading and analyzing.</p>\n".to_string()
    } else {
        table(
            &["severity", "kind", "count", "file", "detail"],
            &rows,
            rows.len(),
            d.len(),
        )
    };
    section("diagnostics", "Diagnostics", &s)
}
