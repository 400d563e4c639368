//! `streamscope record [-o DIR] [--capture-range ...] -- COMMAND...`: runs a
//! command with the CUPTI collector injected (CUDA_INJECTION64_PATH), so
//! every CUDA process it starts (torchrun workers included) writes one
//! trace into DIR; then prints where the traces are and a short summary.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use streamscope_core::analysis::{analyze, AnalysisOptions, Report};
use streamscope_core::load::load_paths;

/// Environment the collector reads (core::protocol::env, one definition).
use streamscope_core::protocol::env::{
    CAPTURE_RANGE as ENV_RANGE, CUPTI_LIB as ENV_CUPTI, DELAY_S as ENV_DELAY,
    DURATION_S as ENV_DURATION, OUT as ENV_OUT, PY_HOOK_LIB as ENV_PY_HOOK_LIB,
    START_MONOTONIC_NS as ENV_START,
};
mod armed;
mod gpu_metrics;
mod nccl;
use gpu_metrics::parse_gpu_metrics;

const ENV_COLLECTOR: &str = "STREAMSCOPE_COLLECTOR";
const COLLECTOR_FILE: &str = "libstreamscope_collector.so";
/// Python hooks: optimizer-step markers, the torch.profiler notice and the
/// frame reader's self-check (collector/python/sitecustomize.py).
const PYTHON_HOOKS: &str = include_str!("../../collector/python/sitecustomize.py");

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
    /// Do not load the collector as NCCL's profiler plugin (by default
    /// `NCCL_PROFILER_PLUGIN` names it, unless already set, and the trace
    /// gets every collective and point-to-point operation with its
    /// communicator, sequence number, size, algorithm and protocol).
    #[arg(long)]
    pub no_nccl_plugin: bool,
    /// Experimental, off the help: sample GPU metrics (CUPTI PM sampling)
    /// on every GPU, in a sampler process beside the job. Refused unless
    /// STREAMSCOPE_EXPERIMENTAL_GPU_METRICS=1: on the H200 (CUDA 13.0,
    /// driver 580) CUPTI's decode fails or faults in it (docs/GPU.md).
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "default",
          value_name = "LIST", value_parser = parse_gpu_metrics)]
    pub gpu_metrics: Option<String>,
    /// GPU metrics sampling rate in Hz: 1000 to 100000, or 1k to 100k (default 10k).
    #[arg(long, hide = true, value_name = "HZ", value_parser = streamscope_core::gpu_metrics::parse_hz, requires = "gpu_metrics")]
    pub gpu_metrics_hz: Option<u32>,
    /// The command to run, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// `cudaProfilerApi` or `nvtx:NAME`.
pub fn parse_capture_range(s: &str) -> Result<String, String> {
    match s {
        "cudaProfilerApi" => Ok(s.to_string()),
        _ if s.strip_prefix("nvtx:").is_some_and(|n| !n.is_empty()) => Ok(s.to_string()),
        _ => Err(format!("expected cudaProfilerApi or nvtx:NAME, got {s:?}")),
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a number of seconds >= 0, got {s:?}")),
    }
}

/// The collector library: $STREAMSCOPE_COLLECTOR, else next to this executable.
pub fn find_collector(env_value: Option<PathBuf>, exe: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = env_value {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{ENV_COLLECTOR}={} does not exist", p.display()))
        };
    }
    let dir = exe
        .and_then(Path::parent)
        .ok_or("cannot locate the streamscope executable")?;
    let candidates = [
        dir.join(COLLECTOR_FILE),
        dir.join("../lib").join(COLLECTOR_FILE),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| format!("{COLLECTOR_FILE} not found next to {} (build it with `cargo build -p streamscope-collector`, or set {ENV_COLLECTOR})", dir.display()))
}

/// libcupti for NVTX injection: the first `libcupti.so*` in `dirs`.
pub fn find_cupti(dirs: &[PathBuf]) -> Option<PathBuf> {
    const NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so", "libcupti.so.12"];
    for d in dirs {
        for n in NAMES {
            let p = d.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Where CUPTI usually is: CUDA_HOME/CUDA_PATH, LD_LIBRARY_PATH, /usr/local/cuda*.
fn cupti_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        let mut more: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("cuda-"))
            })
            .collect();
        more.sort();
        more.reverse();
        roots.extend(more);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for r in roots {
        dirs.push(r.join("extras/CUPTI/lib64"));
        dirs.push(r.join("targets/x86_64-linux/lib"));
        dirs.push(r.join("lib64"));
    }
    dirs
}

/// A random 64-bit value for a folder name (/dev/urandom, else std's
/// randomly seeded hasher).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Creates a fresh folder only we can use, like mkdtemp: a random name,
/// mode 0700, and never an existing path (another user's folder or a
/// symlink planted in /tmp would make Python run their code).
pub fn private_temp_dir(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for _ in 0..100 {
        let dir = base.join(format!("{prefix}{:016x}", random_u64()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

/// Writes `text` to a file that must not exist yet.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// Writes the hooks into a private temporary folder put first on the
/// child's PYTHONPATH; returns the folder (removed at the end).
fn install_python_hooks(cmd: &mut Command) -> Option<PathBuf> {
    let dir = match private_temp_dir(&std::env::temp_dir(), "streamscope-python-") {
        Ok(d) => d,
        Err(e) => {
            eprintln!("streamscope: no Python call-site hooks (temporary folder: {e})");
            return None;
        }
    };
    if let Err(e) = write_new(&dir.join("sitecustomize.py"), PYTHON_HOOKS) {
        eprintln!("streamscope: no Python call-site hooks ({e})");
        let _ = std::fs::remove_dir_all(&dir);
        return None;
    }
    let mut path = OsString::from(dir.as_os_str());
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    cmd.env("PYTHONPATH", path);
    Some(dir)
}

/// Exit code of the child as a shell reports it (128 + signal when killed).
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Totals of one collector's progress file.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Progress {
    pub events: u64,
    pub bytes: u64,
    pub dropped: u64,
}

/// Parses a progress file (core::protocol::Progress, the collector's format).
pub fn parse_progress(text: &str) -> Progress {
    let p = streamscope_core::protocol::Progress::parse(text);
    Progress {
        events: p.events,
        bytes: p.bytes,
        dropped: p.dropped,
    }
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

fn progress_total(dir: &Path) -> (usize, Progress) {
    let mut total = Progress::default();
    let ps = files(dir, |n| {
        n.starts_with(streamscope_core::protocol::PROGRESS_PREFIX) && !n.ends_with(".tmp")
    });
    for p in &ps {
        let one = parse_progress(&std::fs::read_to_string(p).unwrap_or_default());
        total.events += one.events;
        total.bytes += one.bytes;
        total.dropped += one.dropped;
    }
    (ps.len(), total)
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
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
    gpu_metrics::allowed(args.gpu_metrics.is_some())?;
    if args.armed && args.gpu_metrics.is_some() {
        bail!("--gpu-metrics does not work with --armed (GPU metrics are sampled for whole recordings only)");
    }
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let out = std::fs::canonicalize(&args.output)
        .with_context(|| format!("resolving {}", args.output.display()))?;
    check_output_dir(&out, args.force)?;
    let exe = std::env::current_exe().ok();
    let collector = find_collector(
        std::env::var_os(ENV_COLLECTOR).map(PathBuf::from),
        exe.as_deref(),
    );
    let mut cmd = Command::new(program);
    cmd.args(rest);
    match &collector {
        Ok(lib) => {
            cmd.env("CUDA_INJECTION64_PATH", lib);
        }
        Err(e) => eprintln!("streamscope: {e}; running untraced"),
    }
    let hooks_dir = match (&collector, args.no_python_hooks) {
        (Ok(lib), false) => {
            // The hooks call into the collector through this (and only this).
            cmd.env(ENV_PY_HOOK_LIB, lib);
            install_python_hooks(&mut cmd)
        }
        _ => None,
    };
    nccl::set_plugin(&mut cmd, collector.as_deref().ok(), args.no_nccl_plugin);
    let cupti = std::env::var_os(ENV_CUPTI)
        .map(PathBuf::from)
        .or_else(|| find_cupti(&cupti_dirs()));
    if let Some(c) = &cupti {
        cmd.env(ENV_CUPTI, c);
        if std::env::var_os("NVTX_INJECTION64_PATH").is_none() {
            cmd.env("NVTX_INJECTION64_PATH", c);
        }
    }
    cmd.env(ENV_OUT, &out);
    if args.all_apis {
        cmd.env(streamscope_core::protocol::env::ALL_APIS, "1");
    }
    armed::set_env(&mut cmd, args.armed);
    if args.no_python_lines {
        cmd.env(streamscope_core::protocol::env::PYTHON_LINES, "0");
    }
    for (var, val) in [
        (ENV_RANGE, args.capture_range.clone()),
        (ENV_DELAY, args.delay.map(|v| v.to_string())),
        (ENV_DURATION, args.duration.map(|v| v.to_string())),
    ] {
        match val {
            Some(v) => cmd.env(var, v),
            None => cmd.env_remove(var),
        };
    }
    gpu_metrics::clear_env(&mut cmd);
    let sampler = match &args.gpu_metrics {
        Some(list) => gpu_metrics::Sampler::start(
            gpu_metrics::find_sampler(collector.as_deref().ok(), exe.as_deref()),
            &mut cmd,
            &out,
            list,
            args.gpu_metrics_hz,
        ),
        None => None,
    };
    let mut signals = signal_hook::iterator::SignalsInfo::<
        signal_hook::iterator::exfiltrator::WithOrigin,
    >::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
    .context("installing signal handlers")?;
    let started = Instant::now();
    // The origin of --delay/--duration for every process (one clock).
    cmd.env(ENV_START, monotonic_ns().to_string());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
    let child_pid = rustix::process::Pid::from_raw(child.id() as i32);
    let bar = indicatif::ProgressBar::with_draw_target(
        None,
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} recording {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let status = loop {
        for origin in signals.pending() {
            // A terminal's Ctrl-C reaches the child by itself (same process
            // group); forward only what a process sent to us.
            if origin.process.is_some() || origin.signal == signal_hook::consts::SIGTERM {
                let sig = if origin.signal == signal_hook::consts::SIGINT {
                    rustix::process::Signal::INT
                } else {
                    rustix::process::Signal::TERM
                };
                if let Some(pid) = child_pid {
                    let _ = rustix::process::kill_process(pid, sig);
                }
            }
        }
        if let Some(st) = child.try_wait().context("waiting for the command")? {
            break st;
        }
        let (procs, p) = progress_total(&out);
        bar.set_message(format!(
            "{:.0} s · {procs} CUDA process{} · {} events · {} written",
            started.elapsed().as_secs_f64(),
            if procs == 1 { "" } else { "es" },
            p.events,
            human_bytes(p.bytes)
        ));
        bar.tick();
        std::thread::sleep(Duration::from_millis(200));
    };
    bar.finish_and_clear();
    signals.handle().close();
    if let Some(d) = hooks_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let code = exit_code(status);
    let (_, totals) = progress_total(&out);
    // Only this host's: another node sharing the directory may still run.
    let mine = format!(
        "{}{}-",
        streamscope_core::protocol::PROGRESS_PREFIX,
        host_tag()
    );
    if let Some(s) = sampler {
        s.stop(&out, &host_tag());
    }
    let locks = gpu_metrics::lock_prefix(&host_tag());
    for p in files(&out, |n| n.starts_with(&mine) || n.starts_with(&locks)) {
        let _ = std::fs::remove_file(p);
    }
    if args.armed {
        return Ok(armed::finish(&out, &host_tag(), code));
    }
    let traces = files(&out, |n| n.ends_with(".pftrace"));
    if traces.is_empty() {
        let why = match &collector {
            Ok(_) => "the command did not use CUDA (or the collector could not start: see the lines above)",
            Err(_) => "the collector library was not found",
        };
        eprintln!("streamscope: no trace was written: {why}. Exit code {code}.");
        return Ok(code);
    }
    eprintln!(
        "streamscope: {} trace file(s) in {}:",
        traces.len(),
        out.display()
    );
    for t in &traces {
        let size = std::fs::metadata(t).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "  {} ({})",
            t.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            human_bytes(size)
        );
    }
    match load_paths(std::slice::from_ref(&out)) {
        Ok(trace) => {
            let report = analyze(&trace, &AnalysisOptions::default());
            eprint!("{}", summary(&report));
            let profiler = torch_profiler_lines(&trace);
            if !profiler.is_empty() {
                eprintln!("streamscope: torch.profiler ran inside the recorded job:");
                for l in profiler {
                    eprintln!("{l}");
                }
            }
        }
        Err(e) => eprintln!("streamscope: could not read the traces back: {e}"),
    }
    if totals.dropped > 0 {
        eprintln!(
            "streamscope: {} records were dropped (see each trace's dropped_records)",
            totals.dropped
        );
    }
    eprintln!(
        "Next: streamscope report {0}   |   streamscope view {0}",
        out.display()
    );
    Ok(code)
}

/// Host-sync warnings listed in the end-of-record summary.
pub const SUMMARY_WARNINGS: usize = 10;

/// The processes in which torch.profiler was started while recorded
/// (process metadata `core::protocol::TORCH_PROFILER_KEY`).
pub fn torch_profiler_lines(trace: &streamscope_core::Trace) -> Vec<String> {
    trace
        .processes()
        .iter()
        .filter_map(|p| {
            p.metadata
                .iter()
                .find(|(k, _)| k == streamscope_core::protocol::TORCH_PROFILER_KEY)
                .map(|(_, v)| format!("  {}: {v}", p.name))
        })
        .collect()
}

/// A few lines per rank: overlap, exposed communication, sync warnings.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    for rank in &r.ranks {
        if !rank.has_gpu_events {
            s += &format!("  {}: no GPU activity\n", rank.label);
            continue;
        }
        let pct = |v: Option<f64>| {
            v.map(|x| format!("{x:.1}%"))
                .unwrap_or_else(|| "n/a".into())
        };
        s += &format!(
            "  {}: {} GPU events · overlap {} · exposed comm {:.0} µs · compute {:.0} µs · comm {:.0} µs · idle {}\n",
            rank.label,
            rank.breakdown.gpu_events,
            pct(rank.breakdown.overlap_pct),
            rank.breakdown.exposed_comm_us,
            rank.breakdown.compute_us,
            rank.breakdown.comm_us,
            pct(rank.breakdown.idle_pct)
        );
    }
    if !r.sync_warnings.is_empty() {
        let n = r.sync_warnings.len();
        s += &format!("  {n} host-sync warning(s):\n");
        for w in r.sync_warnings.iter().take(SUMMARY_WARNINGS) {
            s += &format!(
                "    rank {} · {} · {} at {} · {}× · host blocked {:.0} µs · GPU idle {:.0} µs\n",
                w.rank, w.pattern, w.api, w.where_, w.count, w.host_blocked_us, w.gpu_idle_us
            );
        }
        if n > SUMMARY_WARNINGS {
            s += &format!(
                "    ... and {} more (all of them: streamscope report)\n",
                n - SUMMARY_WARNINGS
            );
        }
    }
    if r.dropped_records > 0 {
        s += &format!("  dropped records: {}\n", r.dropped_records);
    }
    s
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
        assert!(parse_seconds("-2").is_err());
        assert_eq!(parse_seconds("1.5"), Ok(1.5));
    }

    #[test]
    fn progress_lines() {
        let p = parse_progress("events=12 records=40 bytes=2048 dropped=3 done=1\n");
        assert_eq!(
            p,
            Progress {
                events: 12,
                bytes: 2048,
                dropped: 3
            }
        );
        assert_eq!(parse_progress("garbage"), Progress::default());
    }

    #[test]
    fn finds_libraries_where_they_are() {
        let dir = std::env::temp_dir().join(format!("ss-record-{}", std::process::id()));
        let lib = dir.join("lib");
        std::fs::create_dir_all(&lib).expect("temp dir");
        assert_eq!(find_cupti(std::slice::from_ref(&lib)), None);
        std::fs::write(lib.join("libcupti.so.13"), b"").expect("write");
        assert_eq!(
            find_cupti(&[dir.join("nope"), lib.clone()]),
            Some(lib.join("libcupti.so.13"))
        );
        let exe = dir.join("streamscope");
        assert!(find_collector(None, Some(&exe)).is_err());
        std::fs::write(dir.join(COLLECTOR_FILE), b"").expect("write");
        assert_eq!(
            find_collector(None, Some(&exe)),
            Ok(dir.join(COLLECTOR_FILE))
        );
        assert!(find_collector(Some(dir.join("missing.so")), Some(&exe)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
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
    fn hook_folders_are_fresh_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("ss-record-priv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("temp dir");
        let a = private_temp_dir(&base, "h-").expect("first");
        let b = private_temp_dir(&base, "h-").expect("second");
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(base.as_path()));
        let mode = std::fs::metadata(&a).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "no access for group or others: {mode:o}");
        write_new(&a.join("sitecustomize.py"), "x = 1\n").expect("write");
        assert!(
            write_new(&a.join("sitecustomize.py"), "y = 2\n").is_err(),
            "an existing file is never written through"
        );
        assert_eq!(
            std::fs::read_to_string(a.join("sitecustomize.py")).expect("read"),
            "x = 1\n"
        );
        let _ = std::fs::remove_dir_all(&base);
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
    fn summary_has_a_line_per_rank() {
        use streamscope_core::synth::{fsdp_like, SynthOptions};
        let t = fsdp_like(&SynthOptions {
            ranks: 2,
            target_slices: 4_000,
            ..Default::default()
        });
        let s = summary(&analyze(&t, &AnalysisOptions::default()));
        let ranks: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("GPU events · overlap"))
            .collect();
        assert_eq!(ranks.len(), 2, "{s}");
        assert!(ranks.iter().all(|l| l.contains('%')), "{s}");
    }

    #[test]
    fn the_warning_count_matches_the_lines() {
        let warning = |i: u64| streamscope_core::analysis::SyncGroup {
            pattern: "item-like".into(),
            api: "cudaStreamSynchronize".into(),
            where_: format!("train.py:{i} (step)"),
            count: 1,
            warning: Some("blocks".into()),
            ..Default::default()
        };
        for n in [1usize, 6, SUMMARY_WARNINGS, SUMMARY_WARNINGS + 3] {
            let r = Report {
                sync_warnings: (0..n as u64).map(warning).collect(),
                ..Default::default()
            };
            let s = summary(&r);
            assert!(s.contains(&format!("  {n} host-sync warning(s):")), "{s}");
            let listed = s.lines().filter(|l| l.starts_with("    rank ")).count();
            let more: usize = s
                .lines()
                .find_map(|l| l.strip_prefix("    ... and "))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            assert_eq!(listed + more, n, "{s}");
            assert_eq!(listed, n.min(SUMMARY_WARNINGS), "{s}");
        }
    }

    #[test]
    fn torch_profiler_runs_are_named() {
        let mut t = streamscope_core::TraceBuilder::new();
        assert!(torch_profiler_lines(&t.clone().finish()).is_empty());
        let mut p = streamscope_core::Process {
            name: "rank 1 · node · 12".into(),
            ..Default::default()
        };
        p.metadata.push((
            streamscope_core::protocol::TORCH_PROFILER_KEY.into(),
            "torch.profiler was started while recorded".into(),
        ));
        t.add_process(p);
        t.add_process(Default::default());
        let lines = torch_profiler_lines(&t.clone().finish());
        assert_eq!(
            lines,
            vec!["  rank 1 · node · 12: torch.profiler was started while recorded".to_string()]
        );
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    }
}
