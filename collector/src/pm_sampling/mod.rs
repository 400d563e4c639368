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

mod cupti_objs;
pub mod decode;
mod device;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cudarc::cupti::sys as cs;
use streamscope_core::gpu_metrics::{self as gm, keys, Request};
use streamscope_core::protocol;
use streamscope_core::TrackId;

use crate::convert::Converter;
use crate::cupti_api::{Cupti, PmApi, SUCCESS};
use crate::driver::Driver;
use cupti_objs::result_name;
use device::{DeviceSampler, StartCtx};

/// How often the sampler thread decodes.
pub const DECODE_PERIOD: Duration = Duration::from_millis(50);
/// How long the writer's last batch waits for the sampler's last round.
pub const FINISH_WAIT: Duration = Duration::from_millis(1500);
/// Hardware buffer sizes tried in turn.
pub(super) const HW_BUFFER_BYTES: [usize; 3] = [512 << 20, 128 << 20, 32 << 20];
/// Points queued for the writer at most (a stalled writer loses the rest,
/// counted): about 10 s of the default set at 10 kHz.
const MAX_QUEUED_POINTS: usize = 1 << 20;
/// Consecutive failed decode rounds after which a device is given up.
pub(super) const MAX_DECODE_FAILURES: u32 = 20;

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
        // CUPTI's profiler host (metric evaluation) runs deep on the
        // caller's stack: the same room as the writer thread's.
        .stack_size(16 << 20)
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
                // A failure other than the lock is tried once more with the
                // device's primary context current on this thread (in case
                // CUPTI wants a context where the program made none current).
                let r = match DeviceSampler::start(&ctx, ord, None) {
                    Err(msg) if !msg.starts_with(device::LOCKED) => {
                        match cupti_objs::PrimaryCtx::retain(ord) {
                            Some(pc) => DeviceSampler::start(&ctx, ord, Some(pc)).map_err(|m2| {
                                format!("{msg}; with the primary context current: {m2}")
                            }),
                            None => Err(msg),
                        }
                    }
                    r => r,
                };
                match r {
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
        let s = Settings::from_env(&env)
            .expect("as set up")
            .expect("as set up");
        assert_eq!(s.hz, 20_000);
        assert_eq!(s.interval_ns(), 50_000);
        assert_eq!(s.requests.len(), Metric::ALL.len());
        let bad = |k: &str| match k {
            protocol::env::GPU_METRICS => Some("sm_active".to_string()),
            protocol::env::GPU_METRICS_HZ => Some("5".to_string()),
            _ => None,
        };
        assert!(Settings::from_env(&bad).expect("as set up").is_err());
    }

    #[test]
    fn a_locked_device_names_its_holder() {
        let dir = std::env::temp_dir().join(format!("ss-pm-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("as set up");
        let path = dir.join(protocol::gpu_metrics_lock_name("host", "0000:1b:00"));
        use device::lock_device;
        let held = lock_device(&path).expect("as set up");
        // flock locks belong to the open file: a second open is refused.
        let err = lock_device(&path).expect_err("an error");
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
        let o = s.out.lock().expect("as set up");
        assert_eq!(o.points.len(), MAX_QUEUED_POINTS);
        assert_eq!(o.lost_points, 5);
    }
}
