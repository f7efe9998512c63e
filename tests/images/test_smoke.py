"""Smoke test of the built images: MariaDB, slurmdbd, slurmctld, slurmrestd, two slurmd and a
login container boot from configuration our renderer produced; jobs submitted on the login
container complete and are accounted.

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
from pathlib import Path

import pytest

from sunk.devenv import images
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.slurmconf import ClusterInputs, Endpoints, NodeSetInput, render_all

CLUSTER = "smoke"
SUBNET = "10.250.{n}.{host}"
NODES = ("smoke-cpu-0", "smoke-cpu-1")
# Host part of each container's address on the test bridge.
HOSTS = {
    f"{CLUSTER}-controller": 1,
    NODES[0]: 2,
    NODES[1]: 3,
    f"{CLUSTER}-login": 4,
    f"{CLUSTER}-accounting": 5,
    f"{CLUSTER}-mariadb": 6,
    f"{CLUSTER}-rest": 7,
}
DB_PASSWORD = "smoke-" + secrets.token_hex(8)
# A throwaway MariaDB for slurmdbd, built from our base (no registry): test-only tag.
MARIADB_IMAGE = f"{images.IMAGE_PREFIX}/test-mariadb:{images.SUITE}"
MARIADB_DOCKERFILE = f"""\
FROM {images.BASE_IMAGE}
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \\
      --no-install-recommends mariadb-server && rm -rf /var/lib/apt/lists/*
RUN mariadb-install-db --user=mysql --skip-test-db >/dev/null \
 && install -d -o mysql -g mysql /run/mysqld
CMD ["mariadbd", "--user=mysql", "--bind-address=0.0.0.0", "--init-file=/init.sql"]
"""
# slurmd runs with a capability set in Kubernetes (privileged where a group asks); Docker's
# `--privileged` asks for every capability, and where the
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


def sh(*cmd: str, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)
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
            images.build()
        except images.ImageBuildError as exc:
            pytest.skip(f"images could not be built here: {exc}")
    missing = [r for r in (s.ref for s in images.images()) if not images.image_id(r)]
    if missing:
        pytest.skip(
            f"images not built ({', '.join(missing)}): run `make images`, or set "
            "SUNK_TEST_IMAGES=1 to build them in the test"
        )
    # An engine that builds may still be unable to run containers (cgroups, overlay, seccomp).
    probe = sh("docker", "run", "--rm", "--network", "none", images.BASE_IMAGE, "true",
               check=False)  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"the Docker engine cannot run containers here: {probe.stderr.strip()}")


@pytest.fixture(scope="module")
def mariadb_image(built_images) -> str:
    if images.image_id(MARIADB_IMAGE) is None:
        sh("docker", "build", "--network", "host", "--force-rm", "-t", MARIADB_IMAGE, "-",
           input=MARIADB_DOCKERFILE, timeout=600,
           env=dict(os.environ, DOCKER_BUILDKIT="0"))  # fmt: skip
    return MARIADB_IMAGE


@dataclass
class Cluster:
    """The containers and the bridge namespace of one smoke run."""

    suffix: str
    netns: str
    subnet: int
    containers: list[str] = field(default_factory=list)

    def addr(self, name: str) -> str:
        return SUBNET.format(n=self.subnet, host=HOSTS[name])

    def hosts(self) -> list[str]:
        return [f"--add-host={name}:{self.addr(name)}" for name in HOSTS]

    def run(self, name: str, image: str, *args: str, opts: tuple[str, ...] = ()) -> str:
        container = f"{name}-{self.suffix}"
        self.containers.append(container)  # removed at the end even if `run` fails
        sh("docker", "run", "-d", "--name", container, "--hostname", name,
           "--network", "none", *self.hosts(), *opts, image, *args)  # fmt: skip
        self.plug(container, self.addr(name))
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

    def exec(self, name: str, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return sh("docker", "exec", f"{name}-{self.suffix}", *cmd, check=False,
                  timeout=timeout)  # fmt: skip

    def dead(self) -> list[str]:
        return [
            c
            for c in self.containers
            if sh("docker", "inspect", "-f", "{{.State.Running}}", c, check=False).stdout.strip()
            != "true"
        ]

    def uids(self, name: str) -> dict[str, str]:
        """command → uid of the container's processes (as the host's ps sees them)."""
        proc = sh("docker", "top", f"{name}-{self.suffix}", "-o", "pid,uid,comm")
        rows = [ln.split() for ln in proc.stdout.splitlines()[1:]]
        return {row[2]: row[1] for row in rows if len(row) == 3}

    def logs(self) -> str:
        out = []
        for c in self.containers:
            proc = sh("docker", "logs", "--tail", "30", c, check=False)
            out.append(f"--- {c}\n{proc.stdout}{proc.stderr}")
        return "\n".join(out)


def render(c: Cluster) -> tuple[dict[str, str], str]:
    spec = SlurmClusterSpec.model_validate(
        {
            "clusterName": CLUSTER,
            # No Kubernetes Nodes to read topology labels from: no topology.conf.
            "compute": {"generateTopology": False},
            "slurmConfig": {"cgroupConfig": {"CgroupMountpoint": CGROUP_MOUNT}},
            "scripts": {"prolog": "smoke-prolog"},
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
        controller_addr=c.addr(f"{CLUSTER}-controller"),
        dbd_host=f"{CLUSTER}-accounting",
        dbd_addr=c.addr(f"{CLUSTER}-accounting"),
        storage_host=c.addr(f"{CLUSTER}-mariadb"),
    )
    inputs = ClusterInputs(spec, (NodeSetInput("cpu", nodeset),), endpoints, (), DB_PASSWORD)
    rendered = render_all(inputs)
    return rendered.files, rendered.registrations["cpu"]


def wait_for(what: str, check, cluster: Cluster, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        dead = cluster.dead()
        if dead:
            pytest.fail(f"container(s) exited: {', '.join(dead)}\n{cluster.logs()}")
        last = check()
        if last is True:
            return
        time.sleep(2)
    pytest.fail(f"timed out waiting for {what} ({last!r})\n{cluster.logs()}")


def tcp_open(c: Cluster, name: str, port: int) -> bool:
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port}"
    return c.exec(name, "bash", "-c", probe).returncode == 0


@pytest.fixture(scope="module")
def cluster(built_images, mariadb_image, tmp_path_factory) -> Iterator[Cluster]:
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("iproute2 and util-linux (ip, nsenter) are needed for the test network")
    suffix = secrets.token_hex(4)
    c = Cluster(suffix=suffix, netns=f"sunk-img-{suffix}", subnet=100 + secrets.randbelow(100))
    work = tmp_path_factory.mktemp("smoke")
    files, registration = render(c)
    etc = work / "etc"
    etc.mkdir()
    for name, text in files.items():
        (etc / name).write_text(text)
    for script in ("prolog.sh", "epilog.sh", "sunk-lock.sh"):  # node locking is on
        (etc / script).chmod(0o755)
    (etc / "jwt").mkdir()
    jwt = etc / "jwt" / "jwt.key"
    jwt.write_bytes(secrets.token_bytes(32))
    jwt.chmod(0o400)
    os.chown(jwt, 401, 401)  # the slurm user of the images
    prolog_d = work / "prolog.d"
    prolog_d.mkdir()
    (prolog_d / "10-mark").write_text('#!/bin/sh\necho "$SLURM_JOB_ID" >> /tmp/prolog-ran\n')
    (prolog_d / "10-mark").chmod(0o755)
    key = work / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    init_sql = work / "init.sql"
    init_sql.write_text(
        f"CREATE USER IF NOT EXISTS 'slurm'@'%' IDENTIFIED BY '{DB_PASSWORD}';\n"
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';\n"
    )
    init_sql.chmod(0o644)
    secret = ("-v", f"{key}:/etc/munge-secret/munge.key:ro")
    config = ("-v", f"{etc}:/etc/slurm:ro")
    sh("ip", "netns", "add", c.netns)
    try:
        ns = ("ip", "netns", "exec", c.netns)
        sh(*ns, "ip", "link", "set", "lo", "up")
        sh(*ns, "ip", "link", "add", "br0", "type", "bridge")
        sh(*ns, "ip", "link", "set", "br0", "up")
        c.run(f"{CLUSTER}-mariadb", mariadb_image, opts=("-v", f"{init_sql}:/init.sql:ro"))
        mariadb = f"{c.addr(f'{CLUSTER}-mariadb')}:3306"
        c.run(f"{CLUSTER}-accounting", ref("controller"), "slurmdbd",
              opts=(*secret, *config, "-e", f"SUNK_DB_WAIT={mariadb}"))  # fmt: skip
        c.run(f"{CLUSTER}-controller", ref("controller"), "slurmctld",
              opts=(*secret, *config))  # fmt: skip
        c.run(f"{CLUSTER}-rest", ref("controller"), "slurmrestd",
              opts=(*secret, *config))  # fmt: skip
        shared = work / "shared"  # a shared volume: images as files (--container-image PATH)
        shared.mkdir()
        marked_image_archive(shared / "marked.tar")
        slurmd_opts = (
            *secret, *SLURMD_PRIVILEGES,
            "-v", f"{shared}:/shared:ro",
            "-e", f"SUNK_CONTROLLER={c.addr(f'{CLUSTER}-controller')}:6817",
            "-v", f"{etc}/prolog.sh:/etc/slurm/prolog.sh:ro",
            "-v", f"{etc}/epilog.sh:/etc/slurm/epilog.sh:ro",
            # the lock script with no hook (no Kubernetes here): jobs run unlocked
            "-v", f"{etc}/sunk-lock.sh:/etc/slurm/sunk-lock.sh:ro",
            "-v", f"{prolog_d}:/etc/slurm/prolog.d:ro",
        )  # fmt: skip
        # The first node registers with the renderer's string, the second derives its size
        # from its cgroup limits (--cpus / --memory) and adds the group's feature. The second
        # runs a site's image built FROM ours (examples/custom-slurmd), as a user would.
        c.run(NODES[0], ref("slurmd"),
              opts=(*slurmd_opts, "-e", f"SUNK_SLURMD_CONF={registration}"))  # fmt: skip
        c.run(NODES[1], custom_slurmd(),
              opts=(*slurmd_opts, "--cpus", "1", "--memory", "2g",
                    "-e", "SUNK_NODE_FEATURES=cpu",
                    "-e", "SUNK_RESERVED_MEMORY_MIB=512"))  # fmt: skip
        # The login container has no slurm.conf: its clients go configless through sackd.
        c.run(f"{CLUSTER}-login", ref("login"),
              opts=(*secret, "-e", f"SUNK_CONTROLLER={c.addr(f'{CLUSTER}-controller')}:6817",
                    "-e", f"SUNK_CLUSTER_NAME={CLUSTER}"))  # fmt: skip
        yield c
    finally:
        for container in c.containers:
            sh("docker", "rm", "-f", container, check=False)
        sh("ip", "netns", "del", c.netns, check=False)


LOGIN = f"{CLUSTER}-login"
REPO = Path(__file__).resolve().parents[2]
MARKED_REF = "opensunk-test/marked:smoke"
MARKED_DOCKERFILE = f"""\
FROM {images.BASE_IMAGE}
RUN echo "from the marked image" > /etc/sunk-marker && mkdir -p /work
ENV SUNK_IMAGE_VAR=from-image
WORKDIR /work
"""


def marked_image_archive(path: Path) -> None:
    """A small image whose file, variable and working directory only a task inside it sees,
    saved as `docker save` writes it."""
    sh("docker", "build", "--network", "host", "-q", "-t", MARKED_REF, "-",
       input=MARKED_DOCKERFILE, timeout=600, env=dict(os.environ, DOCKER_BUILDKIT="0"))  # fmt: skip
    sh("docker", "save", "-o", str(path), MARKED_REF, timeout=300)
    path.chmod(0o644)


CUSTOM = REPO / "examples" / "custom-slurmd"
CUSTOM_REF = "opensunk-test/slurmd-custom:smoke"


def custom_slurmd() -> str:
    """examples/custom-slurmd built on the slurmd image just built (docker caches the layer)."""
    sh("docker", "build", "--network", "host", "-q", "-t", CUSTOM_REF,
       "--build-arg", f"SUNK_SLURMD={ref('slurmd')}", str(CUSTOM), timeout=600)  # fmt: skip
    return CUSTOM_REF


@pytest.fixture(scope="module")
def ready(cluster: Cluster) -> Cluster:
    """The cluster once both slurmd are idle as the login container's sinfo sees them."""

    def nodes_idle():
        proc = cluster.exec(LOGIN, "sinfo", "-h", "-N", "-o", "%N %t")
        idle = {ln.split()[0] for ln in proc.stdout.splitlines() if ln.split()[1:] == ["idle"]}
        return True if idle >= set(NODES) else (proc.returncode, proc.stdout, proc.stderr)

    wait_for("both slurmd idle in sinfo (from the login container)", nodes_idle, cluster)
    return cluster


def test_jobs_run_on_both_nodes_and_are_accounted(ready: Cluster):
    cluster = ready
    sizes = cluster.exec(LOGIN, "sinfo", "-h", "-N", "-o", "%N %c %m %f").stdout
    assert f"{NODES[0]} 1 1536 cpu" in sizes, sizes  # the renderer's registration
    assert f"{NODES[1]} 1 1536 cpu" in sizes, sizes  # derived: 2 GiB - 512 MiB, 1 CPU

    srun = cluster.exec(LOGIN, "srun", "-N2", "-p", "cpu", "hostname", timeout=180)
    assert srun.returncode == 0, (srun.stdout, srun.stderr, cluster.logs())
    assert sorted(srun.stdout.split()) == sorted(NODES)

    batch = cluster.exec(
        LOGIN, "sbatch", "--parsable", "--wait", "-N1", "-o", "/tmp/smoke-%j.out",
        "--wrap", "hostname", timeout=180,
    )  # fmt: skip
    assert batch.returncode == 0, (batch.stdout, batch.stderr, cluster.logs())
    job = batch.stdout.split()[0]
    marks = "".join(cluster.exec(n, "cat", "/tmp/prolog-ran").stdout for n in NODES)
    assert job in marks.split(), "the prolog dispatcher did not run prolog.d for the job"

    def accounted():
        proc = cluster.exec(LOGIN, "sacct", "-n", "-X", "-P", "-j", job, "-o", "JobID,State")
        return True if f"{job}|COMPLETED" in proc.stdout else (proc.stdout, proc.stderr)

    wait_for(f"job {job} COMPLETED in sacct (slurmdbd + MariaDB)", accounted, cluster, 60)
    clusters = cluster.exec(LOGIN, "sacctmgr", "-n", "-P", "list", "cluster", "format=cluster")
    assert CLUSTER in clusters.stdout.split(), clusters


def test_a_node_on_a_site_image_built_from_ours_runs_jobs_with_its_tools(ready: Cluster):
    """examples/custom-slurmd: FROM our slurmd, plus a package and a file. The node registers
    and runs jobs through the same entrypoint, and its jobs see what the site added."""
    out = ready.exec(
        LOGIN, "srun", "-w", NODES[1], "sh", "-c",
        "echo '{\"a\": 1}' | jq .a; cat /etc/sunk-site/motd-note.txt", timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout, out.stderr, ready.logs())
    assert out.stdout.splitlines()[0] == "1", out.stdout
    assert "research group" in out.stdout
    plain = ready.exec(LOGIN, "srun", "-w", NODES[0], "sh", "-c", "command -v jq || echo none")
    assert plain.stdout.strip() == "none", plain.stdout  # our image, without the site's tools


def test_daemons_run_as_their_users(ready: Cluster):
    cluster = ready
    wait_for("sshd on the login container", lambda: tcp_open(cluster, LOGIN, 22), cluster)
    assert cluster.uids(f"{CLUSTER}-controller").get("slurmctld") == "401"
    assert cluster.uids(f"{CLUSTER}-accounting").get("slurmdbd") == "401"
    assert cluster.uids(f"{CLUSTER}-rest").get("slurmrestd") == "403"
    assert cluster.uids(NODES[0]).get("slurmd") == "0"
    for name in (f"{CLUSTER}-controller", NODES[0], LOGIN):
        assert cluster.uids(name).get("munged") == "402", name


def test_slurmrestd_answers_with_a_jwt(ready: Cluster):
    cluster = ready
    rest = cluster.addr(f"{CLUSTER}-rest")
    wait_for("slurmrestd on :6820", lambda: tcp_open(cluster, f"{CLUSTER}-rest", 6820), cluster)
    # slurmrestd rejects tokens for root; `slurm` (uid 401) exists in every image.
    token = cluster.exec(LOGIN, "scontrol", "token", "username=slurm")
    assert token.returncode == 0, (token.stdout, token.stderr)
    jwt = token.stdout.strip().removeprefix("SLURM_JWT=")
    request = (
        f"exec 3<>/dev/tcp/{rest}/6820; "
        "printf 'GET /slurm/v0.0.41/ping HTTP/1.0\\r\\nX-SLURM-USER-NAME: slurm\\r\\n"
        f"X-SLURM-USER-TOKEN: {jwt}\\r\\n\\r\\n' >&3; cat <&3"
    )
    answer = cluster.exec(LOGIN, "bash", "-c", request)
    status = answer.stdout.split("\n", 1)[0]
    rest_log = sh("docker", "logs", f"{CLUSTER}-rest-{cluster.suffix}", check=False).stderr
    assert status.split()[1:2] == ["200"], (answer.stdout[:300], rest_log[-3000:])
    assert '"pinged": "UP"' in answer.stdout


def test_login_motd_and_sshd(ready: Cluster):
    cluster = ready
    motd = cluster.exec(LOGIN, "cat", "/etc/motd").stdout
    assert f"Welcome to the {CLUSTER} Slurm cluster" in motd
    wait_for("sshd on the login container", lambda: tcp_open(cluster, LOGIN, 22), cluster)
    ssh = cluster.exec(LOGIN, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/22 && head -c 7 <&3")
    assert ssh.stdout.startswith("SSH-2.0"), (ssh.stdout, ssh.stderr)


def test_operator_image_is_the_package_as_a_non_root_user(built_images):
    image = ref("operator")
    probe = sh("docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", image,
               "-c", "import os, sunk; print(os.getuid(), sunk.__version__)")  # fmt: skip
    assert probe.stdout.split() == ["65532", images.IMAGE_TAG.split("-")[0]]
    entry = sh("docker", "image", "inspect", "-f", "{{json .Config.Entrypoint}}", image)
    assert entry.stdout.strip() == '["/opt/sunk/bin/sunk-operator"]'
    script = sh("docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", image,
                "/opt/sunk/bin/sunk-operator")  # fmt: skip
    assert "sunk.operator.main" in script.stdout


def test_a_base_with_another_slurm_series_fails_the_build(built_images):
    """One Slurm version everywhere: a slurmd image whose base carries another series (here:
    asking for 23.11 from trixie's 24.11) is refused at build time, naming both."""
    spec = images.ImageSpec(
        "slurmd", f"{images.IMAGE_PREFIX}/test-slurmd", "mismatch",
        {"BASE_IMAGE": images.BASE_IMAGE, "SLURM_VERSION": "23.11"},
    )  # fmt: skip
    cmd = images.build_command(spec, images.repo_root())
    proc = sh(*cmd, check=False, timeout=600, env=dict(os.environ, DOCKER_BUILDKIT="0"))
    assert proc.returncode != 0
    assert "carries Slurm '24.11" in proc.stdout + proc.stderr
    assert "not 23.11.x" in proc.stdout + proc.stderr
    assert images.image_id(spec.ref) is None


def test_every_slurm_image_carries_the_same_slurm(built_images):
    versions = {}
    for name in ("controller", "slurmd", "login"):
        proc = sh("docker", "run", "--rm", "--network", "none", "--entrypoint", "dpkg-query",
                  ref(name), "-W", "-f", "${Version}", "slurm-client")  # fmt: skip
        versions[name] = proc.stdout.strip()
    assert len(set(versions.values())) == 1, versions
    assert versions["slurmd"].split(":")[-1].startswith(f"{images.SLURM_VERSION}."), versions


def test_the_lua_plugins_are_in_the_images_that_load_them(built_images):
    # Debian's slurm-wlm-basic-plugins carries them (with liblua5.1-0); slurmctld, slurmd and
    # slurm-client depend on it. slurmctld loads job_submit/lua; the clients cli_filter/lua.
    wanted = {
        "controller": {"job_submit_lua.so", "cli_filter_lua.so"},
        "login": {"cli_filter_lua.so"},
        "slurmd": {"cli_filter_lua.so"},
    }
    for name, plugins in wanted.items():
        proc = sh("docker", "run", "--rm", "--network", "none", "--entrypoint", "dpkg-query",
                  ref(name), "-L", "slurm-wlm-basic-plugins")  # fmt: skip
        found = {line.rsplit("/", 1)[-1] for line in proc.stdout.split()}
        assert plugins <= found, (name, plugins - found)


def test_cuda_variant_is_slurmd_on_another_base(built_images, monkeypatch):
    """A per-CUDA slurmd is the same Dockerfile on another BASE_IMAGE. Without a registry the
    stand-in base is ours plus a marker where CUDA runtime images keep their libraries."""
    base = f"{images.IMAGE_PREFIX}/test-cuda-base:{images.SUITE}"
    dockerfile = (
        f"FROM {images.BASE_IMAGE}\n"
        "RUN mkdir -p /usr/local/cuda && echo 12.8.0 > /usr/local/cuda/version.txt\n"
        "ENV CUDA_VERSION=12.8.0\n"
    )
    sh("docker", "build", "--force-rm", "-t", base, "-", input=dockerfile,
       env=dict(os.environ, DOCKER_BUILDKIT="0"))  # fmt: skip
    monkeypatch.setenv("SUNK_SLURMD_CUDA", f"12.8={base}")
    images.build(["slurmd"])
    variant = images.cuda_variant("12.8", base).ref
    assert variant.endswith(f":{images.IMAGE_TAG}-cuda12.8")
    probe = sh("docker", "run", "--rm", "--network", "none", "--entrypoint", "bash", variant,
               "-c", "cat /usr/local/cuda/version.txt; echo $CUDA_VERSION; "
               "dpkg-query -W -f '${Version}' slurmd")  # fmt: skip
    cuda, env, slurm = probe.stdout.split()
    assert (cuda, env) == ("12.8.0", "12.8.0")
    assert slurm.split(":")[-1].startswith(f"{images.SLURM_VERSION}.")
    entry = sh("docker", "image", "inspect", "-f", "{{json .Config.Entrypoint}}", variant)
    assert entry.stdout.strip() == '["/usr/bin/tini","--","/usr/local/bin/sunk-entrypoint"]'


def test_container_image_plugin_runs_tasks_in_an_image_from_a_file(ready: Cluster):
    """spank_sunk_container.so loads in srun (login) and slurmstepd (both nodes): a two-node
    step from an image archive on a shared volume sees the image's file, environment and
    working directory, a --container-mounts bind, and runs in the step's own cgroup."""
    script = (
        "echo $(hostname) $(cat /etc/sunk-marker) $SUNK_IMAGE_VAR $(pwd) $(id -u);"
        "ls /mnt/shared; grep -c step_0 /proc/self/cgroup"
    )
    out = ready.exec(
        LOGIN, "srun", "-N2", "--container-image=/shared/marked.tar",
        "--container-mounts=/shared:/mnt/shared:ro", "bash", "-c", script, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout, out.stderr, ready.logs())
    lines = out.stdout.splitlines()
    for node in NODES:
        assert f"{node} from the marked image from-image /work 0" in lines, out.stdout
    assert lines.count("marked.tar") == 2, out.stdout
    assert all(int(n) >= 1 for n in lines if n.isdigit()), out.stdout
    host = ready.exec(LOGIN, "srun", "-N1", "cat", "/etc/sunk-marker")
    assert host.returncode != 0, host.stdout  # the node itself has no such file


def test_container_image_a_bad_image_fails_only_that_step_with_the_reason(ready: Cluster):
    out = ready.exec(LOGIN, "srun", "-N1", "--container-image=/shared/missing.sqsh", "true")
    assert out.returncode != 0
    assert "missing.sqsh: No such file or directory" in out.stderr, out.stderr
    bad = ready.exec(LOGIN, "srun", "-N1", "--container-image=Bad Image", "true")
    assert bad.returncode != 0
    assert "is not [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]" in bad.stderr, bad.stderr
    states = ready.exec(LOGIN, "sinfo", "-h", "-N", "-o", "%N %t").stdout
    assert "drain" not in states, states  # a failed step never drains its node
    ok = ready.exec(LOGIN, "srun", "-N2", "true")
    assert ok.returncode == 0, ok.stderr


def test_pmix_mpi4py_allreduce_across_two_slurmd_containers(ready: Cluster):
    """srun --mpi=pmix: Slurm's PMIx plugin wires up OpenMPI across the two nodes (mpi4py on
    the slurmd image)."""
    program = (
        "from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "print(c.Get_size(), c.allreduce(c.Get_rank() + 1), MPI.Get_processor_name())"
    )
    out = ready.exec(LOGIN, "srun", "--mpi=pmix", "-N2", "-n2", "python3", "-c", program,
                     timeout=300)  # fmt: skip
    assert out.returncode == 0, (out.stdout, out.stderr, ready.logs())
    assert sorted(out.stdout.split("\n")[:2]) == sorted(f"2 3 {n}" for n in NODES), out.stdout


def test_pmix_the_clusters_mpi_env_reaches_tasks_and_a_jobs_own_value_wins(ready: Cluster):
    """compute.mpi.env: the container plugin exports Open MPI's TCP defaults to every task (no
    TaskProlog, which a container step could not run), unless the job has the variable."""
    default = ready.exec(LOGIN, "srun", "-N1", "printenv", "OMPI_MCA_btl", "OMPI_MCA_pml")
    assert default.stdout.split() == ["self,vader,tcp", "ob1"], (default.stdout, default.stderr)
    own = ready.exec(LOGIN, "env", "OMPI_MCA_btl=self,tcp", "srun", "-N1", "printenv",
                     "OMPI_MCA_btl")  # fmt: skip
    assert own.stdout.split() == ["self,tcp"], (own.stdout, own.stderr)


def test_container_image_runtime_pulls_once_into_its_cache_on_its_own(ready: Cluster):
    """sunk-container without Slurm, as the plugin runs it: two concurrent imports of one image
    unpack it once (a lock per digest) and agree on the cache entry; a third is a cache hit.
    That tree made into a squashfs file runs a step too."""
    pull = "sunk-container pull --runtime-path /tmp/rt /shared/marked.tar"
    out = ready.exec(NODES[0], "bash", "-c", f"{pull} & {pull} & wait; {pull}", timeout=300)
    assert out.returncode == 0, (out.stdout, out.stderr)
    rootfs = {ln for ln in out.stdout.splitlines() if ln.startswith("rootfs=")}
    assert len(rootfs) == 1 and len(out.stdout.splitlines()) == 9, out.stdout
    entries = ready.exec(NODES[0], "ls", "/tmp/rt/images").stdout.split()
    assert len(entries) == 1, entries  # one unpacked image; locks and staging are dot-files
    tree = rootfs.pop().removeprefix("rootfs=")
    marker = ready.exec(NODES[0], "cat", tree + "/etc/sunk-marker")
    assert marker.stdout.strip() == "from the marked image", marker
    # the same tree as a squashfs file, as Enroot users keep images: a step runs from it
    squash = ready.exec(NODES[0], "mksquashfs", tree, "/tmp/marked.sqsh", "-quiet", "-noappend")
    assert squash.returncode == 0, squash.stderr
    out = ready.exec(LOGIN, "srun", "-w", NODES[0], "--container-image=/tmp/marked.sqsh",
                     "cat", "/etc/sunk-marker", timeout=300)  # fmt: skip
    assert out.stdout.strip() == "from the marked image", (out.stdout, out.stderr)
