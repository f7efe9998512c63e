"""Argo CD as host processes against the test control plane, with a local git server.

Argo CD normally runs as Pods; here its two components that sync (``argocd-repo-server`` and
``argocd-application-controller``, Argo CD's multi-call binary chosen by
``$ARGOCD_BINARY_NAME``) run as processes on loopback beside Debian's ``redis-server`` and a
``git daemon`` serving the test repository. The controller reads its own namespace through the
admin kubeconfig; the clusters it deploys to come from cluster Secrets (out of a cluster,
``https://kubernetes.default.svc`` cannot be loaded), so the generated Applications name the
API server's URL. No API server, UI, Dex or ApplicationSet controller runs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from sunk.devenv.controlplane import ControlPlane, KubeAPIError, KubeClient, free_port, wait_for
from sunk.devenv.paths import bin_dir

NAMESPACE = "argocd"
API = "/apis/argoproj.io/v1alpha1/namespaces/argocd"
PART_OF = {"app.kubernetes.io/part-of": "argocd"}
# Seconds between the controller's own refreshes of every Application (Argo CD's default is
# 120 s plus jitter); tests also ask for a refresh through the annotation.
APP_RESYNC_SECONDS = 10
# The ConfigMaps Argo CD's settings manager reads (all labelled part-of=argocd).
CONFIGMAPS = (
    "argocd-cm",
    "argocd-cmd-params-cm",
    "argocd-rbac-cm",
    "argocd-tls-certs-cm",
    "argocd-ssh-known-hosts-cm",
    "argocd-gpg-keys-cm",
)


class Processes:
    """Host processes, each in its own session, stopped together (SIGTERM, then SIGKILL)."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        log = (self.log_dir / f"{name}.log").open("w")
        self.procs[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})),
            start_new_session=True,
        )

    def check(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.tail(name)}")

    def tail(self, name: str, chars: int = 3000) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()


class GitServer:
    """A working repository served read-only by ``git daemon`` on loopback."""

    def __init__(self, root: Path, procs: Processes, name: str = "clusters"):
        self.base, self.name = root, name
        self.path = root / name
        self.port = free_port()
        self.procs = procs

    @property
    def url(self) -> str:
        return f"git://127.0.0.1:{self.port}/{self.name}"

    def git(self, *args: str) -> str:
        env = {
            "GIT_AUTHOR_NAME": "gitops test",
            "GIT_AUTHOR_EMAIL": "gitops@test.invalid",
            "GIT_COMMITTER_NAME": "gitops test",
            "GIT_COMMITTER_EMAIL": "gitops@test.invalid",
        }
        proc = subprocess.run(
            ["git", "-C", str(self.path), *args],
            capture_output=True,
            text=True,
            env=dict(os.environ, **env),
            check=False,
        )
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return proc.stdout.strip()

    def init(self) -> None:
        self.path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def serve(self) -> None:
        self.procs.start(
            "git-daemon",
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                f"--base-path={self.base}",
                str(self.base),
            ],
        )
        wait_for(
            lambda: (
                subprocess.run(
                    ["git", "ls-remote", self.url], capture_output=True, check=False
                ).returncode
                == 0
            ),
            30,
            "git daemon",
        )


class ArgoCD:
    """redis-server, argocd-repo-server and argocd-application-controller on loopback."""

    def __init__(self, binary: Path, control_plane: ControlPlane, procs: Processes):
        self.binary, self.cp, self.procs = binary, control_plane, procs
        self.redis_port, self.repo_port = free_port(), free_port()
        self.ports = {name: free_port() for name in ("repo-metrics", "controller-metrics")}

    @property
    def kube(self) -> KubeClient:
        return self.cp.client

    def start(self) -> None:
        self.procs.start(
            "redis",
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
        )
        # The repo-server runs `git` and `helm` (the project's pinned helm) from PATH.
        path = f"{bin_dir()}:{os.environ.get('PATH', '')}"
        home = self.procs.log_dir / "home"
        home.mkdir(exist_ok=True)
        common = {"PATH": path, "HOME": str(home), "ARGOCD_GPG_ENABLED": "false"}
        redis = f"127.0.0.1:{self.redis_port}"
        self._run(
            "argocd-repo-server",
            [
                "--port",
                str(self.repo_port),
                "--metrics-port",
                str(self.ports["repo-metrics"]),
                "--redis",
                redis,
                "--disable-tls",
                "--loglevel",
                "info",
            ],
            common,
        )
        self._run(
            "argocd-application-controller",
            [
                "--kubeconfig",
                str(self.cp.kubeconfig),
                "--namespace",
                NAMESPACE,
                "--repo-server",
                f"127.0.0.1:{self.repo_port}",
                "--repo-server-plaintext",
                "--redis",
                redis,
                "--metrics-port",
                str(self.ports["controller-metrics"]),
                "--app-resync",
                str(APP_RESYNC_SECONDS),
                "--self-heal-timeout-seconds",
                "2",
                # Argo CD 3 keeps resource health out of status.resources unless asked
                # (argocd-cmd-params-cm `controller.resource.health.persist` in a cluster).
                "--persist-resource-health",
                "--loglevel",
                "info",
            ],
            common,
        )

    def _run(self, component: str, args: list[str], env: dict[str, str]) -> None:
        self.procs.start(
            component, [str(self.binary), *args], {**env, "ARGOCD_BINARY_NAME": component}
        )

    # --- the argocd namespace -------------------------------------------------------------

    def install(self, crds: Path, cm_data: Mapping[str, str]) -> None:
        """Namespace, CRDs, the argocd-* ConfigMaps (argocd-cm with ``cm_data``) and Secret."""
        kube = self.kube
        kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for crd in yaml.safe_load_all(crds.read_text()):
            if crd:
                kube.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for crd in ("applications", "appprojects"):
            self.cp.wait_for(lambda c=crd: self._established(f"{c}.argoproj.io"), 60, f"{crd} CRD")
        for name in CONFIGMAPS:
            data = dict(cm_data) if name == "argocd-cm" else {}
            self.apply_configmap(name, data)
        kube.create(
            f"/api/v1/namespaces/{NAMESPACE}/secrets",
            {
                "metadata": {
                    "name": "argocd-secret",
                    "labels": {"app.kubernetes.io/name": "argocd-secret", **PART_OF},
                },
                "stringData": {"server.secretkey": base64.b64encode(os.urandom(32)).decode()},
            },
        )

    def apply_configmap(self, name: str, data: Mapping[str, str]) -> None:
        self.kube.create(
            f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            {
                "metadata": {"name": name, "labels": {"app.kubernetes.io/name": name, **PART_OF}},
                "data": dict(data),
            },
        )

    def _established(self, crd: str) -> bool:
        body = self.kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (body.get("status") or {}).get("conditions") or []
        )

    def cluster_secret(self, template: dict[str, Any]) -> dict[str, Any]:
        """The generated cluster Secret template with the admin client certificate filled in
        (applied, never committed)."""
        pki = self.cp.pki
        config = {
            "tlsClientConfig": {
                "caData": base64.b64encode((pki / "ca.crt").read_bytes()).decode(),
                "certData": base64.b64encode((pki / "admin.crt").read_bytes()).decode(),
                "keyData": base64.b64encode((pki / "admin.key").read_bytes()).decode(),
            }
        }
        secret = dict(template)
        secret["stringData"] = {**template["stringData"], "config": json.dumps(config)}
        return secret

    def apply(self, obj: dict[str, Any]) -> dict:
        """Create ``obj`` in the argocd namespace (Applications, AppProjects, Secrets)."""
        kind = obj["kind"]
        path = {
            "Application": f"{API}/applications",
            "AppProject": f"{API}/appprojects",
            "Secret": f"/api/v1/namespaces/{NAMESPACE}/secrets",
        }[kind]
        return self.kube.create(path, obj)

    # --- reading Applications ----------------------------------------------------------------

    def app(self, name: str) -> dict | None:
        try:
            return self.kube.get(f"{API}/applications/{name}", missing_ok=True)
        except KubeAPIError:
            return None

    def refresh(self, name: str, mode: str = "hard") -> None:
        """Ask the controller to compare ``name`` again now (``hard`` also skips the
        repo-server's manifest cache, so a new commit on the branch is seen)."""
        self.kube.patch(
            f"{API}/applications/{name}",
            {"metadata": {"annotations": {"argocd.argoproj.io/refresh": mode}}},
        )

    def logs(self) -> str:
        return "\n".join(
            f"--- {name} ---\n{self.procs.tail(name)}"
            for name in ("argocd-application-controller", "argocd-repo-server")
        )
