//! Interval unions and intersections: sort once, sweep once.
//!
//! Intervals are half-open `[start_ns, end_ns)`; zero-length intervals add
//! nothing to a measure. Touching intervals merge.

/// Sorts `v` by start and merges it in place into disjoint, ascending intervals.
pub fn union_in_place(v: &mut Vec<(i64, i64)>) {
    // Already-sorted runs (one per stream) make this close to a k-way merge.
    v.sort_unstable_by_key(|&(s, _)| s);
    let mut w = 0usize;
    for r in 0..v.len() {
        let (s, e) = v[r];
        let e = e.max(s);
        if w > 0 && s <= v[w - 1].1 {
            if e > v[w - 1].1 {
                v[w - 1].1 = e;
            }
        } else {
            v[w] = (s, e);
            w += 1;
        }
    }
    v.truncate(w);
}

/// The union of `v`, disjoint and ascending.
pub fn union(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    union_in_place(&mut v);
    v
}

/// Total length of disjoint intervals.
pub fn measure(u: &[(i64, i64)]) -> i64 {
    u.iter()
        .fold(0i64, |acc, &(s, e)| acc.saturating_add(e.saturating_sub(s)))
}

/// |a ∩ b| for two disjoint ascending interval lists.
pub fn intersection_measure(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut total) = (0usize, 0usize, 0i64);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total = total.saturating_add(hi.saturating_sub(lo));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// `a \ b` for two disjoint ascending interval lists: disjoint, ascending,
/// without empty pieces.
pub fn difference(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut j = 0usize;
    for &(s, e) in a {
        let mut at = s;
        while j < b.len() && b[j].1 <= at {
            j += 1;
        }
        let mut k = j;
        while at < e && k < b.len() && b[k].0 < e {
            if b[k].0 > at {
                out.push((at, b[k].0));
            }
            at = at.max(b[k].1);
            k += 1;
        }
        if at < e {
            out.push((at, e));
        }
    }
    out
}

/// Whether `t` lies inside one of the disjoint ascending intervals `u`
/// (start inclusive, end exclusive).
pub fn contains(u: &[(i64, i64)], t: i64) -> bool {
    let k = u.partition_point(|&(s, _)| s <= t);
    k > 0 && t < u[k - 1].1
}

/// For host slices `ranges` of one track (sorted here by start, longest
/// first) and instants `at` (ascending), calls `f(i, open)` for each
/// instant `at[i]` with the ranges that started at or before it and enclose
/// it, outermost first (the innermost last): the nesting stack of NVTX
/// ranges or Python frames around a call.
pub(crate) fn enclosing_each(
    sl: &crate::model::Slices,
    ranges: &mut [u32],
    at: &[i64],
    mut f: impl FnMut(usize, &[u32]),
) {
    let start = |r: u32| sl.start_ns()[r as usize];
    let end = |r: u32| start(r).saturating_add(sl.dur_ns()[r as usize]);
    ranges.sort_by_key(|&r| (start(r), std::cmp::Reverse(end(r))));
    let mut stack: Vec<u32> = Vec::new();
    let mut open: Vec<u32> = Vec::new();
    let mut next = 0usize;
    for (i, &t_ns) in at.iter().enumerate() {
        while next < ranges.len() && start(ranges[next]) <= t_ns {
            let r = ranges[next];
            while stack.last().is_some_and(|&top| end(top) < start(r)) {
                stack.pop();
            }
            stack.push(r);
            next += 1;
        }
        while stack.last().is_some_and(|&top| end(top) < t_ns) {
            stack.pop();
        }
        open.clear();
        open.extend(stack.iter().copied().filter(|&r| end(r) >= t_ns));
        f(i, &open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difference_measures_what_intersection_leaves() {
        let a = vec![(0, 10), (20, 30), (40, 50)];
        let b = vec![(2, 4), (8, 22), (25, 26), (29, 45)];
        let d = difference(&a, &b);
        assert_eq!(d, vec![(0, 2), (4, 8), (22, 25), (26, 29), (45, 50)]);
        assert_eq!(measure(&d), measure(&a) - intersection_measure(&a, &b));
        assert_eq!(difference(&a, &[]), a);
        assert!(difference(&a, &[(-5, 60)]).is_empty());
    }

    #[test]
    fn touching_and_nested_merge() {
        let u = union(vec![
            (10, 20),
            (20, 30),
            (12, 15),
            (40, 40),
            (35, 50),
            (0, 5),
        ]);
        assert_eq!(u, vec![(0, 5), (10, 30), (35, 50)]);
        assert_eq!(measure(&u), 5 + 20 + 15);
    }

    #[test]
    fn zero_length_adds_nothing() {
        let u = union(vec![(5, 5), (7, 7)]);
        assert_eq!(measure(&u), 0);
    }

    #[test]
    fn intersections() {
        let a = union(vec![(0, 10), (20, 30)]);
        let b = union(vec![(5, 25)]);
        assert_eq!(intersection_measure(&a, &b), 5 + 5);
        assert_eq!(intersection_measure(&a, &[]), 0);
        assert_eq!(intersection_measure(&a, &a), 20);
    }

    #[test]
    fn gaps() {
        let u = vec![(0, 10), (20, 30)];
        assert!(contains(&u, 0) && !contains(&u, 10));
    }
}
