//! Reading the environment at start: a variable missing or malformed is refused with a
//! [`ConfigError`] that names it and says what to put there. The functions' configuration
//! (`twopc_runtime::config`) and a service on the SDK read through [`Env`].

use std::str::FromStr;

use twopc_core::signing::Secret;

/// The shortest accepted signing secret (bytes).
pub const MIN_SIGNING_SECRET_BYTES: usize = 16;

/// A variable is missing or malformed; the message names it and says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set (or is empty).
    #[error("environment variable {var} is not set: {what}")]
    Missing {
        /// The variable.
        var: &'static str,
        /// What it should hold.
        what: &'static str,
    },
    /// A variable is set but cannot be used.
    #[error("environment variable {var} is invalid: {problem}")]
    Invalid {
        /// The variable.
        var: &'static str,
        /// What is wrong and what is expected.
        problem: String,
    },
}

/// The variables, through a lookup: the process environment ([`Env::process`]) or, in tests, a
/// map. A blank value is unset (SAM turns an absent value into `""`).
pub struct Env<F> {
    lookup: F,
}

impl Env<fn(&str) -> Option<String>> {
    /// The process environment.
    pub fn process() -> Self {
        Env {
            lookup: |name| std::env::var(name).ok(),
        }
    }
}

impl<F: Fn(&str) -> Option<String>> Env<F> {
    /// The variables `lookup` gives.
    pub fn new(lookup: F) -> Self {
        Env { lookup }
    }

    /// A variable's value, `None` when unset or blank.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|v| !v.trim().is_empty())
    }

    /// A variable that must be set; `what` tells the operator what to put there.
    pub fn required(&self, name: &'static str, what: &'static str) -> Result<String, ConfigError> {
        self.get(name)
            .ok_or(ConfigError::Missing { var: name, what })
    }

    /// A whole non-negative number, `default` when unset.
    pub fn number<T: FromStr>(&self, name: &'static str, default: T) -> Result<T, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
                var: name,
                problem: format!("{v:?} is not a whole non-negative number"),
            }),
        }
    }

    /// A shared secret, read as is (not trimmed: the secret is whatever bytes the services were
    /// given); unset when empty. Shorter than [`MIN_SIGNING_SECRET_BYTES`] is refused, and the
    /// value is never echoed.
    pub fn secret(&self, name: &'static str) -> Result<Option<Secret>, ConfigError> {
        match (self.lookup)(name).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) if s.len() < MIN_SIGNING_SECRET_BYTES => Err(ConfigError::Invalid {
                var: name,
                problem: format!(
                    "{} bytes; a signing secret has at least {MIN_SIGNING_SECRET_BYTES} (e.g. `openssl rand -hex 32`), or leave it unset",
                    s.len()
                ),
            }),
            Some(s) => Ok(Some(Secret::new(s))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> Env<impl Fn(&str) -> Option<String>> {
        Env::new(move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn a_blank_variable_is_unset_and_a_required_one_says_what_to_set() {
        let e = env(&[("A", "  ")]);
        assert_eq!(e.get("A"), None);
        let err = e.required("A", "set it to the table's name").unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable A is not set: set it to the table's name"
        );
    }

    #[test]
    fn numbers_default_when_unset_and_say_what_is_wrong() {
        let e = env(&[("N", " 12 "), ("BAD", "soon")]);
        assert_eq!(e.number("N", 1u64), Ok(12));
        assert_eq!(e.number("UNSET", 7u64), Ok(7));
        let err = e.number("BAD", 1u64).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { var: "BAD", .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("whole non-negative number"),
            "{err}"
        );
    }

    #[test]
    fn a_short_secret_is_refused_without_echoing_it() {
        let e = env(&[("S", "short"), ("OK", " 0123456789abcdef"), ("EMPTY", "")]);
        let err = e.secret("S").unwrap_err();
        assert!(!err.to_string().contains("short"), "{err}");
        assert_eq!(
            e.secret("OK").expect("valid").as_ref().map(Secret::expose),
            Some(" 0123456789abcdef".as_bytes())
        );
        assert!(e.secret("EMPTY").expect("unset").is_none());
    }
}
