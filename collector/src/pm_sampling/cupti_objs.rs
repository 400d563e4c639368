//! Thin owners of CUPTI objects for the sampler: a profiler-host object,
//! the primary context made current (a fallback), and [`PmOps`] over a
//! PM sampling object and its counter-data image.

use std::ffi::{c_char, c_int, c_void, CStr};

use cudarc::cupti::sys as cs;

use super::decode::{PmOps, StopReason};
use crate::cupti_api::{Cupti, CuptiResult, PmApi, SUCCESS};

/// CUPTI_ERROR_OUT_OF_MEMORY: what DecodeData returns on a hardware-buffer
/// overflow.
pub(super) const CUPTI_ERROR_OUT_OF_MEMORY: CuptiResult = 8;

/// "NAME (code)" of a CUPTI result.
pub(super) fn result_name(cupti: &Cupti, rc: CuptiResult) -> String {
    format!("{} ({rc})", cupti.result_string(rc))
}

/// A profiler-host object (metric names -> config image; evaluation).
pub(super) struct HostObj {
    api: &'static PmApi,
    pub(super) obj: *mut cs::CUpti_Profiler_Host_Object,
}

impl HostObj {
    pub(super) fn new(
        api: &'static PmApi,
        chip: &CStr,
        avail: Option<&[u8]>,
    ) -> Result<HostObj, CuptiResult> {
        // SAFETY: all-zero is a valid value of this plain C struct (null
        // pointers, enum value 0).
        let mut p: cs::CUpti_Profiler_Host_Initialize_Params = unsafe { std::mem::zeroed() };
        p.structSize = cs::Profiler_Host_Initialize_Params_STRUCT_SIZE as usize;
        p.profilerType = cs::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_PM_SAMPLING;
        p.pChipName = chip.as_ptr();
        p.pCounterAvailabilityImage = avail.map_or(std::ptr::null(), <[u8]>::as_ptr);
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

    pub(super) fn add_metrics(&self, names: &[*const c_char]) -> CuptiResult {
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
    pub(super) fn config_image(&self) -> Result<(Vec<u8>, usize), CuptiResult> {
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
pub(super) struct PrimaryCtx {
    ctx: *mut c_void,
    set: unsafe extern "C" fn(*mut c_void) -> c_int,
    release: unsafe extern "C" fn(c_int) -> c_int,
    dev: c_int,
}

impl PrimaryCtx {
    pub(super) fn retain(ordinal: u32) -> Option<PrimaryCtx> {
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
            Some(PrimaryCtx {
                ctx,
                set,
                release,
                dev,
            })
        }
    }
}

impl PrimaryCtx {
    /// Makes the context current on this thread (with several GPUs the
    /// sampler switches before each one's calls).
    pub(super) fn make_current(&self) {
        // SAFETY: a context this object retained and still holds.
        let _ = unsafe { (self.set)(self.ctx) };
    }
}

impl Drop for PrimaryCtx {
    fn drop(&mut self) {
        // SAFETY: nothing current on this thread any more (the context may
        // go with the release), then the one reference `retain` took.
        unsafe {
            let _ = (self.set)(std::ptr::null_mut());
            let _ = (self.release)(self.dev);
        }
    }
}

pub(super) fn clock_realtime_ns() -> i64 {
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

/// Lines of `STREAMSCOPE_PM_VERBOSE=1` call tracing left (the first ones
/// only: enough to see where a sampler goes wrong).
static VERBOSE_LEFT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Traces one CUPTI call on stderr when `STREAMSCOPE_PM_VERBOSE=1`.
fn trace(what: impl FnOnce() -> String) {
    use std::sync::atomic::Ordering;
    let mut left = VERBOSE_LEFT.load(Ordering::Relaxed);
    if left == -1 {
        left = if std::env::var("STREAMSCOPE_PM_VERBOSE").as_deref() == Ok("1") {
            200
        } else {
            0
        };
        VERBOSE_LEFT.store(left, Ordering::Relaxed);
    }
    if left > 0 {
        VERBOSE_LEFT.store(left - 1, Ordering::Relaxed);
        eprintln!("streamscope-pm: {}", what());
    }
}

/// [`PmOps`] over CUPTI.
pub(super) struct Ops<'a> {
    pub(super) api: &'static PmApi,
    pub(super) pm: *mut cs::CUpti_PmSampling_Object,
    pub(super) host: *mut cs::CUpti_Profiler_Host_Object,
    pub(super) image: &'a mut Vec<u8>,
    pub(super) names: &'a [*const c_char],
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
        trace(|| {
            format!(
                "DecodeData rc={rc} reason={reason} overflow={} image={} B",
                p.overflow,
                self.image.len()
            )
        });
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
        trace(|| {
            format!(
                "GetCounterDataInfo rc={rc} total={} populated={} completed={}",
                p.numTotalSamples, p.numPopulatedSamples, p.numCompletedSamples
            )
        });
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
        if rc != SUCCESS || i == 0 {
            trace(|| {
                format!(
                    "GetSampleInfo({i}) rc={rc} start={} end={}",
                    si.startTimestamp, si.endTimestamp
                )
            });
        }
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
        if rc != SUCCESS || i == 0 {
            trace(|| {
                format!(
                    "EvaluateToGpuValues({i}) rc={rc} first={:?}",
                    values.first()
                )
            });
        }
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
        trace(|| format!("CounterDataImageInitialize rc={rc}"));
        if rc != SUCCESS {
            return Err(rc);
        }
        Ok(())
    }
}
