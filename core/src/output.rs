//! Writing output files: never over an input, only ever a regular file,
//! through a temporary file that a signal or the next run removes.
//!
//! - An output that is one of the inputs, or a trace file inside an input
//!   directory, is refused whatever `--force` says
//!   ([`crate::load::refuse_input_as_output`]).
//! - `--force` (`overwrite`) replaces a regular file only. A symbolic link
//!   to a regular file has its target replaced (the link stays and shows
//!   the new file); a link to nothing, a directory, a device, a FIFO or a
//!   socket is refused, never replaced or written into.
//! - The bytes go to `.NAME.streamscope-PID-N.tmp` beside the output (the
//!   target's directory for a link), renamed into place once complete and
//!   synced. The CLI removes it on Ctrl-C, SIGTERM or SIGHUP
//!   ([`remove_temp_files`]); one left by a kill -9 is not a trace name
//!   (a directory load skips it) and the next write of that output removes
//!   it once its process is gone.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Result, TraceError};

/// Writes a whole model with `write` (a format's writer) to `path`
/// through [`write_atomically`], gzip-compressed when `path` ends in
/// `.gz`; an existing `path` is replaced only with `overwrite`. A trace
/// without processes is an error (it would be an empty file).
pub(crate) fn write_model_file(
    trace: &crate::model::Trace,
    path: &Path,
    overwrite: bool,
    write: impl FnOnce(&crate::model::Trace, &mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    if trace.processes().is_empty() {
        return Err(TraceError::NothingToWrite {
            path: path.to_path_buf(),
        });
    }
    let gz = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".gz"));
    write_atomically(path, overwrite, |w| {
        if !gz {
            return write(trace, w);
        }
        let mut z = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        write(trace, &mut z)?;
        z.finish().map(|_| ())
    })
}

/// Temporary files being written now (removed by [`remove_temp_files`]).
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes the temporary files of writes still under way: what the CLI
/// does on Ctrl-C, SIGTERM or SIGHUP before it ends.
pub fn remove_temp_files() {
    let temps = match TEMPS.lock() {
        Ok(t) => t,
        Err(poisoned) => poisoned.into_inner(),
    };
    for t in temps.iter() {
        let _ = std::fs::remove_file(t);
    }
}

fn register(tmp: &Path, on: bool) {
    let mut temps = match TEMPS.lock() {
        Ok(t) => t,
        Err(poisoned) => poisoned.into_inner(),
    };
    if on {
        temps.push(tmp.to_path_buf());
    } else {
        temps.retain(|t| t != tmp);
    }
}

/// What the temporary file for output `name` starts with.
fn temp_prefix(name: &str) -> String {
    format!(".{name}.streamscope-")
}

/// Whether process `pid` is gone, where the system tells (Linux's /proc);
/// `false` where it cannot be told.
fn process_gone(pid: u32) -> bool {
    Path::new("/proc/self").exists() && !Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes temporary files that writers of `name` in `dir` left when they
/// were killed (their process is gone).
fn remove_stale_temps(dir: &Path, name: &str) {
    let prefix = temp_prefix(name);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(rest) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|f| f.strip_suffix(".tmp"))
        else {
            continue;
        };
        let pid = rest
            .split_once('-')
            .and_then(|(p, _)| p.parse::<u32>().ok());
        let regular = e.file_type().is_ok_and(|t| t.is_file());
        if regular && pid.is_some_and(|p| p != std::process::id() && process_gone(p)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What a file that is not a regular file is, in words.
fn kind_of(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Refuses, before any work, an output that [`write_atomically`] would
/// refuse: an existing file without `overwrite`, anything but a regular
/// file (or a link to one) with it.
pub fn check_output(path: &Path, overwrite: bool) -> Result<()> {
    destination(path, overwrite).map(|_| ())
}

/// The file that writing `path` replaces: `path`, or the regular file a
/// symbolic link at `path` points to. Anything else that exists is
/// refused; an existing file without `overwrite` too.
fn destination(path: &Path, overwrite: bool) -> Result<PathBuf> {
    let refuse = |why: String| TraceError::Output {
        path: path.to_path_buf(),
        why,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(path.to_path_buf()),
        Err(e) => {
            return Err(TraceError::Write {
                path: path.to_path_buf(),
                source: e,
            })
        }
    };
    let target = if meta.file_type().is_symlink() {
        match std::fs::metadata(path) {
            Ok(t) if t.is_file() => std::fs::canonicalize(path).map_err(|e| TraceError::Write {
                path: path.to_path_buf(),
                source: e,
            })?,
            Ok(t) => {
                return Err(refuse(format!(
                    "is a symbolic link to {}: only regular files are written; write elsewhere",
                    kind_of(t.file_type())
                )))
            }
            Err(_) => return Err(refuse(
                "is a symbolic link to nothing (or a loop of links); remove it or write elsewhere"
                    .into(),
            )),
        }
    } else if meta.is_file() {
        path.to_path_buf()
    } else {
        return Err(refuse(format!(
            "is {}: only regular files are written, --force replaces only those; write elsewhere",
            kind_of(meta.file_type())
        )));
    };
    if !overwrite {
        return Err(TraceError::OutputExists {
            path: path.to_path_buf(),
        });
    }
    Ok(target)
}

/// Writes `path` through a temporary file in the same directory, renamed
/// into place once complete and synced: a failed write leaves what was
/// there before, a reader never sees a partial file, and of two writers
/// to one path the last rename wins whole. Without `overwrite`, an
/// existing `path` is refused (checked again atomically at the end, so a
/// concurrent writer cannot be clobbered either). With it, only a regular
/// file (or the regular file a symbolic link points to) is replaced; see
/// the module doc.
pub fn write_atomically(
    path: &Path,
    overwrite: bool,
    write: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    use std::io::Write;
    let err = |source| TraceError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dest = destination(path, overwrite)?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    remove_stale_temps(&dir, &name);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        "{}{}-{n}.tmp",
        temp_prefix(&name),
        std::process::id()
    ));
    register(&tmp, true);
    let file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
    {
        Ok(f) => f,
        Err(e) => {
            register(&tmp, false);
            return Err(err(e));
        }
    };
    let result = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &file);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        file.sync_all()?;
        if overwrite {
            std::fs::rename(&tmp, &dest)
        } else {
            // A hard link fails if `path` appeared meanwhile. Where links
            // are not supported, check and rename (a narrow race).
            match std::fs::hard_link(&tmp, &dest) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&tmp);
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
                Err(_) if std::fs::symlink_metadata(&dest).is_ok() => {
                    Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
                }
                Err(_) => std::fs::rename(&tmp, &dest),
            }
        }
    })();
    let out = match result {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Err(TraceError::OutputExists {
                    path: path.to_path_buf(),
                })
            } else {
                Err(err(e))
            }
        }
    };
    register(&tmp, false);
    out
}
