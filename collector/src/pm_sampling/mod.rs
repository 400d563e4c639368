//! Measured GPU metrics: CUPTI PM sampling (`record --gpu-metrics`).
//!
//! Off unless `STREAMSCOPE_GPU_METRICS` is set: then [`start`] spawns one
//! thread ("streamscope-pm") and nothing else changes. The writer thread
//! tells it which CUDA devices the process uses (the ordinals its records
//! carry, see [`Shared::offer_devices`]); for each new one the thread takes
//! the device's lock file (one sampler per GPU even when several processes
//! share it; the loser notes "sampled by pid P"), probes every requested
//! CUPTI metric alone on a fresh profiler-host object (refused ones go to
//! the metadata), builds the config image of those accepted (dropping the
//! last ones until it fits one pass), enables PM sampling on the device,
//! sets the interval (GPU time trigger, ns) and a hardware buffer, and
//! starts it. Every [`DECODE_PERIOD`] it decodes the hardware buffer into a
//! counter-data image, evaluates each completed sample, maps its
//! timestamps onto the trace's clock ([`decode::ClockMap`]) and queues one
//! counter point per metric; the writer adds them to its batch as counter
//! tracks ("GPU 0 · SM active %", core's `gpu_metrics`). At the end the
//! writer asks for a last round ([`Shared::finish`]): stop, decode, disable.
//!
//! Any failure is a line in the trace's metadata (keys in
//! `gpu_metrics::keys`) and on stderr, never an error of the program: a
//! device that cannot be sampled is simply not sampled.

pub mod decode;

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cudarc::cupti::sys as cs;
use streamscope_core::gpu_metrics::{self as gm, keys, Request};
use streamscope_core::model::TrackId;
use streamscope_core::protocol;

use crate::convert::Converter;
use crate::cupti_api::{Cupti, CuptiResult, PmApi, SUCCESS};
use crate::driver::Driver;
use crate::process_info::monotonic_ns;
use decode::{ClockMap, DrainStats, PmOps, Series, StopReason};

/// How often the sampler thread decodes.
pub const DECODE_PERIOD: Duration = Duration::from_millis(50);
/// How long the writer's last batch waits for the sampler's last round.
pub const FINISH_WAIT: Duration = Duration::from_millis(1500);
/// Hardware buffer sizes tried in turn.
const HW_BUFFER_BYTES: [usize; 3] = [512 << 20, 128 << 20, 32 << 20];
/// Points queued for the writer at most (a stalled writer loses the rest,
/// counted): about 10 s of the default set at 10 kHz.
const MAX_QUEUED_POINTS: usize = 1 << 20;
/// Consecutive failed decode rounds after which a device is given up.
const MAX_DECODE_FAILURES: u32 = 20;
const CUPTI_ERROR_OUT_OF_MEMORY: CuptiResult = 8;

/// What `--gpu-metrics` asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub requests: Vec<Request>,
    pub hz: u32,
}

impl Settings {
    /// None when GPU metrics are off (the variable unset); Err for a value
    /// that does not parse.
    pub fn from_env(env: &impl Fn(&str) -> Option<String>) -> Option<Result<Settings, String>> {
        let list = env(protocol::env::GPU_METRICS)?;
        Some((|| {
            let requests = gm::parse_list(&list)?;
            let hz = match env(protocol::env::GPU_METRICS_HZ) {
                Some(v) => gm::parse_hz(&v)?,
                None => gm::DEFAULT_HZ,
            };
            Ok(Settings { requests, hz })
        })())
    }

    /// The sampling interval in ns.
    pub fn interval_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz.max(1))
    }
}

/// What the sampler thread hands the writer.
#[derive(Default)]
struct Out {
    /// (device ordinal, track name) of each series, by global series id.
    series: Vec<(u32, String)>,
    /// (global series id, ns, value).
    points: Vec<(u32, i64, f64)>,
    meta: Vec<(String, String)>,
    lost_points: u64,
}

/// Between the writer thread and the sampler thread.
pub struct Shared {
    out: Mutex<Out>,
    offered: Mutex<(HashSet<u32>, Vec<u32>)>,
    stop: AtomicBool,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    done: Mutex<bool>,
    done_cv: Condvar,
}

impl Shared {
    fn new() -> Self {
        Shared {
            out: Mutex::new(Out::default()),
            offered: Mutex::new((HashSet::new(), Vec::new())),
            stop: AtomicBool::new(false),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            done: Mutex::new(false),
            done_cv: Condvar::new(),
        }
    }

    /// The writer: CUDA devices the process's records name.
    pub fn offer_devices(&self, ordinals: impl IntoIterator<Item = u32>) {
        if let Ok(mut o) = self.offered.lock() {
            for d in ordinals {
                if o.0.insert(d) {
                    o.1.push(d);
                }
            }
        }
    }

    fn take_offered(&self) -> Vec<u32> {
        self.offered
            .lock()
            .map(|mut o| std::mem::take(&mut o.1))
            .unwrap_or_default()
    }

    /// The writer's last batch: asks for the last round and waits for it
    /// up to `wait`.
    pub fn finish(&self, wait: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut w) = self.wake.lock() {
            *w = true;
            self.wake_cv.notify_all();
        }
        if let Ok(d) = self.done.lock() {
            let _ = self.done_cv.wait_timeout_while(d, wait, |d| !*d);
        }
    }

    fn mark_done(&self) {
        if let Ok(mut d) = self.done.lock() {
            *d = true;
            self.done_cv.notify_all();
        }
    }

    /// Sleeps `d` or until [`Shared::finish`].
    fn sleep(&self, d: Duration) {
        if let Ok(w) = self.wake.lock() {
            let _ = self.wake_cv.wait_timeout_while(w, d, |w| !*w);
        }
    }

    fn meta(&self, key: String, value: String) {
        if let Ok(mut o) = self.out.lock() {
            o.meta.retain(|(k, _)| *k != key);
            o.meta.push((key, value));
        }
    }

    fn add_series(&self, ordinal: u32, name: String) -> u32 {
        self.out
            .lock()
            .map(|mut o| {
                o.series.push((ordinal, name));
                (o.series.len() - 1) as u32
            })
            .unwrap_or(u32::MAX)
    }

    fn push_points(&self, pts: impl ExactSizeIterator<Item = (u32, i64, f64)>) {
        if let Ok(mut o) = self.out.lock() {
            let room = MAX_QUEUED_POINTS.saturating_sub(o.points.len());
            let n = pts.len();
            o.points.extend(pts.take(room));
            o.lost_points += n.saturating_sub(room) as u64;
        }
    }

    /// The writer: adds what the sampler queued to the batch (`tracks`
    /// maps series ids to counter tracks, kept across batches). `last`
    /// first waits for the sampler's last round.
    pub fn write(&self, conv: &mut Converter, tracks: &mut Vec<TrackId>, last: bool) {
        self.offer_devices(conv.device_ordinals());
        if last {
            self.finish(FINISH_WAIT);
        }
        let out = match self.out.lock() {
            Ok(mut o) => Out {
                series: o.series.clone(),
                points: std::mem::take(&mut o.points),
                meta: std::mem::take(&mut o.meta),
                lost_points: o.lost_points,
            },
            Err(_) => return,
        };
        while tracks.len() < out.series.len() {
            let (ordinal, name) = &out.series[tracks.len()];
            let t = conv.counter_track(*ordinal, name);
            tracks.push(t);
        }
        for (k, v) in out.meta {
            conv.set_process_metadata(&k, v);
        }
        if out.lost_points > 0 {
            conv.set_process_metadata(
                "gpu_metrics.points_lost",
                format!("{} (the writer fell behind)", out.lost_points),
            );
        }
        for (s, ts, v) in out.points {
            if let Some(&t) = tracks.get(s as usize) {
                if conv.in_window(ts, ts) {
                    conv.trace.push_counter(t, ts, v);
                }
            }
        }
    }
}

/// Starts the sampler thread. `may_call` says whether CUPTI may still be
/// called (false once the process exits without the writer).
pub fn start(
    cupti: &'static Cupti,
    settings: Settings,
    out_dir: PathBuf,
    host: String,
    may_call: fn() -> bool,
) -> Result<Arc<Shared>, String> {
    let shared = Arc::new(Shared::new());
    let sh = shared.clone();
    std::thread::Builder::new()
        .name("streamscope-pm".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&sh, cupti, &settings, &out_dir, &host, may_call)
            }));
            if r.is_err() {
                sh.meta(
                    keys::UNAVAILABLE.into(),
                    "the sampler thread failed; GPU metrics stop there".into(),
                );
            }
            sh.mark_done();
        })
        .map_err(|e| format!("cannot start the GPU metrics thread: {e}"))?;
    Ok(shared)
}

fn result_name(cupti: &Cupti, rc: CuptiResult) -> String {
    format!("{} ({rc})", cupti.result_string(rc))
}

fn run(
    shared: &Shared,
    cupti: &'static Cupti,
    settings: &Settings,
    out_dir: &std::path::Path,
    host: &str,
    may_call: fn() -> bool,
) {
    crate::session::block_signals();
    let api: &'static PmApi = match PmApi::load(cupti) {
        Ok(a) => Box::leak(Box::new(a)),
        Err(e) => {
            crate::warn!("streamscope: GPU metrics unavailable: {e}");
            shared.meta(keys::UNAVAILABLE.into(), e);
            return;
        }
    };
    let mut init = cs::CUpti_Profiler_Initialize_Params {
        structSize: cs::Profiler_Initialize_Params_STRUCT_SIZE as usize,
        pPriv: std::ptr::null_mut(),
    };
    // SAFETY: a params struct we own, structSize set.
    let rc = unsafe { (api.profiler_initialize)(&mut init) };
    if rc != SUCCESS {
        let msg = format!("cuptiProfilerInitialize failed: {}", result_name(cupti, rc));
        crate::warn!("streamscope: GPU metrics unavailable: {msg}");
        shared.meta(keys::UNAVAILABLE.into(), msg);
        return;
    }
    let driver = Driver::open();
    let mut samplers: Vec<DeviceSampler> = Vec::new();
    let mut tried = HashSet::new();
    let mut last_stats = Instant::now();
    loop {
        if !may_call() {
            return; // the process is going without us: touch nothing
        }
        let stopping = shared.stop.load(Ordering::SeqCst);
        if !stopping {
            for ord in shared.take_offered() {
                if !tried.insert(ord) {
                    continue;
                }
                let ctx = StartCtx {
                    api,
                    cupti,
                    driver: driver.as_ref(),
                    settings,
                    out_dir,
                    host,
                    shared,
                };
                match DeviceSampler::start(&ctx, ord) {
                    Ok(s) => samplers.push(s),
                    Err(msg) => {
                        crate::warn!("streamscope: GPU {ord}: not sampled: {msg}");
                        shared.meta(keys::status(ord), msg);
                    }
                }
            }
        }
        for s in &mut samplers {
            s.round(shared);
        }
        samplers.retain(|s| !s.given_up);
        if last_stats.elapsed() >= Duration::from_secs(1) {
            for s in &samplers {
                s.publish_stats(shared);
            }
            last_stats = Instant::now();
        }
        if stopping {
            break;
        }
        shared.sleep(DECODE_PERIOD);
    }
    for mut s in samplers {
        s.finish(shared);
    }
    let mut de = cs::CUpti_Profiler_DeInitialize_Params {
        structSize: cs::Profiler_DeInitialize_Params_STRUCT_SIZE as usize,
        pPriv: std::ptr::null_mut(),
    };
    // SAFETY: a params struct we own; every sampler is disabled.
    let _ = unsafe { (api.profiler_deinitialize)(&mut de) };
}

struct StartCtx<'a> {
    api: &'static PmApi,
    cupti: &'static Cupti,
    driver: Option<&'a Driver>,
    settings: &'a Settings,
    out_dir: &'a std::path::Path,
    host: &'a str,
    shared: &'a Shared,
}

/// The device's lock: Ok(file held) or Err(the holder's pid, if written).
fn lock_device(path: &std::path::Path) -> Result<File, String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own; non-blocking.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        let holder = s.trim();
        return Err(if holder.is_empty() {
            "sampled by another process".to_string()
        } else {
            format!("sampled by pid {holder}")
        });
    }
    let _ = f.set_len(0);
    let _ = f.rewind();
    let _ = write!(f, "{}", std::process::id());
    let _ = f.flush();
    Ok(f)
}

/// A profiler-host object (metric names -> config image; evaluation).
struct HostObj {
    api: &'static PmApi,
    obj: *mut cs::CUpti_Profiler_Host_Object,
}

impl HostObj {
    fn new(api: &'static PmApi, chip: &CStr, avail: &[u8]) -> Result<HostObj, CuptiResult> {
        // SAFETY: all-zero is a valid value of this plain C struct (null
        // pointers, enum value 0).
        let mut p: cs::CUpti_Profiler_Host_Initialize_Params = unsafe { std::mem::zeroed() };
        p.structSize = cs::Profiler_Host_Initialize_Params_STRUCT_SIZE as usize;
        p.profilerType = cs::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_PM_SAMPLING;
        p.pChipName = chip.as_ptr();
        p.pCounterAvailabilityImage = avail.as_ptr();
        // SAFETY: the chip name and availability image outlive the call.
        let rc = unsafe { (api.host_initialize)(&mut p) };
        if rc != SUCCESS || p.pHostObject.is_null() {
            return Err(if rc == SUCCESS { 999 } else { rc });
        }
        Ok(HostObj {
            api,
            obj: p.pHostObject,
        })
    }

    fn add_metrics(&self, names: &[*const c_char]) -> CuptiResult {
        // SAFETY: zeroed plain C struct, as above.
        let mut p: cs::CUpti_Profiler_Host_ConfigAddMetrics_Params = unsafe { std::mem::zeroed() };
        p.structSize = cs::Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE as usize;
        p.pHostObject = self.obj;
        p.ppMetricNames = names.as_ptr() as *mut *const c_char;
        p.numMetrics = names.len();
        // SAFETY: the names are NUL-terminated strings alive for the call;
        // CUPTI only reads the array.
        unsafe { (self.api.host_config_add_metrics)(&mut p) }
    }

    /// The config image and its pass count.
    fn config_image(&self) -> Result<(Vec<u8>, usize), CuptiResult> {
        // SAFETY: zeroed plain C struct.
        let mut sz: cs::CUpti_Profiler_Host_GetConfigImageSize_Params =
            unsafe { std::mem::zeroed() };
        sz.structSize = cs::Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE as usize;
        sz.pHostObject = self.obj;
        // SAFETY: a params struct we own.
        let rc = unsafe { (self.api.host_get_config_image_size)(&mut sz) };
        if rc != SUCCESS {
            return Err(rc);
        }
        let mut image = vec![0u8; sz.configImageSize];
        // SAFETY: zeroed plain C struct.
        let mut gi: cs::CUpti_Profiler_Host_GetConfigImage_Params = unsafe { std::mem::zeroed() };
        gi.structSize = cs::Profiler_Host_GetConfigImage_Params_STRUCT_SIZE as usize;
        gi.pHostObject = self.obj;
        gi.configImageSize = image.len();
        gi.pConfigImage = image.as_mut_ptr();
        // SAFETY: CUPTI writes at most configImageSize bytes into `image`.
        let rc = unsafe { (self.api.host_get_config_image)(&mut gi) };
        if rc != SUCCESS {
            return Err(rc);
        }
        // SAFETY: zeroed plain C struct.
        let mut np: cs::CUpti_Profiler_Host_GetNumOfPasses_Params = unsafe { std::mem::zeroed() };
        np.structSize = cs::Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE as usize;
        np.configImageSize = image.len();
        np.pConfigImage = image.as_mut_ptr();
        // SAFETY: reads the image we own.
        let rc = unsafe { (self.api.host_get_num_of_passes)(&mut np) };
        let passes = if rc == SUCCESS { np.numOfPasses } else { 1 };
        Ok((image, passes))
    }
}

impl Drop for HostObj {
    fn drop(&mut self) {
        // SAFETY: zeroed plain C struct.
        let mut p: cs::CUpti_Profiler_Host_Deinitialize_Params = unsafe { std::mem::zeroed() };
        p.structSize = cs::Profiler_Host_Deinitialize_Params_STRUCT_SIZE as usize;
        p.pHostObject = self.obj;
        // SAFETY: the object came from cuptiProfilerHostInitialize and is
        // deinitialized once.
        let _ = unsafe { (self.api.host_deinitialize)(&mut p) };
    }
}

/// The primary context made current on the sampler thread (the fallback
/// when cuptiPmSamplingEnable wants a context), released at the end.
struct PrimaryCtx {
    release: unsafe extern "C" fn(c_int) -> c_int,
    dev: c_int,
}

impl PrimaryCtx {
    fn retain(ordinal: u32) -> Option<PrimaryCtx> {
        // SAFETY: libcuda is loaded (the driver loaded us); RTLD_NOLOAD
        // only finds it.
        let h =
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if h.is_null() {
            return None;
        }
        let sym = |n: &CStr| {
            // SAFETY: dlsym on a live handle with a NUL-terminated name.
            let p = unsafe { libc::dlsym(h, n.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let (get, retain, set, release) = (
            sym(c"cuDeviceGet")?,
            sym(c"cuDevicePrimaryCtxRetain")?,
            sym(c"cuCtxSetCurrent")?,
            sym(c"cuDevicePrimaryCtxRelease_v2")?,
        );
        // SAFETY: the CUDA driver functions of those names and signatures
        // (CUdevice is int, CUcontext a pointer, CUresult an int).
        unsafe {
            let get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int = std::mem::transmute(get);
            let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int =
                std::mem::transmute(retain);
            let set: unsafe extern "C" fn(*mut c_void) -> c_int = std::mem::transmute(set);
            let release: unsafe extern "C" fn(c_int) -> c_int = std::mem::transmute(release);
            let mut dev: c_int = 0;
            if get(&mut dev, ordinal as c_int) != 0 {
                return None;
            }
            let mut ctx: *mut c_void = std::ptr::null_mut();
            if retain(&mut ctx, dev) != 0 {
                return None;
            }
            if set(ctx) != 0 {
                release(dev);
                return None;
            }
            Some(PrimaryCtx { release, dev })
        }
    }
}

impl Drop for PrimaryCtx {
    fn drop(&mut self) {
        // SAFETY: releases the one reference `retain` took.
        let _ = unsafe { (self.release)(self.dev) };
    }
}

/// One device's PM sampler.
struct DeviceSampler {
    api: &'static PmApi,
    cupti: &'static Cupti,
    ordinal: u32,
    pm: *mut cs::CUpti_PmSampling_Object,
    started: bool,
    host: HostObj,
    image: Vec<u8>,
    /// Keeps the names `name_ptrs` points into alive.
    _names: Vec<CString>,
    name_ptrs: Vec<*const c_char>,
    series: Vec<Series>,
    series_ids: Vec<u32>,
    clock: ClockMap,
    stats: DrainStats,
    unplaced: u64,
    decode_failures: u32,
    decode_errors: u64,
    last_error: Option<String>,
    given_up: bool,
    last_points: Vec<(u32, i64, f64)>,
    config: String,
    _ctx: Option<PrimaryCtx>,
    _lock: File,
}

/// A request the device accepts, with the formula chosen for it.
struct Chosen {
    /// The metric's key, or the raw CUPTI name.
    key: String,
    track: String,
    /// None for a raw CUPTI metric (its value as it is).
    formula: Option<gm::Formula>,
    /// The CUPTI metrics it reads.
    inputs: Vec<String>,
}

/// Each request's first candidate whose CUPTI metrics are each accepted
/// alone (on a fresh host object), and the CUPTI names refused.
fn probe(
    cupti: &Cupti,
    api: &'static PmApi,
    chip: &CStr,
    avail: &[u8],
    ordinal: u32,
    requests: &[Request],
) -> Result<(Vec<Chosen>, Vec<String>), String> {
    let mut cache: Vec<(String, Result<(), CuptiResult>)> = Vec::new();
    let mut accepted = |name: &str| -> Result<bool, String> {
        if let Some((_, r)) = cache.iter().find(|(n, _)| n == name) {
            return Ok(r.is_ok());
        }
        let c = CString::new(name).map_err(|_| format!("bad metric name {name:?}"))?;
        let host = HostObj::new(api, chip, avail).map_err(|rc| {
            format!(
                "cuptiProfilerHostInitialize failed: {}",
                result_name(cupti, rc)
            )
        })?;
        let rc = host.add_metrics(&[c.as_ptr()]);
        cache.push((
            name.to_string(),
            if rc == SUCCESS { Ok(()) } else { Err(rc) },
        ));
        Ok(rc == SUCCESS)
    };
    let mut chosen = Vec::new();
    for r in requests {
        match r {
            Request::Known(m) => {
                for f in m.candidates() {
                    let mut all = true;
                    for n in f.inputs() {
                        all &= accepted(n)?;
                    }
                    if all {
                        chosen.push(Chosen {
                            key: m.key().to_string(),
                            track: gm::track_name(ordinal, *m),
                            formula: Some(*f),
                            inputs: f.inputs().iter().map(|s| s.to_string()).collect(),
                        });
                        break;
                    }
                }
            }
            Request::Raw(n) => {
                if accepted(n)? {
                    chosen.push(Chosen {
                        key: n.clone(),
                        track: gm::raw_track_name(ordinal, n),
                        formula: None,
                        inputs: vec![n.clone()],
                    });
                }
            }
        }
    }
    let refused = cache
        .iter()
        .filter_map(|(n, r)| {
            r.err()
                .map(|rc| format!("{n} ({})", result_name(cupti, rc)))
        })
        .collect();
    Ok((chosen, refused))
}

impl DeviceSampler {
    fn start(c: &StartCtx<'_>, ordinal: u32) -> Result<DeviceSampler, String> {
        let (api, cupti) = (c.api, c.cupti);
        let rs = |rc| result_name(cupti, rc);
        // 1. One sampler per GPU of the host.
        let pci = c
            .driver
            .and_then(|d| d.pci_id(ordinal))
            .unwrap_or_else(|| format!("ordinal{ordinal}"));
        let lock_path = c
            .out_dir
            .join(protocol::gpu_metrics_lock_name(c.host, &pci));
        let lock = lock_device(&lock_path)?;
        // 2. Chip name.
        let mut chip = cs::CUpti_Device_GetChipName_Params {
            structSize: cs::Device_GetChipName_Params_STRUCT_SIZE as usize,
            pPriv: std::ptr::null_mut(),
            deviceIndex: ordinal as usize,
            pChipName: std::ptr::null(),
        };
        // SAFETY: a params struct we own.
        let rc = unsafe { (api.device_get_chip_name)(&mut chip) };
        if rc != SUCCESS || chip.pChipName.is_null() {
            return Err(format!("cuptiDeviceGetChipName failed: {}", rs(rc)));
        }
        // SAFETY: CUPTI returned a NUL-terminated string it owns.
        let chip_name: CString = unsafe { CStr::from_ptr(chip.pChipName) }.to_owned();
        // 3. Counter availability (size, then the image).
        // SAFETY: zeroed plain C struct.
        let mut av: cs::CUpti_PmSampling_GetCounterAvailability_Params =
            unsafe { std::mem::zeroed() };
        av.structSize = cs::PmSampling_GetCounterAvailability_Params_STRUCT_SIZE as usize;
        av.deviceIndex = ordinal as usize;
        // SAFETY: a null image asks for the size only.
        let rc = unsafe { (api.get_counter_availability)(&mut av) };
        if rc != SUCCESS {
            return Err(format!(
                "cuptiPmSamplingGetCounterAvailability failed: {}",
                rs(rc)
            ));
        }
        let mut avail = vec![0u8; av.counterAvailabilityImageSize];
        av.pCounterAvailabilityImage = avail.as_mut_ptr();
        // SAFETY: CUPTI writes counterAvailabilityImageSize bytes into `avail`.
        let rc = unsafe { (api.get_counter_availability)(&mut av) };
        if rc != SUCCESS {
            return Err(format!(
                "cuptiPmSamplingGetCounterAvailability failed: {}",
                rs(rc)
            ));
        }
        // 4. Each metric alone.
        let t_probe = Instant::now();
        let (mut chosen, mut refused) = probe(
            cupti,
            api,
            &chip_name,
            &avail,
            ordinal,
            &c.settings.requests,
        )?;
        // 5. Everything accepted in one config image of one pass.
        let (host, config, names) = loop {
            if chosen.is_empty() {
                let msg = format!("no metric accepted; refused: {}", refused.join("; "));
                c.shared.meta(keys::refused(ordinal), refused.join("; "));
                return Err(msg);
            }
            let mut names: Vec<String> = Vec::new();
            for ch in &chosen {
                for n in &ch.inputs {
                    if !names.contains(n) {
                        names.push(n.clone());
                    }
                }
            }
            let cnames: Vec<CString> = names
                .iter()
                .filter_map(|n| CString::new(n.as_str()).ok())
                .collect();
            let ptrs: Vec<*const c_char> = cnames.iter().map(|n| n.as_ptr()).collect();
            let host = HostObj::new(api, &chip_name, &avail)
                .map_err(|rc| format!("cuptiProfilerHostInitialize failed: {}", rs(rc)))?;
            let rc = host.add_metrics(&ptrs);
            let fits = if rc == SUCCESS {
                match host.config_image() {
                    Ok((img, 1)) => Some(img),
                    Ok((_, _)) => None,
                    Err(rc) => {
                        return Err(format!(
                            "cuptiProfilerHostGetConfigImage failed: {}",
                            rs(rc)
                        ))
                    }
                }
            } else {
                None
            };
            match fits {
                Some(img) => break (host, img, cnames),
                None => {
                    if let Some(ch) = chosen.pop() {
                        refused.push(format!(
                            "{} (does not fit one pass with the others)",
                            ch.key
                        ));
                    }
                }
            }
        };
        let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let name_strs: Vec<String> = names
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        let series: Vec<Series> = chosen
            .iter()
            .map(|ch| Series {
                inputs: ch
                    .inputs
                    .iter()
                    .filter_map(|n| name_strs.iter().position(|x| x == n))
                    .collect(),
                formula: ch.formula,
            })
            .collect();
        // 6. Enable (with the primary context current if CUPTI wants one).
        let enable = |_: ()| -> Result<*mut cs::CUpti_PmSampling_Object, CuptiResult> {
            // SAFETY: zeroed plain C struct.
            let mut en: cs::CUpti_PmSampling_Enable_Params = unsafe { std::mem::zeroed() };
            en.structSize = cs::PmSampling_Enable_Params_STRUCT_SIZE as usize;
            en.deviceIndex = ordinal as usize;
            // SAFETY: a params struct we own.
            let rc = unsafe { (api.enable)(&mut en) };
            if rc == SUCCESS && !en.pPmSamplingObject.is_null() {
                Ok(en.pPmSamplingObject)
            } else {
                Err(if rc == SUCCESS { 999 } else { rc })
            }
        };
        let mut ctx = None;
        let pm = match enable(()) {
            Ok(pm) => pm,
            Err(rc) => {
                ctx = PrimaryCtx::retain(ordinal);
                if ctx.is_none() {
                    return Err(format!("cuptiPmSamplingEnable failed: {}", rs(rc)));
                }
                match enable(()) {
                    Ok(pm) => pm,
                    Err(rc2) => {
                        return Err(format!(
                        "cuptiPmSamplingEnable failed: {} (with the primary context current: {})",
                        rs(rc),
                        rs(rc2)
                    ))
                    }
                }
            }
        };
        let mut s = DeviceSampler {
            api,
            cupti,
            ordinal,
            pm,
            started: false,
            host,
            image: Vec::new(),
            _names: names,
            name_ptrs,
            series,
            series_ids: Vec::new(),
            clock: ClockMap::new(0, vec![]),
            stats: DrainStats::default(),
            unplaced: 0,
            decode_failures: 0,
            decode_errors: 0,
            last_error: None,
            given_up: false,
            last_points: Vec::new(),
            config: String::new(),
            _ctx: ctx,
            _lock: lock,
        };
        // From here `s` disables on drop.
        // 7. Interval, trigger, hardware buffer.
        let interval = c.settings.interval_ns();
        let mut set = None;
        'outer: for trigger in [
            cs::CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
            cs::CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL,
        ] {
            for hw in HW_BUFFER_BYTES {
                // SAFETY: zeroed plain C struct (enum fields 0 are valid).
                let mut sc: cs::CUpti_PmSampling_SetConfig_Params = unsafe { std::mem::zeroed() };
                sc.structSize = cs::PmSampling_SetConfig_Params_STRUCT_SIZE as usize;
                sc.pPmSamplingObject = s.pm;
                sc.configSize = config.len();
                sc.pConfig = config.as_ptr();
                sc.hardwareBufferSize = hw;
                sc.samplingInterval = interval;
                sc.triggerMode = trigger;
                sc.hwBufferAppendMode =
                    cs::CUpti_PmSampling_HardwareBuffer_AppendMode::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
                // SAFETY: the config image outlives the call (CUPTI copies it).
                let rc = unsafe { (api.set_config)(&mut sc) };
                if rc == SUCCESS {
                    set = Some((trigger, hw));
                    break 'outer;
                }
                s.last_error = Some(format!("cuptiPmSamplingSetConfig failed: {}", rs(rc)));
            }
        }
        let Some((trigger, hw)) = set else {
            return Err(s.last_error.take().unwrap_or_default());
        };
        let time_mode = trigger
            == cs::CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
        s.last_error = None;
        // 8. The counter-data image: 100 ms of samples, at least 1000.
        let max_samples = (c.settings.hz / 10).max(1000);
        // SAFETY: zeroed plain C struct.
        let mut ds: cs::CUpti_PmSampling_GetCounterDataSize_Params = unsafe { std::mem::zeroed() };
        ds.structSize = cs::PmSampling_GetCounterDataSize_Params_STRUCT_SIZE as usize;
        ds.pPmSamplingObject = s.pm;
        ds.pMetricNames = s.name_ptrs.as_ptr() as *mut *const c_char;
        ds.numMetrics = s.name_ptrs.len();
        ds.maxSamples = max_samples;
        // SAFETY: the names outlive the call; CUPTI only reads them.
        let rc = unsafe { (api.get_counter_data_size)(&mut ds) };
        if rc != SUCCESS || ds.counterDataSize == 0 {
            return Err(format!(
                "cuptiPmSamplingGetCounterDataSize failed: {}",
                rs(rc)
            ));
        }
        s.image = vec![0u8; ds.counterDataSize];
        {
            let mut ops = s.ops();
            if let Err(rc) = ops.reset() {
                return Err(format!(
                    "cuptiPmSamplingCounterDataImageInitialize failed: {}",
                    rs(rc)
                ));
            }
        }
        // 9. The clocks a sample may be stamped with, then start.
        let mut cupti_ts = 0u64;
        let m0 = monotonic_ns();
        let real = clock_realtime_ns();
        // SAFETY: writes one u64.
        let ts_ok = unsafe { (cupti.get_timestamp)(&mut cupti_ts) } == SUCCESS;
        let m1 = monotonic_ns();
        let mono = m0 + (m1 - m0) / 2;
        let mut cands = vec![("CLOCK_MONOTONIC", 0i64)];
        if ts_ok && cupti_ts > 0 {
            cands.push(("CUPTI timestamp", mono - cupti_ts as i64));
        }
        cands.push(("CLOCK_REALTIME", mono - real));
        s.clock = ClockMap::new(mono, cands);
        // SAFETY: zeroed plain C struct.
        let mut st: cs::CUpti_PmSampling_Start_Params = unsafe { std::mem::zeroed() };
        st.structSize = cs::PmSampling_Start_Params_STRUCT_SIZE as usize;
        st.pPmSamplingObject = s.pm;
        // SAFETY: a params struct we own; the sampler is enabled and set.
        let rc = unsafe { (api.start)(&mut st) };
        if rc != SUCCESS {
            return Err(format!("cuptiPmSamplingStart failed: {}", rs(rc)));
        }
        s.started = true;
        // Series and metadata.
        let mut sampled = Vec::new();
        for ch in &chosen {
            s.series_ids
                .push(c.shared.add_series(ordinal, ch.track.clone()));
            sampled.push(format!("{}={}", ch.key, ch.inputs.join("+")));
        }
        s.config = format!(
            "{} Hz ({}), hardware buffer {} MiB, image {max_samples} samples, chip {}{}; probing took {probe_ms} ms, set-up {} ms",
            c.settings.hz,
            if time_mode {
                format!("GPU time interval {interval} ns")
            } else {
                format!("GPU time interval refused: SYS clock interval of {interval} cycles, the rate follows the clock")
            },
            hw >> 20,
            chip_name.to_string_lossy(),
            if s._ctx.is_some() {
                ", primary context made current"
            } else {
                ""
            },
            t_probe.elapsed().as_millis()
        );
        c.shared.meta(keys::config(ordinal), s.config.clone());
        c.shared.meta(keys::sampled(ordinal), sampled.join(", "));
        if !refused.is_empty() {
            c.shared.meta(keys::refused(ordinal), refused.join("; "));
        }
        crate::warn!(
            "streamscope: GPU {ordinal}: sampling {}; {}",
            sampled.join(", "),
            s.config
        );
        if !refused.is_empty() {
            crate::warn!(
                "streamscope: GPU {ordinal}: refused: {}",
                refused.join("; ")
            );
        }
        Ok(s)
    }

    fn ops(&mut self) -> Ops<'_> {
        Ops {
            api: self.api,
            pm: self.pm,
            host: self.host.obj,
            image: &mut self.image,
            names: &self.name_ptrs,
        }
    }

    /// One decode round: the points go to the writer.
    fn round(&mut self, shared: &Shared) {
        if self.given_up {
            return;
        }
        let now = monotonic_ns();
        let nvalues = self.name_ptrs.len();
        let mut pts = Vec::new();
        let mut unplaced = 0u64;
        let (series, clock) = (&self.series, &mut self.clock);
        let mut stats = self.stats;
        let mut ops = Ops {
            api: self.api,
            pm: self.pm,
            host: self.host.obj,
            image: &mut self.image,
            names: &self.name_ptrs,
        };
        let r = decode::drain(&mut ops, nvalues, &mut stats, |s, e, v| {
            if decode::sample_points(series, clock, s, e, v, now, &mut pts).is_none() {
                unplaced += 1;
            }
        });
        self.stats = stats;
        self.unplaced += unplaced;
        match r {
            Ok(()) => self.decode_failures = 0,
            Err(rc) => {
                self.decode_failures += 1;
                self.decode_errors += 1;
                self.last_error = Some(format!(
                    "cuptiPmSamplingDecodeData & co. failed: {}",
                    result_name(self.cupti, rc)
                ));
                if rc == CUPTI_ERROR_OUT_OF_MEMORY {
                    self.stats.overflows += 1;
                }
                if self.decode_failures >= MAX_DECODE_FAILURES {
                    self.given_up = true;
                    self.publish_stats(shared);
                    shared.meta(
                        keys::status(self.ordinal),
                        format!(
                            "given up after {MAX_DECODE_FAILURES} failed decode rounds: {}",
                            self.last_error.clone().unwrap_or_default()
                        ),
                    );
                }
            }
        }
        let ids = &self.series_ids;
        let mapped: Vec<(u32, i64, f64)> = pts
            .into_iter()
            .filter_map(|(k, t, v)| ids.get(k).map(|&id| (id, t, v)))
            .collect();
        // The last point of each series, for its end at the finish.
        for &(id, t, v) in &mapped {
            match self.last_points.iter_mut().find(|p| p.0 == id) {
                Some(p) => *p = (id, t, v),
                None => self.last_points.push((id, t, v)),
            }
        }
        shared.push_points(mapped.into_iter());
    }

    /// Puts the stats line in the metadata; returns it.
    fn publish_stats(&self, shared: &Shared) -> String {
        let st = &self.stats;
        let clock = match (self.clock.chosen(), self.clock.unplaced) {
            (Some((n, off)), _) => format!("clock {n} (+{off} ns to CLOCK_MONOTONIC)"),
            (None, Some(raw)) => format!("clock unknown (first sample stamped {raw})"),
            (None, None) => "no sample yet".to_string(),
        };
        let mut text = format!(
            "{} samples, {} hardware buffer overflows, {} full images, {} bad samples, {} unplaced, {} failed decode rounds; {clock}",
            st.samples, st.overflows, st.full, st.bad_samples, self.unplaced, self.decode_errors
        );
        if let Some(e) = &self.last_error {
            text.push_str(&format!("; last error: {e}"));
        }
        shared.meta(keys::stats(self.ordinal), text.clone());
        text
    }

    /// Stop, the last decode, and the stats (Drop disables).
    fn finish(&mut self, shared: &Shared) {
        if self.started {
            // SAFETY: zeroed plain C struct.
            let mut st: cs::CUpti_PmSampling_Stop_Params = unsafe { std::mem::zeroed() };
            st.structSize = cs::PmSampling_Stop_Params_STRUCT_SIZE as usize;
            st.pPmSamplingObject = self.pm;
            // SAFETY: a params struct we own; the sampler was started.
            let _ = unsafe { (self.api.stop)(&mut st) };
            self.started = false;
            self.given_up = false;
            self.round(shared);
        }
        let text = self.publish_stats(shared);
        crate::warn!("streamscope: GPU {}: {text}", self.ordinal);
    }
}

impl Drop for DeviceSampler {
    fn drop(&mut self) {
        if self.started {
            // SAFETY: zeroed plain C struct.
            let mut st: cs::CUpti_PmSampling_Stop_Params = unsafe { std::mem::zeroed() };
            st.structSize = cs::PmSampling_Stop_Params_STRUCT_SIZE as usize;
            st.pPmSamplingObject = self.pm;
            // SAFETY: a params struct we own; the sampler was started.
            let _ = unsafe { (self.api.stop)(&mut st) };
        }
        // SAFETY: zeroed plain C struct.
        let mut d: cs::CUpti_PmSampling_Disable_Params = unsafe { std::mem::zeroed() };
        d.structSize = cs::PmSampling_Disable_Params_STRUCT_SIZE as usize;
        d.pPmSamplingObject = self.pm;
        // SAFETY: the object came from cuptiPmSamplingEnable; disabled once.
        let _ = unsafe { (self.api.disable)(&mut d) };
        // The host object, context and lock go after (field drops).
    }
}

fn clock_realtime_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// [`PmOps`] over CUPTI.
struct Ops<'a> {
    api: &'static PmApi,
    pm: *mut cs::CUpti_PmSampling_Object,
    host: *mut cs::CUpti_Profiler_Host_Object,
    image: &'a mut Vec<u8>,
    names: &'a [*const c_char],
}

impl PmOps for Ops<'_> {
    fn decode(&mut self) -> Result<(StopReason, bool), u32> {
        // SAFETY: zeroed plain C struct.
        let mut p: cs::CUpti_PmSampling_DecodeData_Params = unsafe { std::mem::zeroed() };
        p.structSize = cs::PmSampling_DecodeData_Params_STRUCT_SIZE as usize;
        p.pPmSamplingObject = self.pm;
        p.pCounterDataImage = self.image.as_mut_ptr();
        p.counterDataImageSize = self.image.len();
        // SAFETY: CUPTI writes into the image we own, within its size.
        let rc = unsafe { (self.api.decode_data)(&mut p) };
        // The stop reason read as the C enum's integer (never trusting it to
        // be one of the Rust enum's values).
        // SAFETY: the field is a 4-byte C enum inside `p`.
        let reason = unsafe { std::ptr::addr_of!(p.decodeStopReason).cast::<u32>().read() };
        if rc == CUPTI_ERROR_OUT_OF_MEMORY {
            // The header's "record overflow in the hardware buffer".
            return Ok((StopReason::Other, true));
        }
        if rc != SUCCESS {
            return Err(rc);
        }
        Ok((StopReason::from_raw(reason), p.overflow != 0))
    }

    fn completed(&mut self) -> Result<usize, u32> {
        // SAFETY: zeroed plain C struct.
        let mut p: cs::CUpti_PmSampling_GetCounterDataInfo_Params = unsafe { std::mem::zeroed() };
        p.structSize = cs::PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE as usize;
        p.pCounterDataImage = self.image.as_ptr();
        p.counterDataImageSize = self.image.len();
        // SAFETY: CUPTI reads the image we own.
        let rc = unsafe { (self.api.get_counter_data_info)(&mut p) };
        if rc != SUCCESS {
            return Err(rc);
        }
        Ok(p.numCompletedSamples)
    }

    fn sample(&mut self, i: usize, values: &mut [f64]) -> Result<(u64, u64), u32> {
        // SAFETY: zeroed plain C struct.
        let mut si: cs::CUpti_PmSampling_CounterData_GetSampleInfo_Params =
            unsafe { std::mem::zeroed() };
        si.structSize = cs::PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE as usize;
        si.pPmSamplingObject = self.pm;
        si.pCounterDataImage = self.image.as_ptr();
        si.counterDataImageSize = self.image.len();
        si.sampleIndex = i;
        // SAFETY: CUPTI reads the image we own.
        let rc = unsafe { (self.api.counter_data_get_sample_info)(&mut si) };
        if rc != SUCCESS {
            return Err(rc);
        }
        if values.len() < self.names.len() {
            return Err(999);
        }
        // SAFETY: zeroed plain C struct.
        let mut ev: cs::CUpti_Profiler_Host_EvaluateToGpuValues_Params =
            unsafe { std::mem::zeroed() };
        ev.structSize = cs::Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE as usize;
        ev.pHostObject = self.host;
        ev.pCounterDataImage = self.image.as_ptr();
        ev.counterDataImageSize = self.image.len();
        ev.rangeIndex = i;
        ev.ppMetricNames = self.names.as_ptr() as *mut *const c_char;
        ev.numMetrics = self.names.len();
        ev.pMetricValues = values.as_mut_ptr();
        // SAFETY: CUPTI writes numMetrics doubles into `values` (checked
        // long enough) and only reads the names and the image.
        let rc = unsafe { (self.api.host_evaluate_to_gpu_values)(&mut ev) };
        if rc != SUCCESS {
            return Err(rc);
        }
        Ok((si.startTimestamp, si.endTimestamp))
    }

    fn reset(&mut self) -> Result<(), u32> {
        // SAFETY: zeroed plain C struct.
        let mut p: cs::CUpti_PmSampling_CounterDataImage_Initialize_Params =
            unsafe { std::mem::zeroed() };
        p.structSize = cs::PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE as usize;
        p.pPmSamplingObject = self.pm;
        p.counterDataSize = self.image.len();
        p.pCounterData = self.image.as_mut_ptr();
        // SAFETY: CUPTI writes within the image we own.
        let rc = unsafe { (self.api.counter_data_image_initialize)(&mut p) };
        if rc != SUCCESS {
            return Err(rc);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::gpu_metrics::Metric;

    #[test]
    fn settings_come_from_the_environment() {
        let none = |_: &str| None;
        assert!(Settings::from_env(&none).is_none());
        let env = |k: &str| match k {
            protocol::env::GPU_METRICS => Some("default".to_string()),
            protocol::env::GPU_METRICS_HZ => Some("20000".to_string()),
            _ => None,
        };
        let s = Settings::from_env(&env).unwrap().unwrap();
        assert_eq!(s.hz, 20_000);
        assert_eq!(s.interval_ns(), 50_000);
        assert_eq!(s.requests.len(), Metric::ALL.len());
        let bad = |k: &str| match k {
            protocol::env::GPU_METRICS => Some("sm_active".to_string()),
            protocol::env::GPU_METRICS_HZ => Some("5".to_string()),
            _ => None,
        };
        assert!(Settings::from_env(&bad).unwrap().is_err());
    }

    #[test]
    fn a_locked_device_names_its_holder() {
        let dir = std::env::temp_dir().join(format!("ss-pm-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(protocol::gpu_metrics_lock_name("host", "0000:1b:00"));
        let held = lock_device(&path).unwrap();
        // flock locks belong to the open file: a second open is refused.
        let err = lock_device(&path).unwrap_err();
        assert_eq!(err, format!("sampled by pid {}", std::process::id()));
        drop(held);
        assert!(lock_device(&path).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shared_points_are_bounded_and_devices_offered_once() {
        let s = Shared::new();
        s.offer_devices([0, 1, 0]);
        s.offer_devices([1, 2]);
        assert_eq!(s.take_offered(), vec![0, 1, 2]);
        assert!(s.take_offered().is_empty());
        let id = s.add_series(0, "GPU 0 · SM active %".into());
        s.push_points(
            (0..(MAX_QUEUED_POINTS + 5))
                .map(|i| (id, i as i64, 1.0))
                .collect::<Vec<_>>()
                .into_iter(),
        );
        let o = s.out.lock().unwrap();
        assert_eq!(o.points.len(), MAX_QUEUED_POINTS);
        assert_eq!(o.lost_points, 5);
    }
}
