//! Opening trace files: each path loads on its own so that one bad file
//! shows its error while the others stay open; successes merge into one
//! multi-rank trace.

use std::path::{Path, PathBuf};

use streamscope_core::Trace;

/// What happened to one path the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct FileStatus {
    pub path: PathBuf,
    /// Ranks (processes) and slices loaded, or the error.
    pub result: Result<(usize, usize), String>,
}

/// Loads every path (file or directory; Perfetto or Kineto) and merges the
/// ones that load.
pub fn load_all(paths: &[PathBuf]) -> (Option<Trace>, Vec<FileStatus>) {
    let mut merged: Option<Trace> = None;
    let mut status = Vec::new();
    for p in paths {
        match streamscope_core::load::load_paths(std::slice::from_ref(p)) {
            Ok(t) => {
                status.push(FileStatus {
                    path: p.clone(),
                    result: Ok((t.processes.len(), t.slices.len())),
                });
                match &mut merged {
                    Some(m) => m.append(t),
                    None => merged = Some(t),
                }
            }
            Err(e) => status.push(FileStatus {
                path: p.clone(),
                result: Err(e.to_string()),
            }),
        }
    }
    (merged, status)
}

/// The bundled real trace: in `traces/`, the first entry (by name) whose
/// name contains "torch", else "fsdp" — a file, or a folder of one run's
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
    let torch = names.iter().find(|p| has(p, "torch")).cloned();
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
        let err = status[0].result.clone().err().unwrap_or_default();
        assert!(err.contains("trace.pftrace"), "{err}");
    }
}
