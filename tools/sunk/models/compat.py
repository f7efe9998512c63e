"""Which operator a slurm chart's objects need. The slurm chart stamps its Chart.yaml
requirement (``sunk.coreweave.com/requires-operator: ">= 0.1.0"``) on the SlurmCluster and
NodeSets it renders; an operator older than that leaves them as they are and says so, so a
slurm chart upgraded before the sunk chart is caught instead of half-applied by an operator
that does not know its fields. Versions are ``MAJOR.MINOR.PATCH`` (a pre-release suffix is
ignored); a requirement is comma-separated clauses of ``>=``, ``>``, ``<=``, ``<``, ``==``,
``!=``."""

from __future__ import annotations

import operator
import re

from sunk.models.crds import GROUP

REQUIRES_OPERATOR = f"{GROUP}/requires-operator"
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*v?(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.-]*)?\s*$")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")
_OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
        ">": operator.gt, "<": operator.lt}  # fmt: skip
MAX_LENGTH = 200


def requirement_problem(requirement: object, version: str) -> str | None:
    """Why an operator at ``version`` does not meet ``requirement``, or None when it does."""
    if not isinstance(requirement, str) or len(requirement) > MAX_LENGTH:
        return f"{REQUIRES_OPERATOR} is not a version requirement"
    found = _VERSION.match(version)
    if found is None:  # a development build names no version: it takes what it is given
        return None
    have = tuple(int(part) for part in found.groups())
    for clause in requirement.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            return (
                f"{REQUIRES_OPERATOR}: {clause.strip()!r} is not a requirement such as '>= 0.1.0'"
            )
        op, *want = match.groups()
        if not _OPS[op](have, tuple(int(part) for part in want)):
            return (
                f"this object comes from a slurm chart that needs operator {requirement.strip()} "
                f"({REQUIRES_OPERATOR}); the operator runs {version}: upgrade the sunk chart "
                "first. Nothing is changed until then"
            )
    return None


def operator_too_old(metadata: dict, version: str | None = None) -> str | None:
    """Why this operator must leave the object alone (its requirement annotation), or None."""
    if version is None:
        from sunk import __version__ as version  # the operator's own
    annotations = metadata.get("annotations") or {}
    if REQUIRES_OPERATOR not in annotations:
        return None
    return requirement_problem(annotations[REQUIRES_OPERATOR], version)
