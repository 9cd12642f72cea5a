//! A plugin's config table as a Rust type ([`Host::config`]), and the value types a config needs
//! that serde lacks: [`Positive`], [`PositiveMs`], [`NonEmpty`].

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, Unexpected, Visitor};

use super::host::Host;
use super::typed;

impl Host {
    /// This plugin's config table (its `[plugin.config]`) as `T`. Keys the table leaves out take
    /// `T`'s serde defaults (`#[serde(default)]`); a key that `T` (a struct) does not name fails,
    /// since a typo would otherwise leave the setting at its default unseen
    /// ([`Host::config_open`] ignores such keys).
    ///
    /// # Errors
    /// A key whose value does not fit, named with what was expected and what came:
    /// `invalid config key timeout_ms: expected a positive integer, got 0`; a key `T` does not
    /// name: `unknown config key bogus: the keys are timeout_ms, ...`.
    pub fn config<T: DeserializeOwned>(&self) -> Result<T, String> {
        let json = self.0.config_json();
        typed::parse_config::<T>(json.as_str())
    }

    /// As [`Host::config`], with the keys `T` does not name ignored (a plugin that reads its
    /// table in parts).
    ///
    /// # Errors
    /// A key whose value does not fit, as [`Host::config`] names it.
    pub fn config_open<T: DeserializeOwned>(&self) -> Result<T, String> {
        let json = self.0.config_json();
        typed::parse_config_open::<T>(json.as_str())
    }

    /// This plugin's config table as JSON (an empty object when none).
    pub fn config_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.config_json().as_str()).unwrap_or(serde_json::Value::Null)
    }
}

/// A positive integer (a count, a byte size, milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Positive(pub u64);

impl<'de> serde::Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Positive;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Positive, E> {
                if n == 0 {
                    return Err(E::invalid_value(Unexpected::Unsigned(0), &self));
                }
                Ok(Positive(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Positive, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(n), &self)),
                }
            }
        }
        d.deserialize_u64(V)
    }
}

/// A positive, finite number of milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct PositiveMs(pub f64);

impl<'de> serde::Deserialize<'de> for PositiveMs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PositiveMs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive number of milliseconds")
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<PositiveMs, E> {
                if n.is_finite() && n > 0.0 {
                    Ok(PositiveMs(n))
                } else {
                    Err(E::invalid_value(Unexpected::Float(n), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<PositiveMs, E> {
                self.visit_f64(n as f64)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<PositiveMs, E> {
                self.visit_f64(n as f64)
            }
        }
        d.deserialize_f64(V)
    }
}

/// A string with something in it besides whitespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonEmpty(pub String);

impl<'de> serde::Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NonEmpty;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-empty string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<NonEmpty, E> {
                if s.trim().is_empty() {
                    return Err(E::invalid_value(Unexpected::Str(s), &self));
                }
                Ok(NonEmpty(s.to_owned()))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(default)]
    struct Config {
        grace_ms: Positive,
        wait_ms: PositiveMs,
        partition: Option<NonEmpty>,
        policy: crate::ffi::PermissionPolicy,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                grace_ms: Positive(7),
                wait_ms: PositiveMs(1.5),
                partition: None,
                policy: crate::ffi::PermissionPolicy::Reject,
            }
        }
    }

    fn parse(json: &str) -> Result<Config, String> {
        typed::parse_config::<Config>(json)
    }

    #[test]
    fn absent_keys_take_their_defaults() {
        assert_eq!(parse("{}"), Ok(Config::default()));
        assert_eq!(
            parse(r#"{"grace_ms": 500}"#).map(|c| c.grace_ms),
            Ok(Positive(500))
        );
    }

    #[test]
    fn an_unknown_key_fails_naming_it_and_the_keys_there_are() {
        assert_eq!(
            parse(r#"{"grace_ms": 5, "bogus": 1}"#),
            Err(
                "unknown config key bogus: the keys are grace_ms, wait_ms, partition, policy"
                    .to_owned()
            )
        );
        assert!(typed::parse_config_open::<Config>(r#"{"bogus": 1}"#).is_ok());
    }

    #[test]
    fn a_bad_key_is_named_with_what_was_expected_and_what_came() {
        assert_eq!(
            parse(r#"{"grace_ms": 0}"#),
            Err("invalid config key grace_ms: expected a positive integer, got 0".to_owned())
        );
        assert_eq!(
            parse(r#"{"grace_ms": -1}"#),
            Err("invalid config key grace_ms: expected a positive integer, got -1".to_owned())
        );
        assert_eq!(
            parse(r#"{"grace_ms": "5"}"#),
            Err("invalid config key grace_ms: expected a positive integer, got \"5\"".to_owned())
        );
        assert_eq!(
            parse(r#"{"wait_ms": 0.0}"#),
            Err(
                "invalid config key wait_ms: expected a positive number of milliseconds, got 0.0"
                    .to_owned()
            )
        );
        assert_eq!(
            parse(r#"{"partition": " "}"#),
            Err("invalid config key partition: expected a non-empty string, got \" \"".to_owned())
        );
        assert_eq!(
            parse(r#"{"policy": "maybe"}"#),
            Err(
                "invalid config key policy: expected `reject` or `allow`, got \"maybe\"".to_owned()
            )
        );
    }
}
