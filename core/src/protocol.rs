//! The contract between `streamscope record` (cli), the collector injected
//! into the recorded program, and the analyses that read what it wrote.
//! Both sides use these names; neither spells them out again.

/// A host-thread range (`SliceKind::Range`) that the collector's Python
/// hooks write around every `torch.optim.Optimizer.step()` call. Each one
/// ends a training step of its rank; the analysis uses them when the trace
/// has no ProfilerStep and no NVTX step ranges.
pub const OPTIMIZER_STEP_RANGE: &str = "streamscope:optimizer.step";

/// Process metadata key: torch.profiler (Kineto) was started inside the
/// recorded process; its value says when and that its CUDA events are
/// missing (CUPTI takes one subscriber). `streamscope record` repeats it.
pub const TORCH_PROFILER_KEY: &str = "torch_profiler";

/// Process metadata key: optimizer steps the hooks noted but could not keep.
pub const OPTIMIZER_STEPS_LOST_KEY: &str = "optimizer_steps_lost";

/// Environment `streamscope record` sets for the collector.
pub mod env {
    /// Output directory.
    pub const OUT: &str = "STREAMSCOPE_OUT";
    /// `cudaProfilerApi` or `nvtx:NAME`.
    pub const CAPTURE_RANGE: &str = "STREAMSCOPE_CAPTURE_RANGE";
    /// Seconds from record's start before the capture opens.
    pub const DELAY_S: &str = "STREAMSCOPE_DELAY_S";
    /// Seconds the capture lasts.
    pub const DURATION_S: &str = "STREAMSCOPE_DURATION_S";
    /// CLOCK_MONOTONIC ns at `streamscope record`'s start: the origin of
    /// --delay/--duration for every process it starts (one node, one
    /// clock), so all ranks capture the same wall-clock interval.
    pub const START_MONOTONIC_NS: &str = "STREAMSCOPE_START_MONOTONIC_NS";
    /// libcupti to open.
    pub const CUPTI_LIB: &str = "STREAMSCOPE_CUPTI_LIB";
    /// The collector library the Python hooks talk to.
    pub const PY_HOOK_LIB: &str = "STREAMSCOPE_PY_HOOK_LIB";
    /// `0` turns the Python hooks off.
    pub const PYTHON_HOOKS: &str = "STREAMSCOPE_PYTHON_HOOKS";
}

/// Runtime API functions at whose entry the collector reads the caller's
/// Python line (host syncs and the copies that may block).
pub const HOST_SYNC_APIS: &[&str] = &[
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaStreamSynchronize_ptsz",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy_ptds",
    "cudaMemcpyAsync",
    "cudaMemcpyAsync_ptsz",
    "cudaMemcpy2D",
    "cudaMemcpy2DAsync",
    "cudaMemcpyFromSymbol",
    "cudaMemcpyDtoH",
];
