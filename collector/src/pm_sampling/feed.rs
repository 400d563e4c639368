//! The recorded process's side of GPU metrics: the writer reads the feeds
//! the sampler process writes (one per GPU, named by host and PCI address)
//! for the GPUs this process's records name, and adds their points to its
//! trace as counter tracks under its own device ordinal.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use streamscope_core::gpu_metrics::keys;
use streamscope_core::protocol::{self, feed_meta, FeedPart};
use streamscope_core::TrackId;

use super::FINISH_WAIT;
use crate::convert::Converter;
use crate::driver::Driver;
use crate::process_info::monotonic_ns;

/// One GPU's feed as this process reads it.
struct DevFeed {
    ordinal: u32,
    points: PathBuf,
    series_path: PathBuf,
    meta_path: PathBuf,
    /// Bytes of the points file already read.
    offset: u64,
    series: Vec<String>,
    tracks: Vec<Option<TrackId>>,
}

impl DevFeed {
    fn meta(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.meta_path)
            .map(|t| protocol::parse_feed_meta(&t))
            .unwrap_or_default()
    }

    /// Whether the feed covers `until` (or will get nothing more).
    fn covers(&self, until: i64) -> bool {
        let m = self.meta();
        let get = |k: &str| m.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
        get(feed_meta::DONE) == Some("1")
            || get(feed_meta::DECODED_UNTIL)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|t| t >= until)
            || (get(feed_meta::DECODED_UNTIL).is_none() && get("status").is_some())
    }

    fn read_series(&mut self) {
        if let Ok(t) = std::fs::read_to_string(&self.series_path) {
            let s: Vec<String> = t.lines().map(str::to_string).collect();
            if s.len() > self.series.len() {
                self.series = s;
            }
        }
    }

    /// The whole records written since the last read.
    fn read_points(&mut self) -> Vec<u8> {
        let mut buf = Vec::new();
        let Ok(mut f) = File::open(&self.points) else {
            return buf;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        let whole = buf.len() - buf.len() % protocol::FEED_RECORD_BYTES;
        buf.truncate(whole);
        self.offset += whole as u64;
        buf
    }
}

/// The feeds of the GPUs this process uses.
pub struct Feed {
    dir: PathBuf,
    host: String,
    driver: Option<Driver>,
    seen: HashSet<u32>,
    devs: Vec<DevFeed>,
}

impl Feed {
    /// The feed folder `record --gpu-metrics` gave this process.
    pub fn from_env(host: String) -> Option<Feed> {
        let dir = std::env::var_os(protocol::env::GPU_METRICS_FEED)?;
        Some(Feed::new(PathBuf::from(dir), host, Driver::open()))
    }

    pub(crate) fn new(dir: PathBuf, host: String, driver: Option<Driver>) -> Feed {
        Feed {
            dir,
            host,
            driver,
            seen: HashSet::new(),
            devs: Vec::new(),
        }
    }

    /// Reads the feed of the GPU at `pci` for device `ordinal`.
    pub(crate) fn add_device(&mut self, ordinal: u32, pci: &str) {
        self.seen.insert(ordinal);
        let path = |p| {
            self.dir
                .join(protocol::gpu_metrics_feed_name(&self.host, pci, p))
        };
        self.devs.push(DevFeed {
            ordinal,
            points: path(FeedPart::Points),
            series_path: path(FeedPart::Series),
            meta_path: path(FeedPart::Meta),
            offset: 0,
            series: Vec::new(),
            tracks: Vec::new(),
        });
    }

    /// The writer, each batch: new devices, then every feed's new points as
    /// counters (within the capture window) and its metadata. `last` first
    /// waits (up to [`FINISH_WAIT`]) until every feed covers this moment.
    pub fn write(&mut self, conv: &mut Converter, last: bool) {
        for ord in conv.device_ordinals() {
            if !self.seen.insert(ord) {
                continue;
            }
            // Named as the sampler names it ("ordinalN" without a driver).
            let pci = self
                .driver
                .as_ref()
                .and_then(|d| d.pci_id(ord))
                .unwrap_or_else(|| format!("ordinal{ord}"));
            self.add_device(ord, &pci);
        }
        if last {
            let now = monotonic_ns();
            let t0 = Instant::now();
            while t0.elapsed() < FINISH_WAIT && !self.devs.iter().all(|d| d.covers(now)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for d in &mut self.devs {
            let bytes = d.read_points();
            d.read_series();
            for (k, v) in d.meta() {
                let key = match k.as_str() {
                    "sampled" => keys::sampled(d.ordinal),
                    "refused" => keys::refused(d.ordinal),
                    "status" => keys::status(d.ordinal),
                    "config" => keys::config(d.ordinal),
                    "stats" => keys::stats(d.ordinal),
                    "points_lost" => "gpu_metrics.points_lost".to_string(),
                    _ => continue,
                };
                conv.set_process_metadata(&key, v);
            }
            for (i, ts, v) in protocol::decode_feed_points(&bytes) {
                let i = i as usize;
                let Some(suffix) = d.series.get(i) else {
                    continue;
                };
                if d.tracks.len() <= i {
                    d.tracks.resize(i + 1, None);
                }
                let t = match d.tracks[i] {
                    Some(t) => t,
                    None => {
                        let t =
                            conv.counter_track(d.ordinal, &format!("GPU {} · {suffix}", d.ordinal));
                        d.tracks[i] = Some(t);
                        t
                    }
                };
                if conv.in_window(ts, ts) {
                    conv.trace.push_counter(t, ts, v);
                }
            }
        }
    }
}
