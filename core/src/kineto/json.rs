//! Borrowed JSON shapes of a Kineto trace and the one-pass document parser.
//!
//! Strings are borrowed from the (decompressed) input when they hold no
//! escapes, and each event is handed to an [`EventSink`] as soon as it is
//! read, so no per-event `Value` tree or list of all events is built.
//! Timestamps stay raw text ([`RawValue`]) so `time` can convert them to
//! integer nanoseconds exactly. Fields of an unexpected JSON type make the
//! event count as malformed instead of failing the file.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON string, borrowed from the input when it holds no escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

struct TextVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
    type Value = Text<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v)))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor(PhantomData))
    }
}

/// A `pid` or `tid`: numeric for real processes, threads, devices and
/// streams; text for Kineto's own rows ("Spans", "PyTorch Profiler").
#[derive(Debug, Clone, PartialEq)]
pub enum Id<'a> {
    Num(i64),
    Text(Cow<'a, str>),
}

impl Id<'_> {
    pub fn num(&self) -> Option<i64> {
        match self {
            Id::Num(n) => Some(*n),
            Id::Text(_) => None,
        }
    }
}

/// One argument value as Kineto writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgJson<'a> {
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    Double(f64),
    Bool(bool),
    Str(Cow<'a, str>),
    Null,
    /// An array or object ("grid": [8, 1, 1], "Input Dims": [[...]]).
    Json(serde_json::Value),
}

impl ArgJson<'_> {
    /// The value as an unsigned integer, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            ArgJson::Int(v) => u64::try_from(*v).ok(),
            ArgJson::UInt(v) => Some(*v),
            ArgJson::Double(v) if v.fract() == 0.0 && *v >= 0.0 && *v < 1.8e19 => Some(*v as u64),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            ArgJson::Int(v) => Some(*v),
            ArgJson::UInt(v) => i64::try_from(*v).ok(),
            ArgJson::Double(v) if v.fract() == 0.0 && v.abs() < 9.0e18 => Some(*v as i64),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ArgJson::Int(v) => Some(*v as f64),
            ArgJson::UInt(v) => Some(*v as f64),
            ArgJson::Double(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            ArgJson::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Three unsigned components of an array such as "grid": [8, 1, 1].
    pub fn as_dim3(&self) -> Option<[u32; 3]> {
        let ArgJson::Json(serde_json::Value::Array(a)) = self else {
            return None;
        };
        let mut out = [1u32; 3];
        for (slot, v) in out.iter_mut().zip(a.iter()) {
            *slot = u32::try_from(v.as_u64()?).ok()?;
        }
        Some(out)
    }
}

struct ArgVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ArgVisitor<'a> {
    type Value = ArgJson<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(ArgJson::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(ArgJson::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v)
            .map(ArgJson::Int)
            .unwrap_or(ArgJson::UInt(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(ArgJson::Double(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(ArgJson::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ArgJson::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(ArgJson::Str(Cow::Owned(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ArgJson::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ArgJson::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        serde_json::Value::deserialize(SeqAccessDeserializer::new(seq)).map(ArgJson::Json)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        serde_json::Value::deserialize(MapAccessDeserializer::new(map)).map(ArgJson::Json)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ArgJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArgVisitor(PhantomData))
    }
}

/// An event's `args`, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args<'a>(pub Vec<(Text<'a>, ArgJson<'a>)>);

impl<'a> Args<'a> {
    pub fn get(&self, key: &str) -> Option<&ArgJson<'a>> {
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    }
}

/// One element of `traceEvents`, with the fields the importer reads (flow
/// ids, `s`, `bp` are not read: flows are rebuilt from correlation ids).
#[derive(Debug, Clone, Default)]
pub struct Event<'a> {
    pub ph: Option<Text<'a>>,
    pub cat: Option<Text<'a>>,
    pub name: Option<Text<'a>>,
    pub pid: Option<Id<'a>>,
    pub tid: Option<Id<'a>>,
    pub ts: Option<&'a RawValue>,
    pub dur: Option<&'a RawValue>,
    pub args: Option<Args<'a>>,
}

/// A field that had the expected JSON type, was absent (or null), or had
/// another type. Reading never fails on a wrong type, so one odd event
/// cannot abort the single pass over `traceEvents`.
#[derive(Debug, Clone, Default)]
enum Field<T> {
    #[default]
    Absent,
    Value(T),
    Wrong,
}

impl<T> Field<T> {
    /// `Err(())` for a wrong type.
    fn into_option(self) -> Result<Option<T>, ()> {
        match self {
            Field::Absent => Ok(None),
            Field::Value(v) => Ok(Some(v)),
            Field::Wrong => Err(()),
        }
    }
}

/// Visitor methods answering `Field::Wrong` (after draining containers).
macro_rules! wrong_type {
    (scalars: $($method:ident($ty:ty)),*) => {
        $(fn $method<E: de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Ok(Field::Wrong)
        })*
    };
    (seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<de::IgnoredAny>()?.is_some() {}
            Ok(Field::Wrong)
        }
    };
    (map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
            Ok(Field::Wrong)
        }
    };
}

struct TextField<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextField<'a> {
    type Value = Field<Text<'a>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Value(Text(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Value(Text(Cow::Owned(v.to_owned()))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Absent)
    }
    wrong_type!(scalars: visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64));
    wrong_type!(seq);
    wrong_type!(map);
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<Text<'a>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextField(PhantomData))
    }
}

struct IdField<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for IdField<'a> {
    type Value = Field<Id<'a>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Field::Value(Id::Num(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v)
            .map(|v| Field::Value(Id::Num(v)))
            .unwrap_or(Field::Wrong))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            Ok(Field::Value(Id::Num(v as i64)))
        } else {
            Ok(Field::Wrong)
        }
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Value(Id::Text(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Value(Id::Text(Cow::Owned(v.to_owned()))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Absent)
    }
    wrong_type!(scalars: visit_bool(bool));
    wrong_type!(seq);
    wrong_type!(map);
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<Id<'a>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IdField(PhantomData))
    }
}

struct ArgsField<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ArgsField<'a> {
    type Value = Field<Args<'a>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some((k, v)) = map.next_entry::<Text<'a>, ArgJson<'a>>()? {
            out.push((k, v));
        }
        Ok(Field::Value(Args(out)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Absent)
    }
    wrong_type!(scalars: visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64), visit_str(&str));
    wrong_type!(seq);
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<Args<'a>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArgsField(PhantomData))
    }
}

/// An element of `traceEvents`: `None` when it is not an object or a field
/// has the wrong type.
struct MaybeEvent<'a>(Option<Event<'a>>);

struct MaybeEventVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for MaybeEventVisitor<'a> {
    type Value = MaybeEvent<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut ph = Field::Absent;
        let mut cat = Field::Absent;
        let mut name = Field::Absent;
        let mut pid = Field::Absent;
        let mut tid = Field::Absent;
        let mut args = Field::Absent;
        let mut ts = None;
        let mut dur = None;
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match key.as_str() {
                "ph" => ph = map.next_value()?,
                "cat" => cat = map.next_value()?,
                "name" => name = map.next_value()?,
                "pid" => pid = map.next_value()?,
                "tid" => tid = map.next_value()?,
                "ts" => ts = map.next_value::<Option<&'de RawValue>>()?,
                "dur" => dur = map.next_value::<Option<&'de RawValue>>()?,
                "args" => args = map.next_value()?,
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let event = (|| {
            Ok::<_, ()>(Event {
                ph: ph.into_option()?,
                cat: cat.into_option()?,
                name: name.into_option()?,
                pid: pid.into_option()?,
                tid: tid.into_option()?,
                ts,
                dur,
                args: args.into_option()?,
            })
        })();
        Ok(MaybeEvent(event.ok()))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(MaybeEvent(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(MaybeEvent(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(MaybeEvent(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(MaybeEvent(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(MaybeEvent(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(MaybeEvent(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(MaybeEvent(None))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for MaybeEvent<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MaybeEventVisitor(PhantomData))
    }
}

impl<'a> Event<'a> {
    pub fn ph(&self) -> &str {
        self.ph.as_ref().map(|t| t.as_str()).unwrap_or("")
    }
    pub fn cat(&self) -> &str {
        self.cat.as_ref().map(|t| t.as_str()).unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.name.as_ref().map(|t| t.as_str()).unwrap_or("")
    }
    pub fn arg(&self, key: &str) -> Option<&ArgJson<'a>> {
        self.args.as_ref().and_then(|a| a.get(key))
    }
}

/// Receives `traceEvents` one by one while the file is parsed.
pub trait EventSink<'de> {
    fn event(&mut self, e: Event<'de>);
    /// An element that is not an object or has a field of the wrong type.
    fn malformed(&mut self);
}

/// The top level besides `traceEvents`, kept raw so a malformed optional
/// section (device properties, distributed info) costs a warning, not the file.
#[derive(Debug, Default)]
pub struct TopInfo<'a> {
    pub has_events: bool,
    pub schema_version: Option<&'a RawValue>,
    pub device_properties: Option<&'a RawValue>,
    pub distributed_info: Option<&'a RawValue>,
    pub base_time_ns: Option<&'a RawValue>,
    pub trace_name: Option<&'a RawValue>,
}

/// Parses a whole Kineto document in one pass, handing each event to `sink`
/// as soon as it is read (so events are never all held at once; the
/// top-level keys may come in any order, `baseTimeNanoseconds` usually after
/// the events).
pub fn parse_document<'de, S: EventSink<'de>>(
    json: &'de [u8],
    sink: &mut S,
) -> Result<TopInfo<'de>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let info = de::Deserializer::deserialize_map(
        &mut de,
        TopVisitor {
            sink,
            _de: PhantomData,
        },
    )?;
    de.end()?;
    Ok(info)
}

struct TopVisitor<'s, 'de, S> {
    sink: &'s mut S,
    _de: PhantomData<&'de ()>,
}

impl<'de, S: EventSink<'de>> Visitor<'de> for TopVisitor<'_, 'de, S> {
    type Value = TopInfo<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kineto trace object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut info = TopInfo::default();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let slot = match key.as_str() {
                "traceEvents" => {
                    map.next_value_seed(EventsSeed {
                        sink: &mut *self.sink,
                        _de: PhantomData,
                    })?;
                    info.has_events = true;
                    continue;
                }
                "schemaVersion" => &mut info.schema_version,
                "deviceProperties" => &mut info.device_properties,
                "distributedInfo" => &mut info.distributed_info,
                "baseTimeNanoseconds" => &mut info.base_time_ns,
                "traceName" => &mut info.trace_name,
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                    continue;
                }
            };
            *slot = map.next_value::<Option<&'de RawValue>>()?;
        }
        Ok(info)
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
