//! Reports over many rank files in bounded memory, and rank-set summaries.
//!
//! [`analyze`](super::analyze) holds every rank of a trace at once. Here
//! each file is loaded and analyzed on its own (one file per core at a
//! time, dropped once analyzed), keeping per file only a [`FileSummary`]:
//! its ranks' finished rows ([`RankPart`]: the rank's report rows, its
//! exposed-communication intervals and step numbers) and their NCCL
//! kernels as compact records (`xrank::CommRec`). Once every file is
//! read, [`merge`] numbers the ranks across files, matches the records
//! across ranks (`xrank::match_records`), finishes each rank's
//! cross-rank figures and assembles the same [`Report`] the in-memory path
//! gives for the same files (slice, process, device and track indices are
//! moved by the counts of the files before, as `Trace::append` does).
//!
//! Two things a file's analysis takes from the whole job are checked at
//! the merge: the rank numbers (a process without RANK gets the smallest
//! free number, which depends on the other files) and HTA's step filter
//! (on when the job names two distinct ProfilerStep events). A file
//! analyzed under another assumption is analyzed again ([`analyze_files`]);
//! summaries cannot be ([`merge`] refuses them with an error naming the file).
//!
//! A [`Summary`] (`report --summary-out`) is a list of file summaries with a
//! format name, a version and the analysis options; `report` merges
//! summaries of disjoint rank sets into the report of all their files
//! (docs/TRACE-SCHEMA.md, "Rank-set summaries").

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use super::assemble::Assembly;
use super::rank::{self, RankClaim};
use super::relocate::{Offsets, Relocate};
use super::{
    analyze_rank_alone, collectives, no_such_rank, profiler_step_names, records_only,
    split_other_processes, xrank, AnalysisOptions, OtherProcess, RankPart, Report,
};
use crate::diagnostic::Diagnostic;
use crate::error::{Result, TraceError};
use crate::load::{self, Outcome, Source};
use crate::model::Trace;

/// The `format` field of a summary file.
pub const SUMMARY_FORMAT: &str = "streamscope-summary";
/// The summary version this build writes and reads.
/// (2: a `checksum` of the content.)
pub const SUMMARY_VERSION: u32 = 3;

/// One rank file, analyzed on its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSummary {
    /// The file, as given.
    pub file: String,
    /// Skipped (a listed file that is empty or does not load): the warning.
    pub skipped: Option<Diagnostic>,
    /// Processes, devices, tracks and slices of the file's trace.
    pub processes: u32,
    /// See `processes`.
    pub devices: u32,
    /// See `processes`.
    pub tracks: u32,
    /// See `processes`.
    pub slices: u32,
    /// Records the collector or importer could not deliver.
    pub dropped_records: u64,
    /// The trace's own diagnostics (loading).
    pub diagnostics: Vec<Diagnostic>,
    /// RANK of each process that states one.
    pub process_ranks: Vec<u32>,
    /// Processes without GPU work.
    pub other_processes: Vec<OtherProcess>,
    /// What numbers each rank context (in trace order).
    pub claims: Vec<RankClaim>,
    /// The numbers its ranks were analyzed under.
    pub numbered: Vec<u32>,
    /// Up to two distinct ProfilerStep names of the file.
    pub step_names: Vec<String>,
    /// Whether HTA's step filter was on in its analysis.
    pub hta_filter: bool,
    /// Its ranks, in trace order.
    pub parts: Vec<RankPart>,
}

/// A rank set's file summaries: what `report --summary-out` writes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Always [`SUMMARY_FORMAT`].
    pub format: String,
    /// [`SUMMARY_VERSION`] of the writer.
    pub version: u32,
    /// CRC-32 (hex) of the content (`options` and `files`, as compact
    /// JSON with sorted keys), checked when the summary is read.
    #[serde(default)]
    pub checksum: String,
    /// The analysis options the files were analyzed with.
    pub options: String,
    /// Its files, in load order.
    pub files: Vec<FileSummary>,
}

/// The options as a summary records them (summaries merge only under equal options).
pub fn options_key(opts: &AnalysisOptions) -> String {
    let o = opts;
    format!(
        "rank {}, steps {}, HTA rounding {}, kernel wait {} ns, sync idle threshold {} us, stall tolerance {} ns, SM series {} points",
        o.rank.map_or("all".to_string(), |r| r.to_string()),
        o.steps.map_or("default".to_string(), |(a, b)| format!("{a}..{b}")),
        o.hta_rounding.map_or("auto".to_string(), |b| b.to_string()),
        o.consecutive_kernel_delay_ns,
        o.sync_gpu_idle_threshold_us,
        o.stall_tolerance_ns,
        o.sm_series_max_points
    )
}

/// Analyzes one loaded file on its own. `forced`: rank numbers and HTA
/// filter to use instead of the file's own (a second pass).
pub fn summarize_trace(
    trace: &Trace,
    file: &str,
    opts: &AnalysisOptions,
    forced: Option<(&[u32], bool)>,
) -> FileSummary {
    let all = rank::build(trace, opts.hta_rounding);
    let mut other_processes = Vec::new();
    let mut ctxs = split_other_processes(trace, all, &mut other_processes);
    let claims = rank::claims(trace, &ctxs);
    let numbered = match forced {
        Some((n, _)) if n.len() == ctxs.len() => n.to_vec(),
        _ => rank::number(&claims),
    };
    for (c, &r) in ctxs.iter_mut().zip(&numbered) {
        c.rank = r;
    }
    let step_names = profiler_step_names(trace);
    let hta_filter = forced.map_or(step_names.len() >= 2, |f| f.1);
    let nccl = collectives::NcclNames::new(trace);
    let keys = crate::comms::CommKeys::new(trace);
    let input = super::passes::Inputs {
        trace,
        opts,
        hta_filter,
        nccl: &nccl,
        keys: &keys,
        split: false,
    };
    let parts = ctxs
        .into_iter()
        .map(|ctx| {
            if opts.rank.is_none_or(|r| r == ctx.rank) {
                analyze_rank_alone(&input, ctx)
            } else {
                records_only(trace, &ctx, &nccl, &keys)
            }
        })
        .collect();
    FileSummary {
        file: file.to_string(),
        skipped: None,
        processes: trace.processes().len() as u32,
        devices: trace.devices().len() as u32,
        tracks: trace.tracks().len() as u32,
        slices: trace.slices().len() as u32,
        dropped_records: trace.dropped_records(),
        diagnostics: trace.diagnostics().to_vec(),
        process_ranks: trace.processes().iter().filter_map(|p| p.rank).collect(),
        other_processes,
        claims,
        numbered,
        step_names,
        hta_filter,
        parts,
    }
}

/// Loads and analyzes `paths` (files or directories, as
/// [`load::load_paths`] takes them) one file at a time on all cores;
/// `progress(done, total)` after each file. Files whose ranks or step
/// filter depend on the others are analyzed again. Errors as `load_paths`.
pub fn summarize_files(
    paths: &[PathBuf],
    opts: &AnalysisOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<FileSummary>> {
    let files = load::sources(paths)?;
    let mut out: Vec<FileSummary> = Vec::with_capacity(files.len());
    each_summary(&files, opts, None, progress, &mut |_, s| {
        out.push(s.clone())
    })?;
    // A second pass for files analyzed under another rank numbering or step filter.
    let checks: Vec<Check> = out.iter().map(Check::of).collect();
    let (numbers, hta) = expected(&checks);
    for (i, f) in files.iter().enumerate() {
        if out[i].skipped.is_none() && (out[i].numbered != numbers[i] || out[i].hta_filter != hta) {
            match analyze_source(f, opts, Some((&numbers[i], hta))) {
                Analyzed::Summary(s) | Analyzed::Skipped(s, None) => out[i] = s,
                Analyzed::Failed(e) | Analyzed::Skipped(_, Some(e)) => return Err(e),
            }
        }
    }
    Ok(out)
}

/// Analyzes `files` one per core at a time, handing each file's summary
/// to `each(i, summary)` on this thread, in file order. `forced`: the
/// rank numbers of each file and the step filter (a second pass).
fn each_summary(
    files: &[Source],
    opts: &AnalysisOptions,
    forced: Option<(&[Vec<u32>], bool)>,
    progress: &(dyn Fn(usize, usize) + Sync),
    each: &mut dyn FnMut(usize, &FileSummary),
) -> Result<()> {
    let total = files.len();
    let done = AtomicUsize::new(0);
    let mut first_error: Option<TraceError> = None;
    let mut failed: Option<TraceError> = None;
    let mut loaded = false;
    // Files finish out of order: hold the early ones until their turn.
    let mut waiting: std::collections::BTreeMap<usize, Analyzed> = Default::default();
    let mut next = 0usize;
    let mut take = |i: usize, a: Analyzed| {
        waiting.insert(i, a);
        while let Some(a) = waiting.remove(&next) {
            match a {
                Analyzed::Summary(s) => {
                    loaded = true;
                    each(next, &s);
                }
                Analyzed::Skipped(s, e) => {
                    if let Some(e) = e {
                        first_error.get_or_insert(e);
                    }
                    each(next, &s);
                }
                Analyzed::Failed(e) => {
                    failed.get_or_insert(e);
                }
            }
            next += 1;
        }
    };
    for_each_file(
        files,
        &|i, f| {
            let forced = forced.map(|(n, h)| (n[i].as_slice(), h));
            let out = analyze_source(f, opts, forced);
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            out
        },
        &mut take,
    );
    if let Some(e) = failed {
        return Err(e);
    }
    if !loaded {
        return Err(load::nothing_loaded(files, first_error));
    }
    Ok(())
}

/// [`summarize_files`] and [`merge`] in one stream: the report of `paths`,
/// equal to `analyze(load_paths(paths))`, holding one trace per core and
/// the rows and collective records of the ranks read so far. When a file's
/// ranks were numbered (or its steps filtered) otherwise than the whole
/// set needs, every file is analyzed again under the set's numbering.
pub fn analyze_files(
    paths: &[PathBuf],
    opts: &AnalysisOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Report> {
    let (files, notes) = load::sources_noted(paths)?;
    let first = paths.first().cloned().unwrap_or_default();
    let mut m = Merger::new();
    m.notes = notes.clone();
    each_summary(&files, opts, None, progress, &mut |_, s| m.push(s))?;
    let (numbers, hta) = match m.finish(opts) {
        Ok(r) => return Ok(r),
        Err(Mismatch { numbers, hta, .. }) => (numbers, hta),
    };
    let mut m = Merger::new();
    m.notes = notes;
    each_summary(
        &files,
        opts,
        Some((&numbers, hta)),
        progress,
        &mut |_, s| m.push(s),
    )?;
    m.finish(opts).map_err(|e| TraceError::Summary {
        path: first,
        why: e.why,
    })
}

enum Analyzed {
    Summary(FileSummary),
    Skipped(FileSummary, Option<TraceError>),
    Failed(TraceError),
}

fn analyze_source(f: &Source, opts: &AnalysisOptions, forced: Option<(&[u32], bool)>) -> Analyzed {
    let name = f.path.display().to_string();
    // Only analyzed: a Kineto file's arguments no analysis reads are skipped.
    match load::judge(
        f,
        load::load_file_keeping(&f.path, load::KeepArgs::Analysis),
    ) {
        Outcome::Loaded(t) => Analyzed::Summary(summarize_trace(&t, &name, opts, forced)),
        Outcome::Skipped(d, e) => Analyzed::Skipped(
            FileSummary {
                file: name,
                skipped: Some(d),
                ..Default::default()
            },
            e,
        ),
        Outcome::Failed(e) => Analyzed::Failed(e),
    }
}

/// `f(i, item)` over `items` with one worker per core, each taking the
/// next item when done with its last (so memory holds one file per
/// core); each result handed to `take(i, result)` on the calling thread
/// as it arrives.
///
/// What `take` keeps across files it copies: the copy is allocated by
/// this thread, apart from the workers' traces, so the memory a freed
/// trace leaves is whole for the next one rather than cut up by small
/// rows that outlive it (with glibc, each thread allocates from its own arena).
fn for_each_file<T: Sync, R: Send>(
    items: &[T],
    f: &(dyn Fn(usize, &T) -> R + Sync),
    take: &mut dyn FnMut(usize, R),
) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len())
        .max(1);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, R)>();
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let tx = tx.clone();
                let next = &next;
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    if tx.send((i, f(i, item))).is_err() {
                        break;
                    }
                })
            })
            .collect();
        drop(tx);
        for (i, r) in rx {
            take(i, r);
        }
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// What the merge checks of each file: how its ranks are numbered and
/// whether its steps were filtered as the whole set needs.
struct Check {
    file: String,
    skipped: bool,
    processes: u32,
    claims: Vec<RankClaim>,
    numbered: Vec<u32>,
    step_names: Vec<String>,
    hta_filter: bool,
}

impl Check {
    fn of(f: &FileSummary) -> Check {
        Check {
            file: f.file.clone(),
            skipped: f.skipped.is_some(),
            processes: f.processes,
            claims: f.claims.clone(),
            numbered: f.numbered.clone(),
            step_names: f.step_names.clone(),
            hta_filter: f.hta_filter,
        }
    }
}

/// Files analyzed under another numbering or step filter than the set's.
struct Mismatch {
    why: String,
    /// The file (in push order) that does not fit.
    at: usize,
    numbers: Vec<Vec<u32>>,
    hta: bool,
}

/// File summaries gathered in load order into one report.
struct Merger {
    asm: Assembly,
    head: Report,
    skipped: Vec<Diagnostic>,
    process_ranks: Vec<(u32, usize)>,
    checks: Vec<Check>,
    /// Slices, processes, devices and tracks of the files so far.
    at: Offsets,
    /// Notes on the file set, after the files' own (the captures chosen).
    notes: Vec<Diagnostic>,
}

impl Merger {
    fn new() -> Merger {
        Merger {
            asm: Assembly::default(),
            head: Report::default(),
            skipped: Vec::new(),
            process_ranks: Vec::new(),
            checks: Vec::new(),
            at: Offsets::default(),
            notes: Vec::new(),
        }
    }

    /// Adds the next file, copying what it keeps (allocated by this
    /// thread: the summary may be freed by another, see [`for_each_file`]).
    fn push(&mut self, f: &FileSummary) {
        let i = self.checks.len();
        self.checks.push(Check::of(f));
        if let Some(d) = &f.skipped {
            self.skipped.push(d.clone());
            return;
        }
        let by = self.at;
        let h = &mut self.head;
        h.dropped_records = h.dropped_records.saturating_add(f.dropped_records);
        h.diagnostics.extend(f.diagnostics.iter().cloned());
        self.process_ranks
            .extend(f.process_ranks.iter().map(|&r| (r, i)));
        for o in &f.other_processes {
            let mut o = o.clone();
            o.relocate(&by);
            h.other_processes.push(o);
        }
        for part in &f.parts {
            // The part itself is borrowed: copy it, then move the copy in.
            let mut part = part.clone();
            part.relocate(&by);
            self.asm.push(part);
        }
        self.at = Offsets {
            slices: by.slices.saturating_add(f.slices),
            processes: by.processes.saturating_add(f.processes),
            devices: by.devices.saturating_add(f.devices),
            tracks: by.tracks.saturating_add(f.tracks),
        };
    }

    /// The report of the files pushed, or why it cannot be made from them.
    fn finish(self, opts: &AnalysisOptions) -> std::result::Result<Report, Mismatch> {
        let (numbers, hta) = expected(&self.checks);
        for (at, (f, n)) in self.checks.iter().zip(&numbers).enumerate() {
            if f.skipped {
                continue;
            }
            let why = if f.numbered != *n {
                format!(
                    "{}: its ranks were numbered {:?} alone but are {:?} among all files (a process without RANK, or a rank given twice): analyze these files together",
                    f.file, f.numbered, n
                )
            } else if f.hta_filter != hta {
                format!(
                    "{}: HTA's step filter was {} for it alone but is {} for all files (ProfilerStep names differ across files): analyze these files together",
                    f.file,
                    if f.hta_filter { "on" } else { "off" },
                    if hta { "on" } else { "off" }
                )
            } else {
                continue;
            };
            return Err(Mismatch {
                why,
                at,
                numbers,
                hta,
            });
        }
        let mut head = self.head;
        let names: Vec<&str> = self.checks.iter().map(|c| c.file.as_str()).collect();
        let mut skipped = self.skipped;
        skipped.extend(load::duplicate_ranks(self.process_ranks, &|i| {
            names[i].to_string()
        }));
        head.diagnostics.extend(skipped);
        head.diagnostics.extend(self.notes);
        if let Some(r) = opts.rank {
            if !self.asm.comms.iter().any(|c| c.rank == r) {
                head.diagnostics.push(no_such_rank(r));
            }
        }
        let matching = xrank::match_records(&self.asm.comms);
        Ok(self.asm.finish(head, &matching, opts))
    }
}

/// The rank numbers each file's contexts get in the whole set, and
/// whether HTA's step filter is on for the set.
fn expected(files: &[Check]) -> (Vec<Vec<u32>>, bool) {
    let mut claims: Vec<RankClaim> = Vec::new();
    let mut by = Offsets::default();
    for f in files {
        claims.extend(f.claims.iter().map(|c| {
            let mut c = *c;
            c.relocate(&by);
            c
        }));
        by.processes = by.processes.saturating_add(f.processes);
    }
    let mut all = rank::number(&claims).into_iter();
    let numbers = files
        .iter()
        .map(|f| all.by_ref().take(f.claims.len()).collect())
        .collect();
    let mut names: Vec<&str> = files
        .iter()
        .flat_map(|f| f.step_names.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    (numbers, names.len() >= 2)
}

/// Merges file summaries (in load order) into the report of all their
/// files, under `opts` (those they were analyzed with). An error names a
/// file whose ranks were numbered, or whose steps were filtered, otherwise
/// than the whole set needs (a summary cannot be analyzed again).
pub fn merge(files: &[FileSummary], opts: &AnalysisOptions) -> std::result::Result<Report, String> {
    let mut m = Merger::new();
    for f in files {
        m.push(f);
    }
    m.finish(opts).map_err(|e| e.why)
}

impl Summary {
    /// The summary of `files` analyzed under `opts`.
    pub fn new(files: Vec<FileSummary>, opts: &AnalysisOptions) -> Summary {
        Summary {
            format: SUMMARY_FORMAT.to_string(),
            version: SUMMARY_VERSION,
            checksum: String::new(),
            options: options_key(opts),
            files,
        }
    }

    /// Writes it as JSON to `path` (atomically; an existing file only with `overwrite`).
    /// Its checksum is computed here.
    pub fn write(&self, path: &Path, overwrite: bool) -> Result<()> {
        let sum = content_checksum(
            &serde_json::to_value(&self.options).unwrap_or_default(),
            &serde_json::to_value(&self.files).unwrap_or_default(),
        );
        let out = Summary {
            checksum: sum,
            ..self.clone()
        };
        load::write_atomically(path, overwrite, |w| {
            serde_json::to_writer(w, &out).map_err(std::io::Error::other)
        })
    }

    /// Reads a summary file; an error names the file and says what is wrong.
    pub fn read(path: &Path) -> Result<Summary> {
        let bad = |why: String| TraceError::Summary {
            path: path.to_path_buf(),
            why,
        };
        let f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
        let v: serde_json::Value = serde_json::from_reader(std::io::BufReader::new(f))
            .map_err(|e| bad(format!("not a streamscope summary: {e}")))?;
        if v.get("format").and_then(|x| x.as_str()) != Some(SUMMARY_FORMAT) {
            return Err(bad("not a streamscope summary (no format field)".into()));
        }
        match v.get("version") {
            Some(x) if x.as_u64() == Some(u64::from(SUMMARY_VERSION)) => {}
            Some(x) if x.as_u64().is_some() => {
                return Err(bad(format!(
                    "summary version {x}; this build reads version {SUMMARY_VERSION}"
                )))
            }
            Some(x) => {
                let x = x.to_string();
                return Err(bad(format!(
                    "damaged summary: version {} is not a version number (this build reads version {SUMMARY_VERSION})",
                    x.chars().take(40).collect::<String>()
                )));
            }
            None => {
                return Err(bad(format!(
                    "damaged summary: no version field (this build reads version {SUMMARY_VERSION})"
                )))
            }
        }
        let null = serde_json::Value::Null;
        let sum = content_checksum(
            v.get("options").unwrap_or(&null),
            v.get("files").unwrap_or(&null),
        );
        let stated = v.get("checksum").and_then(|x| x.as_str()).unwrap_or("");
        if stated != sum {
            return Err(bad(format!(
                "damaged summary: its content does not match its checksum ({} stated, {sum} computed); make it again with --summary-out",
                if stated.is_empty() { "none" } else { stated }
            )));
        }
        serde_json::from_value(v).map_err(|e| bad(format!("damaged summary: {e}")))
    }

    /// Whether `path` starts like a summary file (its first bytes).
    pub fn is_summary_file(path: &Path) -> bool {
        use std::io::Read;
        let mut head = [0u8; 64];
        // A pipe or FIFO is read once, by the load: never sniffed here.
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return false;
        }
        let Ok(mut f) = std::fs::File::open(path) else {
            return false;
        };
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        starts_like_summary(&head[..n])
    }
}

/// Whether `head` starts like a summary: `{"format": "streamscope-summary"`,
/// whitespace allowed between the tokens, or, as a JSON tool that sorts
/// keys writes it, an object whose first key is another of a summary's
/// own (no trace's top level has them); [`Summary::read`] judges the rest.
fn starts_like_summary(head: &[u8]) -> bool {
    let mut rest = head;
    let mut token = |t: &[u8]| {
        let at = rest
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        let ok = rest[at..].starts_with(t);
        if ok {
            rest = &rest[at + t.len()..];
        }
        ok
    };
    if !token(b"{") {
        return false;
    }
    if token(b"\"format\"") {
        return token(b":") && token(format!("\"{SUMMARY_FORMAT}\"").as_bytes());
    }
    ["checksum", "files", "options", "version"]
        .iter()
        .any(|k| token(format!("\"{k}\"").as_bytes()) && token(b":"))
}

/// CRC-32 (hex) of a summary's `options` and `files` as compact JSON
/// (keys sorted: the same whatever spaces or key order a tool wrote).
fn content_checksum(options: &serde_json::Value, files: &serde_json::Value) -> String {
    struct Crc(flate2::Crc);
    impl std::io::Write for Crc {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.update(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut crc = Crc(flate2::Crc::new());
    let _ = serde_json::to_writer(&mut crc, &[options, files]);
    format!("{:08x}", crc.0.sum())
}

/// Merges summary files (in order) into one report; they must have been
/// made with `opts`. One summary is held at a time besides the merged rows.
pub fn merge_summaries(paths: &[PathBuf], opts: &AnalysisOptions) -> Result<Report> {
    let key = options_key(opts);
    let mut m = Merger::new();
    // The summary each file pushed came from.
    let mut owners: Vec<usize> = Vec::new();
    for (k, path) in paths.iter().enumerate() {
        let s = Summary::read(path)?;
        if s.options != key {
            return Err(TraceError::Summary {
                path: path.clone(),
                why: format!(
                    "made with other analysis options ({}) than this report's ({key}): give `report` the options the summaries were made with",
                    s.options
                ),
            });
        }
        for f in &s.files {
            m.push(f);
            owners.push(k);
        }
    }
    m.finish(opts).map_err(|e| TraceError::Summary {
        path: owners
            .get(e.at)
            .and_then(|&k| paths.get(k))
            .cloned()
            .unwrap_or_default(),
        why: e.why,
    })
}
