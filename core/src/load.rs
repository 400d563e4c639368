//! Opening TRACE arguments: a Perfetto file (.pftrace, .perfetto-trace or
//! any file starting with a TracePacket), a Kineto .json / .json.gz, or a
//! directory of them (one file per rank). Several arguments load into one
//! multi-rank [`Trace`].

use std::path::{Path, PathBuf};

use crate::error::{Result, TraceError};
use crate::model::Trace;

/// What a file holds, judged by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Perfetto,
    Kineto,
}

/// Loads every path (files or directories) into one trace. Files (one per
/// rank, as the collector writes them) are read on all cores and appended
/// in name order.
pub fn load_paths(paths: &[PathBuf]) -> Result<Trace> {
    let mut files = Vec::new();
    for p in paths {
        files.extend(expand(p)?);
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut loaded: Vec<(usize, Result<Trace>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        out.push((i, load_file(f)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    loaded.sort_by_key(|(i, _)| *i);
    let mut trace: Option<Trace> = None;
    for (_, t) in loaded {
        let t = t?;
        match &mut trace {
            None => trace = Some(t),
            Some(all) => all.append(t),
        }
    }
    Ok(trace.unwrap_or_default())
}

/// The trace files `path` stands for: itself, or a directory's trace files
/// in name order.
pub fn expand(path: &Path) -> Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path).map_err(|e| TraceError::io(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| TraceError::io(path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_trace_name(p))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(TraceError::EmptyDirectory {
            path: path.to_path_buf(),
        });
    }
    Ok(files)
}

fn is_trace_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [".pftrace", ".perfetto-trace", ".json", ".json.gz"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// Detects the format of one file from its first bytes.
pub fn sniff(path: &Path) -> Result<Format> {
    use std::io::Read;
    let mut head = Vec::with_capacity(64 << 10);
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    f.take(64 << 10)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    let first_non_space = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    match head.first() {
        None => Err(TraceError::Empty {
            path: path.to_path_buf(),
        }),
        Some(0x1f) if head.get(1) == Some(&0x8b) => Ok(Format::Kineto),
        // 0x0a is both Perfetto's packet tag and a newline: JSON that starts
        // with a newline is still JSON.
        Some(0x0a) if first_non_space == Some(b'{') && crate::kineto::looks_like_kineto(&head) => {
            Ok(Format::Kineto)
        }
        Some(0x0a) => Ok(Format::Perfetto),
        _ if first_non_space == Some(b'{') => Ok(Format::Kineto),
        _ => Err(TraceError::NotATrace {
            path: path.to_path_buf(),
            why: "neither a Perfetto protobuf trace nor Kineto JSON".into(),
        }),
    }
}

/// Loads one file, whatever its format.
pub fn load_file(path: &Path) -> Result<Trace> {
    match sniff(path)? {
        Format::Perfetto => crate::perfetto::read_file(path),
        Format::Kineto => crate::kineto::read_file(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_directory_and_unknown_bytes_are_named_errors() {
        let dir = std::env::temp_dir().join(format!("streamscope-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let e = load_paths(std::slice::from_ref(&dir)).expect_err("empty dir");
        assert!(matches!(e, TraceError::EmptyDirectory { .. }), "{e}");
        let f = dir.join("x.json");
        std::fs::write(&f, b"\x00\x01binary").expect("write");
        let e = load_paths(std::slice::from_ref(&f)).expect_err("binary");
        assert!(e.to_string().contains("x.json"), "{e}");
        std::fs::remove_file(&f).ok();
    }
}
