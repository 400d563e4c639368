//! For tests (the `testing` feature): the keyed numbers of a page (or of
//! the DOM a browser dumps of it) checked against the report's JSON.

/// One element with a `data-key`: the JSON path, the JSON value it
/// claims, the factor and decimals of what it shows, and what it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// JSON path, dot-separated ("ranks.0.overlap_pct").
    pub key: String,
    /// `data-value`: the JSON number as written, or "null".
    pub value: String,
    /// `data-scale`: shown = JSON × scale.
    pub scale: f64,
    /// `data-dp`: decimals shown.
    pub dp: usize,
    /// The element's text.
    pub text: String,
}

/// The value of attribute `name` in the tag text `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let pat = format!(" {name}=\"");
    let at = tag.find(&pat)? + pat.len();
    let end = tag[at..].find('"')? + at;
    Some(unescape(&tag[at..end]))
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

/// Every element of `dom` carrying a `data-key`, in document order.
pub fn cells(dom: &str) -> Vec<Cell> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = dom[from..].find(" data-key=\"") {
        let at = from + i;
        let start = dom[..at].rfind('<').unwrap_or(0);
        let Some(end) = dom[at..].find('>').map(|e| at + e) else {
            break;
        };
        let tag = &dom[start..end];
        let text_end = dom[end + 1..].find('<').map_or(dom.len(), |e| end + 1 + e);
        out.push(Cell {
            key: attr(tag, "data-key").unwrap_or_default(),
            value: attr(tag, "data-value").unwrap_or_default(),
            scale: attr(tag, "data-scale")
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN),
            dp: attr(tag, "data-dp")
                .and_then(|s| s.parse().ok())
                .unwrap_or(usize::MAX),
            text: unescape(dom[end + 1..text_end].trim()),
        });
        from = end;
    }
    out
}

/// The JSON value at a dot-separated path (array indexes as numbers).
pub fn lookup<'a>(json: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    path.split('.').try_fold(json, |v, seg| match v {
        serde_json::Value::Array(a) => a.get(seg.parse::<usize>().ok()?),
        serde_json::Value::Object(o) => o.get(seg),
        _ => None,
    })
}

/// Why `c` disagrees with `json`, or `None` when it agrees: the key
/// exists, `data-value` is the JSON number (or null), and the text is
/// that number × scale rounded to the decimals shown ("-" for null).
pub fn mismatch(c: &Cell, json: &serde_json::Value) -> Option<String> {
    let Some(v) = lookup(json, &c.key) else {
        return Some(format!("{}: no such key in the JSON", c.key));
    };
    let bad = |why: &str| Some(format!("{}: {why} (JSON {v}, cell {c:?})", c.key));
    if v.is_null() {
        return (c.value != "null" || c.text != "-").then(|| bad("null shown as a number"))?;
    }
    let Some(x) = v.as_f64() else {
        return bad("not a number in the JSON");
    };
    if let (Some(n), Ok(m)) = (v.as_u64(), c.value.parse::<u64>()) {
        if n != m {
            return bad("data-value differs");
        }
    } else if c.value.parse::<f64>().ok() != Some(x) {
        return bad("data-value differs");
    }
    if !c.scale.is_finite() || c.dp > 12 {
        return bad("no data-scale or data-dp");
    }
    let Ok(shown) = c.text.parse::<f64>() else {
        return bad("text is not a number");
    };
    let want = x * c.scale;
    let tol = 0.5 * 10f64.powi(-(c.dp as i32)) * (1.0 + 1e-9) + want.abs() * 1e-12;
    if (shown - want).abs() > tol {
        return bad("text differs from the JSON value");
    }
    // The decimals shown are the decimals claimed.
    let decimals = c.text.split_once('.').map_or(0, |(_, d)| d.len());
    if decimals != c.dp {
        return bad("decimals differ from data-dp");
    }
    None
}

/// Checks every keyed cell of `dom` against `json`: the number of cells
/// checked, or the first few disagreements.
pub fn check(dom: &str, json: &serde_json::Value) -> Result<usize, String> {
    let all = cells(dom);
    let bad: Vec<String> = all.iter().filter_map(|c| mismatch(c, json)).collect();
    if bad.is_empty() {
        Ok(all.len())
    } else {
        Err(format!(
            "{} of {} keyed cells disagree with the JSON; first: {}",
            bad.len(),
            all.len(),
            bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        ))
    }
}
