//! Links and FIFOs among the inputs (issue 32): a link in an input folder
//! that leads nowhere is named, not silently skipped; a FIFO no process
//! writes is an error after a wait, not a hang.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use streamscope_core::diagnostic::Kind;
use streamscope_core::load::{load_file, load_paths};

fn dir(name: &str) -> PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ss-links-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

fn rank0() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/fsdp-ref-serial-h200x2/rank-0.pftrace.gz")
}

#[test]
fn dangling_and_looping_links_in_a_folder_are_named() {
    let d = dir("dangling");
    std::fs::copy(rank0(), d.join("rank-0.pftrace.gz")).expect("copy");
    std::os::unix::fs::symlink(d.join("gone.pftrace"), d.join("rank-1.pftrace")).expect("link");
    std::os::unix::fs::symlink(d.join("rank-3.json"), d.join("rank-2.json")).expect("link");
    std::os::unix::fs::symlink(d.join("rank-2.json"), d.join("rank-3.json")).expect("link");
    // Not a trace name: not a rank file, nothing to say.
    std::os::unix::fs::symlink(d.join("gone"), d.join("notes.txt")).expect("link");
    let t = load_paths(std::slice::from_ref(&d)).expect("rank 0 loads");
    let named: Vec<String> = t
        .diagnostics()
        .iter()
        .filter(|x| x.kind == Kind::UnreadableFile)
        .map(|x| x.to_string())
        .collect();
    assert_eq!(named.len(), 3, "{named:?}");
    for (n, f) in named
        .iter()
        .zip(["rank-1.pftrace", "rank-2.json", "rank-3.json"])
    {
        assert!(
            n.contains(f) && n.contains("symbolic link to nothing"),
            "{n}"
        );
    }
}

#[test]
fn a_fifo_without_a_writer_is_an_error_not_a_hang() {
    let d = dir("fifo");
    let p = d.join("rank-0.pftrace");
    let made = std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let t0 = Instant::now();
    let e = load_file(&p).expect_err("no writer");
    assert!(t0.elapsed() < Duration::from_secs(30));
    let msg = e.to_string();
    assert!(
        msg.contains("rank-0.pftrace") && msg.contains("no writer"),
        "{msg}"
    );
    // A writer that comes a little later is read whole.
    let w = p.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let bytes = std::fs::read(rank0()).expect("read");
        std::fs::write(&w, bytes).expect("write into the FIFO");
    });
    let t = load_file(&p).expect("loads");
    writer.join().expect("writer");
    let direct = load_file(&rank0()).expect("loads");
    assert_eq!(t.slices().len(), direct.slices().len());
}
