//! The what-if replay (docs/METRICS.md, "What-if") on the real H200 traces
//! in traces/ and on generated ones.

use std::path::{Path, PathBuf};

use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions, WhatIfReport};
use streamscope_core::load::load_paths;

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces")
}

/// Every trace folder under traces/: a folder with trace files directly in it.
fn trace_folders() -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(d)
            .expect("read traces/")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        let has_trace = entries.iter().any(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            p.is_file() && (n.contains(".pftrace") || n.ends_with(".json") || n.ends_with(".json.gz"))
        });
        if has_trace {
            out.push(d.to_path_buf());
        }
        for p in entries.iter().filter(|p| p.is_dir()) {
            walk(p, out);
        }
    }
    let mut out = Vec::new();
    walk(&traces_dir(), &mut out);
    out
}

fn run(folder: &Path, opts: &WhatIfOptions) -> Result<WhatIfReport, String> {
    let t = load_paths(&[folder.to_path_buf()]).expect("load");
    whatif(&t, opts)
}

#[test]
fn unchanged_replay_reproduces_every_step_of_every_trace() {
    let folders = trace_folders();
    assert!(folders.len() >= 7, "{folders:?}");
    for f in &folders {
        let r = run(f, &WhatIfOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(!r.ranks.is_empty(), "{}", f.display());
        for rank in &r.ranks {
            assert!(!rank.steps.is_empty());
            for s in &rank.steps {
                let err = (s.predicted_step_us - s.measured_step_us).abs() / s.measured_step_us;
                eprintln!("{} rank {} step {}: measured {:.1} predicted {:.1} path {:?}", f.display(), s.rank, s.step, s.measured_step_us, s.predicted_step_us, s.critical_path);
                assert!(
                    err <= 0.02,
                    "{} rank {} step {}: measured {:.1} µs, replayed {:.1} µs",
                    f.display(),
                    s.rank,
                    s.step,
                    s.measured_step_us,
                    s.predicted_step_us
                );
                assert!(s.replay_error_pct <= 2.0);
            }
        }
        assert!(r.consistency_max_error_pct <= 2.0);
        eprintln!("{}: notes {:?} nodes {}", f.display(), r.notes, r.graph_nodes);
    }
}
