//! Report -> text tables (like `nsys stats`), markdown (for a PR), JSON,
//! or one self-contained HTML page (`html`).
//!
//! Text and markdown are built from the same tables so they never disagree.

mod findings;
mod headline;
mod html;
mod memory;
pub mod pretty;
mod tables;

pub use findings::{kind_words, where_words};
pub use headline::{PER_RANK_MAX, WIDTH};
/// Checks a page's keyed numbers against the JSON (tests only).
#[cfg(feature = "testing")]
pub use html::check as html_check;
pub use html::html;

use super::report::Report;

/// A titled table of already-formatted cells.
/// The columns of the collectives table, in text, markdown and HTML.
pub(super) const COLLECTIVE_HEADERS: &[&str] = &[
    "rank",
    "collective",
    "algo",
    "proto",
    "dtype",
    "count",
    "total ms",
    "mean ms",
    "bytes",
    "algbw GB/s",
    "busbw GB/s",
];

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

/// A time given in µs, written in ms: 1 decimal from 100 ms, 2 from 1 ms,
/// 3 below.
pub(super) fn ms(us: f64) -> String {
    let v = us / 1000.0;
    match v.abs() {
        a if a >= 100.0 => format!("{v:.1}"),
        a if a >= 1.0 => format!("{v:.2}"),
        _ => format!("{v:.3}"),
    }
}

/// [`ms`] of an optional µs value, "-" for none.
pub(super) fn opt_ms(us: Option<f64>) -> String {
    us.map_or("-".to_string(), ms)
}

/// A kernel name without its parameter list ("f(int, T*)" -> "f"), for
/// a person to read (JSON keeps the full name).
pub(super) fn kernel_name(name: &str) -> String {
    let trimmed = name.trim_end();
    if !trimmed.ends_with(')') {
        return name.to_string();
    }
    let mut depth = 0i32;
    for (i, c) in trimmed.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    let head = trimmed[..i].trim_end();
                    return if head.is_empty() {
                        name.to_string()
                    } else {
                        head.to_string()
                    };
                }
            }
            _ => {}
        }
    }
    name.to_string()
}

/// `s` cut to `n` characters, the cut marked with "…".
pub(super) fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A table's header, dash rule and rows, columns aligned (no title).
pub(super) fn aligned(t: &Table) -> Vec<String> {
    let n = t.headers.len();
    let mut w: Vec<usize> = t.headers.iter().map(|h| h.chars().count()).collect();
    for row in &t.rows {
        for (k, c) in row.iter().enumerate().take(n) {
            w[k] = w[k].max(c.chars().count());
        }
    }
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
        l.trim_end().to_string()
    };
    let rule: Vec<String> = w.iter().map(|&x| "-".repeat(x)).collect();
    let mut out = vec![
        line(t.headers.clone()),
        line(rule.iter().map(|x| x.as_str()).collect()),
    ];
    for row in &t.rows {
        out.push(line(row.iter().map(|c| c.as_str()).collect()));
    }
    out
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

/// The first screen: the header lines, the headline block, where the
/// tables are, and the notes; every line within [`WIDTH`] columns
/// (`report` without `--full`).
pub fn text_brief(r: &Report) -> String {
    let mut s = String::new();
    for l in header_lines(r).iter().chain(&headline::lines(r)) {
        s.push_str(&wrap(l, WIDTH, ""));
    }
    let titles: Vec<String> = tables::tables(r)
        .iter()
        .map(|t| {
            let t = t
                .title
                .split([':', ',', '('])
                .next()
                .unwrap_or_default()
                .trim();
            // "Per step" -> "per step"; "SM occupancy" stays.
            match t.chars().nth(1) {
                Some(c) if c.is_lowercase() => t[..1].to_lowercase() + &t[1..],
                _ => t.to_string(),
            }
        })
        .collect();
    if !titles.is_empty() {
        s.push('\n');
        s.push_str(&wrap(
            &format!(
                "Tables with --full: {}. Columns: docs/METRICS.md.",
                titles.join("; ")
            ),
            WIDTH,
            "  ",
        ));
    }
    for n in &r.diagnostics {
        s.push_str(&wrap(&format!("note: {n}"), WIDTH, "  "));
    }
    s
}

/// `line` word-wrapped to `width` columns (continuations start with
/// `indent`), each line ending in a newline.
fn wrap(line: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    // Leading spaces (an indented continuation) are kept.
    let body = line.trim_start_matches(' ');
    let mut cur = " ".repeat(line.len() - body.len());
    for word in body.split(' ') {
        let len = cur.chars().count();
        if !cur.trim().is_empty() && len + 1 + word.chars().count() > width {
            out.push_str(cur.trim_end());
            out.push('\n');
            cur = indent.to_string();
        } else if !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push_str(cur.trim_end());
    out.push('\n');
    // A single word longer than the width (a path) stays whole.
    out
}

/// The whole report as text: the headline block, then every table with
/// something to say (`report --full`).
pub fn text(r: &Report) -> String {
    let mut head = header_lines(r);
    head.extend(headline::lines(r));
    text_of(&head, &tables::tables(r), &r.diagnostics)
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
        s.push_str(&format!("\n{}\n\n", t.title));
        for l in aligned(t) {
            s.push_str(&l);
            s.push('\n');
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

/// GitHub-flavoured markdown: the headline block (as preformatted text),
/// then the tables.
pub fn markdown(r: &Report) -> String {
    let mut s = markdown_of(
        "streamscope report",
        &header_lines(r),
        &tables::tables(r),
        &r.diagnostics,
    );
    let block = headline::lines(r);
    if !block.is_empty() {
        // Preformatted, between the header lines and the first table.
        let at = s.find("\n### ").map_or(s.len(), |i| i + 1);
        s.insert_str(at, &format!("```\n{}\n```\n\n", block.join("\n")));
    }
    s
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
