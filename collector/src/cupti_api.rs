//! libcupti, opened with dlopen and its functions looked up one by one, so
//! a missing library or symbol is an error we report, never a panic.
//! Every call goes through [`Cupti::check`], which prints a failing return
//! code with the function name to stderr, once per function.

// The struct field each symbol is stored in fixes the transmute's target type.
#![allow(clippy::missing_transmute_annotations)]

use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Mutex;

pub type CuptiResult = u32;
pub const SUCCESS: CuptiResult = 0;
pub const ERROR_MAX_LIMIT_REACHED: CuptiResult = 12;

pub const CB_DOMAIN_DRIVER_API: u32 = 1;
pub const CB_DOMAIN_RUNTIME_API: u32 = 2;
pub const CB_DOMAIN_NVTX: u32 = 5;
pub const API_ENTER: u32 = 0;
pub const API_EXIT: u32 = 1;
pub const FLUSH_FORCED: u32 = 1;
pub const THREAD_ID_TYPE_SYSTEM: u32 = 1;

pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub type CallbackFunc = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
pub type TimestampFunc = unsafe extern "C" fn() -> u64;

/// The CUPTI functions the collector calls.
pub struct Cupti {
    pub path: String,
    pub get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult,
    pub get_result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    pub register_callbacks:
        unsafe extern "C" fn(Option<BufferRequested>, Option<BufferCompleted>) -> CuptiResult,
    pub activity_enable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub activity_disable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    pub get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    pub get_num_dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    pub register_timestamp: Option<unsafe extern "C" fn(Option<TimestampFunc>) -> CuptiResult>,
    pub subscribe:
        unsafe extern "C" fn(*mut *mut c_void, Option<CallbackFunc>, *mut c_void) -> CuptiResult,
    pub enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> CuptiResult,
    pub get_callback_name: unsafe extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult,
    pub set_thread_id_type: Option<unsafe extern "C" fn(u32) -> CuptiResult>,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    /// `cuptiActivityEnableRuntimeApi(cbid, enable)` (CUPTI 12.5 and newer).
    pub enable_runtime_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    /// `cuptiActivityEnableDriverApi(cbid, enable)` (CUPTI 12.5 and newer).
    pub enable_driver_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    reported: Mutex<HashSet<&'static str>>,
}

/// Library names tried after `STREAMSCOPE_CUPTI_LIB` / `NVTX_INJECTION64_PATH`.
const NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so", "libcupti.so.12"];

fn dlopen(name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the
    // life of the process (never dlclosed).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    (!h.is_null()).then_some(h)
}

fn dlsym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: dlsym on a live handle with a NUL-terminated name.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

macro_rules! need {
    ($h:expr, $name:literal) => {{
        let p = dlsym($h, $name);
        if p.is_null() {
            return Err(format!("{} has no {}", "libcupti", $name.to_string_lossy()));
        }
        // SAFETY: the symbol is the CUPTI function of that name; the field
        // type is its C signature (enums passed as u32).
        unsafe { std::mem::transmute::<*mut c_void, _>(p) }
    }};
}

macro_rules! optional {
    ($h:expr, $name:literal) => {{
        let p = dlsym($h, $name);
        if p.is_null() {
            None
        } else {
            // SAFETY: as in `need!`.
            Some(unsafe { std::mem::transmute::<*mut c_void, _>(p) })
        }
    }};
}

impl Cupti {
    /// Opens libcupti: `explicit` paths first, then the usual names.
    pub fn open(explicit: &[String]) -> Result<Cupti, String> {
        let mut tried = Vec::new();
        let mut found = None;
        for name in explicit.iter().map(String::as_str).chain(NAMES) {
            if name.is_empty() {
                continue;
            }
            tried.push(name.to_string());
            if let Some(h) = dlopen(name) {
                found = Some((h, name.to_string()));
                break;
            }
        }
        let Some((h, path)) = found else {
            return Err(format!(
                "libcupti not found (tried {}; set LD_LIBRARY_PATH or STREAMSCOPE_CUPTI_LIB)",
                tried.join(", ")
            ));
        };
        Ok(Cupti {
            path,
            get_version: need!(h, c"cuptiGetVersion"),
            get_result_string: need!(h, c"cuptiGetResultString"),
            register_callbacks: need!(h, c"cuptiActivityRegisterCallbacks"),
            activity_enable: need!(h, c"cuptiActivityEnable"),
            activity_disable: need!(h, c"cuptiActivityDisable"),
            flush_all: need!(h, c"cuptiActivityFlushAll"),
            get_next_record: need!(h, c"cuptiActivityGetNextRecord"),
            get_num_dropped: need!(h, c"cuptiActivityGetNumDroppedRecords"),
            register_timestamp: optional!(h, c"cuptiActivityRegisterTimestampCallback"),
            subscribe: need!(h, c"cuptiSubscribe"),
            enable_callback: need!(h, c"cuptiEnableCallback"),
            get_callback_name: need!(h, c"cuptiGetCallbackName"),
            set_thread_id_type: optional!(h, c"cuptiSetThreadIdType"),
            get_timestamp: need!(h, c"cuptiGetTimestamp"),
            enable_runtime_api: optional!(h, c"cuptiActivityEnableRuntimeApi"),
            enable_driver_api: optional!(h, c"cuptiActivityEnableDriverApi"),
            reported: Mutex::new(HashSet::new()),
        })
    }

    /// CUPTI's text for a result code.
    pub fn result_string(&self, r: CuptiResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuptiGetResultString writes a pointer to a static string.
        let rc = unsafe { (self.get_result_string)(r, &mut p) };
        if rc != SUCCESS || p.is_null() {
            return format!("CUPTI error {r}");
        }
        // SAFETY: CUPTI returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Ok for success; otherwise prints "streamscope: FUNC failed: ..." to
    /// stderr (once per function) and returns the message.
    pub fn check(&self, func: &'static str, r: CuptiResult) -> Result<(), String> {
        if r == SUCCESS {
            return Ok(());
        }
        let msg = format!("{func} failed: {} ({r})", self.result_string(r));
        let first = self
            .reported
            .lock()
            .map(|mut s| s.insert(func))
            .unwrap_or(false);
        if first {
            crate::warn!("streamscope: {msg}");
        }
        Err(msg)
    }

    /// CUPTI's name of callback `cbid` in `domain` ("" if unknown).
    pub fn callback_name(&self, domain: u32, cbid: u32) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuptiGetCallbackName writes a pointer to a string CUPTI owns.
        let rc = unsafe { (self.get_callback_name)(domain, cbid, &mut p) };
        if rc != SUCCESS || p.is_null() {
            return String::new();
        }
        // SAFETY: NUL-terminated string owned by CUPTI.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    pub fn version(&self) -> Option<u32> {
        let mut v = 0u32;
        // SAFETY: writes one u32.
        let rc = unsafe { (self.get_version)(&mut v) };
        self.check("cuptiGetVersion", rc).ok().map(|_| v)
    }
}
