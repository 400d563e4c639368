//! Measured GPU metrics: CUPTI PM sampling (`record --gpu-metrics`), in a
//! process of its own.
//!
//! PM sampling never runs inside the recorded program, so that nothing it
//! does (a CUPTI fault, a hang at exit) can take the job down.
//! `record --gpu-metrics` starts the sampler process
//! (`streamscope-gpu-sampler`, [`sidecar`]) before the job: for every GPU
//! it sees it takes the device's lock file (one sampler per GPU even when
//! several `record`s share a host), probes every requested CUPTI metric
//! alone on a fresh profiler-host object (refused ones go to the
//! metadata), builds the config image of those accepted (dropping the last
//! ones until it fits one pass), enables PM sampling on the device, sets
//! the interval (GPU time trigger, ns) and a hardware buffer, and starts
//! it. Every [`DECODE_PERIOD`] it decodes the hardware buffer into a
//! counter-data image, evaluates each completed sample, maps its
//! timestamps onto CLOCK_MONOTONIC, the traces' clock
//! ([`decode::ClockMap`]), and appends the points to the GPU's feed files,
//! named by host and PCI address (`core::protocol::gpu_metrics_feed_name`).
//!
//! In each recorded process the collector's writer reads the feeds of the
//! GPUs its records name ([`feed`]) into counter tracks of its own trace
//! ("GPU 0 · SM active %", core's `gpu_metrics`), under its own device
//! ordinal; its last batch waits until the feed covers its end.
//!
//! Any failure is a line in the traces' metadata (keys in
//! `gpu_metrics::keys`) and on stderr, never an error of the program: a
//! device that cannot be sampled is simply not sampled, and a sampler that
//! fails takes nothing but itself down.

mod cupti_objs;
pub mod decode;
mod device;
pub mod feed;
pub mod sidecar;

use crate::error::SamplerError;
use std::sync::Mutex;
use std::time::Duration;

use streamscope_core::gpu_metrics::{self as gm, Request};
use streamscope_core::protocol;

/// How often the sampler process decodes.
pub const DECODE_PERIOD: Duration = Duration::from_millis(50);
/// How long a collector's last batch waits for the feed to cover its end.
pub const FINISH_WAIT: Duration = Duration::from_millis(1500);
/// Hardware buffer sizes tried in turn.
pub(super) const HW_BUFFER_BYTES: [usize; 3] = [512 << 20, 128 << 20, 32 << 20];
/// Points queued for the writer at most (a stalled writer loses the rest,
/// counted): about 10 s of the default set at 10 kHz.
const MAX_QUEUED_POINTS: usize = 1 << 20;
/// Consecutive failed decode rounds after which a device is given up.
pub(super) const MAX_DECODE_FAILURES: u32 = 20;

/// Sampler settings outside the flags, from `STREAMSCOPE_PM_*` variables
/// (for trying another driver or CUPTI; `STREAMSCOPE_PM_VERBOSE=1` also
/// traces the first CUPTI calls on stderr).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tuning {
    /// Samples the counter-data image holds (`STREAMSCOPE_PM_IMAGE_SAMPLES`).
    pub image_samples: Option<u32>,
    /// Decode period in ms (`STREAMSCOPE_PM_DECODE_MS`).
    pub decode_ms: Option<u64>,
}

impl Tuning {
    /// From the environment.
    pub fn from_env(env: &impl Fn(&str) -> Option<String>) -> Tuning {
        Tuning {
            image_samples: env("STREAMSCOPE_PM_IMAGE_SAMPLES").and_then(|v| v.parse().ok()),
            decode_ms: env("STREAMSCOPE_PM_DECODE_MS").and_then(|v| v.parse().ok()),
        }
    }
}

/// What `--gpu-metrics` asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub requests: Vec<Request>,
    pub hz: u32,
    pub tuning: Tuning,
}

impl Settings {
    /// None when GPU metrics are off (the variable unset); Err for a value
    /// that does not parse.
    pub fn from_env(
        env: &impl Fn(&str) -> Option<String>,
    ) -> Option<Result<Settings, SamplerError>> {
        let list = env(protocol::env::GPU_METRICS)?;
        Some((|| {
            let requests = gm::parse_list(&list).map_err(SamplerError::Settings)?;
            let hz = match env(protocol::env::GPU_METRICS_HZ) {
                Some(v) => gm::parse_hz(&v).map_err(SamplerError::Settings)?,
                None => gm::DEFAULT_HZ,
            };
            Ok(Settings {
                requests,
                hz,
                tuning: Tuning::from_env(env),
            })
        })())
    }

    /// The sampling interval in ns.
    pub fn interval_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz.max(1))
    }
}

/// What the samplers queue between two drains of the sampler process.
#[derive(Default)]
struct Out {
    /// (device ordinal, track name) of each series, by global series id.
    series: Vec<(u32, String)>,
    /// (global series id, ns, value).
    points: Vec<(u32, i64, f64)>,
    meta: Vec<(String, String)>,
    lost_points: u64,
}

/// Between the device samplers and the sampler process's feed writer.
pub struct Shared {
    out: Mutex<Out>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            out: Mutex::new(Out::default()),
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

    /// Everything queued since the last call (the series list whole, the
    /// points and metadata taken).
    fn take(&self) -> Out {
        match self.out.lock() {
            Ok(mut o) => Out {
                series: o.series.clone(),
                points: std::mem::take(&mut o.points),
                meta: std::mem::take(&mut o.meta),
                lost_points: o.lost_points,
            },
            Err(_) => Out::default(),
        }
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
        assert_eq!(
            err,
            crate::error::SamplerError::Locked {
                holder: Some(std::process::id().to_string())
            }
        );
        assert_eq!(
            err.to_string(),
            format!("sampled by pid {}", std::process::id())
        );
        drop(held);
        assert!(lock_device(&path).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shared_points_are_bounded() {
        let s = Shared::new();
        let id = s.add_series(0, "GPU 0 · SM active %".into());
        s.push_points(
            (0..(MAX_QUEUED_POINTS + 5))
                .map(|i| (id, i as i64, 1.0))
                .collect::<Vec<_>>()
                .into_iter(),
        );
        let o = s.take();
        assert_eq!(o.points.len(), MAX_QUEUED_POINTS);
        assert_eq!(o.lost_points, 5);
        assert_eq!(o.series, vec![(0, "GPU 0 · SM active %".to_string())]);
        assert!(s.take().points.is_empty());
    }
}
