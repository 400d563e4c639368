//! The straggler heat map (steps × ranks, time waiting for peers), the
//! straggler of each step, and who waits for whom.

use super::super::super::report::StepReport;
use super::charts::{PAD_L, W};
use super::svg::{c, heat_paths, level, ramp_legend, svg_open, Ramp};
use super::{ms_cell, num, section, table, Ctx, Val, MAX_ROWS};

/// Steps × ranks: how long each rank waited for its peers in the step's
/// collectives; the straggler of each step; who waits for whom.
pub(super) fn stragglers(ctx: &Ctx) -> String {
    let r = ctx.r;
    let mut steps: Vec<i64> = r.steps.iter().map(|s| s.step).collect();
    steps.sort_unstable();
    steps.dedup();
    let any = r.steps.iter().any(|s| s.comm_wait_us.is_some());
    let mut s = String::new();
    if !any || steps.is_empty() {
        s.push_str(
            "<p>No collective matched across ranks (one rank, or no NCCL kernels): \
             nobody waited for anybody.</p>\n",
        );
    } else {
        s.push_str(&wait_map(ctx, &steps));
        s.push_str(&straggler_steps(ctx, &steps));
    }
    let x = &r.cross_rank;
    if !x.waits.is_empty() {
        let mut order: Vec<usize> = (0..x.waits.len()).collect();
        order.sort_by(|&a, &b| x.waits[b].wait_us.total_cmp(&x.waits[a].wait_us));
        let rows: Vec<String> = order
            .iter()
            .take(MAX_ROWS)
            .map(|&i| {
                let w = &x.waits[i];
                let p = format!("cross_rank.waits.{i}");
                format!(
                    "{}{}{}{}",
                    num(
                        &format!("{p}.waiting_rank"),
                        Val::U(u64::from(w.waiting_rank)),
                        1.0,
                        0
                    ),
                    num(
                        &format!("{p}.for_rank"),
                        Val::U(u64::from(w.for_rank)),
                        1.0,
                        0
                    ),
                    num(&format!("{p}.count"), Val::U(w.count), 1.0, 0),
                    ms_cell(&format!("{p}.wait_us"), Some(w.wait_us))
                )
            })
            .collect();
        s.push_str("<h3>Who waits for whom (matched collectives)</h3>\n");
        s.push_str(&table(
            &["waiting rank", "for rank", "instances", "wait ms"],
            &rows,
            rows.len(),
            x.waits.len(),
        ));
    }
    section(
        "stragglers",
        "Stragglers: waiting for peers, per step and rank",
        &s,
    )
}

/// Columns of the heat map at most.
const MAX_COLS: usize = 120;

/// The heat map: one row per rank, one column per step number (or per
/// run of consecutive steps past [`MAX_COLS`]).
fn wait_map(ctx: &Ctx, steps: &[i64]) -> String {
    let r = ctx.r;
    let nr = r.ranks.len();
    // The colours span the headline windows' waits (a warm-up step's
    // wait can dwarf them); longer waits take the darkest.
    let in_window = |s: &&StepReport| {
        ctx.index_of(s.rank)
            .is_some_and(|k| r.ranks[k].window.steps.contains(&s.step))
    };
    let longest = |f: &dyn Fn(&&StepReport) -> bool| {
        r.steps
            .iter()
            .filter(f)
            .filter_map(|s| s.comm_wait_us)
            .fold(0.0f64, f64::max)
            / 1000.0
    };
    let max = match longest(&in_window) {
        m if m > 0.0 => m,
        _ => longest(&|_| true),
    };
    // At most MAX_COLS columns: past them a column holds consecutive
    // steps (its colour: the longest wait among them).
    let per = steps.len().div_ceil(MAX_COLS).max(1);
    let ncols = steps.len().div_ceil(per);
    let first = |j: usize| steps[j * per];
    let last = |j: usize| steps[((j + 1) * per).min(steps.len()) - 1];
    let plot_w = W - PAD_L - 10.0;
    let cw = (plot_w / ncols as f64).min(48.0);
    let ch = match nr {
        0..=32 => 18.0,
        33..=64 => 10.0,
        65..=256 => 3.0,
        _ => 1.5,
    };
    let detailed = nr <= 64;
    let h = 8.0 + nr as f64 * ch + 22.0;
    let mut s = ramp_legend(
        Ramp::Heat,
        max,
        "ms waiting or more",
        Some("no matched collective"),
    );
    s.push_str(&format!(
        "{}<title>wait for peers per step and rank</title>\n",
        svg_open(PAD_L + cw * ncols as f64 + 10.0, h)
    ));
    let col = |step: i64| steps.binary_search(&step).ok().map(|i| i / per);
    let mut waits: Vec<Vec<Option<f64>>> = vec![vec![None; ncols]; nr];
    // The straggler each column names (from the row with the longest wait).
    let mut named: Vec<Option<(u32, f64)>> = vec![None; ncols];
    for (k, idx) in ctx.steps_of.iter().enumerate() {
        for &i in idx {
            let st = &r.steps[i];
            let Some(j) = col(st.step) else { continue };
            if let Some(w) = st.comm_wait_us {
                waits[k][j] = Some(waits[k][j].map_or(w, |x| x.max(w)));
            }
            if let (Some(q), Some(w)) = (st.straggler_rank, st.straggler_wait_us) {
                if named[j].is_none_or(|n| w > n.1) {
                    named[j] = Some((q, w));
                }
            }
        }
    }
    let rows: Vec<Vec<Option<usize>>> = waits
        .iter()
        .map(|row| {
            row.iter()
                .map(|w| w.map(|w| level(w / 1000.0, max)))
                .collect()
        })
        .collect();
    let steps_label = |j: usize| {
        if per == 1 {
            format!("step {}", first(j))
        } else {
            format!("steps {}..{}", first(j), last(j))
        }
    };
    if detailed {
        for (k, row) in waits.iter().enumerate() {
            let y = 8.0 + k as f64 * ch;
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>\n",
                c(PAD_L - 6.0),
                c(y + ch * 0.75),
                r.ranks[k].rank
            ));
            for (j, w) in row.iter().enumerate() {
                let fill = rows[k][j].map_or("#e4e7ea".to_string(), |l| Ramp::Heat.color(l));
                let wait = w.map_or("no matched collective".to_string(), |w| {
                    format!("waited {:.3} ms for peers", w / 1000.0)
                });
                s.push_str(&format!(
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"#fff\">\
                     <title>rank {}, {}: {wait}</title></rect>\n",
                    c(PAD_L + j as f64 * cw),
                    c(y),
                    c(cw),
                    c(ch),
                    r.ranks[k].rank,
                    steps_label(j)
                ));
            }
        }
        // The straggler of each step: a dot in its row.
        for (j, n) in named.iter().enumerate() {
            let Some((q, _)) = n else { continue };
            let Some(k) = ctx.index_of(*q) else { continue };
            s.push_str(&format!(
                "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"#111\"><title>{}: straggler rank {q}</title></circle>\n",
                c(PAD_L + (j as f64 + 0.5) * cw),
                c(8.0 + (k as f64 + 0.5) * ch),
                c((ch / 4.0).min(cw / 4.0).max(1.0)),
                steps_label(j)
            ));
        }
    } else {
        s.push_str(&heat_paths(&rows, PAD_L, 8.0, cw, ch, Ramp::Heat));
        let every = (nr / 16).max(1);
        for k in (0..nr).step_by(every) {
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>\n",
                c(PAD_L - 6.0),
                c(8.0 + (k as f64 + 1.0) * ch),
                r.ranks[k].rank
            ));
        }
    }
    let every = (ncols / 24).max(1);
    for j in (0..ncols).step_by(every) {
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c(PAD_L + (j as f64 + 0.5) * cw),
            c(h - 6.0),
            first(j)
        ));
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">step</text></svg>\n",
        c(PAD_L - 6.0),
        c(h - 6.0)
    ));
    if per > 1 {
        s.push_str(&format!(
            "<p class=\"note\">One column per {per} steps: the longest wait among them.</p>\n"
        ));
    }
    if detailed {
        s.push_str(
            "<p class=\"note\">Dot: the step's straggler (the rank waited for longest).</p>\n",
        );
    }
    s
}

/// Per step: the straggler and the longest wait for it (the row that
/// names it).
fn straggler_steps(ctx: &Ctx, steps: &[i64]) -> String {
    let r = ctx.r;
    let mut best: Vec<Option<usize>> = vec![None; steps.len()];
    for (i, st) in r.steps.iter().enumerate() {
        let (Some(_), Some(w)) = (st.straggler_rank, st.straggler_wait_us) else {
            continue;
        };
        let Ok(j) = steps.binary_search(&st.step) else {
            continue;
        };
        if best[j].is_none_or(|b| w > r.steps[b].straggler_wait_us.unwrap_or(0.0)) {
            best[j] = Some(i);
        }
    }
    let named: Vec<usize> = best.into_iter().flatten().collect();
    let rows: Vec<String> = named
        .iter()
        .take(MAX_ROWS)
        .map(|&i| {
            let st = &r.steps[i];
            let p = format!("steps.{i}");
            format!(
                "<td class=\"n\">{}</td><td class=\"n\">{}</td>{}{}",
                st.step,
                st.rank,
                num(
                    &format!("{p}.straggler_rank"),
                    Val::U(u64::from(st.straggler_rank.unwrap_or(0))),
                    1.0,
                    0
                ),
                ms_cell(&format!("{p}.straggler_wait_us"), st.straggler_wait_us)
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<details><summary>the straggler of each step</summary>\n{}</details>\n",
        table(
            &["step", "waiting rank", "straggler", "wait ms"],
            &rows,
            rows.len(),
            named.len()
        )
    )
}
