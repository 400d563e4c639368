//! Golden outputs: what `streamscope report` prints for every folder of
//! traces/ (text, markdown and JSON), compared byte for byte against the
//! files in cli/tests/golden/.
//!
//! After a change that is meant to change the output, regenerate them all
//! with one command and review the diff:
//!
//!     UPDATE_GOLDEN=1 cargo test -p streamscope --test golden
//!
//! The binary runs as a user runs it (CARGO_BIN_EXE_streamscope), from the
//! repository root with the relative path `traces/NAME`, because a report
//! names the folder it was given. Nothing is normalised: the outputs hold no
//! absolute path of this checkout, no timing and no thread count (the same
//! bytes with RAYON_NUM_THREADS=1 or 7 and under `taskset -c 0`), so a
//! mismatch is a real change of output.
//!
//! Cases: each folder of traces/ in the three formats; a folder whose runs
//! lie in subfolders is refused by design, so its error (exit status and
//! stderr) is golden and each subfolder is reported as its own case under
//! golden/FOLDER/. Also `report --full` of the demo trace, and one
//! `compare` and one `whatif`. A case that writes to stderr or exits
//! non-zero has a `.stderr` golden; a golden with no case is an error
//! (stale), and UPDATE_GOLDEN=1 removes it. The cases run in parallel, as
//! many at once as the machine has cores.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// One run of the binary and the golden file its stdout goes to.
struct Case {
    /// Golden path relative to cli/tests/golden, e.g. `sync-zoo-h200.md`.
    golden: String,
    args: Vec<String>,
}

const FORMATS: [(&str, &str); 3] = [("text", "txt"), ("markdown", "md"), ("json", "json")];

/// The trace folders of traces/ (relative to the repository root) and the
/// golden stem of each: `traces/A` -> `A`, `traces/A/B` -> `A/B`; plus the
/// parents whose runs lie in subfolders.
fn folders() -> (Vec<(String, String)>, Vec<String>) {
    let mut runs = Vec::new();
    let mut parents = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(repo().join("traces"))
        .expect("traces/")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let dir = repo().join("traces").join(&name);
        let mut subs: Vec<String> = std::fs::read_dir(&dir)
            .expect("trace folder")
            .map(|e| e.expect("entry"))
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        subs.sort();
        if subs.is_empty() {
            runs.push((format!("traces/{name}"), name));
        } else {
            for s in subs {
                runs.push((format!("traces/{name}/{s}"), format!("{name}/{s}")));
            }
            parents.push(name);
        }
    }
    (runs, parents)
}

fn cases() -> Vec<Case> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let (runs, parents) = folders();
    let mut cases = Vec::new();
    for (path, stem) in &runs {
        for (format, ext) in FORMATS {
            cases.push(Case {
                golden: format!("{stem}.{ext}"),
                args: s(&["report", path, "--format", format]),
            });
        }
    }
    for p in &parents {
        cases.push(Case {
            golden: format!("{p}.txt"),
            args: s(&["report", &format!("traces/{p}")]),
        });
    }
    cases.push(Case {
        golden: "torch-fsdp2-h200x2.full.txt".into(),
        args: s(&["report", "--full", "traces/torch-fsdp2-h200x2"]),
    });
    cases.push(Case {
        golden: "compare.fsdp-ref-serial.fsdp-ref-overlap.txt".into(),
        args: s(&[
            "compare",
            "traces/fsdp-ref-serial-h200x2",
            "traces/fsdp-ref-overlap-h200x2",
        ]),
    });
    cases.push(Case {
        golden: "whatif.fsdp-ref-overlap-h200x2.comm-scale-2.txt".into(),
        args: s(&[
            "whatif",
            "traces/fsdp-ref-overlap-h200x2",
            "--comm-scale",
            "2",
        ]),
    });
    cases
}

/// The golden files a case produces: stdout when there is any, and
/// `.stderr` (exit status, then stderr) when it failed or warned.
fn run(case: &Case) -> Vec<(String, Vec<u8>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_streamscope"))
        .current_dir(repo())
        .args(&case.args)
        .output()
        .expect("runs");
    let mut files = Vec::new();
    if !out.stdout.is_empty() {
        files.push((case.golden.clone(), out.stdout));
    }
    if !out.status.success() || !out.stderr.is_empty() {
        let code = out
            .status
            .code()
            .map_or("killed by a signal".into(), |c| c.to_string());
        let mut e = format!("exit status: {code}\n").into_bytes();
        e.extend_from_slice(&out.stderr);
        files.push((format!("{}.stderr", case.golden), e));
    }
    files
}

/// Where `got` first differs from `want`: line number and both lines.
fn first_difference(want: &[u8], got: &[u8]) -> String {
    let (w, g) = (String::from_utf8_lossy(want), String::from_utf8_lossy(got));
    let mut wl = w.lines();
    let mut gl = g.lines();
    for n in 1.. {
        match (wl.next(), gl.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => break,
            (a, b) => {
                return format!(
                    "line {n}:\n    golden: {}\n    got:    {}",
                    a.unwrap_or("<end of file>"),
                    b.unwrap_or("<end of file>")
                )
            }
        }
    }
    "differs in line endings only".into()
}

/// Every file under `dir`, relative to it, with `/` separators.
fn existing(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let e = e.expect("entry");
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            existing(&e.path(), &format!("{name}/"), out);
        } else {
            out.insert(name);
        }
    }
}

#[test]
fn reports_match_the_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v != "0");
    let dir = golden_dir();
    let queue = Mutex::new(cases());
    let produced = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some(case) = queue.lock().expect("queue").pop() else {
                    break;
                };
                let files = run(&case);
                produced.lock().expect("results").extend(files);
            });
        }
    });
    let mut produced = produced.into_inner().expect("results");
    produced.sort();

    let mut problems = Vec::new();
    let mut on_disk = BTreeSet::new();
    existing(&dir, "", &mut on_disk);
    for (name, got) in &produced {
        let path = dir.join(name);
        on_disk.remove(name);
        let want = std::fs::read(&path).ok();
        if want.as_deref() == Some(got.as_slice()) {
            continue;
        }
        if update {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("golden dir");
            std::fs::write(&path, got).expect("write golden");
            eprintln!("updated {}", path.display());
        } else {
            match want {
                None => problems.push(format!("{name}: no golden file")),
                Some(w) => problems.push(format!("{name}: {}", first_difference(&w, got))),
            }
        }
    }
    for stale in &on_disk {
        if update {
            std::fs::remove_file(dir.join(stale)).expect("remove stale golden");
            eprintln!("removed {stale}");
        } else {
            problems.push(format!("{stale}: golden file with no case (stale)"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} golden file(s) differ from the output (cli/tests/golden; if the change is \
         meant, run `UPDATE_GOLDEN=1 cargo test -p streamscope --test golden` and review \
         the diff):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
