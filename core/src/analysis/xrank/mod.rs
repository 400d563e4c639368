//! One collective, every rank: NCCL kernels matched across ranks, each
//! kernel split into waiting for peers and transfer.
//!
//! Matching (docs/METRICS.md, "Cross-rank collectives"):
//! - by (process group, sequence number) when every NCCL kernel of every
//!   rank carries both ([`crate::comms::CollectiveRecord`]);
//! - else by order: per rank, the NCCL kernels of each collective kind on
//!   each NCCL stream, in start order; the i-th of every rank is one
//!   instance, only when every rank has the group with the same count and
//!   the same sequence of kernel names (else a note, and no pairs).
//!
//! Ranks on one clock (one clock domain on one host) are compared as they
//! are; ranks on other clocks are first put on the first rank's clock by
//! an offset and a drift estimated from the matched instances' ends
//! ([`clocks`]).
//!
//! The matching reads only [`RankComms`]: per rank, one compact
//! [`CommRec`] per NCCL kernel, taken from its trace by [`collect`]. A
//! streamed report (`analysis::streamed`) keeps those records across rank
//! files and matches them once every file was read.

pub(crate) mod clocks;
mod groups;
pub mod notes;

use groups::{groups_by_order, groups_by_sequence, match_groups, Groups, Matched, Pool};
pub(crate) mod summary;

pub use notes::{MatchKey, MatchNote, RankCount};

use crate::model::{ProcessId, SliceId};
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::collectives::{param_comms_by_track, NcclNames};
use super::nccl::bus_factor;
use super::rank::{Ev, IntMap, RankCtx, NONE};
use super::report::ClockOffset;
use crate::comms::{CollectiveRecord, CommKeys};
use crate::model::{ClockDomain, SliceClass, SliceKind, Trace};

/// One rank's kernel of a matched collective instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// The rank.
    pub rank: u32,
    /// The NCCL kernel slice.
    pub slice: SliceId,
    /// Start of the host call that launched it, when present (filled by
    /// `match_ranks`, which has the trace; `None` from `match_records`).
    pub launch_ns: Option<i64>,
    /// Kernel start and end (as the rank's analysis sees them).
    pub start_ns: i64,
    /// Kernel end.
    pub end_ns: i64,
    /// From its start to the last rank's kernel start (clipped to the kernel).
    pub wait_ns: i64,
}

impl Part {
    /// The rest of the kernel after the wait.
    pub fn transfer_ns(&self) -> i64 {
        self.end_ns
            .saturating_sub(self.start_ns)
            .saturating_sub(self.wait_ns)
            .max(0)
    }
}

/// One collective call seen on every rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Canonical collective (AllGather, ...), "unknown" when neither name nor args say.
    pub kind: String,
    /// The matching group: "pg NAME" or "stream S".
    pub group: String,
    /// Sequence number when matched by it.
    pub seq: Option<u64>,
    /// One part per rank, in rank order.
    pub parts: Vec<Part>,
    /// Index into `parts` of the last rank to arrive (latest kernel start).
    pub last: usize,
    /// Last kernel start − first kernel start.
    pub skew_ns: i64,
    /// Latest end − last start: the time the transfer took once all arrived.
    pub transfer_ns: i64,
    /// Message bytes when known.
    pub bytes: Option<u64>,
    /// Ranks in the communicator (group size, else the ranks matched).
    pub group_size: u32,
}

impl Instance {
    /// Bus bandwidth of the transfer part (nccl-tests factors), GB/s.
    pub fn bus_bw_gbps(&self) -> Option<f64> {
        let b = self.bytes? as f64 * bus_factor(&self.kind, self.group_size)?;
        (self.transfer_ns > 0).then(|| b / self.transfer_ns as f64)
    }
}

/// The result of matching.
#[derive(Debug, Default)]
pub struct Matching {
    /// Matched instances, in the order of the first rank's kernels per group.
    pub instances: Vec<Instance>,
    /// Slice id -> (instance, part); filled by `match_ranks` (one trace),
    /// empty from `match_records` alone.
    pub by_slice: IntMap<SliceId, (u32, u32)>,
    /// Per rank (in the order given), per record: its instance, or `NONE`.
    /// The part of rank `r` in an instance is `parts[r]`.
    pub of_rec: Vec<Vec<u32>>,
    /// Why something was not matched.
    pub notes: Vec<MatchNote>,
    /// Clocks of the ranks, as a phrase ("monotonic, one host").
    pub clocks: String,
    /// Whether the ranks' timestamps can be compared.
    pub comparable: bool,
    /// Communication kernels of the ranks, matched and not.
    pub comm_kernels: u64,
    /// How they were matched: "sequence", "order" or "" (not matched).
    pub method: String,
    /// Offsets of the clocks other than the first rank's, estimated from
    /// the matched instances (times in `instances` are on the first rank's clock).
    pub clock_offsets: Vec<ClockOffset>,
}

impl Matching {
    /// Kernels that belong to a matched instance.
    pub fn matched_kernels(&self) -> u64 {
        self.of_rec
            .iter()
            .map(|v| v.iter().filter(|&&i| i != NONE).count() as u64)
            .sum()
    }
}

/// "No value" in the u64 fields of a [`CommRec`].
pub const NO_U64: u64 = u64::MAX;

/// One NCCL kernel of a rank as the matching needs it (64 bytes; absent
/// values are [`NONE`] or [`NO_U64`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommRec {
    /// The kernel's slice id in its trace.
    pub slice: SliceId,
    /// Kernel start, as the rank's analysis sees it (µs-rounded for HTA ranks).
    pub s: i64,
    /// Kernel end.
    pub e: i64,
    /// CUDA stream id of its stream (none off a CUDA stream).
    pub stream: Option<u32>,
    /// Kernel name (index into [`RankComms::names`]).
    pub name: u32,
    /// Collective kind ("AllGather", "unknown"; index into the names).
    pub kind: u32,
    /// Process group name (index into the names), or [`NONE`].
    pub pg: u32,
    /// Sequence number in its process group, or [`NO_U64`].
    pub seq: u64,
    /// Message bytes, or [`NO_U64`].
    pub bytes: u64,
    /// Group size, or [`NONE`].
    pub group_size: u32,
    /// Index into the rank's steps of the kernel's step, or [`NONE`].
    pub step: u32,
    /// Whether the kernel is in the rank's headline window.
    pub head: bool,
}

fn opt_u64(v: u64) -> Option<u64> {
    (v != NO_U64).then_some(v)
}

fn opt_u32(v: u32) -> Option<u32> {
    (v != NONE).then_some(v)
}

/// One rank's NCCL kernels and what groups its clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankComms {
    /// The rank number.
    pub rank: u32,
    /// Its process in the (whole) trace.
    pub process: ProcessId,
    /// WORLD_SIZE its process states.
    pub world_size: Option<u32>,
    /// Clock domain of its timestamps.
    pub clock: ClockDomain,
    /// Host of its process ("" when unknown).
    pub host: String,
    /// Strings the records index (kernel names, kinds, process groups).
    pub names: Vec<String>,
    /// Its communication kernels, in the rank's GPU order (start, slice id).
    pub recs: Vec<CommRec>,
}

impl RankComms {
    fn intern(&mut self, map: &mut HashMap<String, u32>, s: &str) -> u32 {
        if let Some(&i) = map.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        map.insert(s.to_string(), i);
        i
    }
}

/// Whether GPU event `e` is a communication kernel (what is matched).
pub fn is_comm_kernel(t: &Trace, e: &Ev) -> bool {
    e.class == SliceClass::Communication && t.slices().kind()[e.id as usize] == SliceKind::Kernel
}

/// The records of `ctx`'s communication kernels; `head` says which are in
/// its headline window (steps as assigned in `ctx.gpu`).
pub fn collect(
    t: &Trace,
    ctx: &RankCtx,
    names: &NcclNames,
    keys: &CommKeys,
    head: &dyn Fn(&Ev) -> bool,
) -> RankComms {
    let sl = t.slices();
    let p = t.processes().get(ctx.process.index());
    let mut out = RankComms {
        rank: ctx.rank,
        process: ctx.process,
        world_size: p.and_then(|p| p.world_size),
        clock: p.map(|p| p.clock).unwrap_or_default(),
        host: p.map(|p| p.hostname.clone()).unwrap_or_default(),
        ..Default::default()
    };
    let mut map: HashMap<String, u32> = HashMap::new();
    // Kernel names by string id, interned once each.
    let mut name_of: IntMap<u32, u32> = IntMap::default();
    let pc = if keys.none() {
        Default::default()
    } else {
        param_comms_by_track(t, ctx)
    };
    for e in &ctx.gpu {
        if !is_comm_kernel(t, e) {
            continue;
        }
        let i = e.id as usize;
        let mut rec = if keys.none() {
            CollectiveRecord::default()
        } else {
            CollectiveRecord::of_slice(t, keys, SliceId::from_index(i))
        };
        if !keys.none() {
            if let Some(h) = ctx
                .corr
                .get(sl.correlation()[i])
                .and_then(|l| enclosing(t, &pc, l))
            {
                rec.fill_from(t, keys, SliceId::from_index(h as usize));
            }
        }
        let kind = names
            .info(t, e.id)
            .map(|n| n.collective.as_str())
            .filter(|k| !k.is_empty())
            .or(rec.collective.as_deref())
            .unwrap_or("unknown")
            .to_string();
        let kind = out.intern(&mut map, &kind);
        let n = sl.name()[i].get();
        let name = match name_of.get(&n) {
            Some(&x) => x,
            None => {
                let x = out.intern(&mut map, t.str(sl.name()[i]));
                name_of.insert(n, x);
                x
            }
        };
        let pg = match &rec.process_group {
            Some(g) => out.intern(&mut map, g),
            None => NONE,
        };
        let stream = ctx.streams.get(e.stream as usize).and_then(|k| k.stream());
        out.recs.push(CommRec {
            slice: e.slice(),
            s: e.s,
            e: e.e,
            stream,
            name,
            kind,
            pg,
            seq: rec.seq.unwrap_or(NO_U64),
            bytes: rec.bytes().unwrap_or(NO_U64),
            group_size: rec.group_size.unwrap_or(NONE),
            step: e.step,
            head: head(e),
        });
    }
    out.recs.shrink_to_fit();
    out
}

/// Matches the NCCL kernels of `ctxs` across ranks (steps unassigned):
/// [`collect`] per context, then [`match_records`]; `by_slice` and each
/// part's launch filled.
pub fn match_ranks(t: &Trace, ctxs: &[RankCtx], names: &NcclNames) -> Matching {
    let keys = CommKeys::new(t);
    let comms: Vec<RankComms> = ctxs
        .iter()
        .map(|c| collect(t, c, names, &keys, &|_| false))
        .collect();
    let mut m = match_records(&comms);
    for (c, v) in m.of_rec.iter().enumerate() {
        for (k, &i) in v.iter().enumerate() {
            if i == NONE {
                continue;
            }
            let rec = &comms[c].recs[k];
            m.by_slice.insert(rec.slice, (i, c as u32));
            if let Some(p) = m.instances[i as usize].parts.get_mut(c) {
                // The part's times are the record's moved by its clock's offset.
                let off = p.start_ns.saturating_sub(rec.s);
                p.launch_ns = ctxs[c]
                    .launch_start(t, rec.slice.get())
                    .map(|l| l.saturating_add(off));
            }
        }
    }
    m
}

/// Matches the ranks' records (`ranks` in rank-context order).
pub fn match_records(ranks: &[RankComms]) -> Matching {
    let mut m = Matching {
        of_rec: ranks.iter().map(|r| vec![NONE; r.recs.len()]).collect(),
        ..Default::default()
    };
    let comm: usize = ranks.iter().map(|r| r.recs.len()).sum();
    m.comm_kernels = comm as u64;
    let any_comm = comm > 0;
    if any_comm {
        if let Some(note) = missing_ranks_note(ranks) {
            m.notes.push(note);
            return m;
        }
    }
    if ranks.len() < 2 || !any_comm {
        return m;
    }
    let pool = Pool::of(ranks);
    let cg = clocks::ClockGroups::of(ranks.iter().map(|r| (r.clock, r.host.clone())));
    m.clocks = cg.phrase();
    let by_seq = ranks
        .iter()
        .all(|r| r.recs.iter().all(|k| k.seq != NO_U64 && k.pg != NONE));
    let groups: Vec<Groups> = if by_seq {
        m.method = "sequence".into();
        groups_by_sequence(ranks, &pool)
    } else {
        m.method = "order".into();
        groups_by_order(ranks, &pool)
    };
    let matched = match_groups(ranks, &groups, &pool, by_seq, &mut m.notes);
    let Some(off) = align_clocks(&mut m, &cg, ranks, &pool, &matched) else {
        return m;
    };
    m.comparable = true;
    // Instances are independent: built on all cores, kept in order.
    m.instances = crate::analysis::par_map((0..matched.instances.len()).collect(), &|o: usize| {
        let (gi, i) = matched.instances[o];
        let ks: Vec<(u32, &CommRec)> = (0..ranks.len())
            .map(|r| matched.rec(ranks, gi, i, r))
            .collect();
        let kind = pool.text(pool.g(0, ks[0].1.kind)).to_string();
        instance(ranks, matched.groups[gi].0, kind, &ks, &off)
    });
    for (o, &(gi, i)) in matched.instances.iter().enumerate() {
        for (r, of) in m.of_rec.iter_mut().enumerate() {
            of[matched.rec(ranks, gi, i, r).0 as usize] = o as u32;
        }
    }
    m
}

/// A rank of the job missing from the trace: its peers' kernels cannot be
/// paired. The note saying so, if one is.
fn missing_ranks_note(ranks: &[RankComms]) -> Option<MatchNote> {
    let mut procs: Vec<ProcessId> = ranks.iter().map(|c| c.process).collect();
    procs.dedup();
    let world = ranks.iter().filter_map(|r| r.world_size).max().unwrap_or(0);
    if world as usize <= procs.len() {
        return None;
    }
    Some(MatchNote::RanksMissing {
        processes: procs.len() as u32,
        world_size: world,
        ranks: ranks.iter().map(|c| c.rank).collect(),
    })
}

/// Ranks on other clocks (another host, another domain): put them on the
/// first rank's clock by the map (offset and drift) the instances' ends
/// say. Returns each rank's map, or None (with a note in `m`) when a clock
/// cannot be aligned.
fn align_clocks(
    m: &mut Matching,
    cg: &clocks::ClockGroups,
    ranks: &[RankComms],
    pool: &Pool,
    matched: &Matched,
) -> Option<Vec<clocks::ClockMap>> {
    let mut maps = vec![clocks::ClockMap::default(); ranks.len()];
    if cg.groups.len() <= 1 {
        return Some(maps);
    }
    let rank_nums: Vec<u32> = ranks.iter().map(|c| c.rank).collect();
    // Units: instances of one collective kind and message size.
    let mut unit_ids: HashMap<(u32, u64), u32> = HashMap::new();
    let units: Vec<u32> = matched
        .instances
        .iter()
        .map(|&(key, i)| {
            let k = matched.rec(ranks, key, i, 0).1;
            let n = unit_ids.len() as u32;
            *unit_ids.entry((pool.g(0, k.kind), k.bytes)).or_insert(n)
        })
        .collect();
    let samples = |_g: usize, rep: usize| -> Vec<clocks::Sample> {
        matched
            .instances
            .iter()
            .zip(&units)
            .map(|(&(key, i), &unit)| {
                let a = matched.rec(ranks, key, i, 0).1;
                let b = matched.rec(ranks, key, i, rep).1;
                clocks::Sample {
                    unit,
                    s0: a.s,
                    e0: a.e,
                    s1: b.s,
                    e1: b.e,
                }
            })
            .collect()
    };
    let est = clocks::estimate(cg, &rank_nums, &samples);
    if est.len() + 1 < cg.groups.len() {
        m.notes.push(MatchNote::ClocksUnaligned {
            clocks: m.clocks.clone(),
        });
        return None;
    }
    for (gi, o, map) in est {
        for (c, x) in maps.iter_mut().enumerate() {
            if cg.of[c] == gi {
                *x = map;
            }
        }
        m.clock_offsets.push(o);
    }
    m.clocks = format!(
        "{}; aligned to rank {}'s clock by collective ends",
        m.clocks, rank_nums[0]
    );
    Some(maps)
}

/// Builds one instance from the ranks' records (in rank-context order),
/// their times put on the first rank's clock by each rank's clock map.
fn instance(
    ranks: &[RankComms],
    key: &(String, String),
    kind: String,
    ks: &[(u32, &CommRec)],
    maps: &[clocks::ClockMap],
) -> Instance {
    let se: Vec<(i64, i64)> = ks
        .iter()
        .zip(maps)
        .map(|((_, k), c)| (c.apply(k.s), c.apply(k.e)))
        .collect();
    let first = se.iter().map(|x| x.0).min().unwrap_or(0);
    let mut last = 0usize;
    for (i, x) in se.iter().enumerate() {
        if x.0 > se[last].0 {
            last = i;
        }
    }
    let last_s = se[last].0;
    let latest_end = se.iter().map(|x| x.1).max().unwrap_or(last_s);
    let parts: Vec<Part> = ks
        .iter()
        .zip(ranks)
        .zip(&se)
        .map(|(((_, k), c), &(s, e))| Part {
            rank: c.rank,
            slice: k.slice,
            launch_ns: None,
            start_ns: s,
            end_ns: e,
            wait_ns: last_s
                .saturating_sub(s)
                .clamp(0, e.saturating_sub(s).max(0)),
        })
        .collect();
    let rec = ks.iter().map(|(_, k)| *k).find(|r| r.bytes != NO_U64);
    let n = ks.len() as u32;
    Instance {
        kind,
        group: key.0.clone(),
        seq: opt_u64(ks[0].1.seq),
        last,
        skew_ns: last_s.saturating_sub(first),
        transfer_ns: latest_end.saturating_sub(last_s).max(0),
        bytes: rec.and_then(|r| opt_u64(r.bytes)),
        group_size: rec
            .and_then(|r| opt_u32(r.group_size))
            .or(opt_u32(ks[0].1.group_size))
            .filter(|&g| g > 0)
            .unwrap_or(n),
        parts,
    }
}

/// The record_param_comms op enclosing host slice `launch` on its thread.
fn enclosing(
    t: &Trace,
    pc: &rustc_hash::FxHashMap<crate::model::TrackId, Vec<u32>>,
    launch: u32,
) -> Option<u32> {
    let sl = t.slices();
    let l = launch as usize;
    let v = pc.get(&sl.track()[l])?;
    let k = v.partition_point(|&h| sl.start_ns()[h as usize] <= sl.start_ns()[l]);
    let h = *v.get(k.checked_sub(1)?)?;
    (sl.end_ns(SliceId::from_index(h as usize)) >= sl.end_ns(SliceId::from_index(l))).then_some(h)
}
