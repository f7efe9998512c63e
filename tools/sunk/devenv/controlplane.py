"""A real, throw-away Kubernetes control plane for tests: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok, all on 127.0.0.1.

    with ControlPlane() as cp:
        cp.create_node("gpu-0", labels={"sunk/pool": "gpu"}, capacity={"nvidia.com/gpu": 8})
        cp.wait_node_ready("gpu-0")
        cp.client.get("/api/v1/nodes/gpu-0")

Nodes are simulated by kwok (annotation ``kwok.x-k8s.io/node: fake``): kwok keeps them Ready
and moves pods the scheduler binds to them to Running. Certificates (a throw-away CA, the API
server's serving certificate, client certificates per component, the service-account key pair)
are made with the ``openssl`` CLI in the work directory; the API server uses client-certificate
authentication and RBAC authorization.

The binaries come from ``python -m sunk.devenv.toolchain install kube``.

Every process is started in its own session (process group); ``stop()`` terminates each group
(SIGTERM, then SIGKILL), also from an ``atexit`` guard and on SIGTERM, and removes the temp dir.

The Python side talks to the API with plain HTTPS (``KubeClient``, stdlib ``urllib`` + ``ssl``)
rather than the ``kubernetes`` Python client package or a kubectl binary: tests need a handful of
create/get/list/patch/delete calls on JSON objects, which is ~80 lines with no new dependency
and no client/server version skew to manage.

CLI::

    python -m sunk.devenv.controlplane up [--dir D]   # prints the KUBECONFIG path, runs until
                                                      # SIGINT/SIGTERM
    python -m sunk.devenv.controlplane down --dir D   # stops the one started with --dir D
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from sunk.devenv.kube_build import KWOK_STAGES_NAME
from sunk.devenv.paths import bin_dir as default_bin_dir
from sunk.errors import ToolError

T = TypeVar("T")

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
INSTALL_HINT = "python -m sunk.devenv.toolchain install kube"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
STATE_FILE = "controlplane.json"


class ControlPlaneError(ToolError):  # a RuntimeError; sunkctl dev exits 3
    """The control plane could not be started or did not become ready."""


class KubeAPIError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        self.status = status
        self.body = body
        try:
            self.reason = json.loads(body).get("reason", "")
        except ValueError:
            self.reason = ""
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")


class KubeClient:
    """Minimal JSON client for the Kubernetes API, authenticating with a client certificate."""

    def __init__(
        self, server: str, ca_file: Path, cert_file: Path, key_file: Path, timeout: float = 15.0
    ) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._ssl.load_cert_chain(str(cert_file), str(key_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise KubeAPIError(
                method, path, exc.code, exc.read().decode(errors="replace")
            ) from None
        if raw:
            return text
        return json.loads(text) if text else None

    def get(self, path: str, *, missing_ok: bool = False, **query: str) -> Any:
        """The object; with ``missing_ok``, None when the API server has none (404)."""
        try:
            return self.request("GET", path, query=query or None)
        except KubeAPIError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise

    def list(
        self, path: str, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict]:
        query = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        return self.request("GET", path, query=query or None)["items"]

    def create(self, path: str, obj: Mapping[str, Any]) -> dict:
        return self.request("POST", path, dict(obj))

    def patch(self, path: str, patch: Mapping[str, Any], *, strategic: bool = False) -> dict:
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        return self.request("PATCH", path, dict(patch), content_type=f"application/{kind}+json")

    def delete(self, path: str, *, missing_ok: bool = False) -> Any:
        try:
            return self.request("DELETE", path)
        except KubeAPIError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def missing_binaries(directory: Path | None = None) -> list[str]:
    directory = directory or default_bin_dir()
    missing = [
        name
        for name in BINARIES
        if not (directory / name).exists() or not os.access(directory / name, os.X_OK)
    ]
    if not kwok_stages(directory).is_file():
        missing.append(KWOK_STAGES_NAME)
    return missing


def kwok_stages(directory: Path) -> Path:
    """kwok's Stage config, installed next to the binaries (``.tools/share``)."""
    return directory.parent / "share" / KWOK_STAGES_NAME


def wait_for(
    predicate: Callable[[], T | None], timeout: float, what: str, interval: float = 0.2
) -> T:
    """Poll ``predicate`` until it returns a truthy value; raise TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except (OSError, KubeAPIError, ValueError, KeyError) as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            suffix = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{suffix}")
        time.sleep(interval)


# --- certificates -----------------------------------------------------------------------------

_OPENSSL_CNF = """\
[req]
distinguished_name = dn
[dn]
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = {san}
[client_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
"""

# client identity -> certificate subject; the bootstrap RBAC policy knows these users/groups.
CLIENTS = {
    "admin": "/O=system:masters/CN=sunk-admin",
    "controller-manager": "/CN=system:kube-controller-manager",
    "scheduler": "/CN=system:kube-scheduler",
    "kwok": "/O=system:masters/CN=kwok",
    # the API server's identity towards kubelets (logs, exec, port-forward on real nodes)
    "apiserver-kubelet-client": "/O=system:masters/CN=kube-apiserver-kubelet-client",
}


def _openssl(*args: str) -> None:
    try:
        subprocess.run(["openssl", *args], check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise ControlPlaneError("the openssl CLI is needed to make test certificates") from exc
    except subprocess.CalledProcessError as exc:
        raise ControlPlaneError(f"openssl {args[0]} failed: {exc.stderr.strip()}") from exc


def make_pki(pki: Path, extra_ips: Iterable[str] = ()) -> None:
    """A CA, the API server's serving cert, client certs per component, a service-account key.
    ``extra_ips``: more addresses the API server is reached at (besides loopback)."""
    pki.mkdir(parents=True, exist_ok=True)
    san = ",".join(
        [
            "IP:127.0.0.1",
            f"IP:{SERVICE_IP}",
            *(f"IP:{ip}" for ip in extra_ips),
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
    )
    (pki / "openssl.cnf").write_text(_OPENSSL_CNF.format(san=san))
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(_new_key(pki, "ca")),
        "-subj",
        "/CN=sunk-test-ca",
        "-days",
        "7",
        "-config",
        str(pki / "openssl.cnf"),
        "-extensions",
        "ca_ext",
        "-out",
        str(pki / "ca.crt"),
    )
    sign(pki, "apiserver", "/CN=kube-apiserver", "server_ext")
    for name, subject in CLIENTS.items():
        sign(pki, name, subject)
    sa_key = _new_key(pki, "sa")
    _openssl("pkey", "-in", str(sa_key), "-pubout", "-out", str(pki / "sa.pub"))


def _new_key(pki: Path, name: str) -> Path:
    path = pki / f"{name}.key"
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)
    )
    path.chmod(0o600)
    return path


def sign(pki: Path, name: str, subject: str, ext: str = "client_ext") -> None:
    """``<name>.key`` and ``<name>.crt`` signed by the CA of ``make_pki``; ``ext`` is
    ``client_ext`` or ``server_ext`` (the API server's SANs)."""
    cnf = pki / "openssl.cnf"
    csr = pki / f"{name}.csr"
    key = _new_key(pki, name)
    _openssl(
        "req", "-new", "-key", str(key), "-subj", subject, "-config", str(cnf), "-out", str(csr)
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(pki / "ca.crt"),
        "-CAkey",
        str(pki / "ca.key"),
        "-set_serial",
        f"0x{secrets.token_hex(16)}",
        "-days",
        "7",
        "-extfile",
        str(cnf),
        "-extensions",
        ext,
        "-out",
        str(pki / f"{name}.crt"),
    )
    csr.unlink()


def write_kubeconfig(path: Path, server: str, pki: Path, user: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "sunk-test",
                "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki / f"{user}.crt"),
                    "client-key": str(pki / f"{user}.key"),
                },
            }
        ],
        "contexts": [{"name": "sunk-test", "context": {"cluster": "sunk-test", "user": user}}],
        "current-context": "sunk-test",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


# --- processes --------------------------------------------------------------------------------


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen
    log: Path
    argv: list[str]

    @property
    def pgid(self) -> int:  # start_new_session=True: the child leads its own group
        return self.popen.pid


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_groups(
    pgids: Iterable[int], timeout: float = 10.0, reap: Callable[[int], None] | None = None
) -> None:
    """SIGTERM each process group, wait up to ``timeout``, then SIGKILL what is left."""
    pgids = list(pgids)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pgid in pgids:
        while _group_alive(pgid) and time.monotonic() < deadline:
            if reap:
                reap(pgid)
            time.sleep(0.05)
        if _group_alive(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    for pgid in pgids:
        while _group_alive(pgid):
            if reap:
                reap(pgid)
            time.sleep(0.05)


_LIVE: set[ControlPlane] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for cp in live:
        with contextlib.suppress(Exception):
            cp.stop()


def _sigterm_to_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@dataclass
class Ports:
    etcd_client: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    controller_manager: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on loopback.

    ``workdir``: where certificates, kubeconfigs, etcd data and logs go. Default: a fresh temp
    dir that ``stop()`` removes; a given ``workdir`` is kept (only its processes are stopped).

    ``audit_policy``: an audit Policy (a mapping, as in ``audit.k8s.io/v1``); the API server
    then writes the events it selects as JSON lines to ``audit_log``. ``apiserver_args``: more
    kube-apiserver flags (e.g. ``--enable-admission-plugins=...``).

    ``netns`` (real nodes, ``sunk.devenv.nodes``): run every component inside that network
    namespace, the API server listening on all of its addresses and advertising ``advertise``
    (the address kubelets and Pods reach it at). Each component port is forwarded to the same
    port on this namespace's 127.0.0.1 (socat through a unix socket in ``socket_dir``), so
    clients here use the control plane exactly as in the default mode.
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        *,
        bin_dir: Path | None = None,
        start_timeout: float = 180.0,
        stop_timeout: float = 10.0,
        netns: str | None = None,
        advertise: str | None = None,
        socket_dir: Path | None = None,
        audit_policy: Mapping[str, Any] | None = None,
        apiserver_args: Iterable[str] = (),
    ) -> None:
        if (netns is None) != (advertise is None):
            raise ValueError("netns and advertise go together")
        self.audit_policy = dict(audit_policy) if audit_policy is not None else None
        self.apiserver_args = list(apiserver_args)
        self.netns = netns
        self.advertise = advertise
        self._socket_dir = socket_dir
        self.bin_dir = Path(bin_dir) if bin_dir else default_bin_dir()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._owns_dir = workdir is None
        self._requested_dir = Path(workdir) if workdir else None
        self.workdir: Path | None = None
        self.ports = Ports()
        self._procs: list[_Proc] = []
        self._client: KubeClient | None = None
        self._prev_sigterm: Any = None
        self._started = False

    # paths
    @property
    def pki(self) -> Path:
        return self._dir / "pki"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user in group ``system:masters``)."""
        return self._dir / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines), written when ``audit_policy`` is given."""
        return self._dir / "logs" / "audit.log"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = KubeClient(
                self.server, self.pki / "ca.crt", self.pki / "admin.crt", self.pki / "admin.key"
            )
        return self._client

    @property
    def pids(self) -> list[int]:
        """Process ids (= process group ids) of the started components."""
        return [p.popen.pid for p in self._procs]

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise ControlPlaneError("control plane not started")
        return self.workdir

    # lifecycle
    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        if self._started:
            return self
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ControlPlaneError(
                f"missing {', '.join(missing)} in {self.bin_dir}: run `{INSTALL_HINT}`"
            )
        if self._requested_dir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="sunk-cp-"))
        else:
            self.workdir = self._requested_dir.resolve()
            self.workdir.mkdir(parents=True, exist_ok=True)
            # always a fresh cluster: new ports and certificates, so no stale etcd member
            for stale in ("etcd", "pki"):
                shutil.rmtree(self.workdir / stale, ignore_errors=True)
        self._started = True
        with _LIVE_LOCK:
            _LIVE.add(self)
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        ):
            self._prev_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_exit)
        for attempt in range(1, 4):
            self.ports = Ports()  # free now; another process may still take one before we bind
            self._client = None
            try:
                self._start_processes()
                self.wait_ready(self.start_timeout)
                return self
            except ControlPlaneError as exc:
                if "address already in use" in str(exc) and attempt < 3:
                    self._stop_processes()
                    for stale in ("etcd", "logs"):
                        shutil.rmtree(self._dir / stale, ignore_errors=True)
                    continue
                self.stop()
                raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _start_processes(self) -> None:
        (self._dir / "logs").mkdir(exist_ok=True)
        make_pki(self.pki, [self.advertise] if self.advertise else [])
        pki = self.pki
        for user in ("admin", "controller-manager", "scheduler", "kwok"):
            write_kubeconfig(self._dir / f"{user}.kubeconfig", self.server, pki, user)
        p = self.ports
        etcd_url = f"http://127.0.0.1:{p.etcd_client}"
        peer_url = f"http://127.0.0.1:{p.etcd_peer}"
        self._spawn(
            "etcd",
            [
                "--name=sunk-test",
                f"--data-dir={self._dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=sunk-test={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            port=p.etcd_client,
        )
        wait_for(lambda: self._check_alive() or self._etcd_healthy(etcd_url), 30, "etcd health")
        if self.advertise:
            # real kubelets and Pods reach it on the namespace's bridge; the `kubernetes`
            # Service's endpoints point there (the default lease reconciler)
            address = ["--bind-address=0.0.0.0", f"--advertise-address={self.advertise}"]
        else:
            # the endpoint reconciler refuses a loopback advertise address; no in-cluster
            # clients need the `kubernetes` Service endpoints here
            address = [
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
            ]
        audit = []
        if self.audit_policy is not None:
            policy = self._dir / "audit-policy.yaml"
            policy.write_text(
                yaml.safe_dump(
                    {"apiVersion": "audit.k8s.io/v1", "kind": "Policy"} | self.audit_policy
                )
            )
            audit = [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
            ]
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                *address,
                f"--secure-port={p.apiserver}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                "--authorization-mode=Node,RBAC",
                "--anonymous-auth=false",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--allow-privileged=true",
                "--profiling=false",
                f"--cert-dir={self._dir / 'apiserver-certs'}",
                *audit,
                *self.apiserver_args,
            ],
            port=p.apiserver,
        )
        wait_for(self._apiserver_ready, self.start_timeout, "kube-apiserver /readyz")
        cm_kubeconfig = self._dir / "controller-manager.kubeconfig"
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={cm_kubeconfig}",
                f"--authentication-kubeconfig={cm_kubeconfig}",
                f"--authorization-kubeconfig={cm_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.controller_manager}",
                f"--cert-dir={self._dir / 'controller-manager-certs'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--leader-elect=false",
                "--profiling=false",
                # The default 20 QPS lifts the not-ready taint of 1,000 new Nodes in minutes.
                "--kube-api-qps=200",
                "--kube-api-burst=400",
            ],
            port=p.controller_manager,
        )
        sched_kubeconfig = self._dir / "scheduler.kubeconfig"
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={sched_kubeconfig}",
                f"--authentication-kubeconfig={sched_kubeconfig}",
                f"--authorization-kubeconfig={sched_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.scheduler}",
                f"--cert-dir={self._dir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--profiling=false",
            ],
            port=p.scheduler,
        )
        # kwok serves nothing (no --server-address); it only watches the API.
        self._spawn(
            "kwok",
            [
                f"--kubeconfig={self._dir / 'kwok.kubeconfig'}",
                f"--config={kwok_stages(self.bin_dir)}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                "--manage-nodes-with-label-selector=",
                "--cidr=10.244.0.1/16",
                "--node-lease-duration-seconds=40",
            ],
        )

    def _spawn(self, name: str, args: list[str], *, port: int | None = None) -> None:
        """Start ``name``; in a netns, also forward its ``port`` to this namespace's loopback."""
        self._popen(name, [str(self.bin_dir / name), *args], netns=self.netns)
        if self.netns and port:
            sock = (self._socket_dir or self._dir / "forward") / f"{port}.sock"
            sock.parent.mkdir(parents=True, exist_ok=True)
            self._popen(
                f"forward-{port}-in",
                ["socat", f"UNIX-LISTEN:{sock},fork,unlink-early", f"TCP:127.0.0.1:{port}"],
                netns=self.netns,
            )
            self._popen(
                f"forward-{port}-out",
                [
                    "socat",
                    f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr",
                    f"UNIX-CONNECT:{sock}",
                ],
                netns=None,
            )

    def _popen(self, name: str, argv: list[str], *, netns: str | None) -> None:
        if netns:
            # only the network namespace changes: mounts and /sys stay the host's
            argv = ["nsenter", f"--net=/var/run/netns/{netns}", "--", *argv]
        self._start(name, argv)

    def _start(self, name: str, argv: list[str]) -> None:
        log = self._dir / "logs" / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self._dir,
                env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
            )
        self._procs.append(_Proc(name, popen, log, argv))
        self._write_state()

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (through etcd's JSON gateway) and
        return that revision: a watch resumed from an older resourceVersion then gets 410 Gone
        once the API server's watch cache no longer covers it (after a restart, say)."""
        url = f"http://127.0.0.1:{self.ports.etcd_client}/v3/kv"

        def post(path: str, body: Mapping[str, Any]) -> Any:
            request = urllib.request.Request(
                f"{url}/{path}", data=json.dumps(body).encode(), method="POST"
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)

        revision = int(
            post("range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"]
        )
        post("compaction", {"revision": revision, "physical": True})
        return revision

    def restart(self, name: str, down_seconds: float = 0.0) -> None:
        """Stop one component (``kube-apiserver``, say), keep it down ``down_seconds``, start
        it again with the same arguments and, for the API server, wait until it is ready:
        for tests of how clients ride out an outage."""
        proc = next(p for p in self._procs if p.name == name)
        kill_groups([proc.pgid], self.stop_timeout, reap=lambda _: proc.popen.poll())
        self._procs.remove(proc)
        time.sleep(down_seconds)
        self._start(name, proc.argv)
        if name == "kube-apiserver":
            wait_for(self._apiserver_ready, self.start_timeout, "kube-apiserver /readyz")

    def _write_state(self) -> None:
        state = {
            "supervisor": os.getpid(),
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "processes": {p.name: p.popen.pid for p in self._procs},
        }
        (self._dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    def _check_alive(self) -> None:
        for proc in self._procs:
            if proc.popen.poll() is not None:
                tail = proc.log.read_text(errors="replace")[-3000:]
                raise ControlPlaneError(
                    f"{proc.name} exited with {proc.popen.returncode}; log tail:\n{tail}"
                )

    @staticmethod
    def _etcd_healthy(url: str) -> bool:
        with urllib.request.urlopen(url + "/health", timeout=2) as resp:
            return json.load(resp).get("health") == "true"

    def _apiserver_ready(self) -> bool:
        self._check_alive()
        return self.client.request("GET", "/readyz", raw=True).strip() == "ok"

    def _component_healthy(self, port: int) -> bool:
        self._check_alive()
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed serving certs of the components
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/healthz", timeout=2, context=ctx
        ) as resp:
            return resp.read().decode().strip() == "ok"

    def wait_ready(self, timeout: float = 120.0) -> None:
        """API server ready, controller-manager and scheduler healthy, and the ``default``
        ServiceAccount minted (pods can be created)."""
        wait_for(self._apiserver_ready, timeout, "kube-apiserver /readyz")
        wait_for(
            lambda: self._component_healthy(self.ports.controller_manager),
            timeout,
            "kube-controller-manager /healthz",
        )
        wait_for(
            lambda: self._component_healthy(self.ports.scheduler),
            timeout,
            "kube-scheduler /healthz",
        )
        wait_for(
            lambda: self.client.get("/api/v1/namespaces/default/serviceaccounts/default"),
            timeout,
            "the default ServiceAccount",
        )
        self._check_alive()

    def stop(self) -> None:
        """Stop every process group this control plane started; remove its temp dir."""
        self._stop_processes()
        self._client = None
        self._forget()
        if self.workdir is not None:
            if self._owns_dir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                (self.workdir / STATE_FILE).unlink(missing_ok=True)
        self._started = False

    def detach(self) -> None:
        """Keep the processes running after this Python process exits."""
        self._forget()
        self._procs = []
        self._started = False

    def _forget(self) -> None:
        """No more stopping at exit or on SIGTERM."""
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self._prev_sigterm is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._prev_sigterm)
            self._prev_sigterm = None

    def _stop_processes(self) -> None:
        procs, self._procs = self._procs, []

        def reap(pid: int) -> None:
            for proc in procs:
                if proc.popen.pid == pid:
                    proc.popen.poll()

        # one at a time, clients before servers: an API server whose etcd is gone hangs in its
        # shutdown for a long time, so etcd goes last
        for proc in reversed(procs):
            kill_groups([proc.pgid], timeout=self.stop_timeout, reap=reap)
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)

    def token_kubeconfig(
        self, namespace: str, account: str, path: Path, expiration_seconds: int = 6 * 3600
    ) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount ``namespace/account`` (a
        token from the TokenRequest API), to run a client with exactly the rights RBAC gives
        it rather than as ``system:masters``."""
        out = self.client.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "sunk-test",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self.pki / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": account, "user": {"token": out["status"]["token"]}}],
            "contexts": [
                {"name": "sunk-test", "context": {"cluster": "sunk-test", "user": account}}
            ],
            "current-context": "sunk-test",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # namespaces
    def create_namespace(
        self, name: str, secret_data: Mapping[str, Mapping[str, bytes]] | None = None
    ) -> None:
        """A namespace, with Secrets (name → {key: bytes}) in it, once its default
        ServiceAccount exists (Pods are refused before that)."""
        client = self.client
        client.create("/api/v1/namespaces", {"metadata": {"name": name}})
        for secret, data in (secret_data or {}).items():
            encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
            client.create(
                f"/api/v1/namespaces/{name}/secrets",
                {"metadata": {"name": secret}, "data": encoded},
            )
        self.wait_for(
            lambda: client.get(
                f"/api/v1/namespaces/{name}/serviceaccounts/default", missing_ok=True
            ),
            60,
            f"the default ServiceAccount of {name}",
        )

    # nodes
    def create_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Mapping[str, str] | str] = (),
        capacity: Mapping[str, str | int] | None = None,
        address: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict:
        """Create a kwok-managed Node. ``taints``: dicts (key, value, effect) or
        ``"key=value:Effect"`` strings. ``capacity``: e.g. ``{"cpu": 64, "memory": "512Gi",
        "nvidia.com/gpu": 8}`` (``pods`` defaults to 110); allocatable equals capacity."""
        resources = {"cpu": "1", "memory": "4Gi", "pods": "110"}
        resources.update({k: str(v) for k, v in (capacity or {}).items()})
        status: dict[str, Any] = {"capacity": resources, "allocatable": dict(resources)}
        if address:
            status["addresses"] = [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ]
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **(labels or {}),
                },
                "annotations": {KWOK_ANNOTATION: "fake", **(annotations or {})},
            },
            "spec": {"taints": [_taint(t) for t in taints]},
            "status": status,
        }
        return self.client.create("/api/v1/nodes", node)

    def wait_node_ready(self, name: str, timeout: float = 60.0) -> dict:
        def ready() -> dict | None:
            node = self.client.get(f"/api/v1/nodes/{name}")
            return node if node_ready(node) else None

        return wait_for(ready, timeout, f"node {name} Ready")

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float = 60.0, what: str = "condition"
    ) -> T:
        def checked() -> T | None:
            self._check_alive()
            return predicate()

        return wait_for(checked, timeout, what)


def node_ready(node: Mapping[str, Any]) -> bool:
    """The Node's Ready condition is True."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _taint(taint: Mapping[str, str] | str) -> dict[str, str]:
    if isinstance(taint, str):
        kv, _, effect = taint.rpartition(":")
        key, _, value = kv.partition("=")
        if not key or not effect:
            raise ValueError(f"taint {taint!r}: expected key[=value]:Effect")
        taint = {"key": key, "value": value, "effect": effect}
    return {k: v for k, v in taint.items() if v != ""}


# --- CLI --------------------------------------------------------------------------------------


def _cmd_up(workdir: str | None) -> int:
    if workdir and (Path(workdir) / STATE_FILE).exists():
        state = json.loads((Path(workdir) / STATE_FILE).read_text())
        with contextlib.suppress(ProcessLookupError):
            os.kill(state["supervisor"], 0)
            print(
                f"controlplane: already running in {workdir} (pid {state['supervisor']})",
                file=sys.stderr,
            )
            return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cp = ControlPlane(workdir)
    try:
        cp.start()
    except (ControlPlaneError, TimeoutError) as exc:
        print(f"controlplane: error: {exc}", file=sys.stderr)
        return 1
    try:
        print(cp.kubeconfig, flush=True)
        print(
            f"controlplane: API server {cp.server}; stop with Ctrl-C"
            + (f" or `down --dir {cp.workdir}`" if workdir else ""),
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(1.0):
            cp._check_alive()
    except ControlPlaneError as exc:
        print(f"controlplane: error: {exc}", file=sys.stderr)
        return 1
    finally:
        cp.stop()
    return 0


def _cmd_down(workdir: str, timeout: float = 30.0) -> int:
    state_path = Path(workdir) / STATE_FILE
    if not state_path.exists():
        print(f"controlplane: nothing running in {workdir}", file=sys.stderr)
        return 0
    state = json.loads(state_path.read_text())
    supervisor = state["supervisor"]
    with contextlib.suppress(ProcessLookupError):
        os.kill(supervisor, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(supervisor, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    # whatever the supervisor did not clean up (it may have been SIGKILLed); only groups whose
    # leader still runs from this work dir, so a recycled pid is never signalled
    kill_groups(pid for pid in state["processes"].values() if _runs_from(pid, Path(workdir)))
    state_path.unlink(missing_ok=True)
    return 0


def _runs_from(pid: int, workdir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(workdir.resolve()) in cmdline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sunk.devenv.controlplane", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a control plane and print the KUBECONFIG path")
    up.add_argument("--dir", help="work dir (kept afterwards); default: a temp dir")
    down = sub.add_parser("down", help="stop the control plane started with up --dir DIR")
    down.add_argument("--dir", required=True)
    args = parser.parse_args(argv)
    if args.command == "up":
        return _cmd_up(args.dir)
    return _cmd_down(args.dir)


if __name__ == "__main__":
    sys.exit(main())
