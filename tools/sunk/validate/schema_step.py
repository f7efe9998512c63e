"""Step 2: the coalesced values against the chart's values.schema.json — every error, in
plain words, at the file and line that set the key."""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from pathlib import Path as FsPath
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError, ValidationError

from sunk.errors import ToolError
from sunk.models.words import PATTERN_WORDS, kind_of, show, type_words
from sunk.validate.coalesce import Coalesced
from sunk.validate.findings import SCHEMA, Finding, Severity
from sunk.validate.paths import dotted
from sunk.validate.yamlload import Path


@cache
def load_schema(schema_file: str) -> dict[str, Any]:
    return json.loads(FsPath(schema_file).read_text())


@cache
def _validator(schema_file: str) -> Draft7Validator:
    # No check_schema(): it costs more than validating (the file is generated and
    # `sunkctl schema --check` guards it); a broken schema surfaces as a ToolError below.
    try:
        return Draft7Validator(load_schema(schema_file))
    except (OSError, ValueError) as exc:
        raise ToolError(f"{schema_file}: unreadable values schema ({exc})") from exc


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return kind
    if isinstance(kind, str):
        return [kind]
    if "enum" in schema:
        return []
    return []


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


class _Translator:
    """jsonschema errors → (path, message, hint) in plain words."""

    def translate(self, error: ValidationError) -> list[tuple[Path, str, str | None]]:
        path: Path = tuple(error.absolute_path)
        if "propertyNames" in error.absolute_schema_path and isinstance(error.instance, str):
            # A bad map key: point at the key itself (jsonschema reports the map).
            return self._key(error, path)
        validator = error.validator
        schema = error.schema if isinstance(error.schema, dict) else {}
        value = error.instance
        if validator == "additionalProperties" and isinstance(value, dict):
            known = list(schema.get("properties", {}))
            patterns = schema.get("patternProperties", {})
            out = []
            for key in value:
                if key in known or any(_re_match(p, key) for p in patterns):
                    continue
                out.append(
                    (
                        (*path, key),
                        f"unknown key `{key}`{_suggest(key, known)}",
                        f"allowed keys here: {', '.join(known)}" if known else None,
                    )
                )
            return out or [(path, error.message, None)]
        if validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else "?"
            return [(path, f"missing required key `{missing}`", None)]
        if validator == "type":
            expected = type_words(_types(schema))
            return [(path, f"must be {expected}, not {kind_of(value)} ({show(value)})", None)]
        if validator == "enum":
            options = schema.get("enum", [])
            shown = ", ".join(show(o) for o in options)
            extra = _suggest(str(value), [str(o) for o in options if o is not None])
            return [(path, f"must be one of {shown}; got {show(value)}{extra}", None)]
        if validator == "const":
            return [(path, f"must be {show(schema.get('const'))}; got {show(value)}", None)]
        if validator == "pattern":
            pattern = schema.get("pattern", "")
            words = PATTERN_WORDS.get(pattern, f"text matching `{pattern}`")
            return [(path, f"{show(value)} is not {words}", None)]
        if validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            bound = schema.get(validator)
            op = {
                "minimum": "at least",
                "exclusiveMinimum": "more than",
                "maximum": "at most",
                "exclusiveMaximum": "less than",
            }[validator]
            return [(path, f"must be {op} {bound}; got {show(value)}", None)]
        if validator in ("minLength", "maxLength"):
            bound = schema.get(validator)
            op = "at least" if validator == "minLength" else "at most"
            return [(path, f"must be {op} {bound} characters long; got {show(value)}", None)]
        if validator in ("minItems", "maxItems"):
            bound = schema.get(validator)
            op = "at least" if validator == "minItems" else "at most"
            return [(path, f"must have {op} {bound} item(s); got {len(value)}", None)]
        if validator in ("anyOf", "oneOf"):
            return self._union(error, path, value)
        return [(path, error.message, None)]

    def _key(self, error: ValidationError, path: Path) -> list[tuple[Path, str, str | None]]:
        key = error.instance
        if error.validator == "pattern":
            pattern = error.schema.get("pattern", "") if isinstance(error.schema, dict) else ""
            words = PATTERN_WORDS.get(pattern, f"text matching `{pattern}`")
            return [((*path, key), f"key {show(key)} is not {words}", None)]
        return [((*path, key), f"key {show(key)}: {error.message}", None)]

    def _union(
        self, error: ValidationError, path: Path, value: Any
    ) -> list[tuple[Path, str, str | None]]:
        branches: dict[int, list[ValidationError]] = {}
        for sub in error.context or []:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        options = error.schema.get(error.validator, []) if isinstance(error.schema, dict) else []
        # Branches whose type the value has: their errors are the real complaint.
        matching = []
        for errors in branches.values():
            if not any(e.validator == "type" and not e.relative_path for e in errors):
                matching.append(errors)
        if len(matching) == 1:
            out = []
            for sub in matching[0]:
                out.extend(self.translate(sub))
            return out
        types: list[str] = []
        for option in options:
            if isinstance(option, dict):
                types.extend(_types(option))
                if "enum" in option:
                    types.extend(show(v) for v in option["enum"])
        if types:
            return [
                (path, f"must be {type_words(types)}, not {kind_of(value)} ({show(value)})", None)
            ]
        return [(path, f"{show(value)} is not valid here", None)]


def _re_match(pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return False


def check_values(coalesced: Coalesced, schema_file: str) -> list[Finding]:
    """Every schema error in the coalesced values, located in the file that set the key."""
    validator = _validator(schema_file)
    translator = _Translator()
    findings = []
    seen: set[tuple[str, str]] = set()
    try:
        errors = sorted(
            validator.iter_errors(coalesced.values), key=lambda e: list(map(str, e.path))
        )
    except (SchemaError, LookupError, TypeError, re.error) as exc:
        raise ToolError(
            f"{schema_file}: broken values schema ({exc}); run `sunkctl schema`"
        ) from exc
    for error in errors:
        for path, message, hint in translator.translate(error):
            key = dotted(path) or "(root)"
            if (key, message) in seen:
                continue
            seen.add((key, message))
            file, line, column = coalesced.locate(path)
            findings.append(
                Finding(
                    SCHEMA, Severity.ERROR, f"{key}: {message}", file, line, column, key, None, hint
                )
            )
    return findings
