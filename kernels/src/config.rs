//! Command-line options and their validation into a [`Plan`]: the sizes each
//! rank works with. Pure arithmetic, tested without a GPU.

use clap::{Parser, ValueEnum};
use serde::Serialize;

use crate::shard::ShardLayout;

/// How the step is scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// All-gathers and reduce-scatters on a communication stream, overlapped
    /// with compute; CUDA events are the only dependencies.
    Overlap,
    /// Everything on one stream: the non-overlapped baseline.
    Serial,
}

/// Optimizer run on the fp32 master shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    Adamw,
    Sgd,
}

/// fsdp-ref: a reference ZeRO-3/FSDP training step (MLP blocks, bf16 compute,
/// fp32 master shards) whose communication and synchronization are known.
#[derive(Parser, Debug, Clone)]
#[command(name = "fsdp-ref", version)]
pub struct Args {
    /// overlap: collectives on their own stream; serial: one stream.
    #[arg(long, value_enum, default_value_t = Mode::Overlap)]
    pub mode: Mode,
    /// Blocks whose all-gather is issued ahead of the block computing (0: none).
    #[arg(long, default_value_t = 1)]
    pub prefetch: usize,
    /// Number of MLP blocks (d -> 4d -> d).
    #[arg(long, default_value_t = 8)]
    pub layers: usize,
    /// Model width d.
    #[arg(long, default_value_t = 4096)]
    pub dim: usize,
    /// Global batch in sequences, split evenly across ranks.
    #[arg(long, default_value_t = 4)]
    pub batch: usize,
    /// Tokens per sequence.
    #[arg(long, default_value_t = 1024)]
    pub seq: usize,
    /// Measured steps.
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Unmeasured steps run first.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Copy the loss to the host every step, as loss.item() does.
    #[arg(long)]
    pub item_sync: bool,
    /// Plant a compute-stream synchronize after every N-th forward block (0: never).
    #[arg(long, default_value_t = 0)]
    pub sync_every: usize,
    /// RANK:MS: that rank sleeps MS milliseconds on the host before it
    /// issues each all-gather: a straggler whose delay is known.
    #[arg(long, value_name = "RANK:MS", value_parser = parse_straggler)]
    pub straggler: Option<(usize, f64)>,
    /// Optimizer on the fp32 shards.
    #[arg(long, value_enum, default_value_t = Optimizer::Adamw)]
    pub optimizer: Optimizer,
    /// Learning rate. AdamW moves every weight by about lr per step whatever
    /// its gradient, and the blocks have no normalization, so 1e-3 made the
    /// loss diverge on the H200 runs (3 -> 5e17 in 13 steps at d=4096).
    /// 1e-5 is the default.
    #[arg(long, default_value_t = 1e-5)]
    pub lr: f32,
    /// Seed of parameters, inputs and targets (identical for any world size).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Single-process mode: use the first N visible GPUs (default: all).
    #[arg(long)]
    pub gpus: Option<usize>,
    /// Print one JSON line instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Analytic model: achieved bf16 GEMM rate in TFLOP/s.
    #[arg(long, default_value_t = 600.0)]
    pub model_tflops: f64,
    /// Analytic model: NCCL bus bandwidth in GB/s (NVLink H200: ~350).
    #[arg(long, default_value_t = 350.0)]
    pub model_busbw_gbs: f64,
    /// Dense bf16 peak for MFU (H200 SXM spec: 989 TFLOP/s).
    #[arg(long, default_value_t = 989.0)]
    pub peak_tflops: f64,
    /// Multi-process mode: seconds to wait for every rank at the rendezvous.
    #[arg(long, default_value_t = 120)]
    pub rendezvous_timeout_s: u64,
    /// Whole-run watchdog: exit non-zero after this many seconds (a peer that
    /// died inside a collective would otherwise hang the rank forever).
    #[arg(long, default_value_t = 900)]
    pub timeout_s: u64,
}

/// A rejected configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--{name} must be at least {min} (got {got})")]
    TooSmall {
        name: &'static str,
        min: usize,
        got: usize,
    },
    #[error("--dim {dim} must be a multiple of 8 (bf16 tensor-core GEMM alignment)")]
    DimAlignment { dim: usize },
    #[error(
        "block parameters 8*dim^2 = {params} do not divide by the world size {world} \
         (ZeRO-3 shards each block's flat parameters evenly)"
    )]
    ParamsNotDivisible { params: usize, world: usize },
    #[error("global tokens batch*seq = {tokens} do not divide by the world size {world}")]
    TokensNotDivisible { tokens: usize, world: usize },
    #[error("--prefetch {prefetch} exceeds --layers {layers}")]
    PrefetchTooDeep { prefetch: usize, layers: usize },
    #[error("{what} = {value} exceeds the 32-bit limit of cuBLAS/NCCL counts")]
    TooLarge { what: &'static str, value: usize },
    #[error("{name} must be a positive finite number (got {got})")]
    NotPositive { name: &'static str, got: String },
    #[error("--straggler names rank {rank}, but the world has {world} rank(s)")]
    StragglerRank { rank: usize, world: usize },
}

/// The validated sizes one rank works with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub mode: Mode,
    pub optimizer: Optimizer,
    pub world: usize,
    pub layers: usize,
    pub dim: usize,
    pub prefetch: usize,
    /// Tokens this rank computes per step (batch * seq / world).
    pub tokens_local: usize,
    /// Tokens of the whole step across ranks.
    pub tokens_global: usize,
    pub shard: ShardLayout,
    pub steps: usize,
    pub warmup: usize,
    pub item_sync: bool,
    pub sync_every: usize,
    /// (rank, ms): that rank sleeps ms on the host before each all-gather.
    pub straggler: Option<(usize, f64)>,
    pub lr: f32,
    pub seed: u64,
}

impl Plan {
    /// Buffers of gathered block weights: the one computing plus `prefetch` ahead.
    /// Serial mode needs one.
    pub fn gather_slots(&self) -> usize {
        match self.mode {
            Mode::Serial => 1,
            Mode::Overlap => self.prefetch + 1,
        }
    }

    /// Full-size gradient buffers: two, so block l's reduce-scatter can run
    /// while block l-1 writes its gradient. Serial mode needs one.
    pub fn grad_slots(&self) -> usize {
        match self.mode {
            Mode::Serial => 1,
            Mode::Overlap => 2,
        }
    }
}

impl Plan {
    /// Device bytes one rank allocates (buffers only; cuBLAS and NCCL add their own).
    pub fn device_bytes(&self) -> usize {
        let shard = self.shard.shard_params;
        let f32_shards = match self.optimizer {
            Optimizer::Adamw => 4, // master, grad, m, v
            Optimizer::Sgd => 3,   // master, grad, momentum
        };
        let per_layer_state = shard * (4 * f32_shards + 2);
        let gathered = self.gather_slots() * self.shard.gather_bytes();
        let grads = self.grad_slots() * self.shard.reduce_scatter_bytes();
        let td = self.tokens_local * self.dim * 2;
        let th = self.tokens_local * 4 * self.dim * 2;
        let activations = (self.layers + 1) * td + self.layers * 2 * th + 2 * td + th;
        self.layers * per_layer_state + gathered + grads + activations
    }
}

/// "RANK:MS", MS a finite number of milliseconds >= 0.
pub fn parse_straggler(s: &str) -> Result<(usize, f64), String> {
    let (r, ms) = s
        .split_once(':')
        .ok_or_else(|| format!("expected RANK:MS, got {s:?}"))?;
    let rank = r
        .trim()
        .parse::<usize>()
        .map_err(|e| format!("bad rank {r:?}: {e}"))?;
    let ms = ms
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|m| m.is_finite() && *m >= 0.0)
        .ok_or_else(|| format!("bad milliseconds {ms:?}: a number >= 0"))?;
    Ok((rank, ms))
}

fn at_least(name: &'static str, got: usize, min: usize) -> Result<(), ConfigError> {
    if got < min {
        return Err(ConfigError::TooSmall { name, min, got });
    }
    Ok(())
}

fn positive(name: &'static str, v: f64) -> Result<(), ConfigError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(ConfigError::NotPositive {
            name,
            got: v.to_string(),
        });
    }
    Ok(())
}

/// Checks `args` for a world of `world` ranks and derives the per-rank sizes.
pub fn plan(args: &Args, world: usize) -> Result<Plan, ConfigError> {
    at_least("world size", world, 1)?;
    at_least("layers", args.layers, 1)?;
    at_least("dim", args.dim, 8)?;
    at_least("batch", args.batch, 1)?;
    at_least("seq", args.seq, 1)?;
    at_least("steps", args.steps, 1)?;
    positive("--lr", args.lr as f64)?;
    positive("--model-tflops", args.model_tflops)?;
    positive("--model-busbw-gbs", args.model_busbw_gbs)?;
    positive("--peak-tflops", args.peak_tflops)?;
    if !args.dim.is_multiple_of(8) {
        return Err(ConfigError::DimAlignment { dim: args.dim });
    }
    if let Some((rank, _)) = args.straggler {
        if rank >= world {
            return Err(ConfigError::StragglerRank { rank, world });
        }
    }
    if args.prefetch > args.layers {
        return Err(ConfigError::PrefetchTooDeep {
            prefetch: args.prefetch,
            layers: args.layers,
        });
    }
    let shard = ShardLayout::new(args.dim, world)?;
    let tokens_global = args.batch * args.seq;
    if !tokens_global.is_multiple_of(world) {
        return Err(ConfigError::TokensNotDivisible {
            tokens: tokens_global,
            world,
        });
    }
    let tokens_local = tokens_global / world;
    let limit = i32::MAX as usize;
    let biggest = tokens_local * 4 * args.dim;
    if biggest > limit {
        return Err(ConfigError::TooLarge {
            what: "tokens_local*4*dim",
            value: biggest,
        });
    }
    if shard.block_params > limit {
        return Err(ConfigError::TooLarge {
            what: "8*dim^2",
            value: shard.block_params,
        });
    }
    Ok(Plan {
        mode: args.mode,
        optimizer: args.optimizer,
        world,
        layers: args.layers,
        dim: args.dim,
        prefetch: args.prefetch,
        tokens_local,
        tokens_global,
        shard,
        steps: args.steps,
        warmup: args.warmup,
        item_sync: args.item_sync,
        sync_every: args.sync_every,
        straggler: args.straggler,
        lr: args.lr,
        seed: args.seed,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut v = vec!["fsdp-ref"];
        v.extend_from_slice(extra);
        Args::try_parse_from(v).expect("test arguments parse")
    }

    #[test]
    fn straggler_is_parsed_and_checked_against_the_world() {
        let p = plan(&args(&["--straggler", "1:5.5"]), 2).expect("valid");
        assert_eq!(p.straggler, Some((1, 5.5)));
        assert_eq!(
            plan(&args(&["--straggler", "2:5"]), 2),
            Err(ConfigError::StragglerRank { rank: 2, world: 2 })
        );
        for bad in ["1", "x:5", "1:-2", "1:nan"] {
            assert!(parse_straggler(bad).is_err(), "{bad}");
        }
        assert_eq!(plan(&args(&[]), 2).expect("valid").straggler, None);
    }

    #[test]
    fn defaults_plan_for_two_ranks() {
        let p = plan(&args(&[]), 2).expect("defaults are valid");
        assert_eq!(p.tokens_global, 4 * 1024);
        assert_eq!(p.tokens_local, 2048);
        assert_eq!(p.shard.shard_params, 8 * 4096 * 4096 / 2);
        assert_eq!(p.gather_slots(), 2);
        assert_eq!(p.grad_slots(), 2);
    }

    #[test]
    fn device_bytes_counts_every_buffer() {
        // d=8, 1 rank, 2 tokens, 1 layer, AdamW, prefetch 1 (2 gather slots, 2 grad slots).
        let p = plan(
            &args(&["--dim", "8", "--batch", "1", "--seq", "2", "--layers", "1"]),
            1,
        )
        .expect("valid");
        let shard = 512;
        let state = shard * (4 * 4 + 2);
        let gathered = 2 * 512 * 2;
        let grads = 2 * 512 * 4;
        let td = 2 * 8 * 2;
        let th = 2 * 32 * 2;
        let act = 2 * td + 2 * th + 2 * td + th;
        assert_eq!(p.device_bytes(), state + gathered + grads + act);
    }

    #[test]
    fn serial_uses_single_buffers() {
        let p = plan(&args(&["--mode", "serial", "--prefetch", "3"]), 1).expect("valid");
        assert_eq!(p.gather_slots(), 1);
        assert_eq!(p.grad_slots(), 1);
    }

    #[test]
    fn rejects_tokens_not_divisible_by_world() {
        let e = plan(&args(&["--batch", "1", "--seq", "5"]), 2).unwrap_err();
        assert_eq!(
            e,
            ConfigError::TokensNotDivisible {
                tokens: 5,
                world: 2
            }
        );
        assert!(e.to_string().contains("world size 2"));
    }

    #[test]
    fn rejects_params_not_divisible_by_world() {
        // 8 * 8^2 = 512 is not a multiple of 3.
        let e = plan(&args(&["--dim", "8", "--batch", "3", "--seq", "1"]), 3).unwrap_err();
        assert_eq!(
            e,
            ConfigError::ParamsNotDivisible {
                params: 512,
                world: 3
            }
        );
    }

    #[test]
    fn rejects_unaligned_dim_and_zero_sizes() {
        assert_eq!(
            plan(&args(&["--dim", "12"]), 1).unwrap_err(),
            ConfigError::DimAlignment { dim: 12 }
        );
        assert!(matches!(
            plan(&args(&["--layers", "0"]), 1).unwrap_err(),
            ConfigError::TooSmall { name: "layers", .. }
        ));
        assert!(matches!(
            plan(&args(&["--steps", "0"]), 1).unwrap_err(),
            ConfigError::TooSmall { name: "steps", .. }
        ));
    }

    #[test]
    fn rejects_prefetch_deeper_than_model() {
        let e = plan(&args(&["--layers", "2", "--prefetch", "3"]), 1).unwrap_err();
        assert_eq!(
            e,
            ConfigError::PrefetchTooDeep {
                prefetch: 3,
                layers: 2
            }
        );
    }

    #[test]
    fn rejects_counts_past_i32() {
        let e = plan(
            &args(&["--dim", "65536", "--batch", "64", "--seq", "1024"]),
            1,
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::TooLarge { .. }));
    }

    #[test]
    fn rejects_bad_mode_at_parse_time() {
        assert!(Args::try_parse_from(["fsdp-ref", "--mode", "sideways"]).is_err());
    }

    #[test]
    fn rejects_non_positive_rates() {
        let e = plan(&args(&["--model-busbw-gbs", "0"]), 1).unwrap_err();
        assert!(matches!(e, ConfigError::NotPositive { .. }));
    }
}
