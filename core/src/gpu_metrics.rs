//! Measured GPU metrics (CUPTI PM sampling, `streamscope record
//! --gpu-metrics`): what the collector samples, the counter tracks it
//! writes, and how the report and the viewer find them again.
//!
//! Each [`Metric`] has candidate CUPTI formulas, tried in order: the first
//! whose raw CUPTI metrics the device accepts is sampled. A sample's value is
//! a percentage (over the sample's interval) or a throughput in GB/s (bytes
//! in the interval divided by its length). The collector writes one counter
//! track per GPU and metric, named by [`track_name`] ("GPU 0 · SM active
//! %"), a [`TrackKind::Counter`](crate::model::TrackKind::Counter) child of
//! the GPU's group track; a raw CUPTI metric the user asked for gets the
//! track `"GPU 0 · <cupti name>"` with the value as CUPTI evaluates it.

/// How a candidate turns CUPTI values into the metric's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Formula {
    /// One CUPTI metric, already a percentage.
    Percent(&'static str),
    /// 100 × a / b (two CUPTI metrics over the same sample).
    Ratio(&'static str, &'static str),
    /// One CUPTI byte count over the sample: GB/s.
    Bytes(&'static str),
    /// The sum of two CUPTI byte counts over the sample: GB/s.
    BytesSum(&'static str, &'static str),
}

impl Formula {
    /// The CUPTI metric names the formula reads.
    pub fn inputs(&self) -> Vec<&'static str> {
        match *self {
            Formula::Percent(a) | Formula::Bytes(a) => vec![a],
            Formula::Ratio(a, b) | Formula::BytesSum(a, b) => vec![a, b],
        }
    }

    /// The metric's value from the inputs' values (in [`Formula::inputs`]
    /// order) over a sample of `dur_ns`; None when it cannot be computed
    /// (a zero denominator or duration, a non-finite value).
    pub fn eval(&self, v: &[f64], dur_ns: i64) -> Option<f64> {
        let per_s = |bytes: f64| {
            (dur_ns > 0).then(|| bytes / (dur_ns as f64 * 1e-9) / 1e9) // GB/s
        };
        let r = match *self {
            Formula::Percent(_) => Some(*v.first()?),
            Formula::Ratio(..) => {
                let (a, b) = (*v.first()?, *v.get(1)?);
                (b > 0.0).then(|| 100.0 * a / b)
            }
            Formula::Bytes(_) => per_s(*v.first()?),
            Formula::BytesSum(..) => per_s(*v.first()? + *v.get(1)?),
        }?;
        r.is_finite().then_some(r)
    }
}

/// A metric of the default set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Cycles with at least one warp on the SM, % of elapsed cycles
    /// (averaged over SMs).
    SmActive,
    /// Achieved occupancy: warps resident, % of the SM's maximum, over the
    /// cycles the SM was active.
    WarpsActive,
    /// Tensor pipes active, % of elapsed cycles.
    TensorActive,
    /// DRAM read + write throughput.
    Dram,
    /// NVLink bytes received.
    NvlinkRx,
    /// NVLink bytes transmitted.
    NvlinkTx,
    /// PCIe bytes read (received by the GPU).
    PcieRead,
    /// PCIe bytes written (sent by the GPU).
    PcieWrite,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 8] = [
        Metric::SmActive,
        Metric::WarpsActive,
        Metric::TensorActive,
        Metric::Dram,
        Metric::NvlinkRx,
        Metric::NvlinkTx,
        Metric::PcieRead,
        Metric::PcieWrite,
    ];

    /// Name in `--gpu-metrics=LIST` and in the collector's metadata.
    pub fn key(self) -> &'static str {
        match self {
            Metric::SmActive => "sm_active",
            Metric::WarpsActive => "warps_active",
            Metric::TensorActive => "tensor_active",
            Metric::Dram => "dram",
            Metric::NvlinkRx => "nvlink_rx",
            Metric::NvlinkTx => "nvlink_tx",
            Metric::PcieRead => "pcie_read",
            Metric::PcieWrite => "pcie_write",
        }
    }

    /// Label in the track name, before the unit.
    pub fn label(self) -> &'static str {
        match self {
            Metric::SmActive => "SM active",
            Metric::WarpsActive => "achieved occupancy",
            Metric::TensorActive => "tensor active",
            Metric::Dram => "DRAM",
            Metric::NvlinkRx => "NVLink rx",
            Metric::NvlinkTx => "NVLink tx",
            Metric::PcieRead => "PCIe read",
            Metric::PcieWrite => "PCIe write",
        }
    }

    /// "%" or "GB/s".
    pub fn unit(self) -> &'static str {
        if self.is_percent() {
            "%"
        } else {
            "GB/s"
        }
    }

    /// True for the percentages (SM active, occupancy, tensor active).
    pub fn is_percent(self) -> bool {
        matches!(
            self,
            Metric::SmActive | Metric::WarpsActive | Metric::TensorActive
        )
    }

    /// The metric of `key` ([`Metric::key`]).
    pub fn from_key(key: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == key)
    }

    /// Candidate CUPTI formulas, the preferred first. Names from CUPTI's
    /// PM sampling metrics table and the metric naming rules
    /// (`unit__counter.rollup.submetric`); the device decides which exist.
    pub fn candidates(self) -> &'static [Formula] {
        use Formula::*;
        match self {
            Metric::SmActive => &[
                Percent("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
                Ratio("sm__cycles_active.avg", "sm__cycles_elapsed.avg"),
                Ratio("sm__cycles_active.avg", "gpc__cycles_elapsed.max"),
            ],
            Metric::WarpsActive => &[
                Percent("sm__warps_active.avg.pct_of_peak_sustained_active"),
                Percent("sm__warps_active_realtime.avg.pct_of_peak_sustained_active"),
            ],
            Metric::TensorActive => &[
                Percent("sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"),
                Percent(
                    "sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
                ),
                Percent("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
                Percent("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
                Percent("sm__pipe_shared_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"),
            ],
            Metric::Dram => &[
                Bytes("dram__bytes.sum"),
                BytesSum("dram__bytes_read.sum", "dram__bytes_write.sum"),
            ],
            // The payload the GPU's own requests carry first (what the
            // collectives move); the raw link bytes, which also count
            // protocol overhead, when the device lacks it.
            Metric::NvlinkRx => &[
                Bytes("nvlrx__bytes_data_user.sum"),
                Bytes("nvlrx__bytes.sum"),
            ],
            Metric::NvlinkTx => &[
                Bytes("nvltx__bytes_data_user.sum"),
                Bytes("nvltx__bytes.sum"),
            ],
            Metric::PcieRead => &[Bytes("pcie__read_bytes.sum")],
            Metric::PcieWrite => &[Bytes("pcie__write_bytes.sum")],
        }
    }
}

/// One entry of `--gpu-metrics=LIST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A metric of the default set, by its key.
    Known(Metric),
    /// Any other name: a raw CUPTI metric, probed as it is.
    Raw(String),
}

/// The default set: every [`Metric`].
pub fn default_requests() -> Vec<Request> {
    Metric::ALL.into_iter().map(Request::Known).collect()
}

/// Parses `--gpu-metrics=LIST` (comma-separated keys or CUPTI metric
/// names; `default` or an empty value is the default set). Names are not
/// checked against CUPTI here: the collector probes them on the device.
pub fn parse_list(list: &str) -> Result<Vec<Request>, String> {
    let list = list.trim();
    if list.is_empty() || list == "default" {
        return Ok(default_requests());
    }
    let mut out: Vec<Request> = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("empty metric name in {list:?}"));
        }
        if let Some(bad) = item
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.')))
        {
            return Err(format!(
                "metric name {item:?} has {bad:?} (letters, digits, '_' and '.' only)"
            ));
        }
        let r = if item == "default" {
            for d in default_requests() {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
            continue;
        } else {
            match Metric::from_key(item) {
                Some(m) => Request::Known(m),
                None => Request::Raw(item.to_string()),
            }
        };
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

/// Sampling rate bounds of `--gpu-metrics-hz` (default [`DEFAULT_HZ`]).
pub const MIN_HZ: u32 = 1_000;
/// Upper bound of the sampling rate.
pub const MAX_HZ: u32 = 100_000;
/// Default sampling rate: one sample every 100 µs.
pub const DEFAULT_HZ: u32 = 10_000;

/// Parses `--gpu-metrics-hz`: an integer, or with a `k`/`kHz` suffix,
/// within [MIN_HZ, MAX_HZ].
pub fn parse_hz(s: &str) -> Result<u32, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("khz").or_else(|| t.strip_suffix('k')) {
        (n.trim(), 1000.0)
    } else {
        (t.strip_suffix("hz").unwrap_or(&t).trim(), 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("expected a rate in Hz (1000 to 100000, or 1k to 100k), got {s:?}"))?;
    let hz = v * mult;
    if !hz.is_finite() || hz < f64::from(MIN_HZ) || hz > f64::from(MAX_HZ) {
        return Err(format!(
            "the GPU metrics rate must be 1 kHz to 100 kHz, got {s:?}"
        ));
    }
    Ok(hz.round() as u32)
}

/// Track name of `metric` on CUDA device `ordinal`: "GPU 0 · SM active %".
pub fn track_name(ordinal: u32, metric: Metric) -> String {
    format!("GPU {ordinal} · {} {}", metric.label(), metric.unit())
}

/// Track name of a raw CUPTI metric: "GPU 0 · dram__bytes.sum".
pub fn raw_track_name(ordinal: u32, cupti_name: &str) -> String {
    format!("GPU {ordinal} · {cupti_name}")
}

/// The device ordinal and metric of a track named by [`track_name`].
pub fn parse_track_name(name: &str) -> Option<(u32, Metric)> {
    let rest = name.strip_prefix("GPU ")?;
    let (ord, tail) = rest.split_once(" · ")?;
    let ordinal = ord.parse().ok()?;
    Metric::ALL
        .into_iter()
        .find(|m| tail == format!("{} {}", m.label(), m.unit()))
        .map(|m| (ordinal, m))
}

/// The unit at the end of a counter track's name ("%", "GB/s"), for axis
/// labels; "" when none is known.
pub fn unit_of_track(name: &str) -> &'static str {
    match parse_track_name(name) {
        Some((_, m)) => m.unit(),
        None if name.ends_with(" %") => "%",
        None if name.ends_with(" GB/s") => "GB/s",
        None => "",
    }
}

/// Process metadata keys the collector writes.
pub mod keys {
    /// "key=cupti name, ..." of the metrics sampled on device N:
    /// `gpu_metrics.device{N}.sampled`.
    pub fn sampled(ordinal: u32) -> String {
        format!("gpu_metrics.device{ordinal}.sampled")
    }
    /// "cupti name (reason); ..." of the CUPTI metrics the device refused.
    pub fn refused(ordinal: u32) -> String {
        format!("gpu_metrics.device{ordinal}.refused")
    }
    /// Why device N is not sampled by this process (another process holds
    /// its sampler, an API failed, ...).
    pub fn status(ordinal: u32) -> String {
        format!("gpu_metrics.device{ordinal}.status")
    }
    /// Sampling settings: rate, trigger mode, buffer, clock mapping.
    pub fn config(ordinal: u32) -> String {
        format!("gpu_metrics.device{ordinal}.config")
    }
    /// Samples written, hardware buffer overflows, decode errors.
    pub fn stats(ordinal: u32) -> String {
        format!("gpu_metrics.device{ordinal}.stats")
    }
    /// Set once per process when sampling was asked for but could not
    /// start at all (CUPTI lacks the PM sampling API, ...).
    pub const UNAVAILABLE: &str = "gpu_metrics.unavailable";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn track_names_round_trip_for_every_metric() {
        for m in Metric::ALL {
            let n = track_name(3, m);
            assert_eq!(parse_track_name(&n), Some((3, m)), "{n}");
            assert_eq!(unit_of_track(&n), m.unit());
        }
        assert_eq!(track_name(0, Metric::SmActive), "GPU 0 · SM active %");
        assert_eq!(track_name(1, Metric::NvlinkRx), "GPU 1 · NVLink rx GB/s");
        assert_eq!(parse_track_name("GPU 0 · dram__bytes.sum"), None);
        assert_eq!(parse_track_name("GPU x · SM active %"), None);
        assert_eq!(unit_of_track("SMs in use"), "");
    }

    #[test]
    fn lists_parse_keys_raw_names_and_default() {
        assert_eq!(parse_list("").expect("as set up"), default_requests());
        assert_eq!(
            parse_list("default").expect("as set up").len(),
            Metric::ALL.len()
        );
        let l = parse_list("sm_active, dram__bytes_read.sum,sm_active").expect("as set up");
        assert_eq!(
            l,
            vec![
                Request::Known(Metric::SmActive),
                Request::Raw("dram__bytes_read.sum".into())
            ]
        );
        // Unknown names pass through, to be probed on the device.
        assert_eq!(
            parse_list("no_such_metric").expect("as set up"),
            vec![Request::Raw("no_such_metric".into())]
        );
        assert!(parse_list("a,,b").expect_err("an error").contains("empty"));
        assert!(parse_list("sm;rm").expect_err("an error").contains("';'"));
    }

    #[test]
    fn rates_are_bounded() {
        assert_eq!(parse_hz("10000").expect("as set up"), 10_000);
        assert_eq!(parse_hz("20k").expect("as set up"), 20_000);
        assert_eq!(parse_hz("1kHz").expect("as set up"), 1_000);
        assert_eq!(parse_hz("100k").expect("as set up"), 100_000);
        assert!(parse_hz("999").is_err());
        assert!(parse_hz("200k").is_err());
        assert!(parse_hz("fast").is_err());
        assert!(parse_hz("-5k").is_err());
    }

    #[test]
    fn formulas_give_percent_and_gbps() {
        let f = Formula::Ratio("a", "b");
        assert_eq!(f.eval(&[50.0, 200.0], 100_000), Some(25.0));
        assert_eq!(f.eval(&[50.0, 0.0], 100_000), None);
        // 1 MB in 100 µs = 10 GB/s.
        let b = Formula::Bytes("x");
        assert!((b.eval(&[1e6], 100_000).expect("as set up") - 10.0).abs() < 1e-9);
        assert_eq!(b.eval(&[1e6], 0), None);
        let s = Formula::BytesSum("r", "w");
        assert!((s.eval(&[1e6, 1e6], 100_000).expect("as set up") - 20.0).abs() < 1e-9);
        assert_eq!(Formula::Percent("p").eval(&[f64::NAN], 10), None);
        for m in Metric::ALL {
            assert!(!m.candidates().is_empty());
        }
    }
}
