"""The Lua health checks and diff customisations shipped in the ``argocd-cm`` patch.

Scripts live next to this module as ``health/<group>_<Kind>.lua`` (Argo CD's key suffix) and
are loaded as package data. The SUNK kinds' scripts are templates: the line ``--@REASONS@``
becomes the table of condition reasons and their health, generated from
``sunk.models.conditions`` (the declaration the operator writes its conditions from).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from sunk.models import conditions

NODESET_KEY = "sunk.coreweave.com_NodeSet"
SLURMCLUSTER_KEY = "sunk.coreweave.com_SlurmCluster"
APPLICATION_KEY = "argoproj.io_Application"


REASONS_MARKER = "--@REASONS@"


@dataclass(frozen=True)
class HealthCheck:
    key: str  # <group>_<Kind>
    needs_open_libs: bool  # uses the Lua string library

    @property
    def script(self) -> str:
        return load_script(self.key)


# Order is the order of keys in argocd-cm.
HEALTH_CHECKS: tuple[HealthCheck, ...] = (
    HealthCheck(APPLICATION_KEY, needs_open_libs=False),
    HealthCheck(NODESET_KEY, needs_open_libs=True),
    HealthCheck(SLURMCLUSTER_KEY, needs_open_libs=True),
)

# Argo CD diffs these NodeSet fields as the named built-in type, like a Deployment's pod spec.
KNOWN_TYPE_FIELDS: dict[str, list[dict[str, str]]] = {
    NODESET_KEY: [{"field": "spec.template.spec", "type": "core/v1/PodSpec"}],
}


def load_script(key: str) -> str:
    """The script as shipped: the template with its reason table filled in."""
    template = load_template(key)
    kind = key.split("_", 1)[1]
    if REASONS_MARKER not in template:
        return template
    return template.replace(REASONS_MARKER, reason_table(kind).rstrip("\n"))


def load_template(key: str) -> str:
    return resources.files("sunk.argocd").joinpath("health", f"{key}.lua").read_text("utf-8")


def reason_table(kind: str) -> str:
    """Lua tables ``reasons`` (exact reason -> health) and ``reasonFamilies`` (suffix ->
    health) for the reasons declared on ``kind``."""
    exact = [r for r in conditions.reasons_for(kind) if not r.family]
    families = [r for r in conditions.reasons_for(kind) if r.family]

    def table(name: str, rows: list[conditions.Reason]) -> list[str]:
        if not rows:
            return [f"local {name} = {{}}"]
        body = [f'  ["{r.name}"] = "{r.health}", -- {r.meaning}' for r in rows]
        return [f"local {name} = {{", *body, "}"]

    lines = [
        "-- generated from sunk.models.conditions: reason -> health",
        *table("reasons", exact),
        *table("reasonFamilies", families),
    ]
    return "\n".join(lines) + "\n"
