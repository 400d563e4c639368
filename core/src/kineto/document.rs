//! The one-pass parser of a whole Kineto document.
//!
//! Each event is handed to an [`EventSink`] as soon as it is read, so no
//! list of all events (nor any per-event `Value` tree) is ever built.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::event::{Event, MaybeEvent};
use super::json::Text;

mod scan;

pub use scan::parse_document as parse_document_fast;

/// Receives `traceEvents` one by one while the file is parsed.
pub trait EventSink<'de> {
    fn event(&mut self, e: Event<'de>);
    /// An element that is not an object or has a field of the wrong type.
    fn malformed(&mut self);
    /// Which arguments of complete events the sink keeps: the fast reader
    /// skips the others unread (serde_json's parser reads them all).
    fn keep_args(&self) -> super::KeepArgs {
        super::KeepArgs::All
    }
}

/// The top level besides `traceEvents`, kept raw so a malformed optional
/// section (device properties, distributed info) costs a warning, not the file.
/// Owned (the few top-level values are copied), so a document read piece by
/// piece (see `split`) can free each piece.
#[derive(Debug, Default)]
pub struct TopInfo {
    pub has_events: bool,
    /// `traceEvents` was the last top-level key: a document cut inside its
    /// events (see `split`) must end there.
    pub ends_in_events: bool,
    pub schema_version: Option<Box<RawValue>>,
    pub device_properties: Option<Box<RawValue>>,
    pub distributed_info: Option<Box<RawValue>>,
    pub base_time_ns: Option<Box<RawValue>>,
    pub trace_name: Option<Box<RawValue>>,
    /// Which keys of `KEYS` appeared, so that the keys of a document's
    /// second part replace the first part's exactly as a repeated key does.
    present: u8,
}

/// The optional top-level keys kept, in the order of `TopInfo::slot`.
const KEYS: [&str; 5] = [
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
    "traceName",
];

impl TopInfo {
    fn slot(&mut self, key_index: usize) -> Option<&mut Option<Box<RawValue>>> {
        Some(match key_index {
            0 => &mut self.schema_version,
            1 => &mut self.device_properties,
            2 => &mut self.distributed_info,
            3 => &mut self.base_time_ns,
            4 => &mut self.trace_name,
            _ => return None,
        })
    }

    /// The index of a kept top-level key.
    pub(super) fn slot_of(key: &str) -> Option<usize> {
        KEYS.iter().position(|k| *k == key)
    }

    /// Sets the kept key of index `i` (see [`TopInfo::slot_of`]).
    pub(super) fn set(&mut self, i: usize, value: Option<Box<RawValue>>) {
        self.present |= 1 << i;
        if let Some(slot) = self.slot(i) {
            *slot = value;
        }
    }

    /// The top level of a document read in parts: `later`'s keys follow
    /// (and so replace) this part's.
    pub fn then(mut self, mut later: TopInfo) -> TopInfo {
        for i in 0..KEYS.len() {
            if later.present & (1 << i) != 0 {
                let value = later.slot(i).and_then(|s| s.take());
                if let Some(slot) = self.slot(i) {
                    *slot = value;
                }
            }
        }
        TopInfo {
            has_events: self.has_events || later.has_events,
            ends_in_events: later.ends_in_events,
            present: self.present | later.present,
            ..self
        }
    }
}

/// Parses a whole Kineto document in one pass, handing each event to `sink`
/// as soon as it is read (so events are never all held at once; the
/// top-level keys may come in any order, `baseTimeNanoseconds` usually after
/// the events).
#[cfg(test)]
pub fn parse_document<'de, S: EventSink<'de>>(
    json: &'de [u8],
    sink: &mut S,
) -> Result<TopInfo, serde_json::Error> {
    let (result, info) = parse_document_partial(json, sink);
    result.map(|()| info)
}

/// [`parse_document`] that also returns, on an error, the top level read
/// before it (a document cut short still names what it had).
pub fn parse_document_partial<'de, S: EventSink<'de>>(
    json: &'de [u8],
    sink: &mut S,
) -> (Result<(), serde_json::Error>, TopInfo) {
    let mut info = TopInfo::default();
    // Validating UTF-8 once is cheaper than string by string; invalid text
    // is parsed as bytes so the error names the place.
    let result = match simdutf8::basic::from_utf8(json) {
        Ok(text) => parse_from(serde_json::Deserializer::from_str(text), sink, &mut info),
        Err(_) => parse_from(serde_json::Deserializer::from_slice(json), sink, &mut info),
    };
    (result, info)
}

fn parse_from<'de, R: serde_json::de::Read<'de>, S: EventSink<'de>>(
    mut de: serde_json::Deserializer<R>,
    sink: &mut S,
    info: &mut TopInfo,
) -> Result<(), serde_json::Error> {
    de::Deserializer::deserialize_map(
        &mut de,
        TopVisitor {
            sink,
            info,
            _de: PhantomData,
        },
    )?;
    de.end()
}

struct TopVisitor<'s, 'de, S> {
    sink: &'s mut S,
    info: &'s mut TopInfo,
    _de: PhantomData<&'de ()>,
}

impl<'de, S: EventSink<'de>> Visitor<'de> for TopVisitor<'_, 'de, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kineto trace object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let info = self.info;
        while let Some(key) = map.next_key::<Text<'de>>()? {
            if key.as_str() == "traceEvents" {
                // Set first: a document cut inside its events had them.
                info.has_events = true;
                info.ends_in_events = true;
                map.next_value_seed(EventsSeed {
                    sink: &mut *self.sink,
                    _de: PhantomData,
                })?;
                continue;
            }
            info.ends_in_events = false;
            let Some(i) = TopInfo::slot_of(key.as_str()) else {
                map.next_value::<de::IgnoredAny>()?;
                continue;
            };
            let value = map.next_value::<Option<Box<RawValue>>>()?;
            info.set(i, value);
        }
        Ok(())
    }
}

struct EventsSeed<'s, 'de, S> {
    sink: &'s mut S,
    _de: PhantomData<&'de ()>,
}

impl<'de, S: EventSink<'de>> de::DeserializeSeed<'de> for EventsSeed<'_, 'de, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S: EventSink<'de>> Visitor<'de> for EventsSeed<'_, 'de, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("traceEvents to be an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(MaybeEvent(e)) = seq.next_element::<MaybeEvent<'de>>()? {
            match e {
                Some(e) => self.sink.event(e),
                None => self.sink.malformed(),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Names(Vec<String>, usize);

    impl<'de> EventSink<'de> for Names {
        fn event(&mut self, e: Event<'de>) {
            self.0.push(e.name().to_string());
        }
        fn malformed(&mut self) {
            self.1 += 1;
        }
    }

    #[test]
    fn invalid_utf8_is_an_error_at_its_place_and_escapes_are_read() {
        let ok = br#"{"traceEvents": [{"name": "a\u00e9\n"}, 3, {"name": "b"}], "traceName": "t"}"#;
        let mut names = Names::default();
        let info = parse_document(ok, &mut names).expect("valid document");
        assert_eq!(names.0, ["a\u{e9}\n", "b"]);
        assert_eq!(names.1, 1);
        assert_eq!(info.trace_name.as_deref().map(|r| r.get()), Some(r#""t""#));
        assert!(!info.ends_in_events);

        let bad = b"{\"traceEvents\": [{\"name\": \"a\xff\"}]}";
        let e = parse_document(bad, &mut Names::default()).expect_err("invalid UTF-8");
        assert!(e.to_string().contains("line 1 column"), "{e}");
    }

    #[test]
    fn later_part_keys_replace_earlier_ones() {
        let first = parse_document(
            br#"{"traceName": "a", "schemaVersion": 1, "traceEvents": []}"#,
            &mut Names::default(),
        )
        .expect("first");
        assert!(first.ends_in_events);
        let later = parse_document(
            br#"{"traceEvents": [], "traceName": null, "baseTimeNanoseconds": 5}"#,
            &mut Names::default(),
        )
        .expect("later");
        let both = first.then(later);
        assert!(both.trace_name.is_none());
        assert_eq!(both.schema_version.as_deref().map(|r| r.get()), Some("1"));
        assert_eq!(both.base_time_ns.as_deref().map(|r| r.get()), Some("5"));
        assert!(both.has_events && !both.ends_in_events);
    }
}
