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
//! an offset estimated from the matched instances' ends ([`clocks`]).

pub mod clocks;
pub mod summary;

use std::collections::BTreeMap;

use super::collectives::{param_comms_by_track, NcclNames};
use super::nccl::bus_factor;
use super::rank::{IntMap, RankCtx};
use super::report::ClockOffset;
use crate::comms::{CollectiveRecord, CommKeys};
use crate::model::{SliceClass, SliceKind, Trace};

/// One rank's kernel of a matched collective instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part {
    /// The rank.
    pub rank: u32,
    /// The NCCL kernel slice.
    pub slice: u32,
    /// Start of the host call that launched it, when present.
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
    /// Slice id -> (instance, part).
    pub by_slice: IntMap<u32, (u32, u32)>,
    /// Why something was not matched (one line each).
    pub notes: Vec<String>,
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

/// Per-kernel facts used for matching.
struct K {
    slice: u32,
    s: i64,
    e: i64,
    kind: String,
    rec: CollectiveRecord,
}

/// Matches the NCCL kernels of `ctxs` across ranks.
pub fn match_ranks(t: &Trace, ctxs: &[RankCtx], names: &NcclNames) -> Matching {
    let mut m = Matching::default();
    let sl = &t.slices;
    let comm: usize = ctxs
        .iter()
        .map(|c| {
            c.gpu
                .iter()
                .filter(|e| {
                    e.class == SliceClass::Communication
                        && sl.kind[e.id as usize] == SliceKind::Kernel
                })
                .count()
        })
        .sum();
    let any_comm = comm > 0;
    // A rank of the job missing from the trace: its peers' kernels cannot be paired.
    let mut procs: Vec<u32> = ctxs.iter().map(|c| c.process).collect();
    procs.dedup();
    let world = procs
        .iter()
        .filter_map(|&p| t.processes.get(p as usize).and_then(|p| p.world_size))
        .max()
        .unwrap_or(0);
    if any_comm && world as usize > procs.len() {
        let list: Vec<String> = ctxs.iter().map(|c| c.rank.to_string()).collect();
        m.notes.push(format!(
            "collectives not matched across ranks: the trace holds {} of the job's {world} ranks ({})",
            procs.len(),
            list.join(", ")
        ));
        m.comm_kernels = comm as u64;
        return m;
    }
    if ctxs.len() < 2 || !any_comm {
        m.comm_kernels = comm as u64;
        return m;
    }
    let keys = CommKeys::new(t);
    // Each rank's communication kernels with their kind and record.
    let mut per: Vec<Vec<(u16, K)>> = Vec::with_capacity(ctxs.len());
    for c in ctxs {
        let pc = if keys.none() {
            Default::default()
        } else {
            param_comms_by_track(t, c)
        };
        let mut v = Vec::new();
        for e in &c.gpu {
            let i = e.id as usize;
            if e.class != SliceClass::Communication || sl.kind[i] != SliceKind::Kernel {
                continue;
            }
            let mut rec = if keys.none() {
                CollectiveRecord::default()
            } else {
                CollectiveRecord::of_slice(t, &keys, i)
            };
            if !keys.none() {
                if let Some(h) = c
                    .corr
                    .get(sl.correlation[i])
                    .and_then(|l| enclosing(t, &pc, l))
                {
                    rec.fill_from(t, &keys, h as usize);
                }
            }
            let kind = names
                .info(t, e.id)
                .map(|n| n.collective.clone())
                .filter(|k| !k.is_empty())
                .or_else(|| rec.collective.clone())
                .unwrap_or_else(|| "unknown".to_string());
            v.push((
                e.stream,
                K {
                    slice: e.id,
                    s: e.s,
                    e: e.e,
                    kind,
                    rec,
                },
            ));
        }
        m.comm_kernels += v.len() as u64;
        per.push(v);
    }
    if m.comm_kernels == 0 {
        return m;
    }
    let cg = clocks::ClockGroups::new(t, ctxs);
    m.clocks = cg.phrase();
    let ranks: Vec<u32> = ctxs.iter().map(|c| c.rank).collect();
    let rank_list = |v: &[u32]| {
        v.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let by_seq = per.iter().all(|v| {
        v.iter()
            .all(|(_, k)| k.rec.seq.is_some() && k.rec.process_group.is_some())
    });
    let groups: Vec<BTreeMap<(String, String), Vec<K>>> = if by_seq {
        m.method = "sequence".into();
        per.into_iter()
            .map(|v| {
                let mut g: BTreeMap<(String, String), Vec<K>> = BTreeMap::new();
                for (_, k) in v {
                    let pg = k.rec.process_group.clone().unwrap_or_default();
                    g.entry((format!("pg {pg}"), String::new()))
                        .or_default()
                        .push(k);
                }
                for v in g.values_mut() {
                    v.sort_by_key(|k| (k.rec.seq, k.s));
                }
                g
            })
            .collect()
    } else {
        m.method = "order".into();
        // NCCL streams are paired by stream id when every rank uses the same
        // ids, else by the order of their first NCCL kernel.
        let ids: Vec<Vec<u32>> = per
            .iter()
            .zip(ctxs)
            .map(|(v, c)| {
                let mut out: Vec<u32> = Vec::new();
                for (s, _) in v {
                    let id = c.streams.get(*s as usize).map_or(u32::MAX, |k| k.stream);
                    if !out.contains(&id) {
                        out.push(id);
                    }
                }
                out
            })
            .collect();
        let sorted = |v: &Vec<u32>| {
            let mut v = v.clone();
            v.sort_unstable();
            v
        };
        let same_ids = ids.windows(2).all(|w| sorted(&w[0]) == sorted(&w[1]));
        per.into_iter()
            .zip(ctxs)
            .zip(&ids)
            .map(|((v, c), first_use)| {
                let mut g: BTreeMap<(String, String), Vec<K>> = BTreeMap::new();
                for (s, k) in v {
                    let id = c.streams.get(s as usize).map_or(u32::MAX, |k| k.stream);
                    let label = if same_ids {
                        format!("stream {id}")
                    } else {
                        let ord = first_use.iter().position(|&x| x == id).unwrap_or(0);
                        format!("NCCL stream #{ord}")
                    };
                    g.entry((label, k.kind.clone())).or_default().push(k);
                }
                g
            })
            .collect()
    };
    let mut matched: Vec<(&(String, String), Vec<&K>)> = Vec::new();
    let mut all_keys: Vec<&(String, String)> = groups.iter().flat_map(|g| g.keys()).collect();
    all_keys.sort();
    all_keys.dedup();
    for key in all_keys {
        let lists: Vec<Option<&Vec<K>>> = groups.iter().map(|g| g.get(key)).collect();
        let what = if key.1.is_empty() {
            key.0.clone()
        } else {
            format!("{} on {}", key.1, key.0)
        };
        let missing: Vec<u32> = lists
            .iter()
            .zip(&ranks)
            .filter(|(l, _)| l.is_none())
            .map(|(_, r)| *r)
            .collect();
        if !missing.is_empty() {
            m.notes.push(format!(
                "{what} not matched across ranks: rank(s) {} have none",
                rank_list(&missing)
            ));
            continue;
        }
        let lists: Vec<&Vec<K>> = lists.into_iter().flatten().collect();
        let counts: Vec<usize> = lists.iter().map(|l| l.len()).collect();
        if counts.windows(2).any(|w| w[0] != w[1]) {
            let list: Vec<String> = counts
                .iter()
                .zip(&ranks)
                .map(|(c, r)| format!("rank {r}: {c}"))
                .collect();
            m.notes.push(format!(
                "{what} not matched across ranks: kernel counts differ ({})",
                list.join(", ")
            ));
            continue;
        }
        let n = counts[0];
        let same = |i: usize| {
            let a = &lists[0][i];
            lists.iter().all(|l| {
                let b = &l[i];
                if by_seq {
                    b.rec.seq == a.rec.seq && b.kind == a.kind
                } else {
                    sl.name[b.slice as usize] == sl.name[a.slice as usize]
                }
            })
        };
        if let Some(i) = (0..n).find(|&i| !same(i)) {
            m.notes.push(format!(
                "{what} not matched across ranks: kernel {} differs between ranks ({})",
                i + 1,
                if by_seq {
                    "sequence number or collective"
                } else {
                    "kernel name"
                }
            ));
            continue;
        }
        for i in 0..n {
            matched.push((key, lists.iter().map(|l| &l[i]).collect()));
        }
    }
    // Ranks on other clocks (another host, another domain): put them on the
    // first rank's clock by the offset the instances' ends say.
    let mut off = vec![0i64; ctxs.len()];
    if cg.groups.len() > 1 {
        let obs: Vec<clocks::Obs> = matched
            .iter()
            .map(|(_, ks)| clocks::Obs {
                kind: &ks[0].kind,
                se: ks.iter().map(|k| (k.s, k.e)).collect(),
            })
            .collect();
        let est = clocks::estimate(&cg, &ranks, &obs);
        if est.len() + 1 < cg.groups.len() {
            m.notes.push(format!(
                "collectives not compared across ranks: their clocks differ ({}) and no matched collective aligns them",
                m.clocks
            ));
            return m;
        }
        for (g, o, ns) in est {
            for (c, x) in off.iter_mut().enumerate() {
                if cg.of[c] == g {
                    *x = ns;
                }
            }
            m.clock_offsets.push(o);
        }
        m.clocks = format!(
            "{}; aligned to rank {}'s clock by collective ends",
            m.clocks, ranks[0]
        );
    }
    m.comparable = true;
    for (key, ks) in matched {
        push_instance(t, ctxs, &mut m, key, &ks, &off);
    }
    m
}

/// Builds one instance from the ranks' kernels (in rank-context order),
/// their times moved by each rank's clock offset.
fn push_instance(
    t: &Trace,
    ctxs: &[RankCtx],
    m: &mut Matching,
    key: &(String, String),
    ks: &[&K],
    off: &[i64],
) {
    let se: Vec<(i64, i64)> = ks
        .iter()
        .zip(off)
        .map(|(k, o)| (k.s.saturating_add(*o), k.e.saturating_add(*o)))
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
        .zip(ctxs)
        .zip(se.iter().zip(off))
        .map(|((k, c), (&(s, e), o))| Part {
            rank: c.rank,
            slice: k.slice,
            launch_ns: c.launch_start(t, k.slice).map(|l| l.saturating_add(*o)),
            start_ns: s,
            end_ns: e,
            wait_ns: last_s
                .saturating_sub(s)
                .clamp(0, e.saturating_sub(s).max(0)),
        })
        .collect();
    let rec = ks.iter().map(|k| &k.rec).find(|r| r.bytes().is_some());
    let n = ks.len() as u32;
    let idx = m.instances.len() as u32;
    for (p, k) in ks.iter().enumerate() {
        m.by_slice.insert(k.slice, (idx, p as u32));
    }
    m.instances.push(Instance {
        kind: ks[0].kind.clone(),
        group: key.0.clone(),
        seq: ks[0].rec.seq,
        last,
        skew_ns: last_s.saturating_sub(first),
        transfer_ns: latest_end.saturating_sub(last_s).max(0),
        bytes: rec.and_then(|r| r.bytes()),
        group_size: rec
            .and_then(|r| r.group_size)
            .or(ks[0].rec.group_size)
            .filter(|&g| g > 0)
            .unwrap_or(n),
        parts,
    });
}

/// The record_param_comms op enclosing host slice `launch` on its thread.
fn enclosing(
    t: &Trace,
    pc: &std::collections::HashMap<crate::model::TrackId, Vec<u32>>,
    launch: u32,
) -> Option<u32> {
    let sl = &t.slices;
    let l = launch as usize;
    let v = pc.get(&sl.track[l])?;
    let k = v.partition_point(|&h| sl.start_ns[h as usize] <= sl.start_ns[l]);
    let h = *v.get(k.checked_sub(1)?)?;
    (sl.end_ns(h as usize) >= sl.end_ns(l)).then_some(h)
}
