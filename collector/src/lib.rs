//! streamscope-collector: a CUPTI collector loaded into any CUDA process
//! through `CUDA_INJECTION64_PATH` (set by `streamscope record`).
//!
//! The CUDA driver calls [`InitializeInjection`] during `cuInit`; it opens
//! libcupti, enables activity records (kernels, copies, memsets,
//! synchronizations, runtime and driver API calls, overhead, NVTX), puts
//! CUPTI's timestamps on CLOCK_MONOTONIC, subscribes the callbacks that find
//! the Python line of host syncs and drive the capture window, and starts
//! the writer thread that streams `rank-R.pftrace` / `pid-HOST-N.pftrace` into
//! `$STREAMSCOPE_OUT`. The library is also NCCL's profiler plugin
//! ([`nccl_plugin`], through `NCCL_PROFILER_PLUGIN`): every collective and
//! point-to-point operation with its communicator and sizes. In armed mode
//! (`STREAMSCOPE_ARMED=1`, [`armed`]) nothing is enabled until a capture is
//! triggered (a signal, `touch DIR/capture`, or the [`control`] socket), and
//! each capture is its own `rank-R.capture-K.pftrace`. See README.md for
//! how each piece works.
//!
//! This is the only crate with FFI `unsafe`; every entry point CUPTI, the
//! driver, libc or a signal can call catches panics, and any failure leaves
//! the program running untraced with one line on stderr.
// CUPTI, CUDA and libc FFI: every unsafe block carries a SAFETY comment (the workspace denies unsafe code elsewhere).
#![allow(unsafe_code)]

/// One line on stderr; never panics (a closed stderr is ignored).
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod armed;
mod buffer_pool;
mod callbacks;
pub mod capture;
pub mod control;
pub mod convert;
pub mod cupti_api;
pub mod driver;
pub mod error;
pub mod flush_sync;
pub mod marker_names;
pub mod memory;
pub mod native_caller;
pub mod nccl_plugin;
pub mod pm_sampling;
pub mod process_info;
pub mod pyframes;
pub mod python;
pub mod queue;
pub mod records;
pub mod session;
mod setup;
pub mod signals;
pub mod step_probe;

use std::sync::atomic::{AtomicBool, Ordering};

static STARTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(s) = session::session() {
            s.flush_and_wait(true, session::EXIT_WAIT);
        }
    });
}

/// Entry point the CUDA driver calls for `CUDA_INJECTION64_PATH`. Returns 1
/// (initialized) even when tracing could not start: the program must run
/// on, untraced.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> std::ffi::c_int {
    if STARTED.swap(true, Ordering::SeqCst) {
        return 1;
    }
    let r = std::panic::catch_unwind(session::start);
    match r {
        Ok(Ok(())) => {
            // SAFETY: registers a plain extern "C" function for exit time.
            if unsafe { libc::atexit(on_exit) } != 0 {
                crate::warn!("streamscope: atexit failed; the end of the run may be lost");
            }
            if let Err(e) = signals::install() {
                crate::warn!("streamscope: {e}; a signal may lose the last second");
            }
        }
        Ok(Err(e)) => crate::warn!("streamscope: CUPTI unavailable ({e}); running untraced"),
        Err(_) => crate::warn!(
            "streamscope: CUPTI unavailable (collector panicked during start); running untraced"
        ),
    }
    1
}

#[cfg(test)]
mod convert_fixtures;
#[cfg(test)]
mod convert_tests;
