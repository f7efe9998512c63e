"""Pure parts of the control-plane build and test environment (no binaries needed)."""

from __future__ import annotations

import pytest

from sunk.devenv import argocd_build, kube_build
from sunk.devenv.controlplane import _taint
from sunk.devenv.toolchain import ToolchainError

pytestmark = pytest.mark.unit

KUBERNETES_GOMOD = """\
module k8s.io/kubernetes

go 1.26.0

require (
\tk8s.io/api v0.0.0
\tgithub.com/spf13/cobra v1.9.1
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
)
"""


def test_staging_replaces_come_from_the_kubernetes_gomod() -> None:
    assert kube_build.staging_replaces(KUBERNETES_GOMOD, "v1.37.2") == [
        ("k8s.io/api", "v0.37.2"),
        ("k8s.io/client-go", "v0.37.2"),
        ("k8s.io/cri-streaming", "v0.37.2"),
    ]


def test_wrapper_gomod_requires_the_module_and_replaces_staging() -> None:
    build = next(b for b in kube_build.builds() if b.tool == "kube-apiserver")
    text = kube_build.wrapper_gomod(build, [("k8s.io/api", "v0.37.2")])
    assert f"require k8s.io/kubernetes {kube_build.KUBERNETES_VERSION}\n" in text
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in text
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in build.ldflags


def test_every_tool_is_built_once() -> None:
    assert sorted(b.tool for b in kube_build.builds()) == sorted(kube_build.KUBE_TOOLS)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("a=b:NoSchedule", {"key": "a", "value": "b", "effect": "NoSchedule"}),
        ("nvidia.com/gpu:NoExecute", {"key": "nvidia.com/gpu", "effect": "NoExecute"}),
        ({"key": "k", "value": "", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}),
    ],
)
def test_taint_specs(spec, expected) -> None:
    assert _taint(spec) == expected


def test_bad_taint_spec() -> None:
    with pytest.raises(ValueError):
        _taint("no-effect")


def test_versioned_replaces_keep_version_pins_and_drop_local_directories() -> None:
    parsed = {
        "Replace": [
            {"Old": {"Path": "k8s.io/api"}, "New": {"Path": "k8s.io/api", "Version": "v0.34.0"}},
            {
                "Old": {"Path": "github.com/argoproj/gitops-engine"},
                "New": {"Path": "./gitops-engine"},
            },
        ]
    }
    assert kube_build.versioned_replaces(parsed, "m@v1") == [("k8s.io/api", "v0.34.0")]
    gomod = kube_build.wrapper_gomod(argocd_build.build(), [("k8s.io/api", "v0.34.0")])
    assert "require github.com/argoproj/argo-cd/v3 v3.3.9" in gomod
    assert "\tk8s.io/api => k8s.io/api v0.34.0" in gomod


def test_a_replace_to_another_module_is_refused() -> None:
    parsed = {"Replace": [{"Old": {"Path": "a.io/x"}, "New": {"Path": "b.io/x", "Version": "v1"}}]}
    with pytest.raises(ToolchainError, match=r"m@v1 go.mod: replace a.io/x => b.io/x"):
        kube_build.versioned_replaces(parsed, "m@v1")


def test_argocd_is_one_multi_call_binary_with_its_replaces_copied() -> None:
    build = argocd_build.build()
    assert (build.tool, build.package) == ("argocd", "github.com/argoproj/argo-cd/v3/cmd")
    assert build.copy_replaces and build.version == argocd_build.ARGOCD_VERSION
    assert argocd_build.cached_binary().parent.name == argocd_build.ARGOCD_VERSION
