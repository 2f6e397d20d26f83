//! Numbers a worker measures that need not be finite: a diverging run's loss is NaN or infinite (a learning-rate
//! sweep, an fp16 overflow), exactly when its timings matter, and JSON has no word for either. One convention for
//! the whole schema: a finite value is a JSON number; NaN is the string `"nan"`, the infinities `"inf"` and
//! `"-inf"`. Reading also takes `"+inf"`, `"infinity"` and `"-infinity"` in any case, and `null` for NaN where the
//! field always has a value (serde_json writes a non-finite `f64` as `null`).

use serde::Serializer;
use serde::de::{self, Deserializer, Visitor};

/// The schema's word for a non-finite value.
pub fn word(value: f64) -> &'static str {
    if value.is_nan() {
        "nan"
    } else if value > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// The words [`from_word`] reads, as a JSON Schema pattern: ECMA-262 has no inline flag for "any case".
const WORD_PATTERN: &str = "^(?:[Nn][Aa][Nn]|[+-]?[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)$";

fn from_word(word: &str) -> Option<f64> {
    match word.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// Reads a number, a word for a non-finite one, or (as `None`) null.
struct NumberOrWord;

impl<'de> Visitor<'de> for NumberOrWord {
    type Value = Option<f64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a number, or \"nan\", \"inf\" or \"-inf\"")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        from_word(v)
            .map(Some)
            .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// What [`number`] and [`optional`] read, as a JSON Schema: `#[schemars(schema_with = "nonfinite::schema")]` beside
/// either.
pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A finite number, or \"nan\", \"inf\" or \"-inf\" (\"+inf\", \"infinity\" and \"-infinity\" \
            are read too, in any case) for one that is not; null is NaN where the field always has a value.",
        "anyOf": [
            {"type": "number"},
            {"type": "string", "pattern": WORD_PATTERN},
            {"type": "null"}
        ]
    })
}

/// An `f64` field that is always present: `#[serde(with = "nonfinite::number")]`.
pub mod number {
    use super::*;

    pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            s.serialize_f64(*value)
        } else {
            s.serialize_str(word(*value))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(d.deserialize_any(NumberOrWord)?.unwrap_or(f64::NAN))
    }
}

/// An `Option<f64>` field, `null` when there is no value: `#[serde(default, with = "nonfinite::optional")]`.
pub mod optional {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => number::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_option(NumberOrWord)
    }
}

/// A map of names to numbers: `#[serde(with = "nonfinite::values")]`.
pub mod values {
    use super::*;
    use serde::ser::SerializeMap;
    use std::collections::BTreeMap;

    /// One value of the map, read and written the way [`number`] does.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Value(#[serde(with = "super::number")] f64);

    pub fn serialize<S: Serializer>(map: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(map.len()))?;
        for (name, value) in map {
            out.serialize_entry(name, &Value(*value))?;
        }
        out.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let map: BTreeMap<String, Value> = serde::Deserialize::deserialize(d)?;
        Ok(map.into_iter().map(|(k, Value(v))| (k, v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug)]
    struct Both {
        #[serde(with = "super::number")]
        loss: f64,
        #[serde(default, with = "super::optional")]
        eval_loss: Option<f64>,
    }

    fn read(json: &str) -> Both {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn finite_values_are_numbers_and_the_rest_are_words_both_ways() {
        for (value, json) in [
            (2.5, "2.5"),
            (f64::NAN, "\"nan\""),
            (f64::INFINITY, "\"inf\""),
            (f64::NEG_INFINITY, "\"-inf\""),
        ] {
            let written = serde_json::to_string(&Both {
                loss: value,
                eval_loss: Some(value),
            })
            .unwrap();
            assert_eq!(written, format!("{{\"loss\":{json},\"eval_loss\":{json}}}"));
            let back = read(&written);
            for v in [back.loss, back.eval_loss.unwrap()] {
                assert!(v == value || (v.is_nan() && value.is_nan()), "{written}");
            }
        }
    }

    #[test]
    fn other_spellings_and_null_are_read() {
        assert_eq!(
            read(r#"{"loss":"Infinity","eval_loss":"-INF"}"#).loss,
            f64::INFINITY
        );
        assert_eq!(
            read(r#"{"loss":1,"eval_loss":"-infinity"}"#).eval_loss,
            Some(f64::NEG_INFINITY)
        );
        let null = read(r#"{"loss":null,"eval_loss":null}"#);
        assert!(null.loss.is_nan());
        assert_eq!(null.eval_loss, None);
        assert_eq!(read(r#"{"loss":3}"#).eval_loss, None);
    }

    #[test]
    fn a_map_of_numbers_says_which_are_not_finite() {
        #[derive(Serialize, Deserialize)]
        struct Scalars(#[serde(with = "super::values")] std::collections::BTreeMap<String, f64>);
        let map = Scalars([("loss".to_string(), f64::NAN), ("lr".to_string(), 0.1)].into());
        let written = serde_json::to_string(&map).unwrap();
        assert_eq!(written, r#"{"loss":"nan","lr":0.1}"#);
        let back: Scalars = serde_json::from_str(&written).unwrap();
        assert!(back.0["loss"].is_nan());
        assert_eq!(back.0["lr"], 0.1);
    }

    #[test]
    fn other_text_is_refused() {
        for json in [r#"{"loss":"lots"}"#, r#"{"loss":true}"#, r#"{"loss":[1]}"#] {
            assert!(serde_json::from_str::<Both>(json).is_err(), "{json}");
        }
    }
}
