"""Slurm on Pods the operator made, on real nodes: the sunk chart with its defaults (the operator
in its image, watching every namespace), the slurm chart from ``examples/minimal-cpu.yaml``
with two partitions and users from a real LDAP directory (slapd), the operator's NetworkPolicies
enforced by kube-router on every node, jobs through the login Pod,
a directory user who logs in with SSH and runs a two-node job in their shared home, s6
services (a oneshot before slurmd, a longrun restarted, a failing oneshot that keeps its node
out, a fixed script rolled out),
slurmrestd with a JWT, a health check that drains its node beside a cordon, a slurmd Pod
deleted and recreated, an upgrade that changes a
partition, and an uninstall that keeps the keys and the controller state.

The tests share one deployment and run in file order; each asserts on what the real
components report (kubectl, sinfo, sbatch, srun, sacct, scontrol, slurmrestd)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.devenv import deploy, images
from sunk.devenv.deploy import SlurmDeployment
from sunk.devenv.nodes import NodeCluster
from sunk.devenv.paths import bin_dir
from sunk.devenv.private_registry import PrivateRegistry
from sunk.health.runner import PROGRAM
from sunk.operator import names
from sunk.slurmconf.sssd import NEGATIVE_TIMEOUT
from tests.e2e import directory
from tests.e2e.directory import Directory, SshClient
from tests.real_nodes import host_pid

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "minimal-cpu.yaml"
CLUSTER = "minimal"
# One host directory on both real nodes (they share this host), mounted by global.volumes at
# /shared on the login and slurmd Pods. (Production: NFS or a ReadWriteMany CSI volume.)
SHARED_DIR = f"/tmp/sunk-e2e-shared-{uuid.uuid4().hex[:8]}"
# The private registry's CA, as containers' certs.d (<host:port>/ca.crt), for skopeo in the
# slurmd Pods (sunk-container pulls over HTTPS).
CERTS_DIR = f"/tmp/sunk-e2e-certs-{uuid.uuid4().hex[:8]}"
SHARED = f"""
global:
  volumes:
    - {{name: shared, hostPath: {{path: {SHARED_DIR}, type: DirectoryOrCreate}}}}
    - {{name: registry-ca, hostPath: {{path: {CERTS_DIR}, type: Directory}}}}
  volumeMounts:
    - {{name: shared, mountPath: /shared}}
    - {{name: registry-ca, mountPath: /etc/containers/certs.d, readOnly: true}}
"""
PARTITIONS = (
    SHARED
    + """
login:
  s6:
    banner:
      type: oneshot
      script: echo "set up by s6" > /etc/sunk-e2e-login
# The Pod Scheduler, and slurmd Pods that leave CPU on their Nodes for the Pods it places
# (Slurm's CPU count comes from the limits).
scheduler:
  enabled: true
compute:
  # srun --container-image (SUNK's default), with the cluster's registry credentials (netrc)
  # for users without their own
  pyxis:
    enabled: true
    credentialsSecret: minimal-registry
  nodes:
    cpu:
      resources:
        requests: {cpu: "1", memory: 1Gi}
  # s6 services: a oneshot that sets the node up before slurmd, a helper that runs beside it
  s6:
    packages:
      type: oneshot
      timeoutUp: 60000
      script: |
        #!/bin/bash
        state=$(pgrep -x slurmd >/dev/null && echo running || echo absent)
        echo "v1 slurmd=$state" > /run/sunk-e2e-setup
    heartbeat:
      type: longrun
      timeoutDown: 2000
      script: |
        #!/bin/bash
        exec -a sunk-e2e-heartbeat sleep infinity
  partitions:
    - {name: batch, nodeSets: [ALL], default: true}
    - {name: short, nodeSets: [ALL], config: {MaxTime: "00:30:00"}}
# Health checks run by slurmd every 5 s in each slurmd container: the shared volume must be a
# mount point, the root file system must have 1% free, an idle node's slurmd container must
# hold under 2Gi, and a site check fails while its marker file exists (HEALTH_MARKER). A Node
# condition drains through the Syncer.
healthCheck:
  interval: 5
  mounts: [/shared]
  diskFree: {/: 1%}
  idleMemory: 2Gi
  scripts:
    marker: |
      f=/run/sunk-e2e-health-fail
      if [ -e "$f" ]; then cat "$f"; exit 1; fi
  # as node-problem-detector sets one; cleared, the node waits for a passing check
  nodeConditions:
    - {type: SunkE2EGpuXid, verify: true}
"""
)
HEALTH_MARKER = "/run/sunk-e2e-health-fail"
UPGRADED = PARTITIONS.replace('MaxTime: "00:30:00"', 'MaxTime: "00:20:00"')
# /home of the directory's users, shared by the login and slurmd Pods like /shared.
HOME_DIR = f"/tmp/sunk-e2e-home-{uuid.uuid4().hex[:8]}"
ALICE_UID = 5001
TRAIN_IMAGE = images.image_ref("train", images.DEV_IMAGE_TAG)
TRAIN_TAG = "train:e2e"


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    where = tmp_path_factory.mktemp("keys")
    return {name: directory.keypair(where, name) for name in ("alice", "wrong", "bob")}


@pytest.fixture(scope="module")
def registry(real_nodes: NodeCluster) -> Iterator[PrivateRegistry]:
    """A private registry (TLS, basic auth) in the hub's network namespace, reachable from
    the Pods, holding the tutorial's training image; its CA in CERTS_DIR for the Pods."""
    reg = PrivateRegistry(real_nodes.hub_netns).start()
    try:
        images.build(["train"])
        reg.push(images.saved_archive(TRAIN_IMAGE), TRAIN_TAG)
        reg.certs_d(Path(CERTS_DIR))
        yield reg
    finally:
        reg.stop()
        shutil.rmtree(CERTS_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm(
    real_nodes: NodeCluster,
    tmp_path_factory,
    keys: dict[str, tuple[Path, str]],
    registry: PrivateRegistry,
) -> SlurmDeployment:
    deployment = SlurmDeployment(real_nodes, CLUSTER)
    ldap = Directory(real_nodes, deployment.namespace, uuid.uuid4().hex)
    ldap.deploy(
        directory.seed_ldif(["alice", "bob"])
        + "\n"
        + directory.user_ldif("alice", ALICE_UID, keys["alice"][1])
    )
    folder = tmp_path_factory.mktemp("values")
    values = folder / "partitions.yaml"
    values.write_text(PARTITIONS)
    users = folder / "directory.yaml"
    users.write_text(directory.values(HOME_DIR))
    real_nodes.kubectl(
        "-n", deployment.namespace, "create", "secret", "generic", "minimal-registry",
        f"--from-literal=credentials={registry.netrc_line()}\n",
    )  # fmt: skip
    deployment.install_operator()
    deployment.install_slurm(EXAMPLE, values, users)
    deployment.wait_ready(nodes=len(real_nodes.nodes))
    deployment.values = values  # type: ignore[attr-defined]
    deployment.users = users  # type: ignore[attr-defined]
    deployment.directory = ldap  # type: ignore[attr-defined]
    return deployment


@pytest.fixture(scope="module")
def ssh(real_nodes: NodeCluster, tmp_path_factory) -> SshClient:
    return SshClient(real_nodes.nodes[0].netns, tmp_path_factory.mktemp("ssh") / "known_hosts")


def login_address(slurm: SlurmDeployment) -> str:
    service = slurm.cluster.client.get(
        f"/api/v1/namespaces/{slurm.namespace}/services/{names.login(CLUSTER)}"
    )
    return service["spec"]["clusterIP"]


def test_one_slurmd_pod_per_node_with_real_containers(slurm: SlurmDeployment):
    pods = slurm.running_pods("compute")
    nodes = sorted(p["spec"]["nodeName"] for p in pods)
    assert nodes == sorted(n.name for n in slurm.cluster.nodes), nodes
    for pod in pods:
        statuses = {c["name"]: c for c in pod["status"]["containerStatuses"]}
        assert statuses, pod["metadata"]["name"]
        for status in statuses.values():
            assert status["containerID"].startswith("containerd://"), status
            assert "running" in status["state"], status
        # the Pod name is the operator's, from the Node's InternalIP
        node = slurm.cluster.client.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
        address = next(
            a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"
        )
        octets = address.split(".")
        assert pod["metadata"]["name"].endswith(f"-{int(octets[2]):03d}-{int(octets[3]):03d}")


def test_sinfo_lists_both_nodes_idle(slurm: SlurmDeployment):
    pods = {p["metadata"]["name"] for p in slurm.running_pods("compute")}
    # a node registers a moment after its Pod is Ready: wait for both, then compare
    slurm.wait("both nodes idle", lambda: set(slurm.idle_nodes()) == pods, 120, 2)
    assert set(slurm.idle_nodes()) == pods


def test_sbatch_completes_in_each_partition(slurm: SlurmDeployment):
    jobs = {}
    for partition in ("batch", "short"):
        out = slurm.login(
            "sbatch", "--wait", f"--partition={partition}", "--output=/dev/null",
            "--wrap", "hostname", timeout=300,
        )  # fmt: skip
        match = re.search(r"Submitted batch job (\d+)", out)
        assert match, out
        jobs[match.group(1)] = partition
    states = slurm.wait(
        "both batch jobs COMPLETED in sacct",
        lambda: (s := slurm.sacct_jobs()) and all(s.get(j) == "COMPLETED" for j in jobs) and s,
        timeout=120,
    )
    assert all(states[j] == "COMPLETED" for j in jobs), states
    slurm.jobs = jobs  # type: ignore[attr-defined]


def test_srun_spans_two_pods_on_two_nodes(slurm: SlurmDeployment):
    out = slurm.login("srun", "-N2", "--ntasks-per-node=1", "hostname", timeout=300)
    hostnames = sorted(out.split())
    pods = sorted(p["metadata"]["name"] for p in slurm.running_pods("compute"))
    assert hostnames == pods, (out, pods)


def test_job_steps_run_under_the_runtime_default_seccomp_profile(slurm: SlurmDeployment):
    """slurmd Pods default to seccomp RuntimeDefault: every task of a two-node step runs under
    the filter (mode 2 in its /proc status), and the jobs above ran so."""
    pods = slurm.running_pods("compute")
    for pod in pods:
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    script = "echo \"$(hostname) $(awk '/^Seccomp:/ {print $2}' /proc/self/status)\""
    out = slurm.login("srun", "-N2", "--ntasks-per-node=1", "bash", "-c", script, timeout=300)
    expected = sorted(f"{p['metadata']['name']} 2" for p in pods)
    assert sorted(line.strip() for line in out.strip().splitlines()) == expected, out


def _reaches(slurm: SlurmDeployment, pod: str, container: str, ip: str, port: int) -> bool:
    """Whether ``pod`` opens a TCP connection to ``ip:port`` within 5 s (a policy drops the
    first packet, so a refused connection waits out the timeout)."""
    probe = f"timeout 5 bash -c 'exec 3<>/dev/tcp/{ip}/{port}' && echo open || echo closed"
    return slurm.exec(pod, container, "bash", "-c", probe, timeout=60).strip() == "open"


def test_network_policies_keep_slurm_and_mariadb_to_the_cluster(slurm: SlurmDeployment):
    """The operator's NetworkPolicies, enforced by kube-router on each node: a Pod of
    the namespace that is not the cluster's reaches sshd but not slurmctld or MariaDB; the
    login Pod reaches slurmctld but not MariaDB, which takes slurmdbd only. Every other test
    here runs under the same policies (the Syncer reaches slurmrestd from the operator's
    namespace; jobs, srun and sacct cross Pods and Nodes)."""
    ns = slurm.namespace
    stored = slurm.cluster.client.list(
        f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
    )
    assert sorted(p["metadata"]["name"] for p in stored) == [
        f"{CLUSTER}-{suffix}" for suffix in ("database", "login-ssh", "rest", "slurm")
    ]
    (controller,) = slurm.running_pods("controller")
    (database,) = slurm.running_pods("database")
    (accounting,) = slurm.running_pods("accounting")
    login, login_container = slurm.login_target()
    login_ip = next(p for p in slurm.running_pods("login"))["status"]["podIP"]
    image = controller["spec"]["containers"][0]["image"]
    outsider = f"outsider-{uuid.uuid4().hex[:6]}"
    slurm.cluster.client.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": outsider},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "probe", "image": image, "command": ["sleep", "3600"]}],
            },
        },
    )
    try:
        slurm.wait(f"{outsider} running", lambda: _running(slurm, outsider), 120, 2)
        slurmctld, mariadb = controller["status"]["podIP"], database["status"]["podIP"]
        assert _reaches(slurm, outsider, "probe", login_ip, 22)
        assert not _reaches(slurm, outsider, "probe", slurmctld, 6817)
        assert not _reaches(slurm, outsider, "probe", mariadb, 3306)
        assert _reaches(slurm, login, login_container, slurmctld, 6817)
        assert not _reaches(slurm, login, login_container, mariadb, 3306)
        slurmdbd = accounting["spec"]["containers"][0]["name"]
        assert _reaches(slurm, accounting["metadata"]["name"], slurmdbd, mariadb, 3306)
    finally:
        # missing_ok: once (1 run in about 10), after every probe had passed, the Pod was
        # already gone; why was not found (a Node lock's NoExecute taint is the suspect)
        slurm.cluster.client.delete(f"/api/v1/namespaces/{ns}/pods/{outsider}", missing_ok=True)


def test_s6_oneshots_ran_before_the_daemons_and_jobs_see_what_they_set_up(slurm: SlurmDeployment):
    out = slurm.login("srun", "-N2", "--ntasks-per-node=1", "cat", "/run/sunk-e2e-setup")
    assert out.splitlines() == ["v1 slurmd=absent"] * 2, out
    assert slurm.login("cat", "/etc/sunk-e2e-login") == "set up by s6\n"


def _heartbeat(slurm: SlurmDeployment, pod: str) -> str:
    return slurm.exec(pod, "slurmd", "sh", "-c", "pgrep -f '^sunk-e2e-heartbeat' || true").strip()


def test_a_killed_s6_longrun_comes_back(slurm: SlurmDeployment):
    pod = sorted(p["metadata"]["name"] for p in slurm.running_pods("compute"))[0]
    first = slurm.wait("the heartbeat longrun", lambda: _heartbeat(slurm, pod), 60, 1)
    slurm.exec(pod, "slurmd", "kill", "-9", first)
    again = slurm.wait(
        "the heartbeat restarted", lambda: (p := _heartbeat(slurm, pod)) and p != first and p
    )
    assert again.isdigit() and again != first
    assert slurm.slurm_node(pod)[0] == "idle"  # slurmd was not disturbed


def test_a_file_written_on_the_login_pod_is_read_by_srun_on_both_compute_nodes(
    slurm: SlurmDeployment,
):
    """global.volumes/volumeMounts reach the login Pod and both slurmd Pods (and no
    control-plane Pod): a file the login Pod writes to /shared, `srun -N2 cat` reads on each
    compute node."""
    shared = {"name": "shared", "hostPath": {"path": SHARED_DIR, "type": "DirectoryOrCreate"}}
    login, compute = slurm.running_pods("login"), slurm.running_pods("compute")
    assert login and len(compute) == 2, (login, compute)
    for pod in login + compute:
        assert shared in pod["spec"]["volumes"], pod["metadata"]["name"]
    for pod in slurm.running_pods("controller"):
        assert "shared" not in {v["name"] for v in pod["spec"]["volumes"]}
    token = uuid.uuid4().hex
    slurm.login("sh", "-c", f"echo {token} > /shared/from-login")
    out = slurm.login(
        "srun", "-N2", "--ntasks-per-node=1", "sh", "-c",
        'echo "$(hostname) $(cat /shared/from-login)"', timeout=300,
    )  # fmt: skip
    pods = sorted(p["metadata"]["name"] for p in compute)
    assert sorted(line.split() for line in out.splitlines() if line.strip()) == [
        [pod, token] for pod in pods
    ], out
    # and plainly, as a user would: two nodes, the same file
    out = slurm.login("srun", "-N2", "--ntasks-per-node=1", "cat", "/shared/from-login")
    assert out.split() == [token, token], out
    # slurmctld reached these sruns by the login Pod's host name (it resolves in the login
    # Pods' subdomain, which the controller Pod searches): no job waited for its completion
    (ctl,) = slurm.running_pods("controller")
    log = slurm.cluster.kubectl(
        "logs", "-n", slurm.namespace, ctl["metadata"]["name"], "-c", "slurmctld"
    )
    assert "Unable to resolve" not in log and "completion process took" not in log, log[-3000:]


def test_alice_from_the_directory_logs_in_with_her_key_and_a_wrong_key_is_refused(
    slurm: SlurmDeployment, ssh: SshClient, keys: dict[str, tuple[Path, str]]
):
    """sshd on the login Service takes alice's key from LDAP (through the sssd sidecar);
    another key, and password logins, are refused. Her home is made at the first login."""
    address = login_address(slurm)
    ok = ssh.run(keys["alice"][0], "alice", address, "id -u; id -gn; echo $HOME; cat /etc/motd")
    assert ok.returncode == 0, ok.stderr
    uid, group, home, *motd = ok.stdout.splitlines()
    assert (uid, group, home) == (str(ALICE_UID), "researchers", "/home/alice"), ok.stdout
    assert any(f"the {CLUSTER} Slurm cluster" in line for line in motd), ok.stdout
    wrong = ssh.run(keys["wrong"][0], "alice", address, "true")
    assert wrong.returncode == 255 and "Permission denied (publickey)" in wrong.stderr, wrong
    config = slurm.login("sshd", "-T")
    assert "passwordauthentication no" in config and "kbdinteractiveauthentication no" in config
    assert "authorizedkeyscommand /usr/bin/sss_ssh_authorizedkeys %u" in config, config
    # no Kubernetes API token where users log in
    token = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert ssh.run(keys["alice"][0], "alice", address, f"test -e {token}").returncode == 1


def test_the_motd_names_the_partitions_slurm_reports(
    slurm: SlurmDeployment, ssh: SshClient, keys: dict[str, tuple[Path, str]]
):
    """pam_motd runs the image's partition summary at login: sinfo's partitions, live."""
    session = ssh.run(keys["alice"][0], "alice", login_address(slurm), "cat /run/motd.dynamic")
    assert session.returncode == 0, session.stderr
    names_shown = {line.split()[0] for line in session.stdout.splitlines() if line.strip()}
    assert {"batch*", "short"} <= names_shown, session.stdout


def test_alice_has_the_same_identity_on_the_login_controller_and_compute_pods(
    slurm: SlurmDeployment,
):
    """`id alice` answers alike wherever Slurm or a user looks her up."""
    answers = {}
    for component, container in (("login", "sshd"), ("controller", "slurmctld")):
        for pod in slurm.running_pods(component):
            answers[pod["metadata"]["name"]] = slurm.exec(
                pod["metadata"]["name"], container, "id", "alice"
            ).strip()
    compute = slurm.running_pods("compute")
    assert len(compute) == 2
    for pod in compute:
        answers[pod["metadata"]["name"]] = slurm.exec(
            pod["metadata"]["name"], "slurmd", "id", "alice"
        ).strip()
    expected = f"uid={ALICE_UID}(alice) gid=5000(researchers) groups=5000(researchers)"
    assert set(answers.values()) == {expected}, answers
    for pod in compute:
        assert "sssd" in {c["name"] for c in pod["spec"]["containers"]}


def test_alice_runs_a_two_node_job_that_writes_to_her_home_under_her_uid(
    slurm: SlurmDeployment, ssh: SshClient, keys: dict[str, tuple[Path, str]]
):
    """As a researcher would: ssh in, sbatch a two-node job, read its output in ~ on the
    login Pod. The job ran on both compute Pods as alice, and the files are hers."""
    address, key = login_address(slurm), keys["alice"][0]
    script = (
        "#!/bin/sh\n"
        'srun sh -c \'echo "$(hostname) $(id -un) $(id -u)" > "$HOME/from-$(hostname)"\'\n'
        "srun hostname\n"
    )
    submit = ssh.run(
        key, "alice", address,
        f"cat > ~/job.sh <<'EOF'\n{script}EOF\n"
        "sbatch --parsable -N2 --ntasks-per-node=1 -o ~/two-nodes-%j.out -e ~/two-nodes-%j.err"
        " ~/job.sh",
    )  # fmt: skip
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    slurm.wait(
        f"job {job} of alice to complete",
        lambda: (
            slurm.login("sacct", "-X", "-n", "-P", "-j", job, "--format=State,User").strip()
            == "COMPLETED|alice"
        ),
        timeout=300,
    )
    compute = sorted(p["metadata"]["name"] for p in slurm.running_pods("compute"))
    listing = ssh.run(
        key, "alice", address,
        f"cat ~/two-nodes-{job}.out; for f in ~/from-*; do stat -c '%u %U %n' $f; cat $f; done",
    )  # fmt: skip
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert sorted(lines[:2]) == compute, listing.stdout
    for pod in compute:
        assert f"{ALICE_UID} alice /home/alice/from-{pod}" in lines, listing.stdout
        assert f"{pod} alice {ALICE_UID}" in lines, listing.stdout
        # every job so far left its slurmstepd orphaned; tini (PID 1) reaped them all
        zombies = slurm.exec(
            pod, "slurmd", "sh", "-c", "ps -eo stat=,pid=,args= | grep '^Z' || true"
        )
        assert not zombies.strip(), (pod, zombies)


def _as_alice(slurm: SlurmDeployment, ssh: SshClient, keys, command: str):
    return ssh.run(keys["alice"][0], "alice", login_address(slurm), command)


def _alice_credentials(slurm, ssh, keys, line: str | None) -> None:
    """alice's Enroot credentials file: `line`, or none."""
    if line is None:
        command = "rm -f ~/.config/enroot/.credentials"
    else:
        command = (
            "mkdir -p ~/.config/enroot && umask 077 && "
            f"printf '%s\\n' {shlex.quote(line)} > ~/.config/enroot/.credentials"
        )
    done = _as_alice(slurm, ssh, keys, command)
    assert done.returncode == 0, done.stderr


def _image(registry: PrivateRegistry) -> str:
    return f"{registry.host}#{TRAIN_TAG}"  # Pyxis's REGISTRY#IMAGE:TAG


def test_container_image_two_node_step_runs_as_alice_in_the_image_from_the_private_registry(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry
):
    """srun --container-image as SUNK users write it, with alice's own credentials: every task
    runs in the image (its file, its os-release), as alice, in the step's cgroup, with her home
    and a --container-mounts bind; with --container-remap-root she is root inside a user
    namespace that maps root to her uid."""
    _alice_credentials(slurm, ssh, keys, registry.netrc_line())
    script = (
        'echo "$(hostname) $(. /etc/os-release; echo $ID) $(id -u)'
        " $(test -f /opt/train/train.py && echo in-image) $(ls /data | head -c0)mounted"
        ' $(test -f $HOME/.config/enroot/.credentials && echo home)";'
        ' grep -c "job_${SLURM_JOB_ID}/step_${SLURM_STEP_ID}" /proc/self/cgroup'
    )
    out = _as_alice(
        slurm, ssh, keys,
        f"srun -N2 --ntasks-per-node=1 --container-image={_image(registry)}"
        " --no-container-remap-root"
        f" --container-mounts=/shared:/data:ro bash -c {shlex.quote(script)}",
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout, out.stderr)
    pods = sorted(p["metadata"]["name"] for p in slurm.running_pods("compute"))
    lines = out.stdout.splitlines()
    for pod in pods:
        assert f"{pod} debian {ALICE_UID} in-image mounted home" in lines, out.stdout
    counts = [int(n) for n in lines if n.isdigit()]  # the step's cgroup, in each hierarchy
    assert len(counts) == 2 and min(counts) >= 1, out.stdout
    remapped = _as_alice(
        slurm, ssh, keys,
        f"srun -N1 --container-image={_image(registry)} --container-remap-root"
        " sh -c 'id -u; cat /proc/self/uid_map'",
    )  # fmt: skip
    assert remapped.stdout.split() == ["0", "0", str(ALICE_UID), "1"], remapped.stdout
    no_home = _as_alice(
        slurm, ssh, keys,
        f"srun -N1 --container-image={_image(registry)} --no-container-mount-home"
        " sh -c 'test -e $HOME/.config/enroot/.credentials && echo home || echo no-home'",
    )  # fmt: skip
    assert no_home.stdout.split() == ["no-home"], (no_home.stdout, no_home.stderr)


def test_container_image_credentials_wrong_ones_fail_with_the_registry_message(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry
):
    """alice's file wins over the cluster's Secret: a wrong password fails her step with the
    registry's answer; without her file the cluster's credentials pull. No node drains."""
    wrong = registry.netrc_line().rsplit(" ", 1)[0] + " not-the-password"
    _alice_credentials(slurm, ssh, keys, wrong)
    try:
        out = _as_alice(slurm, ssh, keys, f"srun -N1 --container-image={_image(registry)} true")
    finally:
        _alice_credentials(slurm, ssh, keys, None)  # the later tests pull with the Secret's
    assert out.returncode != 0, out.stdout
    assert "authentication required" in out.stderr, out.stderr  # the registry's answer
    assert f"pulling {registry.host}/train:e2e" in out.stderr, out.stderr
    out = _as_alice(
        slurm, ssh, keys,
        f"srun -N1 --container-image={_image(registry)} --no-container-remap-root id -un",
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.split() == ["alice"], (out.stdout, out.stderr)
    states = slurm.login("sinfo", "-h", "-N", "-o", "%N %t")
    assert "drain" not in states, states


def test_container_image_missing_image_or_bad_reference_fails_only_that_step(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry
):
    missing = _as_alice(slurm, ssh, keys, f"srun -N1 --container-image={registry.host}#nope:1 true")
    assert missing.returncode != 0
    assert f"pulling {registry.host}/nope:1" in missing.stderr, missing.stderr
    assert "unknown" in missing.stderr, missing.stderr  # the registry's MANIFEST/NAME_UNKNOWN
    bad = _as_alice(slurm, ssh, keys, "srun -N1 --container-image='Not An Image' true")
    assert bad.returncode != 0
    assert "is not [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]" in bad.stderr, bad.stderr
    ok = _as_alice(slurm, ssh, keys, "srun -N2 true")
    assert ok.returncode == 0, ok.stderr
    assert "drain" not in slurm.login("sinfo", "-h", "-N", "-o", "%t")


def test_container_image_named_container_keeps_a_file_for_the_next_step(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry
):
    """--container-name: the job's second step reuses the first step's file system (it wrote
    to the image's own /opt, which alice owns in her container), then the job's end removes
    it from the node."""
    script = (
        "#!/bin/sh\n"
        f"srun --container-image={_image(registry)} --container-name=keep --container-writable"
        " sh -c 'echo kept-$SLURM_JOB_ID > /opt/train/note'\n"
        "srun --container-name=keep cat /opt/train/note\n"
    )
    out = _as_alice(
        slurm, ssh, keys,
        f"cat > ~/named.sh <<'EOF'\n{script}EOF\n"
        "sbatch --parsable --wait -N1 -o ~/named-%j.out ~/named.sh >/dev/null; echo rc=$?;"
        " cat $(ls -t ~/named-*.out | head -n1)",
    )  # fmt: skip
    assert "rc=0" in out.stdout, (out.stdout, out.stderr)
    assert re.search(r"^kept-\d+$", out.stdout, re.M), out.stdout
    job = re.search(r"^kept-(\d+)$", out.stdout, re.M)[1]
    for pod in (p["metadata"]["name"] for p in slurm.running_pods("compute")):
        # the job's epilog (SPANK job_epilog) removes its containers, after --wait returned
        slurm.wait(
            f"job {job}'s containers gone from {pod}",
            lambda pod=pod: job not in slurm.exec(pod, "slurmd", "sh", "-c", JOBS_LISTING).split(),
            timeout=60,
        )


def test_container_image_sbatch_runs_the_batch_script_in_the_image(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry
):
    """`sbatch --container-image`, as Pyxis has it: the batch script itself runs in the image."""
    out = _as_alice(
        slurm, ssh, keys,
        f"sbatch --parsable --wait -N1 --container-image={_image(registry)} -o ~/in-image-%j.out"
        " --wrap 'test -f /opt/train/train.py && echo batch-in-image' >/dev/null; echo rc=$?;"
        " cat $(ls -t ~/in-image-*.out | head -n1)",
    )  # fmt: skip
    assert "rc=0" in out.stdout and "batch-in-image" in out.stdout, (out.stdout, out.stderr)


JOBS_LISTING = "ls /var/lib/sunk/containers/jobs 2>/dev/null || true"
MPI_PROGRAM = (
    "from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "print(c.Get_size(), c.allreduce(c.Get_rank() + 1), MPI.Get_processor_name())"
)


@pytest.mark.parametrize("where", ["host", "container"])
def test_pmix_allreduce_over_four_ranks_on_two_pods(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry, where: str
):
    """srun --mpi=pmix -N2 -n4: OpenMPI through Slurm's PMIx plugin, on the slurmd image's
    mpi4py and inside the training image (PMIx's directories shared with the container); two
    ranks per one-CPU node here (--overcommit)."""
    image = f" --container-image={_image(registry)}" if where == "container" else ""
    out = _as_alice(
        slurm, ssh, keys,
        f"srun --mpi=pmix -N2 -n4 --overcommit{image} python3 -c {shlex.quote(MPI_PROGRAM)}",
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout, out.stderr)
    pods = sorted(p["metadata"]["name"] for p in slurm.running_pods("compute"))
    assert sorted(out.stdout.splitlines()) == sorted(f"4 10 {p}" for p in pods for _ in (1, 2))


TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "train-on-sunk.md"


def tutorial_commands() -> str:
    """The tutorial's runnable blocks (```bash tutorial), in order, as one shell script."""
    blocks = re.findall(r"^```bash tutorial\n(.*?)^```$", TUTORIAL.read_text(), re.M | re.S)
    assert len(blocks) >= 4, blocks
    return "".join(blocks)


def test_tutorial_train_on_sunk_runs_as_written_and_resumes_after_a_requeue(
    slurm: SlurmDeployment, ssh: SshClient, keys, registry: PrivateRegistry
):
    """docs/tutorials/train-on-sunk.md, its commands as written, as alice on the login Pod:
    4 MPI ranks on 2 Pods in the training image, a falling loss, a checkpoint in her home,
    `scontrol requeue`, and a run that resumes from the checkpoint and finishes."""
    _alice_credentials(slurm, ssh, keys, registry.netrc_line())
    tag = TRAIN_TAG.split(":", 1)[1]
    script = f"export REGISTRY={registry.host} TAG={tag}\nset -e\n{tutorial_commands()}"
    out = ssh.run(keys["alice"][0], "alice", login_address(slurm), script, timeout=1500)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    log = out.stdout
    assert "world_size=4" in log, log
    losses = [float(x) for x in re.findall(r"^step=\d+ loss=([0-9.]+)$", log, re.M)]
    assert len(losses) >= 6 and losses[-1] < losses[0] / 4, losses  # the loss falls
    resumed = re.search(r"^resumed from step=(\d+) ", log, re.M)
    assert resumed and int(resumed[1]) >= 50, log[-2000:]  # from the checkpoint, not step 0
    assert re.search(r"^done step=200 loss=", log, re.M), log[-2000:]
    ckpt = _as_alice(slurm, ssh, keys, "stat -c '%U %s' ~/train/ckpt.npz")
    assert ckpt.stdout.split()[0] == "alice", ckpt.stdout
    job = re.search(r"^submitted job (\d+)$", log, re.M)
    assert job, log[:500]
    record = slurm.wait(  # COMPLETING while its epilog runs
        f"job {job[1]} COMPLETED",
        lambda: (
            (r := slurm.login("scontrol", "show", "job", job[1]))
            and "JobState=COMPLETED" in r
            and r
        ),
        timeout=120,
    )
    assert "Restarts=1" in record, record  # one requeue


def test_a_user_added_to_the_directory_logs_in_without_a_restart(
    slurm: SlurmDeployment, ssh: SshClient, keys: dict[str, tuple[Path, str]]
):
    """bob is refused before he exists; once added to LDAP he logs in within the documented
    delay (a failed lookup is believed for NEGATIVE_TIMEOUT seconds), no Pod restarted."""
    address = login_address(slurm)
    before = {p["metadata"]["uid"] for p in slurm.running_pods("login")}
    refused = ssh.run(keys["bob"][0], "bob", address, "true")
    assert refused.returncode == 255, refused
    slurm.directory.add(directory.user_ldif("bob", 5002, keys["bob"][1]))  # type: ignore[attr-defined]
    added = time.monotonic()
    # Watch the lookup, not ssh: every failed login from one address counts against it in
    # sshd's PerSourcePenalties, and a few would shut this client out for a while.
    slurm.wait(
        "bob to resolve on the login Pod",
        lambda: "bob:" in slurm.login("sh", "-c", "getent passwd bob || true"),
        timeout=NEGATIVE_TIMEOUT + 45,
        interval=2,
    )
    print(f"bob resolved {time.monotonic() - added:.1f}s after being added")
    out = ssh.run(keys["bob"][0], "bob", address, "id -u")
    assert out.returncode == 0 and out.stdout.strip() == "5002", out
    assert {p["metadata"]["uid"] for p in slurm.running_pods("login")} == before


def test_a_restarted_login_pod_keeps_its_host_key(
    slurm: SlurmDeployment, ssh: SshClient, keys: dict[str, tuple[Path, str]]
):
    """The client's known_hosts (written at the first login) still matches after the login
    Pod is replaced: StrictHostKeyChecking=yes would refuse a new key."""
    assert ssh.known_hosts.exists()
    (pod,) = slurm.running_pods("login")
    slurm.cluster.kubectl("delete", "pod", "-n", slurm.namespace, pod["metadata"]["name"])
    slurm.wait(
        "a new login Pod",
        lambda: [
            p for p in slurm.running_pods("login") if p["metadata"]["uid"] != pod["metadata"]["uid"]
        ],
        timeout=300,
    )
    again = slurm.wait(
        "alice to log in again",
        lambda: (
            (r := ssh.run(keys["alice"][0], "alice", login_address(slurm), "ls ~")).returncode == 0
            and r
        ),
        timeout=120,
        interval=3,
    )
    assert "two-nodes-" in again.stdout, again.stdout


def test_slurmrestd_answers_a_jwt_through_its_service(slurm: SlurmDeployment):
    # slurmrestd rejects tokens for root; `slurm` (uid 401) exists in every image
    token = slurm.login("scontrol", "token", "username=slurm").strip()
    jwt = token.removeprefix("SLURM_JWT=")
    service = f"{names.rest(CLUSTER)}.{slurm.namespace}.svc.cluster.local"
    request = (
        f"exec 3<>/dev/tcp/{service}/6820; "
        "printf 'GET /slurm/v0.0.41/ping HTTP/1.0\\r\\nX-SLURM-USER-NAME: slurm\\r\\n"
        f"X-SLURM-USER-TOKEN: {jwt}\\r\\n\\r\\n' >&3; cat <&3"
    )
    answer = slurm.login("bash", "-c", request)
    assert answer.split("\n", 1)[0].split()[1:2] == ["200"], answer[:500]
    assert '"pinged": "UP"' in answer, answer[:2000]


def _first_process(slurm: SlurmDeployment, pod: str, container: str) -> tuple[set[str], int]:
    """(its real, effective, saved and file-system uids; its capability bounding set) of the
    container's PID 1, the daemon its entrypoint became."""
    status = slurm.exec(pod, container, "cat", "/proc/1/status")
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return set(fields["Uid"].split()), int(fields["CapBnd"].strip(), 16)


def test_the_control_plane_daemons_start_as_their_own_users(slurm: SlurmDeployment):
    """None of them starts as root: slurmctld, slurmdbd and the reconfigure loop run as
    SlurmUser (401), slurmrestd as 403, the control plane's munge sidecars as munge (402), each
    with an empty capability bounding set, which a process that started as root and dropped
    to its user would not have. The state-owner init container gave slurmctld its state
    volume, and the reconfigure loop may still reconfigure slurmctld."""
    (controller,) = slurm.running_pods("controller")
    (accounting,) = slurm.running_pods("accounting")
    (rest,) = slurm.running_pods("rest")
    for pod, container, uid in (
        (controller, "slurmctld", "401"),
        (controller, "munge", "402"),
        (accounting, "slurmdbd", "401"),
        (accounting, "munge", "402"),
        (rest, "slurmrestd", "403"),
        (rest, "munge", "402"),
    ):
        name = pod["metadata"]["name"]
        uids, bounding = _first_process(slurm, name, container)
        assert uids == {uid}, (name, container, uids)
        assert bounding == 0, (name, container, hex(bounding))
    assert "slurmrestd" in slurm.exec(rest["metadata"]["name"], "slurmrestd", "cat", "/proc/1/comm")
    (owner,) = controller["status"]["initContainerStatuses"]
    assert owner["name"] == "state-owner"
    assert owner["state"]["terminated"]["exitCode"] == 0, owner
    name = controller["metadata"]["name"]
    assert slurm.exec(name, "slurmctld", "stat", "-c", "%u", "/var/spool/slurmctld").strip() == (
        "401"
    )
    assert slurm.exec(name, "reconfigure", "id", "-u").strip() == "401"
    slurm.exec(name, "reconfigure", "scontrol", "reconfigure")  # raises unless it exits 0


def _patch_node(slurm: SlurmDeployment, name: str, patch: dict) -> None:
    slurm.cluster.client.patch(f"/api/v1/nodes/{name}", patch)


def test_syncer_drains_the_slurm_node_of_a_cordoned_node_and_resumes_it(slurm: SlurmDeployment):
    pod = slurm.running_pods("compute")[0]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    reason = f"k8s: Node {node} cordoned: e2e maintenance"
    _patch_node(
        slurm,
        node,
        {
            "spec": {"unschedulable": True},
            "metadata": {"annotations": {"node.coreweave.cloud/cordonReason": "e2e maintenance"}},
        },
    )
    try:
        state = slurm.wait(
            f"{name} drained for the cordon",
            lambda: (s := slurm.slurm_node(name))[1] == reason and "drain" in s[0] and s,
            timeout=120,
        )
        assert "drain" in state[0], state
        # an administrator resumes it while the Node is still cordoned: drained again
        slurm.login("scontrol", "update", f"nodename={name}", "state=resume")
        slurm.wait(
            f"{name} drained again",
            lambda: slurm.slurm_node(name)[1] == reason,
            timeout=120,
        )
    finally:
        _patch_node(
            slurm,
            node,
            {
                "spec": {"unschedulable": None},
                "metadata": {"annotations": {"node.coreweave.cloud/cordonReason": None}},
            },
        )
    slurm.wait(f"{name} idle after the uncordon", lambda: name in slurm.idle_nodes(), 120)
    # a Syncer drain is not a Slurm drain: nothing was mirrored onto the Node
    annotations = slurm.cluster.client.get(f"/api/v1/nodes/{node}")["metadata"].get(
        "annotations", {}
    )
    assert "sunk.coreweave.com/drain" not in annotations


def test_a_drain_started_in_slurm_shows_on_the_node_and_pod_and_is_left_alone(
    slurm: SlurmDeployment,
):
    pod = slurm.running_pods("compute")[-1]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    slurm.login("scontrol", "update", f"nodename={name}", "state=drain", "reason=e2e bad GPU")

    def mirrored() -> dict | None:
        obj = slurm.cluster.client.get(f"/api/v1/nodes/{node}")
        if (obj["metadata"].get("annotations") or {}).get("sunk.coreweave.com/drain") != (
            "e2e bad GPU"
        ):
            return None
        return obj

    obj = slurm.wait("the Slurm drain on the Node", mirrored, timeout=120)
    cordon = [c for c in obj["status"]["conditions"] if c["type"] == "SlurmCordon"]
    assert cordon and cordon[0]["status"] == "True", cordon
    live = slurm.cluster.client.get(f"/api/v1/namespaces/{slurm.namespace}/pods/{name}")
    drain = [c for c in live["status"]["conditions"] if c["type"] == "SlurmDrain"]
    assert drain and drain[0]["status"] == "True" and drain[0]["message"] == "e2e bad GPU"
    time.sleep(12)  # two Syncer passes: a drain that started in Slurm is never touched
    assert slurm.slurm_node(name)[1] == "e2e bad GPU"
    slurm.login("scontrol", "update", f"nodename={name}", "state=resume")

    def cleared() -> bool:
        obj = slurm.cluster.client.get(f"/api/v1/nodes/{node}")
        conds = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
        return (
            "sunk.coreweave.com/drain" not in (obj["metadata"].get("annotations") or {})
            and conds.get("SlurmCordon") == "False"
        )

    slurm.wait("the Node annotation and SlurmCordon cleared", cleared, timeout=120)


def test_health_check_drains_a_pod_node_and_shares_the_reason_with_the_syncer(
    slurm: SlurmDeployment,
):
    """The slurmd image's runner, started by slurmd in a configless Pod, drains its node while
    a check fails and lifts only its own part of the reason; the Syncer's part (a cordon) goes
    in front of it and is lifted on the uncordon (sunk.health.reasons)."""
    pod = slurm.running_pods("compute")[0]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    health = "health: marker: e2e xid 79"
    k8s = f"k8s: Node {node} cordoned: e2e health"

    def reason_is(expected: str):
        return lambda: (s := slurm.slurm_node(name))[1] == expected and "drain" in s[0] and s

    slurm.exec(name, "slurmd", "sh", "-c", f"echo 'e2e xid 79' > {HEALTH_MARKER}")
    uncordon = {
        "spec": {"unschedulable": None},
        "metadata": {"annotations": {"node.coreweave.cloud/cordonReason": None}},
    }
    try:
        slurm.wait(f"{name} drained by its check", reason_is(health), timeout=60, interval=1)
        # counted per check and per partition (the Syncer reads the metrics every 30 s)
        labels = f'cluster="{CLUSTER}",namespace="{slurm.namespace}"'
        text = _scrape(slurm, f'slurm_nodes_health_drained{{check="marker",{labels}}} 1.0')
        assert f'slurm_partition_nodes_health_drained{{{labels},partition="batch"}} 1.0' in text
        # the passive runs' own results, recorded in the node's Extra by the runner
        failed = f'slurm_health_check_passive_nodes{{check="marker",{labels},result="failed"}}'
        text = _scrape(slurm, f"{failed} 1.0")
        passed = f'slurm_health_check_passive_nodes{{check="mounts",{labels},result="passed"}}'
        assert f"{passed} 2.0" in text, text[-3000:]
        assert f'slurm_health_check_passive_duration_seconds{{check="disk-free",{labels}}}' in text
        _patch_node(
            slurm,
            node,
            {
                "spec": {"unschedulable": True},
                "metadata": {"annotations": {"node.coreweave.cloud/cordonReason": "e2e health"}},
            },
        )
        slurm.wait("the cordon in front", reason_is(f"{k8s} | {health}"), timeout=120)
        slurm.exec(name, "slurmd", "rm", "-f", HEALTH_MARKER)
        slurm.wait("the check's part lifted", reason_is(k8s), timeout=60, interval=1)
        _patch_node(slurm, node, uncordon)
        slurm.wait(f"{name} idle after the uncordon", lambda: name in slurm.idle_nodes(), 120)
    finally:
        slurm.exec(name, "slurmd", "rm", "-f", HEALTH_MARKER)
        _patch_node(slurm, node, uncordon)
    out = slurm.exec(name, "slurmd", "sunk-health")  # by hand, as an admin runs it: all pass
    for check in ("disk-free", "idle-memory", "marker", "mounts"):
        assert f"sunk-health: {name}: {check}: ok" in out, out


def _node_condition(slurm: SlurmDeployment, node: str, status: str, message: str) -> None:
    """Set a Node condition the way node-problem-detector does: a strategic merge patch of the
    Node's status (conditions merge by type)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "SunkE2EGpuXid", "status": status, "message": message,
                 "reason": "E2E", "lastTransitionTime": now, "lastHeartbeatTime": now}  # fmt: skip
    slurm.cluster.client.patch(
        f"/api/v1/nodes/{node}/status", {"status": {"conditions": [condition]}}, strategic=True
    )


def test_health_check_node_condition_drains_and_clears_only_after_a_passing_check(
    slurm: SlurmDeployment,
):
    """`healthCheck.nodeConditions` with `verify`: the Syncer drains for the condition
    (`k8s: <type>: <message>`); cleared while a check fails, the check's part keeps the node
    out until it passes; cleared with every check passing, the Syncer marks it
    `sunk:verify-undrain` and the next passing run lifts it."""
    pod = slurm.running_pods("compute")[-1]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    k8s = "k8s: SunkE2EGpuXid: XID 79 on GPU 3"
    health = "health: marker: e2e ecc"

    def reason_is(expected: str):
        return lambda: (s := slurm.slurm_node(name))[1] == expected and "drain" in s[0] and s

    try:
        _node_condition(slurm, node, "True", "XID 79 on GPU 3")
        slurm.wait(f"{name} drained for the condition", reason_is(k8s), timeout=120)
        slurm.exec(name, "slurmd", "sh", "-c", f"echo 'e2e ecc' > {HEALTH_MARKER}")
        slurm.wait("the check's part behind it", reason_is(f"{k8s} | {health}"), 60, 1)
        _node_condition(slurm, node, "False", "")
        slurm.wait("the check's part alone", reason_is(health), timeout=120)
        slurm.exec(name, "slurmd", "rm", "-f", HEALTH_MARKER)
        slurm.wait(f"{name} idle after the check passed", lambda: name in slurm.idle_nodes(), 60)
        # again, every check passing when it clears: verified by the next run
        _node_condition(slurm, node, "True", "XID 79 on GPU 3")
        slurm.wait(f"{name} drained again", reason_is(k8s), timeout=120)
        _node_condition(slurm, node, "False", "")
        slurm.wait(f"{name} idle after its verify run", lambda: name in slurm.idle_nodes(), 120)
    finally:
        slurm.exec(name, "slurmd", "rm", "-f", HEALTH_MARKER)
        _node_condition(slurm, node, "False", "")
    controller = slurm.running_pods("controller")[0]["metadata"]["name"]
    log = slurm.cluster.kubectl(
        "logs", "-n", slurm.namespace, controller, "-c", "slurmctld", timeout=60
    )
    assert f"{k8s} (cleared; sunk:verify-undrain)" in log, log[-3000:]


def _scrape(slurm: SlurmDeployment, sample: str, timeout: float = 120) -> str:
    """The operator's /metrics once it has ``sample`` (read through the metrics Service from
    the login Pod, as Prometheus would)."""
    (service,) = [
        s["metadata"]["name"]
        for s in slurm.cluster.client.list("/api/v1/namespaces/sunk/services")
        if s["metadata"]["name"].endswith("operator-metrics")
    ]
    request = (
        f"exec 3<>/dev/tcp/{service}.sunk.svc.cluster.local/8080; "
        "printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
    )

    def scraped() -> str | None:
        text = slurm.login("bash", "-c", request)
        return text if sample in text else None

    return slurm.wait(f"{sample} in the operator's /metrics", scraped, timeout)


# Active checks added by a helm upgrade (the checks file reloads: no Pod restarts): one the
# operator runs a minute after it sees it, one with a threshold no run meets, run by hand. The
# same upgrade turns on the passive idle-processes check (left off in the shared values: a
# leftover process would drain a node under the other tests).
ACTIVE = """
healthCheck:
  idleProcesses: true
  active:
    allreduce:
      every: 60
      allreduce: {minBusBandwidth: 1Ki, size: 1Mi, iterations: 5}
    allreduce-strict:
      every: 31536000
      allreduce: {minBusBandwidth: 1Pi, size: 1Mi, iterations: 5}
"""


def test_health_check_active_allreduce_runs_as_a_job_and_a_threshold_no_run_meets_drains(
    slurm: SlurmDeployment,
):
    """`healthCheck.active`: the operator submits the two-node MPI allreduce check as a Slurm
    job; its result per node reaches the metrics. Run by hand with a threshold no run can meet,
    it drains both nodes; removing that check from the values returns them to service (a
    passing periodic run lifts a drain whose check is no longer configured)."""
    values: Path = slurm.values  # type: ignore[attr-defined]
    extra = values.parent / "health-active.yaml"
    extra.write_text(ACTIVE)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in slurm.running_pods("compute")}
    pods = sorted(uids)
    labels = f'cluster="{CLUSTER}",namespace="{slurm.namespace}"'
    slurm.install_slurm(EXAMPLE, values, slurm.users, extra)  # type: ignore[attr-defined]
    try:

        def reloaded() -> bool:
            read = [slurm.exec(p, "slurmd", "cat", "/etc/sunk/health/checks.json") for p in pods]
            return all("allreduce-strict" in text for text in read)

        slurm.wait("the active checks in both slurmd Pods", reloaded, 180, 5)
        now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in slurm.running_pods("compute")}
        assert now == uids, "the slurmd Pods were replaced for a change of the checks"
        _idle_processes_drain_and_lift(slurm, pods[0])
        check = f'check="allreduce",{labels}'
        text = _scrape(slurm, f"slurm_health_check_last_result{{{check}}} 1.0", 300)
        for pod in pods:
            assert f'slurm_health_check_node_result{{{check},node="{pod}"}} 1.0' in text, text
        busbw = re.search(rf"slurm_health_check_value{{{check}}} ([0-9.e+]+)", text)
        assert busbw and float(busbw.group(1)) > 1024, text[-2000:]

        script = f"{PROGRAM} --active allreduce-strict"
        out = slurm.login(
            "bash", "-c",
            f"sbatch --parsable --wait --exclusive -N2 -o /tmp/strict-%j.out --wrap '{script}'; "
            "echo rc=$?",
        )  # fmt: skip
        assert "rc=1" in out, out
        for pod in pods:
            state, reason = slurm.slurm_node(pod)
            assert "drain" in state, (pod, state, reason)
            assert re.fullmatch(
                r"health: allreduce-strict: bus bandwidth [0-9.]+ [KMGT]?B/s below 1125\.9 TB/s",
                reason,
            ), reason
    finally:
        slurm.login("scancel", "--name=sunk-health-allreduce")
        slurm.install_slurm(EXAMPLE, values, slurm.users)  # type: ignore[attr-defined]
    slurm.wait(
        "both nodes back once the strict check left the values",
        lambda: set(slurm.idle_nodes()) >= set(pods),
        240,
        5,
    )


def _idle_processes_drain_and_lift(slurm: SlurmDeployment, pod: str) -> None:
    """A user's process left in an idle slurmd container drains its node with
    `health: idle-processes: …`; once it is gone the next periodic run lifts the drain."""
    leftover = "setpriv --reuid=4242 --regid=4242 --clear-groups sleep 900"
    slurm.exec(pod, "slurmd", "sh", "-c", f"nohup {leftover} >/dev/null 2>&1 &")
    try:
        expected = (
            "health: idle-processes: 1 user process(es) left on an idle node (uid 4242: sleep)"
        )
        slurm.wait(
            f"{pod} drained by idle-processes",
            lambda: (s := slurm.slurm_node(pod))[1] == expected and "drain" in s[0] and s,
            timeout=60,
            interval=1,
        )
    finally:
        slurm.exec(pod, "slurmd", "sh", "-c", "pkill -u 4242 || true")
    slurm.wait(f"{pod} idle once the process is gone", lambda: pod in slurm.idle_nodes(), 60, 1)


def test_operator_metrics_carry_the_slurm_cluster_state(slurm: SlurmDeployment):
    """The Syncer feeds SUNK's slurm_* gauges from slurmrestd into the operator's /metrics."""
    labels = f'{{cluster="{CLUSTER}",namespace="{slurm.namespace}"}}'
    text = _scrape(slurm, f"slurm_nodes_total{labels} 2.0")
    assert f"slurm_metrics_up{labels} 1.0" in text
    assert "# HELP slurm_nodes_idle " in text
    assert f'kube_sunk_nodeset_ready{{namespace="{slurm.namespace}",nodeset="cpu"}} 2' in text


def test_a_deleted_slurmd_pod_comes_back_on_its_node(slurm: SlurmDeployment):
    victim = slurm.running_pods("compute")[0]
    name, node, uid = (
        victim["metadata"]["name"],
        victim["spec"]["nodeName"],
        victim["metadata"]["uid"],
    )
    slurm.cluster.kubectl("delete", "pod", "-n", slurm.namespace, name, "--wait=false")

    def replaced() -> dict | None:
        for pod in slurm.running_pods("compute"):
            if pod["metadata"]["name"] == name and pod["metadata"]["uid"] != uid:
                return pod
        return None

    pod = slurm.wait(f"{name} recreated and Running", replaced, timeout=300)
    assert pod["spec"]["nodeName"] == node
    slurm.wait(f"{name} idle in Slurm", lambda: name in slurm.idle_nodes(), timeout=300)


# --- safe removal: no running job is killed --------------------------------------------------

LOCK = "sunk.coreweave.com/lock"
STARTED = "/tmp/sunk-e2e-started"  # in the slurmd container: the job script has begun


def _lock_state(slurm: SlurmDeployment, node: str) -> tuple[str | None, str | None, bool]:
    """The Node's lock: (state annotation, holders, lock taint present)."""
    n = slurm.cluster.client.get(f"/api/v1/nodes/{node}")
    ann = n["metadata"].get("annotations") or {}
    tainted = any(t["key"] == LOCK for t in n["spec"].get("taints") or [])
    return ann.get(LOCK), ann.get(f"{LOCK}-jobs"), tainted


def _pod_lock(slurm: SlurmDeployment, name: str) -> str | None:
    pod = _pod(slurm, name) or {"metadata": {}}
    return (pod["metadata"].get("annotations") or {}).get(LOCK)


def _unlocked(slurm: SlurmDeployment, node: str) -> bool:
    state, holders, tainted = _lock_state(slurm, node)
    return state in (None, "false") and not holders and not tainted


def _locked_job(slurm: SlurmDeployment, pod: str, *extra: str) -> str:
    """A job on ``pod`` that marks its start, then runs until ``_release``."""
    slurm.exec(pod, "slurmd", "rm", "-f", STARTED, RELEASE)
    argv = (
        "sbatch", "--parsable", f"--nodelist={pod}", "--output=/dev/null", *extra,
        "--wrap", f"touch {STARTED}; until [ -e {RELEASE} ]; do sleep 1; done",
    )  # fmt: skip
    out = slurm.wait(f"a job accepted for {pod}", lambda: slurm.login(*argv), 120, 3)
    job = out.strip().split(";")[0]
    slurm.wait(
        f"job {job} script started on {pod}",
        lambda: "yes" in slurm.exec(pod, "slurmd", "sh", "-c", f"[ ! -e {STARTED} ] || echo yes"),
        180,
        1,
    )
    return job


def _pause_pod(slurm: SlurmDeployment, name: str, **spec: Any) -> dict:
    """A Pod of the pause image every node has, with ``spec`` (its node, its scheduler...)."""
    container: dict[str, Any] = {"name": "pause", "image": "registry.k8s.io/pause:3.10.1"}
    if "resources" in spec:
        container["resources"] = spec.pop("resources")
    return slurm.cluster.client.create(
        f"/api/v1/namespaces/{slurm.namespace}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {**spec, "containers": [container]},
        },
    )


def _bystander(slurm: SlurmDeployment, node: str, name: str) -> dict:
    """A Pod with no lock toleration on ``node``."""
    return _pause_pod(slurm, name, nodeName=node, terminationGracePeriodSeconds=1)


def _end_job(slurm: SlurmDeployment, pod: str, job: str, node: str) -> None:
    """Let the job finish, then the epilog unlocks the Node (or fail loudly, and scancel so
    the next tests find the node free)."""
    try:
        _release(slurm, pod)
        slurm.wait(f"job {job} done", lambda: _job_state(slurm, job) == "", 120, 1)
    finally:
        slurm.login("bash", "-c", f"scancel {job} 2>/dev/null || true")
    slurm.wait(f"{node} unlocked after job {job}", lambda: _unlocked(slurm, node), 120, 1)


def test_a_job_locks_its_node_and_evicts_pods_that_do_not_tolerate_the_lock(
    slurm: SlurmDeployment,
):
    """The prolog locks the Node through the operator's hook; the Pod without the toleration
    is gone before the job script starts; the epilog unlocks."""
    pod = slurm.running_pods("compute")[0]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    slurm.wait(f"{node} unlocked", lambda: _unlocked(slurm, node), 120, 1)
    path = f"/api/v1/namespaces/{slurm.namespace}/pods/lock-bystander"
    bystander = _bystander(slurm, node, "lock-bystander")
    slurm.wait(
        "the bystander running",
        lambda: (
            (slurm.cluster.client.get(path, missing_ok=True) or {}).get("status", {}).get("phase")
            == "Running"
        ),
        120,
        1,
    )
    job = _locked_job(slurm, name)
    try:
        # The hook answered only once the bystander was gone, and the script ran after it.
        left = slurm.cluster.client.get(path, missing_ok=True)
        # Gone, or stopped: kubelet marks the Pod Failed/Succeeded once its containers are
        # killed, a moment before the object goes, and the hook counts such a Pod as gone.
        assert (
            left is None
            or left["metadata"]["uid"] != bystander["metadata"]["uid"]
            or (left.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        ), left
        assert _lock_state(slurm, node) == ("locked", job, True)
        slurm.wait(
            f"{name} shows the lock",
            lambda: _pod_lock(slurm, name) == "locked",
            30,
            1,
        )
        events = slurm.wait(
            "the SlurmNodeLocked Event",
            lambda: [
                e
                for e in slurm.cluster.client.list(f"/api/v1/namespaces/{slurm.namespace}/events")
                if e["reason"] == "SlurmNodeLocked" and e["involvedObject"]["name"] == name
            ],
            30,
            1,
        )
        assert any(f"job {job} " in e["message"] for e in events), events
    finally:
        _end_job(slurm, name, job, node)
    slurm.wait(f"{name} shows no lock", lambda: _pod_lock(slurm, name) in ("false", None), 30, 1)


def test_a_strict_job_takes_a_strict_lock(slurm: SlurmDeployment):
    """`--extra=sunk.coreweave.com/lock=strict` (what the Pod Scheduler's jobs carry) reaches
    the prolog: the Node shows locked_strict while the job runs."""
    pod = slurm.running_pods("compute")[-1]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    slurm.wait(f"{node} unlocked", lambda: _unlocked(slurm, node), 120, 1)
    job = _locked_job(slurm, name, "--extra=sunk.coreweave.com/lock=strict")
    try:
        assert _lock_state(slurm, node) == ("locked_strict", f"{job}:strict", True)
    finally:
        _end_job(slurm, name, job, node)


def test_the_syncer_releases_a_lock_whose_epilog_never_came(slurm: SlurmDeployment):
    """A lock left behind (its slurmd died mid-job, so no epilog ran) on a node Slurm shows
    idle is released by the Syncer about 30 s after it was taken."""
    pod = slurm.running_pods("compute")[0]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    slurm.wait(f"{node} unlocked", lambda: _unlocked(slurm, node), 120, 1)
    current = slurm.cluster.client.get(f"/api/v1/nodes/{node}")
    taints = [t for t in current["spec"].get("taints") or [] if t["key"] != LOCK]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _patch_node(
        slurm,
        node,
        {
            "metadata": {
                "resourceVersion": current["metadata"]["resourceVersion"],
                "annotations": {LOCK: "locked", f"{LOCK}-jobs": "999999", f"{LOCK}-since": stamp},
            },
            "spec": {"taints": [*taints, {"key": LOCK, "value": "true", "effect": "NoExecute"}]},
        },
    )
    assert name in slurm.idle_nodes()
    started = time.monotonic()
    slurm.wait(f"the stale lock of {node} released", lambda: _unlocked(slurm, node), 120, 1)
    assert time.monotonic() - started > 20  # not before the grace for a starting job


def _scheduled_pod(slurm: SlurmDeployment, name: str) -> dict:
    """A Pod for the Pod Scheduler (the chart names it <namespace>-<release>)."""
    return _pause_pod(
        slurm,
        name,
        schedulerName=f"{slurm.namespace}-{slurm.release}",
        terminationGracePeriodSeconds=2,
        resources={"requests": {"cpu": "100m", "memory": "64Mi"}},
    )


def _running(slurm: SlurmDeployment, name: str) -> dict | None:
    pod = _pod(slurm, name)
    return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None


def _squeue(slurm: SlurmDeployment) -> dict[str, tuple[str, str, str]]:
    """job id → (name, state, nodes), as a user on the login Pod sees them."""
    out = slurm.login("squeue", "-h", "-o", "%i|%j|%T|%N")
    return {f[0]: (f[1], f[2], f[3]) for f in (line.split("|") for line in out.split()) if f[0]}


def _events(slurm: SlurmDeployment, name: str, reason: str) -> list[dict]:
    events = slurm.cluster.client.list(f"/api/v1/namespaces/{slurm.namespace}/events")
    return [e for e in events if e["involvedObject"]["name"] == name and e["reason"] == reason]


def test_a_pod_for_the_pod_scheduler_runs_where_slurm_placed_its_placeholder(
    slurm: SlurmDeployment,
):
    """A Pod that names the scheduler gets a placeholder job; once the job runs (past the
    prolog, which strict-locks the Node), the Pod is bound to the Node of the slurmd Pod Slurm
    allocated and runs there beside the lock. `scancel` of the placeholder deletes the Pod."""
    name = f"sched-{uuid.uuid4().hex[:6]}"
    _scheduled_pod(slurm, name)
    pod = slurm.wait(f"Pod {name} running", lambda: _running(slurm, name), 180, 1)
    annotations = pod["metadata"]["annotations"]
    job, slurm_node = (
        annotations["sunk.coreweave.com/slurm-job"],
        annotations["sunk.coreweave.com/slurm-node"],
    )
    node = pod["spec"]["nodeName"]
    try:
        # squeue shows the placeholder, running on the slurmd Pod of the Pod's Node
        assert _squeue(slurm)[job] == (f"pod-{slurm.namespace}-{name}", "RUNNING", slurm_node)
        slurmd = _pod(slurm, slurm_node)
        assert slurmd is not None and slurmd["spec"]["nodeName"] == node, slurmd
        # the placeholder holds a strict lock on the Node; the Pod it placed is not evicted
        assert _lock_state(slurm, node) == ("locked_strict", f"{job}:strict", True)
        assert _running(slurm, name)
        assert len(_events(slurm, name, "Scheduled")) == 1
    finally:
        slurm.login("scancel", job)
    slurm.wait(f"Pod {name} deleted after scancel", lambda: _pod(slurm, name) is None, 120, 1)
    (event,) = _events(slurm, name, "SlurmJobEnded")
    assert f"placeholder job {job} ended in Slurm" in event["message"], event
    slurm.wait(f"job {job} gone", lambda: job not in _squeue(slurm), 120, 1)
    slurm.wait(f"{node} unlocked", lambda: _unlocked(slurm, node), 120, 1)


def test_deleting_a_scheduled_pod_ends_its_placeholder_job(slurm: SlurmDeployment):
    name = f"sched-{uuid.uuid4().hex[:6]}"
    _scheduled_pod(slurm, name)
    pod = slurm.wait(f"Pod {name} running", lambda: _running(slurm, name), 180, 1)
    job, node = (
        pod["metadata"]["annotations"]["sunk.coreweave.com/slurm-job"],
        pod["spec"]["nodeName"],
    )
    assert _squeue(slurm)[job][1] == "RUNNING"
    slurm.cluster.client.delete(f"/api/v1/namespaces/{slurm.namespace}/pods/{name}")
    slurm.wait(f"job {job} ended", lambda: job not in _squeue(slurm), 120, 1)
    slurm.wait(f"{node} unlocked", lambda: _unlocked(slurm, node), 120, 1)


NODESET = "cpu"  # examples/minimal-cpu.yaml: one node group, replicas 2


def _nodeset_path(slurm: SlurmDeployment) -> str:
    return f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{slurm.namespace}/nodesets/{NODESET}"


def _scale(slurm: SlurmDeployment, replicas: int) -> None:
    slurm.cluster.client.patch(_nodeset_path(slurm), {"spec": {"replicas": replicas}})


RELEASE = "/tmp/sunk-e2e-release"  # in the slurmd container: the job ends when it appears


def _submit(slurm: SlurmDeployment, node: str) -> str:
    """A job on ``node`` that runs until ``_release`` (no race with a fixed duration)."""
    argv = (
        "sbatch", "--parsable", f"--nodelist={node}", "--output=/dev/null",
        "--wrap", f"rm -f {RELEASE}; until [ -e {RELEASE} ]; do sleep 1; done",
    )  # fmt: skip
    # right after start-up slurmctld may refuse jobs until slurmdbd has sent the associations
    out = slurm.wait(f"a job accepted for {node}", lambda: slurm.login(*argv), 120, 3)
    job = out.strip().split(";")[0]
    slurm.wait(f"job {job} running on {node}", lambda: _job_state(slurm, job) == "RUNNING", 120, 1)
    return job


def _release(slurm: SlurmDeployment, node: str) -> None:
    slurm.exec(node, "slurmd", "touch", RELEASE)


def _job_state(slurm: SlurmDeployment, job: str) -> str:
    return slurm.login("squeue", "--noheader", f"--jobs={job}", "--format=%T").strip()


def _known_to_slurm(slurm: SlurmDeployment, name: str) -> bool:
    out = slurm.login("bash", "-c", f"scontrol show node --oneliner {name} 2>&1 || true")
    return f"NodeName={name} " in out


def _pod(slurm: SlurmDeployment, name: str) -> dict | None:
    return slurm.cluster.client.get(
        f"/api/v1/namespaces/{slurm.namespace}/pods/{name}", missing_ok=True
    )


def _kill_operator(slurm: SlurmDeployment) -> None:
    """SIGKILL the operator's leader (a crash: no lease released, no handler finished): the
    standby replica or the restarted container takes up where it stood."""
    client = slurm.cluster.client
    lease = client.get("/apis/coordination.k8s.io/v1/namespaces/sunk/leases/sunk-operator")
    pod = client.get(f"/api/v1/namespaces/sunk/pods/{lease['spec']['holderIdentity']}")
    before = pod["status"]["containerStatuses"][0].get("restartCount", 0)
    os.kill(host_pid(pod, "sunk-operator"), signal.SIGKILL)

    def restarted_and_ready() -> bool:
        now = slurm.cluster.client.get(f"/api/v1/namespaces/sunk/pods/{pod['metadata']['name']}")
        (status,) = now["status"]["containerStatuses"]
        return status.get("restartCount", 0) > before and status.get("ready", False)

    slurm.wait("the operator restarted after SIGKILL", restarted_and_ready, 180, 1)


def test_scale_down_removes_the_idle_node_then_drains_the_busy_one_until_its_job_ends(
    slurm: SlurmDeployment,
):
    """The job-safety test. A long job on one node of two; scale to one: the idle node goes
    (Pod and Slurm record). Scale to zero: the busy node drains with a k8s: reason while the
    job runs (the operator is SIGKILLed meanwhile and the drain survives), then the Pod goes,
    then its Slurm record; sacct says COMPLETED."""
    pods = sorted(p["metadata"]["name"] for p in slurm.running_pods("compute"))
    busy, idle = pods
    job = _submit(slurm, busy)
    _scale(slurm, 1)
    slurm.wait(f"{idle} removed", lambda: _pod(slurm, idle) is None, 180, 1)
    slurm.wait(f"{idle} deleted from Slurm", lambda: not _known_to_slurm(slurm, idle), 60, 1)
    assert _job_state(slurm, job) == "RUNNING"
    assert not (_pod(slurm, busy) or {}).get("metadata", {}).get("deletionTimestamp")

    _scale(slurm, 0)
    reason = f"k8s: Pod {busy} is being removed: scaled down"
    slurm.wait(f"{busy} drained", lambda: slurm.slurm_node(busy)[1] == reason, 120, 1)
    _kill_operator(slurm)  # the operator (and its Syncer) killed in the middle of the drain
    time.sleep(10)
    assert _job_state(slurm, job) == "RUNNING"
    pod = _pod(slurm, busy)
    assert pod and not pod["metadata"].get("deletionTimestamp"), "deleted under a running job"
    assert slurm.slurm_node(busy)[1] == reason, "the drain was lost over the restart"
    nodeset = slurm.cluster.client.get(_nodeset_path(slurm))
    removing = {c["type"]: c for c in nodeset["status"]["conditions"]}["Removing"]
    assert removing["status"] == "True" and busy in removing["message"], removing

    _release(slurm, busy)
    slurm.wait(f"{busy} removed after its job", lambda: _pod(slurm, busy) is None, 300, 1)
    slurm.wait(f"{busy} deleted from Slurm", lambda: not _known_to_slurm(slurm, busy), 60, 1)
    states = slurm.wait(f"job {job} in sacct", lambda: (s := slurm.sacct_jobs()).get(job) and s)
    assert states[job] == "COMPLETED", states

    _scale(slurm, 2)
    slurm.wait_ready(nodes=2)
    # No drain left behind on the new Pods. A node may show `idle*` (not responding) for a
    # ping or two after it registers (1 run in 2 here): wait that out; a drain never clears.
    for name in pods:
        settled = lambda n=name: slurm.slurm_node(n) == ("idle", "none")  # noqa: E731
        slurm.wait(f"{name} idle with no reason", settled, 90)


def test_rolling_update_never_replaces_a_node_under_a_running_job(slurm: SlurmDeployment):
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in slurm.running_pods("compute")}
    busy, idle = sorted(before)
    job = _submit(slurm, busy)
    slurm.cluster.client.patch(
        _nodeset_path(slurm),
        {"spec": {"template": {"metadata": {"annotations": {"e2e/rolled": "1"}}}}},
    )

    def replaced(name: str) -> bool:
        pods = {p["metadata"]["name"]: p for p in slurm.running_pods("compute")}
        return name in pods and pods[name]["metadata"]["uid"] != before[name]

    # maxUnavailable 10% of 2 = 1: the idle node goes first; the busy one is left alone
    # until its replacement is ready, then drained, and replaced only after its job.
    slurm.wait(f"{idle} replaced", lambda: replaced(idle), 300, 1)
    assert _job_state(slurm, job) == "RUNNING"
    reason = f"k8s: Pod {busy} is being removed: template changed"
    slurm.wait(
        f"{busy} drained for the update", lambda: slurm.slurm_node(busy)[1] == reason, 180, 1
    )
    _kill_operator(slurm)  # in the middle of the update: the new operator goes on with it
    time.sleep(10)  # drained, still running: not deleted
    assert _job_state(slurm, job) == "RUNNING"
    assert not replaced(busy) and _pod(slurm, busy)["metadata"]["uid"] == before[busy]
    assert slurm.slurm_node(busy)[1] == reason, "the drain was lost over the operator's crash"
    _release(slurm, busy)
    slurm.wait(f"{busy} replaced after its job", lambda: replaced(busy), 300, 1)
    states = slurm.wait(f"job {job} in sacct", lambda: (s := slurm.sacct_jobs()).get(job) and s)
    assert states[job] == "COMPLETED", states
    slurm.wait("both nodes idle", lambda: set(slurm.idle_nodes()) == set(before), 300)
    for pod in slurm.running_pods("compute"):
        assert pod["metadata"]["annotations"].get("e2e/rolled") == "1"
        assert "sunk.coreweave.com/removal" not in pod["metadata"]["annotations"]


def _setup_script(slurm: SlurmDeployment, script: str) -> None:
    """Change the `packages` oneshot's script the way a user does: a values file, helm upgrade."""
    values: Path = slurm.values  # type: ignore[attr-defined]
    extra = values.parent / "s6-packages.yaml"
    extra.write_text(yaml.safe_dump({"compute": {"s6": {"packages": {"script": script}}}}))
    slurm.install_slurm(EXAMPLE, values, slurm.users, extra)  # type: ignore[attr-defined]


def test_a_failing_s6_oneshot_keeps_its_node_out_and_a_fixed_script_rolls_out(
    slurm: SlurmDeployment,
):
    def live() -> dict[str, str]:  # ready or not (running_pods has only ready ones)
        return {
            p["metadata"]["name"]: p["metadata"]["uid"]
            for p in slurm.pods("compute")
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        }

    before = live()
    _setup_script(slurm, "#!/bin/sh\necho 'mirror unreachable' >&2\nexit 3\n")

    def replaced() -> dict[str, str]:
        return {n: uid for n, uid in live().items() if uid != before.get(n)}

    broken_name, broken_uid = next(iter(slurm.wait("one Pod replaced", replaced, 300, 1).items()))
    reason = f"k8s: Pod {broken_name} not ready: s6 oneshot packages failed (exit 3)"
    slurm.wait(
        f"{broken_name} registered drained with the oneshot's reason",
        lambda: slurm.slurm_node(broken_name) == ("drained", reason),
        120,
        1,
    )
    pod = _pod(slurm, broken_name)
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False", pod["status"]
    time.sleep(15)  # the Syncer keeps the detailed reason; the broken Pod holds the rollout
    assert slurm.slurm_node(broken_name) == ("drained", reason)
    assert set(replaced()) == {broken_name}

    _setup_script(
        slurm,
        "#!/bin/bash\n"
        "state=$(pgrep -x slurmd >/dev/null && echo running || echo absent)\n"
        'echo "v2 slurmd=$state" > /run/sunk-e2e-setup\n',
    )

    def rolled() -> bool:
        now = replaced()
        return set(now) == set(before) and now[broken_name] != broken_uid

    slurm.wait("both Pods replaced with the fixed script", rolled, 420, 2)
    slurm.wait("both nodes idle", lambda: set(slurm.idle_nodes()) == set(before), 300)
    out = slurm.login("srun", "-N2", "--ntasks-per-node=1", "cat", "/run/sunk-e2e-setup")
    assert out.splitlines() == ["v2 slurmd=absent"] * 2, out


def test_upgrade_changes_a_partition_and_keeps_jobs_and_keys(slurm: SlurmDeployment):
    secrets = {
        name: slurm.secret_data(name)
        for name in (names.munge_secret(CLUSTER), names.jwt_secret(CLUSTER))
    }
    before = slurm.login("scontrol", "show", "partition", "short")
    assert "MaxTime=00:30:00" in before, before
    values: Path = slurm.values  # type: ignore[attr-defined]
    values.write_text(UPGRADED)
    slurm.install_slurm(EXAMPLE, values, slurm.users)  # type: ignore[attr-defined]
    slurm.wait(
        "slurmctld to read MaxTime=00:20:00 for partition short",
        lambda: "MaxTime=00:20:00" in slurm.login("scontrol", "show", "partition", "short"),
        timeout=300,
    )
    accounted = slurm.sacct_jobs()
    jobs = getattr(slurm, "jobs", {})
    assert jobs and all(accounted.get(j) == "COMPLETED" for j in jobs), (jobs, accounted)
    for name, data in secrets.items():
        assert slurm.secret_data(name) == data, f"{name} was regenerated"


# Slurm's next release, as a user changes it: the image tags in values (`<version>-slurm<series>`).
NEXT_SLURM = "26.05"
SLURM_IMAGE_KEYS = ("controller", "accounting", "rest", "login", "compute", "directoryService")
# component (Pod label) → the component whose Pods must all run the new release before its first
# new Pod exists; "compute" stands for the slurmd Pods of the NodeSets
UPGRADE_GATES = {"controller": "accounting", "rest": "controller", "login": "controller",
                 "compute": "controller"}  # fmt: skip
DAEMON_CONTAINERS = {"accounting": "slurmdbd", "controller": "slurmctld", "rest": "slurmrestd",
                     "login": "sshd", "compute": "slurmd"}  # fmt: skip


def _upgrade_check(slurm: SlurmDeployment, *files: Path, namespace: str = "") -> dict[str, Any]:
    """`sunkctl upgrade-check -o json` with these values, against the live cluster."""
    argv = [sys.executable, "-m", "sunk.cli.main", "upgrade-check", "-o", "json",
            "-n", namespace or slurm.namespace, "--release", slurm.release,
            f"--kubeconfig={slurm.cluster.kubeconfig}", f"--kubectl={bin_dir() / 'kubectl'}",
            f"--helm={bin_dir() / 'helm'}"]  # fmt: skip
    argv += [arg for path in files for arg in ("-f", str(path))]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _runs_release(pod: dict, component: str, series: str) -> bool:
    spec = pod["spec"]
    daemon = next(c for c in spec["containers"] if c["name"] == DAEMON_CONTAINERS[component])
    return daemon["image"].endswith(f"-slurm{series}")


def test_slurm_upgrade_through_values_rolls_in_order_and_keeps_the_running_and_pending_jobs(
    slurm: SlurmDeployment,
):
    """Every Slurm image moved to 26.05 in one `helm upgrade`, with a job running on one node
    and a held job pending: slurmdbd, slurmctld, then slurmrestd and login, then the slurmds,
    each component's first new Pod appearing only once the one before runs the new release
    everywhere; the busy node is drained and waits for its job; both jobs end COMPLETED and
    sacct keeps every job of the module's earlier tests."""
    specs = images.release_images(NEXT_SLURM)
    images.build_specs(specs)
    slurm.cluster.import_images([images.saved_archive(s.ref) for s in specs])
    tag = specs[0].tag
    accounted = slurm.sacct_jobs()
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in slurm.running_pods("compute")}
    busy = sorted(before)[0]
    running = _submit(slurm, busy)
    held = slurm.login("sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap", "true")
    held = held.strip().split(";")[0]

    values: Path = slurm.values  # type: ignore[attr-defined]
    upgrade = values.parent / "slurm-next.yaml"
    upgrade.write_text(yaml.safe_dump({key: {"image": {"tag": tag}} for key in SLURM_IMAGE_KEYS}))
    files = (EXAMPLE, values, slurm.users, deploy.OVERLAY, upgrade)  # type: ignore[attr-defined]

    # What the upgrade will do, read from the live cluster first, as a user checks it.
    plan = _upgrade_check(slurm, *files)
    assert plan["installed"] is True
    assert [step.split(" 24.11")[0] for step in plan["slurmUpgrade"]] == [
        "slurmdbd", "slurmctld", "slurmrestd", "the login Pods", f"slurmd of NodeSet {NODESET}",
    ], plan["slurmUpgrade"]  # fmt: skip
    assert [r.split(":")[0] for r in plan["restarts"]] == ["accounting", "controller", "rest",
                                                           "login"], plan["restarts"]  # fmt: skip
    (drain,) = plan["drains"]
    assert f"{busy} (job {running} holds it)" in drain and f"{sorted(before)[1]}" in drain, drain
    elsewhere = _upgrade_check(slurm, *files, namespace="no-such-namespace")
    assert elsewhere["installed"] is False and not elsewhere["restarts"], elsewhere

    slurm.install_slurm(EXAMPLE, values, slurm.users, upgrade)  # type: ignore[attr-defined]

    first_seen: dict[str, float] = {}

    def watch() -> bool:
        """One look at every component; at a component's first new Pod, its gate is done."""
        pods = {c: slurm.pods(c) for c in DAEMON_CONTAINERS}
        for component, gate in UPGRADE_GATES.items():
            new = [p for p in pods[component] if _runs_release(p, component, NEXT_SLURM)]
            if new and component not in first_seen:
                first_seen[component] = time.monotonic()
                behind = [p["metadata"]["name"] for p in pods[gate]
                          if not _runs_release(p, gate, NEXT_SLURM)
                          and not p["metadata"].get("deletionTimestamp")]  # fmt: skip
                assert not behind, f"a new {component} Pod while {gate} still runs {behind}"
        return set(first_seen) == set(UPGRADE_GATES)

    slurm.wait("every component's first 26.05 Pod", watch, 600, 1)

    def new_login() -> bool:
        pods = slurm.pods("login")
        return bool(slurm.running_pods("login")) and all(
            _runs_release(p, "login", NEXT_SLURM) for p in pods
        )

    slurm.wait("the login Pods on 26.05 and ready", new_login, 300)
    assert _job_state(slurm, running) == "RUNNING"
    events = slurm.cluster.kubectl(
        "-n", slurm.namespace, "get", "events", "--field-selector=reason=SlurmUpgradeWaiting",
        "-o", "jsonpath={.items[*].message}",
    )  # fmt: skip
    assert "controller: " in events, events  # the operator held the controller's image

    reason = f"k8s: Pod {busy} is being removed: template changed"
    slurm.wait(f"{busy} drained for the upgrade", lambda: slurm.slurm_node(busy)[1] == reason, 300)
    assert _job_state(slurm, running) == "RUNNING"
    assert _pod(slurm, busy)["metadata"]["uid"] == before[busy]
    _release(slurm, busy)

    def upgraded() -> bool:
        pods = slurm.running_pods("compute")
        return len(pods) == len(before) and all(
            _runs_release(p, "compute", NEXT_SLURM) for p in pods
        )

    slurm.wait("every slurmd Pod on 26.05", upgraded, 420, 2)
    slurm.wait("both nodes idle", lambda: set(slurm.idle_nodes()) == set(before), 300)
    versions = slurm.login("sinfo", "--noheader", "--Node", "--format=%N %v").split()
    assert all(v.startswith(f"{NEXT_SLURM}.") for v in versions[1::2]), versions
    assert slurm.login("scontrol", "--version").split()[1].startswith(NEXT_SLURM)
    slurm.login("scontrol", "release", held)
    states = slurm.wait(
        "both jobs in sacct",
        lambda: (s := slurm.sacct_jobs()).get(running) and s.get(held) == "COMPLETED" and s,
        180,
    )
    assert states[running] == "COMPLETED", states
    lost = {job: state for job, state in accounted.items() if states.get(job) != state}
    assert not lost, f"sacct changed over the database conversion: {lost}"


def test_a_deleted_node_group_waits_for_the_jobs_naming_its_partition(slurm: SlurmDeployment):
    """The NodeSet deleted while a held job names its partition: its idle Pods go, but the
    NodeSet stays (Ready=False PartitionInUse, naming the job) and slurmctld keeps the
    partition and the job, which it would end as NODE_FAIL once the partition left its
    configuration. Once the job is cancelled the NodeSet goes, slurmctld drops the partition
    and keeps answering; the declared partitions (`nodeSets: [ALL]`) stay."""
    argv = ("sbatch", "--parsable", "--hold", f"--partition={NODESET}", "--output=/dev/null",
            "--wrap", "true")  # fmt: skip
    job = slurm.wait("a held job accepted", lambda: slurm.login(*argv), 120, 3).split(";")[0]
    job = job.strip()
    client = slurm.cluster.client
    client.delete(_nodeset_path(slurm))
    slurm.wait("the slurmd Pods removed", lambda: not slurm.pods("compute"), 300, 2)

    def waiting() -> dict | None:
        nodeset = client.get(_nodeset_path(slurm), missing_ok=True) or {}
        conds = {c["type"]: c for c in (nodeset.get("status") or {}).get("conditions", [])}
        ready = conds.get("Ready") or {}
        return ready if ready.get("reason") == "PartitionInUse" else None

    ready = slurm.wait("the NodeSet to wait on the job", waiting, 120, 2)
    assert f"name partition {NODESET} ({job})" in ready["message"], ready
    assert _job_state(slurm, job) == "PENDING"
    partitions = lambda: slurm.login("bash", "-c", "scontrol show partition 2>&1")  # noqa: E731
    assert f"PartitionName={NODESET}\n" in partitions()

    slurm.login("scancel", job)
    gone = lambda: client.get(_nodeset_path(slurm), missing_ok=True) is None  # noqa: E731
    slurm.wait("the NodeSet gone once no job names its partition", gone, 120, 2)
    slurm.wait(
        "slurmctld without the partition",
        lambda: f"PartitionName={NODESET}\n" not in partitions(),
        180,
        3,
    )
    assert "UP" in slurm.login("scontrol", "ping")
    assert "PartitionName=batch\n" in partitions() and "PartitionName=short\n" in partitions()


def test_uninstall_keeps_keys_and_controller_state(slurm: SlurmDeployment):
    kept = [names.munge_secret(CLUSTER), names.jwt_secret(CLUSTER)]
    data = {name: slurm.secret_data(name) for name in kept}
    claims_before = {
        c["metadata"]["name"]
        for c in slurm.cluster.client.list(
            f"/api/v1/namespaces/{slurm.namespace}/persistentvolumeclaims"
        )
    }
    state_claim = f"state-{names.controller(CLUSTER)}-0"
    assert state_claim in claims_before, claims_before
    slurm.uninstall_slurm()
    slurm.wait(
        "the controller Pod gone",
        lambda: not slurm.pods("controller") and not slurm.pods("compute"),
        timeout=300,
    )
    for name in kept:
        assert slurm.secret_data(name) == data[name], name
    claims_after = {
        c["metadata"]["name"]: c["status"].get("phase")
        for c in slurm.cluster.client.list(
            f"/api/v1/namespaces/{slurm.namespace}/persistentvolumeclaims"
        )
    }
    assert claims_after.get(state_claim) == "Bound", claims_after
