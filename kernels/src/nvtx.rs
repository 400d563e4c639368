//! A minimal NVTX v3 client: named push/pop ranges that reach whatever NVTX
//! injection the process was started with (CUPTI, Nsight Systems, the
//! streamscope collector).
//!
//! Why not cudarc's `nvtx` module: it dlopens `libnvToolsExt`, the NVTX v2
//! library that CUDA 13 no longer ships. NVTX v3 is header-only: the client
//! reads `NVTX_INJECTION64_PATH`, dlopens that library, calls its
//! `InitializeInjectionNvtx2(getExportTable)`, and the injection writes its
//! handlers into the client's per-module function tables. This file
//! implements that handshake (layout from NVTX's nvtxImpl.h/nvtxTypes.h:
//! export table 1 = callbacks, 3 = version info; each module's table holds
//! pointers to function-pointer slots, index 0 and the last entry null).
//! Without the variable, or when the injection declines, ranges are no-ops.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// NVTX's `NVTX_VERSION` this client implements.
const NVTX_VERSION: u32 = 3;
const ETID_CALLBACKS: u32 = 1;
const ETID_VERSIONINFO: u32 = 3;

/// Callback modules and their slot counts (NVTX_CBID_*_SIZE), by module id 1..=6:
/// CORE, CUDA, OPENCL, CUDART, CORE2, SYNC.
const MODULE_SIZES: [usize; 6] = [16, 9, 15, 7, 16, 7];
const MODULE_CORE: usize = 1;
const CBID_CORE_RANGE_PUSH_A: usize = 9;
const CBID_CORE_RANGE_POP: usize = 11;
const CBID_CORE_NAME_OS_THREAD_A: usize = 14;

/// `int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t)`.
pub type InitFn = unsafe extern "C" fn(GetExportTableFn) -> c_int;
/// `const void* nvtxGetExportTable(uint32_t)`.
pub type GetExportTableFn = unsafe extern "C" fn(u32) -> *const c_void;
type GetModuleFunctionTableFn =
    unsafe extern "C" fn(c_int, *mut *mut *mut AtomicPtr<c_void>, *mut c_uint) -> c_int;
type PushAFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PopFn = unsafe extern "C" fn() -> c_int;
type NameOsThreadAFn = unsafe extern "C" fn(u32, *const c_char);

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: GetModuleFunctionTableFn,
}

#[repr(C)]
struct ExportTableVersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(u32),
}

/// One function-pointer slot per callback id, for every module; written by the injection.
struct Slots {
    modules: Vec<Vec<AtomicPtr<c_void>>>,
    /// Per module: null, &slot[1], ..., &slot[size], null (what NVTX hands out).
    tables: Vec<Vec<*mut AtomicPtr<c_void>>>,
}

// SAFETY: the raw pointers in `tables` point into `modules`, which lives as
// long as the Slots value (a process-wide static) and is only accessed
// through atomics.
unsafe impl Sync for Slots {}
// SAFETY: as above; the pointers never move because the Vecs are never resized.
unsafe impl Send for Slots {}

impl Slots {
    fn new() -> Self {
        let modules: Vec<Vec<AtomicPtr<c_void>>> = MODULE_SIZES
            .iter()
            .map(|&n| {
                (0..=n)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect()
            })
            .collect();
        let tables = modules
            .iter()
            .map(|slots| {
                let mut t: Vec<*mut AtomicPtr<c_void>> = Vec::with_capacity(slots.len() + 1);
                t.push(std::ptr::null_mut());
                for s in &slots[1..] {
                    t.push(s as *const AtomicPtr<c_void> as *mut AtomicPtr<c_void>);
                }
                t.push(std::ptr::null_mut());
                t
            })
            .collect();
        Slots { modules, tables }
    }

    fn get(&self, module: usize, cbid: usize) -> *mut c_void {
        self.modules[module - 1][cbid].load(Ordering::Acquire)
    }
}

static SLOTS: OnceLock<Slots> = OnceLock::new();

fn slots() -> &'static Slots {
    SLOTS.get_or_init(Slots::new)
}

unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut *mut *mut AtomicPtr<c_void>,
    out_size: *mut c_uint,
) -> c_int {
    let index = module as usize;
    if module < 1 || index > MODULE_SIZES.len() {
        return 0;
    }
    let table = &slots().tables[index - 1];
    if !out_table.is_null() {
        // SAFETY: the caller passed a valid out pointer; the table is 'static
        // and the injection only writes through the slot pointers it holds.
        unsafe { *out_table = table.as_ptr() as *mut *mut AtomicPtr<c_void> };
    }
    if !out_size.is_null() {
        // SAFETY: valid out pointer from the caller.
        unsafe { *out_size = MODULE_SIZES[index - 1] as c_uint };
    }
    1
}

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

static CALLBACKS: ExportTableCallbacks = ExportTableCallbacks {
    struct_size: std::mem::size_of::<ExportTableCallbacks>(),
    get_module_function_table,
};

static VERSION_INFO: ExportTableVersionInfo = ExportTableVersionInfo {
    struct_size: std::mem::size_of::<ExportTableVersionInfo>(),
    version: NVTX_VERSION,
    reserved0: 0,
    set_injection_nvtx_version,
};

unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        ETID_CALLBACKS => &CALLBACKS as *const ExportTableCallbacks as *const c_void,
        ETID_VERSIONINFO => &VERSION_INFO as *const ExportTableVersionInfo as *const c_void,
        _ => std::ptr::null(),
    }
}

/// The handlers an injection installed.
#[derive(Clone, Copy, Debug)]
pub struct Injection {
    push_a: Option<PushAFn>,
    pop: Option<PopFn>,
    name_os_thread_a: Option<NameOsThreadAFn>,
}

/// Runs an injection's init against this client's tables; `None` if it declines.
///
/// # Safety
/// `init` must follow NVTX's `InitializeInjectionNvtx2` contract: it may
/// call `get_export_table` and write into the slots it hands out only
/// function pointers of NVTX's signature for each callback id, which stay
/// valid for the life of the process (its library is never unloaded).
pub unsafe fn attach(init: InitFn) -> Option<Injection> {
    let s = slots();
    // SAFETY: the caller's contract: `init` is an InitializeInjectionNvtx2
    // that may call get_export_table and write function pointers into our slots.
    let ok = unsafe { init(get_export_table) };
    if ok == 0 {
        return None;
    }
    let push = s.get(MODULE_CORE, CBID_CORE_RANGE_PUSH_A);
    let pop = s.get(MODULE_CORE, CBID_CORE_RANGE_POP);
    let name = s.get(MODULE_CORE, CBID_CORE_NAME_OS_THREAD_A);
    // SAFETY: a non-null slot holds a function with NVTX's signature for
    // that callback id (nvtxRangePushA, nvtxRangePop, nvtxNameOsThreadA).
    unsafe {
        Some(Injection {
            push_a: (!push.is_null()).then(|| std::mem::transmute::<*mut c_void, PushAFn>(push)),
            pop: (!pop.is_null()).then(|| std::mem::transmute::<*mut c_void, PopFn>(pop)),
            name_os_thread_a: (!name.is_null())
                .then(|| std::mem::transmute::<*mut c_void, NameOsThreadAFn>(name)),
        })
    }
}

fn load_from_env() -> Option<Injection> {
    let path = std::env::var_os("NVTX_INJECTION64_PATH")?;
    // SAFETY: loading the injection library the user named runs its
    // initialisers, exactly as NVTX's own client does.
    let lib = match unsafe { libloading::Library::new(&path) } {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!("fsdp-ref: NVTX ranges off: cannot load NVTX_INJECTION64_PATH {path:?}: {e}");
            return None;
        }
    };
    // SAFETY: the symbol has NVTX's documented InitializeInjectionNvtx2 type.
    let init: InitFn = match unsafe { lib.get::<InitFn>(b"InitializeInjectionNvtx2\0") } {
        Ok(sym) => *sym,
        Err(e) => {
            eprintln!("fsdp-ref: NVTX ranges off: {path:?} has no InitializeInjectionNvtx2: {e}");
            return None;
        }
    };
    // SAFETY: `init` is the library's InitializeInjectionNvtx2 (above), and
    // the library stays loaded for the process (below).
    let injection = unsafe { attach(init) };
    // The injection's handlers live in the library: keep it loaded for the process.
    std::mem::forget(lib);
    injection
}

static ACTIVE: OnceLock<Option<Injection>> = OnceLock::new();

fn active() -> Option<Injection> {
    *ACTIVE.get_or_init(load_from_env)
}

/// Whether an injection is listening.
pub fn is_active() -> bool {
    active().is_some_and(|i| i.push_a.is_some())
}

/// A pushed range; popped when dropped.
#[must_use = "the range ends when this guard is dropped"]
pub struct Range {
    pop: Option<PopFn>,
}

impl Drop for Range {
    fn drop(&mut self) {
        if let Some(pop) = self.pop {
            // SAFETY: handler installed by the injection for nvtxRangePop.
            unsafe {
                pop();
            }
        }
    }
}

fn push_with(injection: Option<Injection>, name: &str) -> Range {
    let Some(inj) = injection else {
        return Range { pop: None };
    };
    let (Some(push), Some(pop)) = (inj.push_a, inj.pop) else {
        return Range { pop: None };
    };
    let Ok(c) = CString::new(name.replace('\0', " ")) else {
        return Range { pop: None };
    };
    // SAFETY: handler installed for nvtxRangePushA; `c` outlives the call
    // (NVTX injections copy the message).
    unsafe {
        push(c.as_ptr());
    }
    Range { pop: Some(pop) }
}

/// Pushes a range named `name` on the calling thread.
pub fn range(name: &str) -> Range {
    push_with(active(), name)
}

/// Names the calling OS thread (e.g. "rank 1") in the trace.
pub fn name_current_thread(name: &str) {
    let Some(f) = active().and_then(|i| i.name_os_thread_a) else {
        return;
    };
    let Ok(c) = CString::new(name.replace('\0', " ")) else {
        return;
    };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    // SAFETY: handler installed for nvtxNameOsThreadA; `c` outlives the call.
    unsafe { f(tid, c.as_ptr()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

    unsafe extern "C" fn fake_push(msg: *const c_char) -> c_int {
        // SAFETY: the client passes a NUL-terminated string.
        let s = unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned();
        SEEN.lock().expect("lock").push(format!("push {s}"));
        0
    }

    unsafe extern "C" fn fake_pop() -> c_int {
        SEEN.lock().expect("lock").push("pop".into());
        0
    }

    /// Does what a real injection does: asks for the version and the CORE
    /// table, checks its size and installs push/pop.
    unsafe extern "C" fn fake_init(get: GetExportTableFn) -> c_int {
        // SAFETY: get_export_table returns our statics for these ids.
        unsafe {
            let v = get(ETID_VERSIONINFO) as *const ExportTableVersionInfo;
            if v.is_null() || (*v).version != 3 {
                return 0;
            }
            let cb = get(ETID_CALLBACKS) as *const ExportTableCallbacks;
            let mut table: *mut *mut AtomicPtr<c_void> = std::ptr::null_mut();
            let mut size: c_uint = 0;
            if ((*cb).get_module_function_table)(1, &mut table, &mut size) == 0 || size != 16 {
                return 0;
            }
            // Slot 0 and the one past the end are null, as NVTX promises.
            if !(*table).is_null() || !(*table.add(17)).is_null() {
                return 0;
            }
            (**table.add(9)).store(fake_push as *mut c_void, Ordering::Release);
            (**table.add(11)).store(fake_pop as *mut c_void, Ordering::Release);
        }
        1
    }

    unsafe extern "C" fn declining_init(_get: GetExportTableFn) -> c_int {
        0
    }

    #[test]
    fn injection_receives_ranges() {
        // SAFETY: fake_init keeps NVTX's contract (its handlers are statics).
        let inj = unsafe { attach(fake_init) }.expect("fake injection accepts");
        {
            let _outer = push_with(Some(inj), "step 3");
            let _inner = push_with(Some(inj), "forward");
        }
        let seen = SEEN.lock().expect("lock").clone();
        assert_eq!(seen, vec!["push step 3", "push forward", "pop", "pop"]);
    }

    #[test]
    fn declined_or_absent_injection_is_a_no_op() {
        // SAFETY: declining_init writes nothing.
        let declined = unsafe { attach(declining_init) };
        assert!(declined.is_none());
        let r = push_with(None, "nothing");
        assert!(r.pop.is_none());
    }

    #[test]
    fn unknown_export_tables_and_modules_are_refused() {
        // SAFETY: calling our own extern functions with valid/null pointers.
        unsafe {
            assert!(get_export_table(2).is_null());
            assert_eq!(
                get_module_function_table(0, std::ptr::null_mut(), std::ptr::null_mut()),
                0
            );
            assert_eq!(
                get_module_function_table(7, std::ptr::null_mut(), std::ptr::null_mut()),
                0
            );
            let mut size: c_uint = 0;
            assert_eq!(
                get_module_function_table(5, std::ptr::null_mut(), &mut size),
                1
            );
            assert_eq!(size, 16);
        }
    }
}
