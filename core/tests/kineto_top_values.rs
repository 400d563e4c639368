//! A Kineto file whose top level holds a huge value under a key the import
//! does not read (a string, an array, a number; before or after the
//! events) is read in bounded memory (issue 32, item 4). Alone in its test
//! binary: it reads this process's peak resident memory, which other tests
//! running beside it would raise.

use std::io::Write;
use std::path::PathBuf;

/// This process's peak resident memory (kB), where Linux tells it.
fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn event(i: u32) -> String {
    format!(
        r#"{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}"#
    )
}

/// gzip of `bytes`, one member.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).expect("in memory");
    z.finish().expect("in memory")
}

/// Writes the document `{"junk": <big string>, "traceEvents": [3 events],
/// "tail": [1, {"n": <big number>}]}`, `mib` MiB for each big value; as a
/// multi-member gzip stream when `gz` (each MiB compressed once).
fn write_doc(path: &PathBuf, mib: usize, gz: bool) {
    let parts: [Vec<u8>; 5] = [
        br#"{"schemaVersion": 1, "junk": ""#.to_vec(),
        vec![b'a'; 1 << 20],
        format!(
            r#"", "traceEvents": [{}, {}, {}], "tail": [1, {{"n": 1"#,
            event(0),
            event(1),
            event(2)
        )
        .into_bytes(),
        vec![b'7'; 1 << 20],
        br#"}], "baseTimeNanoseconds": 1000}"#.to_vec(),
    ];
    let enc = |b: &[u8]| if gz { gzip(b) } else { b.to_vec() };
    let parts: Vec<Vec<u8>> = parts.iter().map(|p| enc(p)).collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    for (i, p) in parts.iter().enumerate() {
        let times = if i % 2 == 1 { mib } else { 1 };
        for _ in 0..times {
            out.write_all(p).expect("write");
        }
    }
    out.flush().expect("flush");
}

#[test]
fn huge_values_outside_the_events_are_not_held() {
    const MIB: usize = 16;
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ss-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for gz in [true, false] {
        let path = dir.join(if gz { "top.json.gz" } else { "top.json" });
        write_doc(&path, MIB, gz);
        let before = peak_rss_kb();
        let t = streamscope_core::load::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let after = peak_rss_kb();
        assert_eq!(t.slices().len(), 3, "gz {gz}");
        // The time base after the huge values still applies.
        assert!(
            t.processes()[0].clock_snapshot.is_empty() || t.slices().start_ns()[0] > 0,
            "gz {gz}"
        );
        if let (Some(a), Some(b)) = (before, after) {
            let grew_mib = b.saturating_sub(a) / 1024;
            assert!(
                grew_mib < (2 * MIB as u64) / 3,
                "gz {gz}: peak RSS grew {grew_mib} MiB reading {} MiB of values the import does not read",
                2 * MIB
            );
        }
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
