//! The contract between `streamscope record` (cli), the collector injected
//! into the recorded program, and the analyses that read what it wrote.
//! Both sides use these names; neither spells them out again.

/// A host-thread range (`SliceKind::Range`) that the collector's Python
/// hooks write around every `torch.optim.Optimizer.step()` call. Each one
/// ends a training step of its rank; the analysis uses them when the trace
/// has no ProfilerStep and no NVTX step ranges.
pub const OPTIMIZER_STEP_RANGE: &str = "streamscope:optimizer.step";

/// The argument of an [`OPTIMIZER_STEP_RANGE`] that tells which optimizer
/// stepped (an unsigned key, the same for every step of one optimizer
/// object: Python's `id()`), so that a loop with two optimizers (a GAN's
/// generator and discriminator, dense and sparse parameters) is one step
/// per iteration, not two. Absent in recordings made before it.
pub const OPTIMIZER_KEY_ARG: &str = "optimizer";

/// An instant on the host thread whose GPU memory allocation failed (a
/// CUDA out-of-memory in PyTorch's caching allocator), with the arguments
/// `device` (CUDA ordinal), `bytes` (asked), `allocated_bytes` (the
/// allocator's total then), `free_bytes` (free device memory then) and
/// `python` (the line that asked).
pub const OOM_EVENT: &str = "CUDA out of memory";

/// The counter track "GPU N device memory (bytes)": device memory held by
/// cudaMalloc / cuMemAlloc (every library's, and native programs'), from
/// CUPTI's memory records; written after "GPU N ".
pub const DEVICE_MEMORY_COUNTER_SUFFIX: &str = "device memory (bytes)";

/// Process metadata: allocator events the collector could not keep (too
/// many waiting for the writer).
pub const MEMORY_EVENTS_LOST_KEY: &str = "memory_events_lost";

/// Process metadata key: torch.profiler (Kineto) was started inside the
/// recorded process; its value says when and that its CUDA events are
/// missing (CUPTI takes one subscriber). `streamscope record` repeats it.
pub const TORCH_PROFILER_KEY: &str = "torch_profiler";

/// Argument of a kernel, copy or memset run by a CUDA graph: the graph's id
/// (CUPTI's `graphId`).
pub const GRAPH_ID_ARG: &str = "graph_id";

/// Argument of a kernel, copy or memset run by a CUDA graph: the graph
/// node's id (CUPTI's `graphNodeId`).
pub const GRAPH_NODE_ARG: &str = "graph_node_id";

/// Argument of a host sync or copy call in a native program (no Python
/// line): its C/C++ caller, symbolized from the return address the
/// collector took at the call ("FILE:LINE (function)" with debug info,
/// else "function (object)"). The analyses read it where they read the
/// Python line.
pub const CALLER_ARG: &str = "caller";

/// Host API calls that launch a whole executable graph.
pub const GRAPH_LAUNCH_APIS: &[&str] = &[
    "cudaGraphLaunch",
    "cuGraphLaunch",
    "cudaGraphLaunch_ptsz",
    "cuGraphLaunch_ptsz",
];

/// Process metadata key: optimizer steps the hooks noted but could not keep.
pub const OPTIMIZER_STEPS_LOST_KEY: &str = "optimizer_steps_lost";

/// Process metadata key: whether NCCL loaded the collector as its profiler
/// plugin (`init` called) and which interface version (`v5`, `v4`), with
/// the number of communicators; "not loaded" when no communicator called it.
pub const NCCL_PLUGIN_KEY: &str = "nccl_profiler_plugin";

/// Process metadata key: NCCL operations the profiler plugin saw but could
/// not keep (its buffer was full, or the communicator table was).
pub const NCCL_RECORDS_LOST_KEY: &str = "nccl_records_lost";

/// Name prefix of the tracks (`TrackKind::Other`, one per communicator) that
/// hold the NCCL profiler plugin's operations: "NCCL · comm 0x... · rank R/N".
pub const NCCL_TRACK_PREFIX: &str = "NCCL · comm ";

/// Name prefix of an NCCL operation slice (`SliceKind::Other`) on such a
/// track: "NCCL AllReduce", "NCCL Send", ... (the function NCCL names).
pub const NCCL_SLICE_PREFIX: &str = "NCCL ";

/// Environment `streamscope record` sets for the collector.
pub mod env {
    /// Output directory.
    pub const OUT: &str = "STREAMSCOPE_OUT";
    /// `0`: do not walk the stack for the C/C++ caller of a sync made
    /// where no Python line is known.
    pub const NATIVE_CALLERS: &str = "STREAMSCOPE_NATIVE_CALLERS";
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
    /// The writer's flush period in milliseconds (default 100, at least
    /// 10): what a SIGKILL can lose against how often CUPTI is asked.
    pub const FLUSH_MS: &str = "STREAMSCOPE_FLUSH_MS";
    /// `1` records every CUDA API call, [`QUERY_APIS`](super::QUERY_APIS)
    /// included (`record --all-apis`).
    pub const ALL_APIS: &str = "STREAMSCOPE_ALL_APIS";
    /// `0`: no Python line for host syncs (the collector then subscribes
    /// to no API callback at all; `record --no-python-lines`).
    pub const PYTHON_LINES: &str = "STREAMSCOPE_PYTHON_LINES";
    /// PyTorch's allocator history through the Python hooks (`record
    /// --memory`): unset or `on`, its events without stacks; `lines` (or
    /// `1`), with the Python line of each block; `off` (or `0`), none.
    pub const MEMORY: &str = "STREAMSCOPE_MEMORY";
    /// Activity kinds not to record, comma-separated, among `memcpy`,
    /// `memset`, `synchronization`, `runtime`, `driver`, `overhead`, `nvtx`
    /// (kernels are always recorded). Less in the trace, and less for the
    /// analysis to go on: meant for measuring what each kind costs.
    pub const ACTIVITY_OFF: &str = "STREAMSCOPE_ACTIVITY_OFF";
    /// `1`: ask CUPTI for hardware-based kernel tracing
    /// (`cuptiActivityEnableHWTrace`, CUDA 12.8+, where the GPU has it);
    /// the trace's `hw_trace` metadata says whether it took.
    pub const HW_TRACE: &str = "STREAMSCOPE_HW_TRACE";
    /// NCCL's own variable naming its profiler plugin library: `record`
    /// sets it to the collector (absolute path) unless the user set it.
    pub const NCCL_PROFILER_PLUGIN: &str = "NCCL_PROFILER_PLUGIN";
    /// `1`: armed mode (`record --armed`): the collector records nothing
    /// until a capture is triggered (signal, `DIR/capture`, control socket;
    /// see [`armed`](super::armed)).
    pub const ARMED: &str = "STREAMSCOPE_ARMED";
    /// The signal that triggers a capture in armed mode: a number or a name
    /// (`USR1`, `SIGUSR2`, ...); default SIGUSR2.
    pub const CAPTURE_SIGNAL: &str = "STREAMSCOPE_CAPTURE_SIGNAL";
    /// GPU metrics to sample (`record --gpu-metrics[=LIST]`): `default` or
    /// a list for [`gpu_metrics::parse_list`](crate::gpu_metrics::parse_list).
    /// Unset: no PM sampling at all (no thread, no CUPTI profiler).
    pub const GPU_METRICS: &str = "STREAMSCOPE_GPU_METRICS";
    /// PM sampling rate in Hz (`record --gpu-metrics-hz`), 1000 to 100000.
    pub const GPU_METRICS_HZ: &str = "STREAMSCOPE_GPU_METRICS_HZ";
    /// The folder where the GPU sampler process writes its feeds
    /// ([`gpu_metrics_feed_name`](super::gpu_metrics_feed_name)); set by
    /// `record --gpu-metrics` for the recorded processes, whose collectors
    /// read the feeds of the GPUs they use into their traces.
    pub const GPU_METRICS_FEED: &str = "STREAMSCOPE_GPU_METRICS_FEED";
}

pub mod armed;
pub mod streams;

/// CUDA runtime and driver functions the collector does not record by
/// default: state queries that enqueue no GPU work, never block and never
/// end up in an analysis, yet PyTorch calls some of them thousands of times
/// a step (a step of traces/torch-fsdp2-plain-h200x2 holds ~4,700
/// `cudaGetDevice` and ~1,350 `cuDevicePrimaryCtxGetState` calls against
/// 190 kernel launches), each costing a record. Names as CUPTI gives them,
/// without a `_v3020`-style suffix. Event and stream queries are not here:
/// CUPTI reports them as synchronization records too, which only their API
/// call tells apart from a blocking sync.
pub const QUERY_APIS: &[&str] = &[
    "cudaGetDevice",
    "cudaSetDevice",
    "cudaGetDeviceCount",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaDeviceGetAttribute",
    "cudaGetFuncBySymbol",
    "cudaFuncGetAttributes",
    "cudaPointerGetAttributes",
    "cudaDriverGetVersion",
    "cudaRuntimeGetVersion",
    "cudaDeviceGetPCIBusId",
    "cudaStreamGetPriority",
    "cudaStreamGetFlags",
    "cudaStreamGetId",
    "cudaGetDriverEntryPoint",
    "cudaGetDriverEntryPointByVersion",
    "cuDevicePrimaryCtxGetState",
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuCtxGetFlags",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetAttribute",
    "cuDriverGetVersion",
    "cuKernelGetName",
    "cuKernelGetAttribute",
    "cuFuncGetName",
    "cuFuncGetAttribute",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuPointerGetAttribute",
    "cuPointerGetAttributes",
    "cuStreamIsCapturing",
    "cuStreamGetCaptureInfo",
    "cuStreamGetCaptureInfo_v2",
    "cuStreamGetCaptureInfo_v3",
    "cuThreadExchangeStreamCaptureMode",
    "cuMemGetAddressRange",
    "cuMemGetAddressRange_v2",
    "cuMemGetAllocationGranularity",
    "cuGetErrorString",
    "cuGetErrorName",
];

/// What a host-blocking CUDA call waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// The work queued on one stream.
    Stream,
    /// All work of the device (context).
    Device,
    /// One event.
    Event,
    /// A synchronous memory copy (blocking when it reads device memory).
    Copy,
}

/// CUDA runtime and driver calls that block the host until GPU work ends,
/// named as CUPTI gives them (no `_v3020`-style suffix). The analysis
/// classifies host syncs by this table; the collector reads the Python
/// line at the entry of its runtime (`cuda*`) calls, all of which are in
/// [`HOST_SYNC_APIS`].
pub const BLOCKING_CALLS: &[(&str, Blocks)] = &[
    ("cudaStreamSynchronize", Blocks::Stream),
    ("cudaStreamSynchronize_ptsz", Blocks::Stream),
    ("cuStreamSynchronize", Blocks::Stream),
    ("cuStreamSynchronize_ptsz", Blocks::Stream),
    ("cudaDeviceSynchronize", Blocks::Device),
    ("cuCtxSynchronize", Blocks::Device),
    ("cudaEventSynchronize", Blocks::Event),
    ("cuEventSynchronize", Blocks::Event),
    ("cudaMemcpy", Blocks::Copy),
    ("cudaMemcpy_ptds", Blocks::Copy),
    ("cuMemcpy", Blocks::Copy),
    ("cuMemcpy_v2", Blocks::Copy),
    ("cuMemcpyDtoH", Blocks::Copy),
    ("cuMemcpyDtoH_v2", Blocks::Copy),
];

/// What CUDA call `name` blocks the host for, if it is in
/// [`BLOCKING_CALLS`].
pub fn blocking_call(name: &str) -> Option<Blocks> {
    BLOCKING_CALLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, b)| b)
}

/// Runtime API functions at whose entry the collector reads the caller's
/// Python line: the runtime calls of [`BLOCKING_CALLS`] and the copies that
/// may block.
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

/// The host name as it may appear in a file name (anything but
/// `[A-Za-z0-9._-]` becomes `_`; "host" when unknown).
pub fn host_tag(hostname: &str) -> String {
    let t: String = hostname
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() {
        "host".into()
    } else {
        t
    }
}

/// "rank-R.pftrace" when RANK is set, else "pid-HOST-N.pftrace" (the host
/// keeps processes of several nodes apart in a shared folder). A name
/// already taken gets "-2", "-3", ... before the extension.
pub fn trace_file_name(rank: Option<u32>, host: &str, pid: u32) -> String {
    match rank {
        Some(r) => format!("rank-{r}.pftrace"),
        None => format!("pid-{}-{pid}.pftrace", host_tag(host)),
    }
}

/// Whether a file name is one the collector writes (a trace or a progress file).
pub fn is_collector_file(name: &str) -> bool {
    (name.ends_with(".pftrace") && (name.starts_with("rank-") || name.starts_with("pid-")))
        || name.starts_with(PROGRESS_PREFIX)
}

/// Lock files of the GPU metrics samplers: ".gpu-metrics-lock-HOST-PCI",
/// one per GPU of a host, held (flock) by the process sampling that GPU
/// and holding its pid; `record` removes this host's at the end.
pub const GPU_METRICS_LOCK_PREFIX: &str = ".gpu-metrics-lock-";

/// The lock file name of the GPU at PCI address `pci` on `host`.
pub fn gpu_metrics_lock_name(host: &str, pci: &str) -> String {
    let pci: String = pci
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{GPU_METRICS_LOCK_PREFIX}{}-{pci}", host_tag(host))
}

/// The GPU sampler's executable, installed next to the collector library:
/// `record --gpu-metrics` runs it beside the job (CUPTI PM sampling in a
/// process of its own, never inside the recorded program).
pub const GPU_SAMPLER_EXE: &str = "streamscope-gpu-sampler";

/// Feed files of the GPU sampler: ".gpu-metrics-feed-HOST-PCI.points",
/// ".series" and ".meta"; `record` removes this host's at the end.
pub const GPU_METRICS_FEED_PREFIX: &str = ".gpu-metrics-feed-";

/// The parts of one GPU's feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedPart {
    /// Appended [`FEED_RECORD_BYTES`]-byte records: series index (u32),
    /// CLOCK_MONOTONIC ns (i64), value (f64), little-endian.
    Points,
    /// One line per series, in index order: the track name after
    /// "GPU N · " ("SM active %", or a raw CUPTI metric name).
    Series,
    /// "key\tvalue" lines, rewritten whole (through ".tmp" and a rename):
    /// [`feed_meta`] keys and the per-device suffixes of
    /// `gpu_metrics::keys` ("sampled", "refused", "status", "config",
    /// "stats").
    Meta,
}

/// Keys of a feed's meta file besides the `gpu_metrics::keys` suffixes.
pub mod feed_meta {
    /// Every sample that ends before this CLOCK_MONOTONIC ns is in the
    /// points file.
    pub const DECODED_UNTIL: &str = "decoded_until_ns";
    /// "1" once the sampler stopped (nothing more will come).
    pub const DONE: &str = "done";
}

/// The file name of `part` of the feed of the GPU at PCI address `pci` on
/// `host`.
pub fn gpu_metrics_feed_name(host: &str, pci: &str, part: FeedPart) -> String {
    let pci: String = pci
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let ext = match part {
        FeedPart::Points => "points",
        FeedPart::Series => "series",
        FeedPart::Meta => "meta",
    };
    format!("{GPU_METRICS_FEED_PREFIX}{}-{pci}.{ext}", host_tag(host))
}

/// Bytes of one record of a feed's points file.
pub const FEED_RECORD_BYTES: usize = 20;

/// One points record.
pub fn encode_feed_point(series: u32, ts_ns: i64, value: f64) -> [u8; FEED_RECORD_BYTES] {
    let mut b = [0u8; FEED_RECORD_BYTES];
    b[..4].copy_from_slice(&series.to_le_bytes());
    b[4..12].copy_from_slice(&ts_ns.to_le_bytes());
    b[12..].copy_from_slice(&value.to_le_bytes());
    b
}

/// The whole records at the start of `bytes` (a partly written last one
/// is left for the next read).
pub fn decode_feed_points(bytes: &[u8]) -> impl Iterator<Item = (u32, i64, f64)> + '_ {
    bytes.chunks_exact(FEED_RECORD_BYTES).map(|c| {
        let mut s = [0u8; 4];
        let mut t = [0u8; 8];
        let mut v = [0u8; 8];
        s.copy_from_slice(&c[..4]);
        t.copy_from_slice(&c[4..12]);
        v.copy_from_slice(&c[12..]);
        (
            u32::from_le_bytes(s),
            i64::from_le_bytes(t),
            f64::from_le_bytes(v),
        )
    })
}

/// "key\tvalue" lines (tabs and newlines inside values become spaces).
pub fn format_feed_meta(entries: &[(String, String)]) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    entries
        .iter()
        .map(|(k, v)| format!("{}\t{}\n", clean(k), clean(v)))
        .collect()
}

/// The entries of a meta file (lines without a tab are skipped).
pub fn parse_feed_meta(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Progress files: ".progress-HOST-PID", rewritten (through a ".tmp" and a
/// rename) while the collector runs, removed by `record` at the end.
pub const PROGRESS_PREFIX: &str = ".progress-";

/// The progress file name of process `pid` on `host`: ".progress-HOST-PID".
pub fn progress_file_name(host: &str, pid: u32) -> String {
    format!("{PROGRESS_PREFIX}{}-{pid}", host_tag(host))
}

/// One progress file's content: "events=N records=N bytes=N dropped=N done=0|1".
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Slices written so far.
    pub events: u64,
    /// Records the collector has seen so far.
    pub records: u64,
    /// Bytes of trace written so far.
    pub bytes: u64,
    /// Records dropped so far.
    pub dropped: u64,
    /// Whether the collector has finished.
    pub done: bool,
}

impl Progress {
    /// The progress as one line, newline included.
    pub fn to_line(&self) -> String {
        format!(
            "events={} records={} bytes={} dropped={} done={}\n",
            self.events, self.records, self.bytes, self.dropped, self.done as u8
        )
    }

    /// Unknown keys and bad numbers are ignored (0).
    pub fn parse(text: &str) -> Progress {
        let mut p = Progress::default();
        for kv in text.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            let v: u64 = v.parse().unwrap_or(0);
            match k {
                "events" => p.events = v,
                "records" => p.records = v,
                "bytes" => p.bytes = v,
                "dropped" => p.dropped = v,
                "done" => p.done = v != 0,
                _ => {}
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_round_trip() {
        let p = Progress {
            events: 12,
            records: 40,
            bytes: 2048,
            dropped: 3,
            done: true,
        };
        assert_eq!(
            p.to_line(),
            "events=12 records=40 bytes=2048 dropped=3 done=1\n"
        );
        assert_eq!(Progress::parse(&p.to_line()), p);
        assert_eq!(Progress::parse("garbage x=1"), Progress::default());
    }

    #[test]
    fn names() {
        assert_eq!(trace_file_name(Some(3), "n1", 77), "rank-3.pftrace");
        assert_eq!(trace_file_name(None, "a b/c", 7), "pid-a_b_c-7.pftrace");
        assert_eq!(progress_file_name("n1", 9), ".progress-n1-9");
        assert_eq!(host_tag(""), "host");
        assert!(is_collector_file("rank-0.pftrace"));
        assert!(is_collector_file("pid-n-1-2.pftrace"));
        assert!(is_collector_file(".progress-n-1"));
        assert!(!is_collector_file("my.pftrace"));
        assert!(!is_collector_file("notes.txt"));
    }

    #[test]
    fn feed_records_and_meta_round_trip() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&encode_feed_point(3, -5, 91.25));
        bytes.extend_from_slice(&encode_feed_point(u32::MAX, i64::MAX, f64::NAN));
        // A record cut short stays for the next read.
        bytes.extend_from_slice(&encode_feed_point(1, 1, 1.0)[..7]);
        let v: Vec<_> = decode_feed_points(&bytes).collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0], (3, -5, 91.25));
        assert_eq!((v[1].0, v[1].1), (u32::MAX, i64::MAX));
        assert!(v[1].2.is_nan());
        let meta = vec![
            ("config".to_string(), "10000 Hz\tx\ny".to_string()),
            (feed_meta::DONE.to_string(), "1".to_string()),
        ];
        let parsed = parse_feed_meta(&format_feed_meta(&meta));
        assert_eq!(
            parsed[0],
            ("config".to_string(), "10000 Hz x y".to_string())
        );
        assert_eq!(parsed[1].1, "1");
        assert_eq!(
            gpu_metrics_feed_name("node-1.x", "0000:1b:00", FeedPart::Points),
            format!(
                ".gpu-metrics-feed-{}-0000-1b-00.points",
                host_tag("node-1.x")
            )
        );
    }
}
