//! Exact decimal numbers as DynamoDB stores them.
//!
//! A number travels as its decimal text from the client's JSON to DynamoDB's `N` and back: it is
//! validated here, never converted to a binary float. DynamoDB keeps up to 38 significant digits
//! with magnitudes from 1E-130 to below 1E+126.

use std::fmt;

/// Most significant digits DynamoDB keeps.
pub const MAX_DIGITS: usize = 38;
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

    /// Whether the value is negative (a zero with a minus sign is not).
    pub fn is_negative(&self) -> bool {
        self.0.starts_with('-') && self.0.bytes().any(|b| (b'1'..=b'9').contains(&b))
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

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
    fn json_keeps_every_digit() {
        let d = Decimal::parse("12345678901234567890123456789012345678").expect("valid");
        assert_eq!(
            d.to_json().to_string(),
            "12345678901234567890123456789012345678"
        );
    }
}
