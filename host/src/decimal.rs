//! Exact conversions between decimal text and the kernel's numbers.
//!
//! Parsing works on the decimal digits themselves, never through `f64`, so
//! `0.1` becomes the nearest `I48F16` to one tenth, not the nearest to the
//! double closest to one tenth. Formatting prints the exact value: every
//! `I48F16` has a finite decimal expansion of at most 16 fractional digits.

use core::fmt;

use lockgrid_kernel::Fix;

/// Why a decimal text is not a value of the wanted type.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecimalError {
    /// The text is not a decimal number (`-12.5e3` and the like).
    Syntax,
    /// The value lies outside the range of the wanted type.
    OutOfRange,
    /// An integer was wanted and the value has a fractional part.
    NotAnInteger,
}

impl fmt::Display for DecimalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecimalError::Syntax => "not a decimal number",
            DecimalError::OutOfRange => "out of range",
            DecimalError::NotAnInteger => "not an integer",
        })
    }
}

impl std::error::Error for DecimalError {}

/// A decimal number split into its significant digits and the position of
/// the decimal point: the value is `± 0.d₁d₂…dₙ × 10^point`, with no leading
/// or trailing zero digit (zero has no digits).
struct Parsed<'a> {
    negative: bool,
    /// Significant digits, possibly interrupted by one `.` (skipped when read).
    text: &'a [u8],
    /// Index of the `.` in `text`, if it has one.
    dot: Option<usize>,
    /// Number of significant digits.
    len: i64,
    point: i64,
}

impl Parsed<'_> {
    /// Digit `i` (0-based) of the significant digits, `0` outside them.
    fn digit(&self, i: i64) -> u8 {
        if i < 0 || i >= self.len {
            return 0;
        }
        // 0 <= i < len <= text.len(), so the index is in range.
        let mut j = i as usize;
        if self.dot.is_some_and(|d| j >= d) {
            j += 1;
        }
        self.text.get(j).map_or(0, |b| b - b'0')
    }

    fn is_zero(&self) -> bool {
        self.len == 0
    }
}

/// Largest exponent magnitude kept; beyond it every value is either zero or
/// out of range for every supported type, and clamping keeps sums exact.
const EXP_CLAMP: i64 = 1 << 40;

fn parse(text: &str) -> Result<Parsed<'_>, DecimalError> {
    let bytes = text.as_bytes();
    let (negative, rest) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    // Mantissa: digits, optionally '.', digits; then optional exponent.
    let mant_end = rest
        .iter()
        .position(|&b| b == b'e' || b == b'E')
        .unwrap_or(rest.len());
    let (mantissa, exponent) = rest.split_at(mant_end);
    let dot = mantissa.iter().position(|&b| b == b'.');
    let (int_part, frac_part) = match dot {
        Some(d) => (&mantissa[..d], &mantissa[d + 1..]),
        None => (mantissa, &mantissa[mantissa.len()..]),
    };
    let all_digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    if int_part.is_empty()
        || !all_digits(int_part)
        || !all_digits(frac_part)
        || (dot.is_some() && frac_part.is_empty())
    {
        return Err(DecimalError::Syntax);
    }
    let exp = if exponent.is_empty() {
        0
    } else {
        let digits = match exponent[1..].split_first() {
            Some((b'-' | b'+', d)) => d,
            _ => &exponent[1..],
        };
        if digits.is_empty() || !all_digits(digits) {
            return Err(DecimalError::Syntax);
        }
        let mut e: i64 = 0;
        for &d in digits {
            e = (e * 10 + i64::from(d - b'0')).min(EXP_CLAMP);
        }
        if exponent.get(1) == Some(&b'-') {
            -e
        } else {
            e
        }
    };
    // Significant digits: strip leading zeros (each moves the point left)
    // and trailing zeros (which change nothing).
    let int_len = int_part.len() as i64;
    let first = mantissa.iter().position(|&b| b != b'0' && b != b'.');
    let Some(first) = first else {
        return Ok(Parsed {
            negative,
            text: &[],
            dot: None,
            len: 0,
            point: 0,
        });
    };
    let last = mantissa
        .iter()
        .rposition(|&b| b != b'0' && b != b'.')
        .unwrap_or(first); // a non-zero digit exists (`first`), so rposition finds one
    let text = &mantissa[first..=last];
    let len = text.iter().filter(|&&b| b != b'.').count() as i64;
    // Digits before the first significant one that belong to the integer part.
    let leading_int = (first as i64).min(int_len);
    // Zeros after the point and before the first significant digit.
    let leading_frac = if first as i64 > int_len {
        first as i64 - int_len - 1
    } else {
        0
    };
    let point = int_len - leading_int - leading_frac + exp;
    Ok(Parsed {
        negative,
        text,
        dot: text.iter().position(|&b| b == b'.'),
        len,
        point,
    })
}

/// Parses decimal text (JSON number syntax) into the nearest `I48F16`.
///
/// Exact when the value is a multiple of `2^-16`; otherwise rounds to the
/// nearest representable value, ties to even (the IEEE 754 default). Values
/// outside `[-2^47, 2^47 - 2^-16]` after rounding are [`DecimalError::OutOfRange`].
/// Work is linear in the length of the text, whatever the exponent.
pub fn parse_fix(text: &str) -> Result<Fix, DecimalError> {
    let p = parse(text)?;
    if p.is_zero() {
        return Ok(Fix::ZERO);
    }
    // 2^47 < 10^15: an integer part of more than 15 digits is out of range.
    if p.point > 15 {
        return Err(DecimalError::OutOfRange);
    }
    // |value| < 10^-7 < 2^-17 = half the smallest step: rounds to zero.
    if p.point < -6 {
        return Ok(Fix::ZERO);
    }
    // Integer part: digits 0..point.
    let mut int: u128 = 0;
    for i in 0..p.point.max(0) {
        int = int * 10 + u128::from(p.digit(i));
    }
    // Fraction part: digits point..len (those before index 0 are zeros).
    // Multiply 0.f by 2^16 digit by digit from the right: the carry out is
    // the integer part, the produced digits the remainder's decimal digits.
    let mut carry: u64 = 0;
    let mut rem_first: u64 = 0; // most significant remainder digit
    let mut rem_rest_nonzero = false; // any remainder digit after it non-zero
    let mut any = false;
    let mut i = p.len - 1;
    while i >= p.point {
        let v = u64::from(p.digit(i)) * 65536 + carry;
        if any && rem_first != 0 {
            rem_rest_nonzero = true;
        }
        rem_first = v % 10;
        any = true;
        carry = v / 10;
        i -= 1;
    }
    let round_up = match rem_first.cmp(&5) {
        core::cmp::Ordering::Greater => true,
        core::cmp::Ordering::Equal => rem_rest_nonzero || carry % 2 == 1,
        core::cmp::Ordering::Less => false,
    };
    let mag = (int << 16) + u128::from(carry) + u128::from(round_up);
    let bits = if p.negative {
        if mag > 1u128 << 63 {
            return Err(DecimalError::OutOfRange);
        }
        // mag <= 2^63, so 0 - mag fits an i128 and the result an i64.
        i64::try_from(-(mag as i128)).map_err(|_| DecimalError::OutOfRange)?
    } else {
        i64::try_from(mag).map_err(|_| DecimalError::OutOfRange)?
    };
    Ok(Fix::from_bits(bits))
}

/// Parses decimal text into an integer in `min..=max`; any notation of an
/// exact integer is accepted (`7`, `7.0`, `0.7e1`), fractions are not.
pub fn parse_int(text: &str, min: i128, max: i128) -> Result<i128, DecimalError> {
    let p = parse(text)?;
    if p.is_zero() {
        return if (min..=max).contains(&0) {
            Ok(0)
        } else {
            Err(DecimalError::OutOfRange)
        };
    }
    if p.len > p.point {
        return Err(DecimalError::NotAnInteger);
    }
    // Every supported type fits in 39 digits; more is out of range.
    if p.point > 39 {
        return Err(DecimalError::OutOfRange);
    }
    let mut mag: u128 = 0;
    for i in 0..p.point {
        mag = mag
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(p.digit(i))))
            .ok_or(DecimalError::OutOfRange)?;
    }
    let mag = i128::try_from(mag).map_err(|_| DecimalError::OutOfRange)?;
    let v = if p.negative { -mag } else { mag };
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(DecimalError::OutOfRange)
    }
}

/// Displays an `I48F16` as its exact decimal value: `5`, `-0.5`,
/// `0.0000152587890625`; the kernel's own writer, so a host's text and the
/// kernel's JSON Lines never differ.
pub use lockgrid_kernel::jsonl::ExactDecimal;

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(text: &str) -> i64 {
        parse_fix(text)
            .map(Fix::to_bits)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn representable_values_are_exact() {
        assert_eq!(fix("0"), 0);
        assert_eq!(fix("-0"), 0);
        assert_eq!(fix("5"), 5 << 16);
        assert_eq!(fix("-5"), -5 << 16);
        assert_eq!(fix("0.5"), 1 << 15);
        assert_eq!(fix("-0.5"), -(1 << 15));
        assert_eq!(fix("0.0625"), 1 << 12);
        assert_eq!(fix("0.0000152587890625"), 1);
        assert_eq!(fix("-0.0000152587890625"), -1);
        assert_eq!(fix("123.25"), (123 << 16) + (1 << 14));
        assert_eq!(fix("140737488355327.9999847412109375"), i64::MAX);
        assert_eq!(fix("-140737488355328"), i64::MIN);
        assert_eq!(fix("00012.5000000000000000000000"), (12 << 16) + (1 << 15));
    }

    #[test]
    fn exponents_shift_the_point() {
        assert_eq!(fix("1e2"), 100 << 16);
        assert_eq!(fix("1E+2"), 100 << 16);
        assert_eq!(fix("25e-2"), 1 << 14);
        assert_eq!(fix("0.0025e2"), 1 << 14);
        assert_eq!(fix("-5e-1"), -(1 << 15));
        assert_eq!(fix("1e-100000000000000000000"), 0);
        assert_eq!(fix("0e999999999999999999999"), 0);
        assert_eq!(fix("152587890625e-16"), 1);
    }

    #[test]
    fn inexact_values_round_to_nearest_ties_to_even() {
        // 0.1 × 65536 = 6553.6 → 6554
        assert_eq!(fix("0.1"), 6554);
        assert_eq!(fix("-0.1"), -6554);
        // Exactly half a step: ties go to the even neighbour.
        assert_eq!(fix("0.00000762939453125"), 0); // 0.5 step → 0
        assert_eq!(fix("0.00002288818359375"), 2); // 1.5 steps → 2
        assert_eq!(fix("0.00003814697265625"), 2); // 2.5 steps → 2
        assert_eq!(fix("-0.00003814697265625"), -2);
        // A hair above half a step rounds up, however far the hair is.
        assert_eq!(fix("0.000007629394531250000000000000000001"), 1);
        // A hair below rounds down.
        assert_eq!(fix("0.000007629394531249999999999999999999"), 0);
        // Carry out of the fraction into the integer part.
        assert_eq!(fix("0.99999999"), 1 << 16);
        assert_eq!(fix("0.000001"), 0);
        assert_eq!(fix("0.00001"), 1);
    }

    #[test]
    fn out_of_range_and_bad_syntax_are_errors() {
        assert_eq!(parse_fix("140737488355328"), Err(DecimalError::OutOfRange));
        assert_eq!(
            parse_fix("-140737488355328.00001"),
            Err(DecimalError::OutOfRange)
        );
        // Rounds up to 2^47, which does not fit.
        assert_eq!(
            parse_fix("140737488355327.99999999"),
            Err(DecimalError::OutOfRange)
        );
        assert_eq!(parse_fix("1e16"), Err(DecimalError::OutOfRange));
        assert_eq!(
            parse_fix("1e99999999999999999999999"),
            Err(DecimalError::OutOfRange)
        );
        assert_eq!(
            parse_fix(&"9".repeat(10_000)),
            Err(DecimalError::OutOfRange)
        );
        for bad in [
            "", "-", ".5", "5.", "1e", "1e+", "abc", "1.2.3", "--1", "1x",
        ] {
            assert_eq!(parse_fix(bad), Err(DecimalError::Syntax), "{bad:?}");
        }
    }

    #[test]
    fn long_texts_are_handled_exactly() {
        let mut s = String::from("0.5");
        s.push_str(&"0".repeat(5000));
        assert_eq!(fix(&s), 1 << 15);
        s.push('1');
        assert_eq!(fix(&s), 1 << 15);
    }

    #[test]
    fn integers_accept_exact_values_only() {
        assert_eq!(parse_int("7", 0, 10), Ok(7));
        assert_eq!(parse_int("7.0", 0, 10), Ok(7));
        assert_eq!(parse_int("0.7e1", 0, 10), Ok(7));
        assert_eq!(parse_int("-0", 0, 10), Ok(0));
        assert_eq!(parse_int("7.5", 0, 10), Err(DecimalError::NotAnInteger));
        assert_eq!(parse_int("11", 0, 10), Err(DecimalError::OutOfRange));
        assert_eq!(parse_int("-1", 0, 10), Err(DecimalError::OutOfRange));
        let max = i128::from(u64::MAX);
        assert_eq!(parse_int("18446744073709551615", 0, max), Ok(max));
        assert_eq!(
            parse_int("18446744073709551616", 0, max),
            Err(DecimalError::OutOfRange)
        );
        assert_eq!(parse_int("1e400", 0, max), Err(DecimalError::OutOfRange));
        assert_eq!(parse_int("1e-400", 0, max), Err(DecimalError::NotAnInteger));
    }

    #[test]
    fn formatting_is_exact() {
        let show = |bits: i64| ExactDecimal(Fix::from_bits(bits)).to_string();
        assert_eq!(show(0), "0");
        assert_eq!(show(5 << 16), "5");
        assert_eq!(show(-(5 << 16)), "-5");
        assert_eq!(show(1 << 15), "0.5");
        assert_eq!(show(-(1 << 15)), "-0.5");
        assert_eq!(show(1), "0.0000152587890625");
        assert_eq!(show(-1), "-0.0000152587890625");
        assert_eq!(show(6554), "0.100006103515625");
        assert_eq!(show(i64::MAX), "140737488355327.9999847412109375");
        assert_eq!(show(i64::MIN), "-140737488355328");
        assert_eq!(show(-(3 << 16) - (1 << 14)), "-3.25");
    }

    #[test]
    fn formatting_round_trips_through_parsing() {
        let mut bits: i64 = 1;
        for _ in 0..2000 {
            for b in [bits, -bits, bits ^ 0x5555, bits >> 3] {
                let text = ExactDecimal(Fix::from_bits(b)).to_string();
                assert_eq!(fix(&text), b, "{text}");
            }
            bits = bits
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
}
