"""Input errors in plain words, the same for `sunkctl validate` and the operator.

validate checks values against the generated JSON schema; the operator checks a SlurmCluster
or NodeSet against the typed models the schema comes from. Both explain a refused pattern with
``PATTERN_WORDS``, and ``spec_problems`` turns pydantic's errors into validate's shape (one
``path: reason`` line each, without pydantic's union branches or documentation links), so a
user who applied a spec straight to the API server reads what validate would have said."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from sunk.models.base import (
    CONF_KEY,
    CONF_VALUE,
    CONF_WORD,
    CPU_COUNT,
    FEATURE,
    FEATURE_PREFIX,
    HOST,
    QUANTITY_PATTERN,
)

PATTERN_WORDS = {
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a DNS label (lowercase letters, digits and '-', "
    "starting and ending with a letter or digit)",
    "^([a-zA-Z0-9_]+:)?[0-9]+$": "a GPU GRES `type:count` such as `h100:8`, or a count",
    "^[0-9]+%$": "a percentage such as `10%`",
    CPU_COUNT: "a whole number from 1 to 65535 (a number, or quoted as SUNK writes it)",
    "^sha256:[a-f0-9]{64}$": "a digest `sha256:<64 hex digits>`",
    "^[A-Za-z0-9_.-]+$": "a name of letters, digits, '_', '.' and '-'",
    QUANTITY_PATTERN: "a Kubernetes quantity such as 500m, 4Gi or 8 (at most 30 digits, a "
    "two-digit exponent)",
    CONF_KEY: "a Slurm key (letters, digits and '_', starting with a letter; no space or '=')",
    CONF_VALUE: "a safe Slurm value: no line break (CR/LF), '#', '\"', '\\' or other control "
    "character, which would change the structure of the Slurm file",
    CONF_WORD: "a single word safe in a Slurm file: no space, line break (CR/LF), '#', '\"', "
    "'\\' or other control character, which would change the structure of the Slurm file",
    FEATURE: "a Slurm feature name (letters, digits and '_', '.', ':', '+', '-')",
    FEATURE_PREFIX: "a Slurm feature prefix (letters, digits and '_', '.', ':', '+', '-')",
    HOST: "a host name or address (letters, digits and '_', '.', ':', '-', '[', ']')",
}
TYPE_WORDS = {
    "object": "a map",
    "array": "a list",
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
# pydantic's type errors, as JSON schema types.
_PYDANTIC_TYPES = {
    "int_parsing": "integer", "int_type": "integer", "int_from_float": "integer",
    "float_parsing": "number", "float_type": "number", "bool_parsing": "boolean",
    "bool_type": "boolean", "string_type": "string", "list_type": "array",
    "dict_type": "object", "model_type": "object", "model_attributes_type": "object",
    "none_required": "null",
}  # fmt: skip
# Where pydantic names the member of a union (or a validator) it tried, not a field.
_BRANCH = re.compile(
    r"^(constrained-\w+|str|int|float|bool|none|list\[.*\]|dict\[.*\]|"
    r"function-\w+\[.*\]|lax-\w+\[.*\]|json-or-python\[.*\]|nullable\[.*\]|tagged-union\[.*\])$"
)
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def show(value: Any, limit: int = 60) -> str:
    """A value as JSON, cut to ``limit`` characters (so a line break shows as ``\\n``)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: Any) -> str:
    """What a value is, in the words of ``TYPE_WORDS``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


def type_words(types: list[str]) -> str:
    """JSON schema types as "text, a whole number or a list"."""
    words = [TYPE_WORDS.get(t, t) for t in dict.fromkeys(types)]
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def field_path(loc: tuple[Any, ...]) -> str:
    """``slurmConfig.cgroupConfig["Bad\\nKey"]``, ``compute.partitions[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{show(part)}]"
    return out


def _reason(error: dict[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    value = error.get("input")
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        return f"{show(value)} is not {PATTERN_WORDS.get(pattern, f'text matching `{pattern}`')}"
    if kind == "value_error":
        return str(ctx.get("error") or error["msg"])
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    return f"{error['msg'][:1].lower()}{error['msg'][1:]} (got {show(value)})"


def spec_problems(exc: ValidationError) -> list[str]:
    """One ``path: reason`` line per refused field, in the order pydantic found them. The
    branches of a union are folded into their field: a pattern or value complaint wins over
    "not a number"-style type errors about the same value."""
    fields: dict[str, list[dict[str, Any]]] = {}
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        key_error = bool(loc) and loc[-1] == "[key]"
        if key_error:
            loc.pop()
        loc = [part for part in loc if not (isinstance(part, str) and _BRANCH.match(part))]
        # A refused map key: the map is the field, the key is in the reason.
        path = field_path(tuple(loc[:-1] if key_error else loc))
        fields.setdefault((path, key_error), []).append(error)
    lines = []
    for (path, key_error), errors in fields.items():
        prefix = "key " if key_error else ""
        useful = [e for e in errors if e["type"] not in _PYDANTIC_TYPES]
        if useful:
            reasons = "; ".join(dict.fromkeys(prefix + _reason(e) for e in useful))
        else:  # only "not a number"-style complaints: the types this field takes
            types = [_PYDANTIC_TYPES[e["type"]] for e in errors]
            value = errors[0].get("input")
            reasons = f"must be {type_words(types)}, not {kind_of(value)} ({show(value)})"
        lines.append(f"{path or '(spec)'}: {reasons}")
    return lines
