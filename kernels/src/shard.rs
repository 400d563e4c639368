//! ZeRO-3 flat sharding of one MLP block.
//!
//! A block's parameters are one flat vector `[W1 (4d x d) | W2 (d x 4d)]` of
//! `8 d^2` elements, row-major. Rank `r` of `n` owns the contiguous range
//! `[r * 8d^2/n, (r+1) * 8d^2/n)`; an all-gather of the n shards rebuilds the
//! flat vector in rank order, and a reduce-scatter of the full gradient hands
//! rank r the sum of the same range. Shards may cut through W1 or straddle
//! W1 and W2: nothing but the flat offsets matters.

use serde::Serialize;

use crate::config::ConfigError;

/// Element counts of one block and of one rank's shard of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ShardLayout {
    pub dim: usize,
    pub world: usize,
    /// 8 d^2: W1 then W2.
    pub block_params: usize,
    /// Elements of W1 (4 d^2); W2 starts here.
    pub w1_params: usize,
    /// block_params / world.
    pub shard_params: usize,
}

impl ShardLayout {
    /// Rejects a world size that does not divide the block evenly.
    pub fn new(dim: usize, world: usize) -> Result<Self, ConfigError> {
        let block_params = 8 * dim * dim;
        if world == 0 || !block_params.is_multiple_of(world) {
            return Err(ConfigError::ParamsNotDivisible {
                params: block_params,
                world,
            });
        }
        Ok(Self {
            dim,
            world,
            block_params,
            w1_params: 4 * dim * dim,
            shard_params: block_params / world,
        })
    }

    /// First flat element owned by `rank`.
    pub fn shard_offset(&self, rank: usize) -> usize {
        rank * self.shard_params
    }

    /// Bytes of the gathered bf16 block (the all-gather's output).
    pub fn gather_bytes(&self) -> usize {
        self.block_params * 2
    }

    /// Bytes of the full fp32 gradient (the reduce-scatter's input).
    pub fn reduce_scatter_bytes(&self) -> usize {
        self.block_params * 4
    }

    /// Which rank owns flat element `index`.
    pub fn owner_of(&self, index: usize) -> usize {
        index / self.shard_params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_tile_the_block_exactly() {
        let s = ShardLayout::new(64, 4).expect("divides");
        assert_eq!(s.block_params, 32768);
        assert_eq!(s.shard_params, 8192);
        let covered: usize = (0..4).map(|_| s.shard_params).sum();
        assert_eq!(covered, s.block_params);
        assert_eq!(s.shard_offset(3) + s.shard_params, s.block_params);
        assert_eq!(s.owner_of(0), 0);
        assert_eq!(s.owner_of(8191), 0);
        assert_eq!(s.owner_of(8192), 1);
        assert_eq!(s.owner_of(s.block_params - 1), 3);
    }

    #[test]
    fn w2_starts_after_w1() {
        let s = ShardLayout::new(16, 2).expect("divides");
        assert_eq!(s.w1_params, 4 * 16 * 16);
        assert_eq!(s.block_params - s.w1_params, 16 * 4 * 16);
        // With two ranks, the split falls exactly on the W1/W2 boundary.
        assert_eq!(s.shard_offset(1), s.w1_params);
    }

    #[test]
    fn byte_counts() {
        let s = ShardLayout::new(4096, 2).expect("divides");
        assert_eq!(s.gather_bytes(), 8 * 4096 * 4096 * 2);
        assert_eq!(s.reduce_scatter_bytes(), 8 * 4096 * 4096 * 4);
    }

    #[test]
    fn rejects_uneven_world() {
        assert!(ShardLayout::new(8, 3).is_err());
        assert!(ShardLayout::new(8, 0).is_err());
        assert!(ShardLayout::new(24, 3).is_ok());
    }
}
