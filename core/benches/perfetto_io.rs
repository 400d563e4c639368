//! Perfetto write/read throughput on a generated trace (a benchmark, not a
//! test): `cargo bench -p streamscope-core --bench perfetto_io [-- SLICES]`.
//!
//! Generates an FSDP-like trace (default 10 M slices), writes it to a file
//! with the streaming writer, reads it back with the streaming reader, and
//! prints slices/s for each plus the file size. Peak memory of a full load
//! is measured separately on the written file (see docs/PERFORMANCE.md).
//! With `write-only` among the arguments it writes the file once and stops
//! (the file the memory measurements of `info` and `view` load).

use std::time::Instant;

use streamscope_core::perfetto::{read_file, write_file};
use streamscope_core::synth::{fsdp_like, SynthOptions};

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let path = std::env::temp_dir().join("streamscope-bench.pftrace");
    let t0 = Instant::now();
    let trace = fsdp_like(&SynthOptions {
        ranks: 8,
        target_slices: n,
        layers: 16,
        item_sync: true,
        seed: 7,
    });
    let slices = trace.slices().len();
    println!(
        "generated {slices} slices in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    if std::env::args().any(|a| a == "write-only") {
        write_file(&trace, &path).expect("write");
        println!("wrote {}", path.display());
        return;
    }

    let mut write_s = Vec::new();
    let mut read_s = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        write_file(&trace, &path).expect("write");
        write_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let back = read_file(&path).expect("read");
        read_s.push(t.elapsed().as_secs_f64());
        assert_eq!(back.slices().len(), slices);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (w, r) = (median(&mut write_s), median(&mut read_s));
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "file: {} ({:.1} bytes/slice, {:.0} MB)",
        path.display(),
        bytes as f64 / slices as f64,
        bytes as f64 / 1e6
    );
    println!(
        "write: median {w:.2} s = {:.2} M slices/s",
        slices as f64 / w / 1e6
    );
    println!(
        "read:  median {r:.2} s = {:.2} M slices/s",
        slices as f64 / r / 1e6
    );
    println!(
        "(peak memory of a full load: /usr/bin/time -v target/release/streamscope info {})",
        path.display()
    );

    // `report` as users run it on a job: one file per rank (8 ranks), loaded
    // on all cores, then every analysis.
    let dir = std::env::temp_dir().join("streamscope-bench-ranks");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");
    let mut total = 0;
    for r in 0..8u32 {
        let mut b = fsdp_like(&SynthOptions {
            ranks: 1,
            target_slices: n / 8,
            layers: 16,
            item_sync: true,
            seed: 7 + r as u64,
        })
        .into_builder();
        b.processes_mut()[0].rank = Some(r);
        b.processes_mut()[0].world_size = Some(8);
        let t = b.finish();
        total += t.slices().len();
        write_file(&t, &dir.join(format!("rank-{r}.pftrace"))).expect("write rank");
    }
    let mut load_s = Vec::new();
    let mut analyze_s = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let trace =
            streamscope_core::load::load_paths(std::slice::from_ref(&dir)).expect("load ranks");
        load_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let report = streamscope_core::analysis::analyze(&trace, &Default::default());
        analyze_s.push(t.elapsed().as_secs_f64());
        assert_eq!(report.ranks.len(), 8);
    }
    let (l, a) = (median(&mut load_s), median(&mut analyze_s));
    println!(
        "report on {total} slices in 8 rank files ({}): load {l:.2} s + analyze {a:.2} s = {:.2} s",
        dir.display(),
        l + a
    );
}
