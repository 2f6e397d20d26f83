//! The JSON Schemas of the two event streams the monitor reads from outside Rust: a worker's event lines
//! ([`WorkerEvent`]) and what a `--cmd` worker's processes say on its socket ([`ScriptEvent`], golow's Python hook).
//! They are generated from the types that parse those lines and checked in under `protocol/schema/`, where the tests
//! of the Python worker and of the hook validate every event they emit: a field renamed on one side fails a test on
//! the other.
//!
//! The schemas are as strict as serde is, in one way stricter: every object refuses fields its type does not have
//! (`#[schemars(deny_unknown_fields)]` on each type that travels). The monitor ignores such a field, so that an
//! optional field a writer renamed would be lost without a word.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};

use crate::event::{ScriptEvent, WorkerEvent};

/// A stream's schema, and the file it is checked in as.
pub struct StreamSchema {
    /// Relative to this package's directory.
    pub file: &'static str,
    pub generate: fn() -> Schema,
}

pub const STREAMS: [StreamSchema; 2] = [
    StreamSchema {
        file: "schema/worker-event.schema.json",
        generate: worker_event,
    },
    StreamSchema {
        file: "schema/script-event.schema.json",
        generate: script_event,
    },
];

/// A worker's event lines, on its event descriptor: any [`WorkerEvent`].
pub fn worker_event() -> Schema {
    schema_for::<WorkerEvent>()
}

/// What a `--cmd` worker's processes say on its socket: the [`ScriptEvent`]s alone.
pub fn script_event() -> Schema {
    schema_for::<ScriptEvent>()
}

/// What the monitor reads (serde's `Deserialize`, which takes a non-finite number's other spellings too), in the
/// draft the Python tests validate with.
fn schema_for<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Record, parse_worker_line};
    use crate::samples::every_body;
    use serde_json::{Value, json};

    /// Set to rewrite the checked-in schemas from the types.
    const BLESS_ENV: &str = "GOLOW_BLESS_SCHEMA";

    fn validator(schema: fn() -> Schema) -> jsonschema::Validator {
        jsonschema::draft202012::new(schema().as_value()).unwrap()
    }

    /// Every sample body as a worker would write it: the record without the fields the monitor stamps.
    fn sample_lines() -> Vec<Value> {
        every_body()
            .into_iter()
            .map(|body| {
                let mut line = serde_json::to_value(Record::new(0.0, None, body)).unwrap();
                let fields = line.as_object_mut().unwrap();
                fields.remove("v");
                fields.remove("t_ms");
                line
            })
            .collect()
    }

    fn parses(line: &Value) -> bool {
        parse_worker_line(&line.to_string()).is_ok()
    }

    fn parses_from_a_script_process(line: &Value) -> bool {
        parse_worker_line(&line.to_string()).is_ok_and(|event| event.from_script_process(1).is_ok())
    }

    #[test]
    fn the_checked_in_schemas_are_the_generated_ones() {
        let bless = std::env::var_os(BLESS_ENV).is_some();
        for StreamSchema { file, generate } in STREAMS {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
            let generated = generate();
            if bless {
                let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text).unwrap();
                continue;
            }
            let checked_in: Option<Value> = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok());
            assert!(
                checked_in.as_ref() == Some(generated.as_value()),
                "{} is not the schema of the types in protocol/src/: if they changed as meant, write it again with \
                 {BLESS_ENV}=1 cargo test -p golow-protocol schema, and check it in",
                path.display()
            );
        }
    }

    #[test]
    fn each_schema_takes_exactly_the_sample_events_its_stream_takes() {
        let (worker, script) = (validator(worker_event), validator(script_event));
        let lines = sample_lines();
        for line in &lines {
            assert_eq!(worker.is_valid(line), parses(line), "{line}");
            assert_eq!(
                script.is_valid(line),
                parses_from_a_script_process(line),
                "{line}"
            );
        }
        let kinds = |taken: &dyn Fn(&Value) -> bool| {
            let kinds: std::collections::BTreeSet<_> = lines
                .iter()
                .filter(|l| taken(l))
                .map(|l| l["type"].to_string())
                .collect();
            kinds.len()
        };
        assert_eq!(kinds(&parses), 16, "a sample of every worker event");
        assert_eq!(
            kinds(&parses_from_a_script_process),
            9,
            "a sample of every script event"
        );
    }

    #[test]
    fn non_finite_numbers_are_taken_as_the_parser_takes_them() {
        let worker = validator(worker_event);
        let spellings = [
            json!(2.25),
            json!(3),
            json!(-1e300),
            json!("nan"),
            json!("NaN"),
            json!("inf"),
            json!("+inf"),
            json!("-inf"),
            json!("Infinity"),
            json!("+INFINITY"),
            json!("-infinity"),
            json!(null),
            json!("+nan"),
            json!("-nan"),
            json!("infinit"),
            json!(" inf"),
            json!("inf\n"),
            json!("lots"),
            json!(""),
            json!(true),
            json!([1]),
            json!({}),
        ];
        let step = json!({"type": "step", "step": 0, "epoch": 0, "phase": "train", "batch_size": 4, "data_ms": 0.1,
                          "h2d_ms": null, "h2d_bytes": null, "compute_ms": 5.0, "correct": 1, "warmup": true});
        let epoch = json!({"type": "epoch", "epoch": 0, "complete": true, "train_accuracy": 0.5,
                           "eval_accuracy": null});
        let mut taken = 0;
        for value in spellings {
            for (mut line, field) in [(step.clone(), "loss"), (epoch.clone(), "train_loss")] {
                line[field] = value.clone();
                assert_eq!(worker.is_valid(&line), parses(&line), "{line}");
                taken += usize::from(parses(&line));
            }
        }
        assert_eq!(taken, 2 * 12, "numbers, the words in any case, and null");
        let mut without_loss = step;
        without_loss.as_object_mut().unwrap().remove("loss");
        assert!(!parses(&without_loss) && !worker.is_valid(&without_loss));
        assert!(
            parses(&epoch) && worker.is_valid(&epoch),
            "an epoch's losses may be left out"
        );
    }

    #[test]
    fn what_the_monitor_stamps_or_defaults_may_be_left_out() {
        let script = validator(script_event);
        let step = json!({"type": "optimizer_step", "step": 0, "interval_ms": null});
        assert!(parses_from_a_script_process(&step) && script.is_valid(&step));
        for (field, value) in [("optimizer", json!(0)), ("process", json!(7))] {
            let mut with = step.clone();
            with[field] = value;
            assert!(script.is_valid(&with), "{with}");
        }
    }

    #[test]
    fn a_field_the_monitor_would_ignore_is_refused() {
        let script = validator(script_event);
        let mut renamed = json!({"type": "optimizer_step", "step": 0, "interval_ms": null});
        renamed["interval"] = renamed
            .as_object_mut()
            .unwrap()
            .remove("interval_ms")
            .unwrap();
        assert!(parses_from_a_script_process(&renamed), "serde ignores it");
        assert!(!script.is_valid(&renamed), "the schema does not: {renamed}");
    }

    #[test]
    fn neither_stream_may_forge_a_monitor_event() {
        let forged = json!({"type": "worker_exited", "exit_code": 0, "signal": null, "stop_requested": false});
        assert!(!parses(&forged));
        assert!(!validator(worker_event).is_valid(&forged));
        assert!(!validator(script_event).is_valid(&forged));
    }
}
