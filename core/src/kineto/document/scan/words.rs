//! Bytes of JSON text tested eight at a time.

/// JSON whitespace.
#[inline]
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

/// A word whose lowest set bit is the high bit of the first byte of `word`
/// (little-endian) that is `"`, `\\` or below 0x20; 0 when none is.
/// (Bits above the first such byte may be wrong: only the lowest is read.)
#[inline]
pub(super) fn special_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    zero_byte(word ^ (ONES * u64::from(b'"')))
        | zero_byte(word ^ (ONES * u64::from(b'\\')))
        | (word.wrapping_sub(ONES * 0x20) & !word & HIGH)
}

/// A word with the high bit of each byte of `word` set when that byte is
/// not JSON whitespace, and clear when it is (exactly, for every byte).
#[inline]
pub(super) fn non_ws_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // High bit set where the byte is not 0 (no carry crosses bytes).
    let nonzero = |x: u64| ((x & LOW7).wrapping_add(LOW7) | x) & HIGH;
    nonzero(word ^ (ONES * u64::from(b' ')))
        & nonzero(word ^ (ONES * u64::from(b'\n')))
        & nonzero(word ^ (ONES * u64::from(b'\t')))
        & nonzero(word ^ (ONES * u64::from(b'\r')))
}

/// How many ASCII digits `b` holds from `i` on (0 when `i` is past its end).
#[inline]
pub(super) fn digit_run(b: &[u8], i: usize) -> usize {
    let mut j = i;
    // Eight bytes at a time up to the first byte that is not a digit.
    while let Some(chunk) = b.get(j..j + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let other = non_digit_bytes(u64::from_le_bytes(word));
        if other != 0 {
            return j + (other.trailing_zeros() / 8) as usize - i;
        }
        j += 8;
    }
    while b.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    j - i
}

/// A word with the high bit of each byte of `word` set when that byte is
/// not an ASCII digit, and clear when it is (exactly, for every byte).
#[inline]
pub(super) fn non_digit_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Digits become 0..=9; adding 0x76 to the low seven bits sets the high
    // bit exactly from 10 up (no carry crosses bytes), and a byte whose own
    // high bit was set is no digit either.
    let x = word ^ (ONES * u64::from(b'0'));
    (((x & LOW7) + ONES * 0x76) | x) & HIGH
}

/// The fields of an event the importer reads, and the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EventKey {
    Ph,
    Cat,
    Name,
    Pid,
    Tid,
    Ts,
    Dur,
    Args,
    Other,
}

impl EventKey {
    /// The field named `key` (unquoted): the same table as [`EventKey::of_word`].
    pub(super) fn of(key: &str) -> EventKey {
        let k = key.as_bytes();
        // The longest field name is four bytes: quoted, it fits a word.
        if k.len() > 4 {
            return EventKey::Other;
        }
        let mut quoted = [0u8; 8];
        quoted[0] = b'"';
        quoted[1..=k.len()].copy_from_slice(k);
        quoted[k.len() + 1] = b'"';
        match EventKey::of_word(u64::from_le_bytes(quoted)) {
            Some((field, len)) if len == k.len() + 2 => field,
            _ => EventKey::Other,
        }
    }

    /// The field whose quoted key (`"ph"`, with both quotes) the first
    /// bytes of `word` (little-endian) hold, and that key's length.
    #[inline]
    pub(super) fn of_word(word: u64) -> Option<(EventKey, usize)> {
        const fn quoted<const N: usize>(key: &[u8; N]) -> u64 {
            let mut v = 0u64;
            let mut i = 0;
            while i < N {
                v |= (key[i] as u64) << (8 * i);
                i += 1;
            }
            v
        }
        const PH: u64 = quoted(b"\"ph\"");
        const TS: u64 = quoted(b"\"ts\"");
        const CAT: u64 = quoted(b"\"cat\"");
        const PID: u64 = quoted(b"\"pid\"");
        const TID: u64 = quoted(b"\"tid\"");
        const DUR: u64 = quoted(b"\"dur\"");
        const NAME: u64 = quoted(b"\"name\"");
        const ARGS: u64 = quoted(b"\"args\"");
        let w4 = word & 0xFFFF_FFFF;
        let w5 = word & 0xFF_FFFF_FFFF;
        let w6 = word & 0xFFFF_FFFF_FFFF;
        Some(match () {
            _ if w4 == PH => (EventKey::Ph, 4),
            _ if w5 == CAT => (EventKey::Cat, 5),
            _ if w6 == NAME => (EventKey::Name, 6),
            _ if w5 == PID => (EventKey::Pid, 5),
            _ if w5 == TID => (EventKey::Tid, 5),
            _ if w4 == TS => (EventKey::Ts, 4),
            _ if w5 == DUR => (EventKey::Dur, 5),
            _ if w6 == ARGS => (EventKey::Args, 6),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_at_every_position_is_told_whitespace_or_not() {
        for b in 0..=255u8 {
            for at in 0..8 {
                for fill in [b' ', b'\n', b'x', 0xFF, 0x21, 0x0B] {
                    let mut bytes = [fill; 8];
                    bytes[at] = b;
                    let word = u64::from_le_bytes(bytes);
                    let got = non_ws_bytes(word);
                    for (i, &c) in bytes.iter().enumerate() {
                        let high = got >> (8 * i + 7) & 1 == 1;
                        assert_eq!(high, !is_ws(c), "byte {c:#04x} at {i} in {bytes:?}");
                    }
                    assert_eq!(got & !0x8080_8080_8080_8080, 0);
                    // The first `"`, `\\` or control byte is the lowest bit.
                    let special = special_bytes(word);
                    let first = bytes
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\' || c < 0x20);
                    match first {
                        Some(i) => {
                            assert_eq!(special.trailing_zeros() as usize / 8, i, "{bytes:?}")
                        }
                        None => assert_eq!(special, 0, "{bytes:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn event_keys_are_told_by_their_quoted_text() {
        let word = |s: &[u8]| {
            let mut b = [b' '; 8];
            b[..s.len()].copy_from_slice(s);
            u64::from_le_bytes(b)
        };
        for (key, field) in [
            ("ph", EventKey::Ph),
            ("cat", EventKey::Cat),
            ("name", EventKey::Name),
            ("pid", EventKey::Pid),
            ("tid", EventKey::Tid),
            ("ts", EventKey::Ts),
            ("dur", EventKey::Dur),
            ("args", EventKey::Args),
        ] {
            let quoted = format!("\"{key}\": 1");
            assert_eq!(
                EventKey::of_word(word(&quoted.as_bytes()[..quoted.len().min(8)])),
                Some((field, key.len() + 2))
            );
            assert_eq!(EventKey::of(key), field);
        }
        // A longer key, an escaped one or an unquoted prefix is not a field.
        for other in [
            &b"\"phase\":"[..],
            b"\"p\\u0068\"",
            b"\"names\"",
            b"\"tss\"",
            b"ph\": 1",
            b"\"Ph\": 1",
        ] {
            assert_eq!(
                EventKey::of_word(word(&other[..other.len().min(8)])),
                None,
                "{:?}",
                std::str::from_utf8(other)
            );
        }
        for other in ["phase", "", "p", "nam", "Ph", "tss"] {
            assert_eq!(EventKey::of(other), EventKey::Other, "{other:?}");
        }
    }

    #[test]
    fn non_digit_bytes_is_exact_for_every_byte() {
        for v in 0..=255u8 {
            for pos in 0..8 {
                let mut bytes = [b'7'; 8];
                bytes[pos] = v;
                let mask = non_digit_bytes(u64::from_le_bytes(bytes));
                for (k, &c) in bytes.iter().enumerate() {
                    let set = mask >> (8 * k + 7) & 1 == 1;
                    assert_eq!(set, !c.is_ascii_digit(), "byte {c:#x} at {k}");
                }
            }
        }
    }

    #[test]
    fn digit_runs() {
        for (text, at, run) in [
            ("", 0, 0),
            ("1", 0, 1),
            ("x", 0, 0),
            ("1234567890123456789,", 0, 19),
            ("12345678", 0, 8),
            ("123456789", 0, 9),
            ("5963264836542.406}", 0, 13),
            ("5963264836542.406}", 14, 3),
            ("12:", 5, 0),
        ] {
            assert_eq!(digit_run(text.as_bytes(), at), run, "{text:?} at {at}");
        }
    }
}
