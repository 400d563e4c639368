//! Clocks of the ranks: which share one (a clock domain on one host), and
//! the offset between those that do not, estimated from matched
//! collectives (an instance ends within microseconds on every rank).

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

fn median(v: &mut [i64]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

/// Offsets of the clock groups other than the first. For group g, with
/// d = (first rank's kernel end − the end of g's first rank) per instance:
/// the rank that arrives last ends a little later than its peer (tens of
/// µs for a ring all-gather), so d is split by collective kind and by which
/// of the two arrived last, and the offset is the mean over kinds seen in
/// both orders (weighted by the smaller count) of the two orders' median
/// d, which cancels that lag; which arrived last is decided with the
/// current estimate (3 rounds from the median of all d). Without a kind
/// seen in both orders: the median of all d. Added to g's times, the
/// offset puts them on the first rank's clock. The residual is the median
/// absolute deviation of d from its (kind, order) median.
///
/// The `n` matched instances are read through `kind(i)` (collective kind of
/// instance `i`) and `se(i, c)` (rank context `c`'s kernel start and end
/// on its own clock).
pub fn estimate<'a>(
    cg: &ClockGroups,
    ranks: &[u32],
    n: usize,
    kind: &dyn Fn(usize) -> &'a str,
    se: &dyn Fn(usize, usize) -> (i64, i64),
) -> Vec<(usize, ClockOffset, i64)> {
    let mut out = Vec::new();
    for g in 1..cg.groups.len() {
        let Some(rep) = cg.of.iter().position(|&x| x == g) else {
            continue;
        };
        // (kind, start difference, end difference) per instance.
        let rows: Vec<(&str, i64, i64)> = (0..n)
            .map(|i| {
                let (s0, e0) = se(i, 0);
                let (s1, e1) = se(i, rep);
                (kind(i), s0.saturating_sub(s1), e0.saturating_sub(e1))
            })
            .collect();
        let mut all: Vec<i64> = rows.iter().map(|r| r.2).collect();
        let Some(mut off) = median(&mut all) else {
            continue;
        };
        let mut kinds: Vec<&str> = rows.iter().map(|r| r.0).collect();
        kinds.sort_unstable();
        kinds.dedup();
        // d per (kind, rep arrived last), under the offset `off`.
        let split = |off: i64| -> Vec<[Vec<i64>; 2]> {
            kinds
                .iter()
                .map(|k| {
                    let mut v: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
                    for r in rows.iter().filter(|r| r.0 == *k) {
                        // rep's start on the reference clock is after the first rank's.
                        let rep_last = r.1 < off;
                        v[rep_last as usize].push(r.2);
                    }
                    v
                })
                .collect()
        };
        for _ in 0..3 {
            let (mut sum, mut weight) = (0f64, 0f64);
            for mut v in split(off) {
                let w = v[0].len().min(v[1].len()) as f64;
                if let (Some(a), Some(b)) = (median(&mut v[0]), median(&mut v[1])) {
                    sum += w * (a as f64 + b as f64) / 2.0;
                    weight += w;
                }
            }
            if weight == 0.0 {
                break;
            }
            off = (sum / weight).round() as i64;
        }
        let mut dev: Vec<i64> = Vec::with_capacity(rows.len());
        for mut v in split(off) {
            for side in v.iter_mut() {
                if let Some(m) = median(side) {
                    dev.extend(side.iter().map(|x| x.saturating_sub(m).abs()));
                }
            }
        }
        let mad = median(&mut dev).unwrap_or(0);
        let (domain, host) = &cg.groups[g];
        out.push((
            g,
            ClockOffset {
                host: host.clone(),
                clock: domain.name().to_string(),
                ranks: cg
                    .of
                    .iter()
                    .zip(ranks)
                    .filter(|(x, _)| **x == g)
                    .map(|(_, r)| *r)
                    .collect(),
                offset_ns: off,
                residual_us: mad as f64 / 1000.0,
                instances: rows.len() as u64,
            },
            off,
        ));
    }
    out
}
