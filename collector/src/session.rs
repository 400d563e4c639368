//! The running collector: CUPTI set-up, the buffer and API callbacks, and
//! the writer thread that turns buffers into Perfetto batches.
//!
//! Threads: CUPTI calls the buffer callbacks from its own threads (or the
//! one flushing); they only allocate, count and queue. The writer thread
//! drains the queue, converts, writes a batch, and calls
//! cuptiActivityFlushAll about once a second, so a crash loses at most the
//! last second. atexit and the SIGINT/SIGTERM handlers ask it for a final
//! flush and wait for it with a time bound.

use std::alloc::Layout;
use std::ffi::c_void;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use streamscope_core::model::Device;
use streamscope_core::perfetto::writer::PerfettoWriter;
use streamscope_core::protocol;

use crate::capture::{CaptureSpec, CaptureWindow, Trigger};
use crate::convert::{normalize_api_name, Converter, HostInfo};
use crate::cupti_api::*;
use crate::driver::Driver;
use crate::flush_sync::FlushSync;
use crate::process_info;
use crate::python::{self, PyLines};
use crate::queue::{BoundedQueue, BufferBudget};
use crate::records::{self, kind};

/// Bytes of one activity buffer handed to CUPTI.
const BUFFER_BYTES: usize = 2 << 20;
/// Completed buffers waiting for the writer.
const QUEUE_BUFFERS: usize = 64;
/// Buffers allocated at once (held by CUPTI, queued or being converted):
/// bounds the collector's buffer memory to 144 MiB. Past it CUPTI is handed
/// no buffer and drops records, which it counts.
const MAX_BUFFERS: usize = QUEUE_BUFFERS + 8;
static BUDGET: BufferBudget = BufferBudget::new(MAX_BUFFERS);
/// How often the writer asks CUPTI for what it has (completed records
/// only) and writes it: what a SIGKILL can lose, plus CUPTI's own delay.
/// `STREAMSCOPE_FLUSH_MS` overrides it (at least 10 ms).
const FLUSH_PERIOD: Duration = Duration::from_millis(100);

fn flush_period() -> Duration {
    std::env::var(streamscope_core::protocol::env::FLUSH_MS)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(FLUSH_PERIOD, |ms| Duration::from_millis(ms.max(10)))
}
/// How often the progress file for `streamscope record` is rewritten.
const PROGRESS_PERIOD: Duration = Duration::from_millis(250);
/// How long exit and signal handlers wait for the final flush (after that
/// the writer is abandoned: see flush_sync.rs).
pub const EXIT_WAIT: Duration = Duration::from_secs(3);
pub const SIGNAL_WAIT: Duration = Duration::from_secs(3);
/// How long a crash (SIGSEGV & co.) waits for the final flush before the
/// process dies as it would have.
pub const CRASH_WAIT: Duration = Duration::from_millis(1500);

/// Runtime API functions whose Python caller is recorded (host syncs).
const SYNC_APIS: &[&str] = protocol::HOST_SYNC_APIS;

/// A CUPTI activity buffer we allocated.
pub struct Buffer {
    ptr: *mut u8,
    valid: usize,
}

// SAFETY: the buffer is plain memory owned by this value alone once CUPTI
// has completed it; moving it to the writer thread is sound.
unsafe impl Send for Buffer {}

fn buffer_layout() -> Option<Layout> {
    Layout::from_size_align(BUFFER_BYTES, 8).ok()
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let (false, Some(l)) = (self.ptr.is_null(), buffer_layout()) {
            // SAFETY: ptr came from `alloc(buffer_layout())` in `buffer_requested`.
            unsafe { std::alloc::dealloc(self.ptr, l) };
            BUDGET.release();
        }
    }
}

pub struct Session {
    pub cupti: Cupti,
    pid: u32,
    queue: BoundedQueue<Buffer>,
    python: Arc<PyLines>,
    window: Arc<CaptureWindow>,
    cupti_dropped: AtomicU64,
    sync: FlushSync,
    sync_cbids: Vec<u32>,
    /// The [`COPY_APIS`] among `sync_cbids`.
    copy_cbids: Vec<u32>,
    profiler_start: Vec<(u32, u32)>,
    profiler_stop: Vec<(u32, u32)>,
}

static SESSION: OnceLock<Session> = OnceLock::new();

pub fn session() -> Option<&'static Session> {
    SESSION.get()
}

fn for_each_record(cupti: &Cupti, ptr: *mut u8, valid: usize, mut f: impl FnMut(*const u8)) {
    let mut rec: *mut u8 = std::ptr::null_mut();
    loop {
        // SAFETY: ptr/valid describe a buffer CUPTI completed; rec is the
        // cursor CUPTI advances.
        let rc = unsafe { (cupti.get_next_record)(ptr, valid, &mut rec) };
        if rc != SUCCESS {
            if rc != ERROR_MAX_LIMIT_REACHED {
                let _ = cupti.check("cuptiActivityGetNextRecord", rc);
            }
            return;
        }
        f(rec);
    }
}

unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let _ = std::panic::catch_unwind(|| {
        // Declining (a null buffer of size 0) is CUPTI's documented way to
        // refuse: it drops records and counts them for
        // cuptiActivityGetNumDroppedRecords.
        let p = match buffer_layout() {
            Some(l) if BUDGET.try_acquire() => {
                // SAFETY: non-zero size layout.
                let p = unsafe { std::alloc::alloc(l) };
                if p.is_null() {
                    BUDGET.release();
                }
                p
            }
            _ => std::ptr::null_mut(),
        };
        // SAFETY: CUPTI passes valid out-pointers.
        unsafe {
            *buffer = p;
            *size = if p.is_null() { 0 } else { BUFFER_BYTES };
            *max_records = 0;
        }
    });
}

unsafe extern "C" fn buffer_completed(
    ctx: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = std::panic::catch_unwind(|| {
        let buf = Buffer { ptr: buffer, valid };
        let Some(s) = session() else { return };
        if s.forked() || !s.sync.may_call_cupti() {
            return; // freed (by `buf`), nothing else: see `Session::forked`
        }
        let mut dropped = 0usize;
        // SAFETY: ctx/stream are the ones CUPTI passed for this buffer.
        let rc = unsafe { (s.cupti.get_num_dropped)(ctx, stream, &mut dropped) };
        if s.cupti
            .check("cuptiActivityGetNumDroppedRecords", rc)
            .is_ok()
            && dropped > 0
        {
            s.cupti_dropped.fetch_add(dropped as u64, Ordering::Relaxed);
        }
        if valid == 0 || buffer.is_null() || s.sync.finished.load(Ordering::SeqCst) {
            return; // nothing in it, or no writer any more
        }
        // Never waits: this may run on the writer thread itself (inside
        // cuptiActivityFlushAll), and CUPTI's threads must not stall.
        let _ = s.queue.push(buf, Duration::ZERO, |b| {
            let mut n = 0u64;
            for_each_record(&s.cupti, b.ptr, b.valid, |_| n += 1);
            n
        });
    });
}

unsafe extern "C" fn timestamp() -> u64 {
    std::panic::catch_unwind(|| process_info::monotonic_ns() as u64).unwrap_or(0)
}

thread_local! {
    static NVTX_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static NVTX_OPEN_AT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The message of an `nvtxEventAttributes_t` when it is ASCII.
///
/// # Safety
/// `attr` is null or points at an nvtxEventAttributes_t (v2 layout).
unsafe fn attr_message<'a>(attr: *const u8) -> Option<&'a std::ffi::CStr> {
    if attr.is_null() {
        return None;
    }
    // SAFETY: messageType at offset 32 and message at 40 in the v2 layout.
    unsafe {
        let mtype = std::ptr::read_unaligned(attr.add(32) as *const i32);
        let msg = std::ptr::read_unaligned(attr.add(40) as *const *const std::ffi::c_char);
        (mtype == 1 && !msg.is_null()).then(|| std::ffi::CStr::from_ptr(msg))
    }
}

/// Whether a `cudaMemcpy`/`cudaMemcpyAsync` call (params `dst, src, count,
/// kind`) copies device to device: such a copy never blocks the host, so
/// its Python line is not worth reading (FSDP2 makes ~100 a step).
///
/// # Safety
/// `params` is null or points at the params struct of one of
/// [`COPY_APIS`].
unsafe fn is_device_to_device(params: *const c_void) -> bool {
    const CUDA_MEMCPY_DEVICE_TO_DEVICE: i32 = 3;
    // SAFETY: `kind` follows three pointer-sized fields in those structs.
    !params.is_null()
        && unsafe { std::ptr::read_unaligned((params as *const u8).add(24) as *const i32) }
            == CUDA_MEMCPY_DEVICE_TO_DEVICE
}

/// Runtime copies whose params begin `dst, src, count, kind`.
const COPY_APIS: &[&str] = &[
    "cudaMemcpy",
    "cudaMemcpy_ptds",
    "cudaMemcpyAsync",
    "cudaMemcpyAsync_ptsz",
];

unsafe extern "C" fn api_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    let _ = std::panic::catch_unwind(|| {
        let Some(s) = session() else { return };
        if data.is_null() || s.forked() {
            return;
        }
        if domain == CB_DOMAIN_NVTX {
            // SAFETY: for the NVTX domain CUPTI passes a CUpti_NvtxData.
            let d = unsafe { std::ptr::read_unaligned(data as *const records::RawNvtxData) };
            // SAFETY: the params struct of each function, per nvToolsExt's
            // callback ABI (pointers first).
            unsafe { s.nvtx(cbid, d.function_params as *const u8) };
            return;
        }
        // SAFETY: for API domains CUPTI passes a CUpti_CallbackData.
        let d = unsafe { std::ptr::read_unaligned(data as *const records::RawCallbackData) };
        if d.callback_site == API_ENTER {
            if domain == CB_DOMAIN_RUNTIME_API
                && s.sync_cbids.contains(&cbid)
                // SAFETY: the params of a runtime function CUPTI is calling.
                && !(s.copy_cbids.contains(&cbid) && unsafe { is_device_to_device(d.function_params) })
            {
                if let Some(loc) =
                    crate::pyframes::current_location().or_else(python::current_location)
                {
                    s.python.insert(d.correlation_id, loc);
                }
            }
            if s.profiler_stop.contains(&(domain, cbid)) {
                s.window.close(process_info::monotonic_ns());
            }
        } else if d.callback_site == API_EXIT && s.profiler_start.contains(&(domain, cbid)) {
            s.window.open(process_info::monotonic_ns());
        }
    });
}

impl Session {
    /// True in a forked child. It has no writer thread, and a mutex the
    /// parent's threads held at fork (the queue's, the Python lines') stays
    /// locked for ever there, so the callbacks must touch none of them.
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Adds the records CUPTI dropped from its global queue (for instance
    /// while `buffer_requested` declined): the count resets on each read.
    fn count_global_drops(&self) {
        let mut dropped = 0usize;
        // SAFETY: a NULL context asks for the global queue; writes one usize.
        let rc = unsafe { (self.cupti.get_num_dropped)(std::ptr::null_mut(), 0, &mut dropped) };
        if self
            .cupti
            .check("cuptiActivityGetNumDroppedRecords", rc)
            .is_ok()
            && dropped > 0
        {
            self.cupti_dropped
                .fetch_add(dropped as u64, Ordering::Relaxed);
        }
    }

    /// NVTX push/pop tracking for `--capture-range nvtx:NAME`.
    ///
    /// # Safety
    /// `params` is null or the params struct of NVTX function `cbid`.
    unsafe fn nvtx(&self, cbid: u32, params: *const u8) {
        let Trigger::Nvtx(target) = &self.window.spec().trigger else {
            return;
        };
        // cbids: 8 RangePushA, 10 RangePushEx, 11 RangePop, 33 DomainRangePushEx, 34 DomainRangePop.
        let name: Option<&std::ffi::CStr> = match cbid {
            // SAFETY: the first field is `const char* message` / the attributes pointer.
            8 if !params.is_null() => unsafe {
                let m = std::ptr::read_unaligned(params as *const *const std::ffi::c_char);
                (!m.is_null()).then(|| std::ffi::CStr::from_ptr(m))
            },
            // SAFETY: nvtxRangePushEx_params { const nvtxEventAttributes_t* }.
            10 if !params.is_null() => unsafe {
                attr_message(std::ptr::read_unaligned(params as *const *const u8))
            },
            // SAFETY: nvtxDomainRangePushEx_params { domain, const nvtxEventAttributes_t* }.
            33 if !params.is_null() => unsafe {
                attr_message(std::ptr::read_unaligned(params.add(8) as *const *const u8))
            },
            11 | 34 => {
                let depth = NVTX_DEPTH.get();
                if depth > 0 && NVTX_OPEN_AT.get() == depth {
                    NVTX_OPEN_AT.set(0);
                    self.window.close(process_info::monotonic_ns());
                }
                NVTX_DEPTH.set(depth.saturating_sub(1));
                return;
            }
            _ => return,
        };
        let depth = NVTX_DEPTH.get() + 1;
        NVTX_DEPTH.set(depth);
        if NVTX_OPEN_AT.get() == 0 && name.is_some_and(|n| n.to_bytes() == target.as_bytes()) {
            NVTX_OPEN_AT.set(depth);
            self.window.open(process_info::monotonic_ns());
        }
    }

    /// Asks the writer for a flush (a final one when `finish`) and waits up
    /// to `wait` for it. Safe to call from a signal handler: atomics and
    /// nanosleep only.
    pub fn flush_and_wait(&self, finish: bool, wait: Duration) {
        if self.forked() {
            return; // a forked child has no writer thread
        }
        if !self.sync.flush_and_wait(finish, wait) && finish {
            const MSG: &[u8] =
                b"streamscope: the final flush timed out; the trace may miss the end\n";
            // SAFETY: write(2) on stderr with a static buffer is
            // async-signal-safe (this may run in a signal handler).
            let _ = unsafe { libc::write(2, MSG.as_ptr().cast(), MSG.len()) };
        }
    }
}

/// Names and properties through CUPTI and the driver.
struct RealHost {
    cupti: &'static Cupti,
    driver: Option<Driver>,
}

impl HostInfo for RealHost {
    fn device(&mut self, ordinal: u32) -> Device {
        self.driver
            .as_ref()
            .map(|d| d.device(ordinal))
            .unwrap_or(Device {
                ordinal,
                ..Default::default()
            })
    }
    fn api_name(&mut self, driver: bool, cbid: u32) -> String {
        let domain = if driver {
            CB_DOMAIN_DRIVER_API
        } else {
            CB_DOMAIN_RUNTIME_API
        };
        let n = self.cupti.callback_name(domain, cbid);
        if n.is_empty() {
            format!("{} api {cbid}", if driver { "driver" } else { "runtime" })
        } else {
            n
        }
    }
    fn thread_name(&mut self, tid: u32) -> Option<String> {
        process_info::thread_name(tid)
    }
}

/// Callback ids of `domain` whose normalized names are in `names`.
fn cbids_named(cupti: &Cupti, domain: u32, names: &[&str]) -> Vec<u32> {
    (1..2048)
        .filter(|&id| {
            let n = cupti.callback_name(domain, id);
            !n.is_empty() && names.contains(&normalize_api_name(&n))
        })
        .collect()
}

/// Stops the runtime and driver records of [`protocol::QUERY_APIS`] (state
/// queries PyTorch makes thousands of times a step; see there), unless
/// `all_apis`. Returns what the trace's metadata says about it.
fn skip_query_apis(cupti: &Cupti, all_apis: bool, runtime: bool, driver: bool) -> String {
    if all_apis {
        return "none: every CUDA API call recorded".into();
    }
    let mut skipped: Vec<String> = Vec::new();
    for (on, domain, func, label) in [
        (
            runtime,
            CB_DOMAIN_RUNTIME_API,
            cupti.enable_runtime_api,
            "cuptiActivityEnableRuntimeApi",
        ),
        (
            driver,
            CB_DOMAIN_DRIVER_API,
            cupti.enable_driver_api,
            "cuptiActivityEnableDriverApi",
        ),
    ] {
        let Some(func) = func.filter(|_| on) else {
            continue;
        };
        for cbid in cbids_named(cupti, domain, protocol::QUERY_APIS) {
            // SAFETY: a cbid CUPTI named in this domain; plain arguments.
            let rc = unsafe { func(cbid, 0) };
            if cupti.check(label, rc).is_ok() {
                skipped.push(normalize_api_name(&cupti.callback_name(domain, cbid)).to_string());
            }
        }
    }
    if skipped.is_empty() {
        return "none (this CUPTI cannot leave out single API functions)".into();
    }
    skipped.sort();
    skipped.dedup();
    format!(
        "not recorded (state queries; record --all-apis keeps them): {}",
        skipped.join(", ")
    )
}

fn enable(cupti: &Cupti, func: &'static str, rc: CuptiResult) -> bool {
    cupti.check(func, rc).is_ok()
}

/// Sets everything up. Err: one line for "CUPTI unavailable (...)".
pub fn start() -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok();
    let spec = CaptureSpec::from_env(env)?;
    let out_dir =
        PathBuf::from(env(process_info::ENV_OUT).unwrap_or_else(|| "streamscope-out".into()));
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let pid = std::process::id();
    let host = process_info::hostname();
    let process = process_info::describe(env, pid, &host, &process_info::cmdline());
    // The file first: nothing of CUPTI is touched when it cannot be written.
    let (trace_path, file) = process_info::create_trace_file(&out_dir, process.rank, &host, pid)
        .map_err(|e| format!("cannot create a trace file in {}: {e}", out_dir.display()))?;
    let progress_path = process_info::progress_path(&out_dir, &host, pid);
    let r = start_cupti(spec, process, file, trace_path.clone(), progress_path);
    if r.is_err() && session().is_none() {
        let _ = std::fs::remove_file(&trace_path);
    }
    r
}

fn start_cupti(
    spec: CaptureSpec,
    mut process: streamscope_core::model::Process,
    file: File,
    trace_path: PathBuf,
    progress_path: PathBuf,
) -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok();
    let pid = process.pid;
    let mut libs = Vec::new();
    if let Some(p) = env("STREAMSCOPE_CUPTI_LIB") {
        libs.push(p);
    }
    if let Some(p) = env("NVTX_INJECTION64_PATH").filter(|p| p.contains("cupti")) {
        libs.push(p);
    }
    let cupti = Cupti::open(&libs)?;
    let mut meta: Vec<(String, String)> = vec![
        (
            "collector".into(),
            format!("streamscope-collector {}", env!("CARGO_PKG_VERSION")),
        ),
        ("cupti_lib".into(), cupti.path.clone()),
    ];
    if let Some(v) = cupti.version() {
        meta.push(("cupti_api_version".into(), v.to_string()));
    }
    if let Some(f) = cupti.set_thread_id_type {
        // SAFETY: plain enum argument.
        let _ = cupti.check("cuptiSetThreadIdType", unsafe { f(THREAD_ID_TYPE_SYSTEM) });
    }
    let origin_ns = process_info::monotonic_ns();
    let mut ts_offset_ns = 0i64;
    let own_clock = match cupti.register_timestamp {
        // SAFETY: registers a function valid for the life of the process.
        Some(f) => cupti
            .check("cuptiActivityRegisterTimestampCallback", unsafe {
                f(Some(timestamp))
            })
            .is_ok(),
        None => false,
    };
    if own_clock {
        meta.push((
            "clock".into(),
            "CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback)".into(),
        ));
    } else {
        let mut c = 0u64;
        // SAFETY: writes one u64.
        let rc = unsafe { (cupti.get_timestamp)(&mut c) };
        let mono = process_info::monotonic_ns();
        if cupti.check("cuptiGetTimestamp", rc).is_ok() {
            ts_offset_ns = mono - c as i64;
        }
        meta.push((
            "clock".into(),
            format!("CLOCK_MONOTONIC (CUPTI clock + {ts_offset_ns} ns, calibrated at start)"),
        ));
    }
    // SAFETY: the callbacks are `extern "C"` functions with CUPTI's signatures.
    let rc = unsafe { (cupti.register_callbacks)(Some(buffer_requested), Some(buffer_completed)) };
    cupti.check("cuptiActivityRegisterCallbacks", rc)?;
    // SAFETY: plain enum argument.
    let rc = unsafe { (cupti.activity_enable)(kind::CONCURRENT_KERNEL) };
    cupti.check("cuptiActivityEnable(CONCURRENT_KERNEL)", rc)?;
    let mut kinds = vec!["kernel"];
    let off_text = env(protocol::env::ACTIVITY_OFF).unwrap_or_default();
    let off: Vec<&str> = off_text
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    for (k, func, label) in [
        (kind::MEMCPY, "cuptiActivityEnable(MEMCPY)", "memcpy"),
        (kind::MEMSET, "cuptiActivityEnable(MEMSET)", "memset"),
        (
            kind::SYNCHRONIZATION,
            "cuptiActivityEnable(SYNCHRONIZATION)",
            "synchronization",
        ),
        (kind::RUNTIME, "cuptiActivityEnable(RUNTIME)", "runtime"),
        (kind::DRIVER, "cuptiActivityEnable(DRIVER)", "driver"),
        (kind::OVERHEAD, "cuptiActivityEnable(OVERHEAD)", "overhead"),
        (kind::MARKER, "cuptiActivityEnable(MARKER)", "nvtx"),
    ] {
        if off.contains(&label) {
            continue;
        }
        // SAFETY: plain enum argument.
        if enable(&cupti, func, unsafe { (cupti.activity_enable)(k) }) {
            kinds.push(label);
        }
    }
    if !off.is_empty() {
        meta.push((
            "activity_off".into(),
            format!("{} (by {})", off.join(","), protocol::env::ACTIVITY_OFF),
        ));
    }
    meta.push(("activity".into(), kinds.join(",")));
    let all_apis = env(protocol::env::ALL_APIS).is_some_and(|v| v.trim() == "1");
    meta.push((
        "api_filter".into(),
        skip_query_apis(
            &cupti,
            all_apis,
            kinds.contains(&"runtime"),
            kinds.contains(&"driver"),
        ),
    ));

    let window_origin =
        crate::capture::window_origin(env(protocol::env::START_MONOTONIC_NS).as_deref(), origin_ns);
    if !spec.is_unlimited() {
        meta.push((
            "capture_origin".into(),
            if window_origin == origin_ns {
                "collector start".into()
            } else {
                format!(
                    "streamscope record's start ({} ms before this process's CUDA start)",
                    (origin_ns - window_origin) / 1_000_000
                )
            },
        ));
    }
    let window = Arc::new(CaptureWindow::new(spec.clone(), window_origin));
    let mut subscriber: *mut c_void = std::ptr::null_mut();
    // SAFETY: subscribes a callback valid for the life of the process.
    let rc =
        unsafe { (cupti.subscribe)(&mut subscriber, Some(api_callback), std::ptr::null_mut()) };
    let subscribed = cupti.check("cuptiSubscribe", rc).is_ok();
    let (mut sync_cbids, mut profiler_start, mut profiler_stop) =
        (Vec::new(), Vec::new(), Vec::new());
    if subscribed {
        let on = |domain: u32, cbid: u32| {
            // SAFETY: a subscriber handle CUPTI gave us and a valid cbid.
            let rc = unsafe { (cupti.enable_callback)(1, subscriber, domain, cbid) };
            cupti.check("cuptiEnableCallback", rc).is_ok()
        };
        if env(protocol::env::PYTHON_LINES).is_some_and(|v| v.trim() == "0") {
            meta.push((
                "python_callsites".into(),
                format!("off ({}=0)", protocol::env::PYTHON_LINES),
            ));
        } else {
            sync_cbids = cbids_named(&cupti, CB_DOMAIN_RUNTIME_API, SYNC_APIS);
            sync_cbids.retain(|&c| on(CB_DOMAIN_RUNTIME_API, c));
            meta.push((
                "python_callsites".into(),
                format!("{} runtime functions watched", sync_cbids.len()),
            ));
        }
        match &spec.trigger {
            Trigger::ProfilerApi => {
                for (domain, start, stop) in [
                    (
                        CB_DOMAIN_RUNTIME_API,
                        "cudaProfilerStart",
                        "cudaProfilerStop",
                    ),
                    (CB_DOMAIN_DRIVER_API, "cuProfilerStart", "cuProfilerStop"),
                ] {
                    profiler_start.extend(
                        cbids_named(&cupti, domain, &[start])
                            .into_iter()
                            .filter(|&c| on(domain, c))
                            .map(|c| (domain, c)),
                    );
                    profiler_stop.extend(
                        cbids_named(&cupti, domain, &[stop])
                            .into_iter()
                            .filter(|&c| on(domain, c))
                            .map(|c| (domain, c)),
                    );
                }
            }
            Trigger::Nvtx(_) => {
                for cbid in [8, 10, 11, 33, 34] {
                    on(CB_DOMAIN_NVTX, cbid);
                }
            }
            Trigger::Always => {}
        }
    } else {
        meta.push((
            "python_callsites".into(),
            "off (cuptiSubscribe failed)".into(),
        ));
    }
    if !spec.is_unlimited() {
        meta.push(("capture".into(), format!("{:?}", spec)));
    }
    let driver = Driver::open();

    process.clock_snapshot = process_info::clock_snapshot();
    process.metadata = meta;
    let copy_cbids = cbids_named(&cupti, CB_DOMAIN_RUNTIME_API, COPY_APIS)
        .into_iter()
        .filter(|c| sync_cbids.contains(c))
        .collect();
    let python = Arc::new(PyLines::default());
    let new_session = Session {
        cupti,
        pid,
        queue: BoundedQueue::new(QUEUE_BUFFERS),
        python: python.clone(),
        window: window.clone(),
        cupti_dropped: AtomicU64::new(0),
        sync: FlushSync::default(),
        sync_cbids,
        copy_cbids,
        profiler_start,
        profiler_stop,
    };
    if SESSION.set(new_session).is_err() {
        return Err("collector initialized twice".into());
    }
    let s = session().ok_or("no session")?;
    let host = RealHost {
        cupti: &s.cupti,
        driver,
    };
    let mut conv = Converter::new(process, Box::new(host), window, python);
    conv.ts_offset_ns = ts_offset_ns;
    let spawned = std::thread::Builder::new()
        .name("streamscope-writer".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                writer_main(s, conv, file, &trace_path, progress_path)
            }));
            if r.is_err() {
                crate::warn!("streamscope: writer thread failed; the rest of this run is untraced");
            }
            s.sync.finished.store(true, Ordering::SeqCst);
        })
        .map_err(|e| format!("cannot start the writer thread: {e}"));
    if spawned.is_err() {
        // Buffers CUPTI still hands back are freed at once from now on.
        s.sync.finished.store(true, Ordering::SeqCst);
    }
    spawned.map(|_| ())
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

fn block_signals() {
    // SAFETY: builds a signal set on the stack and masks it for this thread
    // only, so SIGINT/SIGTERM are never handled on the writer thread (whose
    // handler would wait for itself).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

struct Progress {
    path: PathBuf,
    events: u64,
    records: u64,
}

impl Progress {
    fn write(&self, bytes: u64, dropped: u64, done: bool) {
        // Appended, not `with_extension`: a dotted host name has its own dots.
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let text = protocol::Progress {
            events: self.events,
            records: self.records,
            bytes,
            dropped,
            done,
        }
        .to_line();
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &self.path);
        }
    }
}

fn writer_main(
    s: &'static Session,
    mut conv: Converter,
    file: File,
    trace_path: &std::path::Path,
    progress_path: PathBuf,
) {
    block_signals();
    conv.own_tid = Some(gettid());
    crate::signals::WRITER_TID.store(gettid(), Ordering::SeqCst);
    // Queried here, not during cuInit (where InitializeInjection runs).
    if let Some(v) = Driver::open().as_ref().and_then(Driver::version) {
        conv.process_mut()
            .metadata
            .push(("cuda_driver_version".into(), v.to_string()));
    }
    let mut w = PerfettoWriter::new(file);
    let mut progress = Progress {
        path: progress_path,
        events: 0,
        records: 0,
    };
    let mut last_flush = Instant::now();
    let mut write_failed = false;
    let drain = |conv: &mut Converter, wait: Duration| {
        let mut n = 0;
        while let Some(buf) = s.queue.pop(if n == 0 { wait } else { Duration::ZERO }) {
            // Abandoned: the buffer is only freed (reading it is a CUPTI call).
            if s.sync.may_call_cupti() {
                for_each_record(&s.cupti, buf.ptr, buf.valid, |rec| {
                    // SAFETY: a record CUPTI handed out from a buffer we still own.
                    let r = unsafe { records::parse(rec) };
                    conv.push(r);
                });
            }
            n += 1;
            if n >= QUEUE_BUFFERS {
                break;
            }
        }
    };
    let mut profiler_said = false;
    let mut last_progress = Instant::now();
    let mut write = |conv: &mut Converter, w: &mut PerfettoWriter<File>, last: bool| {
        let (steps, lost) = python::take_optimizer_steps();
        for (tid, start, end) in steps {
            conv.host_range(tid, start, end, protocol::OPTIMIZER_STEP_RANGE);
        }
        if lost > 0 {
            conv.set_process_metadata(protocol::OPTIMIZER_STEPS_LOST_KEY, lost.to_string());
        }
        if !profiler_said {
            if let Some(at) = python::torch_profiler_started_at() {
                profiler_said = true;
                conv.set_process_metadata(
                    protocol::TORCH_PROFILER_KEY,
                    format!("{} (started at {at} ns)", python::TORCH_PROFILER_MESSAGE),
                );
            }
        }
        conv.finish_batch(last);
        let dropped = s.cupti_dropped.load(Ordering::Relaxed)
            + s.queue.dropped_records()
            + conv.incomplete_records;
        let (cs, ce) = s.window.bounds();
        let p = conv.process_mut();
        p.dropped_records = dropped;
        p.capture_start_ns = cs;
        p.capture_end_ns = ce;
        progress.events += conv.trace.slices.len() as u64;
        progress.records = conv.records_seen;
        if !write_failed {
            if let Err(e) = w.write_batch(&conv.trace) {
                crate::warn!("streamscope: writing the trace failed: {e}");
                write_failed = true;
            }
        }
        conv.trace.clear_events();
        if last_progress.elapsed() >= PROGRESS_PERIOD {
            progress.write(w.bytes_written(), dropped, false);
            last_progress = Instant::now();
        }
    };
    let flush_every = flush_period();
    loop {
        drain(&mut conv, Duration::from_millis(50));
        if !s.sync.may_call_cupti() {
            break; // exiting without us: write what we have, call nothing
        }
        let requested = s.sync.requested.load(Ordering::SeqCst);
        let flush_now = requested > s.sync.done.load(Ordering::SeqCst);
        let stop = s.sync.stop.load(Ordering::SeqCst);
        if flush_now || stop || last_flush.elapsed() >= flush_every {
            // Forced only at the end: a forced flush also hands back
            // records still in progress (a running kernel), which are lost.
            let flag = if stop { FLUSH_FORCED } else { 0 };
            if s.sync.may_call_cupti() {
                // SAFETY: plain flag argument; completed buffers come back
                // through `buffer_completed` into the queue.
                let rc = unsafe { (s.cupti.flush_all)(flag) };
                let _ = s.cupti.check("cuptiActivityFlushAll", rc);
                s.count_global_drops();
            }
            last_flush = Instant::now();
            drain(&mut conv, Duration::ZERO);
            while !s.queue.is_empty() {
                drain(&mut conv, Duration::ZERO);
            }
            write(&mut conv, &mut w, stop);
            if stop {
                break;
            }
            s.sync.mark_done(requested);
        } else if conv.trace.slices.len() >= 200_000 {
            write(&mut conv, &mut w, false);
        }
    }
    let dropped = s.cupti_dropped.load(Ordering::Relaxed)
        + s.queue.dropped_records()
        + conv.incomplete_records;
    conv.process_mut().dropped_records = dropped;
    if BUDGET.refused() > 0 {
        conv.process_mut().metadata.push((
            "activity_buffers_refused".into(),
            format!("{} (all {MAX_BUFFERS} buffers in use)", BUDGET.refused()),
        ));
    }
    let bytes = w.bytes_written();
    if !write_failed {
        if let Err(e) = w.finish(&conv.trace) {
            crate::warn!("streamscope: finishing the trace failed: {e}");
        }
    }
    if progress.events == 0 {
        // CUDA started but nothing ran (a launcher that only counted GPUs):
        // leave no empty trace behind.
        let _ = std::fs::remove_file(trace_path);
    }
    progress.write(bytes, dropped, true);
    s.sync.mark_done(s.sync.requested.load(Ordering::SeqCst));
}
