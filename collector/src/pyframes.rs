//! The Python file:line of the calling thread, read from CPython's own
//! structures, with or without the GIL.
//!
//! PyTorch releases the GIL around the CUDA calls of `.item()`,
//! `torch.cuda.synchronize()`, `.to("cpu")` & co., so the C API cannot be
//! used there. But the thread making the CUDA call is blocked inside it: its
//! Python frames cannot change, and every object they reference (code
//! objects, their file names and line tables) stays alive. So this module
//! reads them as an out-of-process sampler (py-spy, austin) does, only from
//! inside: this thread's `PyThreadState` (from `PyGILState_GetThisThreadState`,
//! a thread-specific-storage lookup that needs no GIL), its current frame,
//! each frame's code object and instruction pointer, the code object's
//! `co_filename`, `co_name`, `co_firstlineno` and line table, decoded here.
//!
//! Layouts, per CPython minor version (x86-64 and aarch64, default
//! GIL-enabled builds), from CPython's headers:
//! - 3.10: `PyThreadState.frame` -> `PyFrameObject` (`f_back`, `f_code`,
//!   `f_lasti` in code units); line table of (byte delta, line delta) pairs.
//! - 3.11, 3.12: `PyThreadState.cframe` -> `_PyCFrame.current_frame` ->
//!   `_PyInterpreterFrame` (`f_code`, `previous`, `prev_instr`, `owner`);
//!   the location table of 3.11 (Objects/locations.md).
//! - 3.13: `PyThreadState.current_frame` -> `_PyInterpreterFrame`
//!   (`f_executable`, `previous`, `instr_ptr`, `owner`).
//!
//! Other versions (and free-threaded builds, whose object header differs)
//! are not read: one line on stderr says so, and only the C-API walk of
//! python.rs (when the GIL is held) gives lines there.
//!
//! A wrong layout must never crash the program. Every object is checked by
//! its type pointer (`PyCode_Type`, `PyUnicode_Type`, `PyBytes_Type`), and
//! until one walk has passed every check the memory is read through
//! `process_vm_readv` on our own pid (a bad address is an EFAULT, not a
//! SIGSEGV; `/proc/self/mem` when that syscall is refused). Only a layout
//! that passed is read directly (a few plain loads per frame); one that
//! fails three times is switched off with one line on stderr.

// The struct field each symbol is stored in fixes the transmute's target type.
#![allow(clippy::missing_transmute_annotations)]

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::python::{format_location, is_library_file};

/// Byte offsets of the fields read, for one CPython minor version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    pub minor: u32,
    /// PyThreadState -> the innermost frame: 3.10 `frame`, 3.13
    /// `current_frame`; 3.11/3.12 `cframe` (then `cframe_current`).
    pub ts_frame: usize,
    pub cframe_current: Option<usize>,
    /// Frame -> code object (`f_code` / `f_executable`).
    pub fr_code: usize,
    /// Frame -> caller (`f_back` / `previous`).
    pub fr_back: usize,
    /// 3.10: `f_lasti` (int, code units); else the instruction pointer.
    pub fr_instr: usize,
    /// `owner` (char), 3.11+.
    pub fr_owner: Option<usize>,
    pub co_firstlineno: usize,
    pub co_filename: usize,
    pub co_name: usize,
    pub co_linetable: usize,
    /// `co_code_adaptive` (3.11+): the instructions, inside the code object.
    pub co_code: usize,
    /// `_co_firsttraceable` (3.11+): frames before it are incomplete.
    pub co_firsttraceable: Option<usize>,
    /// sizeof(PyASCIIObject) / sizeof(PyCompactUnicodeObject).
    pub ascii_size: usize,
    pub compact_size: usize,
}

/// The layout of CPython 3.`minor`, when known.
pub fn layout_for(minor: u32) -> Option<Layout> {
    let l = match minor {
        10 => Layout {
            minor,
            ts_frame: 24,
            cframe_current: None,
            fr_code: 32,
            fr_back: 24,
            fr_instr: 96,
            fr_owner: None,
            co_firstlineno: 40,
            co_filename: 104,
            co_name: 112,
            co_linetable: 120,
            co_code: 0,
            co_firsttraceable: None,
            ascii_size: 48,
            compact_size: 72,
        },
        11 => Layout {
            minor,
            ts_frame: 56,
            cframe_current: Some(8),
            fr_code: 32,
            fr_back: 48,
            fr_instr: 56,
            fr_owner: Some(69),
            co_firstlineno: 72,
            co_filename: 112,
            co_name: 120,
            co_linetable: 136,
            co_code: 184,
            co_firsttraceable: Some(168),
            ascii_size: 48,
            compact_size: 72,
        },
        12 => Layout {
            minor,
            ts_frame: 56,
            cframe_current: Some(0),
            fr_code: 0,
            fr_back: 8,
            fr_instr: 56,
            fr_owner: Some(70),
            co_firstlineno: 68,
            co_filename: 112,
            co_name: 120,
            co_linetable: 136,
            co_code: 192,
            co_firsttraceable: Some(176),
            ascii_size: 40,
            compact_size: 56,
        },
        13 => Layout {
            minor,
            ts_frame: 72,
            cframe_current: None,
            fr_code: 0,
            fr_back: 8,
            fr_instr: 56,
            fr_owner: Some(70),
            co_firstlineno: 68,
            co_filename: 112,
            co_name: 120,
            co_linetable: 136,
            co_code: 200,
            co_firsttraceable: Some(184),
            ascii_size: 40,
            compact_size: 56,
        },
        _ => return None,
    };
    Some(l)
}

/// `_PyInterpreterFrame.owner` of a C-stack shim frame (3.12+): skipped.
const FRAME_OWNED_BY_CSTACK: u8 = 3;
const FRAME_OWNED_BY_GENERATOR: u8 = 1;
/// Deepest frames looked at.
const MAX_FRAMES: usize = 256;
/// Longest file name or line table read.
const MAX_STR: usize = 4096;
const MAX_LINETABLE: usize = 1 << 20;

/// Reads memory of this process.
pub trait Mem {
    /// Fills `out` from `addr`; false when it cannot be read.
    fn read(&self, addr: usize, out: &mut [u8]) -> bool;
}

/// Plain loads: only for a layout that has passed (see the module docs).
pub struct Direct;

impl Mem for Direct {
    fn read(&self, addr: usize, out: &mut [u8]) -> bool {
        if addr < 4096 {
            return false;
        }
        // SAFETY: only used once the layout has been checked against this
        // interpreter (a walk whose every object had the right type), so
        // `addr` is a field of a live frame, code, str or bytes object that
        // this blocked thread's frames keep alive.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
        true
    }
}

/// Reads that cannot fault: `process_vm_readv` on our own pid, else
/// `pread` on /proc/self/mem.
pub struct Safe;

static PROC_MEM: OnceLock<Option<std::fs::File>> = OnceLock::new();

impl Mem for Safe {
    fn read(&self, addr: usize, out: &mut [u8]) -> bool {
        if out.is_empty() {
            return true;
        }
        if addr < 4096 {
            return false;
        }
        let local = libc::iovec {
            iov_base: out.as_mut_ptr().cast(),
            iov_len: out.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut c_void,
            iov_len: out.len(),
        };
        // SAFETY: one local iovec over `out` (writable, its length), one
        // remote range; the kernel checks the remote one and fails with
        // EFAULT instead of faulting.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n == out.len() as isize {
            return true;
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if n >= 0 || errno == libc::EFAULT || errno == libc::ESRCH {
            return false;
        }
        // Refused (seccomp, EPERM): /proc/self/mem.
        use std::os::unix::fs::FileExt;
        let f = PROC_MEM.get_or_init(|| std::fs::File::open("/proc/self/mem").ok());
        match f {
            Some(f) => f.read_exact_at(out, addr as u64).is_ok(),
            None => false,
        }
    }
}

fn ptr<M: Mem>(m: &M, addr: usize) -> Option<usize> {
    let mut b = [0u8; 8];
    m.read(addr, &mut b).then(|| usize::from_ne_bytes(b))
}
fn i32_at<M: Mem>(m: &M, addr: usize) -> Option<i32> {
    let mut b = [0u8; 4];
    m.read(addr, &mut b).then(|| i32::from_ne_bytes(b))
}
fn u8_at<M: Mem>(m: &M, addr: usize) -> Option<u8> {
    let mut b = [0u8; 1];
    m.read(addr, &mut b).then_some(b[0])
}

/// Type objects a walk checks objects against.
#[derive(Debug, Clone, Copy)]
pub struct Types {
    pub code: usize,
    pub unicode: usize,
    pub bytes: usize,
}

/// The memory is not what the layout says.
#[derive(Debug, PartialEq)]
pub struct Mismatch(pub &'static str);

fn has_type<M: Mem>(m: &M, obj: usize, ty: usize) -> bool {
    ptr(m, obj + 8) == Some(ty)
}

/// A `str` object's text (compact strings: every str CPython makes for
/// file and function names).
fn read_str<M: Mem>(m: &M, l: &Layout, t: &Types, obj: usize) -> Result<String, Mismatch> {
    if !has_type(m, obj, t.unicode) {
        return Err(Mismatch("not a str"));
    }
    let len = ptr(m, obj + 16).ok_or(Mismatch("str length"))?;
    let mut st = [0u8; 4];
    if !m.read(obj + 32, &mut st) {
        return Err(Mismatch("str state"));
    }
    let state = u32::from_ne_bytes(st);
    let (kind, compact, ascii) = ((state >> 2) & 7, state & 0x20 != 0, state & 0x40 != 0);
    if !compact || len > MAX_STR {
        return Ok(String::from("?"));
    }
    let (data, width) = if ascii {
        (obj + l.ascii_size, 1)
    } else {
        (obj + l.compact_size, kind as usize)
    };
    if !matches!(width, 1 | 2 | 4) {
        return Err(Mismatch("str kind"));
    }
    let mut raw = vec![0u8; len * width];
    if !m.read(data, &mut raw) {
        return Err(Mismatch("str data"));
    }
    Ok(match width {
        1 => raw.iter().map(|&b| b as char).collect(),
        2 => raw
            .chunks_exact(2)
            .map(|c| char::from_u32(u16::from_ne_bytes([c[0], c[1]]) as u32).unwrap_or('?'))
            .collect(),
        _ => raw
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('?'))
            .collect(),
    })
}

fn read_bytes<M: Mem>(m: &M, t: &Types, obj: usize) -> Result<Vec<u8>, Mismatch> {
    if !has_type(m, obj, t.bytes) {
        return Err(Mismatch("not bytes"));
    }
    let len = ptr(m, obj + 16).ok_or(Mismatch("bytes length"))?;
    if len > MAX_LINETABLE {
        return Err(Mismatch("bytes length"));
    }
    let mut v = vec![0u8; len];
    if !m.read(obj + 32, &mut v) {
        return Err(Mismatch("bytes data"));
    }
    Ok(v)
}

/// 3.10 line table: (byte delta, signed line delta) pairs, -128 = no line.
/// `addr` in bytes.
pub fn line_310(table: &[u8], first: i32, addr: usize) -> Option<i32> {
    let (mut line, mut end) = (first, 0usize);
    for pair in table.chunks_exact(2) {
        let start = end;
        end += pair[0] as usize;
        let delta = pair[1] as i8;
        let cur = if delta == -128 {
            None
        } else {
            line += delta as i32;
            Some(line)
        };
        if start <= addr && addr < end {
            return cur;
        }
    }
    None
}

fn varint(t: &[u8], i: &mut usize) -> u32 {
    let mut read = *t.get(*i).unwrap_or(&0) as u32;
    *i += 1;
    let mut val = read & 63;
    let mut shift = 0;
    while read & 64 != 0 && shift < 30 {
        read = *t.get(*i).unwrap_or(&0) as u32;
        *i += 1;
        shift += 6;
        val |= (read & 63) << shift;
    }
    val
}

/// 3.11+ location table (CPython's Objects/locations.md): entries of
/// `1 cccc lll` (code, length-1 in code units) and their data. `addr` in
/// code units.
pub fn line_311(table: &[u8], first: i32, addr: usize) -> Option<i32> {
    let (mut line, mut end, mut i) = (first, 0usize, 0usize);
    while i < table.len() {
        let b = table[i];
        let code = (b >> 3) & 15;
        let delta = match code {
            15 => 0,
            13 | 14 => {
                let mut j = i + 1;
                let u = varint(table, &mut j);
                if u & 1 != 0 {
                    -((u >> 1) as i32)
                } else {
                    (u >> 1) as i32
                }
            }
            10..=12 => code as i32 - 10,
            _ => 0,
        };
        line += delta;
        let start = end;
        end += (b & 7) as usize + 1;
        if start <= addr && addr < end {
            return (code != 15).then_some(line);
        }
        i += 1;
        while i < table.len() && table[i] & 128 == 0 {
            i += 1;
        }
    }
    None
}

/// Walks the frames from `frame` outwards; the first frame whose file is
/// not a library's (python.rs `is_library_file`), else the innermost one.
/// Ok(None): no Python frame.
pub fn walk<M: Mem>(
    m: &M,
    l: &Layout,
    t: &Types,
    mut frame: usize,
) -> Result<Option<String>, Mismatch> {
    let mut innermost = None;
    for _ in 0..MAX_FRAMES {
        if frame == 0 {
            break;
        }
        let code = ptr(m, frame + l.fr_code).ok_or(Mismatch("frame"))?;
        let back = ptr(m, frame + l.fr_back).ok_or(Mismatch("frame"))?;
        let owner = match l.fr_owner {
            Some(o) => u8_at(m, frame + o).ok_or(Mismatch("frame"))?,
            None => 0,
        };
        if owner == FRAME_OWNED_BY_CSTACK && l.minor >= 12 {
            frame = back;
            continue;
        }
        if code == 0 || !has_type(m, code, t.code) {
            if l.minor >= 13 {
                // f_executable may be something else than code (None).
                frame = back;
                continue;
            }
            return Err(Mismatch("frame without a code object"));
        }
        let file = read_str(
            m,
            l,
            t,
            ptr(m, code + l.co_filename).ok_or(Mismatch("code"))?,
        )?;
        let library = is_library_file(&file);
        if library && innermost.is_some() {
            frame = back;
            continue;
        }
        let first = i32_at(m, code + l.co_firstlineno).ok_or(Mismatch("code"))?;
        let line = if l.minor == 10 {
            let lasti = i32_at(m, frame + l.fr_instr).ok_or(Mismatch("frame"))?;
            if lasti < 0 {
                Some(first)
            } else {
                let table =
                    read_bytes(m, t, ptr(m, code + l.co_linetable).ok_or(Mismatch("code"))?)?;
                line_310(&table, first, lasti as usize * 2)
            }
        } else {
            let instr = ptr(m, frame + l.fr_instr).ok_or(Mismatch("frame"))?;
            let start = code + l.co_code;
            if let Some(ft) = l.co_firsttraceable {
                let ft = i32_at(m, code + ft).ok_or(Mismatch("code"))?.max(0) as usize;
                if owner != FRAME_OWNED_BY_GENERATOR && instr < start + 2 * ft {
                    frame = back; // incomplete frame: not started yet
                    continue;
                }
            }
            if instr < start {
                Some(first)
            } else {
                let table =
                    read_bytes(m, t, ptr(m, code + l.co_linetable).ok_or(Mismatch("code"))?)?;
                line_311(&table, first, (instr - start) / 2)
            }
        };
        let name = read_str(m, l, t, ptr(m, code + l.co_name).ok_or(Mismatch("code"))?)?;
        let loc = format_location(&file, line.unwrap_or(first), &name);
        if !library {
            return Ok(Some(loc));
        }
        innermost = Some(loc);
        frame = back;
    }
    Ok(innermost)
}

/// The innermost frame of thread state `ts`.
pub fn top_frame<M: Mem>(m: &M, l: &Layout, ts: usize) -> Option<usize> {
    let p = ptr(m, ts + l.ts_frame)?;
    match l.cframe_current {
        Some(off) if p != 0 => ptr(m, p + off),
        Some(_) => Some(0),
        None => Some(p),
    }
}

type TsFn = unsafe extern "C" fn() -> *mut c_void;
type IntFn = unsafe extern "C" fn() -> c_int;

/// This process's Python, as far as the reader needs it.
pub struct Python {
    pub layout: Layout,
    pub types: Types,
    is_initialized: IntFn,
    this_thread_state: TsFn,
}

fn sym(name: &CStr) -> usize {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// "3.12.1 (main, ...)" -> 12.
pub fn minor_of(version: &str) -> Option<u32> {
    let rest = version.strip_prefix("3.")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Why there is no reader (printed once), or the reader.
fn lookup() -> Result<Python, Option<String>> {
    let init = sym(c"Py_IsInitialized");
    let ts = sym(c"PyGILState_GetThisThreadState");
    let ver = sym(c"Py_GetVersion");
    if init == 0 || ts == 0 || ver == 0 {
        return Err(None); // not a Python process: nothing to say
    }
    // SAFETY: Py_GetVersion is `const char *(void)` and returns a static,
    // NUL-terminated string.
    let version = unsafe {
        let f: unsafe extern "C" fn() -> *const std::ffi::c_char = std::mem::transmute(ver);
        let p = f();
        if p.is_null() {
            return Err(Some("Python version unknown".into()));
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    let short = version.split_whitespace().next().unwrap_or("?").to_string();
    let Some(layout) = minor_of(&version).and_then(layout_for) else {
        return Err(Some(format!(
            "Python {short}: frame layout not known (3.10 to 3.13 are)"
        )));
    };
    if sym(c"_Py_DecRefShared") != 0 {
        return Err(Some(format!("Python {short} is a free-threaded build")));
    }
    let types = Types {
        code: sym(c"PyCode_Type"),
        unicode: sym(c"PyUnicode_Type"),
        bytes: sym(c"PyBytes_Type"),
    };
    if types.code == 0 || types.unicode == 0 || types.bytes == 0 {
        return Err(Some(format!("Python {short}: type objects not found")));
    }
    // SAFETY: the symbols are CPython's `int Py_IsInitialized(void)` and
    // `PyThreadState *PyGILState_GetThisThreadState(void)`.
    let (is_initialized, this_thread_state) = unsafe {
        (
            std::mem::transmute::<usize, IntFn>(init),
            std::mem::transmute::<usize, TsFn>(ts),
        )
    };
    Ok(Python {
        layout,
        types,
        is_initialized,
        this_thread_state,
    })
}

static PYTHON: OnceLock<Option<Python>> = OnceLock::new();

/// 0: layout not yet confirmed (safe reads), 1: confirmed (direct reads),
/// 2: off.
static STATE: AtomicU8 = AtomicU8::new(0);
static FAILURES: AtomicU32 = AtomicU32::new(0);
const UNCONFIRMED: u8 = 0;
const CONFIRMED: u8 = 1;
const OFF: u8 = 2;
const MAX_FAILURES: u32 = 3;

fn python() -> Option<&'static Python> {
    PYTHON
        .get_or_init(|| match lookup() {
            Ok(p) => Some(p),
            Err(why) => {
                if let Some(why) = why {
                    crate::warn!(
                        "streamscope: {why}; host syncs get their Python line only where the GIL is held"
                    );
                }
                None
            }
        })
        .as_ref()
}

fn switch_off(why: &str) {
    if STATE.swap(OFF, Ordering::SeqCst) != OFF {
        crate::warn!(
            "streamscope: the Python frame reader is off ({why}); host syncs get their Python line only where the GIL is held"
        );
    }
}

/// This thread's thread state, when Python runs and this thread has one.
fn thread_state(py: &Python) -> Option<usize> {
    // SAFETY: Py_IsInitialized reads a flag; PyGILState_GetThisThreadState
    // reads this thread's TSS slot (no GIL needed; NULL when none).
    unsafe {
        if (py.is_initialized)() == 0 {
            return None;
        }
        let ts = (py.this_thread_state)() as usize;
        (ts != 0).then_some(ts)
    }
}

/// The Python line of the code running on (or blocked in a call on) this
/// thread: the first frame outside libraries (see `walk`).
pub fn current_location() -> Option<String> {
    let state = STATE.load(Ordering::Relaxed);
    if state == OFF {
        return None;
    }
    let py = python()?;
    let ts = thread_state(py)?;
    if state == CONFIRMED {
        let frame = top_frame(&Direct, &py.layout, ts)?;
        return walk(&Direct, &py.layout, &py.types, frame).ok().flatten();
    }
    let frame = top_frame(&Safe, &py.layout, ts)?;
    match walk(&Safe, &py.layout, &py.types, frame) {
        Ok(Some(loc)) => {
            let _ =
                STATE.compare_exchange(UNCONFIRMED, CONFIRMED, Ordering::SeqCst, Ordering::SeqCst);
            Some(loc)
        }
        Ok(None) => None,
        Err(Mismatch(what)) => {
            if FAILURES.fetch_add(1, Ordering::SeqCst) + 1 >= MAX_FAILURES {
                switch_off(&format!(
                    "Python 3.{}: {what} where the layout says one is",
                    py.layout.minor
                ));
            }
            None
        }
    }
}

/// Called by the Python hooks (through `ctypes.PyDLL`, holding the GIL) once
/// torch is imported: reads this thread's line with safe reads and compares
/// it with `expected` (what the hooks computed with `sys._getframe`); a
/// mismatch switches the reader off. Returns 1 when they agree.
///
/// # Safety
/// `expected` is null or a NUL-terminated string valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamscope_check_python_frames(
    expected: *const std::ffi::c_char,
) -> c_int {
    std::panic::catch_unwind(|| {
        if expected.is_null() {
            return 0;
        }
        // SAFETY: the caller passes a NUL-terminated string.
        let want = unsafe { CStr::from_ptr(expected) }
            .to_string_lossy()
            .into_owned();
        let Some(py) = python() else { return 0 };
        if STATE.load(Ordering::SeqCst) == OFF {
            return 0;
        }
        let Some(ts) = thread_state(py) else { return 0 };
        let got = top_frame(&Safe, &py.layout, ts).map(|f| walk(&Safe, &py.layout, &py.types, f));
        match got {
            Some(Ok(Some(g))) if g == want => {
                let _ = STATE.compare_exchange(
                    UNCONFIRMED,
                    CONFIRMED,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                1
            }
            other => {
                let why = match other {
                    Some(Ok(Some(g))) => format!("read {g:?}, Python says {want:?}"),
                    Some(Err(Mismatch(w))) => format!("Python 3.{}: {w}", py.layout.minor),
                    _ => "no frame found".into(),
                };
                switch_off(&why);
                0
            }
        }
    })
    .unwrap_or(0)
}

/// This thread's Python line as the collector reads it at a CUDA call, into
/// `buf` (NUL-terminated, truncated to `len`); returns its full length, 0
/// when none. Call it through `ctypes.CDLL` (which releases the GIL) to see
/// what a sync inside PyTorch would get (tests, scripts/gpu/truth.sh).
///
/// # Safety
/// `buf` is null or points at `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamscope_debug_python_location(
    buf: *mut std::ffi::c_char,
    len: usize,
) -> usize {
    std::panic::catch_unwind(|| {
        let Some(h) = current_location() else {
            return 0;
        };
        if !buf.is_null() && len > 0 {
            let n = h.len().min(len - 1);
            // SAFETY: `buf` has `len` writable bytes; we write n + 1 <= len.
            unsafe {
                std::ptr::copy_nonoverlapping(h.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
        }
        h.len()
    })
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(minor_of("3.12.1 (main, Jan 1 2024)"), Some(12));
        assert_eq!(minor_of("3.10.13"), Some(10));
        assert_eq!(minor_of("2.7.18"), None);
        for m in 10..=13 {
            assert!(layout_for(m).is_some());
        }
        assert!(layout_for(9).is_none() && layout_for(14).is_none());
    }

    #[test]
    fn line_table_310() {
        // first line 10: bytes [0,6) line 10, [6,10) no line, [10,14) line 12.
        let t = [6u8, 0, 4, 0x80, 4, 2];
        assert_eq!(line_310(&t, 10, 0), Some(10));
        assert_eq!(line_310(&t, 10, 5), Some(10));
        assert_eq!(line_310(&t, 10, 6), None);
        assert_eq!(line_310(&t, 10, 12), Some(12));
        assert_eq!(line_310(&t, 10, 14), None);
    }

    #[test]
    fn location_table_311() {
        // Entry 1: code 13 (no columns), 2 units, line delta +3 (svarint 6).
        // Entry 2: code 10..12 one-line form, delta +1, 1 unit, 2 column bytes.
        // Entry 3: code 14 (long), 3 units, delta -2 (svarint 5), 3 varints.
        // Entry 4: code 15 (none), 1 unit.
        // Entry 5: short form (code 0), 2 units, 1 column byte: same line.
        let t = [
            0x80 | (13 << 3) | 1,
            6,
            0x80 | (11 << 3),
            1,
            2,
            0x80 | (14 << 3) | 2,
            5,
            0,
            1,
            1,
            0x80 | (15 << 3),
            0x80 | 1,
            3,
        ];
        assert_eq!(line_311(&t, 100, 0), Some(103));
        assert_eq!(line_311(&t, 100, 1), Some(103));
        assert_eq!(line_311(&t, 100, 2), Some(104));
        assert_eq!(line_311(&t, 100, 3), Some(102));
        assert_eq!(line_311(&t, 100, 5), Some(102));
        assert_eq!(line_311(&t, 100, 6), None);
        assert_eq!(line_311(&t, 100, 7), Some(102));
        assert_eq!(line_311(&t, 100, 9), None);
        // A multi-byte varint: delta +100 = svarint 200 = 0b11_001000.
        let t = [0x80 | (13 << 3), 0x40 | 8, 3];
        assert_eq!(line_311(&t, 1, 0), Some(101));
    }

    #[test]
    fn safe_reads_do_not_fault() {
        let v = 0x1122_3344_5566_7788u64;
        assert_eq!(ptr(&Safe, &v as *const u64 as usize), Some(v as usize));
        assert_eq!(ptr(&Safe, 8), None, "a null-page address");
        assert_eq!(ptr(&Safe, usize::MAX - 16), None, "an unmapped address");
        assert_eq!(ptr(&Direct, 8), None);
    }

    /// A walk over fake objects laid out as 3.12's, read with safe reads.
    #[test]
    fn walks_fake_312_frames() {
        let l = layout_for(12).expect("3.12");
        let types = Types {
            code: 0x1000_1000,
            unicode: 0x1000_2000,
            bytes: 0x1000_3000,
        };
        fn put(buf: &mut [u8], off: usize, v: usize) {
            buf[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        }
        fn ascii(types: &Types, text: &str) -> Vec<u8> {
            let mut b = vec![0u8; 40 + text.len() + 1];
            put(&mut b, 8, types.unicode);
            put(&mut b, 16, text.len());
            b[32..36].copy_from_slice(&(0x20u32 | 0x40 | (1 << 2)).to_ne_bytes());
            b[40..40 + text.len()].copy_from_slice(text.as_bytes());
            b
        }
        // Objects live in boxed buffers whose addresses we write into others.
        let lib_file = ascii(&types, "/x/torch/_tensor.py");
        let user_file = ascii(&types, "/home/u/train.py");
        let fname = ascii(&types, "step");
        let mut table = vec![0u8; 32 + 4];
        put(&mut table, 8, types.bytes);
        put(&mut table, 16, 4);
        // 2 units on line first+0 (short form), then 4 units +5 (one-line form 12 => +2? no: use code 13).
        table[32..36].copy_from_slice(&[0x80 | 1, 0, 0x80 | (13 << 3) | 3, 10]);
        let mk_code = |file: &Vec<u8>| {
            let mut c = vec![0u8; l.co_code + 64];
            put(&mut c, 8, types.code);
            c[l.co_firstlineno..l.co_firstlineno + 4].copy_from_slice(&40i32.to_ne_bytes());
            put(&mut c, l.co_filename, file.as_ptr() as usize);
            put(&mut c, l.co_name, fname.as_ptr() as usize);
            put(&mut c, l.co_linetable, table.as_ptr() as usize);
            c
        };
        let lib_code = mk_code(&lib_file);
        let user_code = mk_code(&user_file);
        let mut outer = vec![0u8; 80];
        put(&mut outer, l.fr_code, user_code.as_ptr() as usize);
        put(&mut outer, l.fr_back, 0);
        // Instruction 3 (code units): the second entry, line 40 + 5.
        put(
            &mut outer,
            l.fr_instr,
            user_code.as_ptr() as usize + l.co_code + 6,
        );
        let mut shim = vec![0u8; 80];
        put(&mut shim, l.fr_code, lib_code.as_ptr() as usize);
        put(&mut shim, l.fr_back, outer.as_ptr() as usize);
        shim[l.fr_owner.expect("owner")] = FRAME_OWNED_BY_CSTACK;
        let mut inner = vec![0u8; 80];
        put(&mut inner, l.fr_code, lib_code.as_ptr() as usize);
        put(&mut inner, l.fr_back, shim.as_ptr() as usize);
        put(
            &mut inner,
            l.fr_instr,
            lib_code.as_ptr() as usize + l.co_code,
        );
        assert_eq!(
            walk(&Safe, &l, &types, inner.as_ptr() as usize),
            Ok(Some("/home/u/train.py:45 (step)".into()))
        );
        // A wrong type pointer is a mismatch, not a crash.
        let wrong = Types { code: 0x5, ..types };
        assert!(walk(&Safe, &l, &wrong, inner.as_ptr() as usize).is_err());
        // A frame pointer into nowhere is a mismatch too.
        assert!(walk(&Safe, &l, &types, usize::MAX - 64).is_err());
    }
}
