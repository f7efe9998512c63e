"""A private OCI registry for the container-image tests: Distribution (Debian's
``docker-registry``) with TLS and htpasswd (bcrypt) basic auth, inside a network namespace.

    with PrivateRegistry(cluster.hub_netns) as reg:       # 10.250.0.1:5443 in the hub netns
        ref = reg.push(images.saved_archive("opensunk/train:trixie"), "train:v1")
        reg.certs_d(some_dir)          # some_dir/10.250.0.1:5443/ca.crt (containers' certs.d)
        reg.netrc_line()               # "machine 10.250.0.1 login sunk password ..." (enroot)

Nothing listens on the host's addresses: the registry runs in ``netns`` (``ip netns exec``) and
listens on ``address:port`` there only, which ``start()`` checks in the process's own socket
table. Everything it writes (a throwaway CA and server certificate with SAN ``IP:<address>``,
the htpasswd file, its configuration, the image store, its log, skopeo's temporary files) lives
in one temporary directory; ``stop()`` kills the process and removes that directory, and
``leftovers()`` reports anything that survived.

The toolchain component ``private-registry`` provides the binaries: ``docker-registry``
extracted from Debian's package (installing the package would start a system service on every
host address at :5000), ``skopeo`` (pushes and inspects, run in the same namespace) and
``htpasswd`` (apache2-utils, the bcrypt password file) installed with apt.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from sunk.devenv.paths import tool_path
from sunk.errors import ToolError

INSTALL_HINT = "python -m sunk.devenv.toolchain install private-registry"
HUB_ADDRESS = "10.250.0.1"  # the real-node cluster's hub (sunk.devenv.nodes.HUB_ADDR)
DEFAULT_PORT = 5443
DEFAULT_USER = "sunk"
REALM = "opensunk test registry"
HOST_COMMANDS = ("ip", "skopeo", "htpasswd")


class RegistryError(ToolError):  # a RuntimeError
    """The registry did not start, listens where it must not, or a push failed."""


def registry_binary() -> Path | None:
    """The toolchain's ``docker-registry``, else the Debian package's on PATH."""
    found = tool_path("docker-registry") or shutil.which("docker-registry")
    return Path(found) if found else None


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run the registry (empty when it can)."""
    missing = [] if registry_binary() else ["docker-registry"]
    missing += [f"{cmd} (host)" for cmd in HOST_COMMANDS if shutil.which(cmd) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def write_certs_d(directory: Path, host: str, ca_pem: str) -> Path:
    """``<directory>/<host>/ca.crt``: the layout of /etc/containers/certs.d (and Docker's
    /etc/docker/certs.d) that skopeo, podman and containerd's hosts.toml users read; returns
    ``directory``."""
    folder = directory / host
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.crt").write_text(ca_pem)
    return directory


def archive_transport(archive: Path) -> str:
    """skopeo's transport for a local image archive: ``docker-archive`` for ``docker save``
    output (``manifest.json``; Docker 25+ writes an OCI layout beside it), ``oci-archive`` for
    an OCI image layout in a tar."""
    with tarfile.open(archive) as tar:
        names = {name.removeprefix("./") for name in tar.getnames()}
    if "manifest.json" in names:
        return "docker-archive"
    if "oci-layout" in names and "index.json" in names:
        return "oci-archive"
    raise RegistryError(f"{archive}: neither a docker-archive nor an OCI archive")


def listening(pid: int, *, own: bool = False) -> set[tuple[str, int]]:
    """(address, port) of the TCP sockets listening in ``pid``'s network namespace (``own``:
    only those ``pid`` holds open)."""
    inodes: set[str] | None = None
    if own:
        inodes = set()
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[len("socket:[") : -1])
    found: set[tuple[str, int]] = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or (inodes is not None and fields[9] not in inodes):  # LISTEN
                continue
            hex_addr, hex_port = fields[1].rsplit(":", 1)
            raw = bytes.fromhex(hex_addr)
            # /proc prints each 32-bit word of the address in host (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((socket.inet_ntop(family, raw), int(hex_port, 16)))
    return found


class PrivateRegistry:
    """``with PrivateRegistry(netns) as reg:`` serves ``https://reg.host`` in ``netns`` until
    exit. ``address`` must already be configured in that namespace (the hub's bridge address,
    or a test's own)."""

    def __init__(
        self,
        netns: str,
        *,
        address: str = HUB_ADDRESS,
        port: int = DEFAULT_PORT,
        username: str = DEFAULT_USER,
        password: str | None = None,
        workdir_parent: Path | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.netns = netns
        self.address = str(ipaddress.ip_address(address))
        self.port = port
        self.username = username
        self.password = password or secrets.token_urlsafe(18)
        self.workdir_parent = workdir_parent
        self.log_path = log_path  # a copy of the registry's log, kept after stop()
        self.workdir: Path | None = None
        self._last_workdir: Path | None = None
        self.ca_pem = ""
        self._proc: subprocess.Popen[bytes] | None = None

    # --- what clients need ----------------------------------------------------------------------

    @property
    def host(self) -> str:
        """``address:port``, as in image references (``10.250.0.1:5443/train:v1``)."""
        return f"{self.address}:{self.port}"

    @property
    def ca_path(self) -> Path:
        """The CA certificate (PEM) that signed the registry's certificate."""
        return self._dir / "ca.crt"

    def reference(self, name_tag: str) -> str:
        return f"{self.host}/{name_tag}"

    def certs_d(self, directory: Path) -> Path:
        """``<directory>/<host:port>/ca.crt`` (see :func:`write_certs_d`); returns directory."""
        return write_certs_d(directory, self.host, self.ca_pem)

    def netrc_line(self, *, with_port: bool = False) -> str:
        """The registry's line of enroot's ``~/.config/enroot/.credentials`` (netrc format).
        enroot matches the registry's host without the port (``${registry%:*}``)."""
        machine = self.host if with_port else self.address
        return f"machine {machine} login {self.username} password {self.password}"

    # --- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> PrivateRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise RegistryError("the registry is not started")
        return self.workdir

    def start(self, timeout: float = 30.0) -> PrivateRegistry:
        binary = registry_binary()
        missing = missing_prerequisites()
        if missing or binary is None:
            raise RegistryError(f"the private registry needs {', '.join(missing)}: "
                                f"run `{INSTALL_HINT}` as root")  # fmt: skip
        if not Path(f"/var/run/netns/{self.netns}").exists():
            raise RegistryError(f"network namespace {self.netns} does not exist")
        self.workdir = Path(tempfile.mkdtemp(prefix="sunk-registry-", dir=self.workdir_parent))
        try:
            self._write_files()
            log = (self._dir / "registry.log").open("ab")
            try:
                self._proc = subprocess.Popen(
                    ["ip", "netns", "exec", self.netns, str(binary), "serve",
                     str(self._dir / "config.yml")],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    # no REGISTRY_* variable of the caller's may override the configuration
                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self._dir)},
                    start_new_session=True,
                )  # fmt: skip
            finally:
                log.close()
            self._wait_listening(binary, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _write_files(self) -> None:
        ca_pem, cert_pem, key_pem = certificates(self.address)
        self.ca_pem = ca_pem
        d = self._dir
        (d / "ca.crt").write_text(ca_pem)
        (d / "server.crt").write_text(cert_pem)
        key = d / "server.key"
        key.touch(mode=0o600)
        key.write_text(key_pem)
        (d / "htpasswd").write_text(htpasswd_line(self.username, self.password))
        (d / "data").mkdir()
        (d / "tmp").mkdir()
        (d / "home").mkdir()
        write_certs_d(d / "certs.d", self.host, ca_pem)
        # skopeo's signature policy of its own: accept what we push and pull (the host's
        # /etc/containers/policy.json may be absent or stricter)
        (d / "policy.json").write_text('{"default": [{"type": "insecureAcceptAnything"}]}\n')
        config = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text"},
            "storage": {
                "filesystem": {"rootdirectory": str(d / "data")},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {
                "addr": self.host,
                "secret": secrets.token_hex(16),
                "tls": {"certificate": str(d / "server.crt"), "key": str(key)},
                "headers": {"X-Content-Type-Options": ["nosniff"]},
            },
            "auth": {"htpasswd": {"realm": REALM, "path": str(d / "htpasswd")}},
        }
        (d / "config.yml").write_text(yaml.safe_dump(config, sort_keys=False))

    def _wait_listening(self, binary: Path, timeout: float) -> None:
        """Until the registry listens; then check it is in ``netns``, on ``host`` only."""
        assert self._proc is not None
        pid = self._proc.pid
        netns = os.stat(f"/var/run/netns/{self.netns}")
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RegistryError(
                    f"docker-registry exited ({self._proc.returncode}) before listening on "
                    f"{self.host} in {self.netns}:\n{self.log_tail()}"
                )
            # `ip netns exec` enters the namespace, then execs the registry under this pid
            try:
                execed = Path(f"/proc/{pid}/exe").resolve() == binary.resolve()
            except OSError:
                execed = False
            sockets = listening(pid, own=True) if execed else set()
            if sockets:
                break
            if time.monotonic() > deadline:
                raise RegistryError(f"docker-registry not listening on {self.host} within "
                                    f"{timeout:.0f}s:\n{self.log_tail()}")  # fmt: skip
            time.sleep(0.1)
        ns = os.stat(f"/proc/{pid}/ns/net")
        if (ns.st_dev, ns.st_ino) != (netns.st_dev, netns.st_ino):
            raise RegistryError(f"docker-registry does not run in network namespace "
                                f"{self.netns}")  # fmt: skip
        if sockets != {(self.address, self.port)}:
            raise RegistryError(f"docker-registry listens on {sorted(sockets)}, not on "
                                f"{self.host} only")  # fmt: skip

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = (self._dir / "registry.log").read_text(errors="replace")
        except (OSError, RegistryError):
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        workdir, self.workdir = self.workdir, None
        if workdir is None:
            return
        if self.log_path is not None and (workdir / "registry.log").exists():
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(workdir / "registry.log", self.log_path)
        shutil.rmtree(workdir, ignore_errors=True)
        self._last_workdir = workdir

    def leftovers(self) -> list[str]:
        """Processes and files of this registry still present after ``stop()``."""
        workdir = self.workdir or self._last_workdir
        if workdir is None:
            return []
        found = [f"directory {workdir}"] if workdir.exists() else []
        marker = str(workdir).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline:
                command = cmdline.replace(b"\0", b" ").decode(errors="replace")
                found.append(f"process {entry.name}: {command}")
        return found

    # --- skopeo in the namespace -----------------------------------------------------------------

    def skopeo(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``skopeo <args>`` in the registry's namespace, with a signature policy, HOME and
        TMPDIR of the registry's own (never the host user's auth.json or /var/tmp)."""
        d = self._dir
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(d / "home"),
            "TMPDIR": str(d / "tmp"),
            "REGISTRY_AUTH_FILE": str(d / "home" / "auth.json"),
        }
        argv = ["ip", "netns", "exec", self.netns, "skopeo", "--policy", str(d / "policy.json"),
                *args]  # fmt: skip
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=env, check=False)  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise RegistryError(
                f"skopeo {' '.join(args[:1])}: no answer in {timeout:.0f}s"
            ) from exc

    def push(self, archive: Path, name_tag: str, *, timeout: float = 600) -> str:
        """Copy a local image archive (``docker save`` output or an OCI archive) to
        ``<host>/<name_tag>``; returns that reference."""
        ref = self.reference(name_tag)
        source = f"{archive_transport(archive)}:{archive}"
        proc = self.skopeo(
            "copy", "--quiet", "--dest-creds", f"{self.username}:{self.password}",
            "--dest-cert-dir", str(self._dir / "certs.d" / self.host),
            source, f"docker://{ref}", timeout=timeout,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RegistryError(f"skopeo copy {source} docker://{ref} failed "
                                f"({proc.returncode}): {proc.stderr.strip()[-2000:]}")  # fmt: skip
        return ref

    def inspect(
        self,
        name_tag: str,
        *,
        username: str | None = None,
        password: str | None = None,
        cert_dir: Path | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """``skopeo inspect docker://<host>/<name_tag>`` as a client would: the given
        credentials (none: anonymous) and CA folder (default: this registry's)."""
        creds = (["--creds", f"{username}:{password or ''}"] if username is not None
                 else ["--no-creds"])  # fmt: skip
        certs = cert_dir or self._dir / "certs.d" / self.host
        return self.skopeo("inspect", *creds, "--cert-dir", str(certs),
                           f"docker://{self.reference(name_tag)}", timeout=timeout)  # fmt: skip


# --- certificates and passwords ---------------------------------------------------------------


def certificates(address: str, days: int = 2) -> tuple[str, str, str]:
    """A throwaway CA and a server certificate for ``address`` (SAN IP), P-256 keys:
    (CA certificate, server certificate, server key), PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "opensunk test registry CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return ca.public_bytes(pem).decode(), cert.public_bytes(pem).decode(), key_pem


def htpasswd_line(username: str, password: str) -> str:
    """``user:<bcrypt hash>`` for Distribution's htpasswd auth (bcrypt only), made by Apache's
    ``htpasswd -B`` with the password on stdin (never on a command line)."""
    if ":" in username or "\n" in username + password:
        raise RegistryError("htpasswd: the user name may not hold ':' nor a newline")
    proc = subprocess.run(["htpasswd", "-niB", username], input=password, capture_output=True,
                          text=True, check=False)  # fmt: skip
    line = proc.stdout.strip()
    if proc.returncode != 0 or not line.startswith(f"{username}:$2"):
        raise RegistryError(f"htpasswd -niB failed ({proc.returncode}): {proc.stderr.strip()}")
    return line + "\n"
