//! What a prediction left as measured or had to assume, as data: a kind and
//! its figures (JSON `{"kind": ..., fields}`); `Display` gives the line.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One note of a what-if report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WhatIfNote {
    /// Host syncs a `--drop-syncs` spec removed.
    SyncsDropped {
        /// The spec as given (FILE:LINE or a name).
        spec: String,
        /// Sync calls it matched.
        calls: u64,
    },
    /// Vertices replayed in their measured order to break a dependency
    /// cycle (host/GPU clock noise).
    CycleBroken {
        /// Vertices.
        vertices: u64,
    },
    /// Launch calls held by a full launch queue: the host ran ahead.
    LaunchQueueFull {
        /// Launch calls held.
        calls: u64,
        /// The queue's depth (launches).
        depth: u32,
    },
    /// NCCL kernels without known bytes kept their measured transfer
    /// under `--link-bw`.
    BytesUnknown {
        /// Kernels.
        kernels: u64,
    },
    /// NCCL kernels could not be matched across ranks: each replayed whole.
    CommUnmatched,
    /// No communication in the trace.
    NoCommunication,
    /// A rank without steps, left out of the step table.
    NoSteps {
        /// The rank.
        rank: u32,
    },
}

impl WhatIfNote {
    /// The kind's JSON name ("syncs_dropped", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            WhatIfNote::SyncsDropped { .. } => "syncs_dropped",
            WhatIfNote::CycleBroken { .. } => "cycle_broken",
            WhatIfNote::LaunchQueueFull { .. } => "launch_queue_full",
            WhatIfNote::BytesUnknown { .. } => "bytes_unknown",
            WhatIfNote::CommUnmatched => "comm_unmatched",
            WhatIfNote::NoCommunication => "no_communication",
            WhatIfNote::NoSteps { .. } => "no_steps",
        }
    }
}

impl fmt::Display for WhatIfNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhatIfNote::SyncsDropped { spec, calls } => {
                write!(f, "--drop-syncs {spec}: {calls} sync call(s) dropped")
            }
            WhatIfNote::CycleBroken { vertices } => write!(
                f,
                "{vertices} vertices replayed in measured order (a dependency cycle from host/GPU clock noise)"
            ),
            WhatIfNote::LaunchQueueFull { calls, depth } => write!(
                f,
                "{calls} launch call(s) held by a full launch queue ({depth} launches deep): the host ran ahead of the GPU"
            ),
            WhatIfNote::BytesUnknown { kernels } => write!(
                f,
                "{kernels} NCCL kernels without known bytes kept their measured transfer under --link-bw"
            ),
            WhatIfNote::CommUnmatched => f.write_str(
                "NCCL kernels not matched across ranks: each is replayed whole (no wait/transfer split), --comm-scale scales all of it",
            ),
            WhatIfNote::NoCommunication => {
                f.write_str("no communication in the trace: only compute and syncs are replayed")
            }
            WhatIfNote::NoSteps { rank } => write!(f, "rank {rank}: no steps, left out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_carry_their_kind_in_json_and_read_back() {
        for n in [
            WhatIfNote::SyncsDropped {
                spec: "train.py:12".into(),
                calls: 2,
            },
            WhatIfNote::LaunchQueueFull {
                calls: 5,
                depth: 1024,
            },
            WhatIfNote::NoCommunication,
        ] {
            let v = serde_json::to_value(&n).expect("json");
            assert_eq!(v["kind"], n.kind());
            assert_eq!(serde_json::from_value::<WhatIfNote>(v).expect("read"), n);
        }
        assert_eq!(
            WhatIfNote::SyncsDropped {
                spec: "a.py:3".into(),
                calls: 2
            }
            .to_string(),
            "--drop-syncs a.py:3: 2 sync call(s) dropped"
        );
    }
}
