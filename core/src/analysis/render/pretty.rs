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

impl Formatter for Pretty {
    #[inline]
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"[")
    }

    #[inline]
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.new_line(w)?;
        }
        w.write_all(b"]")
    }

    #[inline]
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.new_line(w)
    }

    #[inline]
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    #[inline]
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    #[inline]
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.new_line(w)?;
        }
        w.write_all(b"}")
    }

    #[inline]
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.new_line(w)
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
}
