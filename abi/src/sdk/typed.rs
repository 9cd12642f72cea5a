//! Typed tools: a tool's arguments declared as a Rust type that is `serde::Deserialize` and
//! `schemars::JsonSchema`. The schema the model sees is generated from the type (doc comments become
//! descriptions), and arguments that do not fit it are answered with an error naming the argument,
//! before the handler runs.
//!
//! A tool declares its arguments as [`crate::sdk::Tool::Args`]; a plugin's config table is read the
//! same way ([`crate::sdk::Host::config`]).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use taskhost_common::shown;

/// The JSON schema of `A` as a tool's input schema: an object schema without the `$schema` and
/// `title` keys (MCP clients need neither), carrying only the formats the JSON Schema vocabulary
/// defines: schemars' `uint64`, `uint16`, `int32`, `double`... are removed, their range kept as
/// `minimum`/`maximum` (a client that validates schemas warns of a format it does not know; Gemini
/// CLI did, twelve times a run).
pub fn schema<A: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(A))
        .unwrap_or_else(|_| serde_json::json!({"type": "object"}));
    standard_formats_only(&mut schema);
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
        object
            .entry("type")
            .or_insert_with(|| Value::String("object".into()));
    }
    schema
}

/// The `format` values JSON Schema (2020-12) defines.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes, everywhere in `schema`, each `format` JSON Schema does not define; an integer format's
/// range becomes `minimum`/`maximum` where the schema does not bound it already.
fn standard_formats_only(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            let unknown = object
                .get("format")
                .and_then(Value::as_str)
                .filter(|f| !STANDARD_FORMATS.contains(f))
                .map(str::to_owned);
            if let Some(format) = unknown {
                object.remove("format");
                if let Some((min, max)) = integer_range(&format) {
                    object.entry("minimum").or_insert_with(|| min.into());
                    if let Some(max) = max {
                        object.entry("maximum").or_insert_with(|| max.into());
                    }
                }
            }
            object.values_mut().for_each(standard_formats_only);
        }
        Value::Array(items) => items.iter_mut().for_each(standard_formats_only),
        _ => {}
    }
}

/// The range of schemars' integer format `format` (`uint16`: 0 to 65535); a 64-bit or
/// pointer-sized one has no maximum a JSON number carries exactly.
fn integer_range(format: &str) -> Option<(i64, Option<i64>)> {
    Some(match format {
        "uint8" => (0, Some(u8::MAX.into())),
        "uint16" => (0, Some(u16::MAX.into())),
        "uint32" => (0, Some(u32::MAX.into())),
        "uint64" | "uint" => (0, None),
        "int8" => (i8::MIN.into(), Some(i8::MAX.into())),
        "int16" => (i16::MIN.into(), Some(i16::MAX.into())),
        "int32" => (i32::MIN.into(), Some(i32::MAX.into())),
        _ => return None,
    })
}

/// Parses a tool call's arguments (JSON text) as `A`.
///
/// # Errors
/// The model-facing reason, naming the argument: `invalid <arg>: expected <what>, got <value>` for
/// a value of the wrong kind (at most 200 characters of the value), ``invalid arguments: missing
/// field `<arg>` `` for a required one left out, `invalid arguments: <why>` otherwise.
pub fn parse<A: DeserializeOwned>(arguments_json: &str) -> Result<A, String> {
    parse_named(arguments_json, "arguments", "")
}

/// A plugin's config table (JSON text) as `T`; a bad key is named as `invalid config key <path>:
/// expected ..., got ...`, a key `T` does not name as `unknown config key <key>: the keys are ...`.
///
/// # Errors
/// As [`parse`], worded for the config; a key of the table's top level that `T` (a struct) does
/// not name.
pub fn parse_config<T: DeserializeOwned>(config_json: &str) -> Result<T, String> {
    if let Some(known) = super::config_keys::known_keys::<T>()
        && let Some(key) = super::config_keys::unknown_key(config_json, known)
    {
        return Err(format!(
            "unknown config key {key}: the keys are {}",
            known.join(", ")
        ));
    }
    parse_config_open(config_json)
}

/// As [`parse_config`], with the keys `T` does not name ignored.
///
/// # Errors
/// As [`parse`], worded for the config.
pub fn parse_config_open<T: DeserializeOwned>(config_json: &str) -> Result<T, String> {
    parse_named(config_json, "config", "config key ")
}

/// `json` as `A`; an error with a path is worded `invalid <prefix><path>: ...`, one without
/// `invalid <whole>: ...`.
fn parse_named<A: DeserializeOwned>(json: &str, whole: &str, prefix: &str) -> Result<A, String> {
    let mut de = serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let why = without_position(&e.inner().to_string());
        if path == "." || path.is_empty() {
            return format!("invalid {whole}: {}", clipped(&why));
        }
        let raw: Value = serde_json::from_str(json).unwrap_or(Value::Null);
        let value = e
            .path()
            .iter()
            .try_fold(&raw, |v, segment| match segment {
                serde_path_to_error::Segment::Map { key } => v.get(key),
                serde_path_to_error::Segment::Seq { index } => v.get(index),
                _ => None,
            })
            .unwrap_or(&Value::Null);
        match why.split_once(", expected ") {
            Some((_, expected)) => {
                format!(
                    "invalid {prefix}{path}: expected {expected}, got {}",
                    shown(value)
                )
            }
            None => format!("invalid {prefix}{path}: {}", clipped(&why)),
        }
    })
}

/// serde_json's message without its ` at line L column C` (the model wrote no lines).
fn without_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// At most 200 characters of a message (a serde message may quote a whole bad value).
fn clipped(message: &str) -> String {
    shown(&Value::String(message.to_owned()))
        .trim_matches('"')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments of a test tool.
    #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
    #[allow(dead_code, reason = "the fields are read through the schema only")]
    struct Args {
        /// The command.
        command: String,
        /// Milliseconds.
        timeout_ms: Option<u64>,
        #[serde(default)]
        tags: Vec<String>,
    }

    /// Arguments with integers of every width and a nested one.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code, reason = "the fields are read through the schema only")]
    struct Sized {
        wait_ms: Option<u64>,
        cols: u16,
        shift: i8,
        ratio: f64,
        inner: Vec<Inner>,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code, reason = "the fields are read through the schema only")]
    struct Inner {
        rows: u32,
    }

    #[test]
    fn a_schema_carries_only_formats_json_schema_defines_and_keeps_integer_ranges() {
        let s = schema::<Sized>();
        let text = s.to_string();
        for format in ["uint64", "uint16", "uint32", "int8", "double"] {
            assert!(!text.contains(format), "{format} in {text}");
        }
        let p = &s["properties"];
        assert_eq!(p["cols"]["minimum"], 0);
        assert_eq!(p["cols"]["maximum"], 65535);
        assert_eq!(p["shift"]["minimum"], -128);
        assert_eq!(p["shift"]["maximum"], 127);
        assert_eq!(p["wait_ms"]["minimum"], 0);
        assert!(p["wait_ms"].get("maximum").is_none());
        assert!(text.contains("\"maximum\":4294967295"), "{text}");
    }

    #[test]
    fn the_schema_is_an_object_with_the_fields_and_their_docs() {
        let s = schema::<Args>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["command"]["description"], "The command.");
        assert_eq!(s["required"], serde_json::json!(["command"]));
        assert!(s.get("$schema").is_none() && s.get("title").is_none());
    }

    #[test]
    fn bad_arguments_are_named_with_what_was_expected_and_what_came() {
        assert_eq!(
            parse::<Args>(r#"{"command": 5}"#).unwrap_err(),
            "invalid command: expected a string, got 5"
        );
        assert_eq!(
            parse::<Args>(r#"{"command": "x", "timeout_ms": "soon"}"#).unwrap_err(),
            "invalid timeout_ms: expected u64, got \"soon\""
        );
        assert_eq!(
            parse::<Args>(r#"{"command": "x", "tags": ["a", 1]}"#).unwrap_err(),
            "invalid tags[1]: expected a string, got 1"
        );
        assert_eq!(
            parse::<Args>("{}").unwrap_err(),
            "invalid arguments: missing field `command`"
        );
        let long = format!(r#"{{"command": [{}]}}"#, vec!["\"y\""; 1000].join(","));
        let e = parse::<Args>(&long).unwrap_err();
        assert!(e.len() < 300 && e.contains("more characters"), "{e}");
        assert_eq!(
            parse::<Args>(r#"{"command": "ls", "timeout_ms": null}"#).unwrap(),
            Args {
                command: "ls".into(),
                timeout_ms: None,
                tags: vec![]
            }
        );
    }
}
