//! Armed mode (`STREAMSCOPE_ARMED=1`, `streamscope record --armed`): the
//! collector is injected but records nothing until a capture is triggered.
//!
//! While armed no activity kind is enabled and no API callback is
//! subscribed; the writer thread only polls the triggers (every 50 ms; the
//! trigger file every 200 ms) and answers flush requests. A capture:
//! waits for its start instant, enables the activity kinds
//! (`cuptiActivityEnable`), writes `rank-R.capture-K.pftrace` as the normal
//! writer does, and at its end disables them (`cuptiActivityDisable`),
//! forces a flush and closes the file. The API callback that reads the
//! Python line of host syncs is subscribed at the first capture and
//! switched on and off with each. Triggers: the signal
//! (`STREAMSCOPE_CAPTURE_SIGNAL`, default SIGUSR2; the handler only sets an
//! atomic), `touch DIR/capture`, and the control socket (control.rs).

use crate::error::{EnvError, SignalError};
use std::ffi::c_int;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use proto::{CaptureLength, CaptureRequest};
use streamscope_core::perfetto::PerfettoWriter;
use streamscope_core::protocol::{self, armed as proto};
use streamscope_core::Process;

use crate::capture::{CaptureSpec, CaptureWindow, Trigger};
use crate::control::{ControlSocket, Requests};
use crate::convert::Converter;
use crate::cupti_api::FLUSH_FORCED;
use crate::driver::Driver;
use crate::process_info::monotonic_ns;
use crate::session::{RealHost, Session};
use crate::{python, setup};

/// What the armed writer needs to know about the process.
pub(crate) struct ArmedCtx {
    pub process: Process,
    pub out_dir: PathBuf,
    pub host: String,
    pub ts_offset_ns: i64,
}

/// Whether `STREAMSCOPE_ARMED` asks for armed mode.
pub fn is_armed(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env(protocol::env::ARMED).is_some_and(|v| v.trim() == "1")
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);
static PREV: OnceLock<(c_int, libc::sigaction)> = OnceLock::new();
static REQUESTS: OnceLock<Requests> = OnceLock::new();

fn requests() -> &'static Requests {
    REQUESTS.get_or_init(Requests::default)
}

/// The trigger signal from `STREAMSCOPE_CAPTURE_SIGNAL`: a number or a
/// name (`USR1`, `SIGUSR2`, `RTMIN+2` not accepted); SIGUSR2 when unset.
pub fn trigger_signal(value: Option<&str>) -> Result<c_int, EnvError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(libc::SIGUSR2);
    };
    let name = v.trim_start_matches("SIG");
    let sig = match name {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        _ => v.parse::<c_int>().unwrap_or(-1),
    };
    let forbidden = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGABRT,
        libc::SIGILL,
        libc::SIGFPE,
    ];
    if sig <= 0 || sig >= 65 || forbidden.contains(&sig) {
        return Err(EnvError::Signal {
            var: protocol::env::CAPTURE_SIGNAL,
            value: v.to_string(),
        });
    }
    Ok(sig)
}

extern "C" fn on_trigger(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut std::ffi::c_void) {
    SIGNALLED.store(true, Ordering::SeqCst);
    let Some((s, old)) = PREV.get() else { return };
    if *s != sig {
        return;
    }
    let h = old.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return; // the default (end the process) is what armed mode replaces
    }
    if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the saved handler has this signature.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut std::ffi::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the saved handler is `void (*)(int)`.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

/// Installs the trigger signal's handler (only an atomic store, then the
/// program's own handler if it had one).
pub fn install_trigger_signal(sig: c_int) -> Result<(), SignalError> {
    // SAFETY: zeroed sigaction structs are valid; we fill handler, flags
    // and an empty mask; the old disposition is saved for chaining.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Err(SignalError(sig));
        }
        if PREV.set((sig, old)).is_err() {
            return Ok(());
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_trigger as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
            return Err(SignalError(sig));
        }
    }
    Ok(())
}

/// `DIR/capture`: a capture when it appears or its mtime changes.
struct TriggerFile {
    path: PathBuf,
    seen: Option<SystemTime>,
    last_poll: Instant,
}

impl TriggerFile {
    fn new(path: PathBuf) -> Self {
        let seen = Self::mtime(&path);
        TriggerFile {
            path,
            seen,
            last_poll: Instant::now(),
        }
    }
    fn mtime(p: &Path) -> Option<SystemTime> {
        std::fs::metadata(p).and_then(|m| m.modified()).ok()
    }
    /// Takes the file's present mtime as seen.
    fn rebase(&mut self) {
        self.seen = Self::mtime(&self.path);
        self.last_poll = Instant::now();
    }
    /// Polls at most every 200 ms.
    fn fired(&mut self) -> bool {
        if self.last_poll.elapsed() < Duration::from_millis(200) {
            return false;
        }
        self.last_poll = Instant::now();
        let now = Self::mtime(&self.path);
        let fired = now.is_some() && now != self.seen;
        self.seen = now;
        fired
    }
}

/// Length of a signal- or file-triggered capture: `STREAMSCOPE_DURATION_S`
/// when set, else [`proto::DEFAULT_DURATION_MS`].
fn default_length() -> CaptureLength {
    let ms = std::env::var(protocol::env::DURATION_S)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(proto::DEFAULT_DURATION_MS, |s| {
            ((s * 1000.0) as u64).clamp(1, proto::MAX_DURATION_MS)
        });
    CaptureLength::Millis(ms)
}

/// Answers flush requests while no capture runs; true once the final one
/// (exit, a terminating signal) came.
fn idle_flushes(s: &Session) -> bool {
    let requested = s.sync.requested.load(Ordering::SeqCst);
    if s.sync.stop.load(Ordering::SeqCst) || !s.sync.may_call_cupti() {
        return true;
    }
    s.sync.mark_done(requested);
    false
}

/// The armed writer thread.
/// How long activity records stay on after a capture window closes, so the
/// GPU work launched inside the window (queued behind the host) completes
/// and is recorded rather than cut off at the forced flush.
const CAPTURE_END_GRACE: Duration = Duration::from_millis(300);

pub(crate) fn writer_main(s: &'static Session, ctx: ArmedCtx) {
    crate::session::block_signals();
    crate::signals::WRITER_TID.store(crate::session::gettid(), Ordering::SeqCst);
    let socket = match ControlSocket::bind(
        &ctx.out_dir,
        ctx.process.rank,
        &ctx.host,
        ctx.process.pid,
    )
    .and_then(|c| c.serve(requests()))
    {
        Ok(p) => Some(p),
        Err(e) => {
            crate::warn!("streamscope: armed without a control socket ({e}); the signal and DIR/capture still trigger");
            None
        }
    };
    let mut file = TriggerFile::new(ctx.out_dir.join(proto::TRIGGER_FILE));
    loop {
        if idle_flushes(s) {
            break;
        }
        // Idle: what the hooks and the NCCL plugin noted is not kept, nor
        // a buffer CUPTI completed after a capture's last flush.
        while s.queue.pop(Duration::ZERO).is_some() {}
        let _ = python::take_optimizer_steps();
        let _ = crate::nccl_plugin::take_ops();
        let by_signal = SIGNALLED.swap(false, Ordering::SeqCst);
        if by_signal || file.fired() {
            let _ = requests().submit(CaptureRequest {
                length: default_length(),
                start_ns: None,
            });
        }
        if let Some((k, req)) = requests().take() {
            let stop = run_capture(s, &ctx, k, req);
            requests().finish();
            if stop {
                break;
            }
            // A signal or touch during the capture is not a new request.
            SIGNALLED.store(false, Ordering::SeqCst);
            file.rebase();
            continue;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(p) = socket {
        let _ = std::fs::remove_file(p);
    }
    s.sync.mark_done(s.sync.requested.load(Ordering::SeqCst));
}

/// Creates `name` in `dir` without replacing anything (`-2`, `-3` ...).
fn create_new(dir: &Path, name: &str) -> std::io::Result<(PathBuf, File)> {
    let stem = name.trim_end_matches(".pftrace");
    let mut last = None;
    for n in 1..=100 {
        let p = if n == 1 {
            dir.join(name)
        } else {
            dir.join(format!("{stem}-{n}.pftrace"))
        };
        match File::options().write(true).create_new(true).open(&p) {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

/// Runs capture `k`; returns true when the process is ending (final flush).
fn run_capture(s: &'static Session, ctx: &ArmedCtx, k: u32, req: CaptureRequest) -> bool {
    // Wait for the start instant (shared by the node's processes).
    if let Some(t) = req.start_ns {
        if wait_until(s, t) {
            return true;
        }
    }
    let _ = python::take_optimizer_steps();
    let _ = crate::nccl_plugin::take_ops();
    let p = &ctx.process;
    let name = proto::capture_file_name(p.rank, &ctx.host, p.pid, k);
    let (_path, out) = match create_new(&ctx.out_dir, &name) {
        Ok(f) => f,
        Err(e) => {
            crate::warn!("streamscope: capture {k}: cannot create {name}: {e}");
            return false;
        }
    };
    let mut meta = p.metadata.clone();
    let (kinds, lines) = start_recording(s, k, &mut meta);
    let start = monotonic_ns();
    if !s.sync_cbids.is_empty() {
        meta.retain(|(k, _)| k != "python_callsites");
        meta.push((
            "python_callsites".into(),
            format!("{lines} runtime functions watched during this capture"),
        ));
    }
    meta.push((
        "capture".into(),
        format!("armed capture {k}: {}", req.to_line().trim_end()),
    ));
    let mut cw = CaptureWriter::new(s, ctx, k, meta, start, out);
    let (deadline, steps_wanted, find_by) = match req.length {
        CaptureLength::Millis(ms) => (start + ms as i64 * 1_000_000, None, i64::MAX),
        // N whole steps: from the start to the end of the (N+1)-th step
        // boundary after it.
        CaptureLength::Steps {
            steps,
            max_ms,
            find_ms,
        } => (
            start + max_ms as i64 * 1_000_000,
            Some(steps as usize + 1),
            start + find_ms as i64 * 1_000_000,
        ),
    };
    if steps_wanted.is_some() {
        cw.conv.step_probe = Some(Default::default());
    }
    // Step boundaries from graph launches or the kernels' period (looked
    // at twice a second), when the job marks no optimizer steps.
    let mut probed: Vec<i64> = Vec::new();
    let mut last_probe = Instant::now();
    let mut ended_why: Option<String> = None;
    let mut last_flush = Instant::now();
    let flush_every = crate::session::flush_period();
    let mut stop;
    loop {
        crate::session::drain(s, &mut cw.conv, Duration::from_millis(20));
        if !s.sync.may_call_cupti() {
            stop = true;
            break;
        }
        let requested = s.sync.requested.load(Ordering::SeqCst);
        let flush_now = requested > s.sync.done.load(Ordering::SeqCst);
        stop = s.sync.stop.load(Ordering::SeqCst);
        let now = monotonic_ns();
        if let (Some(p), true) = (&cw.conv.step_probe, cw.step_ends.is_empty()) {
            if last_probe.elapsed() >= Duration::from_millis(200) {
                probed = p.boundaries(start);
                last_probe = Instant::now();
            }
        }
        let marked = steps_wanted.is_some_and(|n| cw.step_ends.len() >= n);
        let by_probe = cw.step_ends.is_empty() && steps_wanted.is_some_and(|n| probed.len() >= n);
        let steps_done = marked || by_probe;
        let nothing_found =
            steps_wanted.is_some() && now >= find_by && cw.step_ends.is_empty() && probed.len() < 2;
        if nothing_found {
            ended_why = Some(format!(
                "no steps found within {:.0} s (no optimizer-step marks, no CUDA graph launched twice, no repeating kernels); use `streamscope capture --duration` for this job",
                (find_by - start) as f64 / 1e9
            ));
        } else if steps_wanted.is_some() && now >= deadline && !steps_done {
            ended_why = Some(format!(
                "--max-duration ({:.0} s) reached before the steps asked for ended ({} found)",
                (deadline - start) as f64 / 1e9,
                cw.step_ends.len().max(probed.len()).saturating_sub(1)
            ));
        }
        let ending = stop || now >= deadline || steps_done || nothing_found;
        if !(ending || flush_now || last_flush.elapsed() >= flush_every) {
            continue;
        }
        if ending {
            let end = match steps_wanted {
                Some(n) if marked => cw.step_ends[n - 1],
                Some(n) if by_probe => probed[n - 1],
                _ => now.min(deadline),
            };
            if let Some(why) = &ended_why {
                crate::warn!("streamscope: capture {k}: {why}");
                cw.conv.set_process_metadata("capture_end", why.clone());
            }
            cw.end_window(s, &kinds, end, stop);
        }
        // SAFETY: plain flag; completed buffers come back through the
        // buffer callback into the queue.
        let rc = unsafe { (s.cupti.flush_all)(if ending { FLUSH_FORCED } else { 0 }) };
        let _ = s.cupti.check("cuptiActivityFlushAll", rc);
        s.count_global_drops();
        last_flush = Instant::now();
        // A capture of N steps holds its batches (up to HOLD_SLICES) until
        // it ends, so that the work recorded past its last step, seen only
        // once the records arrive, is cut off (`end`).
        cw.note_steps();
        let hold = steps_wanted.is_some() && cw.conv.trace.slices().len() < HOLD_SLICES;
        if ending {
            let end = cw.window.bounds().1;
            if let (Some(end), true) = (end, steps_wanted.is_some() && !stop) {
                cw.cut_after(end);
            }
        }
        if ending || !hold {
            cw.write_batch(s, ending);
        }
        if ending {
            break;
        }
        s.sync.mark_done(requested);
    }
    if stop {
        // Exiting mid-capture: the window ends now.
        cw.window.close(monotonic_ns());
        cw.set_bounds();
    }
    cw.finish();
    stop
}

/// Waits for the monotonic instant `t` (at most
/// [`proto::MAX_START_AHEAD_NS`] ahead), answering flush requests; true
/// when the process is ending.
fn wait_until(s: &Session, t: i64) -> bool {
    let t = t.min(monotonic_ns() + proto::MAX_START_AHEAD_NS);
    loop {
        if idle_flushes(s) {
            return true;
        }
        let left = t - monotonic_ns();
        if left <= 0 {
            return false;
        }
        std::thread::sleep(Duration::from_nanos(left.min(20_000_000) as u64));
    }
}

/// Enables the activity kinds and the sync API callback for capture `k`
/// (what was enabled goes into `meta`); returns the kinds (disabled at
/// the end) and how many runtime functions the callback watches.
fn start_recording(s: &Session, k: u32, meta: &mut Vec<(String, String)>) -> (Vec<u32>, usize) {
    let env = |k: &str| std::env::var(k).ok();
    let kinds = match setup::enable_activity(&s.cupti, &env, meta) {
        Ok(k) => k,
        Err(e) => {
            crate::warn!("streamscope: capture {k}: {e}");
            Vec::new()
        }
    };
    let lines = setup::armed_callbacks(&s.cupti, &s.sync_cbids, true);
    (kinds, lines)
}

/// Most slices a capture of N steps holds before writing (about 40 MB).
const HOLD_SLICES: usize = 1 << 20;

/// One capture's file and what goes into it.
struct CaptureWriter {
    k: u32,
    start: i64,
    window: Arc<CaptureWindow>,
    conv: Converter,
    w: PerfettoWriter<File>,
    nccl: crate::nccl_plugin::trace::NcclWriter,
    /// A capture of N steps: the optimizer steps since the start (start,
    /// end, optimizer key).
    optimizer_steps: Vec<(i64, i64, u64)>,
    /// Where the capture may end: element j is the first end at which the
    /// file holds j + 1 steps as its report will count them
    /// (`running_step_ends`).
    step_ends: Vec<i64>,
    /// Drops counted before this capture (not its own).
    dropped_before: u64,
    write_failed: bool,
}

impl CaptureWriter {
    /// The capture's window (open from `start`) and converter, for the
    /// process with `meta`, writing into `out`.
    fn new(
        s: &'static Session,
        ctx: &ArmedCtx,
        k: u32,
        mut meta: Vec<(String, String)>,
        start: i64,
        out: File,
    ) -> Self {
        let window = Arc::new(CaptureWindow::new(
            CaptureSpec {
                trigger: Trigger::ProfilerApi,
                delay_ns: 0,
                duration_ns: None,
            },
            start,
        ));
        window.open(start);
        let driver = Driver::open();
        if let Some(v) = driver.as_ref().and_then(Driver::version) {
            meta.push(("cuda_driver_version".into(), v.to_string()));
        }
        let mut process = ctx.process.clone();
        process.metadata = meta;
        process.clock_snapshot = crate::process_info::clock_snapshot();
        let host = RealHost {
            cupti: &s.cupti,
            driver,
        };
        let mut conv = Converter::new(process, Box::new(host), window.clone(), s.python.clone());
        conv.ts_offset_ns = ctx.ts_offset_ns;
        conv.own_tid = Some(crate::session::gettid());
        CaptureWriter {
            k,
            start,
            window,
            conv,
            w: PerfettoWriter::new(out),
            nccl: crate::nccl_plugin::trace::NcclWriter::default(),
            optimizer_steps: Vec::new(),
            step_ends: Vec::new(),
            dropped_before: s.cupti_dropped.load(Ordering::Relaxed) + s.queue.dropped_records(),
            write_failed: false,
        }
    }

    /// Closes the window at `end`, switches the callback off and, unless
    /// the process is ending (`stop`), keeps the activity records on for
    /// [`CAPTURE_END_GRACE`]; then disables `kinds`.
    fn end_window(&mut self, s: &Session, kinds: &[u32], end: i64, stop: bool) {
        self.window.close(end);
        setup::armed_callbacks(&s.cupti, &s.sync_cbids, false);
        if !stop {
            // The GPU runs behind the host: work launched inside the
            // window may still be queued or running. Activity records
            // stay on for a grace period so it completes (what it
            // records after the window is dropped by the window).
            let grace = Instant::now();
            while grace.elapsed() < CAPTURE_END_GRACE && s.sync.may_call_cupti() {
                crate::session::drain(s, &mut self.conv, Duration::from_millis(20));
                // SAFETY: plain flag (0: completed buffers only).
                let rc = unsafe { (s.cupti.flush_all)(0) };
                let _ = s.cupti.check("cuptiActivityFlushAll", rc);
            }
        }
        for &kind in kinds {
            // SAFETY: plain enum argument (a kind enabled above).
            let rc = unsafe { (s.cupti.activity_disable)(kind) };
            let _ = s.cupti.check("cuptiActivityDisable", rc);
        }
    }

    /// Converts what the queue holds, the NCCL operations and the
    /// optimizer steps, and writes the batch (`ending`: the last).
    fn write_batch(&mut self, s: &Session, ending: bool) {
        let k = self.k;
        let conv = &mut self.conv;
        while !s.queue.is_empty() {
            crate::session::drain(s, conv, Duration::ZERO);
        }
        self.nccl.write(conv, ending);
        self.note_steps();
        let conv = &mut self.conv;
        conv.finish_batch(ending);
        let dropped = (s.cupti_dropped.load(Ordering::Relaxed) + s.queue.dropped_records())
            .saturating_sub(self.dropped_before)
            + conv.incomplete_records;
        self.set_bounds();
        self.conv.process_mut().dropped_records = dropped;
        let (w, write_failed) = (&mut self.w, self.write_failed);
        let written = self.conv.trace.flush_events(|t| {
            if write_failed {
                Ok(())
            } else {
                w.write_batch(t)
            }
        });
        if let Err(e) = written {
            crate::warn!("streamscope: capture {k}: writing failed: {e}");
            self.write_failed = true;
        }
    }

    /// The optimizer steps the Python hooks noted since the last call.
    fn note_steps(&mut self) {
        let (steps, _) = python::take_optimizer_steps();
        if steps.is_empty() {
            return;
        }
        // Only a capture of N steps (the one with a step probe) asks where
        // the steps end; a capture of a duration just writes the ranges.
        let counts_steps = self.conv.step_probe.is_some();
        for (tid, a, b, key) in steps {
            if b >= self.start {
                if counts_steps {
                    self.optimizer_steps.push((a, b, key));
                }
                self.conv.optimizer_step(tid, a, b, key);
            }
        }
        if counts_steps {
            self.step_ends = streamscope_core::analysis::running_step_ends(&self.optimizer_steps);
        }
    }

    /// Drops the held slices that start after `end` (a capture of N
    /// steps: the work past its last step boundary).
    fn cut_after(&mut self, end: i64) {
        let b = &mut self.conv.trace;
        let starts: Vec<i64> = b.slices().start_ns().to_vec();
        b.retain_slices(|id| starts[id.index()] < end);
    }

    /// The process's capture bounds from the window.
    fn set_bounds(&mut self) {
        let (cs, ce) = self.window.bounds();
        let pm = self.conv.process_mut();
        pm.capture_start_ns = cs;
        pm.capture_end_ns = ce;
    }

    /// Ends the file (unless writing failed before).
    fn finish(self) {
        let CaptureWriter {
            k,
            mut conv,
            w,
            write_failed,
            ..
        } = self;
        if !write_failed {
            if let Err(e) = conv.trace.flush_events(|t| w.finish(t)) {
                crate::warn!("streamscope: capture {k}: finishing the trace failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_signals() {
        assert_eq!(trigger_signal(None), Ok(libc::SIGUSR2));
        assert_eq!(trigger_signal(Some("USR1")), Ok(libc::SIGUSR1));
        assert_eq!(trigger_signal(Some("SIGUSR2")), Ok(libc::SIGUSR2));
        assert_eq!(trigger_signal(Some("10")), Ok(10));
        for bad in ["KILL", "9", "15", "TERM", "x", "0", "99"] {
            assert!(
                matches!(trigger_signal(Some(bad)), Err(EnvError::Signal { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_trigger_file_fires_on_a_new_mtime() {
        let dir = std::env::temp_dir().join(format!("ss-armed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("capture");
        let mut t = TriggerFile::new(p.clone());
        t.last_poll -= Duration::from_secs(1);
        assert!(!t.fired());
        std::fs::write(&p, b"").expect("touch");
        t.last_poll -= Duration::from_secs(1);
        assert!(t.fired(), "appeared");
        t.last_poll -= Duration::from_secs(1);
        assert!(!t.fired(), "same mtime");
        let later = SystemTime::now() + Duration::from_secs(5);
        File::options()
            .write(true)
            .open(&p)
            .and_then(|f| f.set_modified(later))
            .expect("touch again");
        assert!(!t.fired(), "polled at most every 200 ms");
        t.last_poll -= Duration::from_secs(1);
        assert!(t.fired(), "new mtime");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
