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
