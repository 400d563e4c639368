//! `report --format html`: the report as one self-contained page (inline
//! CSS, SVG drawn here, a few lines of script for sorting tables; nothing
//! fetched), built from the same [`Report`] as text, markdown and JSON.
//!
//! Every number a table shows sits in an element carrying its JSON path
//! (`data-key="ranks.0.overlap_pct"`), the JSON value (`data-value`), the
//! factor from the JSON unit to the one shown (`data-scale`) and the
//! decimals shown (`data-dp`), so a test can check the page against
//! `report --format json`. Figures the JSON does not hold (sums across
//! ranks, the stacked bars' parts) carry no key.
//!
//! Past [`PER_RANK_MAX`] ranks the page shows heat maps and summaries over
//! every rank and the details (steps, syncs, kernels) of a few picked ranks
//! (slowest, median, fastest, most exposed communication, most idle, the
//! straggler); no table has more than [`MAX_ROWS`] rows.

mod charts;
#[cfg(feature = "testing")]
pub mod check;
mod findings;
mod memory;
mod sections;
mod stragglers;
mod svg;
#[cfg(test)]
mod tests;

use super::super::report::Report;

/// Ranks detailed one by one; past this, the picked ranks (see the module doc).
pub const PER_RANK_MAX: usize = 8;
/// Rows a table shows at most (the rest: `report --format json`).
pub const MAX_ROWS: usize = 40;

/// The whole report as one HTML page; `sources` names the inputs (shown
/// in the title, escaped).
pub fn html(r: &Report, sources: &str) -> String {
    let ctx = Ctx::new(r);
    let mut body = String::with_capacity(1 << 16);
    body.push_str(&sections::header(&ctx, sources));
    body.push_str(&sections::headline(&ctx));
    body.push_str(&findings::findings(&ctx));
    body.push_str(&charts::steps(&ctx));
    body.push_str(&charts::utilization(&ctx));
    body.push_str(&sections::syncs(&ctx));
    body.push_str(&sections::collectives(&ctx));
    body.push_str(&stragglers::stragglers(&ctx));
    body.push_str(&sections::top_kernels(&ctx));
    body.push_str(&memory::memory(&ctx));
    body.push_str(&charts::measured(&ctx));
    body.push_str(&sections::diagnostics(&ctx));
    let mut page = String::with_capacity(body.len() + CSS.len() + JS.len() + 512);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    page.push_str(&format!(
        "<title>streamscope report: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        esc(sources)
    ));
    page.push_str(&body);
    page.push_str(&format!(
        "<footer>streamscope {} &middot; definitions of every figure: docs/METRICS.md &middot; \
         every row: <code>report --format json</code></footer>\n<script>{JS}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION")
    ));
    page
}

/// What the sections share: the report, the ranks detailed, and each
/// rank's step rows.
pub(super) struct Ctx<'a> {
    pub(super) r: &'a Report,
    /// Indexes into `r.ranks` of the ranks detailed, with why (empty when
    /// every rank is).
    pub(super) picks: Vec<(usize, String)>,
    /// Per index into `r.ranks`, the indexes of its rows in `r.steps`.
    pub(super) steps_of: Vec<Vec<usize>>,
}

impl<'a> Ctx<'a> {
    fn new(r: &'a Report) -> Ctx<'a> {
        let mut steps_of = vec![Vec::new(); r.ranks.len()];
        let at: std::collections::HashMap<u32, usize> = r
            .ranks
            .iter()
            .enumerate()
            .map(|(k, x)| (x.rank, k))
            .collect();
        for (i, s) in r.steps.iter().enumerate() {
            if let Some(&k) = at.get(&s.rank) {
                steps_of[k].push(i);
            }
        }
        Ctx {
            r,
            picks: picks(r),
            steps_of,
        }
    }

    /// True when the page summarizes ranks rather than listing each.
    pub(super) fn many(&self) -> bool {
        self.r.ranks.len() > PER_RANK_MAX
    }

    /// Index into `r.ranks` of rank number `rank`.
    pub(super) fn index_of(&self, rank: u32) -> Option<usize> {
        self.r.ranks.iter().position(|k| k.rank == rank)
    }

    /// "rank 3" or "rank 3 (slowest)".
    pub(super) fn label(&self, k: usize) -> String {
        let rank = self.r.ranks[k].rank;
        match self.picks.iter().find(|p| p.0 == k) {
            Some((_, why)) if !why.is_empty() => format!("rank {rank} ({why})"),
            _ => format!("rank {rank}"),
        }
    }
}

/// The ranks detailed: all up to [`PER_RANK_MAX`], else the slowest,
/// median and fastest by median step time, the most exposed
/// communication, the most idle and the straggler (each once, reasons
/// joined).
fn picks(r: &Report) -> Vec<(usize, String)> {
    let h = &r.headline.ranks;
    if r.ranks.len() <= PER_RANK_MAX || h.len() != r.ranks.len() {
        return (0..r.ranks.len().min(PER_RANK_MAX))
            .map(|k| (k, String::new()))
            .collect();
    }
    let mut by_step: Vec<usize> = (0..h.len())
        .filter(|&k| h[k].median_step_ms.is_some())
        .collect();
    by_step.sort_by(|&a, &b| {
        let v = |k: usize| h[k].median_step_ms.unwrap_or(0.0);
        v(a).total_cmp(&v(b))
    });
    let most = |f: &dyn Fn(usize) -> f64| {
        (0..h.len())
            .filter(|&k| h[k].has_gpu_events)
            .max_by(|&a, &b| f(a).total_cmp(&f(b)))
    };
    let straggler = r
        .headline
        .straggler
        .as_ref()
        .and_then(|s| r.ranks.iter().position(|k| k.rank == s.rank));
    let candidates = [
        ("slowest", by_step.last().copied()),
        ("median", by_step.get(by_step.len() / 2).copied()),
        ("fastest", by_step.first().copied()),
        ("most exposed", most(&|k| h[k].exposed_comm_ms_per_step)),
        ("most idle", most(&|k| h[k].idle_pct.unwrap_or(0.0))),
        ("straggler", straggler),
    ];
    let mut out: Vec<(usize, String)> = Vec::new();
    for (why, k) in candidates {
        let Some(k) = k else { continue };
        match out.iter_mut().find(|p| p.0 == k) {
            Some(p) => p.1 = format!("{}, {why}", p.1),
            None => out.push((k, why.to_string())),
        }
    }
    if out.is_empty() {
        out.push((0, String::new()));
    }
    out
}

/// `s` escaped for HTML text and double- or single-quoted attributes.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON number as a cell holds it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Val {
    /// A float (`None`: JSON null, shown "-").
    F(Option<f64>),
    /// An integer.
    U(u64),
}

/// A table cell showing the JSON value at `key`, times `scale`, with `dp`
/// decimals ("-" for null), carrying the attributes the module doc lists.
pub(super) fn num(key: &str, v: Val, scale: f64, dp: usize) -> String {
    let (value, text) = match v {
        Val::F(Some(x)) if x.is_finite() => (format!("{x}"), format!("{:.dp$}", x * scale)),
        Val::F(_) => ("null".to_string(), "-".to_string()),
        Val::U(n) => (n.to_string(), n.to_string()),
    };
    let scale = if matches!(v, Val::U(_)) { 1.0 } else { scale };
    format!(
        "<td class=\"n\" data-key=\"{}\" data-value=\"{value}\" data-scale=\"{scale}\" \
         data-dp=\"{dp}\">{text}</td>",
        esc(key)
    )
}

/// [`num`] of a time the JSON gives in µs, shown in ms with the decimals
/// of the text report (1 from 100 ms, 2 from 1 ms, 3 below).
pub(super) fn ms_cell(key: &str, us: Option<f64>) -> String {
    num(key, Val::F(us), 1e-3, us.map_or(2, |u| ms_dp(u / 1000.0)))
}

/// [`num`] of a time the JSON gives in ms.
pub(super) fn ms_cell_ms(key: &str, ms: Option<f64>) -> String {
    num(key, Val::F(ms), 1.0, ms.map_or(2, ms_dp))
}

/// Decimals for a value in ms.
pub(super) fn ms_dp(ms: f64) -> usize {
    match ms.abs() {
        a if a >= 100.0 => 1,
        a if a >= 1.0 => 2,
        _ => 3,
    }
}

/// A text cell (escaped).
pub(super) fn td(s: &str) -> String {
    format!("<td>{}</td>", esc(s))
}

/// A cell that does not wrap (a rank's label).
pub(super) fn td_nowrap(s: &str) -> String {
    format!("<td class=\"r\">{}</td>", esc(s))
}

/// A table cell for a value no JSON key holds (a sum, a median across
/// ranks), in ms from µs.
pub(super) fn plain_ms(us: Option<f64>) -> String {
    match us {
        Some(u) => format!(
            "<td class=\"n\">{:.dp$}</td>",
            u / 1000.0,
            dp = ms_dp(u / 1000.0)
        ),
        None => "<td class=\"n\">-</td>".to_string(),
    }
}

/// A sortable table: headers, then rows of already-built cells
/// (`<td>`...), and a note under it when `shown` < `total` rows.
pub(super) fn table(headers: &[&str], rows: &[String], shown: usize, total: usize) -> String {
    let mut s = String::from("<div class=\"scroll\"><table class=\"sortable\"><thead><tr>");
    for h in headers {
        s.push_str(&format!("<th>{}</th>", esc(h)));
    }
    s.push_str("</tr></thead><tbody>\n");
    for row in rows {
        s.push_str("<tr>");
        s.push_str(row);
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
    if shown < total {
        s.push_str(&format!(
            "<p class=\"note\">{shown} of {total} rows shown; every row: \
             <code>report --format json</code>.</p>\n"
        ));
    }
    s
}

/// An `<h2>` section with an anchor.
pub(super) fn section(id: &str, title: &str, inner: &str) -> String {
    format!(
        "<section id=\"{id}\"><h2>{}</h2>\n{inner}</section>\n",
        esc(title)
    )
}

/// Median of `v` (sorted in place); `None` when empty.
pub(super) fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

const CSS: &str = "
:root{--fg:#1d2329;--mut:#5f6b76;--line:#d8dee4;--bg:#fff;--alt:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;padding:16px 24px;max-width:1400px}
h1{font-size:22px;margin:4px 0 2px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
nav{margin:6px 0 10px;font-size:13px}nav a{margin-right:12px;color:#0b62c4;text-decoration:none}
.sub{color:var(--mut);font-size:13px;margin:0 0 4px;overflow-wrap:anywhere}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:170px;background:var(--alt)}
.card .v{font-size:22px;font-weight:600}.card .l{color:var(--mut);font-size:12px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:13px;margin:4px 0}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:var(--alt);position:sticky;top:0;cursor:pointer;font-weight:600;max-width:150px}
td.r{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.w{max-width:560px;overflow-wrap:anywhere}
tr:hover td{background:#eef4fb}
.note{color:var(--mut);font-size:12px;margin:2px 0 8px}
.warn{color:#a4262c}
.legend{font-size:12px;color:var(--mut);margin:2px 0 6px}
.legend span{display:inline-block;width:11px;height:11px;margin:0 4px -1px 10px;border-radius:2px}
svg{display:block;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#444}
.plots{display:flex;flex-wrap:wrap;gap:10px}
.plot{border:1px solid var(--line);border-radius:4px;padding:4px 6px}
.plot .t{font-size:12px;color:var(--mut)}
.sev-data_loss{color:#a4262c}.sev-error{color:#a4262c;font-weight:600}
footer{margin:32px 0 8px;color:var(--mut);font-size:12px}
code{font:12px ui-monospace,monospace;background:var(--alt);padding:0 3px}
";

/// Sorting by a click on a column header (numbers by their JSON value).
const JS: &str = "
(function(){
  function key(td){
    if(!td){return '';}
    var v=td.getAttribute('data-value');
    if(v!==null){var x=parseFloat(v);return isNaN(x)?-Infinity:x;}
    var t=td.textContent.trim();var y=parseFloat(t);
    return (t!==''&&!isNaN(y)&&/^-?[0-9.]+$/.test(t))?y:t.toLowerCase();
  }
  var tables=document.querySelectorAll('table.sortable');
  for(var i=0;i<tables.length;i++){
    (function(tb){
      var ths=tb.querySelectorAll('thead th');
      for(var c=0;c<ths.length;c++){
        (function(col,th){
          th.title='sort';
          th.addEventListener('click',function(){
            var body=tb.tBodies[0];if(!body){return;}
            var rows=Array.prototype.slice.call(body.rows);
            var dir=th.getAttribute('data-dir')==='asc'?-1:1;
            th.setAttribute('data-dir',dir===1?'asc':'desc');
            rows.sort(function(a,b){
              var x=key(a.cells[col]),y=key(b.cells[col]);
              if(typeof x===typeof y){return x<y?-dir:x>y?dir:0;}
              return typeof x==='number'?-dir:dir;
            });
            for(var r=0;r<rows.length;r++){body.appendChild(rows[r]);}
          });
        })(c,ths[c]);
      }
    })(tables[i]);
  }
})();
";
