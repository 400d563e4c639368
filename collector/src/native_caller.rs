//! The C/C++ caller of a host sync or copy in a native program (one with
//! no Python line): the return addresses of the first frames outside the
//! CUDA stack's shared objects and the collector, taken at the call's
//! entry on the application's thread (a stack walk, no symbol lookup), and
//! symbolized later on the writer thread (function, and file:line where
//! the binary has debug info), as Nsight Systems' backtraces are. nvcc
//! links the CUDA runtime into the program by default (cudart_static):
//! its frames then lie in the program itself, so the symbolizer passes
//! over frames whose function is the runtime's own.

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

/// Frames kept past the skipped objects (a statically linked CUDA
/// runtime's own frames come first, then the caller).
pub const CALLER_FRAMES: usize = 6;

/// Return addresses outside the skipped objects, innermost first; 0 past
/// the last one found.
pub type Frames = [usize; CALLER_FRAMES];

/// Whether a function name is the CUDA runtime's or driver's own: a
/// statically linked runtime's entry points (`cudaDeviceSynchronize`),
/// its internals (`cudart::...`, `__cudart123`), driver calls (`cuMemcpy`).
pub fn is_cuda_runtime_symbol(name: &str) -> bool {
    let bare = name.trim_start_matches('_');
    bare.starts_with("cuda")
        || name.contains("cudart::")
        || name.starts_with("__cudart")
        || (bare.starts_with("cu") && bare[2..].starts_with(|c: char| c.is_ascii_uppercase()))
}

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

/// The return addresses of the frames that called into the CUDA stack:
/// the first [`CALLER_FRAMES`] frames past this function's caller chain
/// outside the skipped objects. `None` when the walk finds none within its
/// 48 frames.
#[inline(never)]
pub fn capture() -> Option<Frames> {
    let me = capture as *const () as usize;
    let (mut past_me, mut seen) = (false, 0usize);
    let (mut found, mut n): (Frames, usize) = ([0; CALLER_FRAMES], 0);
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
            return n == 0;
        }
        found[n] = ip;
        n += 1;
        n < CALLER_FRAMES
    });
    (n > 0).then_some(found)
}

/// Symbolized callers, by their frames (one lookup per call site).
#[derive(Default)]
pub struct Symbolizer {
    cache: HashMap<Frames, String>,
}

impl Symbolizer {
    /// The caller of `frames`: the first frame whose function is not the
    /// CUDA runtime's own ([`is_cuda_runtime_symbol`]; the first frame when
    /// all are), as "FILE:LINE (function)" with debug info, else
    /// "function (object)", else "0xADDR (object)".
    pub fn name(&mut self, frames: &Frames) -> String {
        if let Some(s) = self.cache.get(frames) {
            return s.clone();
        }
        let named: Vec<(usize, Option<String>, Option<String>)> = frames
            .iter()
            .copied()
            .filter(|&ip| ip != 0)
            .map(|ip| {
                let (func, text) = resolve(ip);
                (ip, func, text)
            })
            .collect();
        let pick = named
            .iter()
            .find(|(_, func, _)| !func.as_deref().is_some_and(is_cuda_runtime_symbol))
            .or(named.first());
        let s = match pick {
            Some((_, _, Some(text))) => text.clone(),
            Some((ip, _, None)) => format!("{ip:#x} ({})", object(*ip)),
            None => "?".into(),
        };
        if self.cache.len() < 4096 {
            self.cache.insert(*frames, s.clone());
        }
        s
    }
}

/// The function at `ip` and its text: "FILE:LINE (function)" with debug
/// info, else "function (object)"; `None`s when nothing resolves.
fn resolve(ip: usize) -> (Option<String>, Option<String>) {
    let mut out: (Option<String>, Option<String>) = (None, None);
    backtrace::resolve(ip as *mut c_void, |sym| {
        if out.1.is_some() {
            return; // the innermost (inlined) frame came first
        }
        let func = sym.name().map(|n| format!("{n:#}"));
        out.1 = match (sym.filename(), sym.lineno(), &func) {
            (Some(f), Some(l), Some(func)) => Some(format!("{}:{l} ({func})", f.display())),
            (Some(f), Some(l), None) => Some(format!("{}:{l}", f.display())),
            (_, _, Some(func)) => Some(format!("{func} ({})", object(ip))),
            _ => None,
        };
        out.0 = func;
    });
    out
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
    fn site() -> Option<Frames> {
        let ip = capture();
        std::hint::black_box(ip)
    }

    #[test]
    fn capture_names_its_callers_function_file_and_line() {
        let frames = site().expect("a caller");
        let name = Symbolizer::default().name(&frames);
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
        let frames = [0x10, 0, 0, 0, 0, 0];
        let name = s.name(&frames);
        assert!(name.starts_with("0x10 ("), "{name}");
        // Cached: the same answer.
        assert_eq!(s.name(&frames), name);
    }

    /// Stands for a statically linked runtime's entry point: an
    /// unmangled name starting "cuda", the walk's first frame.
    #[no_mangle]
    #[inline(never)]
    #[allow(non_snake_case)]
    fn cudaStreamscopeTestSync(out: &mut Option<Frames>) {
        *out = capture();
        std::hint::black_box(out);
    }

    #[test]
    fn the_runtime_s_own_frames_are_passed_over() {
        for f in [
            "cudaDeviceSynchronize",
            "cudaMemcpy",
            "__cudart1234",
            "cudart::globalState::initializeDriver",
            "cuMemcpyDtoH_v2",
            "_cudaRegisterAll",
        ] {
            assert!(is_cuda_runtime_symbol(f), "{f}");
        }
        for f in [
            "main",
            "cumsum",
            "curand_step",
            "train_step",
            "my::cuda_helper",
        ] {
            assert!(!is_cuda_runtime_symbol(f), "{f}");
        }
        // Frames: the runtime-like function, then this test: the caller.
        let mut frames = None;
        cudaStreamscopeTestSync(&mut frames);
        let frames = frames.expect("frames");
        assert!(frames[1] != 0, "{frames:?}");
        let name = Symbolizer::default().name(&frames);
        assert!(
            name.contains("the_runtime_s_own_frames_are_passed_over"),
            "{name}"
        );
        assert!(!name.contains("cudaStreamscopeTestSync"), "{name}");
    }
}
