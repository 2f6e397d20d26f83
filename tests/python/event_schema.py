"""The schemas of golow's event streams, generated from the Rust types that read them (protocol/schema/; the
golow-protocol tests keep them current). The tests validate every event they see the Python worker or the step hook
write against its stream's schema, so that a field renamed on either side fails here."""

import json
import os

import jsonschema

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "protocol", "schema")

_validators = {}


def _strict_integers(validator_class):
    """The validator class with serde's integers: JSON Schema takes 2.0 for an integer, the monitor refuses it."""
    def is_integer(_, instance):
        return isinstance(instance, int) and not isinstance(instance, bool)

    return jsonschema.validators.extend(
        validator_class, type_checker=validator_class.TYPE_CHECKER.redefine("integer", is_integer))


def _validator(stream):
    if stream not in _validators:
        with open(os.path.join(SCHEMAS, f"{stream}.schema.json"), encoding="utf-8") as f:
            schema = json.load(f)
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        _validators[stream] = _strict_integers(validator_class)(schema)
    return _validators[stream]


def _check(stream, event):
    """`event` if it is valid on `stream`; else an AssertionError that says which field is wrong and how."""
    validator = _validator(stream)
    kinds = {variant["properties"]["type"]["const"]: variant for variant in validator.schema["oneOf"]}
    kind = event.get("type") if isinstance(event, dict) else None
    if kind not in kinds:
        raise AssertionError(f"{stream}: no event of type {kind!r} (known: {', '.join(sorted(kinds))}): {event}")
    # Against its own kind's schema alone: oneOf's message would only say that no kind fits.
    errors = validator.evolve(schema=kinds[kind]).iter_errors(event)
    errors = sorted(errors, key=lambda e: list(e.absolute_path))
    if errors:
        problems = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(event)'}: {e.message}" for e in errors)
        raise AssertionError(f"{stream}: invalid {kind} event: {problems}: {event}")
    return event


def worker_event(event):
    """`event`, a decoded line of a worker's event channel, once it is valid there."""
    return _check("worker-event", event)


def script_event(event):
    """`event`, a decoded line of a `--cmd` worker's socket, once it is valid there."""
    return _check("script-event", event)


def worker_line(line):
    """The event on one line of a worker's event channel, validated."""
    return worker_event(json.loads(line))


def script_line(line):
    """The event on one line of a `--cmd` worker's socket, validated."""
    return script_event(json.loads(line))
