//! Opening trace files: each path loads on its own so that one bad file
//! shows its error while the others stay open; successes merge into one
//! multi-rank trace.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::error::LoadError;
use streamscope_core::load::expand;
use streamscope_core::Trace;

/// What happened to one path the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct FileStatus {
    pub path: PathBuf,
    /// Ranks (processes) and slices loaded, or the error.
    pub result: Result<(usize, usize), LoadError>,
}

/// Progress of a load, shared with the thread that runs it: files read so
/// far, bytes read (as each file is read), events parsed (a file's once it
/// is parsed), the stage, and a cancel request.
#[derive(Debug, Default)]
pub struct Progress {
    pub files_total: AtomicUsize,
    pub files_read: AtomicUsize,
    pub bytes_total: AtomicU64,
    pub bytes_read: AtomicU64,
    /// Slices and counter samples of the files read so far.
    pub events: AtomicU64,
    /// [`STAGE_READING`], [`STAGE_ANALYZING`] or [`STAGE_DONE`].
    pub stage: AtomicU8,
    /// Set to stop: no further file is started, and the result is dropped.
    pub cancel: AtomicBool,
}

pub const STAGE_READING: u8 = 0;
pub const STAGE_ANALYZING: u8 = 1;
pub const STAGE_DONE: u8 = 2;

impl Progress {
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Loads every path (file or directory; Perfetto or Kineto) and merges the
/// ones that load.
pub fn load_all(paths: &[PathBuf]) -> (Option<Trace>, Vec<FileStatus>) {
    load_all_with(paths, &Progress::default())
}

/// [`load_all`], reporting to `progress`: the trace files of every path are
/// read on all cores (as `streamscope_core::load::load_paths` does) and
/// appended in order; a path with a file that fails shows that error.
pub fn load_all_with(paths: &[PathBuf], progress: &Progress) -> (Option<Trace>, Vec<FileStatus>) {
    let expanded: Vec<Result<Vec<PathBuf>, LoadError>> = paths
        .iter()
        .map(|p| expand(p).map_err(LoadError::from))
        .collect();
    // (path index, file, size)
    let files: Vec<(usize, PathBuf, u64)> = expanded
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.iter().flatten().map(move |f| (i, f.clone())))
        .map(|(i, f)| {
            let size = std::fs::metadata(&f).map_or(0, |m| m.len());
            (i, f, size)
        })
        .collect();
    progress.files_total.store(files.len(), Ordering::Relaxed);
    progress
        .bytes_total
        .store(files.iter().map(|f| f.2).sum(), Ordering::Relaxed);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let mut loaded: Vec<(usize, Result<Trace, LoadError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        if progress.cancelled() {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((_, f, size)) = files.get(i) else {
                            break;
                        };
                        // Bytes count as they are read; the rest of the
                        // file's size (a file that failed early) at its end.
                        let counted = AtomicU64::new(0);
                        let on_read = |n: u64| {
                            counted.fetch_add(n, Ordering::Relaxed);
                            progress.bytes_read.fetch_add(n, Ordering::Relaxed);
                        };
                        let r = streamscope_core::load::load_file_with_progress(f, &on_read)
                            .map_err(LoadError::from);
                        if let Ok(t) = &r {
                            progress.events.fetch_add(
                                (t.slices().len() + t.counters().len()) as u64,
                                Ordering::Relaxed,
                            );
                        }
                        let rest = size.saturating_sub(counted.load(Ordering::Relaxed));
                        progress.bytes_read.fetch_add(rest, Ordering::Relaxed);
                        progress.files_read.fetch_add(1, Ordering::Relaxed);
                        out.push((i, r));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    loaded.sort_by_key(|(i, _)| *i);
    let mut per_path: Vec<Option<Result<Trace, LoadError>>> = expanded
        .into_iter()
        .map(|r| match r {
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .collect();
    let mut got = vec![false; files.len()];
    for (i, r) in loaded {
        got[i] = true;
        let Some(slot) = per_path.get_mut(files[i].0) else {
            continue;
        };
        match (slot.as_mut(), r) {
            (Some(Err(_)), _) => {}
            (_, Err(e)) => *slot = Some(Err(e)),
            (None, Ok(t)) => *slot = Some(Ok(t)),
            (Some(Ok(all)), Ok(t)) => all.append(t),
        }
    }
    // Files never read (cancelled, or a loader thread died) fail their path.
    for (i, (p, f, _)) in files.iter().enumerate() {
        if !got[i] {
            per_path[*p] = Some(Err(LoadError::NotRead(f.clone())));
        }
    }
    let mut merged: Option<Trace> = None;
    let mut status = Vec::new();
    for (p, r) in paths.iter().zip(per_path) {
        let r = r.unwrap_or_else(|| Ok(Trace::default()));
        match r {
            Ok(t) => {
                status.push(FileStatus {
                    path: p.clone(),
                    result: Ok((t.processes().len(), t.slices().len())),
                });
                match &mut merged {
                    Some(m) => m.append(t),
                    None => merged = Some(t),
                }
            }
            Err(e) => status.push(FileStatus {
                path: p.clone(),
                result: Err(e),
            }),
        }
    }
    (merged, status)
}

/// The bundled real trace: in `traces/`, the first entry (by name) whose
/// name contains "torch" (not "capture"), else "fsdp" — a file, or a folder of one run's
/// rank files — under the repo root found from the executable, from this
/// crate's source folder, or the current directory.
pub fn default_trace() -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.extend(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(Path::to_path_buf),
    );
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    roots.iter().find_map(|r| bundled_in(&r.join("traces")))
}

fn bundled_in(dir: &Path) -> Option<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() || p.is_dir())
        .collect();
    names.sort();
    let has = |p: &PathBuf, word: &str| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.to_lowercase().contains(word))
    };
    // A whole recording, not a set of on-demand captures.
    let torch = names
        .iter()
        .find(|p| has(p, "torch") && !has(p, "capture"))
        .cloned();
    torch.or_else(|| names.into_iter().find(|p| has(p, "fsdp")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_picks_first_matching_name() {
        let dir =
            std::env::temp_dir().join(format!("streamscope-viewer-bundled-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok();
        for n in ["b_torch.json", "a_other.json", "a_fsdp.pftrace"] {
            std::fs::write(dir.join(n), b"x").ok();
        }
        assert_eq!(bundled_in(&dir), Some(dir.join("b_torch.json")));
        std::fs::remove_file(dir.join("b_torch.json")).ok();
        assert_eq!(bundled_in(&dir), Some(dir.join("a_fsdp.pftrace")));
        // A folder of one run's rank files counts too.
        std::fs::create_dir_all(dir.join("torch-run")).ok();
        assert_eq!(bundled_in(&dir), Some(dir.join("torch-run")));
        assert_eq!(bundled_in(&dir.join("missing")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bad_file_reports_its_error() {
        let missing = PathBuf::from("/nonexistent/streamscope/trace.pftrace");
        let (trace, status) = load_all(std::slice::from_ref(&missing));
        assert!(trace.is_none());
        assert_eq!(status.len(), 1);
        let err = status[0].result.clone().expect_err("fails");
        assert!(matches!(err, LoadError::Trace(_)), "{err:?}");
        assert!(err.to_string().contains("trace.pftrace"), "{err}");
    }
}
