//! The CUPTI API callback (runs on the application's threads, inside its
//! CUDA calls): the Python line of a host sync, read at the call's entry,
//! and the capture window's cudaProfilerStart/Stop and NVTX triggers.

use std::ffi::c_void;

use crate::capture::Trigger;
use crate::cupti_api::*;
use crate::session::{session, Session};
use crate::{process_info, python, records};

thread_local! {
    static NVTX_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static NVTX_OPEN_AT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The message of an `nvtxEventAttributes_t` when it is ASCII.
///
/// # Safety
/// `attr` is null or points at an nvtxEventAttributes_t (v2 layout).
unsafe fn attr_message<'a>(attr: *const u8) -> Option<&'a std::ffi::CStr> {
    if attr.is_null() {
        return None;
    }
    // SAFETY: messageType at offset 32 and message at 40 in the v2 layout.
    unsafe {
        let mtype = std::ptr::read_unaligned(attr.add(32) as *const i32);
        let msg = std::ptr::read_unaligned(attr.add(40) as *const *const std::ffi::c_char);
        (mtype == 1 && !msg.is_null()).then(|| std::ffi::CStr::from_ptr(msg))
    }
}

/// Whether a `cudaMemcpy`/`cudaMemcpyAsync` call (params `dst, src, count,
/// kind`) copies device to device: such a copy never blocks the host, so
/// its Python line is not worth reading (FSDP2 makes ~100 a step).
///
/// # Safety
/// `params` is null or points at the params struct of one of
/// [`COPY_APIS`].
unsafe fn is_device_to_device(params: *const c_void) -> bool {
    const CUDA_MEMCPY_DEVICE_TO_DEVICE: i32 = 3;
    // SAFETY: `kind` follows three pointer-sized fields in those structs.
    !params.is_null()
        && unsafe { std::ptr::read_unaligned((params as *const u8).add(24) as *const i32) }
            == CUDA_MEMCPY_DEVICE_TO_DEVICE
}

/// Runtime copies whose params begin `dst, src, count, kind`.
pub(crate) const COPY_APIS: &[&str] = &[
    "cudaMemcpy",
    "cudaMemcpy_ptds",
    "cudaMemcpyAsync",
    "cudaMemcpyAsync_ptsz",
];

/// CUPTI's API callback: the Python line at a host sync's entry, the
/// capture window's profiler-API and NVTX triggers.
pub(crate) unsafe extern "C" fn api_callback(
    _user: *mut c_void,
    domain: u32,
    cbid: u32,
    data: *const c_void,
) {
    let _ = std::panic::catch_unwind(|| {
        let Some(s) = session() else { return };
        if data.is_null() || s.forked() {
            return;
        }
        if domain == CB_DOMAIN_RESOURCE {
            // SAFETY: for the resource domain CUPTI passes a CUpti_ResourceData.
            let d = unsafe { std::ptr::read_unaligned(data as *const records::RawResourceData) };
            // SAFETY: for the graph-node callbacks its descriptor is a CUpti_GraphData.
            unsafe { s.graph_node(cbid, d.resource_descriptor) };
            return;
        }
        if domain == CB_DOMAIN_NVTX {
            // SAFETY: for the NVTX domain CUPTI passes a CUpti_NvtxData.
            let d = unsafe { std::ptr::read_unaligned(data as *const records::RawNvtxData) };
            // SAFETY: the params struct of each function, per nvToolsExt's
            // callback ABI (pointers first).
            unsafe { s.nvtx(cbid, d.function_params as *const u8) };
            return;
        }
        // SAFETY: for API domains CUPTI passes a CUpti_CallbackData.
        let d = unsafe { std::ptr::read_unaligned(data as *const records::RawCallbackData) };
        if d.callback_site == API_ENTER {
            if domain == CB_DOMAIN_RUNTIME_API
                && s.sync_cbids.contains(&cbid)
                // SAFETY: the params of a runtime function CUPTI is calling.
                && !(s.copy_cbids.contains(&cbid) && unsafe { is_device_to_device(d.function_params) })
            {
                if let Some(loc) =
                    crate::pyframes::current_location().or_else(python::current_location)
                {
                    s.python.insert(d.correlation_id, loc);
                } else if s.native_callers {
                    // No Python line: the C/C++ caller, symbolized later.
                    if let Some(ip) = crate::native_caller::capture() {
                        s.python.insert_native(d.correlation_id, ip);
                    }
                }
            }
            if s.profiler_stop.contains(&(domain, cbid)) {
                s.window.close(process_info::monotonic_ns());
            }
        } else if d.callback_site == API_EXIT && s.profiler_start.contains(&(domain, cbid)) {
            s.window.open(process_info::monotonic_ns());
        }
    });
}

impl Session {
    /// A CUDA graph node was made or cloned: the node made inside a launch
    /// call on a capturing stream takes the Python line of that call; a
    /// clone (an executable graph's node) takes its original's line.
    ///
    /// # Safety
    /// `graph` is null or points at a `CUpti_GraphData`.
    unsafe fn graph_node(&self, cbid: u32, graph: *const c_void) {
        let Some(node_id) = self.cupti.get_graph_node_id else {
            return;
        };
        if graph.is_null() {
            return;
        }
        // SAFETY: the caller's contract.
        let g = unsafe { std::ptr::read_unaligned(graph as *const records::RawGraphData) };
        let id_of = |node: *mut c_void| {
            let mut id = 0u64;
            // SAFETY: a live node handle CUPTI passed us; writes one u64.
            let rc = unsafe { node_id(node, &mut id) };
            (rc == SUCCESS && !node.is_null()).then_some(id)
        };
        match cbid {
            CBID_GRAPHNODE_CREATED => {
                let Some(id) = id_of(g.node) else { return };
                if let Some(loc) =
                    crate::pyframes::current_location().or_else(python::current_location)
                {
                    self.python.node_created(id, loc);
                }
            }
            CBID_GRAPHNODE_CLONED => {
                if let (Some(orig), Some(copy)) = (id_of(g.original_node), id_of(g.node)) {
                    self.python.node_cloned(orig, copy);
                }
            }
            _ => {}
        }
    }

    /// NVTX push/pop tracking for `--capture-range nvtx:NAME`.
    ///
    /// # Safety
    /// `params` is null or the params struct of NVTX function `cbid`.
    unsafe fn nvtx(&self, cbid: u32, params: *const u8) {
        let Trigger::Nvtx(target) = &self.window.spec().trigger else {
            return;
        };
        // cbids: 8 RangePushA, 10 RangePushEx, 11 RangePop, 33 DomainRangePushEx, 34 DomainRangePop.
        let name: Option<&std::ffi::CStr> = match cbid {
            // SAFETY: the first field is `const char* message` / the attributes pointer.
            8 if !params.is_null() => unsafe {
                let m = std::ptr::read_unaligned(params as *const *const std::ffi::c_char);
                (!m.is_null()).then(|| std::ffi::CStr::from_ptr(m))
            },
            // SAFETY: nvtxRangePushEx_params { const nvtxEventAttributes_t* }.
            10 if !params.is_null() => unsafe {
                attr_message(std::ptr::read_unaligned(params as *const *const u8))
            },
            // SAFETY: nvtxDomainRangePushEx_params { domain, const nvtxEventAttributes_t* }.
            33 if !params.is_null() => unsafe {
                attr_message(std::ptr::read_unaligned(params.add(8) as *const *const u8))
            },
            11 | 34 => {
                let depth = NVTX_DEPTH.get();
                if depth > 0 && NVTX_OPEN_AT.get() == depth {
                    NVTX_OPEN_AT.set(0);
                    self.window.close(process_info::monotonic_ns());
                }
                NVTX_DEPTH.set(depth.saturating_sub(1));
                return;
            }
            _ => return,
        };
        let depth = NVTX_DEPTH.get() + 1;
        NVTX_DEPTH.set(depth);
        if NVTX_OPEN_AT.get() == 0 && name.is_some_and(|n| n.to_bytes() == target.as_bytes()) {
            NVTX_OPEN_AT.set(depth);
            self.window.open(process_info::monotonic_ns());
        }
    }
}
