//! Moving a file's indices when its rows join the files before it.
//!
//! A summary's rows hold slice, process, device and track indices of its
//! own file. The merge ([`super::streamed`]) moves them by the counts of
//! the files before it, as `Trace::append` moves a trace's. Every report
//! type implements [`Relocate`], and each implementation destructures its
//! struct whole (no `..`): a new field does not compile until its author
//! says here whether it holds an index to move, so a merge cannot forget
//! one. Rank numbers, step numbers, times and indices into a rank's own
//! tables (names, steps) are the same in every file and do not move.

use super::findings::Finding;
use super::headline::{Headline, HeadlineSync, RankHeadline, Straggler};
use super::measured::{ContentionRow, Measured, SmContention};
use super::memory::{LiveBlock, RankMemory};
use super::rank::{RankClaim, StreamKey};
use super::top_kernels::TopKernel;
use super::xrank::{CommRec, RankComms};
use super::{
    Breakdown, ClockOffset, CollectiveSkew, CollectiveStats, CommStalls, CrossRank,
    DeviceOccupancy, KernelOccupancy, OtherProcess, PrefetchSlack, RankLocal, RankPart, RankReport,
    Report, Stall, StepReport, StreamIdle, StreamStall, SyncGroup, WaitPair, Window,
};
use crate::diagnostic::Diagnostic;
use crate::model::{DeviceId, ProcessId, SliceId, TrackId};

/// How far a file's indices move: the slices, processes, devices and
/// tracks of the files before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offsets {
    /// Added to slice ids.
    pub slices: u32,
    /// Added to process indices.
    pub processes: u32,
    /// Added to device indices.
    pub devices: u32,
    /// Added to track ids (a GPU track off any device is keyed by its track).
    pub tracks: u32,
}

impl Offsets {
    fn slice(&self, s: &mut SliceId) {
        *s = SliceId::from_index(s.index().saturating_add(self.slices as usize));
    }

    fn process(&self, p: &mut ProcessId) {
        *p = ProcessId::from_index(p.index().saturating_add(self.processes as usize));
    }

    fn device(&self, d: &mut DeviceId) {
        *d = DeviceId::from_index(d.index().saturating_add(self.devices as usize));
    }

    /// A stream key: on a device, the device moves and the CUDA stream id
    /// stays; off any device, the track moves.
    fn stream(&self, k: &mut StreamKey) {
        match k {
            StreamKey::Stream { device, .. } | StreamKey::Device(device) => self.device(device),
            StreamKey::Track(t) => {
                *t = TrackId::from_index(t.index().saturating_add(self.tracks as usize));
            }
        }
    }
}

/// A value holding indices of one file's trace.
pub trait Relocate {
    /// Moves every index it holds by `by`.
    fn relocate(&mut self, by: &Offsets);
}

impl<T: Relocate> Relocate for Vec<T> {
    fn relocate(&mut self, by: &Offsets) {
        self.iter_mut().for_each(|x| x.relocate(by));
    }
}

impl<T: Relocate> Relocate for Option<T> {
    fn relocate(&mut self, by: &Offsets) {
        if let Some(x) = self {
            x.relocate(by);
        }
    }
}

/// Types with no index of a trace: each field listed, none moved.
macro_rules! no_indices {
    ($($t:ident { $($f:ident),* $(,)? })*) => {
        $(impl Relocate for $t {
            fn relocate(&mut self, _: &Offsets) {
                let $t { $($f: _),* } = self;
            }
        })*
    };
}

no_indices! {
    Window { rule, steps, start_ns, end_ns, label }
    Breakdown {
        compute_us, comm_us, overlap_us, exposed_comm_us, overlap_pct,
        overlap_efficiency_pct, kernel_time_us, idle_us, non_compute_us, idle_pct,
        compute_pct, non_compute_pct, gpu_events,
    }
    Measured {
        sm_active_pct, warps_active_pct, tensor_active_pct, dram_gbps, nvlink_rx_gbps,
        nvlink_tx_gbps, pcie_read_gbps, pcie_write_gbps, samples, span_us,
        sm_active_compute_pct, nvlink_tx_gb, nvlink_rx_gb, collective_link_gb,
    }
    ContentionRow {
        name, shape, alone, overlapped, alone_median_us, overlapped_median_us,
        slowdown_pct, extra_us,
    }
    TopKernel { name, class, count, total_ms, mean_ms, per_step_ms, share_pct, python }
    CollectiveStats {
        rank, window, collective, algorithm, protocol, dtype, reduce_op, count, total_us,
        mean_us, bytes, sized, alg_bw_gbps, bus_bw_gbps,
    }
    KernelOccupancy {
        name, class, count, total_us, grid, block, registers_per_thread, smem_bytes,
        blocks_per_sm, theoretical_occupancy_pct, limiter, sms_filled, sms_touched,
    }
    CollectiveSkew {
        collective, group, count, skew_median_us, skew_p95_us, skew_max_us, kernel_us,
        wait_us, transfer_us, last_rank, bytes, bus_bw_gbps,
    }
    WaitPair { waiting_rank, for_rank, count, wait_us }
    ClockOffset {
        host, clock, ranks, offset_ns, drift_us_per_s, at_ns, residual_us, instances,
    }
    HeadlineSync { pattern, api, where_, count, gpu_idle_ms, gpu_idle_ms_per_step }
    Straggler { rank, steps, of_steps, median_wait_ms }
    Diagnostic { kind, severity, count, file, detail }
    RankLocal { steps, exposed, extra }
}

impl Relocate for Report {
    fn relocate(&mut self, by: &Offsets) {
        let Report {
            ranks,
            other_processes,
            steps,
            collectives,
            collectives_per_step,
            occupancy,
            cross_rank,
            sync_warnings,
            dropped_records: _,
            diagnostics,
            headline,
            findings,
        } = self;
        ranks.relocate(by);
        other_processes.relocate(by);
        steps.relocate(by);
        collectives.relocate(by);
        collectives_per_step.relocate(by);
        occupancy.relocate(by);
        cross_rank.relocate(by);
        sync_warnings.relocate(by);
        diagnostics.relocate(by);
        headline.relocate(by);
        findings.relocate(by);
    }
}

impl Relocate for Finding {
    fn relocate(&mut self, by: &Offsets) {
        let Finding {
            kind: _,
            where_: _,
            evidence: _,
            predicted_gain_us: _,
            predicted_gain_pct: _,
            prediction: _,
            cost_per_step_us: _,
            beyond_noise: _,
            noise_us: _,
            start_ns: _,
            end_ns: _,
            slice,
        } = self;
        if let Some(s) = slice {
            by.slice(s);
        }
    }
}

impl Relocate for OtherProcess {
    fn relocate(&mut self, by: &Offsets) {
        let OtherProcess {
            process,
            pid: _,
            rank: _,
            label: _,
            name: _,
            host_slices: _,
        } = self;
        by.process(process);
    }
}

impl Relocate for RankReport {
    fn relocate(&mut self, by: &Offsets) {
        let RankReport {
            rank: _,
            process,
            label: _,
            device: _,
            has_gpu_events: _,
            window,
            breakdown,
            step_source: _,
            idle_by_stream,
            comm_stalls,
            prefetch,
            syncs,
            startup_syncs,
            after_window_syncs,
            exposed_wait_us: _,
            exposed_transfer_us: _,
            measured,
            sm_contention,
            median_step_ms: _,
            top_kernels,
            host: _,
            first_event_unix_ns: _,
            last_event_unix_ns: _,
            memory,
        } = self;
        by.process(process);
        memory.relocate(by);
        window.relocate(by);
        breakdown.relocate(by);
        idle_by_stream.relocate(by);
        comm_stalls.relocate(by);
        prefetch.relocate(by);
        syncs.relocate(by);
        startup_syncs.relocate(by);
        after_window_syncs.relocate(by);
        measured.relocate(by);
        sm_contention.relocate(by);
        top_kernels.relocate(by);
    }
}

impl Relocate for RankMemory {
    fn relocate(&mut self, by: &Offsets) {
        // A GPU ordinal, times, byte counts, addresses and names: no index.
        let RankMemory {
            gpu: _,
            peak_allocated_bytes: _,
            peak_at_ns: _,
            peak_step: _,
            reserved_at_peak_bytes: _,
            unused_reserved_at_peak_bytes: _,
            peak_reserved_bytes: _,
            samples: _,
            live_at_peak,
            live_at_peak_other_bytes: _,
            live_at_peak_other_blocks: _,
            source: _,
            peak_device_bytes: _,
            out_of_memory: _,
        } = self;
        live_at_peak.relocate(by);
    }
}

impl Relocate for LiveBlock {
    fn relocate(&mut self, _: &Offsets) {
        // An address on the GPU is no index of the trace.
        let LiveBlock {
            bytes: _,
            address: _,
            allocated_at_ns: _,
            op: _,
            python: _,
        } = self;
    }
}

impl Relocate for StreamIdle {
    fn relocate(&mut self, by: &Offsets) {
        let StreamIdle {
            at,
            host_wait_us: _,
            kernel_wait_us: _,
            other_us: _,
            total_us: _,
        } = self;
        by.stream(at);
    }
}

impl Relocate for CommStalls {
    fn relocate(&mut self, by: &Offsets) {
        let CommStalls {
            count: _,
            total_us: _,
            by_stream,
            worst,
        } = self;
        by_stream.relocate(by);
        worst.relocate(by);
    }
}

impl Relocate for StreamStall {
    fn relocate(&mut self, by: &Offsets) {
        let StreamStall {
            at,
            count: _,
            total_us: _,
        } = self;
        by.stream(at);
    }
}

impl Relocate for Stall {
    fn relocate(&mut self, by: &Offsets) {
        let Stall {
            slice,
            comm_slice,
            start_ns: _,
            end_ns: _,
            stall_us: _,
        } = self;
        by.slice(slice);
        by.slice(comm_slice);
    }
}

impl Relocate for PrefetchSlack {
    fn relocate(&mut self, by: &Offsets) {
        let PrefetchSlack {
            all_gathers: _,
            late: _,
            late_us: _,
            min_us: _,
            median_us: _,
            mean_us: _,
            per_all_gather,
            sized: _,
            held_early_byte_s: _,
            per_layer: _, // positions and labels: no ids
        } = self;
        per_all_gather.iter_mut().for_each(|(s, _)| by.slice(s));
    }
}

impl Relocate for SmContention {
    fn relocate(&mut self, by: &Offsets) {
        let SmContention {
            compute_slowdown_pct: _,
            groups: _,
            kernels_alone: _,
            kernels_overlapped: _,
            extra_compute_us: _,
            cost_per_step_us: _,
            top,
        } = self;
        top.relocate(by);
    }
}

impl Relocate for StepReport {
    fn relocate(&mut self, by: &Offsets) {
        let StepReport {
            rank: _,
            step: _,
            name: _,
            source: _,
            start_ns: _,
            end_ns: _,
            duration_us: _,
            host_interval_us: _,
            gpu_start_ns: _,
            graph_launches: _,
            graph_gpu_us: _,
            eager_gpu_us: _,
            breakdown,
            idle_by_stream,
            prefetch,
            comm_stall_us: _,
            syncs: _,
            sync_host_blocked_us: _,
            straggler_rank: _,
            straggler_wait_us: _,
            comm_wait_us: _,
            measured,
            sm_contention_cost_us: _,
            memory: _, // bytes only
        } = self;
        breakdown.relocate(by);
        idle_by_stream.relocate(by);
        prefetch.relocate(by);
        measured.relocate(by);
    }
}

impl Relocate for DeviceOccupancy {
    fn relocate(&mut self, by: &Offsets) {
        let DeviceOccupancy {
            rank: _,
            window: _,
            device,
            name: _,
            sm_count: _,
            compute_capability: _,
            kernels_known: _,
            kernels_unknown: _,
            mean_compute_occupancy_pct: _,
            nccl_sm_share_pct: _,
            kernels,
            sms_in_use: _,
        } = self;
        by.device(device);
        kernels.relocate(by);
    }
}

impl Relocate for SyncGroup {
    fn relocate(&mut self, by: &Offsets) {
        let SyncGroup {
            rank: _,
            window: _,
            pattern: _,
            api: _,
            where_: _,
            nvtx: _,
            python: _,
            op: _,
            count: _,
            steps_with: _,
            per_step: _,
            host_blocked_us: _,
            gpu_idle_us: _,
            warning: _,
            slices,
            start_ns: _,
            end_ns: _,
        } = self;
        slices.iter_mut().for_each(|s| by.slice(s));
    }
}

impl Relocate for CrossRank {
    fn relocate(&mut self, by: &Offsets) {
        let CrossRank {
            window: _,
            method: _,
            clocks: _,
            comparable: _,
            comm_kernels: _,
            matched_kernels: _,
            instances: _,
            instances_in_window: _,
            kinds,
            waits,
            clock_offsets,
            notes: _,
        } = self;
        kinds.relocate(by);
        waits.relocate(by);
        clock_offsets.relocate(by);
    }
}

impl Relocate for Headline {
    fn relocate(&mut self, by: &Offsets) {
        let Headline { ranks, straggler } = self;
        ranks.relocate(by);
        straggler.relocate(by);
    }
}

impl Relocate for RankHeadline {
    fn relocate(&mut self, by: &Offsets) {
        let RankHeadline {
            rank: _,
            device: _,
            has_gpu_events: _,
            window: _,
            steps: _,
            median_step_ms: _,
            min_step_ms: _,
            max_step_ms: _,
            overlap_pct: _,
            exposed_comm_ms_per_step: _,
            idle_pct: _,
            costliest_sync,
            top_kernel,
            graph_launches_per_step: _,
            graph_gpu_pct: _,
        } = self;
        costliest_sync.relocate(by);
        top_kernel.relocate(by);
    }
}

impl Relocate for RankPart {
    fn relocate(&mut self, by: &Offsets) {
        let RankPart {
            report,
            local,
            comms,
            analyzed: _,
        } = self;
        report.relocate(by);
        local.relocate(by);
        comms.relocate(by);
    }
}

impl Relocate for RankComms {
    fn relocate(&mut self, by: &Offsets) {
        let RankComms {
            rank: _,
            process,
            world_size: _,
            clock: _,
            host: _,
            names: _,
            recs,
        } = self;
        by.process(process);
        recs.relocate(by);
    }
}

impl Relocate for CommRec {
    fn relocate(&mut self, by: &Offsets) {
        // `stream` is the CUDA stream id the matching pairs NCCL streams
        // by; it is not moved (a GPU track off any device, keyed by its
        // track id elsewhere, keeps its file's id here, as before).
        // `name`, `kind`, `pg` index the rank's own names, `step` its steps.
        let CommRec {
            slice,
            s: _,
            e: _,
            stream: _,
            name: _,
            kind: _,
            pg: _,
            seq: _,
            bytes: _,
            group_size: _,
            step: _,
            head: _,
        } = self;
        by.slice(slice);
    }
}

impl Relocate for RankClaim {
    fn relocate(&mut self, by: &Offsets) {
        let RankClaim {
            stated: _,
            multi: _,
            process,
        } = self;
        by.process(process);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_on_a_device_keeps_its_id_and_one_off_any_device_moves_as_a_track() {
        let by = Offsets {
            slices: 1,
            processes: 2,
            devices: 3,
            tracks: 40,
        };
        let mut on = StreamIdle {
            at: StreamKey::Stream {
                device: DeviceId::from_index(1),
                stream: 7,
            },
            ..Default::default()
        };
        let mut group = StreamIdle {
            at: StreamKey::Device(DeviceId::from_index(2)),
            ..Default::default()
        };
        let mut off = StreamStall {
            at: StreamKey::Track(TrackId::from_index(7)),
            ..Default::default()
        };
        on.relocate(&by);
        group.relocate(&by);
        off.relocate(&by);
        assert_eq!(
            on.at,
            StreamKey::Stream {
                device: DeviceId::from_index(4),
                stream: 7
            }
        );
        assert_eq!(group.at, StreamKey::Device(DeviceId::from_index(5)));
        assert_eq!(off.at, StreamKey::Track(TrackId::from_index(47)));
        let mut occ = DeviceOccupancy {
            device: DeviceId::from_index(1),
            ..Default::default()
        };
        occ.relocate(&by);
        assert_eq!(occ.device, DeviceId::from_index(4));
    }
}
