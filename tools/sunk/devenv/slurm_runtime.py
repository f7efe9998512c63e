"""A real Slurm 24.11 cluster for tests, booted from configuration files the caller supplies.

Layout of one run (all of it is removed by :meth:`SlurmRuntime.close`):

* an overlayfs over the cached, pristine trixie root (:mod:`sunk.devenv.slurm_rootfs`), with
  ``/proc`` mounted and ``/sys`` bind-mounted recursively (slurmd needs the cgroup filesystem);
* a controller network namespace holding a bridge with the controller's address; munged,
  MariaDB, slurmdbd, slurmctld and every client command run there, with the UTS hostname
  :attr:`SlurmRuntime.controller_host`;
* one network namespace per compute node, joined to the bridge by a veth pair, running a dynamic
  configless ``slurmd -Z`` under its own UTS namespace (hostname = node name) and its own mount
  namespace, whose private ``/dev`` holds ``/dev/nvidia0..N-1`` stand-ins for the node's GPUs.

No interface is created in the host's network namespace and nothing is routed to it, so the
host's firewall (e.g. Docker's ``FORWARD DROP``) is not involved and not touched.

The runtime never writes ``slurm.conf``: construct it, read :attr:`controller_host` /
:attr:`controller_addr` (and :meth:`node_addr`), render the files, then :meth:`start` them::

    with SlurmRuntime() as rt:
        rt.start(render(rt.controller_host, rt.controller_addr), munge_key=key)
        rt.add_node("gpu-0", "Features=gpu RealMemory=4000 CPUs=2 Gres=gpu:h100:2", gpus=2)
        rt.wait_nodes_idle(["gpu-0"])
        print(rt.run("sinfo").stdout)
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sunk.devenv import slurm_rootfs
from sunk.slurmconf import Endpoints
from sunk.syncer.restd import USER, VERSIONS, mint_token

if TYPE_CHECKING:
    from sunk.devenv.uml import UmlMachine

CONFIG_FILES = frozenset(
    {
        "slurm.conf",
        "cgroup.conf",
        "mpi.conf",
        "gres.conf",
        "topology.conf",
        "topology.yaml",
        "slurmdbd.conf",
        "plugstack.conf",
        "acct_gather.conf",
        "job_container.conf",
        "oci.conf",
        "helpers.conf",
    }
)

# The launcher (slurm_launch.sh) runs on the host inside the target network namespace and a fresh
# UTS + mount namespace: it sets the hostname, gives the chroot a private /dev (with GPU
# stand-ins), optionally a munged of its own, and execs the command chrooted, so the Popen pid is
# the daemon's own pid.
LAUNCHER = Path(__file__).with_name("slurm_launch.sh")

# Directories the Debian packages' defaults and usual renderer outputs point at; created in the
# overlay and owned by SlurmUser so either choice boots.
SLURM_DIRS = (
    "/var/log/slurm",
    "/var/spool/slurmctld",
    "/var/spool/slurmd",
    "/var/spool/slurmd/pmix",  # mpi.conf's PMIxCliTmpDirBase (sunk.slurmconf.mpi)
    "/var/lib/slurm/slurmctld",
    "/var/lib/slurm/slurmd",
    "/run/slurm",
    "/run/slurmdbd",
)


class SlurmRuntimeError(RuntimeError):
    """A daemon did not start or a wait timed out; the message carries the relevant log tail."""


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen
    log: Path


@dataclass
class SlurmNode:
    """One dynamic compute node started by :meth:`SlurmRuntime.add_node`."""

    name: str
    addr: str
    netns: str
    conf: str
    gpus: int
    daemon: _Daemon | None = field(default=None, repr=False)


def _conf_value(text: str, key: str) -> str | None:
    """The last ``key=value`` of a Slurm-style config text (keys are case-insensitive)."""
    value = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        m = re.match(rf"^{re.escape(key)}\s*=\s*(.*)$", line, re.IGNORECASE)
        if m:
            value = m.group(1).strip()
    return value


class SlurmRuntime:
    """Slurm daemons from a cached trixie root; see the module docstring.

    Construction only allocates names and addresses; :meth:`start` mounts, starts daemons; every
    resource is released by :meth:`close` (also called by ``__exit__`` and on a failed start).
    """

    def __init__(
        self,
        rootfs: Path | str | None = None,
        *,
        controller_host: str = "slurmctl",
        subnet: str = "10.77.0.0/24",
        workdir: Path | str | None = None,
        ready_timeout: float = 120.0,
    ) -> None:
        if rootfs is None:
            found = slurm_rootfs.installed()
            if found is None:
                raise SlurmRuntimeError(
                    "the Slurm root is not built: "
                    "run `python -m sunk.devenv.toolchain install slurm`"
                )
            rootfs = found.root
        self.rootfs = Path(rootfs)
        self.run_id = secrets.token_hex(3)
        self._net = ipaddress.ip_network(subnet)
        hosts = self._net.hosts()
        self._controller_addr = str(next(hosts))
        self._free_addrs = [str(a) for a in hosts]
        self._controller_host = controller_host
        self.ready_timeout = ready_timeout
        self._workdir_arg = Path(workdir) if workdir else None
        self.workdir: Path | None = None
        self.root: Path | None = None  # the merged overlay, i.e. the chroot
        self.ctl_netns = f"sunk-{self.run_id}-ctl"
        self.nodes: dict[str, SlurmNode] = {}
        self._daemons: list[_Daemon] = []
        self._netns: list[str] = []
        self._mounted = False
        self._started = False
        self._accounting = False
        self._uids: dict[str, tuple[int, int]] = {}
        self._reserved: dict[str, str] = {}
        self._slurmctld: _Daemon | None = None
        self._restd: tuple[_Daemon, str] | None = None  # slurmrestd and its user
        self._jwt_key = secrets.token_bytes(64)
        self._machines: list[UmlMachine] = []  # add_uml_node's
        # another release's root whose /usr what starts from now on runs (use_release)
        self.release_root: Path | None = None

    # --- addresses the caller renders into its config ------------------------------------

    @property
    def controller_host(self) -> str:
        """Hostname of the controller (``SlurmctldHost=<host>(<addr>)``, ``DbdHost``)."""
        return self._controller_host

    @property
    def controller_addr(self) -> str:
        """IPv4 address of the controller on the test bridge."""
        return self._controller_addr

    @property
    def accounting_host(self) -> str:
        """Where slurmdbd runs (``AccountingStorageHost``): the controller's namespace."""
        return self._controller_host

    @property
    def accounting_addr(self) -> str:
        return self._controller_addr

    @property
    def storage_host(self) -> str:
        """MariaDB's host as seen by slurmdbd (``StorageHost`` in slurmdbd.conf)."""
        return "localhost"

    @property
    def subnet(self) -> str:
        return str(self._net)

    def endpoints(self) -> Endpoints:
        """The renderer's :class:`~sunk.slurmconf.Endpoints` for this runtime's hosts."""
        return Endpoints(
            controller_host=self.controller_host,
            controller_addr=self.controller_addr,
            dbd_host=self.accounting_host,
            dbd_addr=self.accounting_addr,
            storage_host=self.storage_host,
        )

    @property
    def jwt_key(self) -> bytes:
        """The auth/jwt signing key installed at ``/etc/slurm/jwt/jwt.key`` (what a
        SlurmCluster's JWT Secret holds): tokens signed with it pass slurmctld's auth/jwt."""
        return self._jwt_key

    def node_addr(self, name: str) -> str:
        """The address node ``name`` has (allocated on first use, stable for the run)."""
        if name in self.nodes:
            return self.nodes[name].addr
        return self._reserve_addr(name)

    def _reserve_addr(self, name: str) -> str:
        reserved = self._reserved
        if name not in reserved:
            if not self._free_addrs:
                raise SlurmRuntimeError(f"subnet {self._net} has no free address for {name}")
            reserved[name] = self._free_addrs.pop(0)
        return reserved[name]

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> SlurmRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(
        self,
        files: Mapping[str, str | bytes],
        munge_key: bytes | None = None,
        *,
        accounting: bool | None = None,
    ) -> None:
        """Mount the root, install ``files`` into ``/etc/slurm`` and start the control plane.

        ``files`` maps file names (``slurm.conf``, ``cgroup.conf``, ``gres.conf``, optional
        ``topology.conf``, ``slurmdbd.conf``, ``plugstack.conf``, ...) to their contents.
        ``accounting`` (default: whether ``slurmdbd.conf`` is given) starts MariaDB and slurmdbd
        before slurmctld.
        """
        if self._started:
            raise SlurmRuntimeError("start() called twice")
        if os.geteuid() != 0:
            raise SlurmRuntimeError("the Slurm runtime needs root (mounts, namespaces, chroot)")
        if "slurm.conf" not in files:
            raise SlurmRuntimeError("files must contain slurm.conf")
        self._started = True
        cleanup_stale()
        self._accounting = "slurmdbd.conf" in files if accounting is None else accounting
        try:
            self._setup_root()
            self._setup_network()
            self.write_files(files)
            self._install_munge_key(munge_key or secrets.token_bytes(128))
            self._install_jwt_key(self._jwt_key)
            self._write_hosts()
            self._start_munged()
            if self._accounting:
                self._start_mariadb()
                self._start_slurmdbd()
            self._start_slurmctld()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every daemon and job, delete namespaces and unmount; safe to call repeatedly."""
        errors: list[str] = []
        for machine in self._machines:
            machine.stop()
        self._machines.clear()
        for daemon in reversed(self._daemons):
            self._stop(daemon)
        self._daemons.clear()
        if self.root is not None:
            self._kill_chrooted()
        for ns in reversed(self._netns):
            proc = subprocess.run(["ip", "netns", "delete", ns], capture_output=True, text=True)
            if proc.returncode != 0 and "No such file" not in proc.stderr:
                errors.append(f"ip netns delete {ns}: {proc.stderr.strip()}")
        self._netns.clear()
        if self._mounted and self.root is not None:
            proc = subprocess.run(["umount", "-R", str(self.root)], capture_output=True, text=True)
            if proc.returncode != 0:
                # A straggler may still hold a mount; detach it rather than leak it.
                subprocess.run(["umount", "-R", "-l", str(self.root)], capture_output=True)
            self._mounted = False
        if self.workdir is not None and self._workdir_arg is None and not self._mounts_left():
            keep = os.environ.get("SUNK_SLURM_KEEP")
            if not keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise SlurmRuntimeError("; ".join(errors))

    def _mounts_left(self) -> bool:
        assert self.workdir is not None
        prefix = str(self.workdir) + "/"
        with open("/proc/self/mountinfo") as fh:
            return any(line.split()[4].startswith(prefix) for line in fh)

    # --- root and network ----------------------------------------------------------------

    def _setup_root(self) -> None:
        if self._workdir_arg is not None:
            self._workdir_arg.mkdir(parents=True, exist_ok=True)
            self.workdir = self._workdir_arg
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"sunk-slurm-{self.run_id}-"))
        for sub in ("upper", "work", "root", "logs"):
            if sub != "root":
                # A reused workdir starts clean: old Slurm state would leak into this run.
                shutil.rmtree(self.workdir / sub, ignore_errors=True)
            (self.workdir / sub).mkdir(exist_ok=True)
        self.root = self.workdir / "root"
        (self.workdir / "owner").write_text(_owner_token(os.getpid()))
        opts = (
            f"lowerdir={self.rootfs},upperdir={self.workdir / 'upper'},"
            f"workdir={self.workdir / 'work'}"
        )
        _check(["mount", "-t", "overlay", f"sunk-{self.run_id}", "-o", opts, str(self.root)])
        self._mounted = True
        _check(["mount", "--make-private", str(self.root)])
        _check(["mount", "-t", "proc", "proc", str(self.root / "proc")])
        _check(["mount", "--rbind", "/sys", str(self.root / "sys")])
        _check(["mount", "--make-rslave", str(self.root / "sys")])
        shutil.copy(LAUNCHER, self.workdir / "launch.sh")
        self._uids = _read_ids(self.root)
        slurm = self._ids("slurm")
        for d in SLURM_DIRS:
            path = self.root / d.lstrip("/")
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, *slurm)
        etc = self.root / "etc/slurm"
        etc.mkdir(exist_ok=True)

    def _ids(self, user: str) -> tuple[int, int]:
        if user not in self._uids:
            raise SlurmRuntimeError(f"user {user!r} does not exist in the Slurm root")
        return self._uids[user]

    def _add_netns(self, ns: str) -> None:
        assert self.workdir is not None
        with (self.workdir / "netns").open("a") as fh:
            fh.write(ns + "\n")
        _check(["ip", "netns", "add", ns])
        self._netns.append(ns)

    def _setup_network(self) -> None:
        ns = self.ctl_netns
        self._add_netns(ns)
        _check(["ip", "-n", ns, "link", "set", "lo", "up"])
        _check(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"])
        _check(
            [
                "ip", "-n", ns, "addr", "add",
                f"{self.controller_addr}/{self._net.prefixlen}", "dev", "br0",
            ]
        )  # fmt: skip
        _check(["ip", "-n", ns, "link", "set", "br0", "up"])

    def _add_node_netns(self, node: SlurmNode) -> None:
        ns = node.netns
        self._add_netns(ns)
        _check(["ip", "-n", ns, "link", "set", "lo", "up"])
        port = f"n{len(self._netns)}"
        _check(
            [
                "ip", "-n", self.ctl_netns, "link", "add", port, "type", "veth",
                "peer", "name", "eth0", "netns", ns,
            ]
        )  # fmt: skip
        _check(["ip", "-n", self.ctl_netns, "link", "set", port, "master", "br0", "up"])
        _check(["ip", "-n", ns, "addr", "add", f"{node.addr}/{self._net.prefixlen}", "dev", "eth0"])
        _check(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _check(["ip", "-n", ns, "route", "add", "default", "via", self.controller_addr])

    def _write_hosts(self) -> None:
        assert self.root is not None
        lines = ["127.0.0.1 localhost", f"{self.controller_addr} {self.controller_host}"]
        lines += [f"{n.addr} {n.name}" for n in self.nodes.values()]
        (self.root / "etc/hosts").write_text("\n".join(lines) + "\n")

    # --- files ---------------------------------------------------------------------------

    def write_files(self, files: Mapping[str, str | bytes]) -> None:
        """Write (or replace) config files in the run's ``/etc/slurm``; see :meth:`reconfigure`."""
        assert self.root is not None, "start() first"
        etc = self.root / "etc/slurm"
        slurm = self._ids("slurm")
        for name, content in files.items():
            if "/" in name or name in {"", ".", ".."}:
                raise SlurmRuntimeError(f"config file name {name!r} must be a plain file name")
            path = etc / name
            data = content.encode() if isinstance(content, str) else content
            tmp = path.with_name(f".{name}.tmp")
            tmp.write_bytes(data)
            if name == "slurmdbd.conf":
                # slurmdbd refuses a config readable by others or not owned by SlurmUser.
                os.chown(tmp, *slurm)
                tmp.chmod(0o600)
            else:
                # Scripts (prolog.sh, epilog.sh, sunk-lock.sh) executable, as the operator
                # mounts its dispatchers (defaultMode 0755): slurmd runs them directly.
                tmp.chmod(0o755 if name.endswith(".sh") else 0o644)
            tmp.replace(path)

    def read_file(self, path: str) -> str:
        """A file from inside the chroot (e.g. a job's output file)."""
        assert self.root is not None
        return (self.root / path.lstrip("/")).read_text(errors="replace")

    def _install_jwt_key(self, key: bytes) -> None:
        """The auth/jwt signing key where rendered configs point (AuthAltParameters), as the
        operator mounts it: /etc/slurm/jwt/jwt.key, owned by SlurmUser, mode 0600."""
        assert self.root is not None
        path = self.root / "etc/slurm/jwt/jwt.key"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(key)
        os.chown(path, *self._ids("slurm"))
        path.chmod(0o600)

    def _install_munge_key(self, key: bytes) -> None:
        assert self.root is not None
        munge = self._ids("munge")
        etc = self.root / "etc/munge"
        etc.mkdir(exist_ok=True)
        os.chown(etc, *munge)
        etc.chmod(0o700)
        keyfile = etc / "munge.key"
        keyfile.write_bytes(key)
        os.chown(keyfile, *munge)
        keyfile.chmod(0o400)
        for d in ("run/munge", "var/lib/munge", "var/log/munge"):
            path = self.root / d
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, *munge)
            path.chmod(0o755 if d == "run/munge" else 0o700)

    # --- processes -----------------------------------------------------------------------

    def _argv(
        self,
        netns: str,
        host: str,
        cmd: Iterable[str],
        *,
        gpus: int = 0,
        user: str = "",
        own_munged: bool = False,
        release: Path | None = None,
    ) -> list[str]:
        assert self.workdir is not None and self.root is not None
        release = release or self.release_root
        return [
            "ip", "netns", "exec", netns,
            *(["env", f"SUNK_RELEASE_ROOT={release}"] if release else []),
            "unshare", "--uts", "--mount", "--propagation", "private",
            "/bin/sh", str(self.workdir / "launch.sh"), str(self.root), host, str(gpus), user,
            "1" if own_munged else "0", *cmd,
        ]  # fmt: skip

    def _spawn(
        self,
        name: str,
        netns: str,
        host: str,
        cmd: list[str],
        *,
        gpus: int = 0,
        user: str = "",
        own_munged: bool = False,
        release: Path | None = None,
    ) -> _Daemon:
        assert self.workdir is not None
        log = self.workdir / "logs" / f"{name}.log"
        fh = log.open("ab")
        try:
            proc = subprocess.Popen(
                self._argv(
                    netns,
                    host,
                    cmd,
                    gpus=gpus,
                    user=user,
                    own_munged=own_munged,
                    release=release,
                ),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            fh.close()
        daemon = _Daemon(name, proc, log)
        self._daemons.append(daemon)
        return daemon

    def _stop(self, daemon: _Daemon, timeout: float = 15.0) -> None:
        proc = daemon.proc
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)

    def _retire(self, daemon: _Daemon) -> None:
        """Stop a daemon and forget it (close() no longer stops it)."""
        self._stop(daemon)
        self._daemons.remove(daemon)

    def _kill_chrooted(self) -> None:
        """SIGKILL whatever still runs with its root in this run's overlay (slurmstepd, jobs)."""
        assert self.root is not None
        root = str(self.root)
        for _ in range(20):
            pids = []
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    if os.readlink(entry / "root") == root:
                        pids.append(int(entry.name))
                except OSError:
                    continue
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    def run(
        self,
        *cmd: str,
        node: str | None = None,
        input: str | None = None,
        timeout: float = 120.0,
        check: bool = False,
        user: str = "",
    ) -> subprocess.CompletedProcess[str]:
        """Run a command chrooted in the controller's namespaces (or node ``node``'s)."""
        if node is None:
            argv = self._argv(self.ctl_netns, self.controller_host, cmd, user=user)
        else:
            # Join the running slurmd's namespaces (network, UTS, mount: its /dev and munged).
            daemon = self.nodes[node].daemon
            if daemon is None or daemon.proc.poll() is not None:
                raise SlurmRuntimeError(f"node {node} is not running")
            argv = ["nsenter", "-t", str(daemon.proc.pid), "-n", "-u", "-m", "-r", "-w"]
            if user:
                argv += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
            argv += list(cmd)
        proc = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise SlurmRuntimeError(
                f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        return proc

    def logs(self, tail: int = 40) -> str:
        """The last lines of every daemon's log (for failure messages)."""
        if self.workdir is None:
            return ""
        out = []
        for path in sorted((self.workdir / "logs").glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"==> {path.name} <==\n" + "\n".join(lines))
        for path in sorted((self.root or Path("/nonexistent")).glob("var/log/slurm/*.log")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"==> {path} <==\n" + "\n".join(lines))
        return "\n".join(out)

    def _wait(self, what: str, probe, daemon: _Daemon | None, timeout: float | None) -> None:
        deadline = time.monotonic() + (timeout or self.ready_timeout)
        last = ""
        while time.monotonic() < deadline:
            if daemon is not None and daemon.proc.poll() is not None:
                raise SlurmRuntimeError(
                    f"{daemon.name} exited ({daemon.proc.returncode}) while waiting for {what}\n"
                    + self.logs()
                )
            ok, last = probe()
            if ok:
                return
            time.sleep(0.5)
        raise SlurmRuntimeError(f"timed out waiting for {what}: {last}\n{self.logs()}")

    # --- daemons -------------------------------------------------------------------------

    def _start_munged(self) -> None:
        d = self._spawn(
            "munged", self.ctl_netns, self.controller_host,
            ["/usr/sbin/munged", "--foreground", "--force"], user="munge:munge",
        )  # fmt: skip

        def probe():
            p = self.run("sh", "-c", "munge -n | unmunge >/dev/null", timeout=30)
            return p.returncode == 0, p.stderr.strip()

        self._wait("munged", probe, d, 60)

    def _start_mariadb(self) -> None:
        assert self.root is not None
        mysql = self._ids("mysql")
        run_dir = self.root / "run/mysqld"
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chown(run_dir, *mysql)
        d = self._spawn(
            "mariadb", self.ctl_netns, self.controller_host,
            [
                "/usr/sbin/mariadbd", "--user=mysql", "--datadir=/var/lib/mysql",
                "--socket=/run/mysqld/mysqld.sock", "--bind-address=127.0.0.1",
                "--skip-log-bin", "--innodb-buffer-pool-size=64M", "--log-error=",
                "--pid-file=/run/mysqld/mysqld.pid",
            ],
        )  # fmt: skip

        def probe():
            p = self.run("mariadb-admin", "--protocol=socket", "ping", timeout=30)
            return p.returncode == 0, (p.stderr or p.stdout).strip()

        self._wait("MariaDB", probe, d, None)
        dbd = (self.root / "etc/slurm/slurmdbd.conf").read_text()
        user = _conf_value(dbd, "StorageUser") or "slurm"
        password = _conf_value(dbd, "StoragePass") or ""
        db = _conf_value(dbd, "StorageLoc") or "slurm_acct_db"
        sql = []
        for host in ("localhost", "127.0.0.1", "%"):
            ident = f"'{_sql(user)}'@'{host}'"
            sql.append(f"CREATE USER IF NOT EXISTS {ident} IDENTIFIED BY '{_sql(password)}';")
            sql.append(f"GRANT ALL ON `{db}`.* TO {ident};")
        self.run("mariadb", "--protocol=socket", input="\n".join(sql), check=True)

    def _start_slurmdbd(self) -> None:
        assert self.root is not None
        cmd = ["/usr/sbin/slurmdbd", "-D", "-v"]
        compat = slurm_rootfs.MARIADB_COMPAT_DIR
        if (self.root / compat.lstrip("/") / "libmariadb.so.3").exists():
            cmd = ["env", f"LD_LIBRARY_PATH={compat}", *cmd]
        d = self._spawn("slurmdbd", self.ctl_netns, self.controller_host, cmd)

        def probe():
            p = self.run("sacctmgr", "-n", "-P", "show", "cluster", timeout=30)
            return p.returncode == 0, (p.stderr or p.stdout).strip()

        self._wait("slurmdbd", probe, d, None)

    def restart_controller(
        self, files: Mapping[str, str | bytes] | None = None, *, push_to_nodes: bool = True
    ) -> None:
        """Stop slurmctld, optionally replace config files, start it again from its saved state.

        Needed for changes ``scontrol reconfigure`` cannot apply (e.g. ``TopologyPlugin``).
        With ``push_to_nodes`` a ``scontrol reconfigure`` then hands the new config to the
        configless slurmd (which otherwise keep the one they fetched).
        """
        d = self._slurmctld
        if d is not None:
            self._retire(d)
        if files:
            self.write_files(files)
        self._start_slurmctld(clear_state=False)
        if self.nodes and push_to_nodes:
            # Configless slurmd keep the config they fetched; push the new one to them.
            self.reconfigure()

    def signal_controller(self, signum: int) -> None:
        """Send ``signum`` to slurmctld and its launcher (their own process group): SIGSTOP
        hangs the controller as a deadlock would (its port still accepts), SIGCONT resumes."""
        d = self._slurmctld
        if d is None or d.proc.poll() is not None:
            raise SlurmRuntimeError("slurmctld is not running")
        os.killpg(d.proc.pid, signum)

    def _start_slurmctld(self, clear_state: bool = True) -> None:
        cmd = ["/usr/sbin/slurmctld", "-D", "-v"]
        if clear_state:
            cmd.insert(2, "-i")
        d = self._spawn("slurmctld", self.ctl_netns, self.controller_host, cmd)
        self._slurmctld = d

        def probe():
            p = self.run("scontrol", "ping", timeout=30)
            return p.returncode == 0 and "UP" in p.stdout, (p.stdout + p.stderr).strip()

        self._wait("slurmctld", probe, d, None)

    def start_restd(self, *, user: str = "nobody", timeout: float | None = None) -> str:
        """Start slurmrestd (``openapi/slurmctld``, JWT auth) in the controller's namespaces,
        listening on a unix socket; returns ``unix:<host path of the socket>``, the URL
        :class:`sunk.syncer.restd.Slurmrestd` takes. Needs a slurm.conf with
        ``AuthAltTypes=auth/jwt`` (rendered when ``jwt.enabled``). slurmrestd refuses to run
        as root or SlurmUser, hence ``user``. Ready once a token signed with :attr:`jwt_key`
        gets an answer from slurmctld through it (``GET .../ping``)."""
        assert self.root is not None, "start() first"
        uid, gid = self._ids(user)
        run_dir = self.root / "run/slurmrestd"
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chown(run_dir, uid, gid)
        sock = run_dir / "slurmrestd.sock"
        sock.unlink(missing_ok=True)
        d = self._spawn(
            "slurmrestd", self.ctl_netns, self.controller_host,
            [
                "env", "SLURM_JWT=daemon", "/usr/sbin/slurmrestd", "-a", "rest_auth/jwt",
                "-s", "openapi/slurmctld", f"unix:{sock.relative_to(self.root).as_posix()}",
            ],
            user=f"{uid}:{gid}",
        )  # fmt: skip
        self._restd = (d, user)

        def probe():
            return _restd_ping(sock, self._jwt_key)

        self._wait("slurmrestd", probe, d, timeout)
        return f"unix:{sock}"

    def restart_restd(self) -> str:
        """Stop slurmrestd and start it again (with :meth:`use_release`'s programs), on the
        same socket; returns its URL as :meth:`start_restd` does."""
        assert self._restd is not None, "start_restd() first"
        daemon, user = self._restd
        self._retire(daemon)
        return self.start_restd(user=user)

    def use_release(self, rootfs: Path) -> None:
        """Run what starts from now on (daemons restarted with :meth:`restart_accounting`,
        :meth:`restart_controller`, :meth:`restart_node`, new nodes and client commands) with
        the programs and libraries of another release's root (``slurm_rootfs``), over this
        run's configuration, state and users: an upgrade as swapping a Pod's image is one.
        What runs keeps its release."""
        if (
            not (rootfs / "usr/sbin/slurmctld").exists()
            and not (rootfs / "usr/sbin/slurmctld").is_symlink()
        ):
            raise SlurmRuntimeError(f"{rootfs}: not a Slurm root")
        self.release_root = rootfs

    def restart_accounting(self) -> None:
        """Stop slurmdbd and start it again (with :meth:`use_release`'s programs: its first
        start converts the database); ready once ``sacctmgr`` gets an answer."""
        for daemon in [d for d in self._daemons if d.name == "slurmdbd"]:
            self._retire(daemon)
        self._start_slurmdbd()

    def restart_node(self, name: str, *, release: Path | None = None) -> None:
        """Stop a node's slurmd (its running steps live on, as slurmstepd is its own process)
        and start it again; ``release`` as for :meth:`add_node`."""
        node = self.nodes[name]
        if node.daemon is not None:
            self._retire(node.daemon)
        node.daemon = self._spawn_slurmd(node, release)

    def _spawn_slurmd(self, node: SlurmNode, release: Path | None) -> _Daemon:
        return self._spawn(
            f"slurmd-{node.name}", node.netns, node.name,
            [
                "/usr/sbin/slurmd", "-D", "-v", "-N", node.name, "-Z",
                "--conf-server", f"{self.controller_addr}", "--conf", node.conf,
            ],
            gpus=node.gpus,
            own_munged=True,
            release=release,
        )  # fmt: skip

    def add_node(
        self,
        name: str,
        conf: str,
        gpus: int = 0,
        *,
        wait: bool = False,
        release: Path | None = None,
    ) -> SlurmNode:
        """Start a dynamic configless slurmd named ``name`` with ``slurmd -Z --conf <conf>``.

        ``conf`` is the node's line without ``NodeName`` (e.g. ``"Features=grp CPUs=2
        RealMemory=2000 Gres=gpu:h100:2"``); ``gpus`` stand-in devices ``/dev/nvidia0..`` exist
        in the node's ``/dev``.  With ``wait`` it returns once the node is idle. ``release``:
        another release's root whose programs the slurmd runs (default: :meth:`use_release`'s).
        """
        assert self.root is not None, "start() first"
        self._check_new_node(name)
        node = SlurmNode(
            name=name,
            addr=self._reserve_addr(name),
            netns=f"sunk-{self.run_id}-{len(self.nodes)}",
            conf=conf,
            gpus=gpus,
        )
        self.nodes[name] = node
        self._add_node_netns(node)
        self._write_hosts()
        slurm = self._ids("slurm")
        for base in ("var/spool/slurmd", "var/lib/slurm/slurmd"):
            spool = self.root / base / name
            spool.mkdir(parents=True, exist_ok=True)
            os.chown(spool, *slurm)
        node.daemon = self._spawn_slurmd(node, release)
        if wait:
            self.wait_nodes_idle([name])
        return node

    def _check_new_node(self, name: str) -> None:
        if name in self.nodes:
            raise SlurmRuntimeError(f"node {name} already added")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
            raise SlurmRuntimeError(f"node name {name!r} is not a valid hostname")

    def add_uml_node(
        self,
        name: str,
        conf: str,
        gpus: int = 0,
        *,
        mem_mib: int = 512,
        image: Path | None = None,
    ) -> SlurmNode:
        """Like :meth:`add_node`, but the slurmd runs in a user-mode Linux kernel that mounts
        cgroup v2 (:mod:`sunk.devenv.uml`), booted from this run's root: a cgroup v2 node
        beside the host's cgroup v1 ones. Its ``eth0`` is a TAP device on the controller's
        bridge; it runs a munged of its own; its slurmd log is ``SlurmdLogFile`` in the root.

        With ``image`` (a slurmd image's ``docker save`` archive) slurmd is that image's
        entrypoint in a container that runc starts as containerd would for a slurmd Pod with
        the chart's security context (:func:`sunk.devenv.uml.pod_container_spec`), under a
        ``kubepods`` cgroup with the Pod's limits; its log is then the machine's console. The
        image's SlurmUser (uid 401) must be the controller's: run it with ``SlurmUser=root``
        when the controller comes from this runtime's root."""
        from sunk.devenv import uml

        assert self.root is not None and self.workdir is not None, "start() first"
        kernel = uml.installed()
        if kernel is None:
            raise SlurmRuntimeError(f"user-mode Linux is not unpacked: run `{uml.INSTALL_HINT}`")
        self._check_new_node(name)
        node = SlurmNode(name=name, addr=self._reserve_addr(name), netns=self.ctl_netns,
                         conf=conf, gpus=gpus)  # fmt: skip
        self.nodes[name] = node
        self._write_hosts()
        tap = f"u{len(self.nodes)}-{self.run_id}"
        _check(["ip", "-n", self.ctl_netns, "tuntap", "add", "dev", tap, "mode", "tap"])
        _check(["ip", "-n", self.ctl_netns, "link", "set", tap, "master", "br0", "up"])
        init = f"/sunk-uml-{name}.sh"
        script = self.root / init.lstrip("/")
        start = _slurmd_argv(node, self.controller_addr)
        if image is not None:
            start = self._pod_bundle(node, image, mem_mib)
        script.write_text(_uml_init(node, self._net.prefixlen, self.controller_addr, start))
        script.chmod(0o755)
        machine = uml.UmlMachine(
            name=f"sunk-{self.run_id}-{name}", root=self.root, init=init, netns=self.ctl_netns,
            tap=tap, console=self.workdir / "logs" / f"uml-{name}.log",
            state_dir=self.workdir / "uml" / name, mem_mib=mem_mib, kernel=kernel,
        )  # fmt: skip
        machine.start()
        assert machine.proc is not None
        self._machines.append(machine)
        node.daemon = _Daemon(f"uml-{name}", machine.proc, machine.console)
        return node

    def _pod_bundle(self, node: SlurmNode, image: Path, mem_mib: int) -> str:
        """The runc bundle of ``node``'s slurmd container (the image's root, unpacked once into
        the cache, under an overlay of its own) and the command that runs it in the
        machine."""
        from sunk.devenv import uml
        from sunk.devenv.paths import bin_dir, cache_dir
        from sunk.operator.nodeset.pod import SLURMD_SECURITY_CONTEXT

        assert self.root is not None and self.workdir is not None
        cached = cache_dir() / "uml" / "images" / image.stem
        if not (cached / "done").exists():
            # one root per image repository: an older build's goes (they are 600 MB)
            for old in cached.parent.glob(f"{image.stem.rsplit('-', 1)[0]}-*"):
                shutil.rmtree(old, ignore_errors=True)
            uml.unpack_image(image, cached / "rootfs")
            (cached / "done").touch()
        bundle = Path("/sunk-uml") / node.name / "bundle"
        host_bundle = self.root / bundle.relative_to("/")
        scratch = self.workdir / "uml" / node.name
        for sub in ("upper", "work"):
            (scratch / sub).mkdir(parents=True, exist_ok=True)
        (host_bundle / "rootfs").mkdir(parents=True, exist_ok=True)
        opts = (
            f"lowerdir={cached / 'rootfs'},upperdir={scratch / 'upper'},workdir={scratch / 'work'}"
        )
        _check(["mount", "-t", "overlay", f"sunk-{self.run_id}-{node.name}", "-o", opts,
                str(host_bundle / "rootfs")])  # fmt: skip
        runc = self.root / "usr/local/sbin/runc"
        if not runc.exists():
            shutil.copy(bin_dir() / "runc", runc)
        limit = mem_mib * 1024 * 1024 * 3 // 4  # the Pod's limit, below the machine's
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "SUNK_NODE_NAME": node.name,
            "SUNK_CONTROLLER": f"{self.controller_addr}:6817",
            "SUNK_SLURMD_CONF": node.conf,
            "SUNK_MUNGED": "external",  # the machine's munged, as the Pod's munge sidecar
        }
        spec = uml.pod_container_spec(
            ["/usr/bin/tini", "--", "/usr/local/bin/sunk-entrypoint", "slurmd"], env,
            SLURMD_SECURITY_CONTEXT["capabilities"]["add"], hostname=node.name,
            cgroups_path=f"{POD_CGROUP}/{node.name}", memory=limit, cpus=1, hosts="/etc/hosts",
            gpus=node.gpus,
        )  # fmt: skip
        (host_bundle / "config.json").write_text(json.dumps(spec, indent=1))
        return (
            f"runc --root /run/runc run --bundle {bundle} slurmd-{node.name}; "
            f"runc --root /run/runc delete --force slurmd-{node.name}"
        )

    def remove_node(self, name: str) -> None:
        """Stop a node's slurmd and delete it from the controller."""
        node = self.nodes.pop(name)
        if node.daemon is not None:
            self._retire(node.daemon)
        self.run("scontrol", "delete", f"nodename={name}")

    def node_log(self, name: str) -> str:
        """The stdout/stderr of node ``name``'s slurmd (it logs there in the foreground)."""
        daemon = self.nodes[name].daemon
        return daemon.log.read_text(errors="replace") if daemon else ""

    def node_running(self, name: str) -> bool:
        daemon = self.nodes[name].daemon
        return daemon is not None and daemon.proc.poll() is None

    def node_states(self) -> dict[str, str]:
        p = self.run("sinfo", "-h", "-N", "-o", "%N|%T")
        states = {}
        for line in p.stdout.splitlines():
            node, _, state = line.partition("|")
            states[node.strip()] = state.strip()
        return states

    def wait_nodes_idle(self, names: Iterable[str], timeout: float | None = None) -> None:
        """Wait until every node in ``names`` is registered and idle."""
        wanted = list(names)

        def probe():
            for name in wanted:
                daemon = self.nodes[name].daemon if name in self.nodes else None
                if daemon is not None and daemon.proc.poll() is not None:
                    raise SlurmRuntimeError(
                        f"slurmd {name} exited ({daemon.proc.returncode})\n{self.logs()}"
                    )
            states = self.node_states()
            bad = {n: states.get(n, "absent") for n in wanted if states.get(n) != "idle"}
            return not bad, f"not idle: {bad}"

        self._wait(f"nodes {wanted} idle", probe, self._slurmctld, timeout)

    def reconfigure(self, files: Mapping[str, str | bytes] | None = None) -> None:
        """Optionally replace config files, then ``scontrol reconfigure`` and wait for the
        controller to answer again."""
        if files:
            self.write_files(files)
        self.run("scontrol", "reconfigure", check=True)

        def probe():
            p = self.run("scontrol", "ping", timeout=30)
            return p.returncode == 0 and "UP" in p.stdout, (p.stdout + p.stderr).strip()

        self._wait("slurmctld after reconfigure", probe, None, None)

    def wait_job(self, job_id: str | int, timeout: float = 120.0) -> str:
        """Wait for a job to leave the queue; returns its final state from ``scontrol``."""
        state = ""

        def probe():
            nonlocal state
            p = self.run("scontrol", "-o", "show", "job", str(job_id))
            m = re.search(r"JobState=(\S+)", p.stdout)
            state = m.group(1) if m else (p.stderr.strip() or "unknown")
            done = state in {
                "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED",
            }  # fmt: skip
            return done, f"job {job_id} {state}"

        self._wait(f"job {job_id}", probe, self._slurmctld, timeout)
        return state


# Where the slurmd container's Pod cgroup sits in a user-mode Linux node, as kubelet's cgroupfs
# driver names a Burstable Pod's.
POD_CGROUP = "/kubepods/burstable/pod00000000-0000-4000-8000-000000000001"


def _slurmd_argv(node: SlurmNode, controller: str) -> str:
    return shlex.join([
        "/usr/sbin/slurmd", "-D", "-N", node.name, "-Z", "--conf-server", controller,
        "--conf", node.conf,
    ])  # fmt: skip


def _uml_init(node: SlurmNode, prefixlen: int, controller: str, start: str) -> str:
    """PID 1 of a user-mode Linux node: mounts, network, GPU stand-ins, munged and the Pod
    cgroups kubelet would make, then ``start`` (slurmd, or its container) in the foreground,
    again whenever it exits."""
    pod = POD_CGROUP.strip("/").split("/")
    return f"""#!/bin/sh
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
ln -sf /proc/self/fd /dev/fd
for dir in /run /tmp /var/spool/slurmd /var/lib/munge /var/log/munge; do
  mount -t tmpfs -o mode=0755 uml "$dir"
done
chmod 1777 /tmp
mkdir -p /run/slurm /run/munge /run/runc /var/spool/slurmd/{node.name} /var/spool/slurmd/pmix
i=0
while [ "$i" -lt {node.gpus} ]; do mknod -m 0666 "/dev/nvidia$i" c 195 "$i"; i=$((i + 1)); done
hostname {node.name}
ip link set lo up
ip addr add {node.addr}/{prefixlen} dev eth0
ip link set eth0 up
ip route add default via {controller}
# hostfs makes a file a non-root user creates root's: munged's own files live in tmpfs
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 0700 /var/lib/munge /var/log/munge
setpriv --reuid=munge --regid=munge --clear-groups /usr/sbin/munged --force
# the Pod's cgroups, each level delegating the controllers (kubelet's cgroupfs driver)
dir=/sys/fs/cgroup
for level in {" ".join(pod)}; do
  echo "+cpu +memory +pids" >"$dir/cgroup.subtree_control"
  dir="$dir/$level"
  mkdir -p "$dir"
done
echo "+cpu +memory +pids" >"$dir/cgroup.subtree_control"
echo "sunk-uml: cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# slurmd restarts when it exits, as its container would (kubelet restarts it in place)
while :; do
  {start}
  echo "sunk-uml: slurmd exited $?; starting it again"
  sleep 1
done
"""


def _owner_token(pid: int) -> str:
    """``pid starttime``: identifies a process even after its pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


def cleanup_stale(base: Path | str | None = None) -> list[Path]:
    """Tear down what runs killed without :meth:`SlurmRuntime.close` left behind.

    Looks at ``sunk-slurm-*`` work directories (in ``base``, default the temp dir) whose owning
    process is gone: kills processes chrooted there, unmounts, deletes the recorded network
    namespaces and the directory.  Returns the directories removed.
    """
    removed = []
    for wd in sorted(Path(base or tempfile.gettempdir()).glob("sunk-slurm-*")):
        owner = wd / "owner"
        try:
            token = owner.read_text().strip()
        except OSError:
            continue  # not ours, or still being set up
        pid = token.split()[0] if token else ""
        if pid.isdigit() and _owner_token(int(pid)) == token:
            continue  # its owner is alive
        root = str(wd / "root")
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    # chrooted daemons, and user-mode Linux nodes booted from that root
                    hostfs = f"hostfs={root}".encode() in (entry / "cmdline").read_bytes()
                    if hostfs or os.readlink(entry / "root") == root:
                        os.kill(int(entry.name), signal.SIGKILL)
        subprocess.run(["umount", "-R", "-l", root], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            for ns in (wd / "netns").read_text().split():
                subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
        with open("/proc/self/mountinfo") as fh:
            busy = any(line.split()[4].startswith(str(wd) + "/") for line in fh)
        if not busy:
            shutil.rmtree(wd, ignore_errors=True)
            removed.append(wd)
    return removed


def _restd_ping(sock: Path, key: bytes) -> tuple[bool, str]:
    """``GET /slurm/<version>/ping`` through slurmrestd's unix socket with a JWT for
    SlurmUser, for the newest data_parser version we speak that this release serves."""
    if not sock.exists():
        return False, f"{sock} does not exist yet"
    head = "no answer"
    for version in reversed(VERSIONS):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(10)
                conn.connect(str(sock))
                conn.sendall(
                    (
                        f"GET /slurm/{version}/ping HTTP/1.1\r\nHost: slurmrestd\r\n"
                        f"Connection: close\r\nX-SLURM-USER-NAME: {USER}\r\n"
                        f"X-SLURM-USER-TOKEN: {mint_token(key)}\r\n\r\n"
                    ).encode()
                )
                answer = b""
                while chunk := conn.recv(65536):
                    answer += chunk
        except OSError as exc:
            return False, f"slurmrestd: {exc}"
        head = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "no answer"
        if head.split()[1:2] != ["404"]:  # 404: this release does not serve the version
            break
    return head.split()[1:2] == ["200"], head


def _sql(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _read_ids(root: Path) -> dict[str, tuple[int, int]]:
    ids = {}
    for line in (root / "etc/passwd").read_text().splitlines():
        parts = line.split(":")
        if len(parts) >= 4:
            ids[parts[0]] = (int(parts[2]), int(parts[3]))
    return ids


def _check(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SlurmRuntimeError(f"{shlex.join(cmd)} failed: {proc.stderr.strip()}")
