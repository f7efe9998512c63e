"""The committed Argo CD schemas are what sunk.devenv.argocd_schemas makes from the pinned Argo
CD's CRDs (the toolchain's `argocd` component), and they judge real objects."""

from __future__ import annotations

import json

import pytest

from sunk.argocd import schema
from sunk.devenv import argocd_build, argocd_schemas


def test_the_committed_schemas_match_the_pinned_crds():
    if not argocd_build.crds_link().exists():
        pytest.skip(f"{argocd_build.crds_link()} missing: the argocd toolchain is not installed")
    rendered = argocd_schemas.rendered()
    for name, text in rendered.items():
        committed = (argocd_schemas.TARGET / name).read_text()
        assert committed == text, f"{name} is stale: python -m sunk.devenv.argocd_schemas"
        assert "manifests/crds" in json.loads(text)["$comment"]


def test_a_project_is_checked_strictly():
    project = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {"name": "sunk-c", "namespace": "argocd"},
        "spec": {"sourceRepos": ["https://git.example/repo.git"],
                 "destinations": [{"server": "https://kubernetes.default.svc", "namespace": "x"}]},
    }  # fmt: skip
    assert schema.errors(project) == []
    project["spec"]["destinations"][0]["namspace"] = "typo"
    assert any("Additional properties" in e for e in schema.errors(project))
