//! Side panels over the loaded trace and its analysis.

pub mod compare;
pub mod details;
pub mod findings;
pub mod overlap;
pub mod search;
pub mod stragglers;
pub mod syncs;
pub mod top_kernels;
pub mod whatif;
