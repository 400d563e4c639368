//! Generated traces for tests and benchmarks.
