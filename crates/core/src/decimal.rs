//! Exact decimal numbers as DynamoDB stores them.
//!
//! A number travels as its decimal text from the client's JSON to DynamoDB's `N` and back: it is
//! validated here, never converted to a binary float. DynamoDB keeps up to 38 significant digits
//! with magnitudes from 1E-130 to below 1E+126.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use bigdecimal::BigDecimal;

/// Most significant digits DynamoDB keeps.
pub(crate) const MAX_DIGITS: usize = 38;
const MAX_EXP: i64 = 125; // position of the most significant digit
const MIN_EXP: i64 = -130;

/// A validated decimal number, kept as text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Decimal(String);

/// Why a text is not a number DynamoDB can store exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a valid number: {why}")]
pub struct DecimalError {
    /// The offending text.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Decimal {
    /// Parses decimal text (`-12.50`, `1e3`, `0.1`). Leading `+`, hex, `NaN` and infinities are refused.
    pub fn parse(text: &str) -> Result<Self, DecimalError> {
        check(text).map_err(|why| DecimalError {
            text: text.chars().take(64).collect(),
            why,
        })?;
        Ok(Decimal(text.to_owned()))
    }

    /// The text, exactly as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the value is zero, however spelled (`0`, `-0.0`, `0e5`).
    pub fn is_zero(&self) -> bool {
        // The significand, before any exponent: `0e5` is zero, whatever digits its exponent has.
        let significand = self.0.split(['e', 'E']).next().unwrap_or_default();
        !significand.bytes().any(|b| (b'1'..=b'9').contains(&b))
    }

    /// Whether the value is less than zero (a zero with a minus sign is not).
    pub fn is_negative(&self) -> bool {
        self.0.starts_with('-') && !self.is_zero()
    }

    /// Whether the value is more than zero.
    pub fn is_positive(&self) -> bool {
        !self.0.starts_with('-') && !self.is_zero()
    }

    /// Zero.
    pub fn zero() -> Decimal {
        Decimal("0".to_owned())
    }

    fn big(&self) -> BigDecimal {
        // Validated text always parses; zero stands in only if that ever broke.
        BigDecimal::from_str(&self.0).unwrap_or_default()
    }

    fn from_big(b: &BigDecimal) -> Result<Decimal, DecimalError> {
        Decimal::parse(&canonical(b))
    }

    /// The exact sum, or DynamoDB's refusal of it (more than 38 significant digits, or out of
    /// range).
    pub(crate) fn checked_add(&self, other: &Decimal) -> Result<Decimal, DecimalError> {
        Decimal::from_big(&(self.big() + other.big()))
    }

    /// The negation.
    pub fn neg(&self) -> Decimal {
        Decimal::from_big(&-self.big()).unwrap_or_else(|_| self.clone())
    }

    /// This if negative, else zero.
    pub fn min_zero(&self) -> Decimal {
        if self.is_negative() {
            self.clone()
        } else {
            Decimal::zero()
        }
    }

    /// This if positive, else zero.
    pub fn max_zero(&self) -> Decimal {
        if self.is_positive() {
            self.clone()
        } else {
            Decimal::zero()
        }
    }

    /// The same value in one spelling: no exponent, no leading or trailing zeros, no `-0`
    /// (`1.50`, `1.5` and `15e-1` all read `1.5`), so stored values can be compared as text.
    pub fn canonical(&self) -> Decimal {
        Decimal::from_big(&self.big()).unwrap_or_else(|_| self.clone())
    }

    /// Numeric order (`1.50` equals `1.5`).
    pub fn cmp_value(&self, other: &Decimal) -> Ordering {
        self.big().cmp(&other.big())
    }

    /// As a JSON number that keeps every digit.
    pub fn to_json(&self) -> serde_json::Value {
        match self.0.parse::<serde_json::Number>() {
            Ok(n) => serde_json::Value::Number(n),
            // Unreachable for validated text; keep the digits rather than lose them.
            Err(_) => serde_json::Value::String(self.0.clone()),
        }
    }
}

/// `v` with every number in one spelling ([`Decimal::canonical`]), as DynamoDB keeps them: two
/// JSON values DynamoDB stores as the same value (`{"id": 1}`, `{"id": 1.0}`, `{"id": 10e-1}`)
/// read back equal. Numbers go through their decimal text, never an `f64`; a number that is not
/// one DynamoDB can store keeps its text.
pub fn canonical_json(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(n) => {
            Decimal::parse(&n.to_string()).map_or_else(|_| v.clone(), |d| d.canonical().to_json())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical_json).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), canonical_json(x)))
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::String(_) => v.clone(),
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Written as a JSON number with exactly its digits (serde_json's `arbitrary_precision`).
impl serde::Serialize for Decimal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// Read exactly from a JSON number's text (serde_json's `arbitrary_precision` hands it over
/// whole, or as an `f64` whose shortest form is that text) or from a string of its digits
/// (`12.50` and `"12.50"` both read `12.50`).
impl<'de> serde::Deserialize<'de> for Decimal {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        d.deserialize_any(DecimalVisitor)
    }
}

struct DecimalVisitor;

impl DecimalVisitor {
    fn parse<E: serde::de::Error>(text: &str) -> Result<Decimal, E> {
        Decimal::parse(text).map_err(E::custom)
    }
}

impl<'de> serde::de::Visitor<'de> for DecimalVisitor {
    type Value = Decimal;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a decimal number, as a JSON number or a string of its digits")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Decimal, E> {
        DecimalVisitor::parse(v)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Decimal, E> {
        DecimalVisitor::parse(&v.to_string())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Decimal, E> {
        DecimalVisitor::parse(&v.to_string())
    }

    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Decimal, E> {
        DecimalVisitor::parse(&v.to_string())
    }

    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Decimal, E> {
        DecimalVisitor::parse(&v.to_string())
    }

    /// serde_json (`arbitrary_precision`) hands a number over as an `f64` only when the `f64`'s
    /// shortest decimal form is the number's text (`9.99`, not `12.50`): then that form is the
    /// exact text. Anything not finite is no number.
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Decimal, E> {
        if !v.is_finite() {
            return Err(E::custom("not a finite number"));
        }
        DecimalVisitor::parse(&v.to_string())
    }

    /// serde_json (`arbitrary_precision`) hands a number over as a one-entry map holding its
    /// text; its own `Number` reads that map back.
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Decimal, A::Error> {
        use serde::Deserialize;
        let number =
            serde_json::Number::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        DecimalVisitor::parse(&number.to_string())
    }
}

/// A decimal's plain spelling without redundant zeros.
fn canonical(b: &BigDecimal) -> String {
    let n = b.normalized();
    if n == BigDecimal::default() {
        return "0".to_owned();
    }
    let plain = n.to_plain_string();
    if plain.contains('.') {
        plain.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        plain
    }
}

fn check(text: &str) -> Result<(), &'static str> {
    let body = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits_only(int) || !digits_only(frac) {
        return Err("expected digits with an optional sign, fraction and exponent");
    }
    if mantissa.contains('.') && frac.is_empty() {
        return Err("a decimal point must be followed by digits");
    }
    let mut exponent: i64 = match exp {
        None => 0,
        Some(e) => {
            let e_digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if e_digits.is_empty() || !digits_only(e_digits) || e_digits.len() > 6 {
                return Err("malformed exponent");
            }
            e.parse::<i64>().map_err(|_| "malformed exponent")?
        }
    };
    exponent -= frac.len() as i64;
    let all: String = format!("{int}{frac}");
    let trimmed = all.trim_start_matches('0');
    if trimmed.is_empty() {
        return Ok(()); // zero
    }
    let significant = trimmed.trim_end_matches('0');
    exponent += (trimmed.len() - significant.len()) as i64;
    if significant.len() > MAX_DIGITS {
        return Err("more than 38 significant digits");
    }
    let top = exponent + significant.len() as i64 - 1;
    if top > MAX_EXP {
        return Err("magnitude above DynamoDB's limit of 1E+126");
    }
    if exponent < MIN_EXP {
        return Err("magnitude below DynamoDB's limit of 1E-130");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_spells_each_number_once_and_keeps_every_digit() {
        let v = |t: &str| serde_json::from_str::<serde_json::Value>(t).expect("json");
        for (a, b) in [
            (r#"{"id": 1}"#, r#"{"id": 1.0}"#),
            (r#"{"id": 1}"#, r#"{"id": 10e-1}"#),
            (r#"{"id": 0}"#, r#"{"id": -0.00}"#),
            (r#"[1.50, {"x": 2E+1}]"#, r#"[1.5, {"x": 20}]"#),
        ] {
            assert_eq!(canonical_json(&v(a)), canonical_json(&v(b)), "{a} vs {b}");
        }
        assert_ne!(
            canonical_json(&v(r#"{"id": 1}"#)),
            canonical_json(&v(r#"{"id": "1"}"#)),
            "a string is not a number"
        );
        let long = "1234567890123456789012345678.9012345678";
        assert_eq!(canonical_json(&v(long)).to_string(), long, "38 digits kept");
        assert_eq!(
            canonical_json(&v(r#"{"a": "1.0", "b": [true, null]}"#)),
            v(r#"{"a": "1.0", "b": [true, null]}"#),
            "strings and the rest as they are"
        );
    }

    #[test]
    fn json_numbers_and_strings_deserialize_exactly() {
        let read = |json: &str| serde_json::from_str::<Decimal>(json);
        assert_eq!(read("12.50").expect("a number").as_str(), "12.50");
        assert_eq!(read("\"12.50\"").expect("a string").as_str(), "12.50");
        // 38 significant digits: an f64 would keep 17.
        let long = "1234567890123456789012345678.9012345678";
        assert_eq!(read(long).expect("38 digits").as_str(), long);
        assert_eq!(read("-3").expect("an integer").as_str(), "-3");
        // Through a serde_json Value too (as a participant's payload arrives).
        let value: serde_json::Value = serde_json::from_str(long).expect("json");
        assert_eq!(
            serde_json::from_value::<Decimal>(value)
                .expect("from a value")
                .as_str(),
            long
        );
        // A number whose shortest f64 form is its text arrives as an f64 from a Value: the
        // same digits (a payment's `9.99`).
        let value: serde_json::Value = serde_json::from_str("9.99").expect("json");
        assert_eq!(
            serde_json::from_value::<Decimal>(value)
                .expect("from a value")
                .as_str(),
            "9.99"
        );
        for bad in ["true", "\"12,5\"", "\"\"", "1e400", "null", "[1]"] {
            assert!(read(bad).is_err(), "{bad} is not a decimal");
        }
        let e = read("\"NaN\"").expect_err("NaN");
        assert!(e.to_string().contains("not a valid number"), "{e}");
    }

    #[test]
    fn a_decimal_serializes_as_its_exact_number() {
        let long = "1234567890123456789012345678.9012345678";
        let d = Decimal::parse(long).expect("valid");
        assert_eq!(serde_json::to_string(&d).expect("json"), long);
    }

    #[test]
    fn accepts_exact_forms() {
        for ok in [
            "0",
            "-0",
            "0.1",
            "-100",
            "1e3",
            "1E+125",
            "1e-130",
            "12345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "0.00000000000000000000000000000000000000012345678901234567890123456789012345678",
        ] {
            assert!(Decimal::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_what_dynamodb_cannot_store() {
        for bad in [
            "",
            "+1",
            "1.",
            ".5",
            "0x10",
            "NaN",
            "1e",
            "1e126",
            "1e-131",
            "123456789012345678901234567890123456789",
            "1,5",
            "--1",
        ] {
            assert!(Decimal::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn negativity_ignores_negative_zero() {
        assert!(
            Decimal::parse("-0.5")
                .map(|d| d.is_negative())
                .unwrap_or(false)
        );
        assert!(
            !Decimal::parse("-0.0")
                .map(|d| d.is_negative())
                .unwrap_or(true)
        );
    }

    #[test]
    fn the_sign_is_read_from_the_significand_never_the_exponent() {
        let sign = |text: &str| {
            let d = Decimal::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            (d.is_negative(), d.is_zero(), d.is_positive())
        };
        for positive in ["12.50", "1e-5", "0.001", "5E+3"] {
            assert_eq!(sign(positive), (false, false, true), "{positive}");
        }
        for negative in ["-0.5", "-1E3", "-7"] {
            assert_eq!(sign(negative), (true, false, false), "{negative}");
        }
        for zero in ["0", "-0.0", "0e5", "-0e5", "0.000"] {
            assert_eq!(sign(zero), (false, true, false), "{zero}");
        }
    }

    #[test]
    fn sums_are_exact_and_refused_past_38_digits() {
        let d = |s: &str| Decimal::parse(s).expect("valid");
        assert_eq!(d("0.1").checked_add(&d("0.2")), Ok(d("0.3")));
        assert_eq!(d("100").checked_add(&d("-25.50")), Ok(d("74.5")));
        assert_eq!(d("1e2").checked_add(&d("-1E2")), Ok(d("0")));
        let big = d("99999999999999999999999999999999999999");
        assert!(big.checked_add(&d("0.1")).is_err(), "39 significant digits");
        assert_eq!(
            big.checked_add(&d("1")).map(|s| s.cmp_value(&d("1e38"))),
            Ok(Ordering::Equal)
        );
        assert_eq!(d("-2.5").neg(), d("2.5"));
        assert_eq!((d("-3").min_zero(), d("3").min_zero()), (d("-3"), d("0")));
        assert_eq!((d("-3").max_zero(), d("3").max_zero()), (d("0"), d("3")));
    }

    #[test]
    fn canonical_spelling_compares_as_text() {
        let d = |s: &str| Decimal::parse(s).expect("valid");
        for (a, b) in [
            ("1.50", "1.5"),
            ("15e-1", "1.5"),
            ("-0.0", "0"),
            ("1E+3", "1000"),
        ] {
            assert_eq!(d(a).canonical(), d(b), "{a}");
        }
        assert_eq!(d("10").cmp_value(&d("9.99")), Ordering::Greater);
    }

    #[test]
    fn json_keeps_every_digit() {
        let d = Decimal::parse("12345678901234567890123456789012345678").expect("valid");
        assert_eq!(
            d.to_json().to_string(),
            "12345678901234567890123456789012345678"
        );
    }
}
