"""A Kubernetes node on a cgroup v2 kernel: containerd, runc and kubelet inside a user-mode
Linux machine (``sunk.devenv.uml``) that joins a running ``NodeCluster``'s control plane.

    with NodeCluster(nodes=0) as cluster:
        node = UmlKubeletNode(cluster)
        node.start()                    # Ready, kernel 6.1, cgroup2 only
        ...
        node.stop()

The machine boots on the host's own root (hostfs of ``/``), so the toolchain's binaries and the
host's ``python3``, ``ip`` and ``mount`` are there. Its ``eth0`` is a TAP device on the hub's
bridge with its own node address; the hub routes the node's Pod CIDR to it, as for every node.

kubelet runs with Kubernetes' defaults, except what this machine has no choice about: the
cgroupfs driver (there is no systemd, so no ``systemd`` driver), certificates from the test
PKI, and paths on a tmpfs. ``failCgroupV1`` is left out: its default (true since 1.35) refuses
a cgroup v1 host, so a Ready node is itself proof that kubelet found cgroup v2.

What user-mode Linux needs that a real node would not, found here:
- its ``/proc/cpuinfo`` has no ``cpu MHz`` line, and cAdvisor then refuses to start kubelet
  ("could not detect clock speed"): a copy with one added is bind-mounted over it;
- there is no kmod or busybox on these machines: modules (bridge, veth, overlay, netfilter)
  are loaded with ``finit_module(2)`` from python, in the order of the package's
  ``modules.dep``;
- unix sockets cannot live on hostfs, and overlayfs cannot use it as an upper layer: /run, the
  containerd root and the kubelet root dir are a tmpfs inside the machine;
- no ``cpuset`` controller (one CPU): kubelet logs once that it cannot set
  ``kubepods/cpuset.cpus`` and runs on.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from sunk.devenv import node_build, uml
from sunk.devenv.controlplane import node_ready, sign, wait_for, write_kubeconfig
from sunk.devenv.nodes import (
    CLUSTER_DOMAIN,
    HUB_ADDR,
    HUB_NET,
    NodeCluster,
    NodeClusterError,
    cni_conflist,
    containerd_config,
)

# kernel modules a node needs, by name; their dependencies are loaded first
MODULES = (
    "bridge", "veth", "overlay", "br_netfilter", "iptable_filter", "iptable_nat",
    "xt_conntrack", "xt_comment", "xt_MASQUERADE", "xt_mark", "xt_addrtype",
)  # fmt: skip
# inside the machine: a tmpfs (see the module docstring)
RUNTIME = Path("/run/sunk-node")
CONTAINERD_SOCKET = Path("/run/containerd/containerd.sock")  # kubelet's default endpoint

# finit_module(2) on each path given, in order; EEXIST (already loaded) is fine
INSMOD = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    if libc.syscall(313, fd, b"", 0) != 0 and ctypes.get_errno() != 17:
        sys.exit(f"insmod {path}: {os.strerror(ctypes.get_errno())}")
    os.close(fd)
"""


def modules_dir() -> Path:
    """The unpacked package's modules for its one kernel release."""
    found = sorted((uml.kernel_path().parents[2] / "usr/lib/uml/modules").glob("*/modules.dep"))
    if not found:
        raise uml.UmlError(f"no modules.dep under {uml.kernel_path().parents[2]}")
    return found[-1].parent


def module_load_order(directory: Path, wanted: tuple[str, ...] = MODULES) -> list[Path]:
    """``wanted`` and what they depend on, each after its dependencies (``modules.dep``)."""
    deps: dict[str, list[str]] = {}
    for line in (directory / "modules.dep").read_text().splitlines():
        module, _, rest = line.partition(":")
        deps[module] = rest.split()
    by_name = {Path(m).name.removesuffix(".ko"): m for m in deps}
    order: list[str] = []

    def visit(module: str) -> None:
        for dep in deps[module]:
            visit(dep)
        if module not in order:
            order.append(module)

    for name in wanted:
        if name not in by_name:
            raise uml.UmlError(f"{directory}: no module {name}")
        visit(by_name[name])
    return [directory / m for m in order]


@dataclass
class UmlKubeletNode:
    """One cgroup v2 node of ``cluster`` (started), called ``name``, at ``addr`` on the hub's
    network, its Pods in ``pod_cidr``."""

    cluster: NodeCluster
    name: str = "uml-0"
    addr: str = str(HUB_NET.network_address + 60)
    pod_cidr: str = "10.246.60.0/24"
    mem_mib: int = 2048
    machine: uml.UmlMachine | None = None

    @property
    def dir(self) -> Path:
        if self.cluster.workdir is None:
            raise NodeClusterError("not started")
        return self.cluster.workdir / self.name

    @property
    def tap(self) -> str:
        return f"tap-{self.name}"[:15]

    def kubelet_config(self) -> dict:
        """Kubernetes' defaults but for what the machine imposes (module docstring)."""
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs",  # no systemd in the machine
            "address": self.addr,
            "readOnlyPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self._pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(self.dir / "resolv.conf"),
            "podLogsDir": str(RUNTIME / "pod-logs"),
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
        }

    @property
    def _pki(self) -> Path:
        if self.cluster.control_plane is None:
            raise NodeClusterError("not started")
        return self.cluster.control_plane.pki

    def _write_files(self) -> Path:
        """Configuration on the host's disk, which the machine sees; returns the init script."""
        d = self.dir
        (d / "logs").mkdir(parents=True, exist_ok=True)
        (d / "cni").mkdir(exist_ok=True)
        identity = f"kubelet-{self.name}"
        sign(self._pki, identity, f"/O=system:nodes/CN=system:node:{self.name}")
        kubeconfig = write_kubeconfig(
            d / "kubelet.kubeconfig", self.cluster.node_server(), self._pki, identity
        )
        (d / "resolv.conf").write_text("")
        (d / "kubelet.yaml").write_text(yaml.safe_dump(self.kubelet_config(), sort_keys=False))
        # no portmap: nothing here maps host ports, and it would need more netfilter modules
        conflist = cni_conflist(self.pod_cidr, RUNTIME / "ipam", portmap=False)
        (d / "cni" / "10-sunk.conflist").write_text(json.dumps(conflist))
        bin_dir = self.cluster.bin_dir
        (d / "containerd.toml").write_text(
            containerd_config(
                root=RUNTIME / "containerd-root",
                state=RUNTIME / "containerd-state",
                socket=CONTAINERD_SOCKET,
                cni_bin=node_build.cni_bin_dir(),
                cni_conf=d / "cni",
                runc=bin_dir / "runc",
                runc_root=RUNTIME / "runc",
            )
        )
        (d / "insmod.py").write_text(INSMOD)
        python = Path(sys.base_prefix) / "bin" / "python3"
        modules = " ".join(shlex.quote(str(m)) for m in module_load_order(modules_dir()))
        logs = d / "logs"
        kubelet = [
            str(bin_dir / "kubelet"),
            f"--config={d / 'kubelet.yaml'}",
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={self.name}",
            f"--node-ip={self.addr}",
            f"--root-dir={RUNTIME / 'kubelet'}",
            f"--cert-dir={RUNTIME / 'kubelet' / 'pki'}",
            "--v=1",
        ]
        init = d / "init.sh"
        init.write_text(f"""#!/bin/sh
# PID 1 of the user-mode Linux node {self.name} (sunk.devenv.uml_kubelet)
export PATH={bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin
exec >{logs / "init.log"} 2>&1
set -ex
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tmpfs run /run
mkdir -p {RUNTIME} {CONTAINERD_SOCKET.parent}
{{ cat /proc/cpuinfo; printf 'cpu MHz\\t\\t: 2000.000\\n'; }} > {RUNTIME}/cpuinfo
mount --bind {RUNTIME}/cpuinfo /proc/cpuinfo
echo {self.name} > /proc/sys/kernel/hostname
{python} {d / "insmod.py"} {modules}
echo 1 > /proc/sys/net/ipv4/ip_forward
ip link set lo up
ip addr add {self.addr}/{HUB_NET.prefixlen} dev eth0
ip link set eth0 up
ip route add default via {HUB_ADDR}
cat /sys/fs/cgroup/cgroup.controllers
containerd --config {d / "containerd.toml"} > {logs / "containerd.log"} 2>&1 &
until ctr --address {CONTAINERD_SOCKET} version >/dev/null 2>&1; do sleep 1; done
ctr --address {CONTAINERD_SOCKET} -n k8s.io images import \\
  --label=io.cri-containerd.pinned=pinned {node_build.pause_archive_link()}
{shlex.join(kubelet)} > {logs / "kubelet.log"} 2>&1 &
set +x
while true; do sleep 3600; done
""")
        init.chmod(0o755)
        return init

    def start(self, timeout: float = 300) -> dict:
        """Boot the machine and wait for its Node to be Ready; returns the Node."""
        if self.machine is not None:
            raise NodeClusterError(f"{self.name}: already started")
        init = self._write_files()
        self.cluster.add_tap(self.tap, self.addr, self.pod_cidr)
        self.machine = uml.UmlMachine(
            name=f"sunk-{self.cluster.run_id}-{self.name}",
            root=Path("/"),
            init=str(init),
            netns=self.cluster.hub_netns,
            tap=self.tap,
            console=self.dir / "logs" / "console.log",
            state_dir=self.dir / "uml",
            mem_mib=self.mem_mib,
        )
        self.machine.start()
        self.cluster.log(f"{self.name}: user-mode Linux booted, waiting for Ready")

        def ready() -> dict | None:
            machine = self.machine
            if machine is None or machine.proc is None or machine.proc.poll() is not None:
                raise NodeClusterError(f"{self.name}: the machine exited\n{self.logs()}")
            obj = self.cluster.client.get(f"/api/v1/nodes/{self.name}")  # 404: not yet
            return obj if node_ready(obj) else None

        try:
            return wait_for(ready, timeout, f"node {self.name} Ready", interval=2)
        except TimeoutError as exc:
            raise NodeClusterError(f"{exc}\n{self.logs()}") from None

    def logs(self, tail: int = 2000) -> str:
        """The ends of the machine's init, containerd and kubelet logs."""
        parts = []
        for name in ("console", "init", "containerd", "kubelet"):
            path = self.dir / "logs" / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}.log\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """End the machine (everything in it goes with its kernel); the TAP device and route
        go with the hub's namespace when the cluster stops."""
        if self.machine is not None:
            self.machine.stop()
            self.machine = None
