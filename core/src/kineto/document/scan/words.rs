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
}
