//! The keys a config type names, so a config table's key that none of them is (a typo, a setting of
//! another plugin) fails the load naming it instead of being ignored.
//!
//! serde tells a struct's field names only to the deserializer it reads from; [`known_keys`] asks
//! with one that reads nothing. A type read through a map (`#[serde(flatten)]`, a `HashMap`) names
//! no fields, and its tables are not checked.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde_json::Value;

/// The field names of the struct `T` is read as, if it is one.
pub(crate) fn known_keys<T: DeserializeOwned>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// The first key of the JSON object `json` that `known` does not hold.
pub(crate) fn unknown_key(json: &str, known: &[&str]) -> Option<String> {
    let value: Value = serde_json::from_str(json).ok()?;
    value
        .as_object()?
        .keys()
        .find(|key| !known.contains(&key.as_str()))
        .cloned()
}

/// A deserializer that records the fields of the struct asked of it and reads nothing.
struct Probe<'a>(&'a mut Option<&'static [&'static str]>);

/// Why a probe read nothing (always).
#[derive(Debug)]
struct Probed;

impl fmt::Display for Probed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Probed
    }
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        *self.0 = Some(fields);
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Config {
        grace_ms: u64,
        #[serde(rename = "wait")]
        wait_ms: u64,
    }

    #[test]
    fn a_struct_names_its_keys_and_a_map_names_none() {
        assert_eq!(known_keys::<Config>(), Some(&["grace_ms", "wait"][..]));
        assert_eq!(known_keys::<std::collections::HashMap<String, u64>>(), None);
        assert_eq!(
            unknown_key(r#"{"wait": 1, "bogus": 2}"#, &["grace_ms", "wait"]),
            Some("bogus".to_owned())
        );
    }
}
