"""Step 5b: the CRDs' CEL rules (`x-kubernetes-validations`) on the rendered SlurmClusters and
NodeSets, evaluated offline as the API server would: a values file whose custom resources the
API server would refuse fails here, in CI, and not at `helm upgrade` time.

Rules come from the CRDs `sunkctl schema` writes into the sunk chart (sunk.schema.crd, from
the models). Transition rules (those naming `oldSelf`, such as immutability) need the stored
object and are left to the API server. The evaluator is the `common-expression-language`
package (cel-rust), which has CEL's standard functions and macros (has, size, matches, all,
exists …); Kubernetes' own extension libraries (quantity, url, ip …) are not used by our rules.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from sunk.errors import ToolError
from sunk.resources import chart_dir
from sunk.validate.findings import Finding
from sunk.validate.k8s_step import object_finding, resource_of
from sunk.validate.paths import dotted

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Refusal:
    path: Path  # where in the object the rule sits
    message: str


def _spec_of(text: str) -> dict[str, Any]:
    """The `spec` of a CRD template as `sunkctl schema` writes it: only its metadata (labels
    from values) and the `crds.enabled` guard are templated, never a line under `spec:`."""
    lines = text.splitlines()
    start = lines.index("spec:")
    body = [line for line in lines[start:] if not line.startswith("{{")]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load("\n".join(body), Loader=loader)["spec"]


@cache
def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """Each CRD version's schema, read from the sunk chart's CRD templates (generated from the
    models and drift-checked: the same rules, without building them from the models anew,
    which took longer than the rest of a small file's checks)."""
    out = {}
    for path in sorted((chart_dir("sunk") / "templates" / "crds").glob("*.yaml")):
        spec = _spec_of(path.read_text())
        for version in spec["versions"]:
            api = f"{spec['group']}/{version['name']}"
            out[(api, spec["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    if not out:
        raise ToolError(f"no CRDs in {chart_dir('sunk') / 'templates' / 'crds'}")
    return out


@cache
def _program(rule: str) -> Any:
    # The package's __init__ imports its interactive shell (prompt_toolkit, a third of a
    # second); a placeholder for that one submodule keeps it out of sunkctl's start.
    sys.modules.setdefault("cel.cli", types.ModuleType("cel.cli"))
    try:
        import cel
    except ImportError as exc:  # a dependency of sunkctl: a broken install
        raise ToolError("the common-expression-language package (CEL) is not installed") from exc
    return cel.compile(rule)


def evaluate(rule: str, value: Any) -> bool | str:
    """True when the rule holds; False, or the evaluation error, when the API server would
    refuse the object."""
    try:
        return bool(_program(rule).execute({"self": value}))
    except Exception as exc:  # cel raises plain ValueError/RuntimeError
        return str(exc) or type(exc).__name__


def refusals(schema: dict[str, Any], value: Any, path: Path = ()) -> Iterator[Refusal]:
    """Every rule of ``schema`` (recursively) that ``value`` breaks."""
    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule.get("rule", "")
        if "oldSelf" in text:
            continue
        outcome = evaluate(text, value)
        if outcome is True:
            continue
        message = rule.get("message") or f"failed rule: {text}"
        if isinstance(outcome, str):
            message = f"{message} (the rule could not be evaluated: {outcome})"
        yield Refusal(path, message)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from refusals(sub, child, (*path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            yield from refusals(schema["items"], child, (*path, index))


def check_objects(objects: list[dict[str, Any]], display: str) -> list[Finding]:
    findings = []
    schemas = _schemas()
    for obj in objects:
        schema = schemas.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
        if schema is None:
            continue
        resource = resource_of(obj)
        for refusal in refusals(schema, obj):
            message = f"{refusal.message} (a CEL rule of the CRD: the API server would refuse it)"
            findings.append(object_finding(resource, dotted(refusal.path), message, display))
    return findings
