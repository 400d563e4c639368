//! Overlap and temporal breakdown of a set of GPU events (HTA's
//! definitions): unions of compute and communication intervals, their
//! intersection, and the idle / compute / non-compute split of kernel time.

use super::intervals::{intersection_measure, measure, union_in_place};
use super::rank::Ev;
use super::report::Breakdown;
use crate::model::SliceClass;

/// Merged interval sets of one window.
#[derive(Debug, Default)]
pub struct Unions {
    /// Union of all GPU event intervals (ns).
    pub all: Vec<(i64, i64)>,
    /// Union of compute-kernel intervals (ns).
    pub compute: Vec<(i64, i64)>,
    /// Union of communication-kernel intervals (ns).
    pub comm: Vec<(i64, i64)>,
    /// Earliest event start (ns); `None` without events.
    pub first_start: Option<i64>,
    /// Latest event end (ns); `None` without events.
    pub last_end: Option<i64>,
    /// Number of events.
    pub count: u64,
}

impl Unions {
    /// Merges the intervals of `events`. Events in start order (a rank's
    /// events are) merge as they come, so only the unions are stored.
    pub fn of<'a>(events: impl Iterator<Item = &'a Ev>) -> Unions {
        let mut u = Unions::default();
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let (mut all, mut compute, mut comm) =
            (Merging::default(), Merging::default(), Merging::default());
        for e in events {
            all.push(e.s, e.e);
            match e.class {
                SliceClass::Compute => compute.push(e.s, e.e),
                SliceClass::Communication => comm.push(e.s, e.e),
                _ => {}
            }
            lo = lo.min(e.s);
            hi = hi.max(e.e);
            u.count += 1;
        }
        if u.count > 0 {
            u.first_start = Some(lo);
            u.last_end = Some(hi);
        }
        u.all = all.finish();
        u.compute = compute.finish();
        u.comm = comm.finish();
        u
    }

    /// The overlap and temporal breakdown of these unions.
    pub fn breakdown(&self) -> Breakdown {
        let us = |ns: i64| ns as f64 / 1000.0;
        let pct = |num: i64, den: i64| (den > 0).then(|| 100.0 * num as f64 / den as f64);
        let compute = measure(&self.compute);
        let comm = measure(&self.comm);
        let busy = measure(&self.all);
        let both = intersection_measure(&self.compute, &self.comm);
        let kernel_time = match (self.first_start, self.last_end) {
            (Some(a), Some(b)) => b.saturating_sub(a).max(0),
            _ => 0,
        };
        let idle = kernel_time.saturating_sub(busy).max(0);
        let non_compute = kernel_time
            .saturating_sub(compute)
            .saturating_sub(idle)
            .max(0);
        Breakdown {
            compute_us: us(compute),
            comm_us: us(comm),
            overlap_us: us(both),
            exposed_comm_us: us(comm.saturating_sub(both)),
            overlap_pct: pct(both, comm),
            overlap_efficiency_pct: pct(both, compute.min(comm)),
            kernel_time_us: us(kernel_time),
            idle_us: us(idle),
            non_compute_us: us(non_compute),
            idle_pct: pct(idle, kernel_time),
            compute_pct: pct(compute, kernel_time),
            non_compute_pct: pct(non_compute, kernel_time),
            gpu_events: self.count,
        }
    }
}

/// An interval union built as intervals arrive: merged on the fly while
/// they come in start order, sorted and merged at the end otherwise.
#[derive(Default)]
struct Merging {
    v: Vec<(i64, i64)>,
    in_order: bool,
    last_start: Option<i64>,
}

impl Merging {
    fn push(&mut self, s: i64, e: i64) {
        let e = e.max(s);
        if self.last_start.is_none() {
            self.in_order = true;
        }
        if self.in_order && self.last_start.is_some_and(|l| s < l) {
            self.in_order = false;
        }
        self.last_start = Some(s);
        if self.in_order {
            if let Some(top) = self.v.last_mut().filter(|top| s <= top.1) {
                top.1 = top.1.max(e);
                return;
            }
        }
        self.v.push((s, e));
    }

    fn finish(mut self) -> Vec<(i64, i64)> {
        if !self.in_order {
            union_in_place(&mut self.v);
        }
        self.v.shrink_to_fit();
        self.v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rank::NONE;

    fn ev(s: i64, e: i64, class: SliceClass) -> Ev {
        Ev {
            s,
            e,
            id: 0,
            stream: 0,
            class,
            step: NONE,
        }
    }

    #[test]
    fn unions_do_not_depend_on_the_order_of_events() {
        use SliceClass::*;
        let evs = [
            ev(0, 100, Compute),
            ev(50, 150, Communication),
            ev(100, 120, Compute),
            ev(130, 130, Compute),
            ev(200, 210, Memory),
            ev(205, 260, Compute),
        ];
        let sorted = Unions::of(evs.iter());
        assert_eq!(sorted.all, vec![(0, 150), (200, 260)]);
        assert_eq!(sorted.compute, vec![(0, 120), (130, 130), (205, 260)]);
        let mut shuffled = evs;
        shuffled.swap(0, 4);
        shuffled.swap(1, 5);
        let u = Unions::of(shuffled.iter());
        assert_eq!(u.all, sorted.all);
        assert_eq!(u.compute, sorted.compute);
        assert_eq!(u.comm, sorted.comm);
        assert_eq!((u.first_start, u.last_end), (Some(0), Some(260)));
    }

    #[test]
    fn overlap_and_breakdown() {
        use SliceClass::*;
        // compute [0,100) on one stream, comm [50,150) on another, a copy [200,210).
        let evs = [
            ev(0, 100, Compute),
            ev(50, 150, Communication),
            ev(200, 210, Memory),
        ];
        let b = Unions::of(evs.iter()).breakdown();
        assert_eq!(b.compute_us, 0.1);
        assert_eq!(b.comm_us, 0.1);
        assert_eq!(b.overlap_us, 0.05);
        assert_eq!(b.exposed_comm_us, 0.05);
        assert_eq!(b.overlap_pct, Some(50.0));
        assert_eq!(b.overlap_efficiency_pct, Some(50.0));
        assert_eq!(b.kernel_time_us, 0.21);
        assert!((b.idle_us - 0.05).abs() < 1e-12);
        assert!((b.non_compute_us - 0.06).abs() < 1e-12);
    }

    #[test]
    fn no_communication_is_none_not_nan() {
        let evs = [
            ev(0, 100, SliceClass::Compute),
            ev(100, 100, SliceClass::Compute),
        ];
        let b = Unions::of(evs.iter()).breakdown();
        assert_eq!(b.overlap_pct, None);
        assert_eq!(b.overlap_efficiency_pct, None);
        assert_eq!(b.exposed_comm_us, 0.0);
        assert_eq!(b.compute_pct, Some(100.0));
        let empty = Unions::of([].iter()).breakdown();
        assert_eq!((empty.idle_pct, empty.kernel_time_us), (None, 0.0));
    }
}
