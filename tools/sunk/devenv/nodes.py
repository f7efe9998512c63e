"""Real Kubernetes worker nodes on one machine, offline: kubelet + containerd + runc + CNI +
kube-proxy + CoreDNS, each node in its own network namespace, beside the test control plane.

    with NodeCluster(nodes=2, images=[...]) as cluster:
        cluster.client.get("/api/v1/nodes")      # node-0, node-1: Ready, real containers
        cluster.kubectl("get", "pods", "-A")

Layout (every address lives in a network namespace this module creates; nothing listens on
the host's own addresses but 127.0.0.1)::

    hub netns  sunk-<id>-hub: bridge br0 10.250.0.1/24; etcd, kube-apiserver (all addresses),
               controller-manager, scheduler, kwok (``ControlPlane(netns=...)``); routes each
               node's Pod CIDR to that node; its ports forwarded to the host's 127.0.0.1
    node netns sunk-<id>-<i>: eth0 10.250.0.<11+i>/24 (default route via the hub), containerd,
               kubelet, kube-proxy (iptables mode, rules in this namespace only), CoreDNS bound
               to the node address (the node's ``clusterDNS``); Pods on bridge cni0 in
               10.246.<i>.0/24

Each node has its own containerd root, state and socket, runc root, kubelet root dir, CNI
config and IPAM state, and cgroup root ``/sunk-<id>-<node>`` (created in every cgroup v1
hierarchy beforehand, as kubelet requires). Settings these machines need (cgroup v1 in hybrid
mode, no systemd, no CAP_SYS_RESOURCE) are explained where they are set. The pause image is
built locally (``node_build``) and pinned as the sandbox image; images from ``make images`` are
imported into each node's ``k8s.io`` namespace, so Pods start with the charts' image names and
pull nothing. Storage: hostPath PersistentVolumes made up front (``static_volumes``), which
every node sees because the nodes share the machine's filesystem.

``stop()`` kills every container, shim and daemon, unmounts what they mounted, removes the cgroup
roots and deletes the namespaces (their iptables rules go with them); ``leftovers()`` reports
anything that survived.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sunk.devenv import node_build
from sunk.devenv.controlplane import (
    SERVICE_CIDR,
    ControlPlane,
    ControlPlaneError,
    KubeClient,
    node_ready,
    sign,
    wait_for,
    write_kubeconfig,
)
from sunk.devenv.paths import bin_dir as default_bin_dir
from sunk.errors import ToolError

HUB_NET = ipaddress.ip_network("10.250.0.0/24")
HUB_ADDR = "10.250.0.1"
POD_NET = "10.246.0.0/16"
CLUSTER_DOMAIN = "cluster.local"
NODE_BINARIES = (
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "kubelet",
    "kube-proxy",
    "kubectl",
    "coredns",
    "kube-router",
)
HOST_COMMANDS = (
    "ip", "nsenter", "socat", "iptables", "ipset", "conntrack", "openssl", "mount"
)  # fmt: skip
INSTALL_HINT = "python -m sunk.devenv.toolchain install kube nodes"
CGROUP_V1 = Path("/sys/fs/cgroup")
# kubelet, CoreDNS and kube-proxy identities; bootstrap RBAC knows the first two.
KUBE_PROXY_USER = "system:kube-proxy"
COREDNS_USER = "sunk:coredns"
KUBE_ROUTER_USER = "sunk:kube-router"


class NodeClusterError(ToolError):  # a RuntimeError; sunkctl dev exits 3
    """The real nodes could not be started; the message says which part and why."""


def missing_prerequisites(directory: Path | None = None) -> list[str]:
    """What this machine lacks to run real nodes (empty when it can)."""
    directory = directory or default_bin_dir()
    missing = [
        name
        for name in NODE_BINARIES
        if not (directory / name).exists() or not os.access(directory / name, os.X_OK)
    ]
    missing += [
        f"CNI plugin {p}"
        for p in node_build.CNI_PLUGIN_PACKAGES
        if not (node_build.cni_bin_dir() / p).exists()
    ]
    if not node_build.pause_archive_link().exists():
        missing.append("the pause image")
    missing += [f"{cmd} (host)" for cmd in HOST_COMMANDS if shutil.which(cmd) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def _run(argv: Sequence[str], *, timeout: float = 120, input: bytes | None = None) -> str:
    try:
        proc = subprocess.run(list(argv), capture_output=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired as exc:
        raise NodeClusterError(f"{' '.join(argv)}: no answer in {timeout:.0f}s") from exc
    if proc.returncode != 0:
        raise NodeClusterError(
            f"{' '.join(argv)} failed ({proc.returncode}): "
            f"{proc.stderr.decode(errors='replace').strip()[-2000:]}"
        )
    return proc.stdout.decode(errors="replace")


def in_netns(netns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` in ``netns`` (network only: mounts and /sys stay the host's, so kubelet's volume
    mounts are the ones containerd sees)."""
    return ["nsenter", f"--net=/var/run/netns/{netns}", "--", *argv]


# The comment on the rules of NodeCluster.cut_off.
CUT_OFF = "sunk-devenv: node cut off"


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen
    log: Path


@dataclass
class Node:
    name: str
    index: int
    addr: str
    pod_cidr: str
    netns: str
    dir: Path
    cgroup_root: str
    socket_dir: Path  # short: a unix socket path may not exceed 108 bytes
    procs: list[_Proc] = field(default_factory=list)

    @property
    def containerd_socket(self) -> Path:
        return self.socket_dir / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.dir / "runc"


class NodeCluster:
    """A control plane and ``nodes`` real worker nodes (see the module docstring)."""

    def __init__(
        self,
        nodes: int = 2,
        *,
        workdir: str | Path | None = None,
        images: Iterable[Path] = (),
        volumes: int = 8,
        bin_dir: Path | None = None,
        ready_timeout: float = 180.0,
        progress: bool = False,
    ) -> None:
        if not 0 <= nodes <= 50:
            raise ValueError("nodes: 0 to 50")  # 0: a control plane for nodes of the caller's
        self.bin_dir = Path(bin_dir) if bin_dir else default_bin_dir()
        self.node_count = nodes
        self.image_archives = [Path(p) for p in images]
        self.volume_count = volumes
        self.ready_timeout = ready_timeout
        self.progress = progress
        self._requested_dir = Path(workdir) if workdir else None
        self.workdir: Path | None = None
        self.run_id = secrets.token_hex(3)
        self.hub_netns = f"sunk-{self.run_id}-hub"
        self.nodes: list[Node] = []
        self.control_plane: ControlPlane | None = None
        self._started = False

    # --- access -------------------------------------------------------------------------------

    @property
    def client(self) -> KubeClient:
        return self._cp.client

    @property
    def kubeconfig(self) -> Path:
        return self._cp.kubeconfig

    @property
    def _cp(self) -> ControlPlane:
        if self.control_plane is None:
            raise NodeClusterError("not started")
        return self.control_plane

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise NodeClusterError("not started")
        return self.workdir

    def kubectl(self, *args: str, timeout: float = 120, input: bytes | None = None) -> str:
        """The real kubectl with the admin kubeconfig; raises with its stderr on failure."""
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        return _run(argv, timeout=timeout, input=input)

    def log(self, message: str) -> None:
        if self.progress:
            print(f"[nodes] {message}", flush=True)

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> NodeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> NodeCluster:
        if self._started:
            return self
        missing = missing_prerequisites(self.bin_dir)
        if missing:
            raise NodeClusterError(f"missing {', '.join(missing)}: run `{INSTALL_HINT}` as root")
        if self._requested_dir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="sunk-nodes-"))
        else:
            self.workdir = self._requested_dir.resolve()
            self.workdir.mkdir(parents=True, exist_ok=True)
        self._started = True
        try:
            self._write_state()
            self._start_hub()
            for index in range(self.node_count):
                self._prepare_node(index)
            # imports are I/O bound: all nodes at once
            with ThreadPoolExecutor(max_workers=max(1, self.node_count)) as pool:
                list(pool.map(self._import_images, self.nodes))
            for node in self.nodes:
                self._start_kubernetes(node)
            for node in self.nodes:
                self.wait_node_ready(node.name)
                # kube-router finds its Node at start: once kubelet has registered it
                self.log(f"{node.name}: kube-router (NetworkPolicies)")
                self._start_network_policies(node)
            self._static_volumes()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_state(self) -> None:
        """What ``stop_from_state`` needs to clean up after a crashed supervisor."""
        state = {
            "supervisor": os.getpid(),
            "run_id": self.run_id,
            "nodes": self.node_count,
            "kubeconfig": str(self._dir / "cp" / "admin.kubeconfig"),
            "apiserver_port": self.control_plane.ports.apiserver if self.control_plane else None,
        }
        (self._dir / "nodes.json").write_text(json.dumps(state, indent=2))

    def _start_hub(self) -> None:
        self.log("network: hub namespace and bridge")
        ns = self.hub_netns
        self._add_netns(ns)
        _run(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", ns, "addr", "add", f"{HUB_ADDR}/{HUB_NET.prefixlen}", "dev", "br0"])
        _run(["ip", "-n", ns, "link", "set", "br0", "up"])
        _sysctl(ns, "net.ipv4.ip_forward", "1")
        self.log("control plane: etcd, kube-apiserver, controller-manager, scheduler")
        self.control_plane = ControlPlane(
            self._dir / "cp",
            bin_dir=self.bin_dir,
            netns=ns,
            advertise=HUB_ADDR,
            socket_dir=run_dir(self.run_id) / "cp",
        )
        self.control_plane.start()
        self._write_state()
        self._apply_rbac()

    def _add_netns(self, ns: str) -> None:
        _run(["ip", "netns", "add", ns])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _apply_rbac(self) -> None:
        """Read rights of the node daemons that are not kubelet or kube-proxy (bootstrap RBAC
        knows those): CoreDNS reads Services, EndpointSlices, Pods and Namespaces; kube-router
        (its informers start for every controller, whichever runs) Pods, Namespaces, Nodes,
        Services, Endpoints, EndpointSlices and NetworkPolicies."""
        self._grant_reads("coredns", COREDNS_USER, ["list", "watch"], {
            "": ["endpoints", "services", "pods", "namespaces"],
            "discovery.k8s.io": ["endpointslices"],
        })  # fmt: skip
        self._grant_reads("kube-router", KUBE_ROUTER_USER, ["get", "list", "watch"], {
            "": ["pods", "namespaces", "nodes", "services", "endpoints"],
            "discovery.k8s.io": ["endpointslices"],
            "networking.k8s.io": ["networkpolicies"],
        })  # fmt: skip
        pki = self._cp.pki
        sign(pki, "kube-proxy", f"/CN={KUBE_PROXY_USER}")
        sign(pki, "coredns", f"/CN={COREDNS_USER}")
        sign(pki, "kube-router", f"/CN={KUBE_ROUTER_USER}")

    def _grant_reads(
        self, daemon: str, user: str, verbs: list[str], resources: dict[str, list[str]]
    ) -> None:
        """A ClusterRole ``sunk-devenv:<daemon>`` with ``verbs`` on ``resources`` (API group
        -> resources), bound to the client-certificate ``user``."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        name = f"sunk-devenv:{daemon}"
        rules = [
            {"apiGroups": [group], "resources": kinds, "verbs": verbs}
            for group, kinds in resources.items()
        ]
        self.client.create(f"{rbac}/clusterroles", {"metadata": {"name": name}, "rules": rules})
        self.client.create(
            f"{rbac}/clusterrolebindings",
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": user}],
            },
        )  # fmt: skip

    # --- one node -----------------------------------------------------------------------------

    def _node(self, index: int) -> Node:
        name = f"node-{index}"
        return Node(
            name=name,
            index=index,
            addr=str(HUB_NET.network_address + 11 + index),
            pod_cidr=f"10.246.{index}.0/24",
            netns=f"sunk-{self.run_id}-{index}",
            dir=self._dir / name,
            cgroup_root=f"/sunk-{self.run_id}-{name}",
            socket_dir=run_dir(self.run_id) / name,
        )

    def _prepare_node(self, index: int) -> None:
        """Network, cgroup root and containerd of one node."""
        node = self._node(index)
        name = node.name
        self.nodes.append(node)
        node.dir.mkdir(parents=True, exist_ok=True)
        node.socket_dir.mkdir(parents=True, exist_ok=True)
        (node.dir / "logs").mkdir(exist_ok=True)
        self.log(f"{name}: network {node.addr}, Pods {node.pod_cidr}")
        self._node_network(node)
        self._cgroup_root(node)
        self.log(f"{name}: containerd")
        self._start_containerd(node)

    def _start_kubernetes(self, node: Node) -> None:
        self.log(f"{node.name}: kubelet, kube-proxy, CoreDNS")
        self._start_kubelet(node)
        self._start_kube_proxy(node)
        self._start_coredns(node)

    def _node_network(self, node: Node) -> None:
        ns, hub = node.netns, self.hub_netns
        self._add_netns(ns)
        port = f"veth{node.index}"
        _run(["ip", "-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0",
              "netns", ns])  # fmt: skip
        _run(["ip", "-n", hub, "link", "set", port, "master", "br0", "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{node.addr}/{HUB_NET.prefixlen}", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "route", "add", "default", "via", HUB_ADDR])
        _run(["ip", "-n", hub, "route", "add", node.pod_cidr, "via", node.addr])
        _sysctl(ns, "net.ipv4.ip_forward", "1")
        # Service traffic between two Pods of one bridge must pass kube-proxy's iptables rules
        _sysctl(ns, "net.bridge.bridge-nf-call-iptables", "1")

    def add_tap(self, tap: str, addr: str, pod_cidr: str) -> None:
        """A TAP device on the hub's bridge for a machine of the caller's at ``addr`` (a
        user-mode Linux node), and the hub's route to its Pods."""
        hub = self.hub_netns
        _run(["ip", "-n", hub, "tuntap", "add", "dev", tap, "mode", "tap"])
        _run(["ip", "-n", hub, "link", "set", tap, "master", "br0", "up"])
        _run(["ip", "-n", hub, "route", "add", pod_cidr, "via", addr])

    def _cgroup_root(self, node: Node) -> None:
        """kubelet (cgroupfs driver, cgroup v1) wants its cgroupRoot in every hierarchy, with
        cpuset.cpus and cpuset.mems filled in."""
        for hierarchy in _cgroup_hierarchies():
            path = hierarchy / node.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                parent = hierarchy / name
                if parent.exists():
                    (path / name).write_text(parent.read_text())

    def _spawn(self, node: Node, name: str, argv: list[str]) -> None:
        log = node.dir / "logs" / f"{name}.log"
        env = dict(os.environ, PATH=f"{self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        env.pop("KUBECONFIG", None)
        with log.open("ab") as out:
            popen = subprocess.Popen(
                in_netns(node.netns, argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=node.dir,
                env=env,
            )
        node.procs.append(_Proc(name, popen, log))

    def _check_alive(self, node: Node) -> None:
        for proc in node.procs:
            if proc.popen.poll() is not None:
                tail = proc.log.read_text(errors="replace")[-3000:]
                raise NodeClusterError(
                    f"{node.name}: {proc.name} exited with {proc.popen.returncode}; "
                    f"log tail:\n{tail}"
                )

    def _start_containerd(self, node: Node) -> None:
        base = node.dir / "containerd"
        (node.dir / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
        config = base / "config.toml"
        base.mkdir(exist_ok=True)
        config.write_text(
            containerd_config(
                root=base / "root",
                state=base / "state",
                socket=node.containerd_socket,
                cni_bin=node_build.cni_bin_dir(),
                cni_conf=node.dir / "cni" / "net.d",
                runc=self.bin_dir / "runc",
                runc_root=node.runc_root,
            )
        )
        self._spawn(node, "containerd", [str(self.bin_dir / "containerd"), f"--config={config}"])

        def answers() -> bool:
            self._check_alive(node)
            try:
                self.ctr(node, "version", timeout=10)
            except NodeClusterError:
                return False  # not listening yet
            return True

        wait_for(answers, 60, f"{node.name}: containerd")
        self._write_cni(node)

    def ctr(self, node: Node, *args: str, timeout: float = 300) -> str:
        """The node's containerd, namespace ``k8s.io`` (the CRI's)."""
        argv = [
            str(self.bin_dir / "ctr"),
            f"--address={node.containerd_socket}",
            "--namespace=k8s.io",
            *args,
        ]
        return _run(argv, timeout=timeout)

    def import_images(self, archives: list[Path]) -> None:
        """Images for a running cluster (another Slurm release's, say): into every node now,
        and into nodes added later as the start's are."""
        self.image_archives += [a for a in archives if a not in self.image_archives]
        with ThreadPoolExecutor(max_workers=max(1, len(self.nodes))) as pool:
            list(pool.map(lambda node: self._import_images(node, archives), self.nodes))

    def _import_images(self, node: Node, archives: list[Path] | None = None) -> None:
        if archives is None:
            archives = [node_build.pause_archive_link(), *self.image_archives]
        for archive in archives:
            started = time.monotonic()
            # pinned: kubelet's image garbage collection never removes what nothing can pull
            self.ctr(
                node,
                "images",
                "import",
                "--label=io.cri-containerd.pinned=pinned",
                "--snapshotter=overlayfs",
                str(archive),
            )
            self.log(f"{node.name}: imported {archive.name} in {time.monotonic() - started:.0f}s")

    def _write_cni(self, node: Node) -> None:
        conflist = cni_conflist(node.pod_cidr, node.dir / "cni" / "ipam")
        (node.dir / "cni" / "net.d" / "10-sunk.conflist").write_text(json.dumps(conflist))

    def _start_kubelet(self, node: Node) -> None:
        pki = self._cp.pki
        identity = f"kubelet-{node.name}"
        sign(pki, identity, f"/O=system:nodes/CN=system:node:{node.name}")
        kubeconfig = write_kubeconfig(
            node.dir / "kubelet.kubeconfig", self.node_server(), pki, identity
        )
        resolv = node.dir / "resolv.conf"
        resolv.write_text("")  # Pods get the cluster's DNS only; no host search domains
        config = node.dir / "kubelet.yaml"
        config.write_text(yaml.safe_dump(self._kubelet_config(node, resolv), sort_keys=False))
        root = node.dir / "kubelet"
        self._spawn(
            node,
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={node.name}",
                f"--node-ip={node.addr}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                "--v=1",
            ],
        )

    def node_server(self) -> str:
        """The API server as nodes reach it, from their own network namespaces."""
        return f"https://{HUB_ADDR}:{self._cp.ports.apiserver}"

    def _kubelet_config(self, node: Node, resolv: Path) -> dict:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # these machines run cgroup v1 (hybrid); kubelet >= 1.35 refuses it otherwise
            "failCgroupV1": False,
            # no systemd here
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": node.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
            "address": node.addr,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self._cp.pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [node.addr],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv),
            "podLogsDir": str(node.dir / "pod-logs"),
            "failSwapOn": False,
            "maxPods": 60,
            # both nodes share one disk: never evict or collect images for disk pressure
            "evictionHard": {"memory.available": "100Mi"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "protectKernelDefaults": False,
            "nodeStatusReportFrequency": "10s",
        }

    def _start_kube_proxy(self, node: Node) -> None:
        kubeconfig = write_kubeconfig(
            node.dir / "kube-proxy.kubeconfig", self.node_server(), self._cp.pki, "kube-proxy"
        )
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "hostnameOverride": node.name,
            "bindAddress": node.addr,
            "mode": "iptables",
            "clusterCIDR": POD_NET,
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # conntrack limits are not writable from a network namespace: leave them alone
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        }
        path = node.dir / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self._spawn(node, "kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={path}"])

    def _start_network_policies(self, node: Node) -> None:
        """kube-router's NetworkPolicy controller alone (no routing, no service proxy: the
        bridge plugin and kube-proxy do those) enforces NetworkPolicies in the node's network
        namespace with iptables and ipsets, as a policy-enforcing CNI would; without it the
        bridge plugin lets everything through. (kube-network-policies needs nftables' `queue`
        expression, which this kernel lacks.)"""
        kubeconfig = write_kubeconfig(
            node.dir / "kube-router.kubeconfig", self.node_server(), self._cp.pki, "kube-router"
        )
        self._spawn(
            node,
            "kube-router",
            [
                str(self.bin_dir / "kube-router"),
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={node.name}",
                "--run-firewall=true",
                "--run-router=false",
                "--run-service-proxy=false",
                "--enable-cni=false",
                "--enable-ipv6=false",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--health-port=0",
                "--iptables-sync-period=1m",
            ],
        )

    def _start_coredns(self, node: Node) -> None:
        kubeconfig = write_kubeconfig(
            node.dir / "coredns.kubeconfig", self.node_server(), self._cp.pki, "coredns"
        )
        corefile = node.dir / "Corefile"
        corefile.write_text(
            f""".:53 {{
    bind {node.addr}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} sunk-test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
        )
        self._spawn(node, "coredns", [str(self.bin_dir / "coredns"), "-conf", str(corefile)])

    # --- waiting ------------------------------------------------------------------------------

    def wait_node_ready(self, name: str, timeout: float | None = None) -> dict:
        node = next(n for n in self.nodes if n.name == name)

        def ready() -> dict | None:
            self._check_alive(node)
            obj = self.client.get(f"/api/v1/nodes/{name}")
            return obj if node_ready(obj) else None

        self.log(f"{name}: waiting for Ready")
        return wait_for(ready, timeout or self.ready_timeout, f"node {name} Ready")

    def check_alive(self) -> None:
        """Raise if any node daemon has exited."""
        for node in self.nodes:
            self._check_alive(node)

    # --- faults -------------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise NodeClusterError(f"no node {name}")

    def stop_kubelet(self, name: str) -> None:
        """Stop a node's kubelet, as when it dies: the node's containers keep running, and the
        Node goes NotReady once the controller-manager's grace period passes."""
        self._stop_daemons(self.node(name), "kubelet")

    def cut_off(self, name: str, *, on: bool = True) -> None:
        """Drop every packet that enters the node from the others, and every one it sends
        itself (``on=False``: take the rules out again). In the raw table, which kube-proxy and
        kube-router leave alone and which sees packets first: no reply comes back to the node
        or its Pods, and nothing reaches them, so no connection works either way."""
        node = self.node(name)
        action = "-I" if on else "-D"
        for chain, flag in (("PREROUTING", "-i"), ("OUTPUT", "-o")):
            rule = [chain, flag, "eth0", "-m", "comment", "--comment", CUT_OFF, "-j", "DROP"]
            _run(in_netns(node.netns, ["iptables", "-w", "-t", "raw", action, *rule]))

    def start_kubelet(self, name: str) -> None:
        """Start a stopped kubelet again (it finds its running containers)."""
        node = self.node(name)
        if any(p.name == "kubelet" for p in node.procs):
            raise NodeClusterError(f"{name}: kubelet is running")
        self._start_kubelet(node)

    def lose_node(self, name: str) -> None:
        """The machine is gone for good, as at a power loss: cut off from the others, its
        daemons stopped and its containers killed. Its Node object stays until someone deletes
        it (a cloud's node controller does, for a terminated machine); teardown clears the
        rest."""
        node = self.node(name)
        self.cut_off(name)
        self._stop_daemons(node)
        _kill_cgroup(node.cgroup_root.lstrip("/"))

    def _stop_daemons(self, node: Node, *names: str) -> None:
        """SIGTERM the node's daemons called ``names`` (all without names), wait for them to
        exit and forget them."""
        stopping = [p for p in node.procs if not names or p.name in names]
        for proc in stopping:
            proc.popen.terminate()
        for proc in stopping:
            try:
                proc.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(timeout=30)
            node.procs.remove(proc)

    def add_node(self) -> Node:
        """One more worker node, started as those of ``start`` were, once it is Ready: a
        machine that joins a running cluster (a replacement for one that is gone)."""
        if not self._started:
            raise NodeClusterError("not started")
        self._prepare_node(len(self.nodes))
        node = self.nodes[-1]
        self.node_count = len(self.nodes)
        self._write_state()  # stop_from_state finds the new node's cgroup root and netns
        self._import_images(node)
        self._start_kubernetes(node)
        self.wait_node_ready(node.name)
        self._start_network_policies(node)
        return node

    def _static_volumes(self) -> None:
        """hostPath PersistentVolumes without a class: a claim without a StorageClass binds to
        one (the nodes share this machine's disk, so any node can mount any of them)."""
        for i in range(self.volume_count):
            path = self._dir / "volumes" / f"pv-{i}"
            path.mkdir(parents=True, exist_ok=True)
            pv = {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"sunk-devenv-pv-{i}", "labels": {"sunk.devenv/pv": "true"}},
                "spec": {
                    "capacity": {"storage": "50Gi"},
                    # one directory of this machine: every node mounts it at once, so a
                    # claim for a shared volume (controller.ha's state) binds one too
                    "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "hostPath": {"path": str(path), "type": "Directory"},
                },
            }
            self.client.create("/api/v1/persistentvolumes", pv)

    # --- teardown -----------------------------------------------------------------------------

    def stop(self) -> None:
        """Everything goes: containers, daemons, mounts, cgroups, namespaces, the work dir
        (when it was a temp dir)."""
        if not self._started:
            return
        if self.control_plane is not None:
            self.control_plane.stop()
        for node in self.nodes:
            for proc in node.procs:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.terminate()
        errors = teardown(self._dir, self.run_id)
        for node in self.nodes:
            for proc in node.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=5)
        if self._requested_dir is None and not errors:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._started = False
        if errors:
            raise NodeClusterError("teardown left things behind: " + "; ".join(errors))

    @classmethod
    def attach(cls, workdir: Path) -> NodeCluster:
        """A handle on the cluster a detached ``start`` left running in ``workdir``."""
        state = json.loads((workdir / "nodes.json").read_text())
        if not state.get("apiserver_port"):
            raise NodeClusterError(f"{workdir}: the cluster never finished starting")
        cluster = cls(state["nodes"], workdir=workdir)
        cluster.workdir = workdir.resolve()
        cluster.run_id = state["run_id"]
        cluster.hub_netns = f"sunk-{cluster.run_id}-hub"
        cp = ControlPlane(cluster.workdir / "cp", netns=cluster.hub_netns, advertise=HUB_ADDR)
        cp.workdir = cluster.workdir / "cp"
        cp.ports.apiserver = state["apiserver_port"]
        cluster.control_plane = cp
        cluster.nodes = [cluster._node(i) for i in range(state["nodes"])]
        return cluster

    def healthy(self) -> bool:
        """The API server answers and every node is Ready."""
        try:
            if self.client.request("GET", "/readyz", raw=True).strip() != "ok":
                return False
            if not all(node_ready(self.client.get(f"/api/v1/nodes/{n.name}")) for n in self.nodes):
                return False
        except (OSError, ValueError, KeyError, RuntimeError):
            return False
        return True

    def detach(self) -> None:
        """Leave everything running when this process exits (``sunkctl dev up``);
        ``stop_from_state(workdir)`` ends it later."""
        if self.control_plane is not None:
            self.control_plane.detach()
        self._started = False

    def leftovers(self) -> list[str]:
        """Processes, mounts, namespaces and cgroups of this cluster still present."""
        found: list[str] = []
        root = str(self.workdir) if self.workdir else None
        sockets = str(run_dir(self.run_id))
        markers = [m for m in (root, sockets) if m]
        found += [f"process {pid}: {_cmdline(pid)[:120]}" for pid in _matching_pids(*markers)]
        if Path(sockets).exists():
            found.append(f"directory {sockets}")
        if root:
            found += [f"mount {m}" for m in _mounts_below(Path(root))]
        found += [f"netns {n}" for n in _netns_names() if n.startswith(f"sunk-{self.run_id}-")]
        for node in self.nodes:
            found += [
                f"cgroup {h / node.cgroup_root.lstrip('/')}"
                for h in _cgroup_hierarchies()
                if (h / node.cgroup_root.lstrip("/")).exists()
            ]
        return found


# --- helpers ------------------------------------------------------------------------------------


def cni_conflist(pod_cidr: str, ipam_dir: Path, *, portmap: bool = True) -> dict:
    """A node's CNI: Pods on bridge ``cni0`` in ``pod_cidr``, addresses from host-local."""
    bridge = {
        "type": "bridge",
        "bridge": "cni0",
        "isGateway": True,
        # Pods keep their own address towards other nodes and the hub: slurmctld must see a
        # slurmd's real address
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": pod_cidr}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(ipam_dir),
        },
    }
    plugins = [bridge, {"type": "portmap", "capabilities": {"portMappings": True}}]
    return {"cniVersion": "1.0.0", "name": "sunk", "plugins": plugins if portmap else [bridge]}


def containerd_config(
    *,
    root: Path,
    state: Path,
    socket: Path,
    cni_bin: Path,
    cni_conf: Path,
    runc: Path,
    runc_root: Path,
) -> str:
    """containerd 2.x (config version 3) for one node of several on one machine."""
    return f"""\
version = 3
root = "{root}"
state = "{state}"
# the host has no use for these, and several containerd instances would share their sockets
disabled_plugins = [
  "io.containerd.nri.v1.nri",
  "io.containerd.internal.v1.tracing",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{node_build.PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  # no CAP_SYS_RESOURCE here: a sandbox may not lower its oom_score_adj below containerd's
  restrict_oom_score_adj = true
  enable_selinux = false
  # Pod network namespaces under the state dir, not the host's /var/run/netns
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{runc_root}"
        # cgroupfs: there is no systemd
        SystemdCgroup = false
"""


def _sysctl(netns: str, key: str, value: str) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    _run(in_netns(netns, ["sh", "-c", f"echo {value} > {path}"]))


def _cgroup_hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies (and the v2 one of a hybrid host) mounted under
    /sys/fs/cgroup."""
    if not CGROUP_V1.is_dir() or (CGROUP_V1 / "cgroup.controllers").exists():
        return [CGROUP_V1]  # pure v2
    return sorted(p for p in CGROUP_V1.iterdir() if p.is_dir() and not p.is_symlink())


def _remove_cgroup(root: str) -> list[str]:
    errors = []
    for hierarchy in _cgroup_hierarchies():
        top = hierarchy / root.lstrip("/")
        if not top.exists():
            continue
        # children before parents
        for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                path.rmdir()
        try:
            top.rmdir()
        except OSError as exc:
            errors.append(f"cgroup {top}: {exc}")
    return errors


def _pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _matching_pids(*markers: str) -> list[int]:
    """Processes (not this one) whose command line contains one of ``markers``."""
    return [
        pid for pid in _pids() if pid != os.getpid() and any(m in _cmdline(pid) for m in markers)
    ]


def _kill_matching(*markers: str, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL, every process whose command line contains one of ``markers``."""
    pids = _matching_pids(*markers)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_cmdline(pid) for pid in pids):
            _reap()
            time.sleep(0.1)
        pids = [pid for pid in pids if _cmdline(pid)]
        if not pids:
            return


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _mounts_below(root: Path) -> list[str]:
    prefix = str(root.resolve())
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            mounts.append(point)
    return mounts


def _unmount_below(root: Path) -> list[str]:
    errors = []
    for _ in range(5):  # stacked mounts come off one layer a pass
        mounts = sorted(set(_mounts_below(root)), key=lambda m: -m.count("/"))
        if not mounts:
            return []
        for point in mounts:
            subprocess.run(["umount", "-l", point], capture_output=True)
    errors += [f"mount {m}" for m in _mounts_below(root)]
    return errors


def teardown(workdir: Path, run_id: str) -> list[str]:
    """Remove every trace of the cluster run ``run_id`` in ``workdir``: daemons and shims
    (their command lines name the work dir), containers (each node's runc root), mounts below
    the work dir, the cgroup roots and the network namespaces. Returns what could not be
    removed."""
    sockets = run_dir(run_id)
    # shims and port forwards name only their sockets
    _kill_matching(str(workdir), str(sockets))
    for runc_root in workdir.glob("node-*/runc/*"):
        runc = default_bin_dir() / "runc"
        with contextlib.suppress(NodeClusterError):
            for cid in _run([str(runc), f"--root={runc_root}", "list", "-q"], timeout=30).split():
                with contextlib.suppress(NodeClusterError):
                    _run([str(runc), f"--root={runc_root}", "delete", "--force", cid])
    prefix = f"sunk-{run_id}-"
    cgroups = sorted(
        {p.name for h in _cgroup_hierarchies() for p in h.glob(f"{prefix}*") if p.is_dir()}
    )
    for root in cgroups:
        _kill_cgroup(root)
    errors = _unmount_below(workdir)
    for root in cgroups:
        errors += _remove_cgroup(root)
    for ns in _netns_names():
        if ns.startswith(prefix):
            with contextlib.suppress(NodeClusterError):
                _run(["ip", "netns", "delete", ns])
    shutil.rmtree(sockets, ignore_errors=True)
    return errors


def run_dir(run_id: str) -> Path:
    """Sockets of one cluster run (a short path: unix sockets allow 108 bytes)."""
    return Path("/run") / f"sunk-{run_id}"


def stop_from_state(workdir: Path) -> list[str]:
    """Tear down the cluster whose state is in ``workdir`` (after ``detach`` or a crash)."""
    state_path = workdir / "nodes.json"
    if not state_path.exists():
        return []
    state = json.loads(state_path.read_text())
    errors = teardown(workdir.resolve(), state["run_id"])
    if not errors:
        state_path.unlink()
    return errors


def _netns_names() -> list[str]:
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines() if line]


def _kill_cgroup(root: str) -> None:
    """SIGKILL whatever still runs in a cgroup root (containers whose runc state is gone)."""
    for hierarchy in _cgroup_hierarchies():
        for procs in (hierarchy / root).rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)


__all__ = [
    "ControlPlaneError",
    "Node",
    "NodeCluster",
    "NodeClusterError",
    "missing_prerequisites",
    "stop_from_state",
    "teardown",
]
