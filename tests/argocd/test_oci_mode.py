"""``argocd gen --chart-registry oci://…``: both charts from an OCI registry, their values from
Git through Argo CD's multi-source ``$values``, and a generated AppProject instead of
``default``. Every object is checked against the hand-written schemas and, when the
``argocd`` toolchain component is installed, against Argo CD v3.3.9's own CRDs."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from sunk import __version__
from sunk.argocd import schema
from sunk.devenv import argocd_build
from tests.argocd.test_cli import REPO_URL, gen, read_tree

pytestmark = pytest.mark.unit

REGISTRY = "oci.example.com/org/charts"


def load_tree(out: Path) -> dict[str, dict[str, Any]]:
    return {
        rel: yaml.safe_load((out / rel).read_text())
        for rel in read_tree(out)
        if rel.endswith(".yaml")
    }


def body_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"] if obj["kind"] == "ApplicationSet" else obj["spec"]


@pytest.fixture
def oci_tree(fake_repo: Path) -> dict[str, dict[str, Any]]:
    sunk_values = fake_repo / "examples" / "sunk.yaml"
    sunk_values.write_text("operator: {replicas: 1}\n")
    result = gen(
        fake_repo, "--chart-registry", f"oci://{REGISTRY}", "--sunk-values", str(sunk_values)
    )
    assert result.exit_code == 0, result.output
    return load_tree(fake_repo / "argocd")


def test_charts_come_from_the_registry_and_values_from_git(oci_tree) -> None:
    for name, chart_name, values in (
        ("apps/sunk.yaml", "sunk", "examples/sunk.yaml"),
        ("apps/slurm-slurm-a.yaml", "slurm", "examples/slurm-a.yaml"),
    ):
        app = oci_tree[name]
        assert "source" not in app["spec"]
        chart, ref = app["spec"]["sources"]
        assert chart["repoURL"] == REGISTRY  # Argo CD's form for OCI Helm: no oci://
        assert chart["chart"] == chart_name
        assert chart["targetRevision"] == __version__
        assert chart["helm"]["valueFiles"] == [f"$values/{values}"]
        assert ref == {
            "repoURL": REPO_URL,
            "targetRevision": "0123456789abcdef0123456789abcdef01234567",
            "ref": "values",
        }
    for obj in oci_tree.values():
        assert schema.errors(obj) == []


def test_applications_use_the_generated_project(oci_tree) -> None:
    project = oci_tree["project.yaml"]
    assert project["kind"] == "AppProject" and project["metadata"]["name"] == "sunk-prod"
    spec = project["spec"]
    assert REGISTRY in spec["sourceRepos"] and REPO_URL in spec["sourceRepos"]
    apps = [o for o in oci_tree.values() if o["kind"] in ("Application", "ApplicationSet")]
    assert len(apps) >= 5
    for app in apps:
        body = body_of(app)
        assert body["project"] == "sunk-prod"
        assert body["destination"] in spec["destinations"]
        for source in body.get("sources") or [body["source"]]:
            assert source["repoURL"] in spec["sourceRepos"]
    # Cluster-scoped: our CRDs by name, never everything.
    whitelist = spec["clusterResourceWhitelist"]
    assert {"group": "*", "kind": "*"} not in whitelist
    crds = [w for w in whitelist if w["kind"] == "CustomResourceDefinition"]
    assert all(w.get("name") for w in crds)
    assert {
        "group": "apiextensions.k8s.io",
        "kind": "CustomResourceDefinition",
        "name": "*.sunk.coreweave.com",
    } in crds


def test_repository_secret_turns_on_oci(oci_tree, fake_repo: Path) -> None:
    secret = oci_tree["repository-secret.yaml"]
    assert secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "repository"
    assert secret["stringData"] == {
        "name": "prod-charts",
        "type": "helm",
        "url": REGISTRY,
        "enableOCI": "true",
    }
    root = (fake_repo / "argocd" / "root.yaml").read_text()
    assert "kubectl apply -f argocd/repository-secret.yaml" in root


def test_appset_template_takes_values_by_repository_path(fake_repo: Path) -> None:
    result = gen(
        fake_repo,
        "--chart-registry",
        REGISTRY,
        "--chart-version",
        "0.2.0",
        "--style",
        "appset",
    )
    assert result.exit_code == 0, result.output
    tree = load_tree(fake_repo / "argocd")
    appset = tree["apps/slurm-appset.yaml"]
    chart, ref = appset["spec"]["template"]["spec"]["sources"]
    assert chart["targetRevision"] == "0.2.0"
    assert chart["helm"]["valueFiles"] == ["$values/{{.values.valuesPath}}"]
    assert ref["ref"] == "values"
    elements = appset["spec"]["generators"][0]["list"]["elements"]
    assert [e["values"]["valuesPath"] for e in elements] == [
        "examples/slurm-a.yaml",
        "examples/b.yaml",
    ]
    namespaces = [
        w["name"]
        for w in tree["project.yaml"]["spec"]["clusterResourceWhitelist"]
        if w["kind"] == "Namespace"
    ]
    assert "*" in namespaces  # the ApplicationSet decides each namespace


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--chart-registry", REGISTRY, "--project", "default"], "--project default: with"),
        (["--chart-version", "0.1.0"], "--chart-version needs --chart-registry"),
        (["--chart-registry", "https://x.example.com/c"], "is not an OCI registry path"),
        (["--chart-registry", REGISTRY, "--chart-version", "1 2"], "is not a chart version"),
    ],
)
def test_bad_oci_flags_are_one_line_exit_2(fake_repo: Path, args, words) -> None:
    result = gen(fake_repo, *args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sunkctl argocd gen: error: ") and words in line


# --- Argo CD's own CRDs ----------------------------------------------------------------------


@cache
def _load_crds(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for doc in yaml.load_all(path.read_text(), Loader=loader):
        if doc and doc.get("kind") == "CustomResourceDefinition":
            (version,) = doc["spec"]["versions"]
            out[doc["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def _crd_schemas() -> dict[str, dict[str, Any]]:
    installed = argocd_build.installed()
    if installed is None:
        pytest.skip("Argo CD CRDs not installed: `python -m sunk.devenv.toolchain install argocd`")
    return _load_crds(installed[1])


def unknown_fields(obj: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """Fields the API server would prune: not declared where the schema lists properties."""
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(obj, dict) and "properties" in node:
        for key, value in obj.items():
            if key not in node["properties"]:
                found.append(f"{path}/{key}")
            else:
                found += unknown_fields(value, node["properties"][key], f"{path}/{key}")
    elif isinstance(obj, dict) and isinstance(node.get("additionalProperties"), dict):
        for key, value in obj.items():
            found += unknown_fields(value, node["additionalProperties"], f"{path}/{key}")
    elif isinstance(obj, list) and "items" in node:
        for i, item in enumerate(obj):
            found += unknown_fields(item, node["items"], f"{path}/{i}")
    return found


@pytest.mark.parametrize("charts", ["oci", "git"])
@pytest.mark.parametrize("style", ["app-of-apps", "appset"])
def test_every_object_fits_argocds_own_crds(fake_repo: Path, style: str, charts: str) -> None:
    crds = _crd_schemas()
    bogus = {"spec": {"sources": [{"repoURL": "x", "helm": {"valuesFile": "typo"}}]}}
    assert unknown_fields(bogus, crds["Application"]) == ["/spec/sources/0/helm/valuesFile"]
    mode = ["--chart-registry", REGISTRY] if charts == "oci" else ["--app-project"]
    result = gen(fake_repo, *mode, "--style", style)
    assert result.exit_code == 0, result.output
    checked = set()
    for name, obj in load_tree(fake_repo / "argocd").items():
        if obj["kind"] not in crds:
            continue
        crd = crds[obj["kind"]]
        errors = [e.message for e in Draft7Validator(crd).iter_errors(obj)]
        assert errors == [], name
        assert unknown_fields(obj, crd) == [], name
        checked.add(obj["kind"])
    expected = {"Application", "AppProject"} | ({"ApplicationSet"} if style == "appset" else set())
    assert checked == expected
