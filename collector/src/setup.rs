//! CUPTI set-up steps of the session: which activity kinds and API
//! functions are recorded, and which API callbacks are subscribed.

use crate::error::CuptiError;
use std::ffi::c_void;

use streamscope_core::protocol;

use crate::capture::Trigger;
use crate::convert::normalize_api_name;
use crate::cupti_api::*;
use crate::records::kind;

/// Metadata of the trace: (key, value) pairs.
type Meta = Vec<(String, String)>;

/// Runtime API functions whose Python caller is recorded (host syncs).
const SYNC_APIS: &[&str] = protocol::HOST_SYNC_APIS;

/// Enables kernels (required) and the other activity kinds (each
/// optional, minus `STREAMSCOPE_ACTIVITY_OFF`), then leaves the state
/// queries out; says what in `meta`. Returns the kinds enabled (for
/// armed mode's `cuptiActivityDisable` at the end of a capture).
pub(crate) fn enable_activity(
    cupti: &Cupti,
    env: &dyn Fn(&str) -> Option<String>,
    meta: &mut Meta,
) -> Result<Vec<u32>, CuptiError> {
    // SAFETY: plain enum argument.
    let rc = unsafe { (cupti.activity_enable)(kind::CONCURRENT_KERNEL) };
    cupti.check("cuptiActivityEnable(CONCURRENT_KERNEL)", rc)?;
    let mut kinds = vec!["kernel"];
    let mut enabled = vec![kind::CONCURRENT_KERNEL];
    let off_text = env(protocol::env::ACTIVITY_OFF).unwrap_or_default();
    let off: Vec<&str> = off_text
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .collect();
    for (k, func, label) in [
        (kind::MEMCPY, "cuptiActivityEnable(MEMCPY)", "memcpy"),
        (kind::MEMSET, "cuptiActivityEnable(MEMSET)", "memset"),
        (
            kind::SYNCHRONIZATION,
            "cuptiActivityEnable(SYNCHRONIZATION)",
            "synchronization",
        ),
        (kind::RUNTIME, "cuptiActivityEnable(RUNTIME)", "runtime"),
        (kind::DRIVER, "cuptiActivityEnable(DRIVER)", "driver"),
        (kind::OVERHEAD, "cuptiActivityEnable(OVERHEAD)", "overhead"),
        (kind::MARKER, "cuptiActivityEnable(MARKER)", "nvtx"),
        // How each stream was created (a few records per context): which
        // one is the legacy default stream and which synchronize with it.
        (kind::STREAM, "cuptiActivityEnable(STREAM)", "stream"),
        // Device memory allocated and released (cudaMalloc, cuMemAlloc,
        // cudaFree): a few records per allocator segment.
        (kind::MEMORY2, "cuptiActivityEnable(MEMORY2)", "memory"),
    ] {
        if off.contains(&label) {
            continue;
        }
        // SAFETY: plain enum argument.
        if enable(cupti, func, unsafe { (cupti.activity_enable)(k) }) {
            kinds.push(label);
            enabled.push(k);
        }
    }
    if !off.is_empty() {
        meta.push((
            "activity_off".into(),
            format!("{} (by {})", off.join(","), protocol::env::ACTIVITY_OFF),
        ));
    }
    meta.push(("activity".into(), kinds.join(",")));
    let all_apis = env(protocol::env::ALL_APIS).is_some_and(|v| v.trim() == "1");
    meta.push((
        "api_filter".into(),
        skip_query_apis(
            cupti,
            all_apis,
            kinds.contains(&"runtime"),
            kinds.contains(&"driver"),
        ),
    ));

    Ok(enabled)
}

/// Subscribes the API callback: sync entries (unless
/// `STREAMSCOPE_PYTHON_LINES=0`) and the trigger's functions. Returns the
/// sync cbids and the profiler start/stop (domain, cbid) pairs.
#[allow(clippy::type_complexity)]
pub(crate) fn subscribe(
    cupti: &Cupti,
    trigger: &Trigger,
    env: &dyn Fn(&str) -> Option<String>,
    meta: &mut Meta,
) -> (Vec<u32>, Vec<(u32, u32)>, Vec<(u32, u32)>) {
    let mut subscriber: *mut c_void = std::ptr::null_mut();
    // SAFETY: subscribes a callback valid for the life of the process.
    let rc = unsafe {
        (cupti.subscribe)(
            &mut subscriber,
            Some(crate::callbacks::api_callback),
            std::ptr::null_mut(),
        )
    };
    let subscribed = cupti.check("cuptiSubscribe", rc).is_ok();
    let (mut sync_cbids, mut profiler_start, mut profiler_stop) =
        (Vec::new(), Vec::new(), Vec::new());
    if subscribed {
        let on = |domain: u32, cbid: u32| {
            // SAFETY: a subscriber handle CUPTI gave us and a valid cbid.
            let rc = unsafe { (cupti.enable_callback)(1, subscriber, domain, cbid) };
            cupti.check("cuptiEnableCallback", rc).is_ok()
        };
        if env(protocol::env::PYTHON_LINES).is_some_and(|v| v.trim() == "0") {
            meta.push((
                "python_callsites".into(),
                format!("off ({}=0)", protocol::env::PYTHON_LINES),
            ));
        } else {
            sync_cbids = cbids_named(cupti, CB_DOMAIN_RUNTIME_API, SYNC_APIS);
            sync_cbids.retain(|&c| on(CB_DOMAIN_RUNTIME_API, c));
            meta.push((
                "python_callsites".into(),
                format!("{} runtime functions watched", sync_cbids.len()),
            ));
            // The line that captured each CUDA graph node (read once, when
            // the node is made; replays cost nothing).
            let graph_lines = cupti.get_graph_node_id.is_some()
                && on(CB_DOMAIN_RESOURCE, CBID_GRAPHNODE_CREATED)
                && on(CB_DOMAIN_RESOURCE, CBID_GRAPHNODE_CLONED);
            meta.push((
                "graph_node_lines".into(),
                if graph_lines {
                    "on"
                } else {
                    "off (CUPTI refused the graph-node callbacks)"
                }
                .into(),
            ));
        }
        match trigger {
            Trigger::ProfilerApi => {
                for (domain, start, stop) in [
                    (
                        CB_DOMAIN_RUNTIME_API,
                        "cudaProfilerStart",
                        "cudaProfilerStop",
                    ),
                    (CB_DOMAIN_DRIVER_API, "cuProfilerStart", "cuProfilerStop"),
                ] {
                    profiler_start.extend(
                        cbids_named(cupti, domain, &[start])
                            .into_iter()
                            .filter(|&c| on(domain, c))
                            .map(|c| (domain, c)),
                    );
                    profiler_stop.extend(
                        cbids_named(cupti, domain, &[stop])
                            .into_iter()
                            .filter(|&c| on(domain, c))
                            .map(|c| (domain, c)),
                    );
                }
            }
            Trigger::Nvtx(_) => {
                for cbid in [8, 10, 11, 33, 34] {
                    on(CB_DOMAIN_NVTX, cbid);
                }
            }
            Trigger::Always => {}
        }
    } else {
        meta.push((
            "python_callsites".into(),
            "off (cuptiSubscribe failed)".into(),
        ));
    }
    (sync_cbids, profiler_start, profiler_stop)
}

/// Armed mode: the sync functions whose Python line is read during a
/// capture (looked up only: nothing is subscribed while armed; see
/// [`armed_callbacks`]); none with `STREAMSCOPE_PYTHON_LINES=0`.
pub(crate) fn armed_sync_cbids(
    cupti: &Cupti,
    env: &dyn Fn(&str) -> Option<String>,
    meta: &mut Meta,
) -> Vec<u32> {
    if env(protocol::env::PYTHON_LINES).is_some_and(|v| v.trim() == "0") {
        meta.push((
            "python_callsites".into(),
            format!("off ({}=0)", protocol::env::PYTHON_LINES),
        ));
        return Vec::new();
    }
    let cbids = cbids_named(cupti, CB_DOMAIN_RUNTIME_API, SYNC_APIS);
    meta.push((
        "python_callsites".into(),
        format!(
            "{} runtime functions watched during captures only",
            cbids.len()
        ),
    ));
    cbids
}

/// The API callback's subscriber in armed mode (0: refused), made at the
/// first capture.
static ARMED_SUBSCRIBER: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Armed mode: switches the sync callbacks on (a capture starts;
/// subscribing the first time) or off (it ends). Returns how many were
/// switched.
pub(crate) fn armed_callbacks(cupti: &Cupti, cbids: &[u32], on: bool) -> usize {
    if cbids.is_empty() {
        return 0;
    }
    let sub = *ARMED_SUBSCRIBER.get_or_init(|| {
        let mut subscriber: *mut c_void = std::ptr::null_mut();
        // SAFETY: subscribes a callback valid for the life of the process.
        let rc = unsafe {
            (cupti.subscribe)(
                &mut subscriber,
                Some(crate::callbacks::api_callback),
                std::ptr::null_mut(),
            )
        };
        if cupti.check("cuptiSubscribe", rc).is_ok() {
            subscriber as usize
        } else {
            0
        }
    });
    if sub == 0 {
        return 0;
    }
    cbids
        .iter()
        .filter(|&&c| {
            // SAFETY: the subscriber handle CUPTI gave us and a cbid it named.
            let rc = unsafe {
                (cupti.enable_callback)(on as u32, sub as *mut c_void, CB_DOMAIN_RUNTIME_API, c)
            };
            cupti.check("cuptiEnableCallback", rc).is_ok()
        })
        .count()
}

/// The cbids of [`crate::callbacks::COPY_APIS`] among `sync_cbids`.
pub(crate) fn copy_cbids(cupti: &Cupti, sync_cbids: &[u32]) -> Vec<u32> {
    cbids_named(cupti, CB_DOMAIN_RUNTIME_API, crate::callbacks::COPY_APIS)
        .into_iter()
        .filter(|c| sync_cbids.contains(c))
        .collect()
}

pub(crate) fn cbids_named(cupti: &Cupti, domain: u32, names: &[&str]) -> Vec<u32> {
    (1..2048)
        .filter(|&id| {
            let n = cupti.callback_name(domain, id);
            !n.is_empty() && names.contains(&normalize_api_name(&n))
        })
        .collect()
}

/// Stops the runtime and driver records of [`protocol::QUERY_APIS`] (state
/// queries PyTorch makes thousands of times a step; see there), unless
/// `all_apis`. Returns what the trace's metadata says about it.
fn skip_query_apis(cupti: &Cupti, all_apis: bool, runtime: bool, driver: bool) -> String {
    if all_apis {
        return "none: every CUDA API call recorded".into();
    }
    let mut skipped: Vec<String> = Vec::new();
    for (on, domain, func, label) in [
        (
            runtime,
            CB_DOMAIN_RUNTIME_API,
            cupti.enable_runtime_api,
            "cuptiActivityEnableRuntimeApi",
        ),
        (
            driver,
            CB_DOMAIN_DRIVER_API,
            cupti.enable_driver_api,
            "cuptiActivityEnableDriverApi",
        ),
    ] {
        let Some(func) = func.filter(|_| on) else {
            continue;
        };
        for cbid in cbids_named(cupti, domain, protocol::QUERY_APIS) {
            // SAFETY: a cbid CUPTI named in this domain; plain arguments.
            let rc = unsafe { func(cbid, 0) };
            if cupti.check(label, rc).is_ok() {
                skipped.push(normalize_api_name(&cupti.callback_name(domain, cbid)).to_string());
            }
        }
    }
    if skipped.is_empty() {
        return "none (this CUPTI cannot leave out single API functions)".into();
    }
    skipped.sort();
    skipped.dedup();
    format!(
        "not recorded (state queries; record --all-apis keeps them): {}",
        skipped.join(", ")
    )
}

fn enable(cupti: &Cupti, func: &'static str, rc: CuptiResult) -> bool {
    cupti.check(func, rc).is_ok()
}
