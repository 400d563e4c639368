//! The seed article's analytic model of FSDP overlap, per layer:
//! `t_comm = bytes / bandwidth` against `t_compute = FLOPs / rate`. When
//! communication fits in the compute shadow it is hidden; when it does not,
//! the run has hit the network wall and overlap recovers at most
//! `min(t_comm, t_compute)` per layer.
//!
//! Bandwidth follows nccl-tests: for all-gather and reduce-scatter of a
//! buffer of `S` bytes over `n` ranks, each rank moves `S (n-1)/n` bytes, so
//! `t = S (n-1)/n / busbw`.

use serde::Serialize;

use crate::config::Plan;

/// Which side of the wall a phase (or the whole step) is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// Communication time fits under compute time.
    CommunicationHidden,
    /// Communication time exceeds compute time: the network wall.
    NetworkWall,
}

impl Regime {
    pub fn classify(comm_ms: f64, compute_ms: f64) -> Self {
        if comm_ms <= compute_ms {
            Regime::CommunicationHidden
        } else {
            Regime::NetworkWall
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Regime::CommunicationHidden => "communication hidden",
            Regime::NetworkWall => "network wall",
        }
    }
}

/// Time of an all-gather or reduce-scatter of `bytes` over `world` ranks at
/// bus bandwidth `busbw_gbs` (GB/s, 1e9 bytes). Zero for one rank.
pub fn collective_ms(bytes: f64, world: usize, busbw_gbs: f64) -> f64 {
    if world <= 1 {
        return 0.0;
    }
    let moved = bytes * (world as f64 - 1.0) / world as f64;
    moved / (busbw_gbs * 1e9) * 1e3
}

/// Bus bandwidth achieved by a collective over `bytes` that took `ms`.
pub fn bus_bandwidth_gbs(bytes: f64, world: usize, ms: f64) -> Option<f64> {
    if world <= 1 || ms.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let moved = bytes * (world as f64 - 1.0) / world as f64;
    Some(moved / (ms * 1e-3) / 1e9)
}

/// Time of `flops` at `tflops` (1e12 FLOP/s).
pub fn compute_ms(flops: f64, tflops: f64) -> f64 {
    flops / (tflops * 1e12) * 1e3
}

/// FLOPs of one block's forward on `tokens`: two GEMMs of 2 * T * d * 4d.
pub fn block_forward_flops(tokens: usize, dim: usize) -> f64 {
    16.0 * tokens as f64 * (dim as f64) * (dim as f64)
}

/// FLOPs of one block's backward: four GEMMs (two weight, two input gradients).
pub fn block_backward_flops(tokens: usize, dim: usize) -> f64 {
    2.0 * block_forward_flops(tokens, dim)
}

/// FLOPs one rank does per training step (GEMMs only; elementwise work is
/// below 1% at the sizes fsdp-ref is meant for).
pub fn step_flops(plan: &Plan) -> f64 {
    plan.layers as f64
        * (block_forward_flops(plan.tokens_local, plan.dim)
            + block_backward_flops(plan.tokens_local, plan.dim))
}

/// The model's answer for one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analytic {
    pub tflops: f64,
    pub busbw_gbs: f64,
    pub t_fwd_compute_ms: f64,
    pub t_bwd_compute_ms: f64,
    pub t_all_gather_ms: f64,
    pub t_reduce_scatter_ms: f64,
    /// Forward: one all-gather per block against the block's forward.
    pub forward_regime: Regime,
    /// Backward: re-gather plus reduce-scatter against the block's backward.
    pub backward_regime: Regime,
    /// Whole layer: all communication against all compute.
    pub regime: Regime,
    /// Every collective and every GEMM in sequence.
    pub predicted_serial_ms: f64,
    /// Pipelined: each layer costs the longer of its compute and its communication.
    pub predicted_overlap_ms: f64,
    /// What overlap can hide at best: sum over layers of min(t_comm, t_compute).
    pub overlap_ceiling_ms: f64,
}

/// Evaluates the model for `plan` at the given rates.
pub fn model(plan: &Plan, tflops: f64, busbw_gbs: f64) -> Analytic {
    let n = plan.world;
    let layers = plan.layers as f64;
    let fwd = compute_ms(block_forward_flops(plan.tokens_local, plan.dim), tflops);
    let bwd = compute_ms(block_backward_flops(plan.tokens_local, plan.dim), tflops);
    let ag = collective_ms(plan.shard.gather_bytes() as f64, n, busbw_gbs);
    let rs = collective_ms(plan.shard.reduce_scatter_bytes() as f64, n, busbw_gbs);
    let comm_layer = 2.0 * ag + rs;
    let compute_layer = fwd + bwd;
    let serial = layers * (compute_layer + comm_layer);
    // Pipeline: the first gather of each phase is exposed, then each layer
    // costs the longer of its compute and the communication queued beside it,
    // and the last block's compute (and reduce-scatter) trail.
    let steady = (layers - 1.0).max(0.0);
    let overlap = if plan.prefetch == 0 {
        // Nothing is gathered ahead: gathers are exposed, reduce-scatters still overlap.
        layers * (ag + fwd) + layers * ag + steady * bwd.max(rs) + bwd + rs
    } else {
        ag + steady * fwd.max(ag) + fwd + ag + steady * bwd.max(ag + rs) + bwd + rs
    };
    Analytic {
        tflops,
        busbw_gbs,
        t_fwd_compute_ms: fwd,
        t_bwd_compute_ms: bwd,
        t_all_gather_ms: ag,
        t_reduce_scatter_ms: rs,
        forward_regime: Regime::classify(ag, fwd),
        backward_regime: Regime::classify(ag + rs, bwd),
        regime: Regime::classify(comm_layer, compute_layer),
        predicted_serial_ms: serial,
        predicted_overlap_ms: overlap,
        overlap_ceiling_ms: layers * (fwd.min(ag) + bwd.min(ag + rs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Mode, Optimizer};
    use crate::shard::ShardLayout;

    fn plan(world: usize, dim: usize, tokens_local: usize, layers: usize) -> Plan {
        Plan {
            mode: Mode::Overlap,
            optimizer: Optimizer::Adamw,
            world,
            layers,
            dim,
            prefetch: 1,
            tokens_local,
            tokens_global: tokens_local * world,
            shard: ShardLayout::new(dim, world).expect("divides"),
            steps: 1,
            warmup: 0,
            item_sync: false,
            sync_every: 0,
            straggler: None,
            lr: 1e-3,
            seed: 0,
        }
    }

    #[test]
    fn seed_article_llama_layer_is_behind_the_wall() {
        // 437 MB per layer at 100 GB/s over 128 ranks: ~4.4 ms (the article's number).
        let t_comm = collective_ms(437e6, 128, 100.0);
        assert!((t_comm - 4.34).abs() < 0.01, "{t_comm}");
        // 92 GFLOP at 330 TFLOP/s: ~0.28 ms per matmul.
        let t_mm = compute_ms(92e9, 330.0);
        assert!((t_mm - 0.279).abs() < 0.001, "{t_mm}");
        assert_eq!(Regime::classify(t_comm, 0.8), Regime::NetworkWall);
    }

    #[test]
    fn one_rank_moves_nothing() {
        assert_eq!(collective_ms(1e9, 1, 100.0), 0.0);
        assert_eq!(bus_bandwidth_gbs(1e9, 1, 1.0), None);
    }

    #[test]
    fn bus_bandwidth_inverts_collective_time() {
        let ms = collective_ms(268e6, 2, 350.0);
        let bw = bus_bandwidth_gbs(268e6, 2, ms).expect("two ranks");
        assert!((bw - 350.0).abs() < 1e-9);
    }

    #[test]
    fn flops_of_a_block() {
        // T=2, d=8: forward 16 * 2 * 64 = 2048, backward twice that.
        assert_eq!(block_forward_flops(2, 8), 2048.0);
        assert_eq!(block_backward_flops(2, 8), 4096.0);
        assert_eq!(step_flops(&plan(1, 8, 2, 3)), 3.0 * 6144.0);
    }

    #[test]
    fn big_batch_hides_communication_and_small_batch_hits_the_wall() {
        let big = model(&plan(2, 4096, 2048, 8), 600.0, 350.0);
        assert_eq!(big.forward_regime, Regime::CommunicationHidden);
        assert_eq!(big.regime, Regime::CommunicationHidden);
        assert!(big.predicted_overlap_ms < big.predicted_serial_ms);
        let small = model(&plan(2, 4096, 128, 8), 600.0, 350.0);
        assert_eq!(small.forward_regime, Regime::NetworkWall);
        assert_eq!(small.regime, Regime::NetworkWall);
        // Behind the wall the step cannot beat its communication time.
        let comm = 8.0 * (2.0 * small.t_all_gather_ms + small.t_reduce_scatter_ms);
        assert!(small.predicted_overlap_ms >= comm);
    }

    #[test]
    fn the_configs_of_scripts_gpu_fsdp_ref_sh() {
        // Modest: 2 ranks x 2048 tokens, d=4096, 8 blocks (the README's numbers).
        let a = model(&plan(2, 4096, 2048, 8), 600.0, 350.0);
        assert!((a.t_fwd_compute_ms - 0.916).abs() < 1e-3);
        assert!((a.t_all_gather_ms - 0.383).abs() < 1e-3);
        assert!((a.t_reduce_scatter_ms - 0.767).abs() < 1e-3);
        assert!(
            (a.predicted_serial_ms - 34.26).abs() < 0.01,
            "{}",
            a.predicted_serial_ms
        );
        assert!(
            (a.predicted_overlap_ms - 23.52).abs() < 0.01,
            "{}",
            a.predicted_overlap_ms
        );
        assert_eq!(a.regime, Regime::CommunicationHidden);
        // Wall: 2 ranks x 64 tokens: overlap can only hide the little compute there is.
        let w = model(&plan(2, 4096, 64, 8), 600.0, 350.0);
        assert_eq!(w.regime, Regime::NetworkWall);
        assert!(
            (w.predicted_serial_ms - 12.96).abs() < 0.01,
            "{}",
            w.predicted_serial_ms
        );
        assert!(
            (w.predicted_overlap_ms - 12.36).abs() < 0.01,
            "{}",
            w.predicted_overlap_ms
        );
    }

    #[test]
    fn prefetch_zero_exposes_the_gathers() {
        let mut p = plan(2, 4096, 2048, 8);
        let deep = model(&p, 600.0, 350.0);
        p.prefetch = 0;
        let none = model(&p, 600.0, 350.0);
        assert!(none.predicted_overlap_ms > deep.predicted_overlap_ms);
        assert!(none.predicted_overlap_ms < none.predicted_serial_ms);
    }

    #[test]
    fn overlap_gain_is_bounded_by_the_ceiling() {
        let a = model(&plan(2, 4096, 1024, 8), 600.0, 350.0);
        let gain = a.predicted_serial_ms - a.predicted_overlap_ms;
        assert!(gain > 0.0);
        assert!(
            gain <= a.overlap_ceiling_ms + 1e-9,
            "{gain} > {}",
            a.overlap_ceiling_ms
        );
    }
}
