"""promtool, built from the pinned Prometheus module: the chart tier runs our alert rules in
Prometheus' own rule engine (`promtool check rules`, `promtool test rules`).

No release binary is reachable here, so it is built like the control plane
(``sunk.devenv.kube_build``). The module's ``v0.3XX.Y`` tags are Prometheus 3.XX.Y.
``remove_all_sd`` leaves out the service-discovery plugins (cloud SDKs promtool never needs
to check rules), which keeps the first build to a few minutes on two cores.
"""

from __future__ import annotations

from sunk.devenv.kube_build import Build, build_one

PROMETHEUS_VERSION = "v0.316.0"  # Prometheus 3.16.0


def promtool_build() -> Build:
    return Build(
        "promtool",
        PROMETHEUS_VERSION,
        "github.com/prometheus/prometheus",
        "github.com/prometheus/prometheus/cmd/promtool",
        ldflags=(f"-X github.com/prometheus/common/version.Version={release()}",),
        tags=("remove_all_sd",),
        go="1.26.7",  # the module's own go directive
    )


def install() -> None:
    from sunk.devenv.toolchain import link_into_bin

    link_into_bin(build_one(promtool_build()), "promtool")


def release() -> str:
    """The Prometheus release of the module version: v0.316.0 is 3.16.0."""
    minor, patch = PROMETHEUS_VERSION.removeprefix("v0.").split(".")
    return f"{minor[0]}.{int(minor[1:])}.{patch}"


def description() -> str:
    return f"promtool of Prometheus {release()} (go build, no service discovery)"
