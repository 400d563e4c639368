//! Writes a generated job of many rank files, for the many-ranks benchmark
//! (docs/PERFORMANCE.md, "Many ranks"):
//!
//!     cargo run --release -p streamscope-core --features testing \
//!         --bin synth-ranks -- DIR RANKS SLICES_PER_RANK
//!
//! DIR/rank-NNNN.pftrace for each rank of a RANKS-rank FSDP-like job
//! (`synth::fsdp_like_rank`: the same collectives in the same order on
//! every rank, eight ranks per host), written on all cores.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use streamscope_core::synth::{fsdp_like_rank, SynthOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, ranks, slices] = args.as_slice() else {
        return Err("usage: synth-ranks DIR RANKS SLICES_PER_RANK".into());
    };
    let dir = PathBuf::from(dir);
    let ranks: u32 = ranks.parse()?;
    let slices: usize = slices.parse()?;
    std::fs::create_dir_all(&dir)?;
    let o = SynthOptions {
        ranks,
        target_slices: slices,
        ..Default::default()
    };
    let next = AtomicU32::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let total = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result<(), String> {
                    loop {
                        let r = next.fetch_add(1, Ordering::Relaxed);
                        if r >= ranks {
                            return Ok(());
                        }
                        let t = fsdp_like_rank(&o, r);
                        total.fetch_add(t.slices().len() as u64, Ordering::Relaxed);
                        let path = dir.join(format!("rank-{r:04}.pftrace"));
                        streamscope_core::perfetto::write_file(&t, &path)
                            .map_err(|e| e.to_string())?;
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "a writer panicked".to_string())?)
    })?;
    eprintln!(
        "wrote {ranks} rank files, {} slices, to {}",
        total.load(Ordering::Relaxed),
        dir.display()
    );
    Ok(())
}
