//! The C/C++ caller of a host sync or copy in a native program (one with
//! no Python line): the return address of the first frame outside the
//! CUDA stack and the collector, taken at the call's entry on the
//! application's thread (a stack walk, no symbol lookup), and symbolized
//! later on the writer thread (function, and file:line where the binary
//! has debug info), as Nsight Systems' backtraces are.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};

/// Shared objects whose frames belong to the CUDA stack or to us: the
/// caller is the first frame outside them.
const SKIPPED: &[&str] = &[
    "libstreamscope_collector",
    "libcupti",
    "libcuda.",
    "libcudart",
    "libnvidia-",
    "ld-linux",
];

/// Frames walked at most.
const MAX_FRAMES: usize = 48;

/// The file name of the shared object holding `ip`, if the dynamic
/// loader knows it.
fn module_of(ip: usize) -> Option<String> {
    // SAFETY: dladdr only reads the loader's tables and fills `info`; a
    // zeroed Dl_info is a valid output buffer.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about; 0 means unknown.
    let ok = unsafe { libc::dladdr(ip as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr set dli_fname to a NUL-terminated path it owns.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(name.to_string_lossy().into_owned())
}

/// Whether `ip` lies in one of [`SKIPPED`]'s objects (no allocation: it
/// runs on the application's thread, once per frame walked).
fn skipped(ip: usize) -> bool {
    // SAFETY: as in `module_of`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about; 0 means unknown.
    if unsafe { libc::dladdr(ip as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: dladdr set dli_fname to a NUL-terminated path it owns.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    SKIPPED.iter().any(|s| base.starts_with(s.as_bytes()))
}

/// The return address of the frame that called into the CUDA stack: the
/// first frame past this function's caller chain inside the skipped
/// objects. `None` when the walk finds none within its 48 frames.
#[inline(never)]
pub fn capture() -> Option<usize> {
    let me = capture as *const () as usize;
    let (mut past_me, mut seen, mut found) = (false, 0usize, None);
    backtrace::trace(|frame| {
        seen += 1;
        if seen > MAX_FRAMES {
            return false;
        }
        if !past_me {
            past_me = frame.symbol_address() as usize == me;
            return true;
        }
        let ip = frame.ip() as usize;
        if ip == 0 || skipped(ip) {
            return true;
        }
        found = Some(ip);
        false
    });
    found
}

/// Symbolized callers, by return address (one lookup per call site).
#[derive(Default)]
pub struct Symbolizer {
    cache: HashMap<usize, String>,
}

impl Symbolizer {
    /// "FILE:LINE (function)" with debug info, else "function (object)",
    /// else "0xADDR (object)".
    pub fn name(&mut self, ip: usize) -> String {
        if let Some(s) = self.cache.get(&ip) {
            return s.clone();
        }
        let mut out: Option<String> = None;
        backtrace::resolve(ip as *mut c_void, |sym| {
            if out.is_some() {
                return; // the innermost (inlined) frame came first
            }
            let func = sym.name().map(|n| format!("{n:#}"));
            out = match (sym.filename(), sym.lineno(), func) {
                (Some(f), Some(l), Some(func)) => Some(format!("{}:{l} ({func})", f.display())),
                (Some(f), Some(l), None) => Some(format!("{}:{l}", f.display())),
                (_, _, Some(func)) => Some(format!("{func} ({})", object(ip))),
                _ => None,
            };
        });
        let s = out.unwrap_or_else(|| format!("{ip:#x} ({})", object(ip)));
        if self.cache.len() < 4096 {
            self.cache.insert(ip, s.clone());
        }
        s
    }
}

/// The base name of the object holding `ip` ("?" when unknown).
fn object(ip: usize) -> String {
    module_of(ip)
        .map(|m| m.rsplit('/').next().unwrap_or(&m).to_string())
        .unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call site in this file: what `capture` must name.
    #[inline(never)]
    fn site() -> Option<usize> {
        let ip = capture();
        std::hint::black_box(ip)
    }

    #[test]
    fn capture_names_its_callers_function_file_and_line() {
        let ip = site().expect("a caller");
        let name = Symbolizer::default().name(ip);
        assert!(name.contains("native_caller.rs:"), "{name}");
        assert!(name.contains("site"), "{name}");
        // The line of the `capture()` call in `site`.
        let line: u32 = name
            .split("native_caller.rs:")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|l| l.parse().ok())
            .expect("a line");
        let src = include_str!("native_caller.rs");
        let want = src
            .lines()
            .position(|l| l.trim() == "let ip = capture();")
            .expect("the call") as u32
            + 1;
        assert_eq!(line, want, "{name}");
    }

    #[test]
    fn unknown_addresses_are_named_by_address() {
        let mut s = Symbolizer::default();
        let name = s.name(0x10);
        assert!(name.starts_with("0x10 ("), "{name}");
        // Cached: the same answer.
        assert_eq!(s.name(0x10), name);
    }
}
