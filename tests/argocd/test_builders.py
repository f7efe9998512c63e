"""Builders: schema validity, waves, sync options, health config — without the CLI."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.argocd import ArgoCDGenError, GenSpec, SyncSettings, build, schema, writer
from sunk.argocd.builders import WAVES, argocd_cm_patch, parent_app
from sunk.argocd.healthchecks import HEALTH_CHECKS, load_script
from sunk.argocd.spec import parse_extra_apps, resolve_releases
from sunk.argocd.versions import CERT_MANAGER, MOCO

pytestmark = pytest.mark.unit

REPO_URL = "https://git.example.com/org/sunk.git"
SHA = "0123456789abcdef0123456789abcdef01234567"


def make_spec(root: Path, **overrides: Any) -> GenSpec:
    releases = resolve_releases(
        [root / "examples" / "slurm-a.yaml", root / "examples" / "b.yaml"], root
    )
    fields: dict[str, Any] = {
        "repo_url": REPO_URL,
        "revision": SHA,
        "cluster": "prod",
        "apps_path": "argocd/apps",
        "slurm": releases,
        "cert_manager": CERT_MANAGER,
        "moco": MOCO,
        "extra_apps": parse_extra_apps(
            ["storage=" + str(root / "deploy/storage") + "@slurm-a"], root, releases
        ),
    }
    fields.update(overrides)
    return GenSpec(**fields)


def by_name(bundle: Any) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in bundle.objects()}


def test_app_of_apps_layout_and_schema(fake_repo: Path) -> None:
    bundle = build(make_spec(fake_repo))
    assert [f.path for f in bundle.files] == [
        "root.yaml",
        "argocd-cm-patch.yaml",
        "apps/cert-manager.yaml",
        "apps/moco.yaml",
        "apps/sunk.yaml",
        "apps/extra-storage.yaml",
        "apps/slurm-slurm-a.yaml",
        "apps/slurm-b.yaml",
    ]
    for obj in bundle.objects():
        assert schema.errors(obj) == []
    apps = by_name(bundle)
    assert set(apps) == {
        "argocd-cm",
        "prod-root",
        "prod-cert-manager",
        "prod-moco",
        "prod-sunk",
        "prod-storage",
        "prod-slurm-slurm-a",
        "prod-slurm-b",
    }


def test_sync_waves_order(fake_repo: Path) -> None:
    apps = by_name(build(make_spec(fake_repo)))

    def wave(name: str) -> int:
        return int(apps[name]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])

    assert (
        wave("prod-cert-manager")
        < wave("prod-moco")
        < wave("prod-sunk")
        < wave("prod-storage")
        < wave("prod-slurm-slurm-a")
        == wave("prod-slurm-b")
    )
    assert "annotations" not in apps["prod-root"]["metadata"]


def test_children_fields(fake_repo: Path) -> None:
    apps = by_name(build(make_spec(fake_repo)))
    for name, app in apps.items():
        if app["kind"] != "Application":
            continue
        assert app["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]
        policy = app["spec"]["syncPolicy"]
        assert "automated" not in policy  # manual sync unless --auto-sync
        assert policy["retry"]["limit"] == 5 and policy["retry"]["backoff"]["factor"] == 2
        if name != "prod-root":
            assert "CreateNamespace=true" in policy["syncOptions"]
            assert "ServerSideApply=true" in policy["syncOptions"]
            assert app["spec"]["destination"] == {
                "name": "prod",
                "namespace": app["spec"]["destination"]["namespace"],
            }
    for name in ("prod-moco", "prod-sunk", "prod-slurm-slurm-a", "prod-slurm-b"):
        assert "SkipDryRunOnMissingResource=true" in apps[name]["spec"]["syncPolicy"]["syncOptions"]

    cm = apps["prod-cert-manager"]["spec"]["source"]
    assert cm["repoURL"] == CERT_MANAGER.repo_url and cm["targetRevision"] == CERT_MANAGER.version
    assert cm["helm"]["valuesObject"] == {"crds": {"enabled": True, "keep": True}}
    moco = apps["prod-moco"]["spec"]
    assert moco["source"]["chart"] == "moco" and moco["destination"]["namespace"] == "moco-system"

    sunk = apps["prod-sunk"]["spec"]["source"]
    assert sunk == {
        "repoURL": REPO_URL,
        "targetRevision": SHA,
        "path": "charts/sunk",
        "helm": {"releaseName": "sunk"},
    }
    a = apps["prod-slurm-slurm-a"]["spec"]
    assert a["source"]["path"] == "charts/slurm"
    assert a["source"]["helm"] == {
        "releaseName": "slurm-a",
        "valueFiles": ["../../examples/slurm-a.yaml"],
    }
    assert a["destination"]["namespace"] == "slurm-a"
    b = apps["prod-slurm-b"]["spec"]
    assert b["source"]["helm"]["releaseName"] == "b"  # file stem: no clusterName in b.yaml
    assert "ignoreDifferences" not in a

    storage = apps["prod-storage"]["spec"]
    assert storage["source"]["path"] == "deploy/storage"
    assert storage["source"]["directory"] == {"recurse": True}
    assert storage["destination"]["namespace"] == "slurm-a"

    root = apps["prod-root"]["spec"]
    assert root["source"]["path"] == "argocd/apps"
    assert root["destination"] == {
        "server": "https://kubernetes.default.svc",
        "namespace": "argocd",
    }


def test_optional_upstreams_and_sync_flags(fake_repo: Path) -> None:
    spec = make_spec(
        fake_repo,
        cert_manager=None,
        moco=None,
        sync=SyncSettings(auto_sync=True, prune=True, self_heal=True),
        ignore_replicas=True,
        destination_server="https://10.0.0.1:6443",
        cascade_delete=False,
    )
    apps = by_name(build(spec))
    assert "prod-cert-manager" not in apps and "prod-moco" not in apps
    slurm = apps["prod-slurm-b"]
    assert "finalizers" not in slurm["metadata"]
    assert slurm["spec"]["destination"] == {"server": "https://10.0.0.1:6443", "namespace": "b"}
    assert slurm["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert slurm["spec"]["ignoreDifferences"] == [
        {"group": "sunk.coreweave.com", "kind": "NodeSet", "jsonPointers": ["/spec/replicas"]}
    ]
    assert "RespectIgnoreDifferences=true" in slurm["spec"]["syncPolicy"]["syncOptions"]
    root = parent_app(spec)
    assert root["spec"]["ignoreDifferences"][0]["kind"] == "Application"


def test_argocd_cm_patch(fake_repo: Path) -> None:
    cm = argocd_cm_patch(make_spec(fake_repo))
    data = cm["data"]
    assert cm["metadata"]["name"] == "argocd-cm"
    for check in HEALTH_CHECKS:
        assert data[f"resource.customizations.health.{check.key}"] == load_script(check.key)
    assert data["resource.customizations.useOpenLibs.sunk.coreweave.com_NodeSet"] == "true"
    assert "resource.customizations.useOpenLibs.argoproj.io_Application" not in data
    known = yaml.safe_load(
        data["resource.customizations.knownTypeFields.sunk.coreweave.com_NodeSet"]
    )
    assert known == [{"field": "spec.template.spec", "type": "core/v1/PodSpec"}]
    assert all(isinstance(v, str) for v in data.values())
    # The Lua survives the YAML round trip byte for byte (literal blocks).
    text = writer.render_file(build(make_spec(fake_repo)).files[1])
    assert yaml.safe_load(text)["data"] == data


def test_appset_list_style(fake_repo: Path) -> None:
    bundle = build(make_spec(fake_repo, style="appset", ignore_replicas=True))
    assert "apps/slurm-appset.yaml" in [f.path for f in bundle.files]
    assert not any(f.path.startswith("apps/slurm-slurm") for f in bundle.files)
    appset = by_name(bundle)["prod-slurm"]
    assert schema.errors(appset) == []
    assert "finalizers" not in appset["metadata"]
    spec = appset["spec"]
    assert spec["goTemplate"] is True and spec["goTemplateOptions"] == ["missingkey=error"]
    elements = spec["generators"][0]["list"]["elements"]
    assert [e["values"]["release"] for e in elements] == ["slurm-a", "b"]
    assert elements[0]["values"]["valueFile"] == "../../examples/slurm-a.yaml"
    tmpl = spec["template"]
    assert tmpl["metadata"]["name"] == "prod-slurm-{{.values.release}}"
    assert tmpl["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]
    assert tmpl["spec"]["source"]["helm"]["valueFiles"] == ["{{.values.valueFile}}"]
    assert tmpl["spec"]["ignoreDifferences"][0]["kind"] == "NodeSet"
    assert appset["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == str(WAVES["slurm"])


def test_appset_git_style(fake_repo: Path) -> None:
    spec = make_spec(fake_repo, style="appset", slurm=(), appset_git_glob="examples/*.yaml")
    appset = by_name(build(spec))["prod-slurm"]
    assert schema.errors(appset) == []
    git = appset["spec"]["generators"][0]["git"]
    assert git["repoURL"] == REPO_URL and git["revision"] == SHA
    assert git["files"] == [{"path": "examples/*.yaml"}]
    assert git["values"]["release"] == "{{.clusterName}}"
    assert git["values"]["valueFile"] == "../../{{.path.path}}/{{.path.filename}}"


def test_output_is_deterministic(fake_repo: Path) -> None:
    first = writer.render(build(make_spec(fake_repo)))
    second = writer.render(build(make_spec(fake_repo)))
    assert first == second
    appset = writer.render(build(make_spec(fake_repo, style="appset")))
    assert appset == writer.render(build(make_spec(fake_repo, style="appset")))


def test_name_collision_is_an_error(fake_repo: Path) -> None:
    releases = resolve_releases([fake_repo / "examples" / "b.yaml"], fake_repo)
    extras = parse_extra_apps([f"slurm-b={fake_repo / 'deploy/storage'}"], fake_repo, releases)
    with pytest.raises(ArgoCDGenError, match="both named 'prod-slurm-b'"):
        build(make_spec(fake_repo, slurm=releases, extra_apps=extras))


# --- the hand-written schemas reject what Argo CD would reject --------------------------------


@pytest.fixture
def good_app(fake_repo: Path) -> dict[str, Any]:
    return copy.deepcopy(by_name(build(make_spec(fake_repo)))["prod-slurm-b"])


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda a: a["metadata"]["annotations"].update({"argocd.argoproj.io/sync-wave": 5}),
            "is not of type 'string'",
        ),
        (lambda a: a["spec"].update({"sourcee": {}}), "Additional properties"),
        (lambda a: a["spec"]["destination"].update({"server": "https://x"}), "should not be valid"),
        (lambda a: a["spec"].pop("project"), "'project' is a required property"),
        (lambda a: a["spec"]["source"].pop("repoURL"), "'repoURL' is a required property"),
        (
            lambda a: a["spec"]["syncPolicy"]["retry"]["backoff"].update({"factor": "2"}),
            "is not of type 'integer'",
        ),
        (
            lambda a: a["spec"]["syncPolicy"].update({"automated": {"prune": "yes"}}),
            "is not of type 'boolean'",
        ),
        (lambda a: a["spec"]["source"]["helm"].update({"valueFile": "x"}), "Additional properties"),
        (lambda a: a["metadata"].update({"name": "Not_A_Name"}), "does not match"),
        (lambda a: a.update({"kind": "Deployment"}), None),
    ],
)
def test_schema_rejects(good_app: dict[str, Any], mutate: Any, expected: str | None) -> None:
    assert schema.errors(good_app) == []
    mutate(good_app)
    errors = schema.errors(good_app)
    if expected is None:
        assert errors == []  # kinds without a schema are not judged here
    else:
        assert errors and any(expected in e for e in errors), errors
