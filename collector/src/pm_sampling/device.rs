//! One GPU's sampler: its lock, the probing of the metrics, the CUPTI
//! set-up, the decode rounds and the end (see the module above).

use crate::error::SamplerError;
use std::ffi::{c_char, CStr, CString};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::time::Instant;

use cudarc::cupti::sys as cs;
use streamscope_core::gpu_metrics::{self as gm, keys, Request};
use streamscope_core::protocol;

use super::cupti_objs::{
    clock_realtime_ns, result_name, HostObj, Ops, PrimaryCtx, CUPTI_ERROR_OUT_OF_MEMORY,
};
use super::decode::{self, ClockMap, DrainStats, PmOps, Series};
use super::{Settings, Shared, HW_BUFFER_BYTES, MAX_DECODE_FAILURES};
use crate::cupti_api::{Cupti, CuptiResult, PmApi, SUCCESS};
use crate::driver::Driver;
use crate::process_info::monotonic_ns;

pub(super) struct StartCtx<'a> {
    pub(super) api: &'static PmApi,
    pub(super) cupti: &'static Cupti,
    pub(super) driver: Option<&'a Driver>,
    pub(super) settings: &'a Settings,
    pub(super) out_dir: &'a std::path::Path,
    pub(super) host: &'a str,
    pub(super) shared: &'a Shared,
}

/// The device's lock: Ok(file held) or Err(the holder's pid, if written).
pub(super) fn lock_device(path: &std::path::Path) -> Result<File, SamplerError> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| SamplerError::File {
            what: "open",
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
    // SAFETY: flock on a descriptor we own; non-blocking.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        let holder = s.trim();
        return Err(SamplerError::Locked {
            holder: (!holder.is_empty()).then(|| holder.to_string()),
        });
    }
    let _ = f.set_len(0);
    let _ = f.rewind();
    let _ = write!(f, "{}", std::process::id());
    let _ = f.flush();
    Ok(f)
}

/// One device's PM sampler.
pub(super) struct DeviceSampler {
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
    pub(super) given_up: bool,
    config: String,
    /// What CUPTI was handed by pointer and may read for as long as the
    /// sampler and host objects live: the config image (SetConfig), the
    /// counter availability image and the chip name (host objects). They
    /// drop after both (field order). Freed at the end of set-up, they made
    /// the first decode fault or return samples once and then
    /// CUPTI_ERROR_UNKNOWN (H200, CUDA 13.0: docs/GPU.md).
    _config_image: Vec<u8>,
    _avail: Vec<u8>,
    _chip: CString,
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
) -> Result<(Vec<Chosen>, Vec<String>), SamplerError> {
    let mut cache: Vec<(String, Result<(), CuptiResult>)> = Vec::new();
    let mut accepted = |name: &str| -> Result<bool, SamplerError> {
        if let Some((_, r)) = cache.iter().find(|(n, _)| n == name) {
            return Ok(r.is_ok());
        }
        let c = CString::new(name).map_err(|_| SamplerError::MetricName(name.to_string()))?;
        let host = HostObj::new(api, chip, Some(avail)).map_err(|rc| SamplerError::Call {
            call: "cuptiProfilerHostInitialize",
            why: result_name(cupti, rc),
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
    /// Sets the sampler of device `ordinal` up and starts it. `ctx`: the
    /// primary context made current on this thread for a second try (kept
    /// until the sampler ends).
    pub(super) fn start(
        c: &StartCtx<'_>,
        ordinal: u32,
        ctx: Option<PrimaryCtx>,
    ) -> Result<DeviceSampler, SamplerError> {
        let (api, cupti) = (c.api, c.cupti);
        let rs = |rc| result_name(cupti, rc);
        let failed = |call: &'static str, rc| SamplerError::Call { call, why: rs(rc) };
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
            return Err(failed("cuptiDeviceGetChipName", rc));
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
            return Err(failed("cuptiPmSamplingGetCounterAvailability", rc));
        }
        let mut avail = vec![0u8; av.counterAvailabilityImageSize];
        av.pCounterAvailabilityImage = avail.as_mut_ptr();
        // SAFETY: CUPTI writes counterAvailabilityImageSize bytes into `avail`.
        let rc = unsafe { (api.get_counter_availability)(&mut av) };
        if rc != SUCCESS {
            return Err(failed("cuptiPmSamplingGetCounterAvailability", rc));
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
        let probe_ms = t_probe.elapsed().as_millis();
        // 5. Everything accepted in one config image of one pass.
        let (host, config, names) = loop {
            if chosen.is_empty() {
                c.shared.meta(keys::refused(ordinal), refused.join("; "));
                return Err(SamplerError::NoMetric(refused.join("; ")));
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
            let host = HostObj::new(api, &chip_name, Some(&avail))
                .map_err(|rc| failed("cuptiProfilerHostInitialize", rc))?;
            let rc = host.add_metrics(&ptrs);
            let fits = if rc == SUCCESS {
                match host.config_image() {
                    Ok((img, 1)) => Some(img),
                    Ok((_, _)) => None,
                    Err(rc) => return Err(failed("cuptiProfilerHostGetConfigImage", rc)),
                }
            } else {
                None
            };
            match fits {
                Some(img) => break (host, img, cnames),
                None => {
                    if let Some(ch) = chosen.pop() {
                        refused.push(if rc == SUCCESS {
                            format!("{} (does not fit one pass with the others)", ch.key)
                        } else {
                            format!("{} (refused with the others: {})", ch.key, rs(rc))
                        });
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
        // 6. Enable.
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
        let pm = enable(()).map_err(|rc| failed("cuptiPmSamplingEnable", rc))?;
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
            config: String::new(),
            _config_image: Vec::new(),
            _avail: Vec::new(),
            _chip: CString::default(),
            _ctx: ctx,
            _lock: lock,
        };
        // From here `s` disables on drop.
        let interval = c.settings.interval_ns();
        // 7. The counter-data image: 100 ms of samples, at least 1000.
        // 8. Interval, trigger, hardware buffer.
        let max_samples = c
            .settings
            .tuning
            .image_samples
            .unwrap_or((c.settings.hz / 10).max(1000));
        s.make_image(max_samples)?;
        let Some((trigger, hw)) = s.set_config(&config, interval) else {
            return Err(SamplerError::Config(
                s.last_error.take().unwrap_or_default(),
            ));
        };
        let time_mode = trigger
            == cs::CUpti_PmSampling_TriggerMode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
        s.last_error = None;
        // 9. Started by `begin`, once every GPU is set up.
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
        // Until here they were locals declared before `s` (an early return
        // drops `s`, disabling and deinitializing, before them).
        s._config_image = config;
        s._avail = avail;
        s._chip = chip_name;
        Ok(s)
    }

    /// This GPU's primary context current on this thread, when it holds one.
    fn make_current(&self) {
        if let Some(c) = &self._ctx {
            c.make_current();
        }
    }

    /// cuptiPmSamplingStop, once.
    fn stop(&mut self) {
        if self.started {
            // SAFETY: zeroed plain C struct.
            let mut st: cs::CUpti_PmSampling_Stop_Params = unsafe { std::mem::zeroed() };
            st.structSize = cs::PmSampling_Stop_Params_STRUCT_SIZE as usize;
            st.pPmSamplingObject = self.pm;
            // SAFETY: a params struct we own; the sampler was started.
            let _ = unsafe { (self.api.stop)(&mut st) };
            self.started = false;
        }
    }

    /// cuptiPmSamplingSetConfig with the first trigger and hardware buffer
    /// size the device accepts (the GPU time trigger first, then the SYS
    /// clock one); None (the last error noted) when none is.
    fn set_config(
        &mut self,
        config: &[u8],
        interval: u64,
    ) -> Option<(cs::CUpti_PmSampling_TriggerMode, usize)> {
        use cs::CUpti_PmSampling_TriggerMode as Mode;
        for trigger in [
            Mode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
            Mode::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL,
        ] {
            for hw in HW_BUFFER_BYTES {
                // SAFETY: zeroed plain C struct (enum fields 0 are valid).
                let mut sc: cs::CUpti_PmSampling_SetConfig_Params = unsafe { std::mem::zeroed() };
                sc.structSize = cs::PmSampling_SetConfig_Params_STRUCT_SIZE as usize;
                sc.pPmSamplingObject = self.pm;
                sc.configSize = config.len();
                sc.pConfig = config.as_ptr();
                sc.hardwareBufferSize = hw;
                sc.samplingInterval = interval;
                sc.triggerMode = trigger;
                // The default append mode (keep the oldest records when the
                // hardware buffer fills; the decode every 50 ms keeps it from
                // filling). With KEEP_LATEST, cuptiPmSamplingDecodeData
                // faulted inside libnvperf_host (CUDA 13.0, driver 580, H200).
                sc.hwBufferAppendMode =
                    cs::CUpti_PmSampling_HardwareBuffer_AppendMode::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
                // SAFETY: the config image outlives the sampler object: the
                // caller keeps it in `_config_image` (CUPTI reads it after
                // the call).
                let rc = unsafe { (self.api.set_config)(&mut sc) };
                if rc == SUCCESS {
                    return Some((trigger, hw));
                }
                self.last_error = Some(format!(
                    "cuptiPmSamplingSetConfig failed: {}",
                    result_name(self.cupti, rc)
                ));
            }
        }
        None
    }

    /// The counter-data image for `max_samples` samples, initialized.
    fn make_image(&mut self, max_samples: u32) -> Result<(), SamplerError> {
        let cupti = self.cupti;
        let failed = |call: &'static str, rc| SamplerError::Call {
            call,
            why: result_name(cupti, rc),
        };
        // SAFETY: zeroed plain C struct.
        let mut ds: cs::CUpti_PmSampling_GetCounterDataSize_Params = unsafe { std::mem::zeroed() };
        ds.structSize = cs::PmSampling_GetCounterDataSize_Params_STRUCT_SIZE as usize;
        ds.pPmSamplingObject = self.pm;
        ds.pMetricNames = self.name_ptrs.as_ptr() as *mut *const c_char;
        ds.numMetrics = self.name_ptrs.len();
        ds.maxSamples = max_samples;
        // SAFETY: the names outlive the call; CUPTI only reads them.
        let rc = unsafe { (self.api.get_counter_data_size)(&mut ds) };
        if rc != SUCCESS || ds.counterDataSize == 0 {
            return Err(failed("cuptiPmSamplingGetCounterDataSize", rc));
        }
        self.image = vec![0u8; ds.counterDataSize];
        if let Err(rc) = self.ops().reset() {
            return Err(failed("cuptiPmSamplingCounterDataImageInitialize", rc));
        }
        Ok(())
    }

    /// The CUDA device ordinal.
    pub(super) fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Takes the clocks a sample may be stamped with and starts sampling.
    pub(super) fn begin(&mut self) -> Result<(), SamplerError> {
        self.make_current();
        let mut cupti_ts = 0u64;
        let m0 = monotonic_ns();
        let real = clock_realtime_ns();
        // SAFETY: writes one u64.
        let ts_ok = unsafe { (self.cupti.get_timestamp)(&mut cupti_ts) } == SUCCESS;
        let m1 = monotonic_ns();
        let mono = m0 + (m1 - m0) / 2;
        let mut cands = vec![("CLOCK_MONOTONIC", 0i64)];
        if ts_ok && cupti_ts > 0 {
            cands.push(("CUPTI timestamp", mono - cupti_ts as i64));
        }
        cands.push(("CLOCK_REALTIME", mono - real));
        self.clock = ClockMap::new(mono, cands);
        // SAFETY: zeroed plain C struct.
        let mut st: cs::CUpti_PmSampling_Start_Params = unsafe { std::mem::zeroed() };
        st.structSize = cs::PmSampling_Start_Params_STRUCT_SIZE as usize;
        st.pPmSamplingObject = self.pm;
        // SAFETY: a params struct we own; the sampler is enabled and set.
        let rc = unsafe { (self.api.start)(&mut st) };
        if rc != SUCCESS {
            return Err(SamplerError::Call {
                call: "cuptiPmSamplingStart",
                why: result_name(self.cupti, rc),
            });
        }
        self.started = true;
        Ok(())
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
    pub(super) fn round(&mut self, shared: &Shared) {
        if self.given_up {
            return;
        }
        self.make_current();
        let now = monotonic_ns();
        let nvalues = self.name_ptrs.len();
        let mut pts = Vec::new();
        let mut unplaced = 0u64;
        let mut stats = self.stats;
        // The round's samples first: the clock is chosen on a whole round.
        let mut raw: Vec<(u64, u64, Vec<f64>)> = Vec::new();
        let r = decode::drain(&mut self.ops(), nvalues, &mut stats, |s, e, v| {
            raw.push((s, e, v.to_vec()));
        });
        let (series, clock) = (&self.series, &mut self.clock);
        if let (Some(first), Some(last)) = (raw.first(), raw.iter().map(|x| x.1).max()) {
            clock.choose(first.0, last, now);
        }
        for (s, e, v) in &raw {
            if decode::sample_points(series, clock, *s, *e, v, now, &mut pts).is_none() {
                unplaced += 1;
            }
        }
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
        shared.push_points(mapped.into_iter());
    }

    /// Puts the stats line in the metadata; returns it.
    pub(super) fn publish_stats(&self, shared: &Shared) -> String {
        let st = &self.stats;
        let clock = match (self.clock.chosen(), self.clock.unplaced) {
            (Some((n, off)), Some(raw)) => {
                format!("clock {n} (+{off} ns to CLOCK_MONOTONIC; first sample stamped {raw})")
            }
            (Some((n, off)), None) => format!("clock {n} (+{off} ns to CLOCK_MONOTONIC)"),
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
    pub(super) fn finish(&mut self, shared: &Shared) {
        self.make_current();
        if self.started {
            self.stop();
            self.given_up = false;
            self.round(shared);
        }
        let text = self.publish_stats(shared);
        crate::warn!("streamscope: GPU {}: {text}", self.ordinal);
    }
}

impl Drop for DeviceSampler {
    fn drop(&mut self) {
        self.make_current();
        self.stop();
        // SAFETY: zeroed plain C struct.
        let mut d: cs::CUpti_PmSampling_Disable_Params = unsafe { std::mem::zeroed() };
        d.structSize = cs::PmSampling_Disable_Params_STRUCT_SIZE as usize;
        d.pPmSamplingObject = self.pm;
        // SAFETY: the object came from cuptiPmSamplingEnable; disabled once.
        let _ = unsafe { (self.api.disable)(&mut d) };
        // The host object, context and lock go after (field drops).
    }
}
