//! Clocks of the ranks: which share one (a clock domain on one host), and
//! the map between those that do not (an offset and a drift), estimated
//! from matched collectives (an instance ends at nearly the same moment on
//! every rank: within a few % of its transfer time).

use crate::analysis::report::ClockOffset;
use crate::model::ClockDomain;

/// Ranks grouped by clock: (domain, host) per group, group of each context.
pub struct ClockGroups {
    /// (clock domain, hostname) of each group; group 0 is the first rank's.
    pub groups: Vec<(ClockDomain, String)>,
    /// Group of each rank context.
    pub of: Vec<usize>,
}

impl ClockGroups {
    /// Groups the ranks by their (clock domain, host), in rank-context order.
    pub fn of(keys: impl Iterator<Item = (ClockDomain, String)>) -> ClockGroups {
        let mut groups: Vec<(ClockDomain, String)> = Vec::new();
        let mut of = Vec::new();
        for key in keys {
            let g = match groups.iter().position(|k| *k == key) {
                Some(g) => g,
                None => {
                    groups.push(key);
                    groups.len() - 1
                }
            };
            of.push(g);
        }
        ClockGroups { groups, of }
    }

    /// "monotonic, one host", "monotonic on 2 hosts", ...
    pub fn phrase(&self) -> String {
        match self.groups.as_slice() {
            [] => String::new(),
            [(d, h)] if h.is_empty() => format!("{}, host unknown", d.name()),
            [(d, _)] => format!("{}, one host", d.name()),
            g => {
                let mut domains: Vec<&str> = g.iter().map(|(d, _)| d.name()).collect();
                domains.dedup();
                format!("{} on {} hosts", domains.join(" / "), g.len())
            }
        }
    }
}

/// A clock's map onto the first rank's: a time `t` of this clock is
/// `t + offset_ns + drift · (t − at_ns)` there.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClockMap {
    /// Offset at `at_ns`, ns.
    pub offset_ns: i64,
    /// Drift, ns per ns (10 µs/s = 1e-5).
    pub drift: f64,
    /// The moment (on this clock) where the offset is `offset_ns`.
    pub at_ns: i64,
}

impl ClockMap {
    /// `t` of this clock on the first rank's clock.
    pub fn apply(&self, t: i64) -> i64 {
        let dt = t.saturating_sub(self.at_ns) as f64;
        t.saturating_add(self.offset_ns)
            .saturating_add((dt * self.drift).round() as i64)
    }
}

/// One matched instance as the estimate reads it: its unit (collective
/// kind and message size: instances expected to end alike), and the two
/// ranks' kernels, each on its own clock.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Unit id (same kind and size: the same id).
    pub unit: u32,
    /// The first rank's kernel start and end.
    pub s0: i64,
    /// See `s0`.
    pub e0: i64,
    /// The other clock's rank's kernel start and end (its clock).
    pub s1: i64,
    /// See `s1`.
    pub e1: i64,
}

/// The median (the mean of the two middle values of an even count); `v`
/// is reordered.
fn median(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (lower, hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let hi = *hi;
    if n % 2 == 1 {
        return Some(hi);
    }
    let lo = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo + hi) / 2.0)
}

/// Relative spread of the end difference of one instance, and the lag of
/// the last arriver's end, as fractions of the instance's shortest kernel
/// (measured on the bundled H200 traces: end differences spread ±3 % of
/// the transfer time, the last rank to arrive ends about 4 % of it after
/// its peer; a 6 µs all-reduce's ranks end within 0.3 µs).
const SPREAD: f64 = 0.03;
const LAG: f64 = 0.04;

/// Largest class the drift fit pairs whole (a larger one is thinned to
/// every k-th instance, at most this many: the pairs grow as its square).
const PAIRED: usize = 256;

/// The map of one clock onto the first rank's from matched instances, and
/// the residual (ns): see docs/METRICS.md ("Clocks").
///
/// With d = e0 − e1 (the end difference) at t = e1 (this clock):
/// 1. drift: the Theil–Sen slope of d over t, over the pairs of instances
///    of one class (unit, and which of the two ranks arrived last), so
///    that neither the units' different lags nor a change of arrival order
///    reads as drift;
/// 2. offset at the middle of the instances (`at_ns`), from the detrended
///    d: per unit, the median of each arrival order, the two averaged when
///    both occur (the last arriver's lag cancels), else the one median;
///    units weighted by the inverse square of their expected error
///    (`SPREAD`·τ/√n + `LAG`·τ/4 with both orders, `LAG`·τ with one; τ
///    the unit's median shortest kernel): short collectives, whose ends
///    are nearly simultaneous, outweigh long transfers.
///
/// Which rank arrived last is decided with the current map (3 rounds from
/// the median of d, no drift).
pub fn fit(samples: &[Sample]) -> Option<(ClockMap, i64)> {
    if samples.is_empty() {
        return None;
    }
    let d: Vec<f64> = samples
        .iter()
        .map(|x| x.e0.saturating_sub(x.e1) as f64)
        .collect();
    let lo = samples.iter().map(|x| x.e1).min()?;
    let hi = samples.iter().map(|x| x.e1).max()?;
    let at = lo.saturating_add(hi.saturating_sub(lo) / 2);
    let t: Vec<f64> = samples
        .iter()
        .map(|x| x.e1.saturating_sub(at) as f64)
        .collect();
    let tau: Vec<f64> = samples
        .iter()
        .map(|x| {
            x.e0.saturating_sub(x.s0)
                .min(x.e1.saturating_sub(x.s1))
                .max(0) as f64
        })
        .collect();
    let mut units: Vec<u32> = samples.iter().map(|x| x.unit).collect();
    units.sort_unstable();
    units.dedup();
    let unit_of = |i: usize| units.binary_search(&samples[i].unit).unwrap_or(0);
    let (mut a, mut b) = (median(&mut d.clone())?, 0f64);
    let mut resid = 0f64;
    for _ in 0..3 {
        // The other rank arrived last (its start, on the first rank's clock, later).
        let last: Vec<bool> = samples
            .iter()
            .zip(&t)
            .map(|(x, ti)| x.s1.saturating_sub(x.s0) as f64 + a + b * ti > 0.0)
            .collect();
        let class = |i: usize| unit_of(i) * 2 + last[i] as usize;
        b = drift(&d, &t, samples.len(), units.len() * 2, &class).unwrap_or(0.0);
        let x: Vec<f64> = d.iter().zip(&t).map(|(di, ti)| di - b * ti).collect();
        let (mut sum, mut weight) = (0f64, 0f64);
        let mut dev: Vec<f64> = Vec::with_capacity(x.len());
        for u in 0..units.len() {
            let mut side: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            let mut taus: Vec<f64> = Vec::new();
            for i in (0..x.len()).filter(|&i| unit_of(i) == u) {
                side[last[i] as usize].push(x[i]);
                taus.push(tau[i]);
            }
            let tau_u = median(&mut taus).unwrap_or(0.0).max(1000.0);
            let meds: Vec<f64> = side
                .iter_mut()
                .filter_map(|v| {
                    let m = median(&mut v.clone())?;
                    dev.extend(v.iter().map(|y| (y - m).abs()));
                    Some(m)
                })
                .collect();
            let (val, err) = match meds.as_slice() {
                [m0, m1] => {
                    let n = side[0].len().min(side[1].len()) as f64;
                    (
                        (m0 + m1) / 2.0,
                        SPREAD * tau_u / n.sqrt() + LAG * tau_u / 4.0,
                    )
                }
                [m] => (*m, LAG * tau_u),
                _ => continue,
            };
            let w = 1.0 / (err * err);
            sum += w * val;
            weight += w;
        }
        if weight > 0.0 {
            a = sum / weight;
        }
        resid = median(&mut dev).unwrap_or(0.0);
    }
    if !a.is_finite() || !b.is_finite() {
        return None;
    }
    Some((
        ClockMap {
            offset_ns: a.round() as i64,
            drift: b,
            at_ns: at,
        },
        resid.round() as i64,
    ))
}

/// The Theil–Sen slope of `d` over `t` from the pairs of instances of one
/// class (`class(i)` < `classes`), None without a pair.
fn drift(
    d: &[f64],
    t: &[f64],
    n: usize,
    classes: usize,
    class: &dyn Fn(usize) -> usize,
) -> Option<f64> {
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); classes];
    for i in 0..n {
        if let Some(m) = members.get_mut(class(i)) {
            m.push(i);
        }
    }
    let mut slopes: Vec<f64> = Vec::new();
    for mut m in members {
        if m.len() > PAIRED {
            let step = m.len().div_ceil(PAIRED);
            m = m.into_iter().step_by(step).collect();
        }
        for (k, &i) in m.iter().enumerate() {
            for &j in &m[k + 1..] {
                let dt = t[j] - t[i];
                if dt != 0.0 {
                    slopes.push((d[j] - d[i]) / dt);
                }
            }
        }
    }
    median(&mut slopes)
}

/// The maps of the clock groups other than the first (see [`fit`]), with
/// their rows for the report. `samples(g, rep)` gives group g's instances
/// (its first rank, rank context `rep`, against the first rank). A group without a hostname is
/// named by its first rank ("host of rank R (no hostname recorded)").
pub fn estimate(
    cg: &ClockGroups,
    ranks: &[u32],
    samples: &(dyn Fn(usize, usize) -> Vec<Sample> + Sync),
) -> Vec<(usize, ClockOffset, ClockMap)> {
    // Clocks are independent: fitted on all cores, kept in order.
    let one = |g: usize| -> Option<(usize, ClockOffset, ClockMap)> {
        let rep = cg.of.iter().position(|&x| x == g)?;
        let s = samples(g, rep);
        let (map, resid) = fit(&s)?;
        let (domain, host) = &cg.groups[g];
        let host = if host.is_empty() {
            format!("host of rank {} (no hostname recorded)", ranks[rep])
        } else {
            host.clone()
        };
        let offset = ClockOffset {
            host,
            clock: domain.name().to_string(),
            ranks: cg
                .of
                .iter()
                .zip(ranks)
                .filter(|(x, _)| **x == g)
                .map(|(_, r)| *r)
                .collect(),
            offset_ns: map.offset_ns,
            drift_us_per_s: map.drift * 1e6,
            at_ns: map.apply(map.at_ns),
            residual_us: resid as f64 / 1000.0,
            instances: s.len() as u64,
        };
        Some((g, offset, map))
    };
    crate::analysis::par_map((1..cg.groups.len()).collect(), &one)
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instances every 10 ms over 1 s of a clock `off` ahead drifting `b`
    /// (ns/ns) from the middle, each rank's kernel 600 µs, rank 1 arriving
    /// last in every other one by 80 µs and ending `lag` after its peer.
    fn samples(off: i64, b: f64, lag: i64) -> Vec<Sample> {
        let clock = |t: i64| t + off + ((t - 500_000_000) as f64 * b).round() as i64;
        (0..100)
            .map(|k| {
                let s0 = k * 10_000_000;
                let late = k % 2 == 1;
                let (s1, e1, e0) = if late {
                    (
                        s0 + 80_000,
                        s0 + 80_000 + 600_000,
                        s0 + 80_000 + 600_000 - lag,
                    )
                } else {
                    (s0 - 80_000, s0 + 600_000 - lag, s0 + 600_000)
                };
                Sample {
                    unit: 0,
                    s0,
                    e0,
                    s1: clock(s1),
                    e1: clock(e1),
                }
            })
            .collect()
    }

    #[test]
    fn offset_and_drift_come_back_and_the_last_arrivers_lag_cancels() {
        for (off, b) in [(0, 0.0), (-10_000_000_000, 1e-5), (7_000_000, -1e-5)] {
            let (map, _) = fit(&samples(off, b, 25_000)).expect("fit");
            // The truth at the map's moment: the clock's offset there, negated.
            let t = map.apply(map.at_ns);
            let want = -(off as f64 + (t - 500_000_000) as f64 * b);
            assert!(
                (map.offset_ns as f64 - want).abs() <= 2.0,
                "{map:?} vs {want}"
            );
            assert!((map.drift + b).abs() < 1e-9, "{map:?}");
            // Applied, a time of that clock lands where it was.
            let s = samples(off, b, 25_000);
            let back = map.apply(s[10].s1);
            assert!((back - (s[10].s0 - 80_000)).abs() <= 2, "{back}");
        }
    }

    #[test]
    fn short_collectives_outweigh_long_ones() {
        // Long transfers all one order (their lag reads as offset), one short
        // collective ending together on both ranks.
        let mut s: Vec<Sample> = samples(5_000, 0.0, 25_000).into_iter().step_by(2).collect();
        s.push(Sample {
            unit: 1,
            s0: 600_000_000,
            e0: 600_006_000,
            s1: 600_000_000 + 5_000,
            e1: 600_006_000 + 5_000,
        });
        let (map, _) = fit(&s).expect("fit");
        assert!((map.offset_ns + 5_000).abs() <= 2_000, "{map:?}");
        assert!(fit(&[]).is_none());
    }
}
