//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`) as exact integers of nano-units.
//!
//! The grammar and the rounding are apimachinery's `ParseQuantity`:
//!
//! ```text
//! <quantity>   ::= <sign>? <digits>? ("." <digits>?)? <suffix>
//! <suffix>     ::= "" | n | u | m | k | M | G | T | P | E        (powers of 10)
//!                | Ki | Mi | Gi | Ti | Pi | Ei                    (powers of 2)
//!                | (e | E) <sign>? <digits>                       (decimal exponent)
//! ```
//!
//! A value finer than one nano-unit is rounded away from zero to the next nano-unit ("if you want
//! some resources you should get some"), and magnitudes are capped at 2^63-1 units. Keeping nanos
//! in an `i128` makes sums exact, so a pod's requests are added as quantities and rounded once, as
//! upstream does: [`milli_value`] is `Quantity.MilliValue` (cpu), [`value`] is `Quantity.Value`
//! (everything else); both round up.
//!
//! Worked examples (the table test below reuses them): `100m` = 0.1 = 100,000,000 n;
//! `1.5Gi` = 1,610,612,736,000,000,000 n; `1n` = 1 n; `0.1n` rounds up to 1 n; `1e3` = `1k`.

use std::fmt;

/// Nano-units: 1 = 10^-9 of the base unit (a core, a byte, a pod).
pub type Nanos = i128;

/// One unit in nanos.
pub const NANOS_PER_UNIT: Nanos = 1_000_000_000;

/// The largest magnitude a quantity can have: 2^63-1 units.
pub const MAX_NANOS: Nanos = (i64::MAX as Nanos) * NANOS_PER_UNIT;

/// A string that is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError {
    pub text: String,
    pub why: &'static str,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid quantity {:?}: {}", self.text, self.why)
    }
}

impl std::error::Error for QuantityError {}

fn err(text: &str, why: &'static str) -> QuantityError {
    QuantityError { text: text.to_string(), why }
}

/// How the suffix scales the number: `value * 10^pow10 * 2^pow2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scale {
    pow10: i64,
    pow2: u32,
}

fn suffix_scale(suffix: &str) -> Option<Scale> {
    let dec = |pow10| Some(Scale { pow10, pow2: 0 });
    let bin = |pow2| Some(Scale { pow10: 0, pow2 });
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            // Go's strconv.ParseInt: an optional sign, then at least one digit.
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Exponents this large only say "zero" or "the cap"; clamp to keep arithmetic finite.
            let pow10 = rest.parse::<i64>().unwrap_or(if rest.starts_with('-') { i64::MIN } else { i64::MAX });
            dec(pow10.clamp(-100_000, 100_000))
        }
    }
}

/// The pieces of a quantity string: sign, integer digits, fraction digits, suffix.
struct Parts<'a> {
    negative: bool,
    int: &'a str,
    frac: &'a str,
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let mut pos = 0;
    let negative = match b.first() {
        Some(b'-') => {
            pos = 1;
            true
        }
        Some(b'+') => {
            pos = 1;
            false
        }
        _ => false,
    };
    let digits_end = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int_end = digits_end(pos);
    let int = &s[pos..int_end];
    pos = int_end;
    let mut frac = "";
    if b.get(pos) == Some(&b'.') {
        let end = digits_end(pos + 1);
        frac = &s[pos + 1..end];
        pos = end;
    }
    // The suffix: letters from "eEinumkKMGTP", then an optional signed run of digits.
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'+' || b[pos] == b'-') {
        pos += 1;
    }
    pos = digits_end(pos);
    if pos != b.len() {
        return Err(err(s, "unexpected characters (want a number and an optional suffix)"));
    }
    Ok(Parts { negative, int, frac, suffix: &s[suffix_start..] })
}

/// Parses a quantity into nanos (rounded away from zero to whole nanos, capped at [`MAX_NANOS`]).
pub fn parse(s: &str) -> Result<Nanos, QuantityError> {
    if s.is_empty() {
        return Err(err(s, "empty string"));
    }
    let parts = split(s)?;
    let scale = suffix_scale(parts.suffix).ok_or_else(|| err(s, "unknown suffix"))?;
    let magnitude = if parts.frac.is_empty() { fast_integer(parts.int, scale) } else { None };
    let magnitude = magnitude.unwrap_or_else(|| exact(parts.int, parts.frac, scale));
    Ok(if parts.negative { -magnitude } else { magnitude })
}

/// Integers of up to 18 digits with a scale that keeps them whole: the common case (`4`, `100m`, `32Gi`).
fn fast_integer(int: &str, scale: Scale) -> Option<Nanos> {
    if int.len() > 18 || !(-9..=18).contains(&scale.pow10) {
        return None;
    }
    let n: Nanos = if int.is_empty() { 0 } else { int.parse::<i64>().ok()? as Nanos };
    let mult = 10i128.pow((scale.pow10 + 9) as u32) << scale.pow2;
    Some(n.checked_mul(mult)?.min(MAX_NANOS))
}

/// Any quantity: decimal digit arithmetic, exact, then the nano rounding and the cap.
fn exact(int: &str, frac: &str, scale: Scale) -> Nanos {
    // digits * 10^pow10 (in nanos) * 2^pow2, with digits = int ++ frac.
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|c| c - b'0').collect();
    let pow10 = scale.pow10 + 9 - frac.len() as i64;
    for _ in 0..scale.pow2 {
        double(&mut digits);
    }
    let first = digits.iter().position(|&d| d != 0);
    let Some(first) = first else { return 0 };
    let digits = &digits[first..];
    // 30 or more integer digits exceed MAX_NANOS (about 9.2e27).
    let int_digits = digits.len() as i64 + pow10;
    if int_digits >= 30 {
        return MAX_NANOS;
    }
    if int_digits <= 0 {
        return 1; // non-zero but under a nano: rounds up
    }
    let keep = int_digits.min(digits.len() as i64) as usize;
    let mut n: Nanos = digits[..keep].iter().fold(0, |acc, &d| acc * 10 + d as Nanos);
    for _ in keep as i64..int_digits {
        n *= 10;
    }
    if digits[keep..].iter().any(|&d| d != 0) {
        n += 1;
    }
    n.min(MAX_NANOS)
}

/// Doubles a big-endian decimal digit vector in place.
fn double(digits: &mut Vec<u8>) {
    let mut carry = 0;
    for d in digits.iter_mut().rev() {
        let v = *d * 2 + carry;
        *d = v % 10;
        carry = v / 10;
    }
    if carry > 0 {
        digits.insert(0, carry);
    }
}

/// `ceil(n / d)` for positive `d`, saturated to `i64`.
fn ceil_div(n: Nanos, d: Nanos) -> i64 {
    let q = n.div_euclid(d) + Nanos::from(n.rem_euclid(d) != 0);
    q.clamp(i64::MIN as Nanos, i64::MAX as Nanos) as i64
}

/// `Quantity.MilliValue()`: thousandths, rounded up (cpu in millicores).
pub fn milli_value(n: Nanos) -> i64 {
    ceil_div(n, 1_000_000)
}

/// `Quantity.Value()`: whole units, rounded up (bytes, pods, devices).
pub fn value(n: Nanos) -> i64 {
    ceil_div(n, NANOS_PER_UNIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: Nanos = 1 << 30;

    #[test]
    fn parses_the_table() {
        let cases: &[(&str, Nanos)] = &[
            ("0", 0),
            ("100m", 100_000_000),
            ("1.5Gi", 3 * (GI / 2) * NANOS_PER_UNIT),
            ("1n", 1),
            ("0.1n", 1),
            ("1e3", 1000 * NANOS_PER_UNIT),
            ("1E3", 1000 * NANOS_PER_UNIT),
            ("1k", 1000 * NANOS_PER_UNIT),
            ("1E", 1_000_000_000_000_000_000 * NANOS_PER_UNIT),
            ("2u", 2_000),
            ("32Gi", 32 * GI * NANOS_PER_UNIT),
            ("1Ki", 1024 * NANOS_PER_UNIT),
            ("0.5Ki", 512 * NANOS_PER_UNIT),
            ("110", 110 * NANOS_PER_UNIT),
            ("+5", 5 * NANOS_PER_UNIT),
            ("-5m", -5_000_000),
            (".5", 500_000_000),
            ("5.", 5 * NANOS_PER_UNIT),
            ("1.2345678901", 1_234_567_891),
            ("12e-1", 1_200_000_000),
            ("1e-12", 1),
            ("0.000", 0),
            ("1e100", MAX_NANOS),
            ("99999999999999999999", MAX_NANOS),
            ("8Ei", MAX_NANOS),
            ("200Mi", 200 * (1 << 20) * NANOS_PER_UNIT),
        ];
        for &(text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_the_table() {
        for text in ["", "1K", "1ki", "1 Gi", "abc", "1e", "1e+", "1Gi3", "1.2.3", "--1", "1m5", "0x10"] {
            assert!(parse(text).is_err(), "{text:?} should not parse");
        }
    }

    #[test]
    fn rounds_up_to_units() {
        assert_eq!(milli_value(parse("0.1m").unwrap()), 1);
        assert_eq!(milli_value(parse("1").unwrap()), 1000);
        assert_eq!(milli_value(parse("100m").unwrap()), 100);
        assert_eq!(value(parse("100m").unwrap()), 1);
        assert_eq!(value(parse("1.5Gi").unwrap()), 1_610_612_736);
        assert_eq!(value(parse("1k").unwrap()), 1000);
        assert_eq!(value(parse("8Ei").unwrap()), i64::MAX);
        assert_eq!(milli_value(parse("8Ei").unwrap()), i64::MAX);
        assert_eq!(value(-1_500_000_000), -1);
    }

    #[test]
    fn fast_and_exact_paths_agree() {
        for text in ["7", "100m", "250m", "4", "2Gi", "512Mi", "3k", "17n", "123456789012345678"] {
            let p = split(text).unwrap();
            let s = suffix_scale(p.suffix).unwrap();
            assert_eq!(fast_integer(p.int, s), Some(exact(p.int, p.frac, s)), "{text}");
        }
    }
}
