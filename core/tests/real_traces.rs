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
    assert_eq!(t.processes.len(), 2);
    assert_eq!(t.dropped_records(), 0);
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in &r.ranks {
        let item = rank
            .syncs
            .iter()
            .find(|g| g.pattern == "item-like" && g.where_.contains("loss.item()"))
            .unwrap_or_else(|| panic!("rank {}: no item-like sync at loss.item()", rank.rank));
        // 3 warmup + 10 measured steps, one loss copy each (--item-sync).
        assert_eq!(item.count, 13);
        assert!(item.warning.is_some());
        // Prefetch overlap hides most of the communication.
        assert!(
            rank.overlap_pct.is_some_and(|p| p > 50.0),
            "{:?}",
            rank.overlap_pct
        );
    }
}

#[test]
fn fsdp_ref_serial_overlaps_nothing() {
    let t = load_paths(&[bundled("fsdp-ref-serial-h200x2")]).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in &r.ranks {
        assert!(
            rank.overlap_pct.is_some_and(|p| p < 1.0),
            "{:?}",
            rank.overlap_pct
        );
        assert!(rank.exposed_comm_us > 100_000.0);
    }
}

#[test]
fn torch_item_sync_points_at_the_python_line() {
    let t = load_paths(&[bundled("torch-fsdp2-h200x2")]).expect("load");
    assert_eq!(t.processes.len(), 2);
    let r = analyze(&t, &AnalysisOptions::default());
    for rank in &r.ranks {
        let item = rank
            .syncs
            .iter()
            .find(|g| g.pattern == "item-like")
            .unwrap_or_else(|| panic!("rank {}: no item-like sync", rank.rank));
        assert!(item.python.contains("torch_fsdp2.py:74"), "{}", item.python);
        assert_eq!(item.count, 10);
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
