//! The CUDA-graph recordings in traces/ (one H200, examples/graph_step.py;
//! traces/README.md): a training step captured whole in one graph and
//! replayed, the same model under torch.compile(mode="reduce-overhead"),
//! and eagerly. Steps found = replays, headline idle within 2 points of the
//! eager recording, median step within 5 % of the job's own GPU-clock
//! timing (job-timing.txt, printed by the job while it was recorded), graph
//! kernels carry their graph and the Python line that captured them, and a
//! `capture --steps 3` of the graph job holds about 3 steps.

use std::path::{Path, PathBuf};

use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::load::load_paths;
use streamscope_core::protocol::{GRAPH_ID_ARG, GRAPH_NODE_ARG};
use streamscope_core::*;

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

fn load(name: &str) -> Trace {
    load_paths(&[bundled(name)]).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The job's own median step (ms), from the JSON line it printed.
fn job_median_ms(name: &str) -> f64 {
    let p = bundled(name).join("job-timing.txt");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("job-timing.txt is JSON");
    v["median_step_ms"].as_f64().expect("median_step_ms")
}

/// The rank with GPU work (the compile job also ran a helper process).
fn rank(r: &Report) -> &streamscope_core::analysis::RankReport {
    assert_eq!(r.ranks.len(), 1, "one rank");
    &r.ranks[0]
}

fn idle_pct(r: &Report) -> f64 {
    rank(r).breakdown.idle_pct.expect("idle")
}

fn median_ms(r: &Report) -> f64 {
    r.median_step_us(rank(r).rank).expect("steps") / 1000.0
}

#[test]
fn graph_jobs_get_their_steps_idle_and_step_time_right() {
    let eager = analyze(&load("graph-eager-h200"), &AnalysisOptions::default());
    let eager_idle = idle_pct(&eager);
    for name in ["graph-step-h200", "graph-compile-h200", "graph-eager-h200"] {
        let r = analyze(&load(name), &AnalysisOptions::default());
        let k = rank(&r);
        let m = median_ms(&r);
        let job = job_median_ms(name);
        let off = 100.0 * (m - job).abs() / job;
        assert!(
            off < 5.0,
            "{name}: median step {m:.3} ms, the job's {job:.3} ms ({off:.1} % off)"
        );
        let idle = idle_pct(&r);
        assert!(
            (idle - eager_idle).abs() <= 2.0,
            "{name}: idle {idle:.2} %, eager {eager_idle:.2} % ({})",
            k.window.label
        );
        if name == "graph-step-h200" {
            assert_eq!(k.step_source, "graph-launch", "{name}");
            let replays = r
                .steps
                .iter()
                .filter(|s| s.source == "graph-launch")
                .count();
            assert!(
                replays.abs_diff(60) <= 2,
                "{name}: {replays} graph-launch steps for 60 replays"
            );
            // The headline covers replays only.
            assert!(k.window.steps.len() >= 55, "{}", k.window.label);
            let first = k.window.steps[0];
            let s = r
                .steps
                .iter()
                .find(|s| s.step == first)
                .expect("window step");
            assert_eq!(s.source, "graph-launch");
            assert_eq!(s.graph_launches, 1);
            assert!(s.graph_gpu_us > 10.0 * s.eager_gpu_us, "{s:?}");
        }
        if name == "graph-compile-h200" {
            // CUDA graph trees: a forward and a backward graph per step.
            let w = &k.window.steps;
            let launches: Vec<u32> = r
                .steps
                .iter()
                .filter(|s| w.contains(&s.step))
                .map(|s| s.graph_launches)
                .collect();
            assert!(launches.iter().all(|&n| n == 2), "{launches:?}");
        }
    }
}

#[test]
fn graph_kernels_carry_their_graph_node_and_capturing_line() {
    let t = load("graph-step-h200");
    let sl = t.slices();
    let (mut graph, mut with_line, mut lines) = (0, 0, std::collections::BTreeSet::new());
    for id in sl.ids() {
        if sl.kind()[id.index()] != SliceKind::Kernel || t.arg(id, GRAPH_ID_ARG).is_none() {
            continue;
        }
        graph += 1;
        assert!(t.arg(id, GRAPH_NODE_ARG).is_some());
        if let Some(l) = t.arg_string(id, "python") {
            with_line += 1;
            lines.insert(l);
        }
    }
    assert!(graph >= 60 * 100, "{graph} graph kernels");
    // Each captured launch read its Python line (the copy, forward,
    // backward and optimizer lines of the example).
    assert!(
        with_line * 10 >= graph * 9,
        "{with_line} of {graph} graph kernels name a line"
    );
    assert!(lines.len() >= 4, "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("graph_step.py")),
        "{lines:?}"
    );
}

#[test]
fn compiled_triton_kernels_name_their_inductor_source_line() {
    let t = load("graph-compile-h200");
    let sl = t.slices();
    let (mut triton, mut named) = (0, 0);
    for id in sl.ids() {
        if sl.kind()[id.index()] != SliceKind::Kernel
            || !t.str(sl.name()[id.index()]).starts_with("triton_")
        {
            continue;
        }
        triton += 1;
        // The reduce-overhead graphs were captured from Inductor's
        // generated wrapper: its file and line of each kernel's launch.
        if t.arg_string(id, "python")
            .is_some_and(|l| l.contains("torchinductor") && l.contains(".py:"))
        {
            named += 1;
        }
    }
    assert!(triton >= 60 * 10, "{triton} Triton kernels");
    assert!(
        named * 10 >= triton * 9,
        "{named} of {triton} name an Inductor source line"
    );
}

#[test]
fn a_capture_of_three_steps_holds_about_three() {
    let r = analyze(
        &load("graph-step-capture-h200"),
        &AnalysisOptions::default(),
    );
    let k = rank(&r);
    assert_eq!(k.step_source, "graph-launch");
    let n = r.steps.len();
    assert!((3..=5).contains(&n), "{n} steps in a 3-step capture");
}
