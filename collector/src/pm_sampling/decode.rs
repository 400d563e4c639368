//! The parts of PM sampling that need no GPU: the decode loop over a
//! counter-data image (behind [`PmOps`], which the real sampler implements
//! with CUPTI and the tests with a fake), the mapping of sample timestamps
//! onto the trace's clock, and the turning of evaluated CUPTI values into
//! counter points.

use streamscope_core::gpu_metrics::Formula;

/// Why a decode call stopped (CUPTI's `CUpti_PmSampling_DecodeStopReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The counter-data image is full: records are left in the hardware
    /// buffer; evaluate, reset the image and decode again.
    Full,
    /// Every record in the hardware buffer was decoded.
    EndOfRecords,
    /// Anything else CUPTI says.
    Other,
}

impl StopReason {
    /// From the raw enum value.
    pub fn from_raw(v: u32) -> StopReason {
        match v {
            1 => StopReason::Full,
            2 => StopReason::EndOfRecords,
            _ => StopReason::Other,
        }
    }
}

/// What the decode loop needs of a PM sampler (CUPTI result codes as Err).
pub trait PmOps {
    /// cuptiPmSamplingDecodeData into the image: the stop reason and the
    /// hardware-buffer overflow flag.
    fn decode(&mut self) -> Result<(StopReason, bool), u32>;
    /// cuptiPmSamplingGetCounterDataInfo: completed samples in the image.
    fn completed(&mut self) -> Result<usize, u32>;
    /// Sample `i`: its start and end timestamps (GetSampleInfo) and its
    /// values (EvaluateToGpuValues) written into `values`.
    fn sample(&mut self, i: usize, values: &mut [f64]) -> Result<(u64, u64), u32>;
    /// cuptiPmSamplingCounterDataImageInitialize: empties the image.
    fn reset(&mut self) -> Result<(), u32>;
}

/// Counts over a sampler's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainStats {
    /// Samples handed to the sink.
    pub samples: u64,
    /// Decode calls that reported a hardware-buffer overflow (samples lost).
    pub overflows: u64,
    /// Decode passes that filled the image (more records waited).
    pub full: u64,
    /// Samples whose info or evaluation failed (skipped).
    pub bad_samples: u64,
}

/// Decode passes per call at most: bounds one call's time when the
/// hardware buffer holds more than the image takes many times over.
pub const MAX_PASSES: usize = 16;

/// One decode round: decode into the image, hand every completed sample to
/// `emit(start, end, values)`, empty the image, and again while the image
/// came back full (at most [`MAX_PASSES`]). A failing decode, count or reset
/// ends the round with its code (the caller notes it); a failing sample is
/// skipped and counted.
pub fn drain<P: PmOps>(
    p: &mut P,
    values_len: usize,
    stats: &mut DrainStats,
    mut emit: impl FnMut(u64, u64, &[f64]),
) -> Result<(), u32> {
    let mut values = vec![0.0f64; values_len];
    for _ in 0..MAX_PASSES {
        let (reason, overflow) = p.decode()?;
        if overflow {
            stats.overflows += 1;
        }
        let n = p.completed()?;
        for i in 0..n {
            values.iter_mut().for_each(|v| *v = 0.0);
            match p.sample(i, &mut values) {
                Ok((s, e)) => {
                    stats.samples += 1;
                    emit(s, e, &values);
                }
                Err(_) => stats.bad_samples += 1,
            }
        }
        p.reset()?;
        if reason != StopReason::Full {
            return Ok(());
        }
        stats.full += 1;
    }
    Ok(())
}

/// Maps sample timestamps onto CLOCK_MONOTONIC (the trace's clock).
///
/// CUPTI documents PM sampling timestamps as CPU-based but not which
/// clock. The sampler offers candidates with their offsets to MONOTONIC
/// taken when it started (MONOTONIC itself, CUPTI's own timestamp
/// `cuptiGetTimestamp`, CLOCK_REALTIME); the first sample picks the first
/// candidate that puts it between the sampler's start (less a margin) and
/// the moment it was decoded (plus a margin). Clocks decades apart (REALTIME
/// against MONOTONIC) cannot be confused. The error is that of the offset:
/// two clock reads back to back (about a microsecond), plus the drift
/// between the two clocks over the run (NTP slews REALTIME by at most
/// 500 ppm, usually a few ppm: a few tens of µs over a minute).
#[derive(Debug, Clone)]
pub struct ClockMap {
    candidates: Vec<(&'static str, i64)>,
    start_mono_ns: i64,
    chosen: Option<(&'static str, i64)>,
    /// The first timestamp no candidate placed (for the metadata).
    pub unplaced: Option<u64>,
}

/// The clock name when no candidate fits and the decode anchors the samples.
pub const ANCHORED: &str = "unknown: anchored to the first decode (error up to one decode period)";

/// How far before the sampler's start a first sample may lie.
const EARLY_NS: i64 = 2_000_000_000;
/// How far after its decode.
const LATE_NS: i64 = 1_000_000_000;

impl ClockMap {
    /// `candidates`: (clock name, offset to add to get MONOTONIC ns).
    pub fn new(start_mono_ns: i64, candidates: Vec<(&'static str, i64)>) -> Self {
        ClockMap {
            candidates,
            start_mono_ns,
            chosen: None,
            unplaced: None,
        }
    }

    /// The chosen clock and its offset, once a sample chose it.
    pub fn chosen(&self) -> Option<(&'static str, i64)> {
        self.chosen
    }

    /// Picks the clock from a decode round's samples when none is chosen
    /// yet: the first candidate that places `first_raw`; failing all, the
    /// round is anchored to the decode itself (`last_end_raw` taken as
    /// `now_mono_ns`: samples then land up to one decode period late, and
    /// the name says so). Returns the chosen clock's name.
    pub fn choose(&mut self, first_raw: u64, last_end_raw: u64, now_mono_ns: i64) -> &'static str {
        if let Some((name, _)) = self.chosen {
            return name;
        }
        if self.map(first_raw, now_mono_ns).is_none() {
            if let Ok(last) = i64::try_from(last_end_raw) {
                self.chosen = Some((ANCHORED, now_mono_ns.saturating_sub(last)));
            }
        }
        self.chosen.map_or("none", |c| c.0)
    }

    /// `raw` on the trace's clock; `now_mono_ns` is when it was decoded.
    /// None while no candidate fits.
    pub fn map(&mut self, raw: u64, now_mono_ns: i64) -> Option<i64> {
        let raw = i64::try_from(raw).ok()?;
        if let Some((_, off)) = self.chosen {
            return Some(raw.saturating_add(off));
        }
        let lo = self.start_mono_ns - EARLY_NS;
        let hi = now_mono_ns + LATE_NS;
        for &(name, off) in &self.candidates {
            let t = raw.saturating_add(off);
            if t >= lo && t <= hi {
                self.chosen = Some((name, off));
                return Some(t);
            }
        }
        if self.unplaced.is_none() {
            self.unplaced = Some(raw as u64);
        }
        None
    }
}

/// One output series of a device: a formula over the evaluated values.
#[derive(Debug, Clone)]
pub struct Series {
    /// Indices of the formula's inputs in the evaluated values.
    pub inputs: Vec<usize>,
    /// How the inputs become the value (None: the first input as it is, for
    /// a raw CUPTI metric).
    pub formula: Option<Formula>,
}

impl Series {
    /// The series' value for one sample of `dur_ns`.
    pub fn value(&self, values: &[f64], dur_ns: i64) -> Option<f64> {
        let v: Vec<f64> = self
            .inputs
            .iter()
            .map(|&i| values.get(i).copied())
            .collect::<Option<_>>()?;
        match self.formula {
            Some(f) => f.eval(&v, dur_ns),
            None => v.first().copied().filter(|x| x.is_finite()),
        }
    }
}

/// A counter point: series index, time on the trace's clock, value.
pub type Point = (usize, i64, f64);

/// The points of one sample: one per series whose value is defined, at the
/// sample's start on the trace's clock. Nothing when the clock is unknown
/// or the sample is empty (end before start).
pub fn sample_points(
    series: &[Series],
    clock: &mut ClockMap,
    start: u64,
    end: u64,
    values: &[f64],
    now_mono_ns: i64,
    out: &mut Vec<Point>,
) -> Option<i64> {
    let s = clock.map(start, now_mono_ns)?;
    let e = clock.map(end, now_mono_ns)?;
    if e < s {
        return None;
    }
    for (k, ser) in series.iter().enumerate() {
        if let Some(v) = ser.value(values, e - s) {
            out.push((k, s, v));
        }
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sampler: a hardware buffer of samples, an image of `cap`.
    struct Fake {
        hw: Vec<(u64, u64, f64)>,
        cap: usize,
        image: Vec<(u64, u64, f64)>,
        calls: Vec<&'static str>,
        fail_decode: Option<u32>,
        bad_sample: Option<u64>,
        overflow_once: bool,
    }

    impl Fake {
        fn new(n: u64, cap: usize) -> Fake {
            Fake {
                hw: (0..n).map(|i| (i * 100, i * 100 + 100, i as f64)).collect(),
                cap,
                image: vec![],
                calls: vec![],
                fail_decode: None,
                bad_sample: None,
                overflow_once: false,
            }
        }
    }

    impl PmOps for Fake {
        fn decode(&mut self) -> Result<(StopReason, bool), u32> {
            self.calls.push("decode");
            if let Some(rc) = self.fail_decode {
                return Err(rc);
            }
            let room = self.cap - self.image.len();
            let take = room.min(self.hw.len());
            self.image.extend(self.hw.drain(..take));
            let reason = if self.hw.is_empty() {
                StopReason::EndOfRecords
            } else {
                StopReason::Full
            };
            Ok((reason, std::mem::take(&mut self.overflow_once)))
        }
        fn completed(&mut self) -> Result<usize, u32> {
            Ok(self.image.len())
        }
        fn sample(&mut self, i: usize, values: &mut [f64]) -> Result<(u64, u64), u32> {
            let (s, e, v) = self.image[i];
            if self.bad_sample == Some(s) {
                return Err(999);
            }
            values[0] = v;
            values[1] = 2.0 * v;
            Ok((s, e))
        }
        fn reset(&mut self) -> Result<(), u32> {
            self.calls.push("reset");
            self.image.clear();
            Ok(())
        }
    }

    #[test]
    fn a_full_image_is_emptied_and_decoded_again_until_the_end() {
        let mut f = Fake::new(25, 10);
        let mut stats = DrainStats::default();
        let mut got = vec![];
        drain(&mut f, 2, &mut stats, |s, e, v| {
            got.push((s, e, v[0], v[1]))
        })
        .expect("as set up");
        assert_eq!(got.len(), 25);
        assert_eq!(got[24], (2400, 2500, 24.0, 48.0));
        // Three passes (10, 10, 5), each followed by a reset.
        assert_eq!(
            f.calls,
            ["decode", "reset", "decode", "reset", "decode", "reset"]
        );
        assert_eq!(stats.full, 2);
        assert_eq!(stats.samples, 25);
        // Next round: nothing left, one decode and one reset.
        f.calls.clear();
        drain(&mut f, 2, &mut stats, |_, _, _| panic!("no samples")).expect("as set up");
        assert_eq!(f.calls, ["decode", "reset"]);
    }

    #[test]
    fn a_round_is_bounded_and_errors_are_counted_or_returned() {
        let mut f = Fake::new(1000, 10);
        let mut stats = DrainStats::default();
        drain(&mut f, 2, &mut stats, |_, _, _| {}).expect("as set up");
        assert_eq!(stats.samples, (MAX_PASSES * 10) as u64);
        assert_eq!(f.hw.len(), 1000 - MAX_PASSES * 10);

        let mut f = Fake::new(5, 10);
        f.bad_sample = Some(200);
        f.overflow_once = true;
        let mut stats = DrainStats::default();
        drain(&mut f, 2, &mut stats, |_, _, _| {}).expect("as set up");
        assert_eq!(
            (stats.samples, stats.bad_samples, stats.overflows),
            (4, 1, 1)
        );

        f.fail_decode = Some(17);
        assert_eq!(drain(&mut f, 2, &mut stats, |_, _, _| {}), Err(17));
    }

    #[test]
    fn the_clock_is_picked_by_the_first_sample_and_kept() {
        let start = 1_000_000_000_000; // MONOTONIC at the sampler's start
        let real_off = start - 1_764_000_000_000_000_000; // MONOTONIC - REALTIME
        let mut c = ClockMap::new(
            start,
            vec![("CLOCK_MONOTONIC", 0), ("CLOCK_REALTIME", real_off)],
        );
        // A REALTIME stamp 5 ms after start, decoded 50 ms after start.
        let raw = (1_764_000_000_000_000_000i64 + 5_000_000) as u64;
        assert_eq!(c.map(raw, start + 50_000_000), Some(start + 5_000_000));
        assert_eq!(c.chosen().expect("as set up").0, "CLOCK_REALTIME");
        // Later samples use the same offset.
        assert_eq!(
            c.map(raw + 100, start + 60_000_000),
            Some(start + 5_000_100)
        );

        let mut m = ClockMap::new(
            start,
            vec![("CLOCK_MONOTONIC", 0), ("CLOCK_REALTIME", real_off)],
        );
        assert_eq!(m.map((start + 7) as u64, start + 10), Some(start + 7));
        assert_eq!(m.chosen().expect("as set up").0, "CLOCK_MONOTONIC");

        // A stamp on no candidate clock: unplaced, remembered; a round's
        // choice then anchors its last end to the decode's time.
        let mut u = ClockMap::new(start, vec![("CLOCK_MONOTONIC", 0)]);
        assert_eq!(u.map(42, start + 10), None);
        assert_eq!(u.unplaced, Some(42));
        assert!(u.chosen().is_none());
        assert_eq!(u.choose(42, 1042, start + 5000), ANCHORED);
        assert_eq!(u.map(1042, start + 9999), Some(start + 5000));
        assert_eq!(u.map(42, start + 9999), Some(start + 4000));
        // A known clock is chosen by `choose` too.
        let mut k = ClockMap::new(start, vec![("CLOCK_MONOTONIC", 0)]);
        assert_eq!(
            k.choose(start as u64 + 5, start as u64 + 9, start + 10),
            "CLOCK_MONOTONIC"
        );
    }

    #[test]
    fn samples_become_points_per_series() {
        let series = vec![
            Series {
                inputs: vec![0],
                formula: Some(Formula::Percent("a")),
            },
            Series {
                inputs: vec![1],
                formula: Some(Formula::Bytes("b")),
            },
            Series {
                inputs: vec![0, 2],
                formula: Some(Formula::Ratio("a", "c")),
            },
        ];
        let mut c = ClockMap::new(1000, vec![("CLOCK_MONOTONIC", 0)]);
        let mut out = vec![];
        // 100 µs sample; 2e6 bytes -> 20 GB/s; c = 0 leaves the ratio out.
        let end = sample_points(
            &series,
            &mut c,
            1000,
            101_000,
            &[75.0, 2e6, 0.0],
            200_000,
            &mut out,
        );
        assert_eq!(end, Some(101_000));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], (0, 1000, 75.0));
        assert_eq!((out[1].0, out[1].1), (1, 1000));
        assert!((out[1].2 - 20.0).abs() < 1e-9);
        // An empty sample (end before start) gives nothing.
        out.clear();
        assert_eq!(
            sample_points(
                &series,
                &mut c,
                5000,
                4000,
                &[1.0, 1.0, 1.0],
                200_000,
                &mut out
            ),
            None
        );
        assert!(out.is_empty());
    }
}
