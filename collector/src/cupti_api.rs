//! libcupti, opened with dlopen and its functions looked up one by one, so
//! a missing library or symbol is an error we report, never a panic.
//! Every call goes through [`Cupti::check`], which prints a failing return
//! code with the function name to stderr, once per function.

// The struct field each symbol is stored in fixes the transmute's target type.
#![allow(clippy::missing_transmute_annotations)]

use crate::error::CuptiError;
use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Mutex;

use cudarc::cupti::sys as cs;

pub type CuptiResult = u32;
pub const SUCCESS: CuptiResult = 0;
pub const ERROR_MAX_LIMIT_REACHED: CuptiResult = 12;

pub const CB_DOMAIN_DRIVER_API: u32 = 1;
pub const CB_DOMAIN_RUNTIME_API: u32 = 2;
pub const CB_DOMAIN_RESOURCE: u32 = 3;
pub const CB_DOMAIN_NVTX: u32 = 5;
/// `CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED`.
pub const CBID_GRAPHNODE_CREATED: u32 = 13;
/// `CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED`.
pub const CBID_GRAPHNODE_CLONED: u32 = 20;
pub const API_ENTER: u32 = 0;
pub const API_EXIT: u32 = 1;
pub const FLUSH_FORCED: u32 = 1;
pub const THREAD_ID_TYPE_SYSTEM: u32 = 1;
/// `CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER` (a uint8_t): non-zero
/// says the buffers we hand CUPTI are zeroed already.
pub const ATTR_ZEROED_OUT_ACTIVITY_BUFFER: u32 = 5;

pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub type CallbackFunc = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
pub type TimestampFunc = unsafe extern "C" fn() -> u64;

/// The CUPTI functions the collector calls.
pub struct Cupti {
    pub path: String,
    pub get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult,
    pub get_result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    pub register_callbacks:
        unsafe extern "C" fn(Option<BufferRequested>, Option<BufferCompleted>) -> CuptiResult,
    pub activity_enable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub activity_disable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    pub get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    pub get_num_dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    pub register_timestamp: Option<unsafe extern "C" fn(Option<TimestampFunc>) -> CuptiResult>,
    pub subscribe:
        unsafe extern "C" fn(*mut *mut c_void, Option<CallbackFunc>, *mut c_void) -> CuptiResult,
    pub enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> CuptiResult,
    pub get_callback_name: unsafe extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult,
    pub set_thread_id_type: Option<unsafe extern "C" fn(u32) -> CuptiResult>,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    /// `cuptiActivityEnableRuntimeApi(cbid, enable)` (CUPTI 12.5 and newer).
    pub enable_runtime_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    /// `cuptiActivityEnableDriverApi(cbid, enable)` (CUPTI 12.5 and newer).
    pub enable_driver_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    /// `cuptiActivityEnableHWTrace(enable)` (CUPTI 12.8 and newer).
    pub enable_hw_trace: Option<unsafe extern "C" fn(u8) -> CuptiResult>,
    /// `cuptiGetGraphNodeId(node, &id)` (CUPTI 11.0 and newer).
    pub get_graph_node_id: Option<unsafe extern "C" fn(*mut c_void, *mut u64) -> CuptiResult>,
    /// `cuptiActivitySetAttribute(attr, &value_size, &value)`.
    pub activity_set_attribute:
        Option<unsafe extern "C" fn(u32, *mut usize, *mut c_void) -> CuptiResult>,
    /// The dlopen handle (as an address: the library is never closed), for
    /// symbols looked up later ([`PmApi::load`]).
    handle: usize,
    reported: Mutex<HashSet<&'static str>>,
}

/// A CUPTI function taking one params struct (the profiler and PM
/// sampling APIs: every one is `CUptiResult f(Params*)`).
pub type ParamFn<T> = unsafe extern "C" fn(*mut T) -> CuptiResult;

/// The profiler-host and PM sampling functions (CUPTI 12.6 and newer),
/// looked up only when GPU metrics are asked for.
pub struct PmApi {
    pub profiler_initialize: ParamFn<cs::CUpti_Profiler_Initialize_Params>,
    pub profiler_deinitialize: ParamFn<cs::CUpti_Profiler_DeInitialize_Params>,
    pub device_get_chip_name: ParamFn<cs::CUpti_Device_GetChipName_Params>,
    pub get_counter_availability: ParamFn<cs::CUpti_PmSampling_GetCounterAvailability_Params>,
    pub host_initialize: ParamFn<cs::CUpti_Profiler_Host_Initialize_Params>,
    pub host_deinitialize: ParamFn<cs::CUpti_Profiler_Host_Deinitialize_Params>,
    pub host_config_add_metrics: ParamFn<cs::CUpti_Profiler_Host_ConfigAddMetrics_Params>,
    pub host_get_config_image_size: ParamFn<cs::CUpti_Profiler_Host_GetConfigImageSize_Params>,
    pub host_get_config_image: ParamFn<cs::CUpti_Profiler_Host_GetConfigImage_Params>,
    pub host_get_num_of_passes: ParamFn<cs::CUpti_Profiler_Host_GetNumOfPasses_Params>,
    pub host_evaluate_to_gpu_values: ParamFn<cs::CUpti_Profiler_Host_EvaluateToGpuValues_Params>,
    pub enable: ParamFn<cs::CUpti_PmSampling_Enable_Params>,
    pub disable: ParamFn<cs::CUpti_PmSampling_Disable_Params>,
    pub set_config: ParamFn<cs::CUpti_PmSampling_SetConfig_Params>,
    pub start: ParamFn<cs::CUpti_PmSampling_Start_Params>,
    pub stop: ParamFn<cs::CUpti_PmSampling_Stop_Params>,
    pub decode_data: ParamFn<cs::CUpti_PmSampling_DecodeData_Params>,
    pub get_counter_data_size: ParamFn<cs::CUpti_PmSampling_GetCounterDataSize_Params>,
    pub counter_data_image_initialize:
        ParamFn<cs::CUpti_PmSampling_CounterDataImage_Initialize_Params>,
    pub get_counter_data_info: ParamFn<cs::CUpti_PmSampling_GetCounterDataInfo_Params>,
    pub counter_data_get_sample_info:
        ParamFn<cs::CUpti_PmSampling_CounterData_GetSampleInfo_Params>,
}

/// Library names tried after `STREAMSCOPE_CUPTI_LIB` / `NVTX_INJECTION64_PATH`.
const NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so", "libcupti.so.12"];

fn dlopen(name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: dlopen with a NUL-terminated name; the handle is kept for the
    // life of the process (never dlclosed).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    (!h.is_null()).then_some(h)
}

fn dlsym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: dlsym on a live handle with a NUL-terminated name.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

macro_rules! need {
    ($h:expr, $name:literal) => {{
        let p = dlsym($h, $name);
        if p.is_null() {
            return Err(CuptiError::Missing($name.to_string_lossy().into_owned()));
        }
        // SAFETY: the symbol is the CUPTI function of that name; the field
        // type is its C signature (enums passed as u32).
        unsafe { std::mem::transmute::<*mut c_void, _>(p) }
    }};
}

macro_rules! optional {
    ($h:expr, $name:literal) => {{
        let p = dlsym($h, $name);
        if p.is_null() {
            None
        } else {
            // SAFETY: as in `need!`.
            Some(unsafe { std::mem::transmute::<*mut c_void, _>(p) })
        }
    }};
}

impl Cupti {
    /// Opens libcupti: `explicit` paths first, then the usual names.
    pub fn open(explicit: &[String]) -> Result<Cupti, CuptiError> {
        let mut tried = Vec::new();
        let mut found = None;
        for name in explicit.iter().map(String::as_str).chain(NAMES) {
            if name.is_empty() {
                continue;
            }
            tried.push(name.to_string());
            if let Some(h) = dlopen(name) {
                found = Some((h, name.to_string()));
                break;
            }
        }
        let Some((h, path)) = found else {
            return Err(CuptiError::NotFound {
                tried: tried.join(", "),
            });
        };
        Ok(Cupti {
            path,
            get_version: need!(h, c"cuptiGetVersion"),
            get_result_string: need!(h, c"cuptiGetResultString"),
            register_callbacks: need!(h, c"cuptiActivityRegisterCallbacks"),
            activity_enable: need!(h, c"cuptiActivityEnable"),
            activity_disable: need!(h, c"cuptiActivityDisable"),
            flush_all: need!(h, c"cuptiActivityFlushAll"),
            get_next_record: need!(h, c"cuptiActivityGetNextRecord"),
            get_num_dropped: need!(h, c"cuptiActivityGetNumDroppedRecords"),
            register_timestamp: optional!(h, c"cuptiActivityRegisterTimestampCallback"),
            subscribe: need!(h, c"cuptiSubscribe"),
            enable_callback: need!(h, c"cuptiEnableCallback"),
            get_callback_name: need!(h, c"cuptiGetCallbackName"),
            set_thread_id_type: optional!(h, c"cuptiSetThreadIdType"),
            get_timestamp: need!(h, c"cuptiGetTimestamp"),
            enable_runtime_api: optional!(h, c"cuptiActivityEnableRuntimeApi"),
            enable_driver_api: optional!(h, c"cuptiActivityEnableDriverApi"),
            enable_hw_trace: optional!(h, c"cuptiActivityEnableHWTrace"),
            activity_set_attribute: optional!(h, c"cuptiActivitySetAttribute"),
            get_graph_node_id: optional!(h, c"cuptiGetGraphNodeId"),
            handle: h as usize,
            reported: Mutex::new(HashSet::new()),
        })
    }

    /// CUPTI's text for a result code.
    pub fn result_string(&self, r: CuptiResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuptiGetResultString writes a pointer to a static string.
        let rc = unsafe { (self.get_result_string)(r, &mut p) };
        if rc != SUCCESS || p.is_null() {
            return format!("CUPTI error {r}");
        }
        // SAFETY: CUPTI returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Ok for success; otherwise prints "streamscope: FUNC failed: ..." to
    /// stderr (once per function) and returns the message.
    pub fn check(&self, func: &'static str, r: CuptiResult) -> Result<(), CuptiError> {
        if r == SUCCESS {
            return Ok(());
        }
        let e = CuptiError::Call {
            func,
            why: self.result_string(r),
            code: r,
        };
        let first = self
            .reported
            .lock()
            .map(|mut s| s.insert(func))
            .unwrap_or(false);
        if first {
            crate::warn!("streamscope: {e}");
        }
        Err(e)
    }

    /// CUPTI's name of callback `cbid` in `domain` ("" if unknown).
    pub fn callback_name(&self, domain: u32, cbid: u32) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuptiGetCallbackName writes a pointer to a string CUPTI owns.
        let rc = unsafe { (self.get_callback_name)(domain, cbid, &mut p) };
        if rc != SUCCESS || p.is_null() {
            return String::new();
        }
        // SAFETY: NUL-terminated string owned by CUPTI.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    pub fn version(&self) -> Option<u32> {
        let mut v = 0u32;
        // SAFETY: writes one u32.
        let rc = unsafe { (self.get_version)(&mut v) };
        self.check("cuptiGetVersion", rc).ok().map(|_| v)
    }
}

impl PmApi {
    /// Looks the functions up in `cupti`'s library; Err names the first
    /// one missing (a CUPTI older than 12.6).
    pub fn load(cupti: &Cupti) -> Result<PmApi, CuptiError> {
        let h = cupti.handle as *mut c_void;
        Ok(PmApi {
            profiler_initialize: need!(h, c"cuptiProfilerInitialize"),
            profiler_deinitialize: need!(h, c"cuptiProfilerDeInitialize"),
            device_get_chip_name: need!(h, c"cuptiDeviceGetChipName"),
            get_counter_availability: need!(h, c"cuptiPmSamplingGetCounterAvailability"),
            host_initialize: need!(h, c"cuptiProfilerHostInitialize"),
            host_deinitialize: need!(h, c"cuptiProfilerHostDeinitialize"),
            host_config_add_metrics: need!(h, c"cuptiProfilerHostConfigAddMetrics"),
            host_get_config_image_size: need!(h, c"cuptiProfilerHostGetConfigImageSize"),
            host_get_config_image: need!(h, c"cuptiProfilerHostGetConfigImage"),
            host_get_num_of_passes: need!(h, c"cuptiProfilerHostGetNumOfPasses"),
            host_evaluate_to_gpu_values: need!(h, c"cuptiProfilerHostEvaluateToGpuValues"),
            enable: need!(h, c"cuptiPmSamplingEnable"),
            disable: need!(h, c"cuptiPmSamplingDisable"),
            set_config: need!(h, c"cuptiPmSamplingSetConfig"),
            start: need!(h, c"cuptiPmSamplingStart"),
            stop: need!(h, c"cuptiPmSamplingStop"),
            decode_data: need!(h, c"cuptiPmSamplingDecodeData"),
            get_counter_data_size: need!(h, c"cuptiPmSamplingGetCounterDataSize"),
            counter_data_image_initialize: need!(h, c"cuptiPmSamplingCounterDataImageInitialize"),
            get_counter_data_info: need!(h, c"cuptiPmSamplingGetCounterDataInfo"),
            counter_data_get_sample_info: need!(h, c"cuptiPmSamplingCounterDataGetSampleInfo"),
        })
    }
}
