//! Opening TRACE arguments: a Perfetto file (.pftrace, .perfetto-trace or
//! any file starting with a TracePacket), a Kineto .json, either of them
//! gzip-compressed (.pftrace.gz, .json.gz, or any file starting with the
//! gzip magic), or a directory of them (one file per rank). Several
//! arguments load into one multi-rank [`Trace`].

use crate::diagnostic::{Diagnostic, Kind};
use std::path::{Path, PathBuf};

use crate::error::{Result, TraceError};
pub use crate::kineto::KeepArgs;
use crate::model::Trace;

mod fifo;
mod gzip;
pub use crate::output::{check_output, remove_temp_files, write_atomically};

/// What a file holds, judged by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A Perfetto protobuf trace.
    Perfetto,
    /// A Kineto (PyTorch profiler) JSON trace.
    Kineto,
}

/// One file to load, and whether it came from a directory listing (then a
/// bad or empty one is skipped with a warning rather than failing the load).
#[derive(Debug, Clone)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// Found in a directory listing (not named on its own).
    pub listed: bool,
}

/// What became of one file of a load.
pub(crate) enum Outcome {
    /// It loaded and holds events.
    Loaded(Box<Trace>),
    /// A listed file that is empty or does not load: skipped with this
    /// warning (and its error, when it failed).
    Skipped(Diagnostic, Option<TraceError>),
    /// A file named on its own that does not load: the load fails.
    Failed(TraceError),
}

/// The files `paths` stand for (directories expanded), in order; the same
/// file given twice is an error.
pub fn sources(paths: &[PathBuf]) -> Result<Vec<Source>> {
    sources_noted(paths).map(|(files, _)| files)
}

/// [`sources`], and what it says of them: per directory holding several
/// on-demand captures, which one it took ([`Kind::CaptureChosen`]).
pub(crate) fn sources_noted(paths: &[PathBuf]) -> Result<(Vec<Source>, Vec<Diagnostic>)> {
    let mut files: Vec<Source> = Vec::new();
    let mut notes: Vec<Diagnostic> = Vec::new();
    for p in paths {
        let listed = std::fs::metadata(p).is_ok_and(|m| m.is_dir());
        let mut found = expand(p)?;
        if listed {
            notes.extend(latest_capture(p, &mut found));
            notes.extend(broken_links(p));
        }
        files.extend(found.into_iter().map(|path| Source { path, listed }));
    }
    refuse_duplicates(&files)?;
    Ok((files, notes))
}

/// Judges the load of one file as [`load_paths`] does.
pub(crate) fn judge(f: &Source, t: Result<Trace>) -> Outcome {
    match t {
        Ok(t) if f.listed && t.slices().is_empty() && t.counters().is_empty() => Outcome::Skipped(
            Diagnostic::new(Kind::EmptyFile, 1, "holds no events (header only); skipped")
                .in_file(f.path.display()),
            None,
        ),
        Ok(t) => Outcome::Loaded(Box::new(t)),
        Err(e) if f.listed => {
            let kind = match e {
                TraceError::Empty { .. } => Kind::EmptyFile,
                _ => Kind::UnreadableFile,
            };
            // The error names the file first; the diagnostic holds it apart.
            let path = f.path.display().to_string();
            let text = e.to_string();
            let why = text.strip_prefix(&format!("{path}: ")).unwrap_or(&text);
            Outcome::Skipped(
                Diagnostic::new(kind, 1, format!("{why}; skipped")).in_file(path),
                Some(e),
            )
        }
        Err(e) => Outcome::Failed(e),
    }
}

/// The error when no file loaded: the first error met, else "no file
/// holds any events".
pub(crate) fn nothing_loaded(files: &[Source], first_error: Option<TraceError>) -> TraceError {
    match first_error {
        Some(e) => e,
        // Only empty or header-only files.
        None => TraceError::NotATrace {
            path: files.first().map(|f| f.path.clone()).unwrap_or_default(),
            why: "no file holds any events".into(),
        },
    }
}

/// Warnings for ranks claimed by two files: `ranks` holds (rank, file
/// index) of every process loaded, `path(i)` names file i.
pub(crate) fn duplicate_ranks(
    mut ranks: Vec<(u32, usize)>,
    path: &dyn Fn(usize) -> String,
) -> Vec<Diagnostic> {
    ranks.sort_unstable();
    let mut out = Vec::new();
    for w in ranks.windows(2) {
        if w[0].0 == w[1].0 && w[0].1 != w[1].1 {
            out.push(Diagnostic::new(
                Kind::DuplicateRank,
                1,
                format!(
                    "rank {} appears in both {} and {}: two runs mixed? both are shown",
                    w[0].0,
                    path(w[0].1),
                    path(w[1].1)
                ),
            ));
        }
    }
    out
}

/// Loads every path (files or directories) into one trace. Files (one per
/// rank, as the collector writes them) are read on all cores and appended
/// in name order.
///
/// A file named on its own must load. A file found in a directory that
/// fails to load, is empty or holds no events (a header only) is skipped
/// with a one-line warning naming it, so one bad rank does not cost the
/// others; if none loads, the first error is the error. The same file
/// given twice is an error; two files claiming one rank number get a
/// warning naming both.
pub fn load_paths(paths: &[PathBuf]) -> Result<Trace> {
    load_paths_keeping(paths, KeepArgs::All)
}

/// [`load_paths`], keeping the arguments of Kineto events that `keep`
/// says (`report` loads with [`KeepArgs::Analysis`]).
pub fn load_paths_keeping(paths: &[PathBuf], keep: KeepArgs) -> Result<Trace> {
    let (files, chosen) = sources_noted(paths)?;
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
                        out.push((i, load_file_keeping(&f.path, keep)));
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
    let mut skipped: Vec<Diagnostic> = Vec::new();
    let mut first_error: Option<TraceError> = None;
    // (rank, file) of every process loaded, to name ranks given twice.
    let mut ranks: Vec<(u32, usize)> = Vec::new();
    for (i, t) in loaded {
        let t = match judge(&files[i], t) {
            Outcome::Loaded(t) => *t,
            Outcome::Skipped(d, e) => {
                skipped.push(d);
                if let Some(e) = e {
                    first_error.get_or_insert(e);
                }
                continue;
            }
            Outcome::Failed(e) => return Err(e),
        };
        ranks.extend(t.processes().iter().filter_map(|p| p.rank).map(|r| (r, i)));
        match &mut trace {
            None => trace = Some(t),
            Some(all) => all.append(t),
        }
    }
    let Some(mut trace) = trace else {
        return Err(nothing_loaded(&files, first_error));
    };
    skipped.extend(duplicate_ranks(ranks, &|i| {
        files[i].path.display().to_string()
    }));
    // Load warnings first, in file order, then what was skipped.
    trace.add_diagnostics(skipped);
    trace.add_diagnostics(chosen);
    Ok(trace)
}

/// The same file (by its canonical path) given twice would show its ranks
/// twice: an error naming it.
fn refuse_duplicates(files: &[Source]) -> Result<()> {
    let mut seen: Vec<(PathBuf, &Path)> = Vec::with_capacity(files.len());
    for f in files {
        // Pipes and other unnamed inputs have no stable identity; a
        // canonical path is enough for files.
        let Ok(c) = std::fs::canonicalize(&f.path) else {
            continue;
        };
        if !std::fs::metadata(&c).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == c) {
            return Err(TraceError::NotATrace {
                path: f.path.clone(),
                why: format!(
                    "given twice (also as {}): its ranks would show twice",
                    first.display()
                ),
            });
        }
        seen.push((c, &f.path));
    }
    Ok(())
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
            subfolders: trace_subfolders(path),
        });
    }
    Ok(files)
}

/// The subfolders of `dir` (two levels down at most) that hold trace
/// files, in words for [`TraceError::EmptyDirectory`]; "" when none do.
fn trace_subfolders(dir: &Path) -> String {
    let holds = |d: &Path| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.path().is_file() && is_trace_name(&e.path()))
        })
    };
    let subdirs = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for sub in subdirs(dir) {
        if holds(&sub) {
            found.push(sub);
        } else {
            found.extend(subdirs(&sub).into_iter().filter(|s| holds(s)));
        }
    }
    let Some(first) = found.first() else {
        return String::new();
    };
    let names: Vec<String> = found
        .iter()
        .take(12)
        .map(|f| f.strip_prefix(dir).unwrap_or(f).display().to_string())
        .collect();
    format!(
        "; its subfolders hold traces, one run each: {}{} (name one, e.g. {})",
        names.join(", "),
        if found.len() > 12 { ", ..." } else { "" },
        first.display()
    )
}

/// A warning per trace-named symbolic link in `dir` that leads nowhere
/// (dangling, or a loop of links): skipped by [`expand`], but never
/// silently.
fn broken_links(dir: &Path) -> Vec<Diagnostic> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut links: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_trace_name(p))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
        .filter(|p| std::fs::metadata(p).is_err())
        .collect();
    links.sort();
    links
        .into_iter()
        .map(|p| {
            Diagnostic::new(
                Kind::UnreadableFile,
                1,
                "a symbolic link to nothing (or a loop of links); skipped",
            )
            .in_file(p.display())
        })
        .collect()
}

/// The capture number K of an on-demand capture file
/// (`rank-R.capture-K.pftrace[.gz]`, as `streamscope capture` names them).
pub(crate) fn capture_number(p: &Path) -> Option<u32> {
    let name = p.file_name()?.to_str()?;
    let (_, rest) = name.split_once(".capture-")?;
    let digits: &str = &rest[..rest.find(|c: char| !c.is_ascii_digit())?];
    digits.parse().ok()
}

/// A directory of an armed run holds one file per rank and capture: one
/// trace set per capture. Keeps the files of the latest capture (and files
/// that are no capture's) and says which were left out.
fn latest_capture(dir: &Path, files: &mut Vec<PathBuf>) -> Option<Diagnostic> {
    let mut ks: Vec<u32> = files.iter().filter_map(|f| capture_number(f)).collect();
    ks.sort_unstable();
    ks.dedup();
    let &latest = ks.last()?;
    if ks.len() < 2 {
        return None;
    }
    files.retain(|f| capture_number(f).is_none_or(|k| k == latest));
    let others: Vec<String> = ks[..ks.len() - 1].iter().map(u32::to_string).collect();
    Some(Diagnostic::new(
        Kind::CaptureChosen,
        1,
        format!(
            "holds captures {} and {latest}: capture {latest} loaded; for another, name its files ({}/rank-*.capture-{}.pftrace*)",
            others.join(", "),
            dir.display(),
            others[0]
        ),
    ).in_file(dir.display()))
}

/// Whether a file name is one a directory load picks up.
pub fn is_trace_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [
        ".pftrace",
        ".pftrace.gz",
        ".perfetto-trace",
        ".perfetto-trace.gz",
        ".json",
        ".json.gz",
    ]
    .iter()
    .any(|s| name.ends_with(s))
}

/// A regular gzip Kineto file from this size on is inflated as it is read
/// (its first pieces parsed while the rest is read) instead of read whole
/// first.
const GZIP_STREAM_BYTES: u64 = 1 << 18;

/// Bytes read to judge a file's format.
const SNIFF_BYTES: u64 = 64 << 10;

/// Detects the format of one file from its first bytes.
pub fn sniff(path: &Path) -> Result<Format> {
    use std::io::Read;
    let mut head = Vec::with_capacity(SNIFF_BYTES as usize);
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    f.take(SNIFF_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    sniff_bytes(path, &head)
}

/// Detects the format from the first bytes of a file (`path` names it).
/// For a gzip file, the format of what its first bytes inflate to.
pub(crate) fn sniff_bytes(path: &Path, head: &[u8]) -> Result<Format> {
    if !gzip::is_gzip(head) {
        return sniff_plain(path, head);
    }
    let inflated = gzip::inflate_head(path, head, SNIFF_BYTES)?;
    if gzip::is_gzip(&inflated) {
        return Err(TraceError::NotATrace {
            path: path.to_path_buf(),
            why: "gzip of a gzip file".into(),
        });
    }
    sniff_plain(path, &inflated).map_err(|e| match e {
        TraceError::NotATrace { path, why } => TraceError::NotATrace {
            path,
            why: format!("gzip-compressed, but {why}"),
        },
        e => e,
    })
}

/// [`sniff_bytes`] for bytes that are not gzip.
fn sniff_plain(path: &Path, head: &[u8]) -> Result<Format> {
    let first_non_space = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    match head.first() {
        None => Err(TraceError::Empty {
            path: path.to_path_buf(),
        }),
        // 0x0a is both Perfetto's packet tag and a newline: JSON that starts
        // with a newline is still JSON.
        Some(0x0a) if first_non_space == Some(b'{') && crate::kineto::looks_like_kineto(head) => {
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

/// Loads one file, whatever its format. The file is opened and read once,
/// so a pipe or FIFO (`<(cat rank-0.pftrace)`) loads like a file.
pub fn load_file(path: &Path) -> Result<Trace> {
    load_file_with_progress(path, &|_| {})
}

/// [`load_file`], keeping the arguments of Kineto events that `keep` says.
pub fn load_file_keeping(path: &Path, keep: KeepArgs) -> Result<Trace> {
    load_file_reporting(path, &|_| {}, keep)
}

/// A reader that tells `on_read` how many bytes each read returned.
struct Counting<'a, R> {
    inner: R,
    on_read: &'a (dyn Fn(u64) + Sync),
}

impl<R: std::io::Read> std::io::Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            (self.on_read)(n as u64);
        }
        Ok(n)
    }
}

/// [`load_file`], calling `on_read` with the bytes of each read as the
/// file is read (a Perfetto file in 8 MiB chunks as it is decoded; a
/// Kineto file before it is parsed): what a progress bar shows. For a
/// gzip file these are compressed bytes; a compressed Perfetto trace is
/// inflated as it is decoded.
pub fn load_file_with_progress(path: &Path, on_read: &(dyn Fn(u64) + Sync)) -> Result<Trace> {
    load_file_reporting(path, on_read, KeepArgs::All)
}

fn load_file_reporting(
    path: &Path,
    on_read: &(dyn Fn(u64) + Sync),
    keep: KeepArgs,
) -> Result<Trace> {
    use std::io::Read;
    let io = |e| TraceError::io(path, e);
    // A FIFO is opened without waiting for a writer that may never come.
    let (f, regular_len): (Box<dyn Read + Send>, u64) = if fifo::is_fifo(path) {
        (Box::new(fifo::open(path).map_err(io)?), 0)
    } else {
        let f = std::fs::File::open(path).map_err(io)?;
        // The length of a regular file (one that can be read again); 0 for a pipe.
        let regular_len = f
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map_or(0, |m| m.len());
        (Box::new(f), regular_len)
    };
    let mut f = Counting { inner: f, on_read };
    let mut head = Vec::with_capacity(SNIFF_BYTES as usize);
    (&mut f)
        .take(SNIFF_BYTES)
        .read_to_end(&mut head)
        .map_err(io)?;
    let gz = gzip::is_gzip(&head);
    match sniff_bytes(path, &head)? {
        Format::Perfetto if gz => gzip::read_perfetto(path, std::io::Cursor::new(head).chain(f)),
        Format::Perfetto => crate::perfetto::read_stream(path, std::io::Cursor::new(head).chain(f)),
        // A large plain file is read piece by piece, never held whole.
        Format::Kineto if !gz && regular_len >= (1 << 20) => {
            crate::kineto::read_plain_file(path, head, f, regular_len as usize, keep)
        }
        // A large gzip file is inflated as it is read, on two cores.
        Format::Kineto if gz && regular_len >= GZIP_STREAM_BYTES => {
            crate::kineto::read_gzip_file(path, head, f, regular_len as usize, keep)
        }
        // `kineto::read_bytes` inflates a gzip file itself, on two cores.
        // A pipe of plain JSON is held whole: its whitespace runs cut first
        // (padding costs time, not memory).
        Format::Kineto if !gz && regular_len == 0 => {
            let mut bytes = Vec::new();
            let kineto = !crate::chrome::is_ours(&head);
            crate::kineto::squeeze(std::io::Cursor::new(head).chain(f), kineto)
                .read_to_end(&mut bytes)
                .map_err(io)?;
            crate::kineto::read_bytes_keeping(path, &bytes, keep)
        }
        Format::Kineto => {
            let mut bytes = head;
            // Sized once (a regular file), not grown by doubling.
            bytes.reserve_exact((regular_len as usize).saturating_sub(bytes.len()));
            f.read_to_end(&mut bytes).map_err(io)?;
            crate::kineto::read_bytes_keeping(path, &bytes, keep)
        }
    }
}

/// Refuses an output `out` that is one of `inputs`, or a trace file inside
/// an input directory (the next load of that directory would show its
/// ranks twice), links followed, whatever `--force` says.
pub fn refuse_input_as_output(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    let refuse = |why: String| {
        Err(TraceError::Output {
            path: out.to_path_buf(),
            why,
        })
    };
    // The output may not exist yet: judge by its canonical directory.
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(dir) = std::fs::canonicalize(&dir) else {
        return Ok(()); // the write names the missing directory
    };
    let Some(name) = out.file_name() else {
        return Ok(());
    };
    let out_canon = dir.join(name);
    let out_canon = std::fs::canonicalize(&out_canon).unwrap_or(out_canon);
    for input in inputs {
        let Ok(inp) = std::fs::canonicalize(input) else {
            continue;
        };
        if inp == out_canon {
            return refuse(format!(
                "is an input of this command ({}); write elsewhere",
                input.display()
            ));
        }
        let listed = expand(&inp).unwrap_or_default();
        let listed = listed
            .iter()
            .any(|f| std::fs::canonicalize(f).is_ok_and(|f| f == out_canon));
        let would_be_listed =
            inp.is_dir() && out_canon.parent() == Some(inp.as_path()) && is_trace_name(&out_canon);
        if listed || would_be_listed {
            return refuse(format!(
                "is inside input directory {}, whose next load would show its ranks twice; write elsewhere",
                input.display()
            ));
        }
    }
    Ok(())
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
