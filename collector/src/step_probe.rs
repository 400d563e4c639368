//! Step boundaries seen while an armed capture of N steps runs, by the
//! rules `report` uses when a job marks no steps (docs/METRICS.md,
//! "Steps"): launches of one CUDA graph, else the period of the busiest
//! stream's kernel sequence. The optimizer-step marks of the Python hooks
//! come first; the capture loop counts those itself.

use std::collections::HashMap;

use streamscope_core::StrId;

/// Kernels kept for the period search (a capture of N steps needs N + 1
/// periods; past this the oldest half is dropped).
const MAX_KERNELS: usize = 400_000;

/// What the capture's converter saw of the GPU work, for step counting.
#[derive(Default)]
pub struct StepProbe {
    /// Graph id -> (correlation of each launch, first GPU start of its work).
    graphs: HashMap<u32, Vec<(u32, i64)>>,
    /// (stream track, kernel name, start) of every kernel, in arrival order.
    kernels: Vec<(u32, u32, i64)>,
}

impl StepProbe {
    /// One GPU record: its stream, name, start, graph (0: none) and
    /// correlation id (a graph launch's: shared by all its work).
    pub fn gpu(&mut self, stream: u32, name: StrId, start: i64, graph: u32, corr: u32) {
        if graph != 0 {
            let v = self.graphs.entry(graph).or_default();
            // Records of one launch arrive together: look at the last few.
            match v.iter_mut().rev().take(8).find(|(c, _)| *c == corr) {
                Some(l) => l.1 = l.1.min(start),
                None => v.push((corr, start)),
            }
        }
        if self.kernels.len() >= MAX_KERNELS {
            self.kernels.drain(..MAX_KERNELS / 2);
        }
        self.kernels.push((stream, name.get(), start));
    }

    /// Step boundaries (GPU times, ascending) at or after `from`: the
    /// launches of the most-launched graph when a graph ran at least twice,
    /// else the starts of the periods of the busiest stream's kernels.
    pub fn boundaries(&self, from: i64) -> Vec<i64> {
        let after = |v: &Vec<(u32, i64)>| -> Vec<i64> {
            v.iter().map(|l| l.1).filter(|&s| s >= from).collect()
        };
        if let Some(mut b) = self
            .graphs
            .values()
            .map(after)
            .max_by_key(Vec::len)
            .filter(|b| b.len() >= 2)
        {
            b.sort_unstable();
            return b;
        }
        self.period_boundaries(from)
    }

    fn period_boundaries(&self, from: i64) -> Vec<i64> {
        let mut count: HashMap<u32, usize> = HashMap::new();
        for k in self.kernels.iter().filter(|k| k.2 >= from) {
            *count.entry(k.0).or_default() += 1;
        }
        let Some((&stream, _)) = count
            .iter()
            .max_by_key(|(s, n)| (**n, std::cmp::Reverse(**s)))
        else {
            return Vec::new();
        };
        let mut evs: Vec<(i64, u32)> = self
            .kernels
            .iter()
            .filter(|k| k.0 == stream && k.2 >= from)
            .map(|k| (k.2, k.1))
            .collect();
        evs.sort_unstable();
        let seq: Vec<u32> = evs.iter().map(|e| e.1).collect();
        streamscope_core::analysis::period_starts(&seq)
            .into_iter()
            .filter_map(|i| evs.get(i).map(|e| e.0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_launches_are_boundaries() {
        let mut p = StepProbe::default();
        for k in 0..5i64 {
            // Two kernels per launch, the second starting earlier.
            p.gpu(7, StrId::from_index(1), 1000 * k + 50, 3, 100 + k as u32);
            p.gpu(7, StrId::from_index(2), 1000 * k + 10, 3, 100 + k as u32);
            // A graph launched once.
            if k == 2 {
                p.gpu(8, StrId::from_index(3), 1000 * k + 500, 9, 900);
            }
        }
        assert_eq!(p.boundaries(0), vec![10, 1010, 2010, 3010, 4010]);
        assert_eq!(p.boundaries(2000), vec![2010, 3010, 4010]);
    }

    #[test]
    fn repeating_kernels_are_boundaries() {
        let mut p = StepProbe::default();
        let mut t = 0i64;
        for _ in 0..6 {
            for name in [5u32, 6, 7, 6] {
                p.gpu(1, StrId::from_index(name as usize), t, 0, 0);
                t += 10;
            }
            t += 100;
        }
        let b = p.boundaries(0);
        assert!(b.len() >= 5, "{b:?}");
        let gaps: Vec<i64> = b.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g == 140), "{gaps:?}");
        assert!(StepProbe::default().boundaries(0).is_empty());
    }
}
