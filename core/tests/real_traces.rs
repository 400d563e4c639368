//! The analyses on the real H200 traces shipped in traces/ (recorded with
//! the collector): what we know is in them must be found.

use std::path::{Path, PathBuf};

use streamscope_core::analysis::{analyze, AnalysisOptions, WindowRule};
use streamscope_core::load::load_paths;

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

#[test]
fn fsdp_ref_planted_item_sync_is_found_in_every_step() {
    let t = load_paths(&[bundled("fsdp-ref-overlap-h200x2")]).expect("load");
    assert_eq!(t.processes().len(), 2);
    assert_eq!(t.dropped_records(), 0);
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in &r.ranks {
        let item = rank
            .syncs
            .iter()
            .find(|g| g.pattern == "item-like" && g.where_.contains("loss.item()"))
            .unwrap_or_else(|| panic!("rank {}: no item-like sync at loss.item()", rank.rank));
        // 3 warmup + 10 measured steps, one loss copy each (--item-sync):
        // 12 in the steady-state window, the warm-up step's listed apart.
        assert_eq!(item.count, 12);
        let startup: u64 = rank
            .startup_syncs
            .iter()
            .filter(|g| g.pattern == "item-like" && g.where_.contains("loss.item()"))
            .map(|g| g.count)
            .sum();
        assert_eq!(startup, 1);
        assert_eq!(item.per_step, Some(1.0));
        assert!(item.warning.is_some());
        // The planted sync is the only warning: the start-up syncs
        // (initialise, ncclCommInitRank) and the final synchronize are not.
        let warned: Vec<&str> = r
            .sync_warnings
            .iter()
            .filter(|w| w.rank == rank.rank)
            .map(|w| w.where_.as_str())
            .collect();
        assert_eq!(warned.len(), 1, "{warned:?}");
        // NVTX steps: the headline is the steady state (warm-up step
        // dropped), where prefetch overlap hides most of the communication.
        assert_eq!(rank.window.rule, WindowRule::SteadySteps);
        assert_eq!(rank.window.steps.len(), 12);
        assert!(
            rank.breakdown.overlap_pct.is_some_and(|p| p > 80.0),
            "{:?}",
            rank.breakdown.overlap_pct
        );
    }
}

#[test]
fn fsdp_ref_serial_overlaps_nothing() {
    let t = load_paths(&[bundled("fsdp-ref-serial-h200x2")]).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in &r.ranks {
        assert!(
            rank.breakdown.overlap_pct.is_some_and(|p| p < 1.0),
            "{:?}",
            rank.breakdown.overlap_pct
        );
        assert!(rank.breakdown.exposed_comm_us > 100_000.0);
    }
}

#[test]
fn torch_item_sync_points_at_the_python_line() {
    // The line of `loss.item()` in the example that was recorded.
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/torch_fsdp2.py"),
    )
    .expect("examples/torch_fsdp2.py");
    let n = src
        .lines()
        .position(|l| l.contains("= loss.item()"))
        .expect("a loss.item() line")
        + 1;
    let item_line = format!("torch_fsdp2.py:{n}");
    let t = load_paths(&[bundled("torch-fsdp2-h200x2")]).expect("load");
    assert_eq!(t.processes().len(), 2);
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in &r.ranks {
        let item = rank
            .syncs
            .iter()
            .find(|g| g.pattern == "item-like")
            .unwrap_or_else(|| panic!("rank {}: no item-like sync", rank.rank));
        assert!(
            item.python.contains(&item_line),
            "{} (want {item_line})",
            item.python
        );
        // 10 steps: 9 in the steady state, the warm-up step's apart.
        let all: u64 = rank
            .syncs
            .iter()
            .chain(&rank.startup_syncs)
            .filter(|g| g.pattern == "item-like")
            .map(|g| g.count)
            .sum();
        assert_eq!((item.count, all), (9, 10));
    }
    // NCCL all-gathers and reduce-scatters of FSDP2 are recognised.
    let names: Vec<&str> = r
        .collectives
        .iter()
        .map(|c| c.collective.as_str())
        .collect();
    assert!(
        names.contains(&"AllGather") && names.contains(&"ReduceScatter"),
        "{names:?}"
    );
}

#[test]
fn fsdp_ref_collectives_per_step_match_the_schedule() {
    // 8 blocks: each step all-gathers every block twice (forward, and again
    // in backward) and reduce-scatters every block's gradient once.
    let t = load_paths(&[bundled("fsdp-ref-overlap-h200x2")]).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in 0..2u32 {
        for step in 1..13 {
            let window = format!("step {step}");
            let count = |coll: &str| -> u64 {
                r.collectives_per_step
                    .iter()
                    .filter(|c| c.rank == rank && c.window == window && c.collective == coll)
                    .map(|c| c.count)
                    .sum()
            };
            assert_eq!(count("AllGather"), 16, "rank {rank} {window}");
            assert_eq!(count("ReduceScatter"), 8, "rank {rank} {window}");
        }
    }
}
