//! A fast reader for the common shape of a Kineto document.
//!
//! serde_json's typed visitor costs most of an import (every byte goes
//! through its generic machinery). This reader walks the text itself, for
//! what Kineto writes: events whose keys and strings hold no escapes, whose
//! numbers are plain, and whose `args` hold scalars and flat integer arrays
//! (`grid`, `block`). Everything else is handed to serde_json, value by
//! value, with the same visitors as the one-pass parser (`document`,
//! `event`): an event of another shape, a nested arg, a top-level key. So
//! every event reaches the sink exactly as serde_json would read it.
//!
//! It accepts only valid JSON: whatever it does not recognise, it gives to
//! serde_json, and any error (or anything unusual at the top level, or
//! nesting deeper than [`MAX_NESTED`]) makes it answer `None`. The caller
//! then drops what the sink received and parses the text again with
//! `document::parse_document_partial`, so errors, and traces cut short,
//! are exactly the one-pass ones.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::event::{Event, MaybeEvent};
use super::super::json::{ArgJson, Args, Id, Text};
use super::{EventSink, TopInfo};
use crate::kineto::KeepArgs;
use words::{digit_run, is_ws, non_ws_bytes, special_bytes, EventKey};

mod words;

/// Deepest nesting of a value handed to serde_json (counted from the
/// event), well below serde_json's recursion limit, so that a value it
/// reads here alone it would also read within the whole document.
const MAX_NESTED: usize = 64;

/// Why the fast reader stopped: the caller parses with serde_json instead.
#[derive(Debug)]
struct Unusual;

type Res<T> = Result<T, Unusual>;

/// Reads a whole document as `document::parse_document` does; `None` when
/// it is not valid UTF-8 or holds something this reader leaves to the
/// one-pass parser (what `sink` got must then be dropped).
pub fn parse_document<'de, S: EventSink<'de>>(json: &'de [u8], sink: &mut S) -> Option<TopInfo> {
    // Checked at once, with SIMD where the CPU has it (found at run time).
    let text = simdutf8::basic::from_utf8(json).ok()?;
    let mut r = Reader {
        text,
        pos: 0,
        arg_buf: Vec::new(),
        keep: sink.keep_args(),
    };
    r.document(sink).ok()
}

/// A number's text, and the digits of an integer, whose value
/// [`Num::int`] reads only when a field needs it.
struct Num<'de> {
    text: &'de str,
    /// The digits of an integer (no fraction, no exponent); `None` for
    /// any other number.
    int_digits: Option<&'de [u8]>,
    negative: bool,
}

impl Num<'_> {
    /// Written as an integer (no fraction or exponent).
    #[inline]
    fn integer(&self) -> bool {
        self.int_digits.is_some()
    }

    /// The value of an integer that an `i64` holds exactly as serde_json
    /// reads it: at most 18 digits, and not `-0` (a float to serde_json).
    #[inline]
    fn int(&self) -> Option<i64> {
        let digits = self.int_digits?;
        if digits.len() > 18 {
            return None;
        }
        let v = digits
            .iter()
            .fold(0i64, |v, &d| v * 10 + i64::from(d - b'0'));
        match (self.negative, v) {
            (true, 0) => None,
            (true, v) => Some(-v),
            (false, v) => Some(v),
        }
    }
}

struct Reader<'de> {
    text: &'de str,
    pos: usize,
    /// The arguments of the event being read, before they are moved into a
    /// vector of their own, exactly sized (none for an event that keeps no
    /// argument): one allocation an event with arguments, never a regrowth.
    arg_buf: Vec<(Text<'de>, ArgJson<'de>)>,
    /// The arguments of complete events to read (the others are skipped).
    keep: KeepArgs,
}

impl<'de> Reader<'de> {
    #[inline]
    fn bytes(&self) -> &'de [u8] {
        self.text.as_bytes()
    }

    #[inline]
    fn skip_ws(&mut self) {
        let b = self.bytes();
        // Most runs are empty or one space (after `:` and `,`).
        let mut i = self.pos;
        if b.get(i).is_none_or(|&c| !is_ws(c)) {
            return;
        }
        i += 1;
        if b.get(i).is_none_or(|&c| !is_ws(c)) {
            self.pos = i;
            return;
        }
        // A newline and indentation: eight bytes at a time.
        while let Some(chunk) = b.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            let other = non_ws_bytes(word);
            if other != 0 {
                self.pos = i + (other.trailing_zeros() / 8) as usize;
                return;
            }
            i += 8;
        }
        while b.get(i).is_some_and(|&c| is_ws(c)) {
            i += 1;
        }
        self.pos = i;
    }

    /// The next byte after whitespace (not consumed).
    #[inline]
    fn peek(&mut self) -> Res<u8> {
        self.skip_ws();
        self.bytes().get(self.pos).copied().ok_or(Unusual)
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Res<()> {
        if self.peek()? == c {
            self.pos += 1;
            Ok(())
        } else {
            Err(Unusual)
        }
    }

    /// A string without escapes or control characters, at `pos` (its `"`).
    #[inline]
    fn string(&mut self) -> Res<&'de str> {
        let b = self.bytes();
        if b.get(self.pos) != Some(&b'"') {
            return Err(Unusual);
        }
        let start = self.pos + 1;
        let mut i = start;
        // Eight bytes at a time up to the first `"`, `\\` or control byte.
        while let Some(chunk) = b.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().map_err(|_| Unusual)?);
            let special = special_bytes(word);
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while i < b.len() {
            let c = b[i];
            if c == b'"' {
                self.pos = i + 1;
                // Cut at ASCII bytes of valid UTF-8 text: char boundaries.
                return self.text.get(start..i).ok_or(Unusual);
            }
            if c == b'\\' || c < 0x20 {
                return Err(Unusual);
            }
            i += 1;
        }
        Err(Unusual)
    }

    /// A key and its `:`.
    #[inline]
    fn key(&mut self) -> Res<&'de str> {
        self.skip_ws();
        let k = self.string()?;
        self.colon()?;
        Ok(k)
    }

    /// After a member: `true` for `,` (another follows), `false` for `close`.
    #[inline]
    fn next_member(&mut self, close: u8) -> Res<bool> {
        match self.peek()? {
            b',' => {
                self.pos += 1;
                Ok(true)
            }
            c if c == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Unusual),
        }
    }

    /// A JSON number at `pos` (strict grammar).
    #[inline]
    fn number(&mut self) -> Res<Num<'de>> {
        let b = self.bytes();
        let start = self.pos;
        let mut i = start;
        let negative = b.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let digits = i;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i += digit_run(b, i),
            _ => return Err(Unusual),
        }
        let int_digits = digits..i;
        let mut integer = true;
        if b.get(i) == Some(&b'.') {
            integer = false;
            i += 1;
            let n = digit_run(b, i);
            if n == 0 {
                return Err(Unusual);
            }
            i += n;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            integer = false;
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let n = digit_run(b, i);
            if n == 0 {
                return Err(Unusual);
            }
            i += n;
        }
        // A number runs to a delimiter (serde_json reads "1x" as an error).
        if matches!(b.get(i), Some(c) if !(is_ws(*c) || matches!(c, b',' | b']' | b'}'))) {
            return Err(Unusual);
        }
        self.pos = i;
        Ok(Num {
            text: &self.text[start..i],
            int_digits: integer.then(|| &b[int_digits]),
            negative,
        })
    }

    /// `null`, `true` or `false` at `pos`.
    #[inline]
    fn literal(&mut self, word: &str) -> Res<()> {
        if self.text.as_bytes()[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            // As a number, a literal runs to a delimiter.
            match self.bytes().get(self.pos) {
                Some(c) if !(is_ws(*c) || matches!(c, b',' | b']' | b'}')) => Err(Unusual),
                _ => Ok(()),
            }
        } else {
            Err(Unusual)
        }
    }

    /// A value read by serde_json from `pos` on (whitespace first allowed),
    /// as the one-pass parser would read it there.
    fn serde<T: Deserialize<'de>>(&mut self) -> Res<T> {
        let rest = &self.text[self.pos..];
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = match values.next() {
            Some(Ok(v)) => v,
            _ => return Err(Unusual),
        };
        let end = self.pos + values.byte_offset();
        if nesting(&self.bytes()[self.pos..end]) > MAX_NESTED {
            return Err(Unusual);
        }
        self.pos = end;
        Ok(value)
    }

    /// Skips a value the importer does not read.
    #[inline]
    fn skip(&mut self) -> Res<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            b'n' => self.literal("null"),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            _ => self.serde::<serde::de::IgnoredAny>().map(drop),
        }
    }

    fn document<S: EventSink<'de>>(&mut self, sink: &mut S) -> Res<TopInfo> {
        let mut info = TopInfo::default();
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
        } else {
            loop {
                let key = self.key()?;
                if key == "traceEvents" {
                    info.has_events = true;
                    info.ends_in_events = true;
                    self.events(sink)?;
                } else {
                    info.ends_in_events = false;
                    match TopInfo::slot_of(key) {
                        Some(i) => {
                            let value = self.serde::<Option<Box<RawValue>>>()?;
                            info.set(i, value);
                        }
                        None => self.skip()?,
                    }
                }
                if !self.next_member(b'}')? {
                    break;
                }
            }
        }
        self.skip_ws();
        if self.pos != self.text.len() {
            return Err(Unusual);
        }
        Ok(info)
    }

    fn events<S: EventSink<'de>>(&mut self, sink: &mut S) -> Res<()> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            let start = self.pos;
            let mut e = Event::default();
            match self.event(&mut e) {
                Ok(()) => sink.event(e),
                Err(Unusual) => {
                    // Another shape: serde_json reads this element.
                    self.pos = start;
                    match self.serde::<MaybeEvent<'de>>()?.0 {
                        Some(e) => sink.event(e),
                        None => sink.malformed(),
                    }
                }
            }
            if !self.next_member(b']')? {
                return Ok(());
            }
        }
    }

    /// One event of the usual shape (see the module doc).
    fn event(&mut self, e: &mut Event<'de>) -> Res<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            let field = match self.event_key() {
                Some(f) => {
                    self.colon()?;
                    f
                }
                None => EventKey::of(self.key()?),
            };
            match field {
                EventKey::Ph => e.ph = self.text_field()?,
                EventKey::Cat => e.cat = self.text_field()?,
                EventKey::Name => e.name = self.text_field()?,
                EventKey::Pid => e.pid = self.id_field()?,
                EventKey::Tid => e.tid = self.id_field()?,
                EventKey::Ts => e.ts = self.raw_number()?,
                EventKey::Dur => e.dur = self.raw_number()?,
                EventKey::Args => {
                    // Only a complete event's arguments may be left out: a
                    // counter's are its series, and an event whose `ph`
                    // comes later keeps all.
                    let keep = match e.ph.as_ref().map(Text::as_str) {
                        Some("X") => self.keep,
                        _ => KeepArgs::All,
                    };
                    e.args = self.args(keep)?;
                }
                EventKey::Other => self.skip()?,
            }
            if !self.next_member(b'}')? {
                return Ok(());
            }
        }
    }

    /// The key at `pos` (its `"`) when it is one of the event's fields the
    /// importer reads, told from the next eight bytes at once: the key's
    /// text and both quotes must match exactly, so `"phase"` or `"p\u0068"`
    /// are never taken for `"ph"`. `None` (nothing consumed) otherwise,
    /// and near the end of the text.
    #[inline]
    fn event_key(&mut self) -> Option<EventKey> {
        let chunk = self.bytes().get(self.pos..self.pos + 8)?;
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let (field, len) = EventKey::of_word(word)?;
        self.pos += len;
        Some(field)
    }

    /// The `:` after a key, and the whitespace around it.
    #[inline]
    fn colon(&mut self) -> Res<()> {
        self.expect(b':')?;
        self.skip_ws();
        Ok(())
    }

    #[inline]
    fn text_field(&mut self) -> Res<Option<Text<'de>>> {
        match self.bytes().get(self.pos) {
            Some(b'"') => Ok(Some(Text(Cow::Borrowed(self.string()?)))),
            Some(b'n') => self.literal("null").map(|()| None),
            _ => Err(Unusual),
        }
    }

    #[inline]
    fn id_field(&mut self) -> Res<Option<Id<'de>>> {
        match self.bytes().get(self.pos) {
            Some(b'"') => Ok(Some(Id::Text(Cow::Borrowed(self.string()?)))),
            Some(b'n') => self.literal("null").map(|()| None),
            _ => match self.number()?.int() {
                Some(v) => Ok(Some(Id::Num(v))),
                None => Err(Unusual),
            },
        }
    }

    #[inline]
    fn raw_number(&mut self) -> Res<Option<Cow<'de, str>>> {
        match self.bytes().get(self.pos) {
            Some(b'n') => self.literal("null").map(|()| None),
            _ => Ok(Some(Cow::Borrowed(self.number()?.text))),
        }
    }

    fn args(&mut self, keep: KeepArgs) -> Res<Option<Args<'de>>> {
        match self.bytes().get(self.pos) {
            Some(b'{') => self.pos += 1,
            Some(b'n') => return self.literal("null").map(|()| None),
            _ => return Err(Unusual),
        }
        if self.peek()? == b'}' {
            self.pos += 1;
            return Ok(Some(Args(Vec::new())));
        }
        // Gathered in one reused buffer, then moved into a vector of their
        // exact size: events wait in batches (see `import::RestSink`), so
        // spare capacity costs memory, and Kineto's events of different
        // kinds (1, 0 or 7 arguments kept) follow each other, so a vector
        // sized by guess would often grow.
        self.arg_buf.clear();
        loop {
            let key = self.key()?;
            if keep.reads(key) {
                let value = self.arg()?;
                self.arg_buf.push((Text(Cow::Borrowed(key)), value));
            } else {
                self.skip_arg()?;
            }
            if !self.next_member(b'}')? {
                return Ok(Some(Args(self.arg_buf.drain(..).collect())));
            }
        }
    }

    /// One argument value, as `json::ArgVisitor` reads it.
    #[inline]
    fn arg(&mut self) -> Res<ArgJson<'de>> {
        Ok(match self.bytes().get(self.pos).copied().ok_or(Unusual)? {
            b'"' => ArgJson::Str(Cow::Borrowed(self.string()?)),
            b'n' => {
                self.literal("null")?;
                ArgJson::Null
            }
            b't' => {
                self.literal("true")?;
                ArgJson::Bool(true)
            }
            b'f' => {
                self.literal("false")?;
                ArgJson::Bool(false)
            }
            b'[' => match self.int_array() {
                Some(v) => ArgJson::Json(v),
                None => ArgJson::Json(self.serde::<serde_json::Value>()?),
            },
            b'{' => ArgJson::Json(self.serde::<serde_json::Value>()?),
            _ => match self.number()? {
                n if n.integer() => match n.int() {
                    Some(v) => ArgJson::Int(v),
                    None => return Err(Unusual),
                },
                Num { text, .. } => {
                    // Both correctly rounded (serde_json's float_roundtrip).
                    let v: f64 = text.parse().map_err(|_| Unusual)?;
                    if !v.is_finite() {
                        return Err(Unusual); // serde_json: out of range
                    }
                    ArgJson::Double(v)
                }
            },
        })
    }

    /// Skips an argument value that would read as [`Reader::arg`] reads
    /// it: the same text is declined (and then read by serde_json), but
    /// nothing is built, and a nested array or object is only checked to
    /// be JSON (see [`KeepArgs::Analysis`]).
    #[inline]
    fn skip_arg(&mut self) -> Res<()> {
        match self.bytes().get(self.pos).copied().ok_or(Unusual)? {
            b'"' => self.string().map(drop),
            b'n' => self.literal("null"),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'[' | b'{' => self.serde::<serde::de::IgnoredAny>().map(drop),
            _ => match self.number()? {
                n if n.integer() => n.int().map(drop).ok_or(Unusual),
                Num { text, .. } => match text.parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(()),
                    _ => Err(Unusual),
                },
            },
        }
    }

    /// A flat array of small integers (`"grid": [8, 1, 1]`) as serde_json
    /// reads it into a `Value`; `None` (nothing read) for any other array.
    fn int_array(&mut self) -> Option<serde_json::Value> {
        let start = self.pos;
        let mut read = || -> Res<serde_json::Value> {
            self.expect(b'[')?;
            let mut items = Vec::new();
            if self.peek()? == b']' {
                self.pos += 1;
                return Ok(serde_json::Value::Array(items));
            }
            loop {
                self.skip_ws();
                let Some(v) = self.number()?.int() else {
                    return Err(Unusual);
                };
                // serde_json hands non-negative integers over as u64.
                items.push(match u64::try_from(v) {
                    Ok(u) => serde_json::Value::from(u),
                    Err(_) => serde_json::Value::from(v),
                });
                if !self.next_member(b']')? {
                    return Ok(serde_json::Value::Array(items));
                }
            }
        };
        match read() {
            Ok(v) => Some(v),
            Err(Unusual) => {
                self.pos = start;
                None
            }
        }
    }
}

/// The deepest nesting of arrays and objects in `json` (valid JSON).
fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::super::parse_document_partial;
    use super::*;

    mod adversarial;

    /// Everything a sink is told, in order.
    #[derive(Default, Debug, PartialEq)]
    struct Log(Vec<String>);

    impl<'de> EventSink<'de> for Log {
        fn event(&mut self, e: Event<'de>) {
            self.0.push(format!("{e:?}"));
        }
        fn malformed(&mut self) {
            self.0.push("malformed".into());
        }
    }

    /// The fast reader's events and top level, when it reads `json`; each
    /// time it does, they must be serde_json's.
    fn fast_equals_serde(json: &str) -> Option<Log> {
        let mut fast = Log::default();
        let info = parse_document(json.as_bytes(), &mut fast)?;
        let mut slow = Log::default();
        let (result, slow_info) = parse_document_partial(json.as_bytes(), &mut slow);
        assert!(result.is_ok(), "fast read what serde_json rejects: {json}");
        assert_eq!(fast, slow, "{json}");
        assert_eq!(format!("{info:?}"), format!("{slow_info:?}"), "{json}");
        Some(fast)
    }

    fn doc(events: &str) -> String {
        format!(
            r#"{{"schemaVersion": 1, "deviceProperties": [{{"id": 0}}], "traceEvents": [{events}],
 "traceName": "t", "baseTimeNanoseconds": 1700000000000000000}}"#
        )
    }

    #[test]
    fn usual_and_unusual_events_read_as_serde_json_reads_them() {
        let events = [
            r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2,
               "args": {"grid": [8, 1, 1], "block": [], "n": -3, "f": -0.0, "e": 1.5e3, "x": 2E-2,
               "b": true, "c": false, "z": null, "s": "é", "dims": [[1, 2], [3]], "o": {"b": 1, "a": [2.5]},
               "neg": [-1, 0], "big": 123456789012345678901, "u": 18446744073709551615, "m0": -0}}"#,
            r#"{"ph": "X", "name": "a\"b\\c\u00e9", "pid": "Spans", "tid": -5, "ts": "12", "dur": null}"#,
            r#"{"ph": 5, "name": "wrong type"}"#,
            r#"{"ph": "X", "pid": 1.0, "tid": 18446744073709551615}"#,
            r#"{"ph": "f", "id": 3, "bp": "e", "extra": {"a": [1, {"b": null}]}, "t": true}"#,
            r#"{"ph": "X", "ph": "M", "args": {"name": "n", "name": "m"}, "args": null}"#,
            r#"{"args": []}"#,
            r#"{"na\u006de": "escaped key"}"#,
            r#"{}"#,
            "3",
            r#""event""#,
            "[1, {}]",
            "null",
            r#"{"ts": 1669783687464181, "dur": 0.0001, "tid": 0, "pid": -0}"#,
        ];
        for e in events {
            let log = fast_equals_serde(&doc(e)).expect("read by the fast reader");
            assert_eq!(log.0.len(), 1, "{e}");
        }
        let all = doc(&events.join(",\n  "));
        let log = fast_equals_serde(&all).expect("all");
        assert_eq!(log.0.len(), events.len());
        assert_eq!(log.0.iter().filter(|l| *l == "malformed").count(), 7);
        // Whitespace everywhere it may be; empty documents and arrays.
        for json in [
            " \r\n\t{ \"traceEvents\" : [ { \"ph\" : \"X\" , \"args\" : { } } , { } ] } \n",
            r#"{"traceEvents": []}"#,
            r#"{}"#,
            r#"{"traceEvents": [], "traceEvents": [{"ph": "i"}], "other": [1, "x"]}"#,
        ] {
            fast_equals_serde(json).expect(json);
        }
    }

    #[test]
    fn anything_odd_is_left_to_serde_json() {
        // Invalid JSON (each rejected by serde_json too), out-of-range
        // numbers, a document cut short, escaped or odd top-level keys,
        // nesting near serde_json's limit.
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let cases = [
            doc(r#"{"ph": "X",}"#),
            doc(r#"{"ph": "X" "cat": "a"}"#),
            doc(r#"{"ts": 01}"#),
            doc(r#"{"ts": 1.}"#),
            doc(r#"{"ts": 1x}"#),
            doc(r#"{"args": {"v": 1e400}}"#),
            doc(r#"{"name": "tab	inside"}"#),
            doc(r#"{"ph": nul}"#),
            doc(r#"{"ph": "X"}, "#),
            doc(r#"{"ph": "X"}]"#),
            doc(&format!(r#"{{"args": {{"deep": {deep}}}}}"#)),
            r#"{"trace\u0045vents": [{"ph": "X"}]}"#.to_string(),
            r#"{"traceEvents": {"ph": "X"}}"#.to_string(),
            r#"{"traceEvents": [{"ph": "X"}]} x"#.to_string(),
            r#"{"traceEvents": [{"ph": "X"}"#.to_string(),
            r#"[{"ph": "X"}]"#.to_string(),
        ];
        for json in &cases {
            assert!(
                parse_document(json.as_bytes(), &mut Log::default()).is_none(),
                "{json}"
            );
        }
        assert!(parse_document(
            b"{\"traceEvents\": [{\"name\": \"\xff\"}]}",
            &mut Log::default()
        )
        .is_none());
    }

    #[test]
    fn hta_traces_read_as_serde_json_reads_them() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hta");
        for rel in [
            "df_index_resolver/df_index_resolver.json.gz",
            "nccl_parser_config/nccl_data.json.gz",
            "trace_filter/sampled_rank-0.json.gz",
        ] {
            let gz = std::fs::read(dir.join(rel)).expect("trace");
            let mut text = String::new();
            flate2::read::MultiGzDecoder::new(&gz[..])
                .read_to_string(&mut text)
                .expect("inflate");
            let log = fast_equals_serde(&text).expect(rel);
            assert!(log.0.len() > 1000, "{rel}");
        }
    }

    #[test]
    fn special_bytes_finds_the_first() {
        for (text, first) in [
            (*b"abcdefgh", None),
            (*b"abc\"efgh", Some(3)),
            (*b"a\\c\"efgh", Some(1)),
            (*b"\x1fbcdefgh", Some(0)),
            (*b"abcdefg\n", Some(7)),
            (*b"\xc3\xa9\xff \x7f\x80~\"", Some(7)),
        ] {
            let s = special_bytes(u64::from_le_bytes(text));
            let found = (s != 0).then(|| (s.trailing_zeros() / 8) as usize);
            assert_eq!(found, first, "{text:?}");
        }
    }
}

// The fast reader against serde_json, timed (an ignored test).
#[cfg(test)]
mod bench;
