//! `streamscope record [-o DIR] [--capture-range ...] -- COMMAND...`: runs a
//! command with the CUPTI collector injected (CUDA_INJECTION64_PATH), so
//! every CUDA process it starts (torchrun workers included) writes one
//! trace into DIR; then prints where the traces are and a short summary.

use crate::error::ArgError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use anyhow::{bail, Context};

mod armed;
mod gpu_metrics;
mod nccl;
mod progress;
mod setup;
mod summary;
use gpu_metrics::parse_gpu_metrics;

/// CUPTI takes one client per process (CUDA 13.2 and earlier).
pub const PROFILER_NOTE: &str = "Note: a program that starts torch.profiler (or another CUPTI tool) itself gets no CUDA events from it while recorded: CUPTI allows one subscriber. The Python hooks say so when it happens.";

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = PROFILER_NOTE)]
pub struct RecordArgs {
    /// Directory for the traces (one file per CUDA process: rank-R.pftrace or pid-HOST-N.pftrace).
    #[arg(short = 'o', long = "output", default_value = "streamscope-trace")]
    pub output: PathBuf,
    /// Record into a directory that already holds traces. Nothing is
    /// deleted or overwritten (a name taken gets a -2, -3 suffix); needed
    /// when several nodes record into one shared directory.
    #[arg(long)]
    pub force: bool,
    /// Record only between cudaProfilerStart/Stop (`cudaProfilerApi`) or while an NVTX range named NAME is open (`nvtx:NAME`).
    #[arg(long, value_parser = parse_capture_range)]
    pub capture_range: Option<String>,
    /// Inject the collector but record nothing until a capture is
    /// triggered: `streamscope capture DIR`, `touch DIR/capture`, or
    /// SIGUSR2 to a process (those two capture --duration, default 5 s).
    /// Each capture is its own file per process: rank-R.capture-K.pftrace.
    #[arg(long, conflicts_with_all = ["capture_range", "delay"])]
    pub armed: bool,
    /// Seconds to wait, from this command's start (the same instant for
    /// every process it starts), before recording.
    #[arg(long, value_parser = parse_seconds)]
    pub delay: Option<f64>,
    /// Seconds to record (from the start of the capture).
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Do not put the Python hooks (a sitecustomize.py marking optimizer
    /// steps and noticing torch.profiler) on PYTHONPATH. Host syncs still
    /// get their Python line (the collector reads the frames itself).
    #[arg(long)]
    pub no_python_hooks: bool,
    /// Record every CUDA API call. By default state queries that enqueue
    /// no GPU work and never block (cudaGetDevice, cudaGetLastError,
    /// cuDevicePrimaryCtxGetState, ...: PyTorch makes thousands a step)
    /// are left out; the trace's metadata lists them.
    #[arg(long)]
    pub all_apis: bool,
    /// Do not read the Python line of host syncs (no API callback at all:
    /// the least the collector can cost; syncs are still found and timed).
    #[arg(long)]
    pub no_python_lines: bool,
    /// GPU memory of PyTorch jobs, from the caching allocator's own
    /// history (through the Python hooks): `on`, allocated and reserved
    /// memory per GPU over time and every block; `lines`, each block with
    /// the Python line that allocated it; `off`. Default: `off`, or what
    /// STREAMSCOPE_MEMORY says: `on` costs 0.2 to 4 % of an FSDP2 step on
    /// an H100 (the more host-bound the loop, the more), `lines` 1.3 to
    /// 8.6 % (docs/METRICS.md, "Memory"). Device memory (cudaMalloc) is
    /// recorded whatever this says.
    #[arg(long, value_enum, value_name = "MODE")]
    pub memory: Option<MemoryMode>,
    /// Do not load the collector as NCCL's profiler plugin (by default
    /// `NCCL_PROFILER_PLUGIN` names it, unless already set, and the trace
    /// gets every collective and point-to-point operation with its
    /// communicator, sequence number, size, algorithm and protocol).
    #[arg(long)]
    pub no_nccl_plugin: bool,
    /// Sample GPU metrics (CUPTI PM sampling: SM active, achieved
    /// occupancy, tensor pipes, DRAM, NVLink and PCIe throughput) on every
    /// GPU, in a sampler process beside the job; they land in each trace as
    /// counter tracks and in `report` as measured figures. LIST: `default`,
    /// metric keys or raw CUPTI metric names, comma-separated.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "default",
          value_name = "LIST", value_parser = parse_gpu_metrics)]
    pub gpu_metrics: Option<String>,
    /// GPU metrics sampling rate in Hz: 1000 to 100000, or 1k to 100k (default 10k).
    #[arg(long, value_name = "HZ", value_parser = streamscope_core::gpu_metrics::parse_hz, requires = "gpu_metrics")]
    pub gpu_metrics_hz: Option<u32>,
    /// Run the command even when no trace can be written (the collector
    /// library is not found) and exit with its code when it wrote none.
    /// Without it, `record` refuses to start untraced and exits non-zero
    /// when the run wrote no trace.
    #[arg(long)]
    pub allow_untraced: bool,
    /// The command to run, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// `record --memory`: what the Python hooks keep of the allocator's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryMode {
    /// Allocations and frees, no stacks.
    On,
    /// With the Python line of each allocation.
    Lines,
    /// No allocator history.
    Off,
}

impl MemoryMode {
    /// The value of STREAMSCOPE_MEMORY the hooks read.
    pub fn env_value(self) -> &'static str {
        match self {
            MemoryMode::On => "on",
            MemoryMode::Lines => "lines",
            MemoryMode::Off => "off",
        }
    }
}

/// `cudaProfilerApi` or `nvtx:NAME`.
pub fn parse_capture_range(s: &str) -> Result<String, ArgError> {
    match s {
        "cudaProfilerApi" => Ok(s.to_string()),
        _ if s.strip_prefix("nvtx:").is_some_and(|n| !n.is_empty()) => Ok(s.to_string()),
        _ => Err(ArgError::CaptureRange(s.to_string())),
    }
}

fn parse_seconds(s: &str) -> Result<f64, ArgError> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(ArgError::Seconds(s.to_string())),
    }
}

/// Exit code of the child as a shell reports it (128 + signal when killed).
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

fn is_ours(name: &str) -> bool {
    streamscope_core::protocol::is_collector_file(name)
}

/// This host as the collector writes it in file names.
fn host_tag() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    streamscope_core::protocol::host_tag(&host)
}

/// Refuses a directory holding traces of an earlier run (unless `force`):
/// they would be mixed into this run's summary, and deleting them could
/// delete another node's traces in a shared directory.
pub fn check_output_dir(dir: &Path, force: bool) -> anyhow::Result<()> {
    let old = files(dir, is_ours);
    if old.is_empty() || force {
        return Ok(());
    }
    let names: Vec<String> = old
        .iter()
        .take(3)
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    bail!(
        "{} already holds {} trace file(s) ({}{}) from an earlier run; choose another -o directory, \
         remove them, or pass --force to record alongside them (nothing is overwritten; \
         --force is also how several nodes share one directory)",
        dir.display(),
        old.len(),
        names.join(", "),
        if old.len() > 3 { ", ..." } else { "" }
    )
}

fn files(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// CLOCK_MONOTONIC now, in ns (the collector's clock).
pub fn monotonic_ns() -> i64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec)
}

/// Runs the command under the collector; returns its exit code.
pub fn run(args: &RecordArgs) -> anyhow::Result<i32> {
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no command given")
    };
    if args.armed && args.gpu_metrics.is_some() {
        bail!("--gpu-metrics does not work with --armed (GPU metrics are sampled for whole recordings only)");
    }
    let out = output_dir(&args.output, args.force)?;
    if !args.allow_untraced {
        if let Err(why) = setup::locate_collector() {
            bail!(
                "no trace can be written: {why}; the command was not run \
                 (--allow-untraced runs it untraced)"
            );
        }
    }
    let setup::Launch {
        mut cmd,
        collector,
        hooks_dir,
        sampler,
    } = setup::launch(args, program, rest, &out);
    let status = progress::run_child(&mut cmd, program, &out)?;
    if let Some(d) = hooks_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let code = exit_code(status);
    let (_, totals) = progress::progress_total(&out);
    if let Some(s) = sampler {
        s.stop(&out, &host_tag());
    }
    remove_host_files(&out);
    if args.armed {
        return Ok(armed::finish(&out, &host_tag(), code));
    }
    Ok(summary::print(
        &out,
        collector.is_ok(),
        code,
        totals.dropped,
        args.allow_untraced,
    ))
}

/// Creates the output folder and returns its canonical path, refusing one
/// with earlier traces unless `force` ([`check_output_dir`]).
fn output_dir(output: &Path, force: bool) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(output).with_context(|| format!("creating {}", output.display()))?;
    let out =
        std::fs::canonicalize(output).with_context(|| format!("resolving {}", output.display()))?;
    check_output_dir(&out, force)?;
    Ok(out)
}

/// Removes this host's progress and GPU lock files: only this host's, as
/// another node sharing the directory may still run.
fn remove_host_files(out: &Path) {
    let mine = format!(
        "{}{}-",
        streamscope_core::protocol::PROGRESS_PREFIX,
        host_tag()
    );
    let locks = gpu_metrics::lock_prefix(&host_tag());
    for p in files(out, |n| n.starts_with(&mine) || n.starts_with(&locks)) {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_range_values() {
        assert!(parse_capture_range("cudaProfilerApi").is_ok());
        assert_eq!(
            parse_capture_range("nvtx:train step").as_deref(),
            Ok("nvtx:train step")
        );
        assert!(parse_capture_range("nvtx:").is_err());
        assert!(parse_capture_range("profiler").is_err());
        assert_eq!(parse_seconds("-2"), Err(ArgError::Seconds("-2".into())));
        assert_eq!(parse_seconds("1.5"), Ok(1.5));
    }

    #[test]
    fn a_directory_with_old_traces_is_refused_without_force() {
        let dir = std::env::temp_dir().join(format!("ss-record-old-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("notes.txt"), b"").expect("write");
        assert!(
            check_output_dir(&dir, false).is_ok(),
            "other files are fine"
        );
        std::fs::write(dir.join("rank-0.pftrace"), b"old").expect("write");
        let e = check_output_dir(&dir, false).expect_err("refused");
        assert!(e.to_string().contains("rank-0.pftrace"), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
        assert!(check_output_dir(&dir, true).is_ok());
        assert_eq!(
            std::fs::read(dir.join("rank-0.pftrace")).expect("kept"),
            b"old"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn host_tags_are_file_name_safe() {
        let t = host_tag();
        assert!(!t.is_empty());
        assert!(t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
    }

    #[test]
    fn only_our_files_are_cleared() {
        assert!(is_ours("rank-0.pftrace"));
        assert!(is_ours("pid-node1-12.pftrace"));
        assert!(is_ours(".progress-12"));
        assert!(!is_ours("notes.txt"));
        assert!(!is_ours("my.pftrace"));
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    }
}
