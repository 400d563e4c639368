//! Top-level values the import never reads, cut to their shell.
//!
//! A Kineto document's top level holds `traceEvents` and a few small keys
//! the import reads (`TopInfo`'s). Anything else (a huge string, number,
//! array or object under another key, before or after the events) is
//! parsed and thrown away, but a reader that holds the text whole, or a
//! piece of it until the next cut between two events, would hold all of
//! it. [`TopLevel`] drops, in place, the inside of every such value: a
//! string keeps its quotes, an array or object its brackets, a number or
//! literal its first [`SCALAR_KEEP`] bytes, and a key its first
//! [`KEY_KEEP`] bytes (a longer key is no key the import reads). What
//! comes out is JSON whenever what came in was, with the same events and
//! kept keys; what is held is then bounded by the events themselves.
//! A document that is not an object (a bare array of events) passes
//! untouched.

use super::document::TopInfo;

/// Bytes of a key kept: longer than any key the import reads.
pub(crate) const KEY_KEEP: usize = 32;
/// Bytes of a number or literal (`true`, `-12.5e3`) kept under a key the
/// import does not read.
pub(crate) const SCALAR_KEEP: usize = 24;
/// Bytes a top-level value the import reads may hold, `traceEvents`
/// aside (device properties, distributed info: kilobytes in real traces).
/// Past it the document is refused ([`TopLevel::oversized`]), so that what
/// a read holds stays bounded on any input.
pub(crate) const READ_VALUE_MAX: u64 = 16 << 20;

/// Where the filter stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the document's first byte that is not whitespace.
    Start,
    /// Not an object at the top, or past its end: bytes pass.
    Pass,
    /// In the top-level object, outside keys and values.
    Between,
    /// In a key (its opening quote was read).
    Key,
    /// After a key, before its value's first byte.
    BeforeValue,
    /// In a value: kept (every byte passes) or dropped (its shell only).
    Value { keep: bool },
}

/// The in-place filter (see the module doc). Its state carries from one
/// call to the next, so text may come in chunks of any size.
#[derive(Debug, Clone)]
pub(crate) struct TopLevel {
    at: At,
    /// Nesting inside the current value (0: the value is a scalar or not
    /// begun; 1: inside its own brackets).
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Bytes of the current key or scalar seen so far.
    len: usize,
    key: [u8; KEY_KEEP],
    /// The current value is a scalar (number or literal).
    scalar: bool,
    /// Bytes the current kept value may still pass (`None`: no bound,
    /// `traceEvents`).
    budget: Option<u64>,
    /// Bytes of the current value's key (in `key`, up to [`KEY_KEEP`]).
    key_len: usize,
    /// The key of a kept value that went past [`READ_VALUE_MAX`].
    oversized: Option<String>,
}

impl TopLevel {
    /// At the start of a document.
    pub(crate) fn document() -> TopLevel {
        TopLevel {
            at: At::Start,
            depth: 0,
            in_string: false,
            escaped: false,
            len: 0,
            key: [0; KEY_KEEP],
            scalar: false,
            budget: None,
            key_len: 0,
            oversized: None,
        }
    }

    /// Just inside `traceEvents`' array, before one of its elements (where
    /// a piece but the first begins).
    pub(crate) fn in_events() -> TopLevel {
        TopLevel {
            at: At::Value { keep: true },
            depth: 1,
            ..TopLevel::document()
        }
    }

    /// Keeps the bytes of `buf[..n]` that are not inside a dropped value,
    /// moved to the front in order; returns how many.
    pub(crate) fn filter(&mut self, buf: &mut [u8], n: usize) -> usize {
        let mut w = 0;
        let mut r = 0;
        while r < n {
            // Fast paths: runs that pass or drop whole.
            if self.at == At::Pass {
                if w != r {
                    buf.copy_within(r..n, w);
                }
                return w + (n - r);
            }
            if let At::Value { keep } = self.at {
                if !keep && self.scalar && self.len > SCALAR_KEEP {
                    // The rest of a long dropped number, up to its end.
                    let run = buf[r..n]
                        .iter()
                        .position(|c| matches!(c, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                        .unwrap_or(n - r);
                    r += run;
                    if r >= n {
                        break;
                    }
                }
                if self.depth > 0 || self.in_string {
                    let run = self.skip_inside(&buf[r..n]);
                    if keep {
                        if w != r {
                            buf.copy_within(r..r + run, w);
                        }
                        w += run;
                        self.charge(run);
                    }
                    r += run;
                    if r >= n {
                        break;
                    }
                }
            }
            let b = buf[r];
            if self.step(b) {
                buf[w] = b;
                w += 1;
                if matches!(self.at, At::Value { keep: true }) {
                    self.charge(1);
                }
            }
            r += 1;
        }
        w
    }

    /// Inside a container or string of a value: the length of the run
    /// before the next byte that may change the nesting (a quote, a
    /// backslash, a bracket), all of which `step` must see.
    fn skip_inside(&self, text: &[u8]) -> usize {
        if self.escaped {
            return 0;
        }
        if self.in_string {
            return memchr::memchr2(b'"', b'\\', text).unwrap_or(text.len());
        }
        text.iter()
            .position(|&c| matches!(c, b'"' | b'[' | b']' | b'{' | b'}'))
            .unwrap_or(text.len())
    }

    /// Takes one byte; whether it is kept.
    fn step(&mut self, b: u8) -> bool {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.at {
            At::Pass => true,
            At::Start => {
                if b == b'{' {
                    self.at = At::Between;
                } else if !ws && b != 0xEF && b != 0xBB && b != 0xBF {
                    // Not an object (a bare array of events): untouched.
                    self.at = At::Pass;
                }
                true
            }
            At::Between => {
                match b {
                    b'"' => {
                        self.at = At::Key;
                        self.len = 0;
                        self.escaped = false;
                    }
                    b'}' => self.at = At::Pass,
                    _ => {}
                }
                true
            }
            At::Key => {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.at = At::BeforeValue;
                    return true;
                }
                let i = self.len;
                self.len += 1;
                // A long key is cut, never after a backslash that starts
                // an escape (its quote would then be escaped).
                let kept = i + 1 < KEY_KEEP || (i + 1 == KEY_KEEP && !self.escaped);
                if i < KEY_KEEP {
                    self.key[i] = b;
                }
                kept
            }
            At::BeforeValue => {
                if ws || b == b':' {
                    return true;
                }
                let key = &self.key[..self.len.min(KEY_KEEP)];
                let keep = self.len <= KEY_KEEP && self.reads(key);
                self.budget = (keep && key != b"traceEvents").then_some(READ_VALUE_MAX);
                self.key_len = key.len();
                self.at = At::Value { keep };
                self.depth = 0;
                self.in_string = false;
                self.escaped = false;
                self.scalar = false;
                self.len = 0;
                self.value_byte(b, keep)
            }
            At::Value { keep } => self.value_byte(b, keep),
        }
    }

    /// The key of a value the import reads that held more than
    /// [`READ_VALUE_MAX`] bytes, once one did: the document is refused.
    pub(crate) fn oversized(&self) -> Option<&str> {
        self.oversized.as_deref()
    }

    /// `n` bytes of the current kept value passed.
    fn charge(&mut self, n: usize) {
        if let Some(left) = self.budget {
            if n as u64 > left && self.oversized.is_none() {
                let key = &self.key[..self.key_len];
                self.oversized = Some(String::from_utf8_lossy(key).into_owned());
            }
            self.budget = Some(left.saturating_sub(n as u64));
        }
    }

    /// Whether the import reads the top-level key `key` (raw bytes).
    fn reads(&self, key: &[u8]) -> bool {
        key == b"traceEvents"
            || key.contains(&b'\\')
            || std::str::from_utf8(key).is_ok_and(|k| TopInfo::slot_of(k).is_some())
    }

    /// A byte of a top-level value; whether it is kept.
    fn value_byte(&mut self, b: u8, keep: bool) -> bool {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.depth == 0 {
                    self.at = At::Between;
                    return true; // a top-level string's closing quote
                }
            }
            return keep;
        }
        if self.depth == 0 && !self.scalar {
            // The value's first byte.
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => self.depth = 1,
                _ => {
                    self.scalar = true;
                    self.len = 1;
                }
            }
            return true;
        }
        if self.scalar {
            if matches!(b, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r') {
                self.scalar = false;
                self.at = At::Between;
                if b == b'}' {
                    self.at = At::Pass;
                }
                return true;
            }
            self.len += 1;
            return keep || self.len <= SCALAR_KEEP;
        }
        match b {
            b'"' => self.in_string = true,
            b'[' | b'{' => self.depth += 1,
            b']' | b'}' => {
                self.depth -= 1;
                if self.depth == 0 {
                    self.at = At::Between;
                    return true; // the value's closing bracket
                }
            }
            _ => {}
        }
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(text: &str, chunk: usize, start: TopLevel) -> String {
        let mut f = start;
        let mut out = Vec::new();
        for c in text.as_bytes().chunks(chunk) {
            let mut buf = c.to_vec();
            let n = f.filter(&mut buf, c.len());
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(out).expect("utf-8")
    }

    fn all_chunks(text: &str, start: TopLevel) -> String {
        let whole = filtered(text, text.len().max(1), start.clone());
        for chunk in [1, 2, 3, 7, 64] {
            assert_eq!(filtered(text, chunk, start.clone()), whole, "chunk {chunk}");
        }
        whole
    }

    #[test]
    fn a_read_value_past_its_bound_is_flagged_but_the_events_never_are() {
        let big = "1,".repeat((READ_VALUE_MAX as usize) / 2 + 8);
        let over = format!(r#"{{"deviceProperties": [{big}1], "traceEvents": []}}"#);
        let events = format!(r#"{{"deviceProperties": [], "traceEvents": [{big}1]}}"#);
        for (text, flagged) in [(&over, Some("deviceProperties")), (&events, None)] {
            for chunk in [4096, 1 << 20] {
                let mut f = TopLevel::document();
                for c in text.as_bytes().chunks(chunk) {
                    let mut buf = c.to_vec();
                    f.filter(&mut buf, c.len());
                }
                assert_eq!(f.oversized(), flagged, "chunk {chunk}");
            }
        }
        // Just under the bound: not flagged.
        let under = format!(
            r#"{{"deviceProperties": "{}"}}"#,
            "x".repeat(READ_VALUE_MAX as usize - 2)
        );
        let mut f = TopLevel::document();
        let mut buf = under.clone().into_bytes();
        f.filter(&mut buf, under.len());
        assert_eq!(f.oversized(), None);
    }

    #[test]
    fn what_the_import_reads_passes_untouched() {
        let text = r#"{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H\"200"}],
 "traceEvents": [{"ph": "X", "name": "a]}\\", "args": {"x": [1, {"y": "}"}]}}, {"ph": "i"}],
 "distributedInfo": {"rank": 3}, "baseTimeNanoseconds": 1700000000000000000, "traceName": "t"}"#;
        assert_eq!(all_chunks(text, TopLevel::document()), text);
        // A bare array of events passes too.
        let arr = r#"[{"ph": "X", "name": "a"}, {"junk": "x"}]"#;
        assert_eq!(all_chunks(arr, TopLevel::document()), arr);
    }

    #[test]
    fn other_values_are_cut_to_their_shell_and_stay_json() {
        let big = "x\\\"y".repeat(1000);
        let nested = format!(r#"{{"a": [1, "{big}", {{"b": "]"}}], "c": null}}"#);
        let digits = "7".repeat(5000);
        let long_key = "k".repeat(200);
        let text = format!(
            r#"{{"junk": "{big}", "deviceProperties": [], "obj": {nested}, "n": -{digits}, "t": true,
"{long_key}": "{big}", "traceEvents": [{{"ph": "X"}}], "after": [{nested}, "{big}"], "last": 12}}"#
        );
        let out = all_chunks(&text, TopLevel::document());
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(v["junk"], "");
        assert_eq!(v["obj"], serde_json::json!({}));
        assert_eq!(v["after"], serde_json::json!([]));
        assert_eq!(v["t"], true);
        assert_eq!(v["last"], 12);
        assert_eq!(v["deviceProperties"], serde_json::json!([]));
        assert_eq!(v["traceEvents"], serde_json::json!([{"ph": "X"}]));
        let n = v["n"].as_f64().expect("a number");
        assert!(n < 0.0);
        assert!(out.len() < 400, "{} bytes: {out}", out.len());
        let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
        assert!(keys.iter().any(|k| k.len() == KEY_KEEP), "{keys:?}");
    }

    #[test]
    fn a_piece_inside_the_events_keeps_them_and_cuts_what_follows() {
        let big = "z".repeat(3000);
        let text = format!(r#"{{"ph": "X", "s": "]}}"}}, {{"ph": "i"}}], "junk": "{big}"}}"#);
        let out = all_chunks(&text, TopLevel::in_events());
        assert_eq!(out, r#"{"ph": "X", "s": "]}"}, {"ph": "i"}], "junk": ""}"#);
    }
}
