//! Exact conversion of Kineto's microsecond timestamps to nanoseconds.
//!
//! Kineto writes `ts`/`dur` in µs: newer traces as relative values with three
//! decimals ("4458676522690.655"), older ones as epoch µs (integers, or floats
//! such as 1682725898236567.0). An epoch time in ns is ~1.7e18, beyond the 53
//! bits of an f64 mantissa, so going through f64 would round to ~256 ns. We
//! instead read the decimal text of the JSON number (kept raw by serde_json's
//! `RawValue`) digit by digit into an integer and scale it by powers of ten.

/// Parses a JSON number (or a quoted number) of microseconds into integer
/// nanoseconds, rounding half away from zero below 1 ns. `None` when the
/// text is not a number or the value does not fit an `i64` of ns.
pub fn us_text_to_ns(text: &str) -> Option<i64> {
    plain_us_to_ns(text.as_bytes())
        .or_else(|| decimal_to_int_scaled(text.trim().trim_matches('"'), 3))
}

/// The usual case, exactly: digits, then optionally `.` and up to three
/// decimals (no rounding), 18 digits at most and a result that fits an
/// `i64`; `None` for anything else.
#[inline]
fn plain_us_to_ns(b: &[u8]) -> Option<i64> {
    let dot = b.iter().position(|&c| c == b'.').unwrap_or(b.len());
    let (int, frac) = (&b[..dot], b.get(dot + 1..).unwrap_or(&[]));
    if int.is_empty()
        || int.len() + frac.len() > 18
        || frac.len() > 3
        || (dot < b.len() && frac.is_empty())
    {
        return None;
    }
    let mut ns: i64 = 0;
    for &c in int.iter().chain(frac) {
        if !c.is_ascii_digit() {
            return None;
        }
        ns = ns * 10 + i64::from(c - b'0');
    }
    ns.checked_mul([1000, 100, 10, 1][frac.len()])
}

/// Parses an integer count of nanoseconds (`baseTimeNanoseconds`), exactly.
pub fn ns_text_to_ns(text: &str) -> Option<i64> {
    decimal_to_int_scaled(text.trim().trim_matches('"'), 0)
}

/// The decimal number `s` times 10^`shift`, rounded to an integer.
fn decimal_to_int_scaled(s: &str, shift: i32) -> Option<i64> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    // Mantissa digits; beyond ~36 significant digits the rest cannot matter
    // at ns resolution for any value that fits an i64, so they only shift
    // the exponent (integer part) or are dropped (fraction).
    const MAX_DIGITS: u32 = 36;
    let mut mantissa: i128 = 0;
    let mut digits = 0u32;
    let mut exp: i32 = shift;
    let mut any_digit = false;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        any_digit = true;
        if digits < MAX_DIGITS {
            mantissa = mantissa * 10 + i128::from(bytes[i] - b'0');
            if mantissa != 0 {
                digits += 1;
            }
        } else {
            exp += 1;
        }
        i += 1;
    }
    let mut round_digit = 0u8;
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            any_digit = true;
            if digits < MAX_DIGITS {
                mantissa = mantissa * 10 + i128::from(bytes[i] - b'0');
                if mantissa != 0 {
                    digits += 1;
                }
                exp -= 1;
            } else if round_digit == 0 {
                round_digit = bytes[i] - b'0';
            }
            i += 1;
        }
    }
    if !any_digit {
        return None;
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        i += 1;
        let (eneg, start) = match bytes.get(i) {
            Some(b'-') => (true, i + 1),
            Some(b'+') => (false, i + 1),
            _ => (false, i),
        };
        let etext = s.get(start..)?;
        if etext.is_empty() || !etext.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let e: i32 = etext.parse().ok()?;
        exp = exp.checked_add(if eneg { -e } else { e })?;
        i = bytes.len();
    }
    if i != bytes.len() {
        return None;
    }
    if round_digit >= 5 {
        mantissa += 1;
    }
    let value = if exp >= 0 {
        if mantissa == 0 {
            0
        } else {
            mantissa.checked_mul(10i128.checked_pow(u32::try_from(exp).ok()?)?)?
        }
    } else {
        let div = match 10i128.checked_pow(exp.unsigned_abs()) {
            Some(d) => d,
            None => return Some(0),
        };
        let q = mantissa / div;
        let r = mantissa % div;
        if r * 2 >= div {
            q + 1
        } else {
            q
        }
    };
    let value = if negative { -value } else { value };
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_case_is_the_general_one() {
        let mut rng = crate::synth::XorShift(0x5EED_1234_ABCD_0001);
        let mut texts: Vec<String> = [
            "0",
            "0.0",
            "7",
            "1.",
            ".5",
            "1.5",
            "1.25",
            "1.125",
            "1.1255",
            "-1",
            "+1",
            "1e3",
            "00012.010",
            "999999999999999",
            "999999999999999.999",
            "1000000000000000",
            "9223372036854775",
            "9223372036854776",
            "922337203685477.5808",
            "999999999999999999",
            "1669783687464200",
            "4458676522690.655",
            " 12",
            "\"12\"",
            "1x",
            "",
            ".",
            "1.2.3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..20000 {
            let int = rng.next_u64() % 10u64.pow(rng.below(17) as u32 + 1);
            let frac = rng.below(5);
            let mut t = int.to_string();
            if frac > 0 {
                t.push('.');
                t.push_str(&format!(
                    "{:0w$}",
                    rng.next_u64() % 10u64.pow(frac as u32),
                    w = frac
                ));
            }
            texts.push(t);
        }
        for t in &texts {
            let plain = plain_us_to_ns(t.as_bytes());
            let general = decimal_to_int_scaled(t.trim().trim_matches('"'), 3);
            if plain.is_some() {
                assert_eq!(plain, general, "{t}");
            }
            assert_eq!(us_text_to_ns(t), general, "{t}");
        }
        assert_eq!(plain_us_to_ns(b"4458676522690.655"), Some(4458676522690655));
        assert_eq!(
            plain_us_to_ns(b"1669783687464200"),
            Some(1669783687464200000)
        );
        assert_eq!(plain_us_to_ns(b"1.5"), Some(1500));
        assert_eq!(plain_us_to_ns(b"1.1255"), None);
    }

    #[test]
    fn relative_three_decimals_is_exact() {
        assert_eq!(
            us_text_to_ns("4458676522690.655"),
            Some(4_458_676_522_690_655)
        );
        assert_eq!(us_text_to_ns("156.777"), Some(156_777));
        assert_eq!(us_text_to_ns("0.001"), Some(1));
    }

    #[test]
    fn any_numeric_text_converts_as_the_general_reader_and_exactly() {
        // Texts near the plain form: signs, leading zeros, 0 to 25 integer
        // digits, an empty or long fraction, exponents, spaces, quotes,
        // values around the i64 limit. The fast path must never answer
        // where the general reader answers otherwise, and a plain text's
        // value must be exact (checked in i128).
        let mut rng = crate::synth::XorShift(0x7153_0000_0000_0001);
        let digits = |rng: &mut crate::synth::XorShift, n: usize| -> String {
            (0..n)
                .map(|_| match rng.below(4) {
                    0 => '0',
                    1 => '9',
                    _ => char::from(b'0' + rng.below(10) as u8),
                })
                .collect()
        };
        for _ in 0..30_000 {
            let mut t = String::new();
            t.push_str(["", "", "", "-", "+", " ", "\""][rng.below(7)]);
            let int = [0, 1, 2, 15, 16, 17, 18, 19, 25][rng.below(9)];
            t.push_str(&digits(&mut rng, int));
            if rng.below(2) == 0 {
                t.push('.');
                let frac = [0, 1, 2, 3, 3, 4, 7][rng.below(7)];
                t.push_str(&digits(&mut rng, frac));
            }
            t.push_str(["", "", "", "e3", "E-2", "e", "x", ".", " ", "\""][rng.below(10)]);
            let general = decimal_to_int_scaled(t.trim().trim_matches('"'), 3);
            assert_eq!(us_text_to_ns(&t), general, "{t:?}");
            if let Some(ns) = plain_us_to_ns(t.as_bytes()) {
                let (i, f) = t.split_once('.').unwrap_or((&t, ""));
                let exact = i.parse::<i128>().expect("digits") * 1000
                    + format!("{f:0<3}").parse::<i128>().expect("digits");
                assert_eq!(i128::from(ns), exact, "{t:?}");
            }
        }
        for (t, ns) in [
            ("9223372036854775", Some(9_223_372_036_854_775_000)),
            ("9223372036854775.807", Some(i64::MAX)),
            ("9223372036854775.808", None),
            ("-9223372036854775.808", Some(i64::MIN)),
            ("9223372036854776", None),
            ("000000000000000001.5", Some(1500)),
            ("0000000000000000001.5", Some(1500)),
            ("-0", Some(0)),
            ("-0.000", Some(0)),
            ("0.", Some(0)),
        ] {
            assert_eq!(us_text_to_ns(t), ns, "{t}");
        }
    }

    #[test]
    fn epoch_integer_and_float_are_exact() {
        // 1682725898236567 µs: exact in ns, where f64 ns would be off by up to 128 ns.
        assert_eq!(
            us_text_to_ns("1682725898236567"),
            Some(1_682_725_898_236_567_000)
        );
        assert_eq!(
            us_text_to_ns("1682725898236567.0"),
            Some(1_682_725_898_236_567_000)
        );
        assert_eq!(
            us_text_to_ns("1.682725898236567e15"),
            Some(1_682_725_898_236_567_000)
        );
        assert_eq!(us_text_to_ns("\"12.5\""), Some(12_500));
    }

    #[test]
    fn rounds_below_a_nanosecond() {
        assert_eq!(us_text_to_ns("0.0004"), Some(0));
        assert_eq!(us_text_to_ns("0.0005"), Some(1));
        assert_eq!(us_text_to_ns("-2.0006"), Some(-2001));
        assert_eq!(us_text_to_ns("1e-3"), Some(1));
    }

    #[test]
    fn rejects_non_numbers_and_overflow() {
        assert_eq!(us_text_to_ns("null"), None);
        assert_eq!(us_text_to_ns(""), None);
        assert_eq!(us_text_to_ns("12a"), None);
        assert_eq!(us_text_to_ns("1e30"), None);
        assert_eq!(
            ns_text_to_ns("1711964646000000000"),
            Some(1_711_964_646_000_000_000)
        );
    }
}
