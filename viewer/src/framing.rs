//! What the view opens on: `--step N`, `--range A..B`, `--rank R` (the same
//! for the window and for `--screenshot`).

use crate::error::{FramingError, RangeError};
use streamscope_core::analysis::StepReport;

use crate::model::Model;
use crate::timeline::layout::GroupKey;
use crate::timeline::TimelineState;

/// The part of the trace to open on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FrameTarget {
    /// Step `N` as the report numbers it (ProfilerStep#N, NVTX or repetition).
    Step(i64),
    /// `[a, b)` in ns relative to the trace start (as the ruler shows).
    Range(f64, f64),
}

/// Start-up framing: a target, and a rank to show alone.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Framing {
    pub target: Option<FrameTarget>,
    /// Show this rank only (the other ranks' groups collapsed); `--step`
    /// takes this rank's step.
    pub rank: Option<u32>,
}

impl Framing {
    pub fn is_empty(&self) -> bool {
        self.target.is_none() && self.rank.is_none()
    }

    /// Points `st` at the framing over `model`; an error names what the
    /// trace lacks (no such rank or step) and leaves `st` as it was.
    pub fn apply(&self, model: &Model, st: &mut TimelineState) -> Result<(), FramingError> {
        let ranks = &model.report.ranks;
        let process = match self.rank {
            None => None,
            Some(r) => Some(
                ranks
                    .iter()
                    .find(|x| x.rank == r)
                    .map(|x| x.process)
                    .ok_or_else(|| {
                        let have: Vec<String> = ranks.iter().map(|x| x.rank.to_string()).collect();
                        FramingError::NoRank {
                            rank: r,
                            ranks: have.join(", "),
                        }
                    })?,
            ),
        };
        let mut window = None;
        match self.target {
            None => {}
            Some(FrameTarget::Step(n)) => {
                let of_rank = |s: &&StepReport| self.rank.is_none_or(|r| s.rank == r);
                let step = model
                    .report
                    .steps
                    .iter()
                    .filter(of_rank)
                    .find(|s| s.step == n)
                    .ok_or_else(|| {
                        let mut have: Vec<i64> = model
                            .report
                            .steps
                            .iter()
                            .filter(of_rank)
                            .map(|s| s.step)
                            .collect();
                        have.sort_unstable();
                        have.dedup();
                        if have.is_empty() {
                            FramingError::NoSteps
                        } else {
                            let have: Vec<String> = have.iter().map(|s| s.to_string()).collect();
                            FramingError::NoStep {
                                step: n,
                                steps: have.join(", "),
                            }
                        }
                    })?;
                window = Some((step.start_ns, step.end_ns, true));
            }
            Some(FrameTarget::Range(a, b)) => {
                let (a, b) = (a.min(b), a.max(b));
                if a.is_nan() || b.is_nan() || b <= a {
                    return Err(FramingError::EmptyRange { start: a, end: b });
                }
                let o = model.index.span_ns.0;
                let (t0, t1) = (
                    crate::timeline::lod::abs_ns(o, a),
                    crate::timeline::lod::abs_ns(o, b),
                );
                window = Some((t0, t1, false));
            }
        }
        if let Some(p) = process {
            // Every process of the rank stays open (two runs side by side
            // have one each: the analysis numbers the second one apart,
            // the trace keeps its own rank); the first is scrolled to.
            let rank = self.rank;
            let procs = model.trace.processes();
            for x in ranks {
                let own = procs.get(x.process.index()).and_then(|p| p.rank);
                if Some(x.rank) != rank && own != rank {
                    st.collapsed.insert(GroupKey::Process(x.process.get()));
                } else {
                    st.collapsed.remove(&GroupKey::Process(x.process.get()));
                }
            }
            st.scroll_y = 0.0;
            // Scroll the rank's first lane into view at the first frame.
            if let Some(t) = model
                .trace
                .track_ids()
                .find(|&t| model.trace.track(t).process == p)
            {
                st.reveal = Some(t);
            }
        }
        match window {
            Some((t0, t1, true)) => {
                st.zoom_to(&model.index, t0, t1);
                st.range_ns = Some((t0, t1));
            }
            Some((t0, t1, false)) => st.show_exactly(&model.index, t0, t1),
            None => {}
        }
        Ok(())
    }
}

/// Parses `A..B`: times relative to the trace start, each with a unit (ns,
/// us, µs, ms, s); a bare number takes the other side's unit
/// (`120..160ms`).
pub fn parse_range(s: &str) -> Result<(f64, f64), RangeError> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| RangeError::NotARange(s.to_string()))?;
    let (av, au) = split_unit(a.trim())?;
    let (bv, bu) = split_unit(b.trim())?;
    let (au, bu) = match (au, bu) {
        (None, None) => return Err(RangeError::NoUnit(s.to_string())),
        (Some(u), None) | (None, Some(u)) => (u, u),
        (Some(x), Some(y)) => (x, y),
    };
    let (a, b) = (av * au, bv * bu);
    if b <= a {
        return Err(RangeError::Backwards(s.to_string()));
    }
    Ok((a, b))
}

/// "12.5ms" -> (12.5, Some(1e6)).
fn split_unit(s: &str) -> Result<(f64, Option<f64>), RangeError> {
    let cut = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(cut);
    let v: f64 = num
        .parse()
        .map_err(|_| RangeError::NotANumber(s.to_string()))?;
    if !v.is_finite() {
        return Err(RangeError::NotFinite(s.to_string()));
    }
    let u = match unit.trim() {
        "" => None,
        "ns" => Some(1.0),
        "us" | "µs" => Some(1e3),
        "ms" => Some(1e6),
        "s" => Some(1e9),
        other => {
            return Err(RangeError::UnknownUnit {
                side: s.to_string(),
                unit: other.to_string(),
            })
        }
    };
    Ok((v, u))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_with_units() {
        assert_eq!(parse_range("120ms..160ms"), Ok((120e6, 160e6)));
        assert_eq!(parse_range("120..160ms"), Ok((120e6, 160e6)));
        assert_eq!(parse_range("1.5s..2000ms"), Ok((1.5e9, 2e9)));
        assert_eq!(parse_range("5us..7µs"), Ok((5e3, 7e3)));
        assert!(matches!(
            parse_range("120..160"),
            Err(RangeError::NoUnit(_))
        ));
        assert!(matches!(
            parse_range("160ms..120ms"),
            Err(RangeError::Backwards(_))
        ));
        assert!(matches!(parse_range("12ms"), Err(RangeError::NotARange(_))));
        let e = parse_range("12 parsecs..13ms").expect_err("unknown unit");
        assert_eq!(
            e.to_string(),
            r#""12 parsecs": unknown unit "parsecs" (ns, us, ms, s)"#
        );
    }
}
