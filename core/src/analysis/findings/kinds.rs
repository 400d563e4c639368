//! The finding kinds: each from what the report measured, its gain from a
//! what-if replay where one models the fix.

use super::{median, median_noise, Finding, FindingWhere, MAX_SYNC_REPLAYS};
use crate::analysis::report::{RankReport, Report, StepReport};
use crate::analysis::whatif::{self, Changes, Prepared, WhatIfOptions};
use crate::model::{ProcessId, SliceId, SliceKind, Trace};

/// Per rank: steps in the window, the median step, its noise, the median step's row.
struct RankSteps<'a> {
    rank: u32,
    steps: usize,
    median_us: f64,
    noise_us: f64,
    median_step: Option<&'a StepReport>,
}

fn rank_steps<'a>(r: &'a Report, k: &RankReport) -> RankSteps<'a> {
    let rows: Vec<&StepReport> = r.window_steps(k.rank).collect();
    let d: Vec<f64> = rows.iter().map(|s| s.duration_us).collect();
    let med = median(&d);
    let median_step = rows
        .iter()
        .min_by(|a, b| {
            (a.duration_us - med)
                .abs()
                .total_cmp(&(b.duration_us - med).abs())
        })
        .copied();
    RankSteps {
        rank: k.rank,
        steps: rows.len(),
        median_us: med,
        noise_us: median_noise(&d),
        median_step,
    }
}

/// The replays: the trace's graph, or why there is none.
struct Predictor<'t> {
    prep: Result<Prepared<'t>, String>,
}

impl Predictor<'_> {
    /// (gain µs, gain % of the measured step) of `opts` on the slowest
    /// rank's mean step over the window (a synchronous job runs at its
    /// slowest rank's pace; the mean nets out time a change moves between
    /// steps).
    fn gain(&mut self, opts: &WhatIfOptions) -> Result<(f64, f64), String> {
        let prep = self.prep.as_mut().map_err(|e| e.clone())?;
        let w = prep.replay(opts)?;
        let m = w
            .ranks
            .iter()
            .filter_map(|k| k.measured_mean_step_us)
            .fold(f64::NAN, f64::max);
        let p = w
            .ranks
            .iter()
            .filter_map(|k| k.predicted_mean_step_us)
            .fold(f64::NAN, f64::max);
        if !(m.is_finite() && p.is_finite()) || m <= 0.0 {
            return Err("the replay has no steady steps".into());
        }
        Ok((m - p, 100.0 * (m - p) / m))
    }
}

/// Fills the prediction fields of `f` from `gain`; beyond noise when the gain exceeds it.
fn predicted(f: &mut Finding, how: String, gain: Result<(f64, f64), String>) {
    match gain {
        Ok((us, pct)) => {
            f.predicted_gain_us = Some(us);
            f.predicted_gain_pct = Some(pct);
            f.prediction = how;
            f.beyond_noise = us > f.noise_us;
        }
        Err(why) => unpredicted(f, &why),
    }
}

/// A gain the replay cannot predict: said so; beyond noise when its cost is.
fn unpredicted(f: &mut Finding, why: &str) {
    f.predicted_gain_us = None;
    f.predicted_gain_pct = None;
    f.prediction = format!("gain not predicted: {why}");
    f.beyond_noise = f.cost_per_step_us > f.noise_us;
}

fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

/// `FILE:LINE` of a Python location "FILE:LINE (function)".
fn file_line(python: &str) -> &str {
    python.split(" (").next().unwrap_or("").trim()
}

pub(super) fn collect(r: &Report, trace: Option<&Trace>, why: &str) -> Vec<Finding> {
    let ranks: Vec<(&RankReport, RankSteps)> = r
        .ranks
        .iter()
        .filter(|k| k.has_gpu_events)
        .map(|k| (k, rank_steps(r, k)))
        .collect();
    let mut pred = Predictor {
        prep: match trace {
            Some(t) => whatif::prepare(t, None),
            None => Err(why.to_string()),
        },
    };
    let mut out = Vec::new();
    syncs(&ranks, &mut pred, &mut out);
    communication(&ranks, &mut pred, &mut out);
    straggler(r, &ranks, &mut out);
    host(&ranks, &mut out);
    gemms(&ranks, trace, &mut out);
    if let Some(t) = trace {
        pageable(t, &ranks, &mut out);
        legacy_stream(t, &ranks, &mut pred, &mut out);
    }
    out
}

/// A finding on rank `s`, jumping to its median step.
fn on_rank(kind: &str, s: &RankSteps, cost_per_step_us: f64) -> Finding {
    Finding {
        kind: kind.into(),
        where_: FindingWhere {
            rank: s.rank,
            step: s.median_step.map(|x| x.step),
            ..Default::default()
        },
        cost_per_step_us,
        noise_us: s.noise_us,
        start_ns: s.median_step.map(|x| x.start_ns),
        end_ns: s.median_step.map(|x| x.end_ns),
        ..Default::default()
    }
}

/// Syncs that idle the GPU, by Python line: each line's syncs dropped in a
/// replay (the costliest [`MAX_SYNC_REPLAYS`] lines).
fn syncs(ranks: &[(&RankReport, RankSteps)], pred: &mut Predictor, out: &mut Vec<Finding>) {
    let mut sites: Vec<Finding> = Vec::new();
    for (k, s) in ranks {
        let per = s.steps.max(1) as f64;
        for g in k.syncs.iter().filter(|g| g.gpu_idle_us > 0.0) {
            let line = if g.python.is_empty() {
                g.where_.clone()
            } else {
                g.python.clone()
            };
            let cost = g.gpu_idle_us / per;
            let site = match sites
                .iter_mut()
                .find(|f| f.where_.line == line && f.where_.rank == k.rank)
            {
                Some(f) => f,
                None => {
                    let mut f = on_rank("sync", s, 0.0);
                    f.where_.line = line.clone();
                    f.where_.kernel = if g.python.is_empty() {
                        g.api.clone()
                    } else {
                        String::new()
                    };
                    f.where_.step = None;
                    f.start_ns = Some(g.start_ns);
                    f.end_ns = Some(g.end_ns);
                    f.slice = g.slices.first().copied();
                    sites.push(f);
                    sites.last_mut().expect("pushed")
                }
            };
            site.cost_per_step_us += cost;
            let more = format!(
                "{} ({}) x{} in {} step(s): host blocked {}, GPU idle {}/step",
                g.pattern,
                g.api,
                g.count,
                g.steps_with,
                ms(g.host_blocked_us),
                ms(cost)
            );
            if site.evidence.is_empty() {
                site.evidence = more;
            } else {
                site.evidence = format!("{}; {more}", site.evidence);
            }
        }
    }
    // One finding per line: the rank it costs most.
    sites.sort_by(|a, b| b.cost_per_step_us.total_cmp(&a.cost_per_step_us));
    let mut lines: Vec<Finding> = Vec::new();
    for f in sites {
        if !lines.iter().any(|x| x.where_.line == f.where_.line) {
            lines.push(f);
        }
    }
    // A line without Python location (a native program) is dropped by its
    // API name when no other line's syncs share that name.
    let api_unique = |api: &str| {
        ranks
            .iter()
            .flat_map(|(k, _)| &k.syncs)
            .filter(|g| g.api == api)
            .all(|g| g.python.is_empty())
            && lines_of_api(ranks, api) == 1
    };
    for (i, mut f) in lines.into_iter().enumerate() {
        let fl = file_line(&f.where_.line).to_string();
        let python = fl.rsplit_once(':').is_some_and(|(a, l)| {
            !a.is_empty() && !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())
        });
        let spec = if python {
            fl
        } else if !f.where_.kernel.is_empty() && api_unique(&f.where_.kernel) {
            f.where_.kernel.clone()
        } else {
            String::new()
        };
        if spec.is_empty() {
            unpredicted(
                &mut f,
                "no Python line to drop it by, and its API name is shared by other syncs (a native caller)",
            );
        } else if i >= MAX_SYNC_REPLAYS {
            unpredicted(
                &mut f,
                &format!(
                    "only the {MAX_SYNC_REPLAYS} costliest sync lines are replayed; `streamscope whatif --drop-syncs {spec}`"
                ),
            );
        } else {
            let opts = WhatIfOptions {
                drop_syncs: vec![spec.clone()],
                ..Default::default()
            };
            let gain = pred.gain(&opts);
            predicted(&mut f, format!("whatif --drop-syncs {spec}"), gain);
        }
        out.push(f);
    }
}

/// Distinct sync lines (Python location, else where) calling `api` in the
/// headline windows (a drop by API name also drops its calls outside them,
/// which the window's steps do not see).
fn lines_of_api(ranks: &[(&RankReport, RankSteps)], api: &str) -> usize {
    let mut v: Vec<&str> = ranks
        .iter()
        .flat_map(|(k, _)| &k.syncs)
        .filter(|g| g.api == api)
        .map(|g| {
            if g.python.is_empty() {
                g.where_.as_str()
            } else {
                g.python.as_str()
            }
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// Exposed communication (late prefetches when all-gathers came late),
/// with the bound of a perfect overlap from a replay with every NCCL
/// transfer taking no time; no finding where communication is fully hidden.
fn communication(ranks: &[(&RankReport, RankSteps)], pred: &mut Predictor, out: &mut Vec<Finding>) {
    let worst = ranks
        .iter()
        .filter(|(k, s)| k.breakdown.exposed_comm_us > 0.0 && s.steps > 0)
        .max_by(|a, b| {
            let per =
                |x: &(&RankReport, RankSteps)| x.0.breakdown.exposed_comm_us / x.1.steps as f64;
            per(a).total_cmp(&per(b))
        });
    let Some((k, s)) = worst else {
        return;
    };
    let per = s.steps as f64;
    let late = k.prefetch.late > 0;
    let mut f = on_rank(
        if late {
            "late_prefetch"
        } else {
            "exposed_collective"
        },
        s,
        k.breakdown.exposed_comm_us / per,
    );
    if late {
        f.where_.kernel = "AllGather".into();
    }
    let mut ev = format!(
        "exposed communication {}/step ({} overlapped)",
        ms(k.breakdown.exposed_comm_us / per),
        k.breakdown
            .overlap_pct
            .map_or("-".into(), |p| format!("{p:.1} %"))
    );
    if let Some(w) = k.exposed_wait_us {
        ev.push_str(&format!(
            ", of which waiting for a peer {}/step",
            ms(w / per)
        ));
    }
    if late {
        ev.push_str(&format!(
            "; {} of {} all-gathers late, compute waited {}/step",
            k.prefetch.late,
            k.prefetch.all_gathers,
            ms(k.prefetch.late_us / per)
        ));
        // The layer (position in the step) compute waited for most.
        if let Some(l) = k
            .prefetch
            .per_layer
            .iter()
            .filter(|l| l.late > 0)
            .max_by(|a, b| a.late_us.total_cmp(&b.late_us))
        {
            ev.push_str(&format!(
                "; most of it for all-gather #{} of the step{}, late in {} of {} steps, {}/step",
                l.position,
                l.label
                    .as_deref()
                    .map_or(String::new(), |s| format!(" ({s})")),
                l.late,
                l.all_gathers,
                ms(l.late_us / per)
            ));
        }
    }
    f.evidence = ev;
    if let Some(w) = k.comm_stalls.worst.first() {
        f.start_ns = Some(w.start_ns);
        f.end_ns = Some(w.end_ns);
        f.slice = Some(w.slice);
    }
    // What hiding every transfer would save: a bound, not the gain of a
    // fix (on fsdp-ref prefetch 0 -> 1 the bound was 2.9x the gain,
    // docs/WHATIF.md).
    let opts = WhatIfOptions {
        changes: Changes {
            comm_scale: Some(0.0),
            ..Default::default()
        },
        ..Default::default()
    };
    let bound = pred.gain(&opts);
    if let Ok((us, pct)) = &bound {
        f.evidence.push_str(&format!(
            "; hidden entirely it would save at most {}/step ({pct:.1} %: whatif, every NCCL transfer x0)",
            ms(us.max(0.0))
        ));
        f.cost_per_step_us = f.cost_per_step_us.min(us.max(0.0));
    }
    if late {
        // The fix: prefetch one unit deeper (each all-gather issued one
        // position earlier), replayed with the SM contention it adds.
        let opts = WhatIfOptions {
            changes: Changes {
                prefetch_deeper: Some(1),
                ..Default::default()
            },
            ..Default::default()
        };
        predicted(
            &mut f,
            "whatif --prefetch-deeper 1".into(),
            pred.gain(&opts),
        );
    } else {
        match bound {
            Ok(_) => unpredicted(
                &mut f,
                "the replay cannot overlap a collective for you; the evidence gives the bound of hiding it entirely",
            ),
            Err(why) => unpredicted(&mut f, &why),
        }
    }
    out.push(f);
}

/// The straggler the report named: the others' wait for it.
fn straggler(r: &Report, ranks: &[(&RankReport, RankSteps)], out: &mut Vec<Finding>) {
    let Some(st) = &r.headline.straggler else {
        return;
    };
    let Some(wait) = st.median_wait_ms.filter(|w| *w > 0.0) else {
        return;
    };
    let Some((_, s)) = ranks.iter().find(|(k, _)| k.rank == st.rank) else {
        return;
    };
    let mut f = on_rank("straggler", s, wait * 1000.0);
    f.evidence = format!(
        "rank {} last to arrive in {} of {} steps; the others wait for it {}/step (median)",
        st.rank,
        st.steps,
        st.of_steps,
        ms(wait * 1000.0)
    );
    unpredicted(
        &mut f,
        "the replay keeps each rank's own host and GPU time; what makes this rank late is not a change it models",
    );
    out.push(f);
}

/// GPU idle while the host was late to launch (beyond what the syncs
/// explain), and launch-bound stretches (short gaps between kernels).
fn host(ranks: &[(&RankReport, RankSteps)], out: &mut Vec<Finding>) {
    for (k, s) in ranks {
        if s.steps == 0 {
            continue;
        }
        let per = s.steps as f64;
        // The stream the host kept waiting most, within the GPU's own idle.
        let host_wait = k
            .idle_by_stream
            .iter()
            .map(|x| x.host_wait_us)
            .fold(0.0, f64::max)
            .min(k.breakdown.idle_us);
        let sync_idle: f64 = k.syncs.iter().map(|g| g.gpu_idle_us).sum();
        let idle = (host_wait - sync_idle).max(0.0) / per;
        if idle > 0.0 {
            let mut f = on_rank("host_idle", s, idle);
            f.evidence = format!(
                "GPU idle while the host was late to launch {}/step ({} of it after syncs, listed apart); GPU idle {} % of the window; median step {}",
                ms(host_wait / per),
                ms(sync_idle / per),
                k.breakdown.idle_pct.map_or("-".into(), |p| format!("{p:.1}")),
                ms(s.median_us)
            );
            unpredicted(
                &mut f,
                "the replay keeps the host's own time as measured; a faster host is not a change it models",
            );
            out.push(f);
        }
        let short: f64 = k
            .idle_by_stream
            .iter()
            .map(|x| x.kernel_wait_us)
            .fold(0.0, f64::max)
            .min(k.breakdown.idle_us)
            / per;
        if short > 0.0 {
            let mut f = on_rank("launch_bound", s, short);
            f.evidence = format!(
                "gaps under the kernel-wait threshold between kernels {}/step (launch-bound stretches: fewer, larger kernels or CUDA graphs)",
                ms(short)
            );
            unpredicted(
                &mut f,
                "the launch overhead a CUDA graph or fusion removes is not a change the replay models",
            );
            out.push(f);
        }
    }
}

/// Whether a kernel name is an fp32 GEMM on the CUDA cores (no tensor cores).
pub(super) fn fp32_gemm(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("sgemm")
        || (n.contains("gemm") && n.contains("simt") && !n.contains("hgemm"))
        || n.starts_with("gemmsn_")
        || n.contains("gemv2t_kernel_val<int, int, float")
}

/// A kernel's name without its parameters, cut to 60 characters.
fn short_name(name: &str) -> String {
    let head = name.split('(').next().unwrap_or(name).trim();
    let head = if head.is_empty() { name } else { head };
    if head.chars().count() > 60 {
        let mut s: String = head.chars().take(59).collect();
        s.push('…');
        s
    } else {
        head.to_string()
    }
}

/// fp32 GEMMs without tensor cores, from the top kernels' names.
fn gemms(ranks: &[(&RankReport, RankSteps)], trace: Option<&Trace>, out: &mut Vec<Finding>) {
    for (k, s) in ranks {
        if s.steps == 0 {
            continue;
        }
        for tk in k.top_kernels.iter().filter(|x| fp32_gemm(&x.name)) {
            let per = tk.per_step_ms.unwrap_or(tk.total_ms / s.steps as f64) * 1000.0;
            let mut f = on_rank("fp32_gemm", s, per);
            f.where_.kernel = tk.name.clone();
            f.where_.line = tk.python.clone();
            let tensor = k.measured.tensor_active_pct.map_or(String::new(), |p| {
                format!("; tensor pipes active {p:.1} % (measured)")
            });
            f.evidence = format!(
                "{} x{}: {}/step, {} of GPU time, fp32 on the CUDA cores{tensor}",
                short_name(&tk.name),
                tk.count,
                ms(per),
                tk.share_pct.map_or("-".into(), |p| format!("{p:.1} %"))
            );
            if let Some(t) = trace {
                if let Some(id) = first_named(t, k.process, &tk.name) {
                    let sl = t.slices();
                    f.slice = Some(id);
                    f.start_ns = Some(sl.start_ns()[id.index()]);
                    f.end_ns = Some(sl.end_ns(id));
                }
            }
            unpredicted(
                &mut f,
                "the speed-up of TF32 or bf16 tensor cores over this kernel is not measured here (allow TF32: torch.backends.cuda.matmul.allow_tf32)",
            );
            out.push(f);
        }
    }
}

/// The first kernel named `name` of process `process`.
fn first_named(t: &Trace, process: ProcessId, name: &str) -> Option<SliceId> {
    let sl = t.slices();
    let id = t.strings().lookup(name)?;
    (0..sl.len()).map(SliceId::from_index).find(|&s| {
        let i = s.index();
        sl.kind()[i] == SliceKind::Kernel
            && sl.name()[i] == id
            && t.track(sl.track()[i]).process == process
    })
}

/// The Python line (else the native C/C++ caller) of the call that
/// launched GPU activity `id` of `process`.
fn launch_line(t: &Trace, process: ProcessId, id: SliceId) -> Option<String> {
    let sl = t.slices();
    let corr = sl.correlation()[id.index()];
    if corr == 0 {
        return None;
    }
    (0..sl.len())
        .map(SliceId::from_index)
        .filter(|&h| {
            let i = h.index();
            sl.correlation()[i] == corr
                && matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver)
                && t.track(sl.track()[i]).process == process
        })
        .find_map(|h| {
            t.arg_string(h, "python")
                .or_else(|| t.arg_string(h, crate::protocol::CALLER_ARG))
        })
}

/// Copies to or from pageable host memory (the copy blocks the host and
/// runs through a staging buffer), in each rank's window.
fn pageable(t: &Trace, ranks: &[(&RankReport, RankSteps)], out: &mut Vec<Finding>) {
    let sl = t.slices();
    for (k, s) in ranks {
        if s.steps == 0 {
            continue;
        }
        let (a, b) = (
            k.window.start_ns.unwrap_or(i64::MIN),
            k.window.end_ns.unwrap_or(i64::MAX),
        );
        let mut n = 0u64;
        let mut total = 0i64;
        let mut first: Option<SliceId> = None;
        for i in 0..sl.len() {
            if sl.kind()[i] != SliceKind::Memcpy {
                continue;
            }
            let id = SliceId::from_index(i);
            if t.track(sl.track()[i]).process != k.process {
                continue;
            }
            let st = sl.start_ns()[i];
            if st < a || st >= b || !t.copy_of(id).is_some_and(|c| c.pageable) {
                continue;
            }
            n += 1;
            total = total.saturating_add(sl.dur_ns()[i]);
            first.get_or_insert(id);
        }
        let Some(id) = first else {
            continue;
        };
        let per = total as f64 / 1000.0 / s.steps as f64;
        let mut f = on_rank("pageable_copy", s, per);
        f.where_.kernel = t.str(sl.name()[id.index()]).to_string();
        f.where_.line = launch_line(t, k.process, id).unwrap_or_default();
        f.evidence = format!(
            "{n} copies to or from pageable host memory, {}/step on the GPU (pin the host buffer: .pin_memory(), non_blocking=True)",
            ms(per)
        );
        f.slice = Some(id);
        f.start_ns = Some(sl.start_ns()[id.index()]);
        f.end_ns = Some(sl.end_ns(id));
        unpredicted(
            &mut f,
            "the replay cannot tell how fast a pinned copy would run, nor what the host does instead of waiting",
        );
        out.push(f);
    }
}

/// Work on the legacy default stream beside blocking streams of the same
/// GPU (the seed's footgun): each legacy-stream activity waits for the work
/// launched before it on those streams, and theirs waits for it, so streams
/// that would overlap run one after the other. Needs a recording that says
/// how each stream was created (`protocol::streams`); its gain is the
/// replay with those implicit waits dropped, and there is no finding when
/// that saves nothing.
fn legacy_stream(
    t: &Trace,
    ranks: &[(&RankReport, RankSteps)],
    pred: &mut Predictor,
    out: &mut Vec<Finding>,
) {
    use crate::model::TrackKind;
    use crate::protocol::streams::StreamCreation;
    let sl = t.slices();
    // Per rank: (legacy activities, their time, blocking streams with work,
    // the first legacy activity, the legacy stream's id).
    let mut seen: Vec<(usize, u64, i64, Vec<u32>, SliceId, u32)> = Vec::new();
    for (ri, (k, s)) in ranks.iter().enumerate() {
        if s.steps == 0 {
            continue;
        }
        let listed = crate::analysis::stream_creation::of_process(t, k.process);
        let creation = |device: crate::model::DeviceId, stream: u32| {
            let (_, v) = listed.iter().find(|(d, _)| *d == device)?;
            v.iter().find(|(id, _)| *id == stream).map(|(_, c)| *c)
        };
        let mut class: rustc_hash::FxHashMap<crate::model::TrackId, (StreamCreation, u32)> =
            Default::default();
        for tr in t.track_ids() {
            let track = t.track(tr);
            if track.process != k.process {
                continue;
            }
            if let TrackKind::Stream { device, stream } = track.kind {
                if let Some(c) = creation(device, stream) {
                    class.insert(tr, (c, stream));
                }
            }
        }
        if !class.values().any(|(c, _)| *c == StreamCreation::Legacy) {
            continue;
        }
        let (a, b) = (
            k.window.start_ns.unwrap_or(i64::MIN),
            k.window.end_ns.unwrap_or(i64::MAX),
        );
        let (mut n, mut total, mut first, mut legacy_id) = (0u64, 0i64, None, 0u32);
        let mut blocking: Vec<u32> = Vec::new();
        for i in 0..sl.len() {
            let Some(&(c, stream)) = class.get(&sl.track()[i]) else {
                continue;
            };
            let st = sl.start_ns()[i];
            if st < a || st >= b {
                continue;
            }
            match c {
                StreamCreation::Legacy => {
                    n += 1;
                    total = total.saturating_add(sl.dur_ns()[i]);
                    first.get_or_insert(SliceId::from_index(i));
                    legacy_id = stream;
                }
                StreamCreation::Blocking if !blocking.contains(&stream) => blocking.push(stream),
                _ => {}
            }
        }
        if let (Some(id), false) = (first, blocking.is_empty()) {
            blocking.sort_unstable();
            seen.push((ri, n, total, blocking, id, legacy_id));
        }
    }
    if seen.is_empty() {
        return;
    }
    let opts = WhatIfOptions {
        changes: Changes {
            unblock_legacy: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let gain = pred.gain(&opts);
    for (ri, n, total, blocking, id, legacy_id) in seen {
        let (_, s) = &ranks[ri];
        let per_step = |x: f64| x / s.steps as f64;
        let mut f = on_rank("legacy_stream", s, per_step(total as f64 / 1000.0));
        f.where_.kernel = t.str(sl.name()[id.index()]).to_string();
        let list: Vec<String> = blocking.iter().map(u32::to_string).collect();
        f.evidence = format!(
            "{:.1} GPU activities/step ({}/step) on the legacy default stream {legacy_id}, beside work on blocking stream(s) {}: each waits for the work launched before it there, and theirs waits for it (create the streams with cudaStreamNonBlocking, or launch this work on one of them)",
            per_step(n as f64),
            ms(per_step(total as f64 / 1000.0)),
            list.join(", ")
        );
        f.slice = Some(id);
        f.start_ns = Some(sl.start_ns()[id.index()]);
        f.end_ns = Some(sl.end_ns(id));
        match &gain {
            Ok((us, _)) if *us <= 0.0 => continue,
            _ => predicted(
                &mut f,
                "whatif --legacy-stream-nonblocking".into(),
                gain.clone(),
            ),
        }
        // What the waits cost the step is what the replay without them
        // saves (the legacy stream's own time is far less).
        if let Some(g) = f.predicted_gain_us {
            f.cost_per_step_us = f.cost_per_step_us.max(g);
        }
        out.push(f);
    }
}
