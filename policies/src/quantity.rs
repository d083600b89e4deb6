//! Kubernetes resource quantities as exact milli-unit integers.
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource`):
//! `<signedNumber><suffix>` where the number is `digits`, `digits.digits`,
//! `digits.` or `.digits` and the suffix is a binary SI suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal SI suffix (`n u m "" k M G T P E`) or a
//! decimal exponent (`e3`, `E-2`).
//!
//! Values are held as an `i128` count of thousandths ([`Millis`]). Like
//! Kubernetes' `MilliValue`, precision finer than a milli-unit is rounded up
//! (away from zero): `"0.1m"` is 1 milli-unit.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::error::QuantityError;

/// An exact quantity in thousandths of the base unit (`"1"` is 1000, `"100m"`
/// is 100, `"1Ki"` is 1 024 000).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millis(i128);

impl Millis {
    /// Zero.
    pub const ZERO: Millis = Millis(0);

    /// From a count of milli-units.
    pub const fn from_millis(millis: i128) -> Self {
        Millis(millis)
    }

    /// From a whole number of base units.
    pub const fn from_whole(units: i64) -> Self {
        Millis(units as i128 * 1000)
    }

    /// The count of milli-units.
    pub const fn millis(self) -> i128 {
        self.0
    }

    /// Whole base units, rounded towards positive infinity (`"1500m"` is 2).
    pub const fn to_whole_ceil(self) -> i128 {
        let q = self.0 / 1000;
        if self.0 % 1000 > 0 { q + 1 } else { q }
    }

    /// Whole base units, rounded towards negative infinity (`"1500m"` is 1).
    pub const fn to_whole_floor(self) -> i128 {
        let q = self.0 / 1000;
        if self.0 % 1000 < 0 { q - 1 } else { q }
    }

    /// The value in base units as a float (lossy for huge values).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Whether the value is below zero.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// Addition that reports overflow.
    pub const fn checked_add(self, other: Millis) -> Option<Millis> {
        match self.0.checked_add(other.0) {
            Some(v) => Some(Millis(v)),
            None => None,
        }
    }

    /// Addition that clamps at the bounds of `i128`.
    pub const fn saturating_add(self, other: Millis) -> Millis {
        Millis(self.0.saturating_add(other.0))
    }

    /// Subtraction that clamps at the bounds of `i128`.
    pub const fn saturating_sub(self, other: Millis) -> Millis {
        Millis(self.0.saturating_sub(other.0))
    }
}

/// Canonical text: a whole number when exact (`"2"`), milli-units otherwise
/// (`"1500m"`). The result parses back to the same value.
impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % 1000 == 0 {
            write!(f, "{}", self.0 / 1000)
        } else {
            write!(f, "{}m", self.0)
        }
    }
}

impl FromStr for Millis {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

impl Add for Millis {
    type Output = Millis;
    fn add(self, rhs: Millis) -> Millis {
        self.saturating_add(rhs)
    }
}

impl AddAssign for Millis {
    fn add_assign(&mut self, rhs: Millis) {
        *self = *self + rhs;
    }
}

impl Sub for Millis {
    type Output = Millis;
    fn sub(self, rhs: Millis) -> Millis {
        self.saturating_sub(rhs)
    }
}

impl SubAssign for Millis {
    fn sub_assign(&mut self, rhs: Millis) {
        *self = *self - rhs;
    }
}

impl Neg for Millis {
    type Output = Millis;
    fn neg(self) -> Millis {
        Millis(self.0.saturating_neg())
    }
}

impl Sum for Millis {
    fn sum<I: Iterator<Item = Millis>>(iter: I) -> Millis {
        iter.fold(Millis::ZERO, Add::add)
    }
}

impl<'a> Sum<&'a Millis> for Millis {
    fn sum<I: Iterator<Item = &'a Millis>>(iter: I) -> Millis {
        iter.copied().sum()
    }
}

/// Parses a Kubernetes quantity into exact milli-units.
///
/// ```
/// use quartermaster_policies::quantity::{parse_quantity, Millis};
/// assert_eq!(parse_quantity("100m").unwrap(), Millis::from_millis(100));
/// assert_eq!(parse_quantity("4Gi").unwrap(), Millis::from_whole(4 << 30));
/// assert_eq!(parse_quantity("1e3").unwrap(), Millis::from_whole(1000));
/// ```
pub fn parse_quantity(input: &str) -> Result<Millis, QuantityError> {
    let err = |reason: &str| QuantityError::new(input, reason);
    if input.is_empty() {
        return Err(err("empty quantity"));
    }
    let bytes = input.as_bytes();
    let mut i = 0;
    let negative = match bytes[0] {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let number = parse_number(&input[i..]).map_err(&err)?;
    let (mantissa, frac_digits, sticky) = (number.mantissa, number.frac_digits, number.sticky);
    let consumed = number.consumed;
    i += consumed;
    let (pow10, pow2) = parse_suffix(&input[i..]).map_err(|r| err(&r))?;

    // value = mantissa * 10^-frac_digits * 10^pow10 * 2^pow2, in milli-units.
    let too_large = || err("value is too large");
    let exp = pow10 + 3 - frac_digits as i64;
    // Dropped digits sit past the 30th decimal place; they are worth less
    // than a milli-unit unless the suffix scales them up by 10^27 or more.
    if sticky && pow10 + i64::from(pow2 / 3) >= 27 {
        return Err(err("too many significant digits"));
    }
    let magnitude = if exp >= 0 {
        // Every partial product is at most the result.
        let mut magnitude = mantissa.checked_mul(1i128 << pow2).ok_or_else(too_large)?;
        let scale = pow10_i128(exp).ok_or_else(too_large)?;
        if magnitude != 0 {
            magnitude = magnitude.checked_mul(scale).ok_or_else(too_large)?;
        }
        // A dropped non-zero digit makes the value just above a whole milli-unit.
        magnitude
            .checked_add(i128::from(sticky))
            .ok_or_else(too_large)?
    } else {
        match pow10_i128(-exp) {
            // mantissa * 2^pow2 / scale, rounded up (away from zero) to a whole milli-unit as
            // Kubernetes does, without forming mantissa * 2^pow2, which can overflow when the
            // result fits (`147600000.000000000001Ei`): the quotient is doubled pow2 times and
            // the remainder (below scale) carried by long division.
            Some(scale) => {
                let (mut quotient, mut remainder) = (mantissa / scale, mantissa % scale);
                for _ in 0..pow2 {
                    quotient = quotient.checked_mul(2).ok_or_else(too_large)?;
                    remainder *= 2;
                    if remainder >= scale {
                        remainder -= scale;
                        quotient += 1;
                    }
                }
                quotient
                    .checked_add(i128::from(remainder != 0 || sticky))
                    .ok_or_else(too_large)?
            }
            None => i128::from(mantissa != 0 || sticky),
        }
    };
    Ok(Millis(if negative { -magnitude } else { magnitude }))
}

/// Parses a [`Quantity`] from `k8s-openapi`.
pub fn quantity_millis(quantity: &Quantity) -> Result<Millis, QuantityError> {
    parse_quantity(&quantity.0)
}

/// A [`Quantity`] holding the canonical text of `millis`.
pub fn to_quantity(millis: Millis) -> Quantity {
    Quantity(millis.to_string())
}

/// Fractional digits kept exactly; any non-zero digit past them only rounds up.
const MAX_FRAC_DIGITS: usize = 30;

struct Number {
    mantissa: i128,
    frac_digits: usize,
    /// A non-zero fractional digit was dropped past [`MAX_FRAC_DIGITS`].
    sticky: bool,
    consumed: usize,
}

/// Reads `digits[.digits]`.
fn parse_number(s: &str) -> Result<Number, &'static str> {
    let mut mantissa: i128 = 0;
    let mut frac_digits = 0usize;
    let mut sticky = false;
    let mut digits = 0usize;
    let mut seen_dot = false;
    // Trailing fractional zeros are dropped so long decimal tails do not overflow.
    let mut pending_zeros = 0usize;
    let mut consumed = 0;
    for (idx, c) in s.char_indices() {
        match c {
            '0'..='9' => {
                digits += 1;
                let d = c as i128 - '0' as i128;
                if seen_dot {
                    if d == 0 {
                        pending_zeros += 1;
                    } else if frac_digits + pending_zeros >= MAX_FRAC_DIGITS {
                        sticky = true;
                    } else {
                        for _ in 0..pending_zeros {
                            mantissa = mantissa.checked_mul(10).ok_or("too many digits")?;
                        }
                        frac_digits += pending_zeros + 1;
                        pending_zeros = 0;
                        mantissa = mantissa
                            .checked_mul(10)
                            .and_then(|m| m.checked_add(d))
                            .ok_or("too many digits")?;
                    }
                } else {
                    mantissa = mantissa
                        .checked_mul(10)
                        .and_then(|m| m.checked_add(d))
                        .ok_or("value is too large")?;
                }
            }
            '.' if !seen_dot => seen_dot = true,
            _ => {
                consumed = idx;
                break;
            }
        }
        consumed = idx + c.len_utf8();
    }
    if digits == 0 {
        return Err("expected a number");
    }
    Ok(Number {
        mantissa,
        frac_digits,
        sticky,
        consumed,
    })
}

/// Returns (power of ten, power of two) for a suffix.
fn parse_suffix(s: &str) -> Result<(i64, u32), String> {
    let r = match s {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let rest = s
                .strip_prefix('e')
                .or_else(|| s.strip_prefix('E'))
                .ok_or_else(|| format!("unknown suffix {s:?}"))?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("unknown suffix {s:?}"));
            }
            let exp: i64 = rest
                .parse()
                .map_err(|_| format!("exponent {rest:?} is out of range"))?;
            if !(-1000..=1000).contains(&exp) {
                return Err(format!("exponent {rest:?} is out of range"));
            }
            (exp, 0)
        }
    };
    Ok(r)
}

fn pow10_i128(exp: i64) -> Option<i128> {
    let exp = u32::try_from(exp).ok()?;
    10i128.checked_pow(exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> i128 {
        parse_quantity(s).unwrap_or_else(|e| panic!("{e}")).millis()
    }

    #[test]
    fn parses_the_documented_forms() {
        let cases: &[(&str, i128)] = &[
            ("100m", 100),
            ("2", 2000),
            ("4Gi", 4 * (1 << 30) * 1000),
            ("1.5", 1500),
            ("500M", 500_000_000_000),
            ("1e3", 1_000_000),
            ("120.50", 120_500),
            ("0", 0),
            ("+3", 3000),
            ("-2", -2000),
            ("-100m", -100),
            (".5", 500),
            ("5.", 5000),
            ("1Ki", 1_024_000),
            ("1.5Gi", 1_610_612_736_000),
            ("1k", 1_000_000),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1E3", 1_000_000),
            ("1e-3", 1),
            ("25e-1", 2500),
            ("1n", 1),
            ("1u", 1),
            ("0.1m", 1),
            ("1500u", 2),
            ("-0.1m", -1),
            ("0.000", 0),
            ("12.000000000000000000000000000000000000000000001", 12_001),
            ("1.23456789012345678901234567890000000000000", 1235),
            ("0.000000000000000000000000000000000000000001", 1),
            ("8Ei", 8 * (1i128 << 60) * 1000),
        ];
        for (input, want) in cases {
            assert_eq!(m(input), *want, "{input}");
        }
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in [
            "",
            "abc",
            "1.2.3",
            "1K",
            "1 Gi",
            "Gi",
            "1Gib",
            "--1",
            "1e",
            "e3",
            "1e+",
            "1.5.",
            "0x10",
            "1mm",
            "NaN",
            "1e99999",
            "1.0000000000000000000000000000000000001e40",
        ] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} should be rejected");
        }
        let e = parse_quantity("1K").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"invalid quantity "1K": unknown suffix "K""#
        );
    }

    #[test]
    fn binary_suffix_with_a_long_fraction_is_not_an_overflow() {
        // Found by the property tests: mantissa × 2^60 overflowed i128 although the value fits.
        assert_eq!(
            m("147600000.000000000001Ei"),
            170_171_214_079_970_613_658_752_921_505
        );
        assert_eq!(m("1.000000000001Ki"), 1_024_001);
        // A dropped digit that rounds i128::MAX milli-units up is an error, not an overflow.
        let past_max = format!(
            "17014118346046923173168730371588410572.7{}1e-2",
            "0".repeat(29)
        );
        assert!(parse_quantity(&past_max).is_err());
        let at_max = format!(
            "17014118346046923173168730371588410572.7{}e-2",
            "0".repeat(29)
        );
        assert_eq!(m(&at_max), i128::MAX);
    }

    #[test]
    fn rounding_helpers() {
        assert_eq!(Millis::from_millis(1500).to_whole_ceil(), 2);
        assert_eq!(Millis::from_millis(1500).to_whole_floor(), 1);
        assert_eq!(Millis::from_millis(2000).to_whole_ceil(), 2);
        assert_eq!(Millis::from_millis(-1500).to_whole_ceil(), -1);
        assert_eq!(Millis::from_millis(-1500).to_whole_floor(), -2);
        assert_eq!(Millis::from_millis(1).to_whole_ceil(), 1);
        assert_eq!(Millis::from_millis(0).to_whole_ceil(), 0);
        assert!((Millis::from_millis(1250).as_f64() - 1.25).abs() < 1e-12);
    }

    #[test]
    fn display_round_trips() {
        for (input, shown) in [
            ("2", "2"),
            ("1.5", "1500m"),
            ("100m", "100m"),
            ("1Ki", "1024"),
            ("-0.5", "-500m"),
        ] {
            let v = parse_quantity(input).unwrap();
            assert_eq!(v.to_string(), shown);
            assert_eq!(parse_quantity(shown).unwrap(), v);
        }
    }

    #[test]
    fn arithmetic() {
        let a = Millis::from_whole(2);
        let b = Millis::from_millis(500);
        assert_eq!(a + b, Millis::from_millis(2500));
        assert_eq!(a - b, Millis::from_millis(1500));
        assert_eq!(-b, Millis::from_millis(-500));
        assert_eq!([a, b].iter().sum::<Millis>(), Millis::from_millis(2500));
        assert_eq!(
            Millis::from_millis(i128::MAX) + a,
            Millis::from_millis(i128::MAX)
        );
        assert_eq!(Millis::from_millis(i128::MAX).checked_add(a), None);
        assert_eq!(
            quantity_millis(&Quantity("3Gi".into())).unwrap(),
            Millis::from_whole(3 << 30)
        );
        assert_eq!(to_quantity(Millis::from_millis(1500)).0, "1500m");
    }
}
