//! The GPU sampler process (`streamscope-gpu-sampler`), started by
//! `record --gpu-metrics` beside the recorded job.
//!
//! `streamscope-gpu-sampler --dir DIR [--host HOST]`, with the metric list
//! and rate in `STREAMSCOPE_GPU_METRICS` / `STREAMSCOPE_GPU_METRICS_HZ`:
//! samples every GPU it sees and writes each one's feed into DIR (files
//! named by host and PCI address: `core::protocol::gpu_metrics_feed_name`).
//! It prints `ready` on stdout once every GPU was set up (or refused), and
//! stops (last decode, sampler disabled, feeds marked done) when its stdin
//! closes or on SIGINT/SIGTERM. Exit 0 when at least one GPU was sampled, 2
//! when none could be, 1 on bad arguments.

use crate::error::SamplerError;
use std::collections::HashMap;
use std::ffi::c_int;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::cupti::sys as cs;
use streamscope_core::protocol::{self, feed_meta, FeedPart};

use super::cupti_objs::{result_name, PrimaryCtx};
use super::device::{DeviceSampler, StartCtx};
use super::{Settings, Shared, DECODE_PERIOD};
use crate::cupti_api::{Cupti, PmApi, SUCCESS};
use crate::driver::Driver;
use crate::process_info::monotonic_ns;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The command line.
#[derive(Debug, PartialEq)]
pub struct Args {
    /// Where the feeds go.
    pub dir: PathBuf,
    /// The host name in the feed names.
    pub host: String,
}

/// `--dir DIR [--host HOST]`.
pub fn parse_args(args: &[String]) -> Result<Args, SamplerError> {
    let mut dir = None;
    let mut host = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = it.next().cloned(),
            "--host" => host = it.next().cloned(),
            other => return Err(SamplerError::UnknownArgument(other.to_string())),
        }
    }
    Ok(Args {
        dir: PathBuf::from(dir.ok_or(SamplerError::NoDir)?),
        host: host.unwrap_or_else(crate::process_info::hostname),
    })
}

/// One GPU's feed files.
struct FeedFiles {
    points: File,
    series_path: PathBuf,
    meta_path: PathBuf,
    /// Global series id -> index in this feed.
    index: HashMap<u32, u32>,
    series: Vec<String>,
    meta: Vec<(String, String)>,
}

impl FeedFiles {
    fn create(dir: &Path, host: &str, pci: &str) -> Result<FeedFiles, SamplerError> {
        let path = |p| dir.join(protocol::gpu_metrics_feed_name(host, pci, p));
        let points_path = path(FeedPart::Points);
        let points = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&points_path)
            .map_err(|e| SamplerError::File {
                what: "create",
                path: points_path.clone(),
                why: e.to_string(),
            })?;
        Ok(FeedFiles {
            points,
            series_path: path(FeedPart::Series),
            meta_path: path(FeedPart::Meta),
            index: HashMap::new(),
            series: Vec::new(),
            meta: Vec::new(),
        })
    }

    fn set_meta(&mut self, key: &str, value: String) {
        self.meta.retain(|(k, _)| k != key);
        self.meta.push((key.to_string(), value));
    }

    /// Rewrites a small file whole, through ".tmp" and a rename.
    fn replace(path: &Path, text: &str) {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    fn write_series(&self) {
        let mut text = self.series.join("\n");
        text.push('\n');
        Self::replace(&self.series_path, &text);
    }

    fn write_meta(&self) {
        Self::replace(&self.meta_path, &protocol::format_feed_meta(&self.meta));
    }
}

/// The part of a track name after "GPU N · ".
fn series_suffix(track: &str) -> &str {
    track.split_once(" · ").map(|(_, s)| s).unwrap_or(track)
}

/// The suffix of a `gpu_metrics::keys` key ("gpu_metrics.device3.config"
/// -> "config").
fn meta_suffix(key: &str) -> &str {
    match key.strip_prefix("gpu_metrics.device") {
        Some(rest) => rest.split_once('.').map(|(_, s)| s).unwrap_or(rest),
        None => key,
    }
}

/// Moves what the samplers queued into the feed files.
fn drain(shared: &Shared, feeds: &mut HashMap<u32, FeedFiles>, decoded_until: Option<i64>) {
    let out = shared.take();
    for (id, (ordinal, track)) in out.series.iter().enumerate() {
        if let Some(f) = feeds.get_mut(ordinal) {
            if !f.index.contains_key(&(id as u32)) {
                f.index.insert(id as u32, f.series.len() as u32);
                f.series.push(series_suffix(track).to_string());
                f.write_series();
            }
        }
    }
    let mut bufs: HashMap<u32, Vec<u8>> = HashMap::new();
    for (id, ts, v) in out.points {
        let Some((ordinal, _)) = out.series.get(id as usize) else {
            continue;
        };
        if let Some(f) = feeds.get(ordinal) {
            if let Some(&i) = f.index.get(&id) {
                bufs.entry(*ordinal)
                    .or_default()
                    .extend_from_slice(&protocol::encode_feed_point(i, ts, v));
            }
        }
    }
    for (ordinal, buf) in bufs {
        if let Some(f) = feeds.get_mut(&ordinal) {
            if let Err(e) = f.points.write_all(&buf) {
                f.set_meta("status", format!("feed write failed: {e}"));
            }
        }
    }
    let mut changed: Vec<u32> = Vec::new();
    for (k, v) in out.meta {
        let ordinal = k
            .strip_prefix("gpu_metrics.device")
            .and_then(|r| r.split_once('.'))
            .and_then(|(n, _)| n.parse::<u32>().ok());
        let targets: Vec<u32> = match ordinal {
            Some(o) => vec![o],
            None => feeds.keys().copied().collect(),
        };
        for o in targets {
            if let Some(f) = feeds.get_mut(&o) {
                f.set_meta(meta_suffix(&k), v.clone());
                changed.push(o);
            }
        }
    }
    if out.lost_points > 0 {
        for f in feeds.values_mut() {
            f.set_meta(
                "points_lost",
                format!("{} (the sampler fell behind)", out.lost_points),
            );
        }
    }
    for (o, f) in feeds.iter_mut() {
        if let Some(t) = decoded_until {
            f.set_meta(feed_meta::DECODED_UNTIL, t.to_string());
            changed.push(*o);
        }
    }
    changed.sort_unstable();
    changed.dedup();
    for o in changed {
        if let Some(f) = feeds.get(&o) {
            f.write_meta();
        }
    }
}

/// Notes why device `ordinal` is not sampled (its feed's "status").
fn shared_status(shared: &Shared, ordinal: u32, msg: String) {
    shared.meta(streamscope_core::gpu_metrics::keys::status(ordinal), msg);
}

/// cuInit and the device count, looked up in libcuda.
fn init_driver() -> Result<u32, SamplerError> {
    // SAFETY: dlopen of the driver library by its soname; kept open.
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) };
    if h.is_null() {
        return Err(SamplerError::NoDriver);
    }
    // SAFETY: dlsym on a live handle with NUL-terminated names.
    let (init, count) = unsafe {
        (
            libc::dlsym(h, c"cuInit".as_ptr()),
            libc::dlsym(h, c"cuDeviceGetCount".as_ptr()),
        )
    };
    if init.is_null() || count.is_null() {
        return Err(SamplerError::OldDriver);
    }
    // SAFETY: the driver functions of those names: CUresult cuInit(unsigned)
    // and CUresult cuDeviceGetCount(int*).
    unsafe {
        let init: unsafe extern "C" fn(u32) -> c_int = std::mem::transmute(init);
        let count: unsafe extern "C" fn(*mut c_int) -> c_int = std::mem::transmute(count);
        let rc = init(0);
        if rc != 0 {
            return Err(SamplerError::Init(rc));
        }
        let mut n: c_int = 0;
        let rc = count(&mut n);
        if rc != 0 {
            return Err(SamplerError::DeviceCount(rc));
        }
        Ok(n.max(0) as u32)
    }
}

/// The sampler process; returns its exit code.
pub fn main(args: &[String]) -> i32 {
    serve(args, None)
}

/// GPUs to sample: (CUDA ordinal, PCI address) of every device the driver
/// shows (a device whose address the driver does not give is named
/// "ordinalN", as the collector names it then).
fn discover() -> Result<Vec<(u32, String)>, SamplerError> {
    let n = init_driver()?;
    if n == 0 {
        return Err(SamplerError::NoDevice);
    }
    let driver = Driver::open();
    Ok((0..n)
        .map(|o| {
            let pci = driver
                .as_ref()
                .and_then(|d| d.pci_id(o))
                .unwrap_or_else(|| format!("ordinal{o}"));
            (o, pci)
        })
        .collect())
}

/// [`main`] on `devices` ((ordinal, PCI address) pairs) instead of those
/// the driver shows when given (tests against a stand-in CUPTI).
pub fn serve(args: &[String], devices: Option<Vec<(u32, String)>>) -> i32 {
    let args = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("streamscope-gpu-sampler: {e}");
            return 1;
        }
    };
    let env = |k: &str| std::env::var(k).ok();
    let settings = match Settings::from_env(&env) {
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            eprintln!("streamscope-gpu-sampler: {e}");
            return 1;
        }
        None => {
            eprintln!(
                "streamscope-gpu-sampler: {} is not set (run through `streamscope record --gpu-metrics`)",
                protocol::env::GPU_METRICS
            );
            return 1;
        }
    };
    // SAFETY: installs an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    // Stdin closing (record ended, or died) stops us too.
    let _ = std::thread::Builder::new().name("stdin".into()).spawn(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        STOP.store(true, Ordering::SeqCst);
    });
    let devices = match devices.map(Ok).unwrap_or_else(discover) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("streamscope: GPU metrics unavailable: {e}");
            ready();
            return 2;
        }
    };
    let code = run(&args, &settings, &devices);
    let _ = std::io::stdout().flush();
    code
}

fn ready() {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "ready");
    let _ = o.flush();
}

fn run(args: &Args, settings: &Settings, devices: &[(u32, String)]) -> i32 {
    let fail = |msg: String| {
        eprintln!("streamscope: GPU metrics unavailable: {msg}");
        ready();
        2
    };
    let mut libs = Vec::new();
    if let Ok(p) = std::env::var(protocol::env::CUPTI_LIB) {
        libs.push(p);
    }
    let cupti: &'static Cupti = match Cupti::open(&libs) {
        Ok(c) => Box::leak(Box::new(c)),
        Err(e) => return fail(e.to_string()),
    };
    let api: &'static PmApi = match PmApi::load(cupti) {
        Ok(a) => Box::leak(Box::new(a)),
        Err(e) => return fail(e.to_string()),
    };
    let mut init = cs::CUpti_Profiler_Initialize_Params {
        structSize: cs::Profiler_Initialize_Params_STRUCT_SIZE as usize,
        pPriv: std::ptr::null_mut(),
    };
    // SAFETY: a params struct we own, structSize set.
    let rc = unsafe { (api.profiler_initialize)(&mut init) };
    if rc != SUCCESS {
        return fail(format!(
            "cuptiProfilerInitialize failed: {}",
            result_name(cupti, rc)
        ));
    }
    let driver = Driver::open();
    let shared = Arc::new(Shared::new());
    let mut feeds: HashMap<u32, FeedFiles> = HashMap::new();
    let mut samplers: Vec<DeviceSampler> = Vec::new();
    for (ord, pci) in devices {
        let (ord, pci) = (*ord, pci.clone());
        let mut f = match FeedFiles::create(&args.dir, &args.host, &pci) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("streamscope: GPU {ord}: not sampled: {e}");
                continue;
            }
        };
        let ctx = StartCtx {
            api,
            cupti,
            driver: driver.as_ref(),
            settings,
            out_dir: &args.dir,
            host: &args.host,
            shared: &shared,
        };
        // Without a context of its own first (the sampler needs none: the
        // job's contexts are sampled device-wide); with the GPU's primary
        // context current for a second try when that set-up fails.
        let r = match DeviceSampler::start(&ctx, ord, None) {
            Err(msg) if driver.is_some() => match PrimaryCtx::retain(ord) {
                Some(pc) => DeviceSampler::start(&ctx, ord, Some(pc)).map_err(|m2| {
                    SamplerError::BothTries {
                        first: Box::new(msg),
                        second: Box::new(m2),
                    }
                }),
                None => Err(msg),
            },
            r => r,
        };
        match r {
            Ok(s) => samplers.push(s),
            Err(msg) => {
                eprintln!("streamscope: GPU {ord}: not sampled: {msg}");
                f.set_meta("status", msg.to_string());
            }
        }
        f.set_meta("pci", pci);
        feeds.insert(ord, f);
    }
    // Every GPU set up (each took ~0.5 s): start them together, so none
    // fills its hardware buffer while the next one is probed.
    samplers.retain_mut(|s| match s.begin() {
        Ok(()) => true,
        Err(msg) => {
            eprintln!("streamscope: GPU {}: not sampled: {msg}", s.ordinal());
            shared_status(&shared, s.ordinal(), msg.to_string());
            false
        }
    });
    drain(&shared, &mut feeds, None);
    for f in feeds.values() {
        f.write_meta();
    }
    ready();
    if samplers.is_empty() {
        for f in feeds.values_mut() {
            f.set_meta(feed_meta::DONE, "1".into());
            f.write_meta();
        }
        return 2;
    }
    let mut last_stats = Instant::now();
    let interval = settings.interval_ns() as i64;
    while !STOP.load(Ordering::SeqCst) && !samplers.is_empty() {
        std::thread::sleep(
            settings
                .tuning
                .decode_ms
                .map_or(DECODE_PERIOD, Duration::from_millis),
        );
        let t0 = monotonic_ns();
        for s in &mut samplers {
            s.round(&shared);
        }
        for s in samplers.iter().filter(|s| s.given_up) {
            eprintln!(
                "streamscope: GPU {}: sampling given up: {}",
                s.ordinal(),
                s.publish_stats(&shared)
            );
        }
        samplers.retain(|s| !s.given_up);
        if last_stats.elapsed() >= Duration::from_secs(1) {
            for s in &samplers {
                s.publish_stats(&shared);
            }
            last_stats = Instant::now();
        }
        // A sample still being written when the decode began comes next
        // round: what ended two intervals before it is in.
        drain(&shared, &mut feeds, Some(t0 - 2 * interval));
    }
    let t_end = monotonic_ns();
    for mut s in samplers {
        s.finish(&shared);
    }
    drain(&shared, &mut feeds, Some(t_end));
    for f in feeds.values_mut() {
        f.set_meta(feed_meta::DONE, "1".into());
        f.write_meta();
    }
    let mut de = cs::CUpti_Profiler_DeInitialize_Params {
        structSize: cs::Profiler_DeInitialize_Params_STRUCT_SIZE as usize,
        pPriv: std::ptr::null_mut(),
    };
    // SAFETY: a params struct we own; every sampler is disabled (dropped).
    let _ = unsafe { (api.profiler_deinitialize)(&mut de) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        let a = parse_args(&[
            "--dir".into(),
            "/tmp/x".into(),
            "--host".into(),
            "n1".into(),
        ])
        .expect("as set up");
        assert_eq!(
            a,
            Args {
                dir: "/tmp/x".into(),
                host: "n1".into()
            }
        );
        assert!(parse_args(&[]).is_err());
        assert!(parse_args(&["--bogus".into()]).is_err());
    }

    #[test]
    fn names_lose_their_device() {
        assert_eq!(series_suffix("GPU 3 · SM active %"), "SM active %");
        assert_eq!(series_suffix("GPU 0 · dram__bytes.sum"), "dram__bytes.sum");
        assert_eq!(meta_suffix("gpu_metrics.device12.config"), "config");
        assert_eq!(
            meta_suffix("gpu_metrics.unavailable"),
            "gpu_metrics.unavailable"
        );
    }

    #[test]
    fn queued_points_reach_the_feed_of_their_device() {
        let dir = std::env::temp_dir().join(format!("ss-feed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("as set up");
        let shared = Shared::new();
        let mut feeds = HashMap::new();
        feeds.insert(
            0,
            FeedFiles::create(&dir, "h", "0000:01:00").expect("as set up"),
        );
        feeds.insert(
            1,
            FeedFiles::create(&dir, "h", "0000:02:00").expect("as set up"),
        );
        let a = shared.add_series(1, "GPU 1 · SM active %".into());
        let b = shared.add_series(0, "GPU 0 · DRAM GB/s".into());
        let c = shared.add_series(1, "GPU 1 · DRAM GB/s".into());
        shared.push_points([(a, 10, 50.0), (b, 11, 2.0), (c, 12, 3.0)].into_iter());
        shared.meta("gpu_metrics.device1.config".into(), "10000 Hz".into());
        drain(&shared, &mut feeds, Some(99));
        let read = |pci: &str, p| {
            std::fs::read(dir.join(protocol::gpu_metrics_feed_name("h", pci, p)))
                .expect("as set up")
        };
        let pts1: Vec<_> =
            protocol::decode_feed_points(&read("0000:02:00", FeedPart::Points)).collect();
        assert_eq!(pts1, vec![(0, 10, 50.0), (1, 12, 3.0)]);
        let series1 = String::from_utf8(read("0000:02:00", FeedPart::Series)).expect("utf-8");
        assert_eq!(series1, "SM active %\nDRAM GB/s\n");
        let meta1 = protocol::parse_feed_meta(
            &String::from_utf8(read("0000:02:00", FeedPart::Meta)).expect("utf-8"),
        );
        assert!(meta1.contains(&("config".into(), "10000 Hz".into())));
        assert!(meta1.contains(&(feed_meta::DECODED_UNTIL.into(), "99".into())));
        let pts0: Vec<_> =
            protocol::decode_feed_points(&read("0000:01:00", FeedPart::Points)).collect();
        assert_eq!(pts0, vec![(0, 11, 2.0)]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
