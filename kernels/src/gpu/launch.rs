//! Starting ranks: every visible GPU of one process (a thread per GPU, each
//! joining the communicator), or one process per GPU under torchrun/SLURM.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use cudarc::driver::CudaContext;

use super::error::{Context, GpuError};
use super::libs::check_libraries;
use super::nccl::unique_id;
use super::trainer::{RankResult, RankSetup, Trainer};
use crate::config::Plan;
use crate::rendezvous::{self, ProcessLaunch};

/// Number of visible CUDA devices (an error when there are none).
pub fn device_count() -> Result<usize, GpuError> {
    check_libraries()?;
    let n = CudaContext::device_count().ctx("counting CUDA devices")?;
    if n <= 0 {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "unset".into());
        return Err(GpuError::NoDevice {
            detail: format!("CUDA_VISIBLE_DEVICES={visible}"),
        });
    }
    Ok(n as usize)
}

/// Runs one rank to completion on this thread.
pub fn run_rank(plan: &Plan, setup: &RankSetup) -> Result<RankResult, GpuError> {
    Trainer::new(plan, setup)?.run()
}

/// Single process, `plan.world` GPUs (ordinals 0..world), one thread each.
/// Returns every rank's result, by rank. On the first failure it returns
/// that error at once: ranks still waiting inside NCCL for the failed one
/// are left behind, and the caller is expected to exit the process.
pub fn run_local(plan: &Plan) -> Result<Vec<RankResult>, GpuError> {
    let count = device_count()?;
    if plan.world > count {
        return Err(GpuError::Invalid(format!(
            "asked for {} GPUs but {count} are visible",
            plan.world
        )));
    }
    let id = unique_id()?;
    let (tx, rx) = mpsc::channel();
    for rank in 0..plan.world {
        let tx = tx.clone();
        let plan = plan.clone();
        let setup = RankSetup {
            ordinal: rank,
            rank,
            world: plan.world,
            nccl_id: id,
        };
        thread::Builder::new()
            .name(format!("rank-{rank}"))
            .spawn(move || {
                let r = run_rank(&plan, &setup);
                let _ = tx.send((rank, r));
            })
            .map_err(|e| {
                GpuError::Invalid(format!("cannot start the thread of rank {rank}: {e}"))
            })?;
    }
    drop(tx);
    let mut results: Vec<Option<RankResult>> = (0..plan.world).map(|_| None).collect();
    for _ in 0..plan.world {
        let (rank, r) = rx
            .recv()
            .map_err(|_| GpuError::Invalid("a rank thread ended without reporting".into()))?;
        match r {
            Ok(res) => results[rank] = Some(res),
            Err(e) => return Err(GpuError::Invalid(format!("rank {rank}: {e}"))),
        }
    }
    Ok(results.into_iter().flatten().collect())
}

/// One process of a multi-process job: rendezvous for the NCCL id, then run
/// this process's rank on GPU LOCAL_RANK.
pub fn run_process(
    plan: &Plan,
    launch: &ProcessLaunch,
    timeout: Duration,
) -> Result<RankResult, GpuError> {
    let count = device_count()?;
    if launch.local_rank >= count {
        return Err(GpuError::Invalid(format!(
            "LOCAL_RANK {} but only {count} GPUs are visible",
            launch.local_rank
        )));
    }
    let id = if launch.rank == 0 {
        let listener =
            rendezvous::listen(&launch.addr).map_err(|e| GpuError::Invalid(e.to_string()))?;
        let id = unique_id()?;
        rendezvous::serve(&listener, launch.world, &id, timeout)
            .map_err(|e| GpuError::Invalid(e.to_string()))?;
        id
    } else {
        rendezvous::fetch(&launch.addr, launch.rank, timeout)
            .map_err(|e| GpuError::Invalid(e.to_string()))?
    };
    let setup = RankSetup {
        ordinal: launch.local_rank,
        rank: launch.rank,
        world: launch.world,
        nccl_id: id,
    };
    run_rank(plan, &setup)
}
