"""The wheel is the standalone `sunkctl`: built from this checkout (sdist, then wheel, as a
release would), installed into a fresh virtualenv in a temporary directory and run as the CI
gate of a temporary GitOps repository, with no checkout in sight — its charts and CRD schemas
come from the wheel's package data, helm from --helm, $SUNK_HELM or PATH.

Offline: the fresh venv gets the wheel with --no-deps, and the runtime dependencies are made
importable from this test's environment (a .pth line; the editable install of the checkout is
not activated by it). The operator's dependencies (the `[operator]` extra) are blocked, so the
CLI is proven to run without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

OPERATOR_ONLY = ("kopf", "aiohttp", "cryptography", "prometheus_client")

MINIMAL = """\
clusterName: minimal
compute:
  nodes:
    cpu:
      replicas: 2
      resources:
        requests: {cpu: "2", memory: 4Gi}
        limits: {cpu: "2", memory: 8Gi}
login:
  service:
    type: ClusterIP
    externalTrafficPolicy: null
"""

# An extra object with a misspelled field: only the rendered-object check (helm + the
# Kubernetes schemas) can find it.
BROKEN = """\
clusterName: broken
compute:
  nodes:
    cpu: {definitions: [cpu-epyc]}
extraObjects:
  - apiVersion: v1
    kind: Service
    metadata: {name: s}
    spec:
      ports: [{port: 80}]
      selectr: {app: x}
"""


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)


@pytest.fixture(scope="module")
def wheel(repo: Path, tmp_path_factory) -> Path:
    """sdist from the checkout (MANIFEST.in must carry charts/ and schemas/), then the wheel
    from the unpacked sdist with this environment's setuptools (no index)."""
    out = tmp_path_factory.mktemp("dist")
    hook = f"from setuptools import build_meta as b; b.build_sdist({str(out)!r})"
    build = run([sys.executable, "-c", hook], cwd=repo)
    assert build.returncode == 0, build.stderr
    (sdist,) = out.glob("sunk-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(out, filter="data")
    (source,) = [p for p in out.iterdir() if p.is_dir()]
    assert (source / "charts" / "slurm" / "Chart.yaml").is_file()
    proc = run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(source)]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("sunk-*.whl")
    return built


def test_wheel_carries_the_charts_and_schemas_not_the_dev_environment(wheel, repo):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not [n for n in names if n.startswith("sunk/devenv")]
    for chart in ("slurm", "sunk"):
        for path in (repo / "charts" / chart).rglob("*"):
            if path.is_file():
                rel = path.relative_to(repo).as_posix()
                assert f"sunk/_data/{rel}" in names, rel
    assert "sunk/_data/schemas/sunk.coreweave.com/slurmcluster_v1alpha1.json" in names
    assert "sunk/argocd/schemas/application.json" in names
    metadata = zipfile.ZipFile(wheel).read("sunk-0.1.0.dist-info/METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: kopf")]
    assert requires and all('extra == "operator"' in line for line in requires)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel; returns its bin directory."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    proc = run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert proc.returncode == 0, proc.stderr
    python = venv / "bin" / "python"
    proc = run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", str(wheel)]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "_sunk_test_deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "# The CLI must run without the [operator] extra.\n"
        f"sys.modules.update(dict.fromkeys({OPERATOR_ONLY!r}))\n"
    )
    return venv / "bin"


@pytest.fixture
def gitops(tmp_path) -> Path:
    root = tmp_path / "gitops"
    (root / "clusters").mkdir(parents=True)
    (root / "clusters" / "minimal.yaml").write_text(MINIMAL)
    assert run(["git", "init", "-q", str(root)]).returncode == 0
    return root


def clean_env(bin_dir: Path, home: Path, **extra: str) -> dict[str, str]:
    """Only the fresh venv on PATH (plus git): no checkout, no toolchain, no helm."""
    git = Path(run(["sh", "-c", "command -v git"]).stdout.strip()).parent
    env = {"PATH": f"{bin_dir}:{git}", "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def test_installed_sunkctl_runs_the_ci_gate_with_no_checkout(installed, gitops, helm, tmp_path):
    sunkctl = str(installed / "sunkctl")
    env = clean_env(installed, tmp_path / "home")

    # Where it runs from: the venv's package data; no checkout, no dev environment.
    probe = run(
        [str(installed / "python"), "-c", textwrap.dedent("""
            import json, sunk, sunk.resources as r
            try:
                import sunk.devenv
                devenv = True
            except ImportError:
                devenv = False
            print(json.dumps({"sunk": sunk.__file__, "charts": str(r.charts_dir()),
                              "checkout": r.checkout_root() and str(r.checkout_root()),
                              "devenv": devenv}))
        """)],
        cwd=gitops,
        env=env,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    where = json.loads(probe.stdout)
    venv = str(installed.parent)
    assert where["sunk"].startswith(venv) and where["charts"].startswith(venv)
    assert where["checkout"] is None and where["devenv"] is False

    # validate: the whole pipeline (helm from --helm), clean on a good file.
    ok = run([sunkctl, "validate", "--helm", helm, "-o", "json", "clusters"], cwd=gitops, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (checked,) = json.loads(ok.stdout)["files"]
    assert checked["file"] == "clusters/minimal.yaml" and checked["rendered"] > 0
    assert checked["checks"][-2:] == ["render", "kubernetes"]

    # ... and a real finding, from the rendered objects, as JSON (helm from $SUNK_HELM).
    (gitops / "clusters" / "broken.yaml").write_text(BROKEN)
    bad = run(
        [sunkctl, "validate", "-o", "json", "clusters"],
        cwd=gitops,
        env={**env, "SUNK_HELM": helm},
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    report = json.loads(bad.stdout)
    rules = {(f["file"], f["ruleId"]) for f in report["findings"]}
    assert ("clusters/broken.yaml", "K8S") in rules
    assert not [f for f in report["findings"] if f["file"] == "clusters/minimal.yaml"]

    # render: the Slurm files (helm from PATH).
    helm_dir = tmp_path / "helm-bin"
    helm_dir.mkdir()
    (helm_dir / "helm").symlink_to(helm)
    path_env = {**env, "PATH": f"{env['PATH']}:{helm_dir}"}
    rendered = run(
        [sunkctl, "render", "-f", "clusters/minimal.yaml", "--file", "slurm.conf"],
        cwd=gitops,
        env=path_env,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "ClusterName=minimal" in rendered.stdout
    assert "PartitionName=" in rendered.stdout

    # argocd gen: manifests written into the GitOps repository.
    gen = run(
        [sunkctl, "argocd", "gen", "--repo", "https://git.example.com/org/gitops.git",
         "--revision", "main", "--cluster", "prod", "-f", "clusters/minimal.yaml"],
        cwd=gitops,
        env=env,
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    written = sorted(p.relative_to(gitops).as_posix() for p in (gitops / "argocd").rglob("*.yaml"))
    assert "argocd/root.yaml" in written and "argocd/apps/sunk.yaml" in written
    assert any(name.startswith("argocd/apps/") and "minimal" in name for name in written)


def test_installed_sunkctl_without_helm_says_how_to_get_it(installed, gitops, tmp_path):
    env = clean_env(installed, tmp_path / "home")
    proc = run([str(installed / "sunkctl"), "validate", "clusters"], cwd=gitops, env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    # The installed console script: one error line, led by `sunkctl validate: error:`.
    (line,) = proc.stderr.splitlines()
    assert line.startswith("sunkctl validate: error: helm not found on PATH: install Helm 3")
    assert "https://helm.sh/docs/intro/install/" in line


def test_installed_sunkctl_dev_and_schema_need_a_checkout(installed, gitops, tmp_path):
    env = clean_env(installed, tmp_path / "home")
    for args, needle in ((["dev", "status"], "needs a source checkout"), (["schema"], "checkout")):
        proc = run([str(installed / "sunkctl"), *args], cwd=gitops, env=env)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert needle in " ".join(proc.stderr.split())
    assert not (gitops / "charts").exists() and not (gitops / "schemas").exists()
    assert sorted(os.listdir(gitops)) == [".git", "clusters"]
