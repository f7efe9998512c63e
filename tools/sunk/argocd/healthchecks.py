"""The Lua health checks and diff customisations shipped in the ``argocd-cm`` patch.

Scripts live next to this module as ``health/<group>_<Kind>.lua`` (Argo CD's key suffix) and
are loaded as package data.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

NODESET_KEY = "sunk.coreweave.com_NodeSet"
SLURMCLUSTER_KEY = "sunk.coreweave.com_SlurmCluster"
APPLICATION_KEY = "argoproj.io_Application"


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
    return resources.files("sunk.argocd").joinpath("health", f"{key}.lua").read_text("utf-8")
