"""Turn pydantic's JSON Schema into the two dialects we publish.

``values``  draft-07, self-contained (refs inlined), strict (unknown keys rejected) except
            where a model is open; Helm validates the coalesced values with it.
``crd``     a structural OpenAPI v3 schema for a CustomResourceDefinition: no refs, no
            unions, ``nullable`` instead of null types, ``x-kubernetes-*`` extensions, no
            defaults (so server-side apply never reports drift on fields Git omits).
"""

from __future__ import annotations

from typing import Any, Literal

from sunk.models.base import PERCENT, QUANTITY_PATTERN

Dialect = Literal["values", "crd"]
_NULL = {"type": "null"}
_DROP = {"title"}
_PERCENT = PERCENT
# The only anyOf a structural schema allows: exactly Kubernetes' IntOrString (no patterns
# inside — the apiserver rejects them; the values schema and our models check formats).
_CRD_INT_OR_STRING = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}


def convert(schema: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    defs = schema.get("$defs", {})
    return _Converter(defs, dialect).node(schema)


class _Converter:
    def __init__(self, defs: dict[str, Any], dialect: Dialect):
        self.defs = defs
        self.dialect = dialect

    def node(self, node: dict[str, Any]) -> dict[str, Any]:
        node = dict(node)
        node.pop("$defs", None)
        if "$ref" in node:
            target = self.defs[node.pop("$ref").rsplit("/", 1)[-1]]
            merged = {**target, **node}  # siblings (description, default) win
            return self.node(merged)
        if node.get("x-open"):
            return self._open(node)
        if node.get("x-quantity"):
            return self._annotate(self._quantity(), node)
        if node.get("x-int-or-string"):
            return self._annotate(self._int_or_string(), node)
        if "anyOf" in node:
            return self._union(node)
        node = _key_pattern_map(node)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP or key.startswith("x-"):
                continue
            if key == "properties":
                out[key] = {name: self.node(sub) for name, sub in value.items()}
            elif key == "items":
                out[key] = self.node(value)
            elif key == "additionalProperties":
                out[key] = self._additional(value, node)
            elif key == "propertyNames" and self.dialect == "crd":
                continue  # not structural: a CEL rule below says the same
            elif key == "default" and (self.dialect == "crd" or value is None):
                continue
            elif key == "description":
                out[key] = value.split("\n\n")[0].replace("\n", " ")
            else:
                out[key] = value
        if self.dialect == "crd":
            self._crd_object(out, node)
        return self._extensions(out, node)

    # -- pieces ---------------------------------------------------------------------------

    def _annotate(self, out: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        if "description" in node:
            out["description"] = node["description"].split("\n\n")[0].replace("\n", " ")
        if node.get("default") is not None and self.dialect == "values":
            out["default"] = node["default"]
        return self._extensions(out, node)

    def _extensions(self, out: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        if self.dialect == "crd":
            rules = list(node.get("x-cel", []))
            if node.get("x-immutable"):
                rules.append({"rule": "self == oldSelf", "message": "is immutable"})
            if rules:
                out["x-kubernetes-validations"] = rules
            if node.get("x-list-map-keys"):
                out["x-kubernetes-list-type"] = "map"
                out["x-kubernetes-list-map-keys"] = node["x-list-map-keys"]
        return out

    def _open(self, node: dict[str, Any]) -> dict[str, Any]:
        inner = dict(node)
        for key in ("x-open", "anyOf"):
            inner.pop(key, None)
        kinds = [s for s in node.get("anyOf", [node]) if s != _NULL]
        is_array = any(s.get("type") == "array" for s in kinds)
        obj: dict[str, Any] = {"type": "object"}
        if self.dialect == "crd":
            obj["x-kubernetes-preserve-unknown-fields"] = True
        out: dict[str, Any] = {"type": "array", "items": obj} if is_array else dict(obj)
        out = self._annotate(out, inner)
        if self.dialect == "values" and any(s == _NULL for s in node.get("anyOf", [])):
            out = self._nullable(out)
        if self.dialect == "crd" and "default" in out:
            del out["default"]
        return out

    def _quantity(self) -> dict[str, Any]:
        if self.dialect == "crd":
            return dict(_CRD_INT_OR_STRING)
        return {
            "anyOf": [
                {"type": "string", "pattern": QUANTITY_PATTERN},
                {"type": "number", "minimum": 0},
            ]
        }

    def _int_or_string(self) -> dict[str, Any]:
        if self.dialect == "crd":
            return dict(_CRD_INT_OR_STRING)
        return {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": _PERCENT}]
        }

    def _union(self, node: dict[str, Any]) -> dict[str, Any]:
        options = node["anyOf"]
        non_null = [s for s in options if s != _NULL]
        nullable = len(non_null) != len(options)
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(non_null) == 1:
            inner = self.node({**non_null[0], **rest})
        elif self.dialect == "crd":
            # A free scalar-or-list value (slurm.conf passthrough) or int-or-string.
            types = {s.get("type") for s in non_null}
            if types <= {"integer", "string"}:
                # No pattern inside an int-or-string, and a CEL rule over map keys or
                # int-or-string text exceeds the API server's cost budget (unbounded keys):
                # such values are refused by the operator's renderer (sunk.slurmconf.guard).
                inner = self._annotate({"x-kubernetes-int-or-string": True}, rest)
            else:
                inner = self._annotate({"x-kubernetes-preserve-unknown-fields": True}, rest)
        else:
            inner = self._annotate({"anyOf": [self.node(s) for s in non_null]}, rest)
        if nullable:
            return self._nullable(inner)
        return inner

    def _nullable(self, out: dict[str, Any]) -> dict[str, Any]:
        if self.dialect == "crd":
            out["nullable"] = True
            return out
        kind = out.get("type")
        if isinstance(kind, str) and "enum" not in out:
            out["type"] = [kind, "null"]
            return out
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
            out.pop("type", None)
            return out
        meta = {k: out.pop(k) for k in ("description", "default") if k in out}
        return {"anyOf": [out, _NULL], **meta}

    def _additional(self, value: Any, node: dict[str, Any]) -> Any:
        if isinstance(value, bool):
            return value
        return self.node(value)

    def _crd_object(self, out: dict[str, Any], node: dict[str, Any]) -> None:
        """Structural schemas: properties and additionalProperties are exclusive; no `false`."""
        extra = out.get("additionalProperties")
        if extra is False:
            del out["additionalProperties"]
        elif ("properties" in out and extra is not None) or extra is True:
            del out["additionalProperties"]
            out["x-kubernetes-preserve-unknown-fields"] = True


def _key_pattern_map(node: dict[str, Any]) -> dict[str, Any]:
    """pydantic writes ``dict[Annotated[str, pattern], V]`` as patternProperties, which lets
    other keys through and is not structural: make it propertyNames + additionalProperties."""
    patterns = node.get("patternProperties")
    if not isinstance(patterns, dict) or len(patterns) != 1 or "properties" in node:
        return node
    node = dict(node)
    ((pattern, value),) = node.pop("patternProperties").items()
    node["propertyNames"] = {**node.get("propertyNames", {}), "pattern": pattern}
    node["additionalProperties"] = value
    return node
