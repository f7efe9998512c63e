"""Upstream charts installed next to SUNK, pinned.

Versions chosen from the upstream release lists as known when this was written (cert-manager
v1.19.0; MOCO chart 0.26.0). Bump them here, deliberately, and regenerate;
``--cert-manager-version`` and ``--moco-version`` override them per run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpstreamChart:
    """A chart from a Helm repository (Argo CD ``source.chart``)."""

    name: str  # Application suffix and Helm release name
    repo_url: str
    chart: str
    version: str
    namespace: str
    values: tuple[tuple[str, object], ...] = ()  # top-level valuesObject entries, in order

    def with_version(self, version: str | None) -> UpstreamChart:
        if not version:
            return self
        return UpstreamChart(
            self.name, self.repo_url, self.chart, version, self.namespace, self.values
        )


CERT_MANAGER = UpstreamChart(
    name="cert-manager",
    repo_url="https://charts.jetstack.io",
    chart="cert-manager",
    version="v1.19.0",
    namespace="cert-manager",
    # cert-manager >= 1.15 installs its CRDs with crds.enabled (installCRDs is deprecated);
    # crds.keep leaves them in place if the Application is deleted.
    values=(("crds", {"enabled": True, "keep": True}),),
)

MOCO = UpstreamChart(
    name="moco",
    repo_url="https://cybozu-go.github.io/moco/",
    chart="moco",
    version="0.26.0",
    namespace="moco-system",
)
