//! Findings: what to fix first. Each finding is something the report
//! measured that costs step time (a sync that idles the GPU, exposed
//! communication, a straggler, host-caused GPU idle, ...), with where it is,
//! its evidence, and the step time its fix would save as the what-if replay
//! predicts it (`analysis::whatif`), ranked by that gain. A finding whose
//! gain the replay cannot predict says so ("gain not predicted") and gives
//! its measured cost, an upper bound, instead of a guess. Something with no
//! cost (a sync that leaves the GPU no idle, a fully hidden collective) is
//! not a finding. A gain is "beyond noise" only when it exceeds twice the
//! standard error of the median step (docs/METRICS.md, "Findings").

mod kinds;

use serde::{Deserialize, Serialize};

use super::report::Report;
use crate::model::{SliceId, Trace};

/// Sync sites replayed one by one (the costliest by GPU idle); the others
/// keep their measured cost with "gain not predicted".
pub const MAX_SYNC_REPLAYS: usize = 8;

/// Where a finding is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FindingWhere {
    /// The rank it is on (the one it costs most).
    pub rank: u32,
    /// A step it shows in (the rank's median step, or the first it occurs in).
    pub step: Option<i64>,
    /// The Python `FILE:LINE (function)` of a sync or copy ("" when none).
    pub line: String,
    /// The kernel or collective concerned ("" when none).
    pub kernel: String,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Finding {
    /// What it is: `sync`, `exposed_collective`, `late_prefetch`,
    /// `straggler`, `host_idle`, `launch_bound`, `fp32_gemm`, `pageable_copy`,
    /// `legacy_stream`.
    pub kind: String,
    /// Where it is.
    #[serde(rename = "where")]
    pub where_: FindingWhere,
    /// What was measured, in words with the figures.
    pub evidence: String,
    /// The step time the fix saves, as the what-if replay predicts it: the
    /// slowest rank's median step, measured − predicted, µs; `None`: not predicted.
    pub predicted_gain_us: Option<f64>,
    /// The same, % of the measured median step.
    pub predicted_gain_pct: Option<f64>,
    /// How the gain was predicted (the `whatif` change), or why it was not.
    pub prediction: String,
    /// The measured cost per step (µs): GPU idle, exposed time, kernel
    /// time; an upper bound on the gain, for ranking unpredicted findings.
    pub cost_per_step_us: f64,
    /// Whether the gain (or, unpredicted, the cost) exceeds `noise_us`.
    pub beyond_noise: bool,
    /// Twice the standard error of the median step of its rank, µs.
    pub noise_us: f64,
    /// Where the viewer jumps: a span of the rank's timeline (ns).
    pub start_ns: Option<i64>,
    /// See `start_ns`.
    pub end_ns: Option<i64>,
    /// A slice to highlight, when one stands for it.
    pub slice: Option<SliceId>,
}

impl Finding {
    /// The gain in words: "1.23 ms/step (−4.5 %)" or "gain not predicted".
    pub fn gain_words(&self) -> String {
        match (self.predicted_gain_us, self.predicted_gain_pct) {
            (Some(us), Some(p)) => format!("{:.2} ms/step ({p:.1} %)", us / 1000.0),
            (Some(us), None) => format!("{:.2} ms/step", us / 1000.0),
            _ => "gain not predicted".into(),
        }
    }
}

/// Twice the standard error of the median of `v` (µs): 2 × 1.253 ×
/// 1.4826 MAD / √n (the median's standard error from the robust spread);
/// 0 for fewer than two values.
pub fn median_noise(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 2 {
        return 0.0;
    }
    let med = median(v);
    let dev: Vec<f64> = v.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev);
    2.0 * 1.253 * 1.4826 * mad / (n as f64).sqrt()
}

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Computes the findings of `report` and stores them in it, ranked:
/// predicted gains first (largest first), then unpredicted ones by cost.
/// `trace`: the trace the report came from, for the replays and the
/// copies; `None` (summaries of rank sets analyzed elsewhere) leaves every
/// gain unpredicted, saying why.
pub fn attach(report: &mut Report, trace: Option<&Trace>) {
    attach_or(
        report,
        trace,
        "the replay needs the trace (a report merged from summaries has none)",
    );
}

/// [`attach`]; without a trace every gain is unpredicted, `why` says why.
pub fn attach_or(report: &mut Report, trace: Option<&Trace>, why: &str) {
    let mut v = kinds::collect(report, trace, why);
    rank(&mut v);
    report.findings = v;
}

/// Sorts findings: predicted ones beyond noise by gain, then the others by
/// cost (an unpredicted gain never outranks a predicted one).
pub fn rank(v: &mut [Finding]) {
    let key = |f: &Finding| -> (u8, f64) {
        match f.predicted_gain_us {
            Some(g) if f.beyond_noise => (0, -g),
            Some(g) => (2, -g),
            None if f.beyond_noise => (1, -f.cost_per_step_us),
            None => (3, -f.cost_per_step_us),
        }
    };
    v.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
}

/// The findings worth fixing first: up to `n` with a predicted gain beyond noise.
pub fn fix_first(report: &Report, n: usize) -> Vec<&Finding> {
    report
        .findings
        .iter()
        .filter(|f| f.beyond_noise && f.predicted_gain_us.is_some_and(|g| g > 0.0))
        .take(n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_of_the_median() {
        assert_eq!(median_noise(&[5.0]), 0.0);
        // MAD of 1, 2, 3, 4, 100 is 1: 2 × 1.253 × 1.4826 / √5.
        let n = median_noise(&[1.0, 2.0, 3.0, 4.0, 100.0]);
        assert!((n - 2.0 * 1.253 * 1.4826 / 5f64.sqrt()).abs() < 1e-9, "{n}");
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn predicted_gains_rank_first() {
        let f = |kind: &str, gain: Option<f64>, cost: f64, beyond: bool| Finding {
            kind: kind.into(),
            predicted_gain_us: gain,
            cost_per_step_us: cost,
            beyond_noise: beyond,
            ..Default::default()
        };
        let mut v = vec![
            f("a", None, 9000.0, true),
            f("b", Some(100.0), 200.0, true),
            f("c", Some(500.0), 600.0, true),
            f("d", Some(900.0), 900.0, false),
        ];
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(order, vec!["c", "b", "a", "d"]);
    }
}
