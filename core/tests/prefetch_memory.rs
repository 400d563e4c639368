//! What early prefetch costs in memory (issue 36 item 3): over the
//! all-gathers that finished before the next compute kernel, the bytes each
//! materialized times that slack. Checked on the bundled fsdp-ref trace
//! recorded with NCCL's profiler plugin, against the plugin's own byte
//! counts read independently from each operation's arguments.

use std::collections::HashMap;
use std::path::Path;

use streamscope_core::analysis::{analyze, AnalysisOptions};
use streamscope_core::ArgValue;

#[test]
fn held_early_byte_seconds_are_the_plugins_bytes_times_the_slack() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-nccl-h200x2");
    let t = streamscope_core::load::load_paths(&[dir]).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    let sl = t.slices();
    // Per process: kernel correlation -> bytes the all-gather materialized
    // (the plugin's bytes are one rank's part: times the ranks).
    let mut bytes: HashMap<(u32, u32), f64> = HashMap::new();
    for i in 0..sl.len() {
        let id = streamscope_core::SliceId::from_index(i);
        let args = t.args_of(id);
        let get = |k: &str| {
            args.iter()
                .find(|(n, _)| t.str(*n) == k)
                .and_then(|(_, v)| match v {
                    ArgValue::UInt(x) => Some(*x as f64),
                    ArgValue::Int(x) => Some(*x as f64),
                    ArgValue::Double(x) => Some(*x),
                    _ => None,
                })
        };
        let func = args
            .iter()
            .find(|(n, _)| t.str(*n) == "func")
            .map(|(_, v)| t.arg_value_string(v));
        if func.as_deref() != Some("AllGather") {
            continue;
        }
        if let (Some(kc), Some(b), Some(n)) =
            (get("kernel_correlation"), get("bytes"), get("nranks"))
        {
            let p = t.track(sl.track()[i]).process.get();
            bytes.insert((p, kc as u32), b * n);
        }
    }
    assert!(bytes.len() >= 400, "{} plugin all-gathers", bytes.len());
    for k in &r.ranks {
        let p = &k.prefetch;
        assert_eq!(p.sized, p.per_all_gather.len() as u64, "rank {}", k.rank);
        let want: f64 = p
            .per_all_gather
            .iter()
            .map(|&(s, slack_us)| {
                let c = sl.correlation()[s.index()];
                let b = bytes[&(k.process.get(), c)];
                b * slack_us * 1e-6
            })
            .sum();
        let got = p.held_early_byte_s.expect("sized");
        assert!(want > 0.0);
        assert!(
            (got - want).abs() <= want * 1e-9,
            "rank {}: {got} vs {want}",
            k.rank
        );
    }
    // Per step too, and the steps of the window sum to at most the rank's.
    let steps: Vec<_> = r.steps.iter().filter(|s| s.prefetch.sized > 0).collect();
    assert!(!steps.is_empty());
    assert!(steps
        .iter()
        .all(|s| s.prefetch.held_early_byte_s.is_some_and(|b| b >= 0.0)));
    // Without byte counts (no plugin, no record_param_comms): none.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-overlap-h200x2");
    let t = streamscope_core::load::load_paths(&[dir]).expect("load");
    let r = analyze(&t, &AnalysisOptions::default());
    assert!(r
        .ranks
        .iter()
        .all(|k| k.prefetch.sized == 0 && k.prefetch.held_early_byte_s.is_none()));
}

/// Per layer (issue 36 item 3): fsdp-ref gathers blocks 0..7 in forward,
/// then 7..0 in backward, one all-gather each, every step, each launched
/// inside an NVTX range naming its block. Grouped by position in the step,
/// the rows must name those blocks in that order, hold one all-gather per
/// step each, and add up to the rank's figures.
#[test]
fn per_layer_rows_follow_the_blocks_and_add_up_to_the_rank() {
    for (folder, plugin) in [
        ("fsdp-ref-nccl-h200x2", true),
        ("fsdp-ref-prefetch-h200x2/prefetch-0", false),
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../traces")
            .join(folder);
        let t = streamscope_core::load::load_paths(&[dir]).expect("load");
        let r = analyze(&t, &AnalysisOptions::default());
        for k in &r.ranks {
            let p = &k.prefetch;
            let layers = &p.per_layer;
            assert_eq!(layers.len(), 16, "{folder} rank {}", k.rank);
            let steps = r
                .steps
                .iter()
                .filter(|s| s.rank == k.rank && s.prefetch.all_gathers > 0)
                .count() as u64;
            for (pos, l) in layers.iter().enumerate() {
                assert_eq!(l.position as usize, pos);
                let block = if pos < 8 { pos } else { 15 - pos };
                let phase = if pos < 8 { "forward" } else { "backward" };
                let want = format!("all_gather {phase} block {block} (");
                let label = l.label.as_deref().unwrap_or("");
                assert!(
                    label.starts_with(&want),
                    "{folder} rank {} position {pos}: {label:?}",
                    k.rank
                );
                assert!(l.all_gathers >= 1 && l.all_gathers <= steps, "{folder}");
                assert_eq!(l.sized > 0, plugin, "{folder} position {pos}");
                assert_eq!(l.held_early_byte_s.is_some(), plugin);
            }
            let sum = |f: &dyn Fn(&streamscope_core::analysis::PrefetchLayer) -> u64| {
                layers.iter().map(f).sum::<u64>()
            };
            assert_eq!(sum(&|l| l.all_gathers), p.all_gathers, "{folder}");
            assert_eq!(sum(&|l| l.late), p.late, "{folder}");
            assert_eq!(sum(&|l| l.sized), p.sized, "{folder}");
            let late_us: f64 = layers.iter().map(|l| l.late_us).sum();
            assert!((late_us - p.late_us).abs() <= 1e-6 * p.late_us.max(1.0));
            if plugin {
                let held: f64 = layers.iter().filter_map(|l| l.held_early_byte_s).sum();
                let rank_held = p.held_early_byte_s.expect("sized");
                assert!(
                    (held - rank_held).abs() <= 1e-9 * rank_held,
                    "{held} vs {rank_held}"
                );
                // Every block is the same size: each row's bytes are one
                // block's parameters, gathered.
                let b0 = layers[0].bytes.expect("sized");
                assert!(layers.iter().all(|l| l.bytes == Some(b0)));
            } else {
                // Prefetch 0: each all-gather issued just before its block,
                // so nearly every one is late, at every position.
                assert!(
                    layers.iter().filter(|l| l.late == l.all_gathers).count() >= 14,
                    "{layers:?}"
                );
            }
        }
    }
}
