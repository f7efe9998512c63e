"""Smoke test of the built images: slurmctld, two slurmd and a login container boot from
configuration our renderer produced, and jobs submitted on the login container complete.

Networking stays off the host: every container starts with `--network none` and gets a veth
into a bridge inside a network namespace this test creates (10.250.x.0/24); nothing is
addressed in the host's namespace. Runs when the images are built (`make images`) or with
SUNK_TEST_IMAGES=1 (which builds them); otherwise it skips and says why.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from sunk.devenv import images
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.slurmconf import ClusterInputs, Endpoints, NodeSetInput, render_all

CLUSTER = "smoke"
SUBNET = "10.250.{n}.{host}"
NODES = ("smoke-cpu-0", "smoke-cpu-1")
# slurmd runs privileged in Kubernetes; `--privileged` asks for every capability, and where the
# engine's own bounding set lacks one (sandboxes drop CAP_SYS_RESOURCE) runc refuses it, so ask
# for all the engine has. The host's cgroup tree is mounted for slurmd's cgroup plugins at the
# CgroupMountpoint the test's cgroup.conf names; /sys/fs/cgroup stays the container's own view,
# which the entrypoint reads to size the node.
CGROUP_MOUNT = "/run/host-cgroup"
SLURMD_PRIVILEGES = (
    "--cap-add=ALL", "--cap-drop=SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
    "-v", f"/sys/fs/cgroup:{CGROUP_MOUNT}:rw",
)  # fmt: skip


def ref(name: str) -> str:
    return next(s.ref for s in images.images() if s.name == name)


def sh(*cmd: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def built_images() -> None:
    if os.geteuid() != 0:
        pytest.skip("the image smoke test needs root (network namespaces, docker)")
    want = os.environ.get("SUNK_TEST_IMAGES") == "1"
    problem = images.engine_problem()
    if problem and not want:
        pytest.skip(f"{problem}; set SUNK_TEST_IMAGES=1 to build the images and run this test")
    if want:
        try:
            images.build(["controller", "slurmd", "login"])
        except images.ImageBuildError as exc:
            pytest.skip(f"images could not be built here: {exc}")
    missing = [r for r in map(ref, ("controller", "slurmd", "login")) if not images.image_id(r)]
    if missing:
        pytest.skip(
            f"images not built ({', '.join(missing)}): run `make images`, or set "
            "SUNK_TEST_IMAGES=1 to build them in the test"
        )


@dataclass
class Cluster:
    """The containers and the bridge namespace of one smoke run."""

    suffix: str
    netns: str
    subnet: int
    containers: list[str] = field(default_factory=list)
    next_host: int = 1

    def addr(self, host: int) -> str:
        return SUBNET.format(n=self.subnet, host=host)

    def run(self, name: str, image: str, *args: str, opts: tuple[str, ...] = ()) -> str:
        container = f"{name}-{self.suffix}"
        self.containers.append(container)  # removed at the end even if `run` fails
        sh("docker", "run", "-d", "--name", container, "--hostname", name,
           "--network", "none", *opts, image, *args)  # fmt: skip
        self.plug(container, self.addr(self.next_host))
        self.next_host += 1
        return container

    def plug(self, container: str, addr: str) -> None:
        pid = sh("docker", "inspect", "-f", "{{.State.Pid}}", container).stdout.strip()
        veth = f"v{self.suffix[:6]}{len(self.containers)}"
        ns = ("ip", "netns", "exec", self.netns)
        sh(*ns, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pid)
        sh(*ns, "ip", "link", "set", veth, "master", "br0", "up")
        inside = ("nsenter", "-t", pid, "-n")
        sh(*inside, "ip", "addr", "add", f"{addr}/24", "dev", "eth0")
        sh(*inside, "ip", "link", "set", "eth0", "up")

    def exec(self, container: str, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return sh("docker", "exec", f"{container}-{self.suffix}", *cmd, check=False,
                  timeout=timeout)  # fmt: skip

    def running(self, name: str) -> bool:
        proc = sh("docker", "inspect", "-f", "{{.State.Running}}", f"{name}-{self.suffix}")
        return proc.stdout.strip() == "true"

    def logs(self) -> str:
        out = []
        for c in self.containers:
            proc = sh("docker", "logs", "--tail", "40", c, check=False)
            out.append(f"--- {c}\n{proc.stdout}{proc.stderr}")
        return "\n".join(out)


def render(controller_addr: str, prolog: bool) -> tuple[dict[str, str], str]:
    spec = SlurmClusterSpec.model_validate(
        {
            "clusterName": CLUSTER,
            "accounting": {"enabled": False},
            # No Kubernetes Nodes to read topology labels from: no topology.conf.
            "compute": {"generateTopology": False},
            "slurmConfig": {"cgroupConfig": {"CgroupMountpoint": CGROUP_MOUNT}},
            "scripts": {"prolog": "smoke-prolog"} if prolog else {},
        }
    )
    nodeset = NodeSetSpec.model_validate(
        {
            "clusterName": CLUSTER,
            "replicas": 2,
            "reservedMemory": "512Mi",
            "template": {
                "spec": {
                    "containers": [
                        {"name": "slurmd", "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}
                    ]
                }
            },
        }
    )
    endpoints = Endpoints(
        controller_host=f"{CLUSTER}-controller",
        controller_addr=controller_addr,
        dbd_host=f"{CLUSTER}-accounting",
        dbd_addr=controller_addr,
    )
    rendered = render_all(ClusterInputs(spec, (NodeSetInput("cpu", nodeset),), endpoints))
    return rendered.files, rendered.registrations["cpu"]


@pytest.fixture(scope="module")
def cluster(built_images, tmp_path_factory) -> Iterator[Cluster]:
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("iproute2 and util-linux (ip, nsenter) are needed for the test network")
    suffix = secrets.token_hex(4)
    subnet = 100 + secrets.randbelow(100)
    c = Cluster(suffix=suffix, netns=f"sunk-img-{suffix}", subnet=subnet)
    work = tmp_path_factory.mktemp("smoke")
    files, registration = render(c.addr(1), prolog=True)
    etc = work / "etc"
    etc.mkdir()
    for name, text in files.items():
        (etc / name).write_text(text)
    (etc / "prolog.sh").chmod(0o755)
    prolog_d = work / "prolog.d"
    prolog_d.mkdir()
    (prolog_d / "10-mark").write_text('#!/bin/sh\necho "$SLURM_JOB_ID" >> /tmp/prolog-ran\n')
    (prolog_d / "10-mark").chmod(0o755)
    (etc / "jwt").mkdir()
    jwt = etc / "jwt" / "jwt.key"
    jwt.write_bytes(secrets.token_bytes(32))
    jwt.chmod(0o400)
    os.chown(jwt, 401, 401)  # the slurm user of the images
    key = work / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    secret = ("-v", f"{key}:/etc/munge-secret/munge.key:ro")
    hosts = [f"--add-host={CLUSTER}-controller:{c.addr(1)}"]
    hosts += [f"--add-host={n}:{c.addr(2 + i)}" for i, n in enumerate(NODES)]
    hosts.append(f"--add-host={CLUSTER}-login:{c.addr(2 + len(NODES))}")
    sh("ip", "netns", "add", c.netns)
    try:
        ns = ("ip", "netns", "exec", c.netns)
        sh(*ns, "ip", "link", "set", "lo", "up")
        sh(*ns, "ip", "link", "add", "br0", "type", "bridge")
        sh(*ns, "ip", "link", "set", "br0", "up")
        c.run(f"{CLUSTER}-controller", ref("controller"), "slurmctld",
              opts=(*secret, *hosts, "-v", f"{etc}:/etc/slurm:ro",
                    "-e", "SUNK_EXTRA_ARGS=-v"))  # fmt: skip
        slurmd_opts = (
            *secret, *hosts, *SLURMD_PRIVILEGES,
            "-e", f"SUNK_CONTROLLER={c.addr(1)}:6817",
            "-v", f"{etc}/prolog.sh:/etc/slurm/prolog.sh:ro",
            "-v", f"{prolog_d}:/etc/slurm/prolog.d:ro",
        )  # fmt: skip
        # The first node registers with the renderer's string, the second derives its size
        # from its cgroup limits (--cpus / --memory) and adds the group's feature.
        c.run(NODES[0], ref("slurmd"),
              opts=(*slurmd_opts, "-e", f"SUNK_SLURMD_CONF={registration}"))  # fmt: skip
        c.run(NODES[1], ref("slurmd"),
              opts=(*slurmd_opts, "--cpus", "1", "--memory", "2g",
                    "-e", "SUNK_NODE_FEATURES=cpu",
                    "-e", "SUNK_RESERVED_MEMORY_MIB=512"))  # fmt: skip
        # The login container has no slurm.conf: its clients go configless through sackd.
        c.run(f"{CLUSTER}-login", ref("login"),
              opts=(*secret, *hosts, "-e", f"SUNK_CONTROLLER={c.addr(1)}:6817",
                    "-e", f"SUNK_CLUSTER_NAME={CLUSTER}"))  # fmt: skip
        yield c
    finally:
        for container in c.containers:
            sh("docker", "rm", "-f", container, check=False)
        sh("ip", "netns", "del", c.netns, check=False)


def wait_for(what: str, check, cluster: Cluster, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        dead = [c for c in cluster.containers if not cluster.running(c[: -len(cluster.suffix) - 1])]
        if dead:
            pytest.fail(f"container(s) exited: {', '.join(dead)}\n{cluster.logs()}")
        last = check()
        if last is True:
            return
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what} ({last!r})\n{cluster.logs()}")


def test_jobs_run_on_both_nodes(cluster: Cluster):
    login = f"{CLUSTER}-login"

    def nodes_idle():
        proc = cluster.exec(login, "sinfo", "-h", "-N", "-o", "%N %t %c %m %f")
        lines = [ln.split() for ln in proc.stdout.splitlines()]
        idle = {ln[0] for ln in lines if ln[1] == "idle"}
        return True if idle >= set(NODES) else (proc.returncode, proc.stdout, proc.stderr)

    wait_for("both slurmd idle in sinfo (from the login container)", nodes_idle, cluster)
    sizes = cluster.exec(login, "sinfo", "-h", "-N", "-o", "%N %c %m %f").stdout
    assert f"{NODES[1]} 1 1536 cpu" in sizes, sizes  # derived: 2 GiB - 512 MiB, 1 CPU

    srun = cluster.exec(login, "srun", "-N2", "-p", "cpu", "hostname", timeout=180)
    assert srun.returncode == 0, (srun.stdout, srun.stderr, cluster.logs())
    assert sorted(srun.stdout.split()) == sorted(NODES)

    batch = cluster.exec(
        login, "sbatch", "--wait", "-N1", "-o", "/tmp/smoke-%j.out", "--wrap", "hostname",
        timeout=180,
    )  # fmt: skip
    assert batch.returncode == 0, (batch.stdout, batch.stderr, cluster.logs())
    job = batch.stdout.split()[-1]
    ran = [n for n in NODES if cluster.exec(n, "cat", "/tmp/prolog-ran").returncode == 0]
    assert ran, "the prolog dispatcher ran no prolog.d script"
    marks = "".join(cluster.exec(n, "cat", "/tmp/prolog-ran").stdout for n in ran)
    assert job in marks.split()


def test_login_motd_and_sshd(cluster: Cluster):
    login = f"{CLUSTER}-login"
    motd = cluster.exec(login, "cat", "/etc/motd").stdout
    assert f"Welcome to the {CLUSTER} Slurm cluster" in motd
    ssh = cluster.exec(login, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/22 && head -c 7 <&3")
    assert ssh.stdout.startswith("SSH-2.0"), (ssh.stdout, ssh.stderr)
