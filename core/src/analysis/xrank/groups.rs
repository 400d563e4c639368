//! Pairing NCCL kernels across ranks: the ranks' strings pooled, their
//! records grouped (by process group and sequence number, else per NCCL
//! stream and kind in order), and the groups matched kernel by kernel,
//! with a [`MatchNote`] for each group that cannot be.

use std::collections::{BTreeMap, HashMap};

use super::notes::{MatchKey, MatchNote, RankCount};
use super::{CommRec, RankComms, NONE};

/// The ranks' strings in one pool, so that ids compare across ranks.
pub(super) struct Pool<'a> {
    /// Per rank: local string id -> pooled id.
    gid: Vec<Vec<u32>>,
    text: Vec<&'a str>,
}

impl<'a> Pool<'a> {
    pub(super) fn of(ranks: &'a [RankComms]) -> Self {
        let mut pool: HashMap<&str, u32> = HashMap::new();
        let mut text: Vec<&str> = Vec::new();
        let gid: Vec<Vec<u32>> = ranks
            .iter()
            .map(|r| {
                r.names
                    .iter()
                    .map(|s| {
                        *pool.entry(s.as_str()).or_insert_with(|| {
                            text.push(s.as_str());
                            text.len() as u32 - 1
                        })
                    })
                    .collect()
            })
            .collect();
        Pool { gid, text }
    }

    /// The pooled id of rank `r`'s string `local` (NONE when unknown).
    pub(super) fn g(&self, r: usize, local: u32) -> u32 {
        self.gid[r].get(local as usize).copied().unwrap_or(NONE)
    }

    pub(super) fn text(&self, id: u32) -> &'a str {
        self.text[id as usize]
    }
}

/// Per rank: matching key -> record indices, in matching order.
pub(super) type Groups = BTreeMap<(String, String), Vec<u32>>;

/// With sequence numbers: one group per process group, by sequence number.
pub(super) fn groups_by_sequence(ranks: &[RankComms], pool: &Pool) -> Vec<Groups> {
    ranks
        .iter()
        .enumerate()
        .map(|(ri, r)| {
            let mut gr: Groups = group_by(&r.recs, |rec| pool.g(ri, rec.pg))
                .into_iter()
                .map(|(pg, v)| ((format!("pg {}", pool.text(pg)), String::new()), v))
                .collect();
            for v in gr.values_mut() {
                v.sort_by_key(|&k| (r.recs[k as usize].seq, r.recs[k as usize].s));
            }
            gr
        })
        .collect()
}

/// Without: one group per NCCL stream and collective, in record order.
pub(super) fn groups_by_order(ranks: &[RankComms], pool: &Pool) -> Vec<Groups> {
    // NCCL streams are paired by stream id when every rank uses the same
    // ids, else by the order of their first NCCL kernel.
    let ids: Vec<Vec<Option<u32>>> = ranks
        .iter()
        .map(|r| {
            let mut out: Vec<Option<u32>> = Vec::new();
            for k in &r.recs {
                if !out.contains(&k.stream) {
                    out.push(k.stream);
                }
            }
            out
        })
        .collect();
    let sorted = |v: &Vec<Option<u32>>| {
        let mut v = v.clone();
        v.sort_unstable();
        v
    };
    let same_ids = ids.windows(2).all(|w| sorted(&w[0]) == sorted(&w[1]));
    ranks
        .iter()
        .enumerate()
        .zip(&ids)
        .map(|((ri, r), first_use)| {
            group_by(&r.recs, |rec| (rec.stream, pool.g(ri, rec.kind)))
                .into_iter()
                .map(|((id, kind), v)| {
                    let label = if same_ids {
                        match id {
                            Some(id) => format!("stream {id}"),
                            None => "no stream".to_string(),
                        }
                    } else {
                        let ord = first_use.iter().position(|&x| x == id).unwrap_or(0);
                        format!("NCCL stream #{ord}")
                    };
                    ((label, pool.text(kind).to_string()), v)
                })
                .collect::<Groups>()
        })
        .collect()
}

/// A group's key and each rank's record list.
pub(super) type Lists<'a> = (&'a (String, String), Vec<&'a Vec<u32>>);

/// The groups matched across ranks: each one's key and each rank's
/// record list, and (group, index in the lists) of each matched instance.
pub(super) struct Matched<'a> {
    pub(super) groups: Vec<Lists<'a>>,
    pub(super) instances: Vec<(usize, usize)>,
}

impl Matched<'_> {
    /// Rank `r`'s record (index, record) of instance `i` of group `gi`.
    pub(super) fn rec<'r>(
        &self,
        ranks: &'r [RankComms],
        gi: usize,
        i: usize,
        r: usize,
    ) -> (u32, &'r CommRec) {
        let k = self.groups[gi].1[r][i];
        (k, &ranks[r].recs[k as usize])
    }
}

/// Pairs the groups every rank has with the same kernels; a note in
/// `notes` for each group that cannot be.
pub(super) fn match_groups<'a>(
    ranks: &[RankComms],
    groups: &'a [Groups],
    pool: &Pool,
    by_seq: bool,
    notes: &mut Vec<MatchNote>,
) -> Matched<'a> {
    let rank_nums: Vec<u32> = ranks.iter().map(|c| c.rank).collect();
    let mut matched = Matched {
        groups: Vec::new(),
        instances: Vec::new(),
    };
    let mut all_keys: Vec<&(String, String)> = groups.iter().flat_map(|g| g.keys()).collect();
    all_keys.sort();
    all_keys.dedup();
    for key in all_keys {
        let lists: Vec<Option<&Vec<u32>>> = groups.iter().map(|g| g.get(key)).collect();
        let what = if key.1.is_empty() {
            key.0.clone()
        } else {
            format!("{} on {}", key.1, key.0)
        };
        let missing: Vec<u32> = lists
            .iter()
            .zip(&rank_nums)
            .filter(|(l, _)| l.is_none())
            .map(|(_, r)| *r)
            .collect();
        if !missing.is_empty() {
            notes.push(MatchNote::GroupMissing {
                group: what,
                ranks: missing,
            });
            continue;
        }
        let lists: Vec<&Vec<u32>> = lists.into_iter().flatten().collect();
        let counts: Vec<usize> = lists.iter().map(|l| l.len()).collect();
        if counts.windows(2).any(|w| w[0] != w[1]) {
            notes.push(MatchNote::CountsDiffer {
                group: what,
                counts: counts
                    .iter()
                    .zip(&rank_nums)
                    .map(|(&c, &rank)| RankCount {
                        rank,
                        kernels: c as u64,
                    })
                    .collect(),
            });
            continue;
        }
        let n = counts[0];
        let rec = |r: usize, i: usize| &ranks[r].recs[lists[r][i] as usize];
        let same = |i: usize| {
            let a = rec(0, i);
            (0..lists.len()).all(|r| {
                let b = rec(r, i);
                if by_seq {
                    b.seq == a.seq && pool.g(r, b.kind) == pool.g(0, a.kind)
                } else {
                    pool.g(r, b.name) == pool.g(0, a.name)
                }
            })
        };
        if let Some(i) = (0..n).find(|&i| !same(i)) {
            notes.push(MatchNote::KernelDiffers {
                group: what,
                kernel: i as u64 + 1,
                by: if by_seq {
                    MatchKey::Sequence
                } else {
                    MatchKey::KernelName
                },
            });
            continue;
        }
        let gi = matched.groups.len();
        matched.instances.extend((0..n).map(|i| (gi, i)));
        matched.groups.push((key, lists));
    }
    matched
}

/// Record indices grouped by `key`, each group in record order.
fn group_by<K: Eq + std::hash::Hash + Copy>(
    recs: &[CommRec],
    key: impl Fn(&CommRec) -> K,
) -> Vec<(K, Vec<u32>)> {
    let mut at: HashMap<K, usize> = HashMap::new();
    let mut out: Vec<(K, Vec<u32>)> = Vec::new();
    for (k, r) in recs.iter().enumerate() {
        let x = key(r);
        let i = *at.entry(x).or_insert_with(|| {
            out.push((x, Vec::new()));
            out.len() - 1
        });
        out[i].1.push(k as u32);
    }
    out
}
