//! A gzip Kineto file padded with whitespace is read in bounded memory
//! (issue 32, D5). Alone in its test binary: it reads this process's peak
//! resident memory, which other tests running beside it would raise.

use std::io::Write;
use std::path::PathBuf;

/// gzip of `bytes`, one member.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(bytes).expect("in memory");
    z.finish().expect("in memory")
}

/// This process's peak resident memory (kB), where Linux tells it.
fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn whitespace_padding_between_events_is_not_held() {
    const PAD_MIB: usize = 40;
    let event = move |i: u32| {
        format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}"#
        )
    };
    // Members of a multi-member gzip stream: the events, then PAD_MIB MiB
    // of blanks between the second and the third (a few hundred KB on disk).
    let mut gz = gzip(format!(r#"{{"traceEvents": [{}, {},"#, event(0), event(1)).as_bytes());
    let blank = gzip(&vec![b' '; 1 << 20]);
    for _ in 0..PAD_MIB {
        gz.extend_from_slice(&blank);
    }
    gz.extend_from_slice(&gzip(format!("\n{}]}}", event(2)).as_bytes()));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-padding-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path: PathBuf = dir.join("padded.json.gz");
    std::fs::write(&path, &gz).expect("write");
    let before = peak_rss_kb();
    let t = streamscope_core::load::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let after = peak_rss_kb();
    assert_eq!(t.slices().len(), 3);
    let grew = |a: Option<u64>, b: Option<u64>, what: &str| {
        if let (Some(a), Some(b)) = (a, b) {
            let grew_mib = b.saturating_sub(a) / 1024;
            assert!(
                grew_mib < (PAD_MIB as u64) / 3,
                "{what}: peak RSS grew {grew_mib} MiB reading {PAD_MIB} MiB of padding"
            );
        }
    };
    grew(before, after, "gzip");
    // Plain JSON through a FIFO (read whole, as a pipe is), written a MiB
    // at a time by another thread.
    let fifo = dir.join("padded.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let w = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&w)
            .expect("open for writing");
        f.write_all(format!(r#"{{"traceEvents": [{}, {},"#, event(0), event(1)).as_bytes())
            .expect("write");
        let blank = vec![b' '; 1 << 20];
        for _ in 0..PAD_MIB {
            f.write_all(&blank).expect("write");
        }
        f.write_all(format!("\n{}]}}", event(2)).as_bytes())
            .expect("write");
    });
    let before = peak_rss_kb();
    let t = streamscope_core::load::load_file(&fifo).unwrap_or_else(|e| panic!("{e}"));
    let after = peak_rss_kb();
    writer.join().expect("writer");
    assert_eq!(t.slices().len(), 3);
    grew(before, after, "FIFO");
    std::fs::remove_dir_all(&dir).ok();
}
