//! JSON values of a Kineto trace: strings borrowed from the (decompressed)
//! input when they hold no escapes, pid/tid, and typed argument values.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON string, borrowed from the input when it holds no escapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn to_static(&self) -> Text<'static> {
        Text(Cow::Owned(self.0.clone().into_owned()))
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
    pub fn to_static(&self) -> Id<'static> {
        match self {
            Id::Num(n) => Id::Num(*n),
            Id::Text(s) => Id::Text(Cow::Owned(s.clone().into_owned())),
        }
    }

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
    pub fn to_static(&self) -> ArgJson<'static> {
        match self {
            ArgJson::Int(v) => ArgJson::Int(*v),
            ArgJson::UInt(v) => ArgJson::UInt(*v),
            ArgJson::Double(v) => ArgJson::Double(*v),
            ArgJson::Bool(v) => ArgJson::Bool(*v),
            ArgJson::Str(s) => ArgJson::Str(Cow::Owned(s.clone().into_owned())),
            ArgJson::Null => ArgJson::Null,
            ArgJson::Json(v) => ArgJson::Json(v.clone()),
        }
    }

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
    pub fn to_static(&self) -> Args<'static> {
        Args(
            self.0
                .iter()
                .map(|(k, v)| (k.to_static(), v.to_static()))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&ArgJson<'a>> {
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    }
}
