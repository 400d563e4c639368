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
    let mut tally = Tally::default();
    for m in &outer {
        tally.add(m);
    }
    let key = tally.picked().unwrap_or(0);
    outer
        .iter()
        .filter(|m| m.key == key)
        .map(|m| m.end_ns)
        .collect()
}

/// Steps per optimizer, and which one marks the steps.
#[derive(Default)]
struct Tally {
    /// Per optimizer: (key, steps, end of its first step).
    per: Vec<(u64, usize, i64)>,
}

impl Tally {
    /// Counts `m`'s step; how many its optimizer has made.
    fn add(&mut self, m: &Marker) -> usize {
        match self.per.iter_mut().find(|p| p.0 == m.key) {
            Some(p) => {
                p.1 += 1;
                p.1
            }
            None => {
                self.per.push((m.key, 1, m.end_ns));
                1
            }
        }
    }

    /// The optimizer that marks the steps: stepped most often; on a tie,
    /// the one whose first step ended last.
    fn picked(&self) -> Option<u64> {
        self.per.iter().max_by_key(|p| (p.1, p.2)).map(|p| p.0)
    }
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

/// Markers of ranges `(start ns, end ns, optimizer key)`.
fn markers(ranges: &[(i64, i64, u64)]) -> Vec<Marker> {
    ranges
        .iter()
        .map(|&(start_ns, end_ns, key)| Marker {
            start_ns,
            end_ns,
            key,
        })
        .collect()
}

/// Where a capture of a job still running may end: element `j` is the
/// first end of an optimizer-step range `(start ns, end ns, optimizer key)`
/// at which a file cut there holds at least `j + 1` steps as the report
/// will count them (`step_ends` of the ranges up to the cut), the last
/// ending at the cut. An armed capture of N steps ends at element `N - 1`.
///
/// The ranges are taken in the order they end. After each, the optimizer
/// that marks steps in the file so far is the one `step_ends` would pick
/// (stepped most often; on a tie, the one whose first step ended last);
/// a range of that optimizer ends the file's `count`-th step, where
/// `count` is how often it has stepped. A range of another optimizer
/// changes nothing: the pick is either its optimizer or the same as
/// before. With two optimizers stepped in turn (a GAN) the second of each
/// iteration marks; with one stepped more often than the others (five
/// critic steps per generator step) every step of that one marks.
pub fn running_step_ends(ranges: &[(i64, i64, u64)]) -> Vec<i64> {
    let mut outer = outermost_markers(markers(ranges));
    outer.sort_by_key(|m| m.end_ns);
    let mut tally = Tally::default();
    let mut ends: Vec<i64> = Vec::new();
    for m in &outer {
        let count = tally.add(m);
        if tally.picked() == Some(m.key) {
            // A new pick can count more steps than were counted: each of
            // the cuts it adds is this range's end.
            while ends.len() < count {
                ends.push(m.end_ns);
            }
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
        step_ends(markers(r))
    }

    /// A capture cut at the j-th running end holds at least j + 1 steps
    /// of the report's count, the last ending at the cut; the whole run's
    /// running ends are as many as the report's.
    fn agrees(r: &[(i64, i64, u64)]) {
        let all = running_step_ends(r);
        for (j, &cut) in all.iter().enumerate() {
            let file: Vec<_> = r.iter().copied().filter(|x| x.1 <= cut).collect();
            let done = finished(&file);
            assert!(done.len() > j, "cut {j} at {cut} of {r:?}: {done:?}");
            assert_eq!(done.last(), Some(&cut), "cut {j} of {r:?}");
        }
        let done = finished(r);
        assert_eq!(all.len(), done.len(), "{r:?}");
    }

    /// [`agrees`] for every start of a repeated pattern: a capture may
    /// begin anywhere in an iteration.
    fn agrees_from_any_start(pattern: &[u64], iterations: usize) {
        let keys: Vec<u64> = (0..iterations)
            .flat_map(|_| pattern.iter().copied())
            .collect();
        for start in 0..pattern.len() {
            agrees(&seq(&keys[start..]));
        }
    }

    #[test]
    fn one_optimizer_marks_every_step() {
        let r = seq(&[7; 6]);
        assert_eq!(running_step_ends(&r).len(), 6);
        agrees(&r);
    }

    #[test]
    fn two_optimizers_in_turn_give_one_step_an_iteration() {
        // A GAN: D then G every iteration; 5 iterations are 5 steps (the
        // old count: 10).
        let r = seq(&[1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
        assert_eq!(running_step_ends(&r).len(), 5);
        agrees(&r);
        // A capture starting between D and G: G, D, G, D ...
        agrees_from_any_start(&[1, 2], 6);
    }

    #[test]
    fn the_optimizer_stepped_most_marks() {
        // Five critic steps per generator step: the critic marks.
        let keys: Vec<u64> = (0..4).flat_map(|_| [1, 1, 1, 1, 1, 2]).collect();
        let r = seq(&keys);
        assert_eq!(running_step_ends(&r).len(), 20);
        agrees(&r);
        agrees_from_any_start(&[1, 1, 1, 1, 1, 2], 4);
        // Two critic steps per generator step, and the generator stepped
        // twice (a capture that begins where the less stepped one leads).
        agrees_from_any_start(&[1, 1, 2], 5);
        agrees_from_any_start(&[1, 2, 2], 5);
    }

    #[test]
    fn any_pattern_of_three_optimizers_agrees() {
        // Every pattern of 2 to 5 steps over 3 optimizers, repeated, from
        // every start: a fixed pseudo-random walk over them.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..400 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 2 + (x % 4) as usize;
            let pattern: Vec<u64> = (0..len).map(|i| 1 + (x >> (8 + 2 * i)) % 3).collect();
            agrees_from_any_start(&pattern, 4);
        }
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
        agrees(&r);
    }
}
