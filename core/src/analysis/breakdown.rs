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
    /// Merges the intervals of `events`.
    pub fn of<'a>(events: impl Iterator<Item = &'a Ev>) -> Unions {
        let mut u = Unions::default();
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for e in events {
            u.all.push((e.s, e.e));
            match e.class {
                SliceClass::Compute => u.compute.push((e.s, e.e)),
                SliceClass::Communication => u.comm.push((e.s, e.e)),
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
        union_in_place(&mut u.all);
        union_in_place(&mut u.compute);
        union_in_place(&mut u.comm);
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
            (Some(a), Some(b)) => (b - a).max(0),
            _ => 0,
        };
        let idle = (kernel_time - busy).max(0);
        let non_compute = (kernel_time - compute - idle).max(0);
        Breakdown {
            compute_us: us(compute),
            comm_us: us(comm),
            overlap_us: us(both),
            exposed_comm_us: us(comm - both),
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
