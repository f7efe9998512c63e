"""Both charts on real nodes, the way a user installs them: the real helm, the charts' default
values plus one overlay for this machine (``values/real-nodes.yaml``: small Pods, MariaDB from
Debian), and Slurm driven from the login Pod with the real kubectl.

Used by the ``e2e`` test tier and by ``sunkctl dev`` (``make demo``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sunk.devenv import images as image_build
from sunk.devenv.nodes import NodeCluster, NodeClusterError
from sunk.devenv.paths import bin_dir, repo_root
from sunk.errors import ToolError
from sunk.operator.names import LABEL_CLUSTER, LABEL_COMPONENT, LABEL_NODESET

OVERLAY = Path(__file__).with_name("values") / "real-nodes.yaml"
OPERATOR_NAMESPACE = "sunk"
SLURM_NAMESPACE = "tenant-slurm"


class DeployError(ToolError):  # a RuntimeError; sunkctl dev exits 3
    """A chart did not install or the Slurm cluster did not come up; says what was seen."""


def image_archives() -> list[Path]:
    """Every image the charts deploy here, built if needed, as archives for the nodes."""
    specs = image_build.images() + image_build.dev_images()
    # always: Docker's layer cache makes an unchanged image seconds, and a changed operator
    # must not run from a stale image (build installs and starts Docker where missing)
    image_build.build([s.name for s in specs])
    return [image_build.saved_archive(s.ref) for s in specs]


@dataclass
class SlurmDeployment:
    """One release of each chart on a ``NodeCluster``."""

    cluster: NodeCluster
    cluster_name: str
    namespace: str = SLURM_NAMESPACE
    release: str = "slurm"

    def helm(self, *args: str, timeout: float = 600) -> str:
        argv = [str(bin_dir() / "helm"), f"--kubeconfig={self.cluster.kubeconfig}", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise DeployError(f"helm {' '.join(args[:2])} failed: {proc.stderr.strip()[-3000:]}")
        return proc.stdout

    def install_operator(self) -> None:
        """The sunk chart with its defaults; waits for the operator Deployment."""
        self.helm(
            "upgrade", "--install", "sunk", str(repo_root() / "charts/sunk"),
            "-n", OPERATOR_NAMESPACE, "--create-namespace", "--wait", "--timeout", "5m",
        )  # fmt: skip

    def install_slurm(
        self, *value_files: Path, upgrade: bool = True, after_overlay: tuple[Path, ...] = ()
    ) -> None:
        """The values files, this machine's overlay, then ``after_overlay`` (a test's own
        node shape, which the overlay would otherwise set)."""
        ordered = (*value_files, OVERLAY, *after_overlay)
        files = [arg for path in ordered for arg in ("-f", str(path))]
        verb = ["upgrade", "--install"] if upgrade else ["install"]
        self.helm(
            *verb, self.release, str(repo_root() / "charts/slurm"),
            "-n", self.namespace, "--create-namespace", *files,
        )  # fmt: skip

    def uninstall_slurm(self) -> None:
        self.helm("uninstall", self.release, "-n", self.namespace, "--wait", "--timeout", "3m")

    # --- observing ------------------------------------------------------------------------------

    def slurm_cluster(self) -> dict:
        return self.cluster.client.get(
            f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{self.namespace}"
            f"/slurmclusters/{self.cluster_name}"
        )

    def pods(self, component: str) -> list[dict]:
        """``component``: ``compute`` (the NodeSets' slurmd Pods) or a component label value
        (``controller``, ``login``, …)."""
        selector = f"{LABEL_CLUSTER}={self.cluster_name}," + (
            LABEL_NODESET if component == "compute" else f"{LABEL_COMPONENT}={component}"
        )
        return self.cluster.client.list(
            f"/api/v1/namespaces/{self.namespace}/pods", label_selector=selector
        )

    def running_pods(self, component: str) -> list[dict]:
        return [
            p
            for p in self.pods(component)
            if p.get("status", {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and all(c.get("ready") for c in p["status"].get("containerStatuses", []))
        ]

    def wait(self, what: str, predicate, timeout: float = 600, interval: float = 3.0):
        """Poll ``predicate``; on timeout raise with what the cluster shows."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            self.cluster.check_alive()
            try:
                value = predicate()
                if value:
                    return value
            except (DeployError, NodeClusterError, OSError, KeyError, ValueError) as exc:
                last = exc
            time.sleep(interval)
        raise DeployError(
            f"timed out after {timeout:.0f}s waiting for {what}"
            + (f" (last error: {last})" if last else "")
            + "\n"
            + self.describe()
        )

    def describe(self) -> str:
        """Pods, their states and recent Events: what a timeout message shows."""
        try:
            pods = self.cluster.kubectl("get", "pods", "-A", "-o", "wide")
            events = self.cluster.kubectl(
                "get", "events", "-A", "--sort-by=.lastTimestamp", timeout=30
            ).splitlines()[-25:]
            objects = self._sunk_objects()
            operator = self._operator_logs()
        except (NodeClusterError, ValueError, KeyError) as exc:  # kubectl failed, or odd JSON
            return f"(kubectl failed: {exc})"
        return "\n".join([pods, *events, objects, self._slurm_state(), "operator logs:", operator])

    def _slurm_state(self) -> str:
        """Slurm's nodes (state, reason) and jobs as slurmctld reports them: a rollout waits on
        them, and the Pods alone do not say which job holds a node."""
        script = (
            "sinfo --Node --noheader --format='%N %T %v %E' 2>&1; "
            "squeue --noheader --format='%i %j %T %N %r' 2>&1"
        )
        try:
            return "slurm:\n" + self.login("bash", "-c", script, timeout=30)
        except (DeployError, NodeClusterError, OSError) as exc:
            return f"slurm: (no answer: {exc})"

    def _sunk_objects(self) -> str:
        """Each SlurmCluster and NodeSet with its Ready condition (reason and message): why
        the operator holds back, where a timeout is about what it did not do."""
        lines = []
        for plural in ("slurmclusters", "nodesets"):
            listed = json.loads(self.cluster.kubectl("get", plural, "-A", "-o", "json", timeout=30))
            for item in listed.get("items", []):
                meta, status = item["metadata"], item.get("status") or {}
                ready = next(
                    (c for c in status.get("conditions", []) if c.get("type") == "Ready"), {}
                )
                release = status.get("slurmctldRelease")
                lines.append(
                    f"{plural[:-1]} {meta['namespace']}/{meta['name']}: Ready="
                    f"{ready.get('status')} {ready.get('reason')}: {ready.get('message')}"
                    + (f" slurmctldRelease={release}" if release else "")
                )
        return "\n".join(lines)

    def _operator_logs(self, lines: int = 30) -> str:
        """The last lines of each operator replica, the leader's named: a standby's log alone
        (one `kubectl logs -l` keeps the tail of the last Pod listed) hides what the leader did.
        A replica that restarted shows its previous run's end too."""
        leader = self.cluster.kubectl(
            "-n", OPERATOR_NAMESPACE, "get", "lease", "sunk-operator",
            "-o", "jsonpath={.spec.holderIdentity}", "--ignore-not-found", timeout=30,
        )  # fmt: skip
        selector = "app.kubernetes.io/component=operator"
        listed = json.loads(
            self.cluster.kubectl(
                "-n", OPERATOR_NAMESPACE, "get", "pods", "-l", selector, "-o", "json", timeout=30
            )
        )
        out = [f"(leader: {leader.strip() or 'none'})"]
        for pod in listed.get("items", []):
            name = pod["metadata"]["name"]
            statuses = pod.get("status", {}).get("containerStatuses") or []
            runs = [("", False)]
            if any(s.get("restartCount") for s in statuses):
                runs.insert(0, (" (previous run)", True))
            for title, previous in runs:
                argv = ["-n", OPERATOR_NAMESPACE, "logs", name, f"--tail={lines}"]
                if previous:
                    argv.append("--previous")
                try:
                    text = self.cluster.kubectl(*argv, timeout=30)
                except NodeClusterError as exc:
                    text = f"(no log: {exc})"
                out.append(f"--- {name}{title}\n{text.rstrip()}")
        return "\n".join(out)

    def wait_ready(self, nodes: int, timeout: float = 900) -> None:
        """SlurmCluster Ready, one Running slurmd Pod per node, every Slurm node idle."""

        def ready() -> bool:
            conditions = self.slurm_cluster().get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        self.wait(f"SlurmCluster {self.cluster_name} Ready", ready, timeout)
        self.wait(
            f"{nodes} slurmd Pods Running",
            lambda: len(self.running_pods("compute")) >= nodes,
            timeout,
        )
        self.wait("the login Pod Running", lambda: self.running_pods("login"), timeout)
        self.wait(f"{nodes} Slurm nodes idle", lambda: len(self.idle_nodes()) >= nodes, timeout)

    def idle_nodes(self) -> list[str]:
        out = self.login("sinfo", "--noheader", "--Node", "--format=%N %t")
        return [line.split()[0] for line in out.splitlines() if line.split()[1:] == ["idle"]]

    def slurm_node(self, name: str) -> tuple[str, str]:
        """(state, reason) of a Slurm node as sinfo shows them, e.g. ("drained", "k8s: …")."""
        out = self.login("sinfo", "--noheader", "--Node", f"--nodes={name}", "--format=%T|%E")
        if not out.strip():  # not registered (yet): `wait` polls on
            raise KeyError(f"Slurm has no node {name}")
        # one line per partition the node is in, all alike
        state, _, reason = out.strip().splitlines()[0].partition("|")
        return state, reason

    # --- acting -----------------------------------------------------------------------------

    def exec(self, pod: str, container: str, *command: str, timeout: float = 300) -> str:
        return self.cluster.kubectl(
            "exec", "-n", self.namespace, pod, "-c", container, "--", *command, timeout=timeout
        )

    def login_target(self) -> tuple[str, str]:
        """(Pod, container) of the running login Pod: one lookup for each command."""
        pods = self.running_pods("login")
        if not pods:
            raise DeployError("no login Pod is running")
        return pods[0]["metadata"]["name"], pods[0]["spec"]["containers"][0]["name"]

    def login(self, *command: str, timeout: float = 300) -> str:
        """Run ``command`` in the login Pod (as root, like `kubectl exec`)."""
        return self.exec(*self.login_target(), *command, timeout=timeout)

    def shell_command(self) -> str:
        """The one command a person types to get a shell in the login Pod."""
        pod, container = self.login_target()
        return shlex.join(
            [
                str(bin_dir() / "kubectl"),
                f"--kubeconfig={self.cluster.kubeconfig}",
                "exec",
                "-it",
                "-n",
                self.namespace,
                pod,
                "-c",
                container,
                "--",
                "bash",
                "-l",
            ]
        )

    def sacct_jobs(self) -> dict[str, str]:
        """Job id -> state, for the allocations ``sacct`` lists."""
        out = self.login("sacct", "--allusers", "--noheader", "--parsable2", "-X",
                         "--starttime=2000-01-01", "--format=JobID,State")  # fmt: skip
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def secret_data(self, name: str) -> dict:
        return self.cluster.client.get(f"/api/v1/namespaces/{self.namespace}/secrets/{name}")[
            "data"
        ]
