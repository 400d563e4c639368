//! Interning the strings events repeat without hashing them each time.
//!
//! Kineto writes the args of one kind of event in the same order (a
//! kernel's `External id`, `queued`, `device`, ...), so an arg key is
//! nearly always the key at its position in the previous event of that
//! kind: comparing it with that one is cheaper than hashing it into the
//! string pool. Event names repeat too, but not in order: they go through a
//! small table indexed by a few of their bytes.

use crate::kineto::KeepArgs;
use crate::model::{StrId, TraceBuilder};

/// Arg keys (and string values) by kind of event and position.
#[derive(Default)]
pub(super) struct ArgKeys {
    /// Per kind: the args of the last event of that kind, by position.
    by_kind: Vec<Vec<KeySlot>>,
}

struct KeySlot {
    key: Box<str>,
    id: StrId,
    /// The key is in the kind's list of args the model keeps elsewhere,
    /// or one the import's [`KeepArgs`] does not store.
    consumed: bool,
    /// The last string value at this position.
    value: Option<(Box<str>, StrId)>,
}

impl ArgKeys {
    /// The id of `key`, arg number `pos` of an event of `kind` (any small
    /// number standing for one category and one `consumed` list), and
    /// whether it stays out of the argument set (`consumed` holds it, or
    /// `keep` does not store it). Called for positions 0, 1, 2, ... of
    /// each event in turn.
    pub(super) fn key(
        &mut self,
        trace: &mut TraceBuilder,
        kind: usize,
        pos: usize,
        key: &str,
        consumed: &[&str],
        keep: KeepArgs,
    ) -> (StrId, bool) {
        if self.by_kind.len() <= kind {
            self.by_kind.resize_with(kind + 1, Vec::new);
        }
        let slots = &mut self.by_kind[kind];
        if let Some(s) = slots.get(pos) {
            if &*s.key == key {
                return (s.id, s.consumed);
            }
        }
        let unstored = !keep.stores(key);
        let slot = KeySlot {
            key: key.into(),
            // A key left out of the pool is read by nobody (so a lean
            // import's pool does not depend on which reader read it).
            id: if unstored {
                StrId::EMPTY
            } else {
                trace.intern(key)
            },
            consumed: unstored || consumed.contains(&key),
            value: None,
        };
        let found = (slot.id, slot.consumed);
        match slots.get_mut(pos) {
            Some(s) => *s = slot,
            None => slots.push(slot),
        }
        found
    }

    /// The id of the string value of arg `pos` of an event of `kind`, after
    /// [`ArgKeys::key`] for it.
    pub(super) fn str_value(
        &mut self,
        trace: &mut TraceBuilder,
        kind: usize,
        pos: usize,
        value: &str,
    ) -> StrId {
        let Some(slot) = self.by_kind.get_mut(kind).and_then(|s| s.get_mut(pos)) else {
            return trace.intern(value);
        };
        if let Some((v, id)) = &slot.value {
            if &**v == value {
                return *id;
            }
        }
        let id = trace.intern(value);
        slot.value = Some((value.into(), id));
        id
    }
}

/// Names by a few of their bytes: a hit costs a comparison, a miss the
/// pool's lookup.
pub(super) struct Names {
    slots: Vec<Option<(Box<str>, StrId)>>,
}

/// Entries in [`Names`] (a power of two).
const NAME_SLOTS: usize = 1024;

impl Default for Names {
    fn default() -> Names {
        Names {
            slots: vec![None; NAME_SLOTS],
        }
    }
}

impl Names {
    pub(super) fn intern(&mut self, trace: &mut TraceBuilder, name: &str) -> StrId {
        let slot = &mut self.slots[slot_of(name.as_bytes())];
        if let Some((n, id)) = slot {
            if &**n == name {
                return *id;
            }
        }
        let id = trace.intern(name);
        *slot = Some((name.into(), id));
        id
    }
}

/// A slot from the length and the first and last eight bytes.
#[inline]
fn slot_of(b: &[u8]) -> usize {
    let word = |s: &[u8]| {
        let mut w = [0u8; 8];
        w[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(w)
    };
    let n = b.len();
    let head = word(&b[..n.min(8)]);
    let tail = word(&b[n.saturating_sub(8)..]);
    let h = (head ^ tail.rotate_left(29) ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 54) as usize & (NAME_SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_ids_are_the_pools_ids() {
        let mut t = TraceBuilder::new();
        let mut keys = ArgKeys::default();
        let consumed = ["device"];
        // Two kinds, keys in changing orders, values repeating or not.
        for (kind, args) in [
            (0, vec!["External id", "device", "stream"]),
            (0, vec!["External id", "device", "stream"]),
            (1, vec!["device", "Ev Idx"]),
            (0, vec!["device", "External id"]),
            (0, vec!["External id", "device", "stream", "extra"]),
        ] {
            for (pos, k) in args.iter().enumerate() {
                let (id, consumed_here) = keys.key(&mut t, kind, pos, k, &consumed, KeepArgs::All);
                assert_eq!(t.str(id), *k);
                assert_eq!(consumed_here, *k == "device");
                for v in ["a", "a", "b"] {
                    let vid = keys.str_value(&mut t, kind, pos, v);
                    assert_eq!(t.str(vid), v);
                }
            }
        }
        // A lean import stores only the analyses' keys, and pools no other.
        let mut lean = ArgKeys::default();
        let before = t.strings().len();
        for (pos, k) in ["Fwd thread id", "device", "Collective name", "Seq"]
            .iter()
            .enumerate()
        {
            let (id, out) = lean.key(&mut t, 9, pos, k, &consumed, KeepArgs::Analysis);
            let stored = matches!(*k, "Collective name" | "Seq");
            assert_eq!(out, !stored, "{k}");
            if stored {
                assert_eq!(t.str(id), *k);
            }
        }
        assert_eq!(t.strings().len(), before + 2, "the two stored keys are new");
        assert_eq!(t.strings().lookup("Fwd thread id"), None);
        let mut names = Names::default();
        // More names than slots: every id is still the pool's.
        for i in 0..3 * NAME_SLOTS {
            let name = format!("aten::op{}", i % (NAME_SLOTS + 7));
            let id = names.intern(&mut t, &name);
            assert_eq!(t.str(id), name);
            assert_eq!(t.intern(&name), id);
        }
        for n in ["", "a", "exactly8", "longer than eight bytes"] {
            let id = names.intern(&mut t, n);
            assert_eq!(t.str(id), n);
        }
    }
}
