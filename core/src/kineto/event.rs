//! One element of `traceEvents`.
//!
//! Reading an event never fails on a field of an unexpected JSON type: the
//! event is reported as malformed instead, so one odd event costs a warning,
//! not the file. Timestamps stay raw text ([`RawValue`]) so `time` can
//! convert them to integer nanoseconds exactly.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::json::{ArgJson, Args, Id, Text};
use crate::model::LaunchConfig;

/// One element of `traceEvents`, with the fields the importer reads (flow
/// ids, `s`, `bp` are not read: flows are rebuilt from correlation ids).
#[derive(Debug, Clone, Default)]
pub struct Event<'a> {
    pub ph: Option<Text<'a>>,
    pub cat: Option<Text<'a>>,
    pub name: Option<Text<'a>>,
    pub pid: Option<Id<'a>>,
    pub tid: Option<Id<'a>>,
    /// The raw JSON text of `ts` and `dur` (see `time`).
    pub ts: Option<Cow<'a, str>>,
    pub dur: Option<Cow<'a, str>>,
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
pub struct MaybeEvent<'a>(pub Option<Event<'a>>);

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
                ts: ts.map(|r: &RawValue| Cow::Borrowed(r.get())),
                dur: dur.map(|r: &RawValue| Cow::Borrowed(r.get())),
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

impl Event<'_> {
    /// A copy that borrows nothing from the text (for the few events kept
    /// until the end of an import that frees the text piece by piece).
    pub fn to_static(&self) -> Event<'static> {
        let raw = |r: &Option<Cow<str>>| r.as_deref().map(|r| Cow::Owned(r.to_owned()));
        Event {
            ph: self.ph.as_ref().map(Text::to_static),
            cat: self.cat.as_ref().map(Text::to_static),
            name: self.name.as_ref().map(Text::to_static),
            pid: self.pid.as_ref().map(Id::to_static),
            tid: self.tid.as_ref().map(Id::to_static),
            ts: raw(&self.ts),
            dur: raw(&self.dur),
            args: self.args.as_ref().map(Args::to_static),
        }
    }

    /// The CUDA correlation id, when present and within u32.
    pub fn correlation(&self) -> Option<u32> {
        self.arg("correlation")
            .and_then(ArgJson::as_u64)
            .and_then(|c| u32::try_from(c).ok())
    }

    /// Launch configuration of a kernel event.
    pub fn launch_config(&self) -> LaunchConfig {
        let u32_arg = |k: &str| {
            self.arg(k)
                .and_then(ArgJson::as_u64)
                .and_then(|x| u32::try_from(x).ok())
                .unwrap_or(0)
        };
        LaunchConfig {
            grid: self
                .arg("grid")
                .and_then(ArgJson::as_dim3)
                .unwrap_or([0; 3]),
            block: self
                .arg("block")
                .and_then(ArgJson::as_dim3)
                .unwrap_or([0; 3]),
            registers_per_thread: u32_arg("registers per thread"),
            // Kineto's "shared memory" is CUPTI's static + dynamic shared
            // memory per block; the split is not recorded, so the total sits here.
            static_smem_bytes: u32_arg("shared memory"),
            dynamic_smem_bytes: 0,
        }
    }

    /// A "[memory]" instant (profile_memory=True): allocator totals.
    pub fn is_memory(&self) -> bool {
        matches!(self.ph(), "i" | "I") && self.name() == "[memory]"
    }

    /// The CUDA ordinal of a "[memory]" event on a GPU ("Device Type" 1 is CUDA).
    pub fn gpu_memory_device(&self) -> Option<u32> {
        if self.arg("Device Type").and_then(ArgJson::as_i64) != Some(1) {
            return None;
        }
        self.arg("Device Id")
            .and_then(ArgJson::as_i64)
            .and_then(|d| u32::try_from(d).ok())
    }
}
