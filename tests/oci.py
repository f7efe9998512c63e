"""Both charts packaged and pushed to a throwaway OCI registry on loopback (the ``registry``
toolchain component), as a release would publish them. The fixtures live in
``tests/conftest.py``; the chart, cluster and CLI tests pull from here."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

CHARTS = ("sunk", "slurm")
_DIGEST = re.compile(r"^Digest: (sha256:[0-9a-f]{64})$", re.M)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Helm:
    """The real helm with its own cache, config and data directories: nothing it learns about
    the throwaway registry reaches the user's helm."""

    binary: str
    home: Path

    @property
    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            HELM_CACHE_HOME=str(self.home / "cache"),
            HELM_CONFIG_HOME=str(self.home / "config"),
            HELM_DATA_HOME=str(self.home / "data"),
        )

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            env=self.env,
        )
        if check:
            assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc


def digest_of(proc: subprocess.CompletedProcess[str]) -> str:
    """The manifest digest helm push/pull prints."""
    match = _DIGEST.search(proc.stdout + proc.stderr)
    assert match, proc.stdout + proc.stderr
    return match.group(1)


@dataclass(frozen=True)
class Published:
    """Both charts in the registry at ``repo`` (``oci://127.0.0.1:PORT/charts``)."""

    host: str
    repo: str
    packages: dict[str, Path]  # chart name -> the tgz `helm package` wrote
    versions: dict[str, str]
    digests: dict[str, str]  # chart name -> manifest digest `helm push` printed

    def ref(self, chart: str) -> str:
        return f"{self.repo}/{chart}"


def publish(helm: Helm, charts_dir: Path, host: str, out: Path) -> Published:
    """``helm package`` each chart, then ``helm push`` it to ``oci://HOST/charts``."""
    repo = f"oci://{host}/charts"
    packages, versions, digests = {}, {}, {}
    out.mkdir(parents=True, exist_ok=True)
    for chart in CHARTS:
        meta = yaml.safe_load((charts_dir / chart / "Chart.yaml").read_text())
        helm.run("package", str(charts_dir / chart), "-d", str(out))
        tgz = out / f"{chart}-{meta['version']}.tgz"
        assert tgz.is_file(), tgz
        pushed = helm.run("push", str(tgz), repo, "--plain-http")
        packages[chart], versions[chart], digests[chart] = tgz, meta["version"], digest_of(pushed)
    return Published(host, repo, packages, versions, digests)
