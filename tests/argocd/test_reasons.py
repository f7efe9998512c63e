"""Every condition reason the operator can write has a health meaning, and the shipped Argo CD
health checks give exactly that meaning (the tables in the scripts are generated from
``sunk.models.conditions``; these tests prove the scripts read them the right way)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from sunk.argocd import healthchecks
from sunk.models import conditions as reasons
from sunk.operator import conditions
from tests.argocd.luarun import run_check

pytestmark = pytest.mark.unit

OPERATOR = Path(conditions.__file__).parent
KEYS = {
    reasons.NODESET: healthchecks.NODESET_KEY,
    reasons.SLURMCLUSTER: healthchecks.SLURMCLUSTER_KEY,
}
# A member of each family, as the operator writes it (the kinds it applies).
FAMILY_PREFIXES = ("StatefulSet", "Deployment", "Service", "ConfigMap", "Secret", "MySQLCluster")


def _written(reason: reasons.Reason) -> list[str]:
    return [reason.text(p) for p in FAMILY_PREFIXES] if reason.family else [reason.text()]


def _healthy_status(kind: str) -> dict[str, Any]:
    if kind == reasons.NODESET:
        return {"desiredNumberScheduled": 2, "numberFeasible": 2, "numberReady": 2}
    return {}


def _object(kind: str, condition: dict[str, Any], generation: int = 3) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "reason": "AllPodsReady"}
    if kind == reasons.SLURMCLUSTER:
        ready["reason"] = "AllComponentsReady"
    conds = [condition] if condition["type"] == "Ready" else [ready, condition]
    return {
        "apiVersion": "sunk.coreweave.com/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
        "status": {**_healthy_status(kind), "observedGeneration": generation, "conditions": conds},
    }


def _cases() -> list[Any]:
    out = []
    for kind in KEYS:
        for reason in reasons.reasons_for(kind):
            for text in _written(reason):
                out.append(pytest.param(kind, reason, text, id=f"{kind}-{text}"))
    return out


@pytest.mark.parametrize(("kind", "reason", "text"), _cases())
@pytest.mark.parametrize("ctype", ["Ready", "Degraded"])
def test_every_declared_reason_gets_its_health(
    kind: str, reason: reasons.Reason, text: str, ctype: str
) -> None:
    ok = reason.health is reasons.Health.HEALTHY
    if ctype == "Degraded":
        ok = not ok
    cond = {"type": ctype, "status": "True" if ok else "False", "reason": text, "message": "m"}
    result = run_check(KEYS[kind], _object(kind, cond))
    assert result["status"] == str(reason.health), result
    if reason.health is not reasons.Health.HEALTHY:
        assert f"({text})" in result["message"]


def test_undeclared_reason_is_not_trusted() -> None:
    cond = {"type": "Degraded", "status": "True", "reason": "SomethingNew", "message": "m"}
    assert run_check(healthchecks.NODESET_KEY, _object(reasons.NODESET, cond))["status"] == (
        "Degraded"
    )
    assert reasons.health_of(reasons.NODESET, "SomethingNew") is None


def test_generation_not_observed_beats_a_stale_degraded_reason() -> None:
    obj = _object(reasons.NODESET, {"type": "Ready", "status": "False", "reason": "InvalidSpec"})
    obj["metadata"]["generation"] = 4
    assert run_check(healthchecks.NODESET_KEY, obj)["status"] == "Progressing"


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_scripts_carry_the_generated_table(kind: str) -> None:
    script = healthchecks.load_script(KEYS[kind])
    assert healthchecks.REASONS_MARKER not in script
    for reason in reasons.reasons_for(kind):
        assert f'["{reason.name}"] = "{reason.health}"' in script
    assert healthchecks.REASONS_MARKER in healthchecks.load_template(KEYS[kind])


def test_reason_names_are_plain_words() -> None:
    names = [r.name for r in reasons.REASONS]
    assert len(names) == len(set(names))
    assert all(n.isalpha() and n[0].isupper() for n in names), names


def test_operator_refuses_an_undeclared_reason() -> None:
    with pytest.raises(TypeError, match="undeclared condition reason"):
        conditions.condition("Ready", False, "BrandNew")  # type: ignore[arg-type]
    assert (
        conditions.condition("Degraded", True, reasons.APPLY_FAILED, "x", prefix="Service")[
            "reason"
        ]
        == "ServiceApplyFailed"
    )


def _condition_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(OPERATOR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "condition"
            ):
                calls.append((str(path.relative_to(OPERATOR)), node))
    return calls


def test_operator_writes_reasons_only_from_the_declaration() -> None:
    """Every condition(...) in the operator names its reason through sunk.models.conditions
    (a constant like ``reasons.INVALID_SPEC`` or a local chosen from them), never a string."""
    calls = _condition_calls()
    assert len(calls) >= 10, calls
    for where, call in calls:
        reason = call.args[2]
        assert not isinstance(reason, (ast.Constant, ast.JoinedStr)), where
        used = {n.attr for n in ast.walk(reason) if isinstance(n, ast.Attribute)} | {
            n.id for n in ast.walk(reason) if isinstance(n, ast.Name)
        }
        declared = {
            name for name, value in vars(reasons).items() if isinstance(value, reasons.Reason)
        }
        assert used & declared or used == {"reason"}, (where, used)
