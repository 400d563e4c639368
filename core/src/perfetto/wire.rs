//! Minimal protobuf wire encoding and decoding, as much as the Perfetto
//! TracePacket stream needs.
//!
//! Written by hand rather than generated because the writer and the reader
//! are hot paths (millions of packets per second, see docs/PERFORMANCE.md):
//! the encoder appends to one reusable buffer and back-patches nested
//! message lengths into a one-byte slot (moving the content only for the
//! rare message of 128 bytes or more), so lengths stay one-byte varints the
//! decoder reads on its fast path; the decoder borrows from the packet.

/// Protobuf wire types.
pub const VARINT: u8 = 0;
/// Wire type of 64-bit fixed-width fields.
pub const FIXED64: u8 = 1;
/// Wire type of length-delimited fields.
pub const LEN: u8 = 2;
/// Wire type of 32-bit fixed-width fields.
pub const FIXED32: u8 = 5;

/// Appends protobuf fields to a buffer.
#[derive(Default)]
pub struct Enc {
    /// The encoded bytes.
    pub buf: Vec<u8>,
}

impl Enc {
    #[inline]
    /// Appends `v` as a varint.
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    #[inline]
    /// Appends the tag of `field` with wire type `wire`.
    pub fn tag(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }

    #[inline]
    /// Appends varint field `field`.
    pub fn uint(&mut self, field: u32, v: u64) {
        self.tag(field, VARINT);
        self.varint(v);
    }

    #[inline]
    /// Appends varint field `field` holding `v` as two's complement (not zigzag).
    pub fn int(&mut self, field: u32, v: i64) {
        self.tag(field, VARINT);
        self.varint(v as u64);
    }

    #[inline]
    /// Appends double field `field` (fixed64).
    pub fn double(&mut self, field: u32, v: f64) {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    #[inline]
    /// Appends fixed64 field `field`.
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    #[inline]
    /// Appends length-delimited field `field` holding `v`.
    pub fn bytes(&mut self, field: u32, v: &[u8]) {
        self.tag(field, LEN);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Opens a nested message; close it with [`Enc::end`].
    #[inline]
    pub fn begin(&mut self, field: u32) -> usize {
        self.tag(field, LEN);
        let at = self.buf.len();
        self.buf.push(0);
        at
    }

    /// Writes the length of the nested message opened at `at`. Most are
    /// under 128 bytes and fit the one byte reserved; a longer one moves its
    /// content up to make room for the longer varint.
    #[inline]
    pub fn end(&mut self, at: usize) {
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
            return;
        }
        let mut tmp = [0u8; 10];
        let mut n = 0;
        let mut v = len as u64;
        while v >= 0x80 {
            tmp[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        tmp[n] = v as u8;
        n += 1;
        self.buf.splice(at..at + 1, tmp[..n].iter().copied());
    }
}

/// A decoded field value, borrowing from the input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val<'a> {
    /// A varint.
    Varint(u64),
    /// A 64-bit fixed-width value.
    Fixed64(u64),
    /// A 32-bit fixed-width value.
    Fixed32(u32),
    /// A length-delimited value.
    Bytes(&'a [u8]),
}

impl<'a> Val<'a> {
    /// The value as an integer (0 for bytes).
    pub fn as_u64(self) -> u64 {
        match self {
            Val::Varint(v) | Val::Fixed64(v) => v,
            Val::Fixed32(v) => v as u64,
            Val::Bytes(_) => 0,
        }
    }
    /// The bytes of a length-delimited value (empty otherwise).
    pub fn as_bytes(self) -> &'a [u8] {
        match self {
            Val::Bytes(b) => b,
            _ => &[],
        }
    }
    /// The bytes as UTF-8 ("" when not a string or not valid UTF-8).
    pub fn as_str(self) -> &'a str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
    /// The value as a float: fixed64/fixed32 as double/float bits, varints converted (0.0 for bytes).
    pub fn as_f64(self) -> f64 {
        match self {
            Val::Fixed64(v) => f64::from_bits(v),
            Val::Varint(v) => v as f64,
            Val::Fixed32(v) => f32::from_bits(v) as f64,
            Val::Bytes(_) => 0.0,
        }
    }
}

/// What went wrong while decoding, and where (offset inside the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Offset of the problem inside the message.
    pub offset: usize,
    /// What is wrong.
    pub why: &'static str,
}

/// Iterates over the fields of one message.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    /// A decoder over the fields of message `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }

    #[inline(always)]
    fn read_varint(&mut self) -> Result<u64, WireError> {
        // Most varints here (tags, small ids, lengths) are one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        self.read_varint_slow()
    }

    fn read_varint_slow(&mut self) -> Result<u64, WireError> {
        // Unchecked-length fast path when 10 bytes are left.
        if let Some(b) = self.buf.get(self.pos..self.pos + 10) {
            let mut v: u64 = 0;
            for (i, &x) in b.iter().enumerate() {
                v |= ((x & 0x7f) as u64) << (7 * i);
                if x & 0x80 == 0 {
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
            return Err(WireError {
                offset: self.pos,
                why: "varint longer than 10 bytes",
            });
        }
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(WireError {
                    offset: self.pos,
                    why: "varint runs past the end",
                });
            };
            self.pos += 1;
            if shift >= 64 {
                return Err(WireError {
                    offset: self.pos,
                    why: "varint longer than 10 bytes",
                });
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    /// The next (field number, value), or None at the end.
    #[inline(always)]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(u32, Val<'a>)>, WireError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.read_varint()?;
        let field = (key >> 3) as u32;
        if field == 0 {
            return Err(WireError {
                offset: self.pos,
                why: "field number 0",
            });
        }
        let val = match (key & 7) as u8 {
            VARINT => Val::Varint(self.read_varint()?),
            FIXED64 => {
                let Some(b) = self.buf.get(self.pos..self.pos + 8) else {
                    return Err(WireError {
                        offset: self.pos,
                        why: "fixed64 runs past the end",
                    });
                };
                self.pos += 8;
                Val::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            }
            LEN => {
                let len = self.read_varint()? as usize;
                let Some(b) = self.buf.get(self.pos..self.pos.saturating_add(len)) else {
                    return Err(WireError {
                        offset: self.pos,
                        why: "length-delimited field runs past the end",
                    });
                };
                self.pos += len;
                Val::Bytes(b)
            }
            FIXED32 => {
                let Some(b) = self.buf.get(self.pos..self.pos + 4) else {
                    return Err(WireError {
                        offset: self.pos,
                        why: "fixed32 runs past the end",
                    });
                };
                self.pos += 4;
                Val::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
            }
            _ => {
                return Err(WireError {
                    offset: self.pos,
                    why: "unknown wire type",
                })
            }
        };
        Ok(Some((field, val)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn nested_lengths_round_trip() {
        let mut e = Enc::default();
        let at = e.begin(1);
        e.uint(8, 300);
        e.bytes(2, b"hello");
        e.double(5, 1.5);
        e.end(at);
        let mut d = Dec::new(&e.buf);
        let (f, v) = d.next().unwrap().unwrap();
        assert_eq!(f, 1);
        let mut inner = Dec::new(v.as_bytes());
        assert_eq!(inner.next().unwrap(), Some((8, Val::Varint(300))));
        assert_eq!(inner.next().unwrap(), Some((2, Val::Bytes(b"hello"))));
        assert_eq!(
            inner.next().unwrap().map(|(f, v)| (f, v.as_f64())),
            Some((5, 1.5))
        );
        assert_eq!(inner.next().unwrap(), None);
        assert_eq!(d.next().unwrap(), None);
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let mut e = Enc::default();
        e.bytes(2, b"hello world");
        for cut in 0..e.buf.len() {
            let mut d = Dec::new(&e.buf[..cut]);
            let r = d.next();
            assert!(cut == 0 && r == Ok(None) || r.is_err(), "cut {cut}: {r:?}");
        }
    }
}
