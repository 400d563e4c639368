//! The running collector: its start (the set-up steps are in setup.rs),
//! the buffer callbacks (the API callback is in callbacks.rs), and the
//! writer thread that turns buffers into Perfetto batches.
//!
//! Threads: CUPTI calls the buffer callbacks from its own threads (or the
//! one flushing); they only allocate, count and queue. The writer thread
//! drains the queue, converts, writes a batch, and calls
//! cuptiActivityFlushAll every 100 ms (`STREAMSCOPE_FLUSH_MS`), so a
//! SIGKILL loses about that much. atexit and the SIGINT/SIGTERM handlers ask it for a final
//! flush and wait for it with a time bound.

use crate::error::{CuptiError, StartError};
use std::alloc::Layout;
use std::ffi::c_void;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use streamscope_core::perfetto::PerfettoWriter;
use streamscope_core::protocol;
use streamscope_core::Device;

use crate::buffer_pool::{self, Pool};
use crate::capture::{CaptureSpec, CaptureWindow};
use crate::convert::{Converter, HostInfo};
use crate::cupti_api::*;
use crate::driver::Driver;
use crate::flush_sync::FlushSync;
use crate::process_info;
use crate::python::{self, PyLines};
use crate::queue::{BoundedQueue, BufferBudget};
use crate::records;
use crate::setup;

/// Bytes of one activity buffer handed to CUPTI.
const BUFFER_BYTES: usize = 2 << 20;
/// Completed buffers waiting for the writer.
const QUEUE_BUFFERS: usize = 64;
/// Buffers allocated at once (held by CUPTI, queued or being converted):
/// bounds the collector's buffer memory to 144 MiB. Past it CUPTI is handed
/// no buffer and drops records, which it counts.
const MAX_BUFFERS: usize = QUEUE_BUFFERS + 8;
static BUDGET: BufferBudget = BufferBudget::new(MAX_BUFFERS);
/// The layout of one activity buffer.
const BUFFER_LAYOUT: Layout = match Layout::from_size_align(BUFFER_BYTES, 8) {
    Ok(l) => l,
    Err(_) => panic!("2 MiB aligned to 8 is a valid layout"),
};
/// Zeroed buffers ready for CUPTI's requests (see buffer_pool.rs).
static POOL: Pool = Pool::new(BUFFER_LAYOUT);
/// How often the writer asks CUPTI for what it has (completed records
/// only) and writes it: what a SIGKILL can lose, plus CUPTI's own delay.
/// `STREAMSCOPE_FLUSH_MS` overrides it (at least 10 ms).
const FLUSH_PERIOD: Duration = Duration::from_millis(100);

pub(crate) fn flush_period() -> Duration {
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

/// A CUPTI activity buffer we allocated.
pub struct Buffer {
    ptr: *mut u8,
    valid: usize,
}

// SAFETY: the buffer is plain memory owned by this value alone once CUPTI
// has completed it; moving it to the writer thread is sound.
unsafe impl Send for Buffer {}

impl Buffer {
    /// Done with (converted): zeroed and kept for CUPTI's next request.
    /// Only the writer calls this; everywhere else a buffer is just freed.
    pub(crate) fn recycle(mut self) {
        let p = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        if p.is_null() {
            return;
        }
        BUDGET.release();
        // SAFETY: p came from the pool (`buffer_requested`) and CUPTI has
        // handed it back: it is ours alone.
        unsafe { POOL.give_back(p) };
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: ptr came from the pool (`buffer_requested`): an
            // allocation of BUFFER_LAYOUT.
            unsafe { std::alloc::dealloc(self.ptr, BUFFER_LAYOUT) };
            BUDGET.release();
        }
    }
}

pub struct Session {
    pub cupti: Cupti,
    pub(crate) pid: u32,
    pub(crate) queue: BoundedQueue<Buffer>,
    pub(crate) python: Arc<PyLines>,
    pub(crate) window: Arc<CaptureWindow>,
    pub(crate) cupti_dropped: AtomicU64,
    pub(crate) sync: FlushSync,
    pub(crate) sync_cbids: Vec<u32>,
    /// The [`COPY_APIS`] among `sync_cbids`.
    pub(crate) copy_cbids: Vec<u32>,
    pub(crate) profiler_start: Vec<(u32, u32)>,
    pub(crate) profiler_stop: Vec<(u32, u32)>,
    /// Walk the stack for the C/C++ caller of a sync with no Python line
    /// (`protocol::env::NATIVE_CALLERS` not `0`).
    pub(crate) native_callers: bool,
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
        // Zeroed, as CUPTI was told (`ZEROED_OUT_ACTIVITY_BUFFER`), and in
        // the common case already faulted in (buffer_pool.rs).
        let p = if BUDGET.try_acquire() {
            let p = POOL.take();
            if p.is_null() {
                BUDGET.release();
            }
            p
        } else {
            std::ptr::null_mut()
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

impl Session {
    /// True in a forked child. It has no writer thread, and a mutex the
    /// parent's threads held at fork (the queue's, the Python lines') stays
    /// locked for ever there, so the callbacks must touch none of them.
    pub(crate) fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Adds the records CUPTI dropped from its global queue (for instance
    /// while `buffer_requested` declined): the count resets on each read.
    pub(crate) fn count_global_drops(&self) {
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
pub(crate) struct RealHost {
    pub(crate) cupti: &'static Cupti,
    pub(crate) driver: Option<Driver>,
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
/// Sets everything up. Err: one line for "CUPTI unavailable (...)".
pub fn start() -> Result<(), StartError> {
    let env = |k: &str| std::env::var(k).ok();
    let armed = crate::armed::is_armed(&env);
    let spec = if armed {
        CaptureSpec {
            trigger: crate::capture::Trigger::Always,
            delay_ns: 0,
            duration_ns: None,
        }
    } else {
        CaptureSpec::from_env(env)?
    };
    let trigger_signal = if armed {
        Some(crate::armed::trigger_signal(
            env(protocol::env::CAPTURE_SIGNAL).as_deref(),
        )?)
    } else {
        None
    };
    let out_dir =
        PathBuf::from(env(process_info::ENV_OUT).unwrap_or_else(|| "streamscope-out".into()));
    std::fs::create_dir_all(&out_dir).map_err(|source| StartError::OutputDir {
        path: out_dir.clone(),
        source,
    })?;
    let pid = std::process::id();
    let host = process_info::hostname();
    let process = process_info::describe(env, pid, &host, &process_info::cmdline());
    if let Some(sig) = trigger_signal {
        let ctx = crate::armed::ArmedCtx {
            process,
            out_dir,
            host,
            ts_offset_ns: 0,
        };
        start_cupti(spec, ctx.process.clone(), Output::Armed(ctx))?;
        return Ok(crate::armed::install_trigger_signal(sig)?);
    }
    // The file first: nothing of CUPTI is touched when it cannot be written.
    let (trace_path, file) = process_info::create_trace_file(&out_dir, process.rank, &host, pid)
        .map_err(|source| StartError::TraceFile {
            dir: out_dir.clone(),
            source,
        })?;
    let progress_path = process_info::progress_path(&out_dir, &host, pid);
    let r = start_cupti(
        spec,
        process,
        Output::Trace(file, trace_path.clone(), progress_path),
    );
    if r.is_err() && session().is_none() {
        let _ = std::fs::remove_file(&trace_path);
    }
    r
}

/// Where the writer thread writes: one trace for the whole run, or (armed
/// mode) one file per capture.
enum Output {
    Trace(File, PathBuf, PathBuf),
    Armed(crate::armed::ArmedCtx),
}

/// Opens CUPTI (the library named by the environment, else the default
/// search), asks it for system thread ids, and returns it with the first
/// metadata entries (collector, library, API version).
fn open_cupti(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Cupti, Vec<(String, String)>), CuptiError> {
    let mut libs = Vec::new();
    if let Some(p) = env(protocol::env::CUPTI_LIB) {
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
    Ok((cupti, meta))
}

/// Puts CUPTI's activity timestamps on CLOCK_MONOTONIC: through the
/// timestamp callback when CUPTI has one, else by an offset calibrated now.
/// Records the clock in `meta` and returns the offset to add (ns).
fn set_up_clock(cupti: &Cupti, meta: &mut Vec<(String, String)>) -> i64 {
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
    ts_offset_ns
}

/// Records in `meta` where a limited capture's window counts from (the
/// collector's start `origin_ns`, or `streamscope record`'s start).
fn note_capture_origin(
    spec: &CaptureSpec,
    window_origin: i64,
    origin_ns: i64,
    meta: &mut Vec<(String, String)>,
) {
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
}

/// Starts the writer thread on `output`; when it cannot start or once it
/// ends, the session is marked finished.
fn spawn_writer(
    s: &'static Session,
    conv: Converter,
    output: Output,
    pm: Option<crate::pm_sampling::feed::Feed>,
) -> Result<(), StartError> {
    let spawned = std::thread::Builder::new()
        .name("streamscope-writer".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match output {
                Output::Trace(file, trace_path, progress_path) => {
                    writer_main(s, conv, file, &trace_path, progress_path, pm)
                }
                Output::Armed(ctx) => crate::armed::writer_main(s, ctx),
            }));
            if r.is_err() {
                crate::warn!("streamscope: writer thread failed; the rest of this run is untraced");
            }
            s.sync.finished.store(true, Ordering::SeqCst);
        })
        .map_err(StartError::WriterThread);
    if spawned.is_err() {
        // Buffers CUPTI still hands back are freed at once from now on.
        s.sync.finished.store(true, Ordering::SeqCst);
    }
    spawned.map(|_| ())
}

fn start_cupti(
    spec: CaptureSpec,
    mut process: streamscope_core::Process,
    mut output: Output,
) -> Result<(), StartError> {
    let armed = matches!(output, Output::Armed(_));
    let env = |k: &str| std::env::var(k).ok();
    let pid = process.pid;
    let (cupti, mut meta) = open_cupti(&env)?;
    let origin_ns = process_info::monotonic_ns();
    let ts_offset_ns = set_up_clock(&cupti, &mut meta);
    meta.push((
        "activity_buffers".into(),
        buffer_pool::tell_cupti(&cupti, BUFFER_BYTES),
    ));
    // SAFETY: the callbacks are `extern "C"` functions with CUPTI's signatures.
    let rc = unsafe { (cupti.register_callbacks)(Some(buffer_requested), Some(buffer_completed)) };
    cupti.check("cuptiActivityRegisterCallbacks", rc)?;
    // Asked before RegisterCallbacks, CUPTI answered NOT_INITIALIZED (H200,
    // CUDA 13.0); whether it takes here is in the trace's `hw_trace`.
    if env(protocol::env::HW_TRACE).is_some_and(|v| v.trim() == "1") {
        let said = match cupti.enable_hw_trace {
            // SAFETY: a plain flag argument, before any activity is enabled.
            Some(f) => match unsafe { f(1) } {
                0 => "on (cuptiActivityEnableHWTrace)".to_string(),
                rc => format!("refused: {} ({rc})", cupti.result_string(rc)),
            },
            None => "not in this CUPTI".to_string(),
        };
        crate::warn!("streamscope: hardware kernel tracing: {said}");
        meta.push(("hw_trace".into(), said));
    }
    if armed {
        // Nothing is enabled until a capture (armed.rs).
        meta.push(("armed".into(), "recorded on demand (captures)".into()));
    } else {
        setup::enable_activity(&cupti, &env, &mut meta)?;
    }

    let window_origin =
        crate::capture::window_origin(env(protocol::env::START_MONOTONIC_NS).as_deref(), origin_ns);
    note_capture_origin(&spec, window_origin, origin_ns, &mut meta);
    let window = Arc::new(CaptureWindow::new(spec.clone(), window_origin));
    let (sync_cbids, profiler_start, profiler_stop) = if armed {
        (
            setup::armed_sync_cbids(&cupti, &env, &mut meta),
            vec![],
            vec![],
        )
    } else {
        setup::subscribe(&cupti, &spec.trigger, &env, &mut meta)
    };
    if !spec.is_unlimited() {
        meta.push(("capture".into(), format!("{:?}", spec)));
    }
    let driver = Driver::open();

    process.clock_snapshot = process_info::clock_snapshot();
    process.metadata = meta;
    let copy_cbids = setup::copy_cbids(&cupti, &sync_cbids);
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
        native_callers: env(protocol::env::NATIVE_CALLERS).is_none_or(|v| v.trim() != "0"),
    };
    if SESSION.set(new_session).is_err() {
        return Err(StartError::Twice);
    }
    let s = session().ok_or(StartError::NoSession)?;
    let host = RealHost {
        cupti: &s.cupti,
        driver,
    };
    if let Output::Armed(ctx) = &mut output {
        ctx.ts_offset_ns = ts_offset_ns;
        ctx.process.metadata = process.metadata.clone();
    }
    let mut conv = Converter::new(process, Box::new(host), window, python);
    conv.ts_offset_ns = ts_offset_ns;
    let pm = start_pm_feed(&output, &mut conv);
    spawn_writer(s, conv, output, pm)
}

/// The GPU metrics feeds, when `record --gpu-metrics` runs a sampler
/// process beside the job (nothing at all otherwise).
fn start_pm_feed(output: &Output, conv: &mut Converter) -> Option<crate::pm_sampling::feed::Feed> {
    std::env::var_os(protocol::env::GPU_METRICS_FEED)?;
    if matches!(output, Output::Armed(_)) {
        conv.set_process_metadata(
            streamscope_core::gpu_metrics::keys::UNAVAILABLE,
            "not sampled in armed mode".into(),
        );
        return None;
    }
    crate::pm_sampling::feed::Feed::from_env(process_info::hostname())
}

pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

pub(crate) fn block_signals() {
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

/// Converts the queued buffers (at most a queue's worth), waiting up to
/// `wait` for the first.
pub(crate) fn drain(s: &Session, conv: &mut Converter, wait: Duration) {
    let mut n = 0;
    while let Some(buf) = s.queue.pop(if n == 0 { wait } else { Duration::ZERO }) {
        // Abandoned: the buffer is only freed (reading it is a CUPTI call).
        if s.sync.may_call_cupti() {
            for_each_record(&s.cupti, buf.ptr, buf.valid, |rec| {
                // SAFETY: a record CUPTI handed out from a buffer we still own.
                let r = unsafe { records::parse(rec) };
                conv.push(r);
            });
            buf.recycle();
        }
        n += 1;
        if n >= QUEUE_BUFFERS {
            break;
        }
    }
}

fn writer_main(
    s: &'static Session,
    mut conv: Converter,
    file: File,
    trace_path: &std::path::Path,
    progress_path: PathBuf,
    mut pm: Option<crate::pm_sampling::feed::Feed>,
) {
    block_signals();
    POOL.prefill(buffer_pool::PREFILL);
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
    let drain = |conv: &mut Converter, wait: Duration| drain(s, conv, wait);
    let mut profiler_said = false;
    let mut last_progress = Instant::now();
    let mut nccl = crate::nccl_plugin::trace::NcclWriter::default();
    let mut write = |conv: &mut Converter, w: &mut PerfettoWriter<File>, last: bool| {
        nccl.write(conv, last);
        if let Some(pm) = &mut pm {
            pm.write(conv, last);
        }
        let (steps, lost) = python::take_optimizer_steps();
        for (tid, start, end, key) in steps {
            conv.optimizer_step(tid, start, end, key);
        }
        if lost > 0 {
            conv.set_process_metadata(protocol::OPTIMIZER_STEPS_LOST_KEY, lost.to_string());
        }
        let (batches, ooms, mem_lost) = crate::memory::take();
        for b in &batches {
            crate::memory::write_batch(conv, b);
        }
        for o in &ooms {
            crate::memory::write_oom(conv, o);
        }
        if mem_lost > 0 {
            conv.set_process_metadata(protocol::MEMORY_EVENTS_LOST_KEY, mem_lost.to_string());
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
        progress.events += conv.trace.slices().len() as u64;
        progress.records = conv.records_seen;
        let written = conv.trace.flush_events(|t| {
            if write_failed {
                Ok(())
            } else {
                w.write_batch(t)
            }
        });
        if let Err(e) = written {
            crate::warn!("streamscope: writing the trace failed: {e}");
            write_failed = true;
        }
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
        } else if conv.trace.slices().len() >= 200_000 {
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
        if let Err(e) = conv.trace.flush_events(|t| w.finish(t)) {
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
