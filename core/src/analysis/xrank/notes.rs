//! Why collectives were not matched across ranks, as data: a kind and its
//! figures. Tests assert on the kind; people read the `Display` line.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A rank's count of kernels in a matching group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankCount {
    /// The rank.
    pub rank: u32,
    /// Its kernels in the group.
    pub kernels: u64,
}

/// What the kernels of a group are compared by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKey {
    /// NCCL's sequence number and collective (the profiler plugin's records).
    Sequence,
    /// The kernel's name (no sequence numbers).
    KernelName,
}

/// One reason collectives were not matched. JSON: `{"kind": ..., fields}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MatchNote {
    /// The trace holds fewer processes than the job's world size.
    RanksMissing {
        /// Processes in the trace.
        processes: u32,
        /// The job's world size.
        world_size: u32,
        /// The ranks present.
        ranks: Vec<u32>,
    },
    /// A group that some ranks never ran.
    GroupMissing {
        /// The group ("stream 7" or "all_gather on stream 7", ...).
        group: String,
        /// The ranks without it.
        ranks: Vec<u32>,
    },
    /// A group whose kernel counts differ between ranks.
    CountsDiffer {
        /// The group.
        group: String,
        /// Each rank's count.
        counts: Vec<RankCount>,
    },
    /// The n-th kernel of a group differs between ranks.
    KernelDiffers {
        /// The group.
        group: String,
        /// The kernel's position in the group, from 1.
        kernel: u64,
        /// What differs.
        by: MatchKey,
    },
    /// The ranks' clocks differ and no matched collective aligns them.
    ClocksUnaligned {
        /// The clocks, as a phrase ("monotonic, two hosts").
        clocks: String,
    },
}

impl MatchNote {
    /// The kind's JSON name ("ranks_missing", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            MatchNote::RanksMissing { .. } => "ranks_missing",
            MatchNote::GroupMissing { .. } => "group_missing",
            MatchNote::CountsDiffer { .. } => "counts_differ",
            MatchNote::KernelDiffers { .. } => "kernel_differs",
            MatchNote::ClocksUnaligned { .. } => "clocks_unaligned",
        }
    }
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for MatchNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchNote::RanksMissing {
                processes,
                world_size,
                ranks,
            } => write!(
                f,
                "collectives not matched across ranks: the trace holds {processes} of the job's {world_size} ranks ({})",
                list(ranks)
            ),
            MatchNote::GroupMissing { group, ranks } => write!(
                f,
                "{group} not matched across ranks: rank(s) {} have none",
                list(ranks)
            ),
            MatchNote::CountsDiffer { group, counts } => {
                let c: Vec<String> = counts
                    .iter()
                    .map(|c| format!("rank {}: {}", c.rank, c.kernels))
                    .collect();
                write!(
                    f,
                    "{group} not matched across ranks: kernel counts differ ({})",
                    c.join(", ")
                )
            }
            MatchNote::KernelDiffers { group, kernel, by } => write!(
                f,
                "{group} not matched across ranks: kernel {kernel} differs between ranks ({})",
                match by {
                    MatchKey::Sequence => "sequence number or collective",
                    MatchKey::KernelName => "kernel name",
                }
            ),
            MatchNote::ClocksUnaligned { clocks } => write!(
                f,
                "collectives not compared across ranks: their clocks differ ({clocks}) and no matched collective aligns them"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_carry_their_kind_in_json_and_read_back() {
        let n = MatchNote::CountsDiffer {
            group: "stream 7".into(),
            counts: vec![
                RankCount {
                    rank: 0,
                    kernels: 3,
                },
                RankCount {
                    rank: 1,
                    kernels: 2,
                },
            ],
        };
        let v = serde_json::to_value(&n).expect("json");
        assert_eq!(v["kind"], n.kind());
        assert_eq!(v["counts"][1]["kernels"], 2);
        assert_eq!(serde_json::from_value::<MatchNote>(v).expect("read"), n);
        assert_eq!(
            n.to_string(),
            "stream 7 not matched across ranks: kernel counts differ (rank 0: 3, rank 1: 2)"
        );
    }
}
