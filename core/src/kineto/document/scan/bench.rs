//! The fast reader against serde_json on df_index_resolver, in process:
//! `cargo test --release -p streamscope-core --lib
//! kineto::document::scan::bench -- --ignored --nocapture` (figures in
//! docs/PERFORMANCE.md, "Kineto import: the fast reader").

use std::io::Read;
use std::time::{Duration, Instant};

use super::super::{parse_document_partial, EventSink};
use super::*;

/// Counts events and args, so nothing is optimised away.
struct Count(usize);

impl<'de> EventSink<'de> for Count {
    fn event(&mut self, e: Event<'de>) {
        self.0 += 1 + e.args.map(|a| a.0.len()).unwrap_or(0);
    }
    fn malformed(&mut self) {}
}

/// Runs of each, the best kept (the machine is shared).
const RUNS: usize = 15;

#[test]
#[ignore]
fn fast_reader_against_serde_json() {
    let gz = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/hta/df_index_resolver/df_index_resolver.json.gz"),
    )
    .expect("trace");
    let mut text = Vec::new();
    flate2::bufread::MultiGzDecoder::new(&gz[..])
        .read_to_end(&mut text)
        .expect("inflate");
    let best = |f: &mut dyn FnMut() -> usize| {
        let mut best = Duration::MAX;
        let mut out = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            out = f();
            best = best.min(t.elapsed());
        }
        (best, out)
    };
    let (utf8, _) = best(&mut || simdutf8::basic::from_utf8(&text).map_or(0, str::len));
    let (fast, fast_count) = best(&mut || {
        let mut c = Count(0);
        parse_document(&text, &mut c).expect("fast");
        c.0
    });
    let (slow, slow_count) = best(&mut || {
        let mut c = Count(0);
        parse_document_partial(&text, &mut c).0.expect("serde_json");
        c.0
    });
    assert_eq!(fast_count, slow_count);
    // Reader and mapping on one thread (the one-pass import), and the
    // whole load of the gzip file (pieces on two threads).
    let path = std::path::Path::new("df_index_resolver.json");
    let (import, slices) = best(&mut || {
        crate::kineto::import::import(path, &text)
            .expect("import")
            .slices()
            .len()
    });
    let (load, _) = best(&mut || {
        crate::kineto::read_bytes(path, &gz)
            .expect("load")
            .slices()
            .len()
    });
    eprintln!("{slices} slices: one-pass import {import:.1?}; load of the gzip file {load:.1?}");
    let mb = text.len() as f64 / 1e6;
    let rate = |d: Duration| mb / d.as_secs_f64() / 1e3;
    eprintln!(
        "{mb:.1} MB: UTF-8 check {utf8:.1?}; fast reader {fast:.1?} ({:.2} GB/s); serde_json {slow:.1?} ({:.2} GB/s)",
        rate(fast),
        rate(slow)
    );
}
