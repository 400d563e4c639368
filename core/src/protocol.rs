//! The contract between `streamscope record` (cli), the collector injected
//! into the recorded program, and the analyses that read what it wrote.
//! Both sides use these names; neither spells them out again.

/// A host-thread range (`SliceKind::Range`) that the collector's Python
/// hooks write around every `torch.optim.Optimizer.step()` call. Each one
/// ends a training step of its rank; the analysis uses them when the trace
/// has no ProfilerStep and no NVTX step ranges.
pub const OPTIMIZER_STEP_RANGE: &str = "streamscope:optimizer.step";
