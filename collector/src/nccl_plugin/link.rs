//! Which NCCL kernel an operation of the profiler plugin belongs to.
//!
//! NCCL starts the plugin's Coll/P2p events of a launch plan right after
//! launching the plan's kernel, on the same thread, and stops them before
//! the next plan is launched. So the kernel of an operation is the NCCL
//! kernel (`ncclDevKernel_*`, `ncclKernel_*`) whose launch call, on the
//! operation's thread, ended last before the operation started, provided
//! no operation of that thread stopped in between (that would mean the
//! right kernel's records are missing and the launch found belongs to an
//! earlier plan). The converter notes launch calls and NCCL kernels as
//! their CUPTI records arrive ([`KernelLinks`]); the writer asks when it
//! converts an operation, once that kernel's record (which comes when the
//! kernel ends, possibly seconds after its launch when the host runs
//! ahead of the GPU) is there, or after a time limit.

use std::collections::{HashMap, VecDeque};

/// NCCL kernel launches remembered per thread.
const PER_THREAD: usize = 1024;
/// Kernel launch calls remembered (the oldest forgotten first): the host
/// may run thousands of launches ahead of the GPU, whose kernel records
/// come only when the kernels end.
const MAX_LAUNCHES: usize = 1 << 17;
/// An operation further than this after the launch is not linked.
pub const MAX_GAP_NS: i64 = 50_000_000;

/// Launch calls and NCCL kernels seen in the CUPTI records.
#[derive(Default)]
pub struct KernelLinks {
    /// (driver, cbid) -> whether the call launches a kernel.
    is_launch: HashMap<(bool, u32), bool>,
    /// Recent launch calls: correlation -> (thread, end).
    launches: HashMap<u32, (u32, i64)>,
    /// Their correlations, oldest first (for forgetting).
    launch_order: VecDeque<u32>,
    /// NCCL kernels whose launch call was not seen yet: (correlation, age).
    waiting: Vec<(u32, u8)>,
    /// Per thread: (launch call end, kernel correlation) of NCCL kernels.
    nccl: HashMap<u32, VecDeque<(i64, u32)>>,
}

impl KernelLinks {
    /// An API call (`name` is its name, looked at once per function).
    pub fn api(&mut self, driver: bool, cbid: u32, name: &str, corr: u32, tid: u32, end_ns: i64) {
        let launch = *self
            .is_launch
            .entry((driver, cbid))
            .or_insert_with(|| name.contains("Launch") && name.contains("Kernel"));
        if launch {
            if self.launches.insert(corr, (tid, end_ns)).is_none() {
                self.launch_order.push_back(corr);
            }
            if self.launch_order.len() > MAX_LAUNCHES {
                if let Some(old) = self.launch_order.pop_front() {
                    self.launches.remove(&old);
                }
            }
        }
    }

    /// A kernel of NCCL's (by name).
    pub fn nccl_kernel(&mut self, corr: u32) {
        if !self.place(corr) {
            self.waiting.push((corr, 0));
        }
    }

    fn place(&mut self, corr: u32) -> bool {
        let Some(&(tid, end)) = self.launches.get(&corr) else {
            return false;
        };
        let q = self.nccl.entry(tid).or_default();
        if q.len() >= PER_THREAD {
            q.pop_front();
        }
        q.push_back((end, corr));
        true
    }

    /// Ends a batch: NCCL kernels whose launch call came later are placed
    /// (or forgotten after a few batches).
    pub fn finish_batch(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        for (corr, age) in waiting {
            if !self.place(corr) && age < 2 {
                self.waiting.push((corr, age + 1));
            }
        }
    }

    /// The correlation id of the NCCL kernel launched on thread `tid` last
    /// before `before_ns` and after `after_ns` (within [`MAX_GAP_NS`]).
    pub fn kernel_for(&self, tid: u32, before_ns: i64, after_ns: i64) -> Option<u32> {
        let after = after_ns.max(before_ns.saturating_sub(MAX_GAP_NS));
        self.nccl
            .get(&tid)?
            .iter()
            .filter(|&&(end, _)| end > after && end <= before_ns)
            .max_by_key(|&&(end, _)| end)
            .map(|&(_, corr)| corr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_launch_before_the_operation_and_after_the_last_stop() {
        let mut k = KernelLinks::default();
        k.api(false, 211, "cudaLaunchKernel", 7, 100, 1_000);
        k.api(true, 9, "cuMemcpyAsync", 8, 100, 1_500);
        k.nccl_kernel(7);
        // The kernel record before its launch call (same batch).
        k.nccl_kernel(9);
        k.api(true, 308, "cuLaunchKernelEx", 9, 100, 2_000);
        k.finish_batch();
        k.api(true, 308, "cuLaunchKernelEx", 11, 200, 2_100);
        k.nccl_kernel(11);
        assert_eq!(k.kernel_for(100, 1_200, i64::MIN), Some(7));
        assert_eq!(k.kernel_for(100, 2_050, i64::MIN), Some(9));
        // An operation of thread 100 stopped at 2 010: launch 9 is not this one's.
        assert_eq!(k.kernel_for(100, 2_050, 2_010), None);
        assert_eq!(k.kernel_for(100, 900, i64::MIN), None);
        assert_eq!(k.kernel_for(200, 2_150, i64::MIN), Some(11));
        assert_eq!(k.kernel_for(300, 2_150, i64::MIN), None);
        assert_eq!(k.kernel_for(100, 2_000 + MAX_GAP_NS + 1, i64::MIN), None);
    }

    #[test]
    fn a_kernel_ending_many_batches_after_its_launch_is_still_placed() {
        // The host runs ahead of the GPU: the launch call's record comes
        // in batch 0, the kernel's (when it ends) ten batches later.
        let mut k = KernelLinks::default();
        k.api(false, 211, "cudaLaunchKernel", 7, 100, 1_000);
        for _ in 0..10 {
            k.finish_batch();
        }
        k.nccl_kernel(7);
        assert_eq!(k.kernel_for(100, 1_200, i64::MIN), Some(7));
        // Launches are forgotten oldest first past MAX_LAUNCHES.
        for c in 0..MAX_LAUNCHES as u32 + 1 {
            k.api(false, 211, "cudaLaunchKernel", 1_000 + c, 100, 5_000);
        }
        assert!(k.launches.len() <= MAX_LAUNCHES);
        assert!(!k.launches.contains_key(&7));
        assert!(k.launches.contains_key(&(1_000 + MAX_LAUNCHES as u32)));
    }
}
