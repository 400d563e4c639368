//! What every report must satisfy, whatever its input: a report that
//! breaks it (from a damaged summary, or a bug) is refused, never printed.

use super::report::{Breakdown, Report};

/// Slack for rounding: µs are rounded to a few decimals apart.
const US_SLACK: f64 = 0.5;
const PCT_SLACK: f64 = 0.01;

/// The first broken invariant of `r`, in words naming the rank (and step).
pub fn check(r: &Report) -> Result<(), String> {
    for k in &r.ranks {
        let at = format!("rank {}", k.rank);
        breakdown(&k.breakdown, &at)?;
        let exposed = k.breakdown.exposed_comm_us;
        for (name, v) in [
            ("exposed wait", k.exposed_wait_us),
            ("exposed transfer", k.exposed_transfer_us),
        ] {
            if let Some(v) = v {
                if !(v >= 0.0 && v <= exposed + US_SLACK) {
                    return Err(format!(
                        "{at}: {name} {v} µs is not within its exposed communication of {exposed} µs"
                    ));
                }
            }
        }
    }
    for s in &r.steps {
        breakdown(&s.breakdown, &format!("rank {} step {}", s.rank, s.step))?;
    }
    Ok(())
}

fn breakdown(b: &Breakdown, at: &str) -> Result<(), String> {
    for (name, v) in [
        ("compute", b.compute_us),
        ("communication", b.comm_us),
        ("overlap", b.overlap_us),
        ("exposed communication", b.exposed_comm_us),
        ("kernel time", b.kernel_time_us),
        ("idle", b.idle_us),
    ] {
        if !(v.is_finite() && v >= -US_SLACK) {
            return Err(format!("{at}: {name} of {v} µs"));
        }
    }
    for (name, part, whole) in [
        ("overlap", b.overlap_us, b.comm_us),
        ("overlap", b.overlap_us, b.compute_us),
        ("exposed communication", b.exposed_comm_us, b.comm_us),
        ("idle", b.idle_us, b.kernel_time_us),
    ] {
        if part > whole + US_SLACK {
            return Err(format!("{at}: {name} of {part} µs exceeds {whole} µs"));
        }
    }
    for (name, p) in [
        ("overlap", b.overlap_pct),
        ("overlap efficiency", b.overlap_efficiency_pct),
        ("idle", b.idle_pct),
        ("compute", b.compute_pct),
    ] {
        if let Some(p) = p {
            if !(-PCT_SLACK..=100.0 + PCT_SLACK).contains(&p) {
                return Err(format!("{at}: {name} of {p} %"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, AnalysisOptions};

    #[test]
    fn a_real_report_holds_and_a_broken_one_is_named() {
        let t = crate::synth::fsdp_like(&crate::synth::SynthOptions::default());
        let r = analyze(&t, &AnalysisOptions::default());
        assert!(!r.ranks.is_empty());
        assert_eq!(check(&r), Ok(()));
        let mut bad = r.clone();
        bad.ranks[0].exposed_wait_us = Some(bad.ranks[0].breakdown.exposed_comm_us + 100.0);
        let e = check(&bad).expect_err("wait > exposed");
        assert!(e.contains("rank 0") && e.contains("exposed wait"), "{e}");
        let mut bad = r.clone();
        bad.ranks[1].breakdown.overlap_pct = Some(140.0);
        assert!(check(&bad)
            .expect_err("overlap > 100 %")
            .contains("overlap"));
        let mut bad = r;
        bad.steps[0].breakdown.idle_us = f64::NAN;
        assert!(check(&bad).expect_err("NaN").contains("step"));
    }
}
