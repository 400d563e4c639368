//! "Fix first": the report's findings in its order (ranked by the step
//! time each fix saves, as `report` ranks them), each with where it is,
//! the predicted gain, its measured cost and the evidence.

use super::{esc, num, section, table, td, Ctx, Val, MAX_ROWS};

/// The findings table; a sentence when there is none.
pub(super) fn findings(ctx: &Ctx) -> String {
    let f = &ctx.r.findings;
    let rows: Vec<String> = f
        .iter()
        .enumerate()
        .take(MAX_ROWS)
        .map(|(i, x)| {
            let p = format!("findings.{i}");
            let w = &x.where_;
            let mut at = Vec::new();
            if let Some(s) = w.step {
                at.push(format!("step {s}"));
            }
            if !w.line.is_empty() {
                at.push(w.line.clone());
            }
            if !w.kernel.is_empty() {
                at.push(w.kernel.clone());
            }
            let gain = if x.predicted_gain_us.is_some() {
                format!(
                    "{}{}",
                    num(
                        &format!("{p}.predicted_gain_us"),
                        Val::F(x.predicted_gain_us),
                        1e-3,
                        2
                    ),
                    num(
                        &format!("{p}.predicted_gain_pct"),
                        Val::F(x.predicted_gain_pct),
                        1.0,
                        1
                    )
                )
            } else {
                format!(
                    "<td colspan=\"2\" class=\"w\" title=\"{}\">not predicted</td>",
                    esc(&x.prediction)
                )
            };
            format!(
                "{}{}{}<td class=\"w\">{}</td>{gain}{}{}<td class=\"w\">{}</td>",
                num(
                    &format!("{p}.where.rank"),
                    Val::U(u64::from(w.rank)),
                    1.0,
                    0
                ),
                td(&x.kind),
                td(if x.beyond_noise { "yes" } else { "no" }),
                esc(&at.join(" · ")),
                num(
                    &format!("{p}.cost_per_step_us"),
                    Val::F(Some(x.cost_per_step_us)),
                    1e-3,
                    2
                ),
                num(&format!("{p}.noise_us"), Val::F(Some(x.noise_us)), 1e-3, 2),
                esc(&x.evidence)
            )
        })
        .collect();
    let s = if rows.is_empty() {
        "<p>No finding: nothing costs step time beyond what the report measures as noise.</p>\n"
            .to_string()
    } else {
        let mut s = String::from(
            "<p class=\"note\">Ranked by the step time each fix would save (what-if \
             replays); a finding whose gain cannot be predicted is ranked by its measured \
             cost and says why. Beyond noise: the gain (or cost) exceeds twice the standard \
             error of the rank's median step.</p>\n",
        );
        s.push_str(&table(
            &[
                "rank",
                "kind",
                "beyond noise",
                "where",
                "gain ms/step",
                "gain %",
                "cost ms/step",
                "noise ms",
                "evidence",
            ],
            &rows,
            rows.len(),
            f.len(),
        ));
        s
    };
    section(
        "findings",
        "Fix first: findings ranked by predicted gain",
        &s,
    )
}
