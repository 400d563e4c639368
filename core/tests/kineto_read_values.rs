//! A Kineto file whose top-level value under a key the import reads is
//! padded past its bound is refused, not held (issue 32, item 4; the
//! values the import does not read: kineto_top_values.rs).

use std::io::Write;
use std::path::PathBuf;

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

/// A value the import reads (`deviceProperties`) padded past 16 MiB with
/// what is not whitespace: the read is refused with a line naming the file
/// and the key, on the gzip and the plain route, instead of holding it.
#[test]
fn a_huge_value_the_import_reads_is_refused() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-top-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut doc = br#"{"deviceProperties": ["#.to_vec();
    doc.extend(b"1,".repeat(12 << 20));
    doc.extend(format!(r#"1], "traceEvents": [{}]}}"#, event(0)).into_bytes());
    for gz in [false, true] {
        let path = dir.join(if gz { "props.json.gz" } else { "props.json" });
        let bytes = if gz { gzip(&doc) } else { doc.clone() };
        std::fs::write(&path, bytes).expect("write");
        let e = match streamscope_core::load::load_file(&path) {
            Ok(t) => panic!("gz {gz}: loaded {} slices", t.slices().len()),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("deviceProperties") && e.contains("16 MiB"),
            "gz {gz}: {e}"
        );
        assert!(
            e.contains(if gz { "props.json.gz" } else { "props.json" }),
            "gz {gz}: {e}"
        );
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
