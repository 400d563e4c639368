//! SVG pieces drawn as strings: colour ramps, heat maps (one path per
//! colour level, runs of equal cells merged, so a thousand rows stay
//! small), sparklines and axis labels.

use super::esc;

/// Colour levels of a heat map.
pub(super) const LEVELS: usize = 9;

/// A colour ramp, light to dark.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ramp {
    /// White to dark blue (utilization).
    Blue,
    /// Pale yellow to dark red (waiting, badness).
    Heat,
}

impl Ramp {
    fn stops(self) -> [(f64, f64, f64); 3] {
        match self {
            Ramp::Blue => [
                (247.0, 251.0, 255.0),
                (107.0, 174.0, 214.0),
                (8.0, 48.0, 107.0),
            ],
            Ramp::Heat => [
                (255.0, 247.0, 214.0),
                (253.0, 141.0, 60.0),
                (128.0, 0.0, 38.0),
            ],
        }
    }

    /// The colour of level `l` (0..[`LEVELS`]).
    pub(super) fn color(self, l: usize) -> String {
        let t = l.min(LEVELS - 1) as f64 / (LEVELS - 1) as f64;
        let [a, b, c] = self.stops();
        let (p, q, u) = if t < 0.5 {
            (a, b, t * 2.0)
        } else {
            (b, c, (t - 0.5) * 2.0)
        };
        let mix = |x: f64, y: f64| (x + (y - x) * u).round().clamp(0.0, 255.0) as u8;
        format!(
            "#{:02x}{:02x}{:02x}",
            mix(p.0, q.0),
            mix(p.1, q.1),
            mix(p.2, q.2)
        )
    }
}

/// The level of `v` on [0, max] (0 when max is 0).
pub(super) fn level(v: f64, max: f64) -> usize {
    if max <= 0.0 || !v.is_finite() {
        return 0;
    }
    ((v / max).clamp(0.0, 1.0) * (LEVELS - 1) as f64).round() as usize
}

/// A coordinate with at most one decimal.
pub(super) fn c(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// A heat map of `rows` (a level per cell, `None`: no value, drawn in
/// light grey), cells `cw` × `ch` from (`x0`, `y0`): one path per level,
/// equal neighbours in a row merged into one run.
pub(super) fn heat_paths(
    rows: &[Vec<Option<usize>>],
    x0: f64,
    y0: f64,
    cw: f64,
    ch: f64,
    ramp: Ramp,
) -> String {
    // Level LEVELS stands for "no value".
    let mut paths: Vec<String> = vec![String::new(); LEVELS + 1];
    for (i, row) in rows.iter().enumerate() {
        let y = y0 + i as f64 * ch;
        let mut j = 0;
        while j < row.len() {
            let l = row[j].map_or(LEVELS, |l| l.min(LEVELS - 1));
            let mut e = j + 1;
            while e < row.len() && row[e].map_or(LEVELS, |x| x.min(LEVELS - 1)) == l {
                e += 1;
            }
            let w = (e - j) as f64 * cw;
            paths[l].push_str(&format!(
                "M{} {}h{}v{}h-{}z",
                c(x0 + j as f64 * cw),
                c(y),
                c(w),
                c(ch),
                c(w)
            ));
            j = e;
        }
    }
    let mut s = String::new();
    for (l, d) in paths.iter().enumerate() {
        if d.is_empty() {
            continue;
        }
        let fill = if l == LEVELS {
            "#e4e7ea".to_string()
        } else {
            ramp.color(l)
        };
        s.push_str(&format!("<path fill=\"{fill}\" d=\"{d}\"/>\n"));
    }
    s
}

/// An `<svg>` opening tag `w` × `h` wide (shrunk to the page, never
/// grown past `w`).
pub(super) fn svg_open(w: f64, h: f64) -> String {
    format!(
        "<svg viewBox=\"0 0 {0} {1}\" width=\"{0}\" role=\"img\">",
        c(w),
        c(h)
    )
}

/// The legend of a ramp: its levels from 0 to `max` (`unit` after it).
pub(super) fn ramp_legend(ramp: Ramp, max: f64, unit: &str, none: Option<&str>) -> String {
    let mut s = String::from("<div class=\"legend\">0");
    for l in 0..LEVELS {
        s.push_str(&format!(
            "<span style=\"background:{};margin:0\"></span>",
            ramp.color(l)
        ));
    }
    s.push_str(&format!(" {} {}", fmt_g(max), esc(unit)));
    if let Some(n) = none {
        s.push_str(&format!(
            "<span style=\"background:#e4e7ea\"></span>{}",
            esc(n)
        ));
    }
    s.push_str("</div>\n");
    s
}

/// A value for an axis or a legend: 3 significant digits.
pub(super) fn fmt_g(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A sparkline of `pts` (x, y) in a `w` × `h` box: the line, dots when
/// few, the y range at the left.
pub(super) fn sparkline(pts: &[(f64, f64)], w: f64, h: f64, color: &str, title: &str) -> String {
    let (pad_l, pad_r, pad_y) = (34.0, 4.0, 6.0);
    let mut s = format!(
        "<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\"><title>{}</title>",
        c(w),
        c(h),
        c(w),
        c(h),
        esc(title)
    );
    if pts.is_empty() {
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\">no samples</text></svg>",
            c(pad_l),
            c(h / 2.0)
        ));
        return s;
    }
    let (x_lo, x_hi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (y_lo, y_hi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    let y_lo = y_lo.min(0.0);
    let sx = |x: f64| {
        if x_hi > x_lo {
            pad_l + (x - x_lo) / (x_hi - x_lo) * (w - pad_l - pad_r)
        } else {
            (pad_l + w - pad_r) / 2.0
        }
    };
    let sy = |y: f64| {
        if y_hi > y_lo {
            h - pad_y - (y - y_lo) / (y_hi - y_lo) * (h - 2.0 * pad_y)
        } else {
            h / 2.0
        }
    };
    s.push_str(&format!(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ccc\"/>",
        c(pad_l - 2.0),
        c(pad_y),
        c(h - pad_y)
    ));
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text x=\"{}\" y=\"{}\" \
         text-anchor=\"end\">{}</text>",
        c(pad_l - 4.0),
        c(pad_y + 8.0),
        fmt_g(y_hi),
        c(pad_l - 4.0),
        c(h - pad_y),
        fmt_g(y_lo)
    ));
    let line: Vec<String> = pts
        .iter()
        .map(|&(x, y)| format!("{},{}", c(sx(x)), c(sy(y))))
        .collect();
    s.push_str(&format!(
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
        line.join(" ")
    ));
    if pts.len() <= 60 {
        for &(x, y) in pts {
            s.push_str(&format!(
                "<circle cx=\"{}\" cy=\"{}\" r=\"1.8\" fill=\"{color}\"/>",
                c(sx(x)),
                c(sy(y))
            ));
        }
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramps_and_levels() {
        assert_eq!(Ramp::Blue.color(0), "#f7fbff");
        assert_eq!(Ramp::Heat.color(LEVELS - 1), "#800026");
        assert_eq!(level(5.0, 10.0), 4);
        assert_eq!(level(20.0, 10.0), LEVELS - 1);
        assert_eq!(level(1.0, 0.0), 0);
        assert_eq!(c(1.04), "1");
        assert_eq!(c(2.25), "2.3");
    }

    #[test]
    fn equal_neighbours_merge_into_one_run() {
        let rows = vec![vec![Some(3), Some(3), Some(3), None, Some(8)]];
        let s = heat_paths(&rows, 0.0, 0.0, 2.0, 4.0, Ramp::Heat);
        // Three runs: three cells of level 3, one without a value, one of 8.
        assert_eq!(s.matches('M').count(), 3, "{s}");
        assert!(s.contains("M0 0h6v4h-6z"), "{s}");
        assert!(s.contains("#e4e7ea"), "{s}");
    }
}
