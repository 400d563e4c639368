//! Pretty JSON, byte for byte serde_json's `to_writer_pretty` (two-space
//! indent), written faster: a line break and its indent go out in one write
//! instead of one write per level (a report's SMs-in-use series is tens of
//! thousands of two-number arrays, five levels deep).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// Writes `value` as serde_json's pretty JSON to `w`.
pub fn to_writer<W: Write, T: ?Sized + Serialize>(w: W, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Pretty::default());
    value.serialize(&mut ser)
}

/// serde_json's `PrettyFormatter` with a two-space indent.
#[derive(Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

/// A line break then spaces: a break and the indent of up to 63 levels.
const BREAK: &[u8; 127] = &{
    let mut b = [b' '; 127];
    b[0] = b'\n';
    b
};

impl Pretty {
    /// `\n` and the indent of the current depth.
    fn new_line<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        let spaces = 2 * self.depth;
        match BREAK.get(..1 + spaces) {
            Some(line) => w.write_all(line),
            None => {
                w.write_all(b"\n")?;
                (0..self.depth).try_for_each(|_| w.write_all(b"  "))
            }
        }
    }
}

impl Pretty {
    /// `[` or `{`: one level deeper, nothing in it yet.
    #[inline]
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// `]` or `}`, on a line of its own unless the container was empty.
    #[inline]
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.new_line(w)?;
        }
        w.write_all(bracket)
    }

    /// Before an element or a key: `,` after the first, then a new line.
    #[inline]
    fn next_item<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.new_line(w)
    }
}

impl Formatter for Pretty {
    #[inline]
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    #[inline]
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    #[inline]
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.next_item(w, first)
    }

    #[inline]
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    #[inline]
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    #[inline]
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    #[inline]
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.next_item(w, first)
    }

    #[inline]
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    #[inline]
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(v: &serde_json::Value) {
        let mut fast = Vec::new();
        to_writer(&mut fast, v).expect("in-memory write");
        let serde = serde_json::to_vec_pretty(v).expect("in-memory write");
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&serde)
        );
    }

    #[test]
    fn bytes_are_serde_jsons() {
        same(&serde_json::json!({
            "a": [], "b": {}, "c": [[1, 2], [3, [4, {"d": null}]]],
            "e": {"f": {"g": [true, "h\"\n", 1.5, -2]}}, "i": [{}], "j": [[]],
        }));
        same(&serde_json::json!([]));
        same(&serde_json::json!(7));
        // Deeper than the precomputed indent.
        let mut deep = serde_json::json!([1, {"k": [2]}]);
        for _ in 0..80 {
            deep = serde_json::json!({ "x": [deep, 3] });
        }
        same(&deep);
    }

    /// A random JSON value: every kind of scalar, strings with escapes,
    /// control characters and non-ASCII text, empty and nested containers.
    fn random_value(rng: &mut crate::synth::XorShift, depth: usize) -> serde_json::Value {
        use serde_json::Value;
        let leaf = depth == 0 || rng.below(3) == 0;
        match rng.below(if leaf { 6 } else { 8 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.below(2) == 0),
            2 => Value::from(rng.next_u64() as i64 >> rng.below(64)),
            3 => Value::from(rng.next_u64()),
            4 => {
                let x = f64::from_bits(rng.next_u64());
                let x = if x.is_finite() {
                    x
                } else {
                    rng.below(1000) as f64 / 7.0
                };
                [x, -0.0, 0.1, 1e300, 5e-324, 1.0, -2.5e-7][rng.below(7)].into()
            }
            5 => {
                let pieces = [
                    "a", "\"", "\\", "/", "\n", "\r\t", "\u{0}", "\u{1f}", "\u{7f}", "é",
                    "\u{2028}", "😀", "\u{ffff}", " ",
                ];
                let n = rng.below(6);
                Value::String((0..n).map(|_| pieces[rng.below(pieces.len())]).collect())
            }
            6 => Value::Array(
                (0..rng.below(4))
                    .map(|_| random_value(rng, depth - 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.below(4))
                    .map(|i| (format!("k{i}\u{7}\"é"), random_value(rng, depth - 1)))
                    .collect(),
            ),
        }
    }

    #[test]
    fn random_values_are_serde_jsons() {
        let mut rng = crate::synth::XorShift(0x9E77_0000_0000_0001);
        for _ in 0..3000 {
            let depth = rng.below(7);
            same(&random_value(&mut rng, depth));
        }
        // Around the depth of the precomputed indent (63 levels), empty
        // and not, arrays and objects.
        for depth in 60..67 {
            for inner in [
                serde_json::json!([]),
                serde_json::json!({}),
                serde_json::json!([1]),
            ] {
                let mut v = inner;
                for d in 0..depth {
                    v = if d % 2 == 0 {
                        serde_json::json!([v])
                    } else {
                        serde_json::json!({ "k": v })
                    };
                }
                same(&v);
            }
        }
    }

    #[derive(serde::Serialize)]
    enum E {
        Unit,
        New(f64),
        Tuple(u8, Vec<u8>),
        Struct {
            a: Option<f32>,
            b: std::collections::BTreeMap<i32, ()>,
        },
    }

    #[derive(serde::Serialize)]
    struct S {
        e: Vec<E>,
        empty: Vec<E>,
        nan: f64,
        inf: f32,
        unit: (),
        tuple: (i8, String),
        bytes: serde_bytes_like::Bytes,
    }

    mod serde_bytes_like {
        /// Serialized with `serialize_bytes` (an array of numbers in JSON).
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    #[test]
    fn derived_types_and_a_report_are_serde_jsons() {
        // Every serde data-model shape a derived type can produce, through
        // the formatter directly (not via `Value`).
        let s = S {
            e: vec![
                E::Unit,
                E::New(f64::NAN),
                E::Tuple(7, vec![]),
                E::Tuple(8, vec![1, 2]),
                E::Struct {
                    a: None,
                    b: Default::default(),
                },
                E::Struct {
                    a: Some(0.5),
                    b: [(-1, ()), (3, ())].into_iter().collect(),
                },
            ],
            empty: vec![],
            nan: f64::NAN,
            inf: f32::INFINITY,
            unit: (),
            tuple: (-3, "\u{1b}[0m".into()),
            bytes: serde_bytes_like::Bytes(vec![0, 255]),
        };
        let mut fast = Vec::new();
        to_writer(&mut fast, &s).expect("in-memory write");
        assert_eq!(
            String::from_utf8(fast).expect("utf-8"),
            serde_json::to_string_pretty(&s).expect("in-memory write")
        );
        // A whole report (SMs-in-use series, nested tables, floats).
        let mut t = crate::synth::fsdp_like(&crate::synth::SynthOptions {
            ranks: 2,
            target_slices: 1_000,
            ..Default::default()
        });
        crate::synth::add_gpu_metrics(&mut t, 50_000);
        let r = crate::analysis::analyze(&t, &Default::default());
        assert!(r.ranks.len() == 2 && !r.steps.is_empty());
        assert_eq!(
            crate::analysis::render::json(&r),
            serde_json::to_string_pretty(&r).expect("in-memory write")
        );
    }
}
