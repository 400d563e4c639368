//! `streamscope._native`: the CLI's `report`, `compare` and `whatif` as
//! JSON strings, through streamscope-core's `analysis::job` (the functions
//! the CLI calls), with the GIL released while traces load and analyze.
//! The Python package (python/streamscope/) parses the JSON and wraps it.

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use streamscope_core::analysis::whatif::{render as whatif_render, Changes, WhatIfOptions};
use streamscope_core::analysis::{compare, job, render};
use streamscope_core::load::{load_paths_keeping, KeepArgs};

create_exception!(
    streamscope,
    StreamscopeError,
    PyException,
    "A trace that cannot be read or analyzed; the message is the CLI's error line."
);

/// The CLI's one-line message of `e`, as a Python exception.
fn py_err(e: anyhow::Error) -> PyErr {
    StreamscopeError::new_err(job::error_line(&e))
}

/// `report --format json PATHS...` with the flags given (the JSON without
/// the CLI's final newline).
#[pyfunction]
#[pyo3(signature = (paths, merge=false, rank=None, steps=None, sync_idle_threshold_us=50.0, kernel_wait_us=30.0))]
fn report_json(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    merge: bool,
    rank: Option<u32>,
    steps: Option<(i64, i64)>,
    sync_idle_threshold_us: f64,
    kernel_wait_us: f64,
) -> PyResult<String> {
    py.detach(|| {
        let opts = job::options(rank, steps, sync_idle_threshold_us, kernel_wait_us)?;
        let report = job::report(&paths, &opts, merge, &|_, _| {})?;
        Ok(render::json(&report))
    })
    .map_err(py_err)
}

/// `compare --format json CONTROL TEST [--rank R]`.
#[pyfunction]
#[pyo3(signature = (control, test, rank=None))]
fn compare_json(
    py: Python<'_>,
    control: PathBuf,
    test: PathBuf,
    rank: Option<u32>,
) -> PyResult<String> {
    py.detach(|| {
        let c = job::compare(&control, &test, rank)?;
        Ok(compare::json(&c))
    })
    .map_err(py_err)
}

/// A flag's value: a positive finite number (the CLI's check).
fn positive(flag: &str, x: Option<f64>) -> anyhow::Result<Option<f64>> {
    match x {
        Some(v) if !(v.is_finite() && v > 0.0) => {
            anyhow::bail!("{flag}: expected a positive number, got {v}")
        }
        _ => Ok(x),
    }
}

/// `whatif --format json PATHS... [--comm-scale X | --link-bw GBPS]
/// [--compute-scale X] [--drop-syncs P]... [--launch-queue N]
/// [--legacy-stream-nonblocking] [--prefetch-deeper N]`.
#[pyfunction]
#[pyo3(signature = (paths, comm_scale=None, link_bw=None, compute_scale=None, drop_syncs=Vec::new(), launch_queue=None, legacy_stream_nonblocking=false, prefetch_deeper=None))]
#[allow(clippy::too_many_arguments)]
fn whatif_json(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    comm_scale: Option<f64>,
    link_bw: Option<f64>,
    compute_scale: Option<f64>,
    drop_syncs: Vec<String>,
    launch_queue: Option<u32>,
    legacy_stream_nonblocking: bool,
    prefetch_deeper: Option<u32>,
) -> PyResult<String> {
    py.detach(|| {
        if comm_scale.is_some() && link_bw.is_some() {
            anyhow::bail!("--comm-scale and --link-bw cannot be used together");
        }
        if launch_queue == Some(0) {
            anyhow::bail!("--launch-queue: expected at least 1 launch, got 0");
        }
        if let Some(n) = prefetch_deeper.filter(|n| !(1..=16).contains(n)) {
            anyhow::bail!("--prefetch-deeper: expected 1 to 16 positions, got {n}");
        }
        let opts = WhatIfOptions {
            changes: Changes {
                comm_scale: positive("--comm-scale", comm_scale)?,
                link_bw_gbps: positive("--link-bw", link_bw)?,
                compute_scale: positive("--compute-scale", compute_scale)?,
                drop_syncs: false,
                unblock_legacy: legacy_stream_nonblocking,
                prefetch_deeper,
            },
            drop_syncs,
            launch_queue,
        };
        // Only analyzed: a Kineto file's arguments no analysis reads are skipped.
        let trace = load_paths_keeping(&paths, KeepArgs::Analysis)?;
        let r = job::whatif(&paths, &trace, &opts)?;
        Ok(whatif_render::json(&r))
    })
    .map_err(py_err)
}

/// `report --steps A..B`: "A..B", "A..=B" or "A" as (A, B).
#[pyfunction]
fn parse_steps(s: &str) -> PyResult<(i64, i64)> {
    job::parse_steps(s).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("StreamscopeError", m.py().get_type::<StreamscopeError>())?;
    m.add_function(wrap_pyfunction!(report_json, m)?)?;
    m.add_function(wrap_pyfunction!(compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(whatif_json, m)?)?;
    m.add_function(wrap_pyfunction!(parse_steps, m)?)?;
    Ok(())
}
