//! The Python file:line behind a host synchronization, through the C API
//! (the fallback of pyframes.rs, for Python versions whose layout it does
//! not know), and what the Python hooks hand the collector (optimizer
//! steps, torch.profiler starts).
//!
//! Called from CUPTI's API-enter callback of sync and memcpy functions, on
//! the thread that makes the call. It reads the Python stack only when this
//! thread already holds the GIL (`Py_IsInitialized` and `PyGILState_Check`
//! say so, and this thread's GIL state is the current thread state), no
//! exception is pending, and the cyclic GC is paused for the walk (3.10+,
//! so no finalizer runs in the middle); it never takes the GIL, so it cannot
//! deadlock, and it touches only objects it owns a reference to, releasing
//! each one. When the CUDA call came from code that released the GIL
//! (e.g. `torch.cuda.synchronize()`), or from a thread without Python, it
//! records nothing. The functions are looked up with `dlsym(RTLD_DEFAULT)`,
//! so a process without Python symbols costs one failed lookup.

// The struct field each symbol is stored in fixes the transmute's target type.
#![allow(clippy::missing_transmute_annotations)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Python locations by CUDA correlation id, waiting for their API record,
/// and the Python line that captured each CUDA graph node (kept for the
/// run: every replay of the graph runs the node again).
#[derive(Default)]
pub struct PyLines {
    map: Mutex<HashMap<u32, String>>,
    nodes: Mutex<HashMap<u64, std::sync::Arc<str>>>,
    /// Native callers (return addresses, `native_caller`) of syncs with no
    /// Python line, by correlation id.
    native: Mutex<HashMap<u32, crate::native_caller::Frames>>,
}

/// At most this many graph nodes keep their capturing line (a job that
/// captures graph after graph without end keeps its first ones).
const MAX_GRAPH_NODES: usize = 1 << 20;

/// More than this many unclaimed locations means their API records were
/// not recorded (outside the window, dropped): start over.
const MAX_PENDING: usize = 1 << 16;

impl PyLines {
    pub fn insert(&self, correlation: u32, location: String) {
        if let Ok(mut m) = self.map.lock() {
            if m.len() >= MAX_PENDING {
                m.clear();
            }
            m.insert(correlation, location);
        }
    }

    /// The native caller of a sync with no Python line.
    pub fn insert_native(&self, correlation: u32, ip: crate::native_caller::Frames) {
        if let Ok(mut m) = self.native.lock() {
            if m.len() >= MAX_PENDING {
                m.clear();
            }
            m.insert(correlation, ip);
        }
    }

    /// The native caller noted for `correlation`, once.
    pub fn take_native(&self, correlation: u32) -> Option<crate::native_caller::Frames> {
        let mut m = self.native.lock().ok()?;
        if m.is_empty() {
            return None;
        }
        m.remove(&correlation)
    }

    pub fn take(&self, correlation: u32) -> Option<String> {
        let mut m = self.map.lock().ok()?;
        if m.is_empty() {
            return None;
        }
        m.remove(&correlation)
    }

    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// A graph node was made (during stream capture, inside the launch
    /// call that became it) at `location`.
    pub fn node_created(&self, node: u64, location: String) {
        if let Ok(mut m) = self.nodes.lock() {
            if m.len() < MAX_GRAPH_NODES {
                m.insert(node, location.into());
            }
        }
    }

    /// Graph node `copy` was cloned from `original` (instantiating an
    /// executable graph clones every node): it keeps the original's line.
    pub fn node_cloned(&self, original: u64, copy: u64) {
        if let Ok(mut m) = self.nodes.lock() {
            if let Some(loc) = m.get(&original).cloned() {
                if m.len() < MAX_GRAPH_NODES {
                    m.insert(copy, loc);
                }
            }
        }
    }

    /// The line that captured graph node `node`, when known.
    pub fn node_line(&self, node: u64) -> Option<std::sync::Arc<str>> {
        let m = self.nodes.lock().ok()?;
        m.get(&node).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

type Obj = *mut c_void;

/// The CPython C-API functions we use (all in the stable ABI of 3.9+,
/// except the unchecked thread-state getter and the 3.10+ GC switches).
#[derive(Clone, Copy)]
pub struct PyApi {
    pub is_initialized: unsafe extern "C" fn() -> c_int,
    pub gil_check: unsafe extern "C" fn() -> c_int,
    /// PyThreadState_GetUnchecked / _PyThreadState_UncheckedGet: the
    /// current thread state, NULL without aborting.
    pub thread_state: Option<unsafe extern "C" fn() -> Obj>,
    /// PyGILState_GetThisThreadState: this OS thread's thread state.
    pub this_thread_state: unsafe extern "C" fn() -> Obj,
    /// PyGC_Disable (returns whether the GC was enabled) / PyGC_Enable.
    pub gc_disable: Option<unsafe extern "C" fn() -> c_int>,
    pub gc_enable: Option<unsafe extern "C" fn() -> c_int>,
    pub err_occurred: unsafe extern "C" fn() -> Obj,
    pub err_clear: unsafe extern "C" fn(),
    /// PyEval_GetFrame: borrowed reference.
    pub get_frame: unsafe extern "C" fn() -> Obj,
    /// PyFrame_GetBack: new reference.
    pub frame_back: unsafe extern "C" fn(Obj) -> Obj,
    /// PyFrame_GetCode: new reference.
    pub frame_code: unsafe extern "C" fn(Obj) -> Obj,
    pub frame_line: unsafe extern "C" fn(Obj) -> c_int,
    /// PyObject_GetAttrString: new reference.
    pub get_attr: unsafe extern "C" fn(Obj, *const c_char) -> Obj,
    /// PyUnicode_AsUTF8: buffer owned by the string object.
    pub as_utf8: unsafe extern "C" fn(Obj) -> *const c_char,
    pub dec_ref: unsafe extern "C" fn(Obj),
}

fn sym(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

macro_rules! resolve {
    ($name:literal) => {{
        let p = sym($name);
        if p.is_null() {
            return None;
        }
        // SAFETY: the symbol is the CPython function of that name, whose C
        // signature is the field's type.
        unsafe { std::mem::transmute::<*mut c_void, _>(p) }
    }};
}

impl PyApi {
    /// The functions of the Python in this process, if any.
    pub fn lookup() -> Option<PyApi> {
        let thread_state = {
            let mut p = sym(c"PyThreadState_GetUnchecked");
            if p.is_null() {
                p = sym(c"_PyThreadState_UncheckedGet");
            }
            if p.is_null() {
                None
            } else {
                // SAFETY: both names are `PyThreadState *(void)`.
                Some(unsafe {
                    std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> Obj>(p)
                })
            }
        };
        let int_fn = |name: &CStr| {
            let p = sym(name);
            // SAFETY: PyGC_Disable and PyGC_Enable are `int (void)`.
            (!p.is_null()).then(|| unsafe {
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(p)
            })
        };
        let (gc_disable, gc_enable) = match (int_fn(c"PyGC_Disable"), int_fn(c"PyGC_Enable")) {
            (Some(d), Some(e)) => (Some(d), Some(e)),
            _ => (None, None),
        };
        Some(PyApi {
            is_initialized: resolve!(c"Py_IsInitialized"),
            gil_check: resolve!(c"PyGILState_Check"),
            thread_state,
            this_thread_state: resolve!(c"PyGILState_GetThisThreadState"),
            gc_disable,
            gc_enable,
            err_occurred: resolve!(c"PyErr_Occurred"),
            err_clear: resolve!(c"PyErr_Clear"),
            get_frame: resolve!(c"PyEval_GetFrame"),
            frame_back: resolve!(c"PyFrame_GetBack"),
            frame_code: resolve!(c"PyFrame_GetCode"),
            frame_line: resolve!(c"PyFrame_GetLineNumber"),
            get_attr: resolve!(c"PyObject_GetAttrString"),
            as_utf8: resolve!(c"PyUnicode_AsUTF8"),
            dec_ref: resolve!(c"Py_DecRef"),
        })
    }
}

static API: OnceLock<Option<PyApi>> = OnceLock::new();

/// A host range the Python hooks noted: (thread id, start ns, end ns,
/// optimizer key: 0 when not said), on CLOCK_MONOTONIC (Python's
/// `time.monotonic_ns`, the trace's clock).
pub type HostRange = (u32, i64, i64, u64);

/// Optimizer steps noted and not yet written (the writer drains them with
/// every batch). Bounded: past [`MAX_HOST_RANGES`] new ones are counted,
/// not kept (a process that never starts CUDA has no writer).
static OPTIMIZER_STEPS: Mutex<Vec<HostRange>> = Mutex::new(Vec::new());
static OPTIMIZER_STEPS_LOST: AtomicU64 = AtomicU64::new(0);
const MAX_HOST_RANGES: usize = 1 << 16;
/// When torch.profiler was first started (CLOCK_MONOTONIC ns), 0 = never.
static TORCH_PROFILER_AT: AtomicI64 = AtomicI64::new(0);

/// Takes the optimizer steps noted so far, and how many were lost.
pub fn take_optimizer_steps() -> (Vec<HostRange>, u64) {
    let v = OPTIMIZER_STEPS
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    (v, OPTIMIZER_STEPS_LOST.load(Ordering::Relaxed))
}

/// When torch.profiler started in this process, if it did.
pub fn torch_profiler_started_at() -> Option<i64> {
    let t = TORCH_PROFILER_AT.load(Ordering::Relaxed);
    (t != 0).then_some(t)
}

/// Called by python/sitecustomize.py (ctypes.PyDLL, GIL held) after every
/// `torch.optim.Optimizer.step()`: its start and end, CLOCK_MONOTONIC ns
/// (a sitecustomize of before [`streamscope_optimizer_step_of`]).
#[unsafe(no_mangle)]
pub extern "C" fn streamscope_optimizer_step(start_ns: i64, end_ns: i64) {
    streamscope_optimizer_step_of(start_ns, end_ns, 0);
}

/// [`streamscope_optimizer_step`] with the optimizer's key (Python's
/// `id()` of the optimizer object; 0: not said), the range's
/// `protocol::OPTIMIZER_KEY_ARG`.
#[unsafe(no_mangle)]
pub extern "C" fn streamscope_optimizer_step_of(start_ns: i64, end_ns: i64, key: u64) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::gettid() } as u32;
        match OPTIMIZER_STEPS.lock() {
            Ok(mut v) if v.len() < MAX_HOST_RANGES => {
                v.push((tid, start_ns, end_ns.max(start_ns), key))
            }
            _ => {
                OPTIMIZER_STEPS_LOST.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
}

/// Optimizer steps noted and not yet written (tests of the hooks).
#[unsafe(no_mangle)]
pub extern "C" fn streamscope_debug_pending_optimizer_steps() -> usize {
    std::panic::catch_unwind(|| OPTIMIZER_STEPS.lock().map(|v| v.len()).unwrap_or(0)).unwrap_or(0)
}

/// What stderr and the trace say when torch.profiler starts while recorded.
pub const TORCH_PROFILER_MESSAGE: &str = "torch.profiler was started while recorded: its CUDA events are missing (CUPTI takes one subscriber per process; streamscope's trace has them)";

/// Called by python/sitecustomize.py when torch.profiler starts with CUDA
/// activities: says so once on stderr; returns 1 the first time.
#[unsafe(no_mangle)]
pub extern "C" fn streamscope_torch_profiler_started() -> c_int {
    std::panic::catch_unwind(|| {
        let now = crate::process_info::monotonic_ns().max(1);
        if TORCH_PROFILER_AT
            .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            crate::warn!("streamscope: {TORCH_PROFILER_MESSAGE}");
            1
        } else {
            0
        }
    })
    .unwrap_or(0)
}

/// The location of the Python code running on this thread, if this thread
/// holds the GIL. See the module docs.
pub fn current_location() -> Option<String> {
    let api = API.get_or_init(PyApi::lookup).as_ref()?;
    location_with(api)
}

/// Frames of these files are library internals; the first frame outside
/// them (walking outwards) is the user's line.
pub fn is_library_file(file: &str) -> bool {
    file.starts_with('<') || file.contains("/torch/") || file.contains("/contextlib.py")
}

/// "path/file.py:123 (function)".
pub fn format_location(file: &str, line: i32, function: &str) -> String {
    format!("{file}:{line} ({function})")
}

/// Deepest frames looked at.
const MAX_DEPTH: usize = 64;

/// [`current_location`] with explicit functions (tests pass fakes).
pub fn location_with(api: &PyApi) -> Option<String> {
    // SAFETY: each function is the CPython one (or a test fake with the same
    // contract). Nothing past the GIL checks runs unless this thread holds
    // the GIL; we never acquire it. Every new reference (frame_back,
    // frame_code, get_attr) is released with Py_DecRef once read; the
    // borrowed frame of PyEval_GetFrame is not.
    unsafe {
        if (api.is_initialized)() == 0 || (api.gil_check)() != 1 {
            return None;
        }
        // PyGILState_Check is also 1 when the GIL state API is off (sub-
        // interpreters); then only this comparison says the GIL is ours.
        let current = api
            .thread_state
            .map(|f| f())
            .unwrap_or(std::ptr::null_mut());
        if current.is_null() || (api.this_thread_state)() != current {
            return None;
        }
        if !(api.err_occurred)().is_null() {
            return None; // an exception is pending: leave the interpreter alone
        }
        // No collection (and so no finalizer) may run while we hold frames.
        let gc_was_enabled = match api.gc_disable {
            Some(disable) => disable() != 0,
            None => false,
        };
        let found = walk(api);
        if gc_was_enabled {
            if let Some(enable) = api.gc_enable {
                enable();
            }
        }
        found
    }
}

/// The frame walk of [`location_with`].
///
/// # Safety
/// The caller holds the GIL on this thread, with no exception pending.
unsafe fn walk(api: &PyApi) -> Option<String> {
    // SAFETY: as in `location_with`; the GIL is held (the caller checked).
    unsafe {
        let str_attr = |obj: Obj, name: &CStr| -> Option<String> {
            let o = (api.get_attr)(obj, name.as_ptr());
            if o.is_null() {
                (api.err_clear)();
                return None;
            }
            let p = (api.as_utf8)(o);
            let s = if p.is_null() {
                (api.err_clear)();
                None
            } else {
                Some(CStr::from_ptr(p).to_string_lossy().into_owned())
            };
            (api.dec_ref)(o);
            s
        };
        let mut frame = (api.get_frame)();
        let mut owned = false;
        let mut innermost: Option<String> = None;
        let mut found: Option<String> = None;
        for _ in 0..MAX_DEPTH {
            if frame.is_null() {
                break;
            }
            let code = (api.frame_code)(frame);
            if !code.is_null() {
                let file = str_attr(code, c"co_filename").unwrap_or_default();
                let func = str_attr(code, c"co_name").unwrap_or_default();
                (api.dec_ref)(code);
                let line = (api.frame_line)(frame);
                let loc = format_location(&file, line, &func);
                if !is_library_file(&file) {
                    found = Some(loc);
                } else if innermost.is_none() {
                    innermost = Some(loc);
                }
            }
            if found.is_some() {
                break;
            }
            let back = (api.frame_back)(frame);
            if owned {
                (api.dec_ref)(frame);
            }
            frame = back;
            owned = true;
        }
        if owned && !frame.is_null() {
            (api.dec_ref)(frame);
        }
        found.or(innermost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    /// Fake frames: index+1 as the pointer; frame i's code is the same pointer.
    struct FakeFrame {
        file: &'static CStr,
        func: &'static CStr,
        line: c_int,
    }
    static FRAMES: [FakeFrame; 3] = [
        FakeFrame {
            file: c"/usr/lib/python3/site-packages/torch/_tensor.py",
            func: c"item",
            line: 10,
        },
        FakeFrame {
            file: c"/home/u/train.py",
            func: c"step",
            line: 42,
        },
        FakeFrame {
            file: c"/home/u/train.py",
            func: c"<module>",
            line: 99,
        },
    ];
    static CALLS_PAST_GIL: AtomicUsize = AtomicUsize::new(0);
    static REFS: AtomicI64 = AtomicI64::new(0);
    static GIL: AtomicUsize = AtomicUsize::new(0);

    // Fake attribute objects: tag in the high bits: 0x1000 file, 0x2000 func.
    unsafe extern "C" fn init() -> c_int {
        1
    }
    unsafe extern "C" fn gil() -> c_int {
        GIL.load(Ordering::SeqCst) as c_int
    }
    static THIS_THREAD: AtomicUsize = AtomicUsize::new(0x77);
    static GC_ENABLED: AtomicUsize = AtomicUsize::new(1);
    static GC_OFF_DURING_WALK: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn current_ts() -> Obj {
        0x77 as Obj
    }
    unsafe extern "C" fn this_ts() -> Obj {
        THIS_THREAD.load(Ordering::SeqCst) as Obj
    }
    unsafe extern "C" fn gc_disable() -> c_int {
        GC_ENABLED.swap(0, Ordering::SeqCst) as c_int
    }
    unsafe extern "C" fn gc_enable() -> c_int {
        GC_ENABLED.swap(1, Ordering::SeqCst) as c_int
    }
    unsafe extern "C" fn no_err() -> Obj {
        std::ptr::null_mut()
    }
    unsafe extern "C" fn clear() {}
    unsafe extern "C" fn get_frame() -> Obj {
        CALLS_PAST_GIL.fetch_add(1, Ordering::SeqCst);
        if GC_ENABLED.load(Ordering::SeqCst) == 0 {
            GC_OFF_DURING_WALK.fetch_add(1, Ordering::SeqCst);
        }
        1 as Obj
    }
    unsafe extern "C" fn back(f: Obj) -> Obj {
        let i = f as usize;
        if i >= FRAMES.len() {
            return std::ptr::null_mut();
        }
        REFS.fetch_add(1, Ordering::SeqCst);
        (i + 1) as Obj
    }
    unsafe extern "C" fn code(f: Obj) -> Obj {
        REFS.fetch_add(1, Ordering::SeqCst);
        f
    }
    unsafe extern "C" fn line(f: Obj) -> c_int {
        FRAMES[f as usize - 1].line
    }
    unsafe extern "C" fn attr(o: Obj, name: *const c_char) -> Obj {
        REFS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the walker passes NUL-terminated literals.
        let n = unsafe { CStr::from_ptr(name) };
        let tag = if n == c"co_filename" { 0x1000 } else { 0x2000 };
        (o as usize | tag) as Obj
    }
    unsafe extern "C" fn utf8(o: Obj) -> *const c_char {
        let v = o as usize;
        let f = &FRAMES[(v & 0xff) - 1];
        if v & 0x1000 != 0 {
            f.file.as_ptr()
        } else {
            f.func.as_ptr()
        }
    }
    unsafe extern "C" fn dec(_o: Obj) {
        REFS.fetch_sub(1, Ordering::SeqCst);
    }

    fn fake() -> PyApi {
        PyApi {
            is_initialized: init,
            gil_check: gil,
            thread_state: Some(current_ts),
            this_thread_state: this_ts,
            gc_disable: Some(gc_disable),
            gc_enable: Some(gc_enable),
            err_occurred: no_err,
            err_clear: clear,
            get_frame,
            frame_back: back,
            frame_code: code,
            frame_line: line,
            get_attr: attr,
            as_utf8: utf8,
            dec_ref: dec,
        }
    }

    #[test]
    fn without_the_gil_nothing_is_read_and_with_it_the_user_frame_is_found() {
        // One test: the fakes share statics.
        GIL.store(1, Ordering::SeqCst);
        THIS_THREAD.store(0x55, Ordering::SeqCst);
        assert_eq!(
            location_with(&fake()),
            None,
            "another thread's state is current"
        );
        assert_eq!(CALLS_PAST_GIL.load(Ordering::SeqCst), 0);
        let no_ts = PyApi {
            thread_state: None,
            ..fake()
        };
        THIS_THREAD.store(0x77, Ordering::SeqCst);
        assert_eq!(
            location_with(&no_ts),
            None,
            "no way to read the current state"
        );
        assert_eq!(CALLS_PAST_GIL.load(Ordering::SeqCst), 0);
        GIL.store(0, Ordering::SeqCst);
        assert_eq!(location_with(&fake()), None);
        assert_eq!(
            CALLS_PAST_GIL.load(Ordering::SeqCst),
            0,
            "no frame function may run without the GIL"
        );
        GIL.store(1, Ordering::SeqCst);
        assert_eq!(
            location_with(&fake()).as_deref(),
            Some("/home/u/train.py:42 (step)")
        );
        assert_eq!(
            REFS.load(Ordering::SeqCst),
            0,
            "every new reference released"
        );
        assert_eq!(GC_OFF_DURING_WALK.load(Ordering::SeqCst), 1, "GC paused");
        assert_eq!(GC_ENABLED.load(Ordering::SeqCst), 1, "and enabled again");
        // A GC the user had disabled stays disabled.
        GC_ENABLED.store(0, Ordering::SeqCst);
        assert!(location_with(&fake()).is_some());
        assert_eq!(GC_ENABLED.load(Ordering::SeqCst), 0);
        GC_ENABLED.store(1, Ordering::SeqCst);
        // Without the 3.10 switches the walk still works.
        let old = PyApi {
            gc_disable: None,
            gc_enable: None,
            ..fake()
        };
        assert!(location_with(&old).is_some());
        assert_eq!(REFS.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn library_files() {
        assert!(is_library_file(
            "/x/site-packages/torch/nn/modules/module.py"
        ));
        assert!(is_library_file("<frozen runpy>"));
        assert!(!is_library_file("examples/torch_fsdp2.py"));
    }

    #[test]
    fn lines_are_claimed_once() {
        let p = PyLines::default();
        p.insert(7, "a.py:1 (f)".into());
        assert_eq!(p.take(8), None);
        assert_eq!(p.take(7).as_deref(), Some("a.py:1 (f)"));
        assert_eq!(p.take(7), None);
    }
}
