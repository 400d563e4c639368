//! Which optimizer-step ranges end a training step: for a finished
//! recording (`step_ends`), and while the job runs (`running_step_ends`,
//! an armed capture of N steps).

/// One optimizer-step range: its host interval and which optimizer stepped
/// (0 when the recording does not say).
#[derive(Debug, Clone, Copy)]
pub(super) struct Marker {
    pub(super) start_ns: i64,
    pub(super) end_ns: i64,
    pub(super) key: u64,
}

/// The ends of the optimizer steps that end a training step. A step inside
/// another one (a wrapper's `step()` calling its inner optimizer's) is part
/// of it. With several optimizers (a GAN's two, dense and sparse
/// parameters), an iteration steps each of them once, so one optimizer's
/// steps mark the iterations: of those stepped most often, the one stepped
/// last in an iteration (its first step ends after the others' first).
pub(super) fn step_ends(markers: Vec<Marker>) -> Vec<i64> {
    let outer = outermost_markers(markers);
    // Per optimizer: (steps, end of its first step).
    let mut per: Vec<(u64, usize, i64)> = Vec::new();
    for m in &outer {
        match per.iter_mut().find(|p| p.0 == m.key) {
            Some(p) => p.1 += 1,
            None => per.push((m.key, 1, m.end_ns)),
        }
    }
    let most = per.iter().map(|p| p.1).max().unwrap_or(0);
    let key = per
        .iter()
        .filter(|p| p.1 == most)
        .max_by_key(|p| p.2)
        .map_or(0, |p| p.0);
    outer
        .iter()
        .filter(|m| m.key == key)
        .map(|m| m.end_ns)
        .collect()
}

/// The optimizer-step ranges not inside another one, by start.
fn outermost_markers(mut markers: Vec<Marker>) -> Vec<Marker> {
    markers.sort_by_key(|m| (m.start_ns, std::cmp::Reverse(m.end_ns)));
    let mut outer: Vec<Marker> = Vec::with_capacity(markers.len());
    for m in markers {
        if outer
            .last()
            .is_some_and(|o| m.start_ns >= o.start_ns && m.end_ns <= o.end_ns)
        {
            continue;
        }
        outer.push(m);
    }
    outer
}

/// The step ends among optimizer-step ranges `(start ns, end ns, optimizer
/// key)` seen so far, for a job still running: an armed capture of N steps
/// counts them as they come, and must agree with what the report will
/// count in the file (`step_ends`: of the optimizers stepped most often,
/// the one stepped last in an iteration marks it).
///
/// Before the loop's pattern is known, the first range counts. After it,
/// an optimizer's k-th step marks a step when no optimizer has stepped
/// more and that one was the last to reach k-1 steps: with two optimizers
/// stepped in turn the second one marks, and one stepped more often than
/// the others marks every time.
pub fn running_step_ends(ranges: &[(i64, i64, u64)]) -> Vec<i64> {
    let mut outer = outermost_markers(
        ranges
            .iter()
            .map(|&(start_ns, end_ns, key)| Marker {
                start_ns,
                end_ns,
                key,
            })
            .collect(),
    );
    outer.sort_by_key(|m| m.end_ns);
    // Steps per optimizer, and the optimizer last to reach k+1 steps.
    let mut counts: Vec<(u64, usize)> = Vec::new();
    let mut last_to_reach: Vec<u64> = Vec::new();
    let mut ends = Vec::new();
    for (i, m) in outer.iter().enumerate() {
        let c = match counts.iter_mut().find(|p| p.0 == m.key) {
            Some(p) => {
                p.1 += 1;
                p.1
            }
            None => {
                counts.push((m.key, 1));
                1
            }
        };
        let most = counts.iter().all(|p| p.1 <= c);
        let marks = match c {
            1 => i == 0,
            _ => most && last_to_reach.get(c - 2) == Some(&m.key),
        };
        match last_to_reach.get_mut(c - 1) {
            Some(k) => *k = m.key,
            None => last_to_reach.push(m.key),
        }
        if marks {
            ends.push(m.end_ns);
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranges of `keys` stepped in this order, 1 ms apart, 100 µs each.
    fn seq(keys: &[u64]) -> Vec<(i64, i64, u64)> {
        keys.iter()
            .enumerate()
            .map(|(i, &k)| (i as i64 * 1_000_000, i as i64 * 1_000_000 + 100_000, k))
            .collect()
    }

    fn finished(r: &[(i64, i64, u64)]) -> Vec<i64> {
        step_ends(
            r.iter()
                .map(|&(start_ns, end_ns, key)| Marker {
                    start_ns,
                    end_ns,
                    key,
                })
                .collect(),
        )
    }

    /// Every prefix's ends are a prefix of the whole run's (a capture that
    /// stops at its k-th end keeps it), and past the first they are the
    /// finished recording's ends.
    fn agrees(r: &[(i64, i64, u64)]) {
        agrees_at(r, 1);
    }

    /// [`agrees`] for the prefixes of `every` ranges.
    fn agrees_at(r: &[(i64, i64, u64)], every: usize) {
        let all = running_step_ends(r);
        for n in (every..=r.len()).step_by(every) {
            let p = running_step_ends(&r[..n]);
            assert_eq!(p[..], all[..p.len()], "prefix {n} of {r:?}");
        }
        let done = finished(r);
        assert_eq!(all.len(), done.len(), "{r:?}");
        assert_eq!(all[1..], done[1..], "{r:?}");
    }

    #[test]
    fn one_optimizer_marks_every_step() {
        let r = seq(&[7; 6]);
        assert_eq!(running_step_ends(&r).len(), 6);
        agrees(&r);
    }

    #[test]
    fn two_optimizers_in_turn_mark_at_the_second() {
        // A GAN: D then G every iteration; 5 iterations are 5 steps, ending
        // at G's (the old count: 10).
        let r = seq(&[1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
        let e = running_step_ends(&r);
        assert_eq!(e.len(), 5);
        assert_eq!(e[1..], [r[3].1, r[5].1, r[7].1, r[9].1]);
        agrees(&r);
        // A capture starting between D and G: G, D, G, D ... D marks, as
        // the report of that file will say.
        agrees(&seq(&[2, 1, 2, 1, 2, 1, 2, 1]));
    }

    #[test]
    fn the_optimizer_stepped_most_marks() {
        // Five critic steps per generator step: the critic marks.
        let keys: Vec<u64> = (0..4).flat_map(|_| [1, 1, 1, 1, 1, 2]).collect();
        let r = seq(&keys);
        assert_eq!(running_step_ends(&r).len(), 20);
        agrees(&r);
    }

    #[test]
    fn a_step_inside_another_is_part_of_it() {
        // A wrapper's step (key 5) around its inner optimizer's (key 9),
        // the inner one noted first since the hook notes a step at its end.
        let mut r = Vec::new();
        for i in 0..4_i64 {
            let t = i * 1_000_000;
            r.push((t + 10_000, t + 90_000, 9));
            r.push((t, t + 100_000, 5));
        }
        assert_eq!(
            running_step_ends(&r),
            [100_000, 1_100_000, 2_100_000, 3_100_000]
        );
        // Until the wrapper's range comes, its inner one (another
        // optimizer) is not yet a step.
        assert_eq!(running_step_ends(&r[..3]), [100_000]);
        agrees_at(&r, 2);
    }
}
