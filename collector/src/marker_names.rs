//! A ceiling on distinct NVTX marker names. The string pool lives as long as
//! the run, and some annotators make every name unique (PyTorch's
//! `emit_nvtx()` appends ", seq = N" to each op), which would grow memory
//! for ever. Past the ceiling a name is normalized (the trailing sequence
//! number dropped; those get a second, smaller allowance) and, past that
//! too, replaced by one fixed name.

use streamscope_core::{StrId, TraceBuilder};

/// Distinct marker names kept as they are.
pub const MAX_MARKER_NAMES: usize = 65_536;
/// The name of markers past the ceiling whose normalized name is new.
pub const LIMIT_NAME: &str = "(NVTX name limit reached)";
/// Process metadata key set once the ceiling is reached.
pub const LIMIT_KEY: &str = "nvtx_name_limit";

pub struct MarkerNames {
    cap: usize,
    added: usize,
    /// Normalized names added past the ceiling (at most `cap / 8`).
    added_short: usize,
    /// Markers renamed because the ceiling was reached.
    pub renamed: u64,
}

impl MarkerNames {
    pub fn new(cap: usize) -> Self {
        MarkerNames {
            cap,
            added: 0,
            added_short: 0,
            renamed: 0,
        }
    }

    /// The id of `name`, adding it to the pool only below the ceiling.
    pub fn resolve(&mut self, trace: &mut TraceBuilder, name: &str) -> StrId {
        if let Some(id) = trace.strings().lookup(name) {
            return id;
        }
        if self.added < self.cap {
            self.added += 1;
            return trace.intern(name);
        }
        self.renamed += 1;
        let short = normalize(name);
        if let Some(id) = trace.strings().lookup(short) {
            return id;
        }
        if short.len() < name.len() && self.added_short < self.cap / 8 {
            self.added_short += 1;
            return trace.intern(short);
        }
        trace.intern(LIMIT_NAME)
    }

    pub fn limit_reached(&self) -> bool {
        self.renamed > 0
    }

    /// The metadata value describing what the ceiling did.
    pub fn describe(&self) -> String {
        format!(
            "{} distinct NVTX names reached; {} later markers renamed (sequence numbers dropped, or \"{LIMIT_NAME}\")",
            self.cap, self.renamed
        )
    }
}

/// "aten::mul, seq = 1234" -> "aten::mul"; "step 17" -> "step".
pub fn normalize(name: &str) -> &str {
    if let Some(i) = name.find(", seq = ") {
        return &name[..i];
    }
    let t = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if t.len() == name.len() {
        return name;
    }
    let t = t.trim_end_matches([' ', '_', '-', '#', '.', ':', '=']);
    if t.is_empty() {
        name
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_sequence_numbers_only() {
        assert_eq!(normalize("aten::mul, seq = 1234"), "aten::mul");
        assert_eq!(normalize("aten::mm, seq = 7, sizes = [[2]]"), "aten::mm");
        assert_eq!(normalize("step 17"), "step");
        assert_eq!(normalize("layer_3"), "layer");
        assert_eq!(normalize("forward"), "forward");
        assert_eq!(normalize("42"), "42");
    }

    #[test]
    fn names_past_the_cap_are_normalized_or_replaced() {
        let mut t = TraceBuilder::new();
        let mut m = MarkerNames::new(8);
        let pool_before = t.strings().len();
        let a = m.resolve(&mut t, "aten::mul, seq = 1");
        let b = m.resolve(&mut t, "aten::mul");
        for i in 0..6 {
            m.resolve(&mut t, &format!("fill{i}x"));
        }
        assert_eq!(t.strings().len(), pool_before + 8);
        assert!(!m.limit_reached());
        // A name seen before is free.
        assert_eq!(m.resolve(&mut t, "aten::mul, seq = 1"), a);
        assert!(!m.limit_reached());
        // Past the cap: the normalized name when it is known...
        assert_eq!(m.resolve(&mut t, "aten::mul, seq = 2"), b);
        // ...or new within the allowance of cap / 8 = 1...
        let step = m.resolve(&mut t, "step 2");
        assert_eq!(t.strings().get(step), "step");
        assert_eq!(m.resolve(&mut t, "step 3"), step);
        // ...else the one fixed name.
        let lim = m.resolve(&mut t, "backward, seq = 9");
        assert_eq!(t.strings().get(lim), LIMIT_NAME);
        assert_eq!(m.resolve(&mut t, "optimizer"), lim);
        for i in 0..10_000 {
            m.resolve(&mut t, &format!("unique {i}x"));
        }
        assert_eq!(t.strings().len(), pool_before + 10);
        assert!(m.limit_reached());
        assert_eq!(m.renamed, 5 + 10_000);
        assert!(m.describe().contains("10005 later markers renamed"));
    }
}
