//! Stable-toolchain fuzzer for streamscope's readers.
//!
//! `streamscope-fuzz TARGET SECONDS OUT SEED_DIR...` (TARGET: `perfetto` or
//! `kineto`) mutates the seeds for SECONDS: bit flips, interesting bytes and
//! numbers, deleted / duplicated / inserted runs, truncation, splicing two
//! inputs, and (kineto) number-token swaps inside the JSON and gzip
//! wrapping. Every input goes through the reader (and, when it loads, the
//! Perfetto writer and back) under `catch_unwind`; an input that panics is
//! saved to OUT/crash-*. Inputs whose outcome is new (error kind, warning
//! kinds, size buckets) join the pool, a poor man's coverage signal.
//! Prints executions, pool size and crashes at the end.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use streamscope_core::synth::XorShift;
use streamscope_core::{analysis, kineto, perfetto, Trace};


const NUMBERS: &[&str] = &[
    "-1",
    "0",
    "-0.001",
    "1e300",
    "-1e300",
    "9223372036854775807",
    "-9223372036854775808",
    "9.2e15",
    "-9.2e15",
    "9223372036854775.807",
    "18446744073709551615",
    "NaN",
    "1e-400",
    "\"12\"",
    "null",
    "true",
    "[]",
    "{}",
    "4294967296",
    "-4294967297",
    "2147483648",
];

fn mutate(rng: &mut XorShift, input: &[u8], pool: &[Vec<u8>], json: bool) -> Vec<u8> {
    let mut b = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        if b.is_empty() {
            b.push(rng.next_u64() as u8);
        }
        let n = b.len();
        match rng.below(if json { 11 } else { 9 }) {
            0 => {
                let bit = rng.below(n * 8);
                b[bit / 8] ^= 1 << (bit % 8);
            }
            1 => {
                const BYTES: [u8; 10] = [0, 1, 0x7f, 0x80, 0xff, 0x0a, 0x08, b'{', b'"', b'-'];
                let i = rng.below(n);
                b[i] = BYTES[rng.below(BYTES.len())];
            }
            2 => {
                let i = rng.below(n);
                let len = 1 + rng.below((n - i).min(64));
                b.drain(i..i + len);
            }
            3 => {
                let i = rng.below(n);
                let len = 1 + rng.below((n - i).min(256));
                let run = b[i..i + len].to_vec();
                let at = rng.below(n + 1);
                b.splice(at..at, run);
            }
            4 => {
                let at = rng.below(n + 1);
                let k = 1 + rng.below(8);
                let ins: Vec<u8> = (0..k).map(|_| rng.next_u64() as u8).collect();
                b.splice(at..at, ins);
            }
            5 => b.truncate(rng.below(n)),
            6 => {
                if let Some(other) = pool.get(rng.below(pool.len())) {
                    if !other.is_empty() {
                        let cut = rng.below(n);
                        let from = rng.below(other.len());
                        b.truncate(cut);
                        b.extend_from_slice(&other[from..]);
                    }
                }
            }
            7 => {
                // A varint-ish run of 0xff (runaway lengths) or zeros.
                let at = rng.below(n);
                let v = if rng.below(2) == 0 { 0xff } else { 0 };
                let k = 1 + rng.below(12);
                for x in b.iter_mut().skip(at).take(k) {
                    *x = v;
                }
            }
            8 => {
                // Arithmetic on one byte.
                let i = rng.below(n);
                b[i] = b[i].wrapping_add((rng.below(33) as u8).wrapping_sub(16));
            }
            _ => {
                // Replace a number token in the JSON with an interesting one.
                let start = rng.below(n);
                let Some(off) = b[start..]
                    .iter()
                    .position(|c| c.is_ascii_digit() || *c == b'-')
                else {
                    continue;
                };
                let s = start + off;
                let e = s + b[s..]
                    .iter()
                    .position(|c| {
                        !(c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'e' | b'E' | b'+'))
                    })
                    .unwrap_or(n - s);
                let num = NUMBERS[rng.below(NUMBERS.len())].as_bytes();
                b.splice(s..e, num.iter().copied());
            }
        }
    }
    b
}

/// A coarse description of what the reader made of an input.
fn outcome(r: &Result<Trace, streamscope_core::TraceError>) -> String {
    match r {
        Err(e) => {
            let s = e.to_string();
            let kind: String = s
                .split(|c: char| c.is_ascii_digit())
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            format!("err:{kind}")
        }
        Ok(t) => {
            let mut w: Vec<String> = t
                .diagnostics()
                .iter()
                .map(|d| format!("{:?}", d.kind))
                .collect();
            w.sort();
            w.dedup();
            let b = |n: usize| (usize::BITS - n.leading_zeros()) as usize;
            format!(
                "ok:{}:{}:{}:{}:{}:{:?}",
                b(t.slices().len()),
                b(t.processes().len()),
                b(t.tracks().len()),
                b(t.counters().len()),
                b(t.flows().len()),
                w
            )
        }
    }
}

fn run_one(target: &str, data: &[u8]) -> String {
    let path = Path::new(if target == "perfetto" {
        "fuzz.pftrace"
    } else {
        "fuzz.json"
    });
    let r = if target == "perfetto" {
        perfetto::read_stream(path, data)
    } else {
        kineto::read_bytes(path, data)
    };
    if target != "perfetto" {
        // The lean import (`report`'s) loads whatever the full one loads,
        // with the same slices.
        let lean = kineto::read_bytes_keeping(path, data, kineto::KeepArgs::Analysis);
        if let Ok(t) = &r {
            let lean = lean.as_ref().expect("the lean import loads what the full one loads");
            assert_eq!(t.slices().len(), lean.slices().len(), "lean import: other slices");
        }
    }
    if let Ok(t) = &r {
        // What loads must also write and read back.
        if let Ok(bytes) = perfetto::write_trace(t, Vec::new()) {
            let _ = perfetto::read_stream(path, &bytes[..]);
        }
        let _ = t.time_span();
        // What `report` runs on what loads: the analysis, then the findings
        // with their what-if replays.
        let mut report = analysis::analyze(t, &analysis::AnalysisOptions::default());
        analysis::findings::attach(&mut report, Some(t));
    }
    outcome(&r)
}

/// Where the last panic happened (file:line, any thread), for the crash line.
static PANIC_AT: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = gz.write_all(data);
    gz.finish().unwrap_or_default()
}

/// Writes small generated seeds: Perfetto files from the synthetic
/// generator, and the Perfetto file read back as chrome-json.
fn write_seeds(dir: &Path) {
    use streamscope_core::synth::{fsdp_like, SynthOptions};
    let p = dir.join("perfetto");
    std::fs::create_dir_all(&p).ok();
    for (i, n) in [60usize, 400].iter().enumerate() {
        let t = fsdp_like(&SynthOptions {
            ranks: 1 + i as u32,
            target_slices: *n,
            seed: 7 + i as u64,
            ..Default::default()
        });
        if let Ok(b) = perfetto::write_trace(&t, Vec::new()) {
            let _ = std::fs::write(p.join(format!("synth-{n}.pftrace")), b);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "bench" {
        // Reader throughput on a generated trace (compare builds of the
        // reader under the same load): `bench SLICES`.
        use streamscope_core::synth::{fsdp_like, SynthOptions};
        let n: usize = args[2].parse().unwrap_or(1_000_000);
        let t = fsdp_like(&SynthOptions {
            ranks: 8,
            target_slices: n,
            layers: 16,
            item_sync: true,
            seed: 7,
        });
        let bytes = perfetto::write_trace(&t, Vec::new()).unwrap_or_default();
        for _ in 0..5 {
            let t0 = Instant::now();
            let back = perfetto::read_stream(Path::new("bench.pftrace"), &bytes[..]);
            let s = t0.elapsed().as_secs_f64();
            let k = back.map(|b| b.slices().len()).unwrap_or(0);
            println!("read {k} slices in {s:.3} s: {:.2} M/s", k as f64 / s / 1e6);
        }
        return;
    }
    if args.len() == 3 && args[1] == "seeds" {
        write_seeds(Path::new(&args[2]));
        return;
    }
    if args.len() < 5 {
        eprintln!("usage: streamscope-fuzz perfetto|kineto SECONDS OUT SEED_DIR...");
        std::process::exit(2);
    }
    let target = args[1].clone();
    let secs: u64 = args[2].parse().unwrap_or(60);
    let out = PathBuf::from(&args[3]);
    std::fs::create_dir_all(&out).ok();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    for dir in &args[4..] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            if let Ok(mut b) = std::fs::read(&f) {
                if target == "kineto" && b.starts_with(&[0x1f, 0x8b]) {
                    // Mutate the JSON text; gzip is re-applied at random.
                    let mut text = Vec::new();
                    let _ = std::io::Read::read_to_end(
                        &mut flate2::read::MultiGzDecoder::new(&b[..]),
                        &mut text,
                    );
                    b = text;
                }
                pool.push(b);
            }
        }
    }
    if pool.is_empty() {
        eprintln!("no seeds");
        std::process::exit(2);
    }
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64 ^ std::process::id() as u64);
    let mut rng = XorShift(seed | 1);
    // Silent panics; where each happened goes with its crash line.
    std::panic::set_hook(Box::new(|info| {
        if let Some(l) = info.location() {
            if let Ok(mut p) = PANIC_AT.lock() {
                *p = format!("{}:{}", l.file(), l.line());
            }
        }
    }));
    let mut seen: HashSet<String> = HashSet::new();
    let (mut execs, mut crashes) = (0u64, 0u64);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(secs);
    let json = target == "kineto";
    let max_pool = 4096;
    while Instant::now() < deadline {
        let base = rng.below(pool.len());
        let mut input = mutate(&mut rng, &pool[base], &pool, json);
        if input.len() > 16 << 20 {
            input.truncate(16 << 20);
        }
        let wire = if json && rng.below(8) == 0 {
            let mut g = gzip(&input);
            if rng.below(2) == 0 {
                let cut = rng.below(g.len());
                g.truncate(cut);
            }
            g
        } else {
            input.clone()
        };
        execs += 1;
        match std::panic::catch_unwind(|| run_one(&target, &wire)) {
            Ok(o) => {
                if seen.insert(o) && pool.len() < max_pool {
                    pool.push(input);
                }
            }
            Err(p) => {
                crashes += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let h = wire.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
                });
                let f = out.join(format!("crash-{h:016x}"));
                if !f.exists() {
                    let _ = std::fs::write(&f, &wire);
                    let at = PANIC_AT.lock().map(|p| p.clone()).unwrap_or_default();
                    eprintln!("crash: {} ({msg} at {at})", f.display());
                }
            }
        }
    }
    // Keep a few of the inputs that reached new outcomes (small ones,
    // spread over the run) as candidates for the committed corpus.
    let found: Vec<&Vec<u8>> = pool.iter().filter(|b| b.len() <= 32 << 10).collect();
    let step = (found.len() / 8).max(1);
    for (i, b) in found.iter().step_by(step).take(8).enumerate() {
        let _ = std::fs::write(out.join(format!("pool-{i}")), b);
    }
    println!(
        "{target}: {execs} execs in {:.0} s, pool {}, outcomes {}, crashes {crashes}",
        t0.elapsed().as_secs_f64(),
        pool.len(),
        seen.len()
    );
}
