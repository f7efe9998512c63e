#!/usr/bin/python3
"""sunk-container: the runtime behind `srun --container-image` (spank_sunk_container.so).

    sunk-container prepare --job J --step S --uid U --gid G --name N [--image REF] ...
        pull the image into the node's cache (once per digest, even when steps race) and make
        the job's container from it; prints rootfs=, tmp=, env=, workdir=, home= lines for the
        plugin. On failure: one line on stderr saying why, exit status 1.
    sunk-container remove --job J (--step S | --all)
    sunk-container pull REF        the cache alone (prints digest= and rootfs=)
    sunk-container parse REF       how a reference is read (prints registry=, repository=, ...)

Images come from a registry over HTTPS (skopeo), or from a squashfs file or an OCI archive
(`.tar`) on a shared volume. Layers are unpacked here with tarfile, not by a tool that makes
device nodes: the slurmd container has no CAP_MKNOD, and /dev comes from the Pod anyway.
Credentials: the user's Enroot file ($ENROOT_CONFIG_PATH/.credentials, else
${XDG_CONFIG_HOME:-$HOME/.config}/enroot/.credentials), read as the user, then the cluster's
(compute.pyxis.credentialsSecret); netrc lines `machine HOST login USER password PASS`.
Only stdlib: it runs on the slurmd image's python3.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import grp
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_REGISTRY = "registry-1.docker.io"
DOCKER_HUB = {"docker.io", "index.docker.io", "registry-1.docker.io"}
# [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST], as Pyxis and Enroot read it
REFERENCE = re.compile(
    r"^(?:(?P<registry>[^#\s/]+)#)?"
    r"(?P<image>[a-z0-9]+(?:(?:[._/]|__|-+)[a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?$"
)
DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")
USER = re.compile(r"^[A-Za-z0-9._-]+$")
REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$")
SIZE = re.compile(r"^([0-9]+)([KMGT]?)(i?B?)?$", re.IGNORECASE)


class Refused(Exception):
    """What the user sees: the step fails with this message; the node is not drained."""


@dataclass(frozen=True)
class Reference:
    registry: str
    repository: str
    tag: str
    digest: str
    user: str

    @property
    def source(self) -> str:
        at = f"@{self.digest}" if self.digest else f":{self.tag}"
        return f"docker://{self.registry}/{self.repository}{at}"

    @property
    def display(self) -> str:
        return self.source.removeprefix("docker://")


def parse_reference(text: str) -> Reference:
    """Reads `[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]`. Without `#`, the first path component is
    the registry when it looks like a host (a dot, a port or `localhost`), as Docker reads it;
    otherwise the image is on Docker Hub (`library/` for a one-word name)."""
    body, digest = text, ""
    found = DIGEST.search(body)
    if found:
        body, digest = body[: found.start()], found[1]
    user, at, rest = body.partition("@")
    if not at:
        user, rest = "", body
    if "#" not in rest:
        first, slash, tail = rest.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            rest = f"{first}#{tail}"
    match = REFERENCE.match(rest)
    if not match or (at and not USER.match(user)):
        raise Refused(
            f"--container-image {text!r} is not [USER@][REGISTRY#]IMAGE[:TAG|@DIGEST] "
            "(or a path to a squashfs file or an OCI archive, starting with / or ./)"
        )
    registry, image = match["registry"] or DEFAULT_REGISTRY, match["image"]
    if not REGISTRY.match(registry):
        raise Refused(f"--container-image {text!r}: registry {registry!r} is not HOST[:PORT]")
    if registry in DOCKER_HUB:
        registry = DEFAULT_REGISTRY
        if "/" not in image:
            image = f"library/{image}"
    tag = match["tag"] or ("" if digest else "latest")
    return Reference(registry, image, tag, digest, user)


def parse_size(text: str) -> int:
    match = SIZE.match(text.strip())
    if not match:
        raise Refused(f"image_cache_size {text!r} is not a size such as 20G")
    unit = "KMGT".find(match[2].upper()) + 1 if match[2] else 0
    return int(match[1]) * 1024**unit


# --- credentials ----------------------------------------------------------------------------


def parse_netrc(text: str, origin: str) -> dict[str, tuple[str, str]]:
    """`machine HOST login USER password PASS` entries (words may span lines, as in netrc);
    host → (login, password)."""
    words = text.split()
    out: dict[str, tuple[str, str]] = {}
    i = 0
    while i < len(words):
        if words[i] != "machine":
            raise Refused(f"{origin}: expected 'machine', found {words[i]!r}")
        entry: dict[str, str] = {}
        i += 1
        if i >= len(words):
            raise Refused(f"{origin}: 'machine' without a host")
        host = words[i]
        i += 1
        while i < len(words) and words[i] != "machine":
            key = words[i]
            if key not in ("login", "password") or i + 1 >= len(words):
                raise Refused(f"{origin}: machine {host}: expected login/password, found {key!r}")
            entry[key] = words[i + 1]
            i += 2
        if entry.get("password", "").startswith("$"):
            raise Refused(
                f"{origin}: machine {host}: a password that runs a command or reads a variable "
                "($...) is not supported here: write the secret itself"
            )
        if "login" not in entry or "password" not in entry:
            raise Refused(f"{origin}: machine {host}: needs both login and password")
        out.setdefault(host, (entry["login"], entry["password"]))
    return out


@contextlib.contextmanager
def as_user(uid: int, gid: int):
    """The job user's effective ids and groups for what runs inside: root must not open, on a
    user's behalf, a file the user could not."""
    old_uid, old_gid, old_groups = os.geteuid(), os.getegid(), os.getgroups()
    try:
        name = pwd.getpwuid(uid).pw_name
        groups = os.getgrouplist(name, gid)
    except KeyError:
        groups = [gid]
    try:
        os.setgroups(groups)
        os.setegid(gid)
        os.seteuid(uid)
        yield
    finally:
        os.seteuid(old_uid)
        os.setegid(old_gid)
        os.setgroups(old_groups)


def read_as(uid: int, gid: int, path: Path) -> str | None:
    """The file's text read with the user's rights (None when it does not exist)."""
    with as_user(uid, gid):
        try:
            return path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Refused(f"{path}: {exc.strerror}") from None


def credentials(args: argparse.Namespace, ref: Reference) -> tuple[str, str] | None:
    """(login, password) for the reference's registry: the user's file first, then the
    cluster's; a USER@ in the reference picks that login."""
    sources: list[tuple[str, str]] = []
    if args.enroot_config_path:
        user_file = Path(args.enroot_config_path) / ".credentials"
    elif args.xdg_config_home:
        user_file = Path(args.xdg_config_home) / "enroot" / ".credentials"
    elif args.home:
        user_file = Path(args.home) / ".config" / "enroot" / ".credentials"
    else:
        user_file = None
    if user_file is not None:
        text = read_as(args.uid, args.gid, user_file)
        if text is not None:
            sources.append((str(user_file), text))
    system = Path(args.system_credentials)
    if system.is_file():
        sources.append((str(system), system.read_text()))
    host = ref.registry.rsplit(":", 1)[0] if ":" in ref.registry else ref.registry
    for origin, text in sources:
        entries = parse_netrc(text, origin)
        for key in (ref.registry, host):
            if key in entries and (not ref.user or entries[key][0] == ref.user):
                return entries[key]
    if ref.user:
        raise Refused(
            f"no password for {ref.user}@{ref.registry} in {user_file or 'any credentials file'}"
        )
    return None


# --- the image cache ------------------------------------------------------------------------


@contextlib.contextmanager
def locked(path: Path, shared: bool = False, wait: bool = True):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        fcntl.flock(fh, mode if wait else mode | fcntl.LOCK_NB)
        yield


def skopeo(argv: list[str], what: str, pass_fds: tuple[int, ...] = ()) -> str:
    proc = subprocess.run(
        ["skopeo", *argv], capture_output=True, text=True, check=False, pass_fds=pass_fds
    )
    if proc.returncode != 0:
        raise Refused(f"{what}: {skopeo_reason(proc.stderr)}")
    return proc.stdout


def skopeo_reason(stderr: str) -> str:
    """skopeo's message without its log decoration."""
    messages = re.findall(r'msg="((?:[^"\\]|\\.)*)"', stderr)
    text = messages[-1].replace('\\"', '"') if messages else stderr.strip()
    text = text.splitlines()[-1] if text else "skopeo failed"
    # skopeo reports every failure under the reference it parsed: the reason is what follows
    return re.sub(r'^Error parsing image name "[^"]*": ', "", text)


class Cache:
    def __init__(self, root: Path, limit: int):
        self.root = root
        self.limit = limit

    def entry(self, key: str) -> Path:
        return self.root / key

    def lock(self, key: str) -> Path:
        return self.root / ".locks" / f"{key}.lock"

    def complete(self, key: str) -> bool:
        return (self.entry(key) / "complete").is_file()

    def touch(self, key: str) -> None:
        (self.entry(key) / "complete").touch()

    def size(self, key: str) -> int:
        try:
            return int((self.entry(key) / "complete").read_text() or 0)
        except (OSError, ValueError):
            return 0

    def fill(self, key: str, make) -> None:
        """Runs make(staging) -> unpack(entry) once per key, however many steps ask at once:
        the others wait on the key's lock and find it complete."""
        with locked(self.lock(key)):
            if self.complete(key):
                self.touch(key)
                return
            staging = Path(tempfile.mkdtemp(prefix="fill-", dir=self.root / ".tmp"))
            try:
                unpack = make(staging)
                entry = staging / "entry"
                entry.mkdir()
                unpack(entry)
                (entry / "complete").write_text(str(tree_size(entry / "rootfs")))
                remove(self.entry(key))
                entry.rename(self.entry(key))
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        self.evict(keep=key)

    def evict(self, keep: str) -> None:
        """Least recently used first, until the cache fits its bound; an image being copied
        into a container (shared lock) or pulled stays."""
        entries = []
        for path in self.root.iterdir() if self.root.is_dir() else []:
            if path.name.startswith(".") or not (path / "complete").is_file():
                continue
            entries.append(((path / "complete").stat().st_mtime, path.name))
        total = sum(self.size(key) for _, key in entries)
        for _, key in sorted(entries):
            if total <= self.limit:
                break
            if key == keep:
                continue
            try:
                with locked(self.lock(key), wait=False):
                    size = self.size(key)
                    shutil.rmtree(self.entry(key), ignore_errors=True)
                    total -= size
            except BlockingIOError:
                continue


def unpack_layer(layer: Path, media_type: str, rootfs: Path) -> None:
    # by content, not by the manifest's media type: `docker save` layers are plain tar files
    # under a v2s2 manifest that says gzip
    with open(layer, "rb") as fh:
        magic = fh.read(4)
    if magic == b"\x28\xb5\x2f\xfd" or media_type.endswith("zstd"):
        raise Refused(f"layer type {media_type or 'zstd'} is not supported (use gzip or tar)")
    mode = "r:gz" if magic[:2] == b"\x1f\x8b" else "r:"
    # OCI whiteouts first: they delete what lower layers put there
    with tarfile.open(layer, mode) as tar:
        for member in tar:
            name = os.path.normpath(member.name.lstrip("/"))
            if name.startswith(".."):
                continue
            parent, base = os.path.split(name)
            if base == ".wh..wh..opq":
                target = rootfs / parent
                if target.is_dir() and not target.is_symlink():
                    for child in target.iterdir():
                        remove(child)
            elif base.startswith(".wh."):
                remove(rootfs / parent / base[4:])

    def keep(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        if os.path.basename(member.name).startswith(".wh."):
            return None
        if member.ischr() or member.isblk():
            return None  # /dev is the Pod's; no CAP_MKNOD here
        member = tarfile.tar_filter(member, dest)
        # layers own what they replace: a file where a directory was, and the reverse
        path = Path(dest) / member.name
        if path.is_symlink() or (path.exists() and not (path.is_dir() and member.isdir())):
            remove(path)
        return member

    with tarfile.open(layer, mode) as tar:
        tar.extractall(rootfs, filter=keep, numeric_owner=True)


def remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def tree_size(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def unpack_dir(layout: Path, entry: Path) -> None:
    """skopeo's `dir:` layout (manifest.json and blobs named by digest) into entry/rootfs and
    entry/config.json."""
    manifest = json.loads((layout / "manifest.json").read_text())
    rootfs = entry / "rootfs"
    rootfs.mkdir(parents=True)
    for layer in manifest.get("layers", []):
        blob = layout / layer["digest"].split(":", 1)[1]
        unpack_layer(blob, layer.get("mediaType", ""), rootfs)
    config = layout / manifest["config"]["digest"].split(":", 1)[1]
    shutil.copyfile(config, entry / "config.json")


def import_image(args: argparse.Namespace, cache: Cache) -> str:
    """The cache key of the image, pulled or unpacked unless already there."""
    text = args.image
    if text.startswith(("/", ".")):
        return import_file(args, cache, text)
    ref = parse_reference(text.removeprefix("docker://"))
    insecure = ref.registry in args.insecure  # plain HTTP (or unverified TLS) allowed there
    with tempfile.TemporaryDirectory(prefix="auth-", dir=cache.root / ".tmp") as tmp:
        creds = credentials(args, ref)
        if creds is not None:
            authfile = Path(tmp) / "auth.json"
            token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
            authfile.write_text(json.dumps({"auths": {ref.registry: {"auth": token}}}))
            authfile.chmod(0o600)
            inspect_auth, copy_auth = [f"--authfile={authfile}"], [f"--src-authfile={authfile}"]
        else:
            inspect_auth, copy_auth = ["--no-creds"], ["--src-no-creds"]
        # every pull asks the registry, a digest reference too: an image in the node's cache
        # runs only for a user the registry lets read it
        tls = ["--tls-verify=false"] if insecure else []
        raw = skopeo(["inspect", "--raw", *tls, *inspect_auth, ref.source],
                     f"pulling {ref.display}")  # fmt: skip
        key = hashlib.sha256(raw.encode()).hexdigest()
        pinned = f"docker://{ref.registry}/{ref.repository}@sha256:{key}"

        def pull(staging: Path):
            tls = ["--src-tls-verify=false"] if insecure else []
            skopeo(["copy", "--quiet", *tls, *copy_auth, pinned, f"dir:{staging / 'layout'}"],
                   f"pulling {ref.display}")  # fmt: skip
            return lambda entry: unpack_dir(staging / "layout", entry)

        cache.fill(key, pull)
    return key


def import_file(args: argparse.Namespace, cache: Cache, text: str) -> str:
    """A squashfs file or an OCI archive the user can read (checked with the user's rights)."""
    path = Path(args.cwd or "/", text) if text.startswith(".") else Path(text)
    with as_user(args.uid, args.gid):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise Refused(f"--container-image {text}: {exc.strerror}") from None
    try:
        stat = os.fstat(fd)
        key = hashlib.sha256(
            f"{path.resolve()}\0{stat.st_dev}\0{stat.st_ino}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
        ).hexdigest()
        source = f"/proc/self/fd/{fd}"
        with open(fd, "rb", closefd=False) as fh:
            squashfs = fh.read(4) == b"hsqs"

        def unsquash(staging: Path):
            def unpack(entry: Path) -> None:
                proc = subprocess.run(
                    ["unsquashfs", "-no-xattrs", "-quiet", "-no-progress", "-d",
                     str(entry / "rootfs"), source],
                    capture_output=True, text=True, pass_fds=(fd,), check=False,
                )  # fmt: skip
                # device nodes fail without CAP_MKNOD (and are not needed: /dev is the Pod's);
                # anything else that leaves no tree behind is the image's fault
                lines = [x for x in proc.stderr.splitlines() if x.strip()]
                rootfs = entry / "rootfs"
                if proc.returncode != 0 and not (rootfs.is_dir() and any(rootfs.iterdir())):
                    raise Refused(f"unsquashfs {text}: {lines[-1] if lines else proc.returncode}")
                (entry / "config.json").write_text("{}")

            return unpack

        def copy_archive(staging: Path):
            transport = archive_transport(source, text)
            skopeo(["copy", "--quiet", f"{transport}:{source}", f"dir:{staging / 'layout'}"],
                   f"--container-image {text}", pass_fds=(fd,))  # fmt: skip
            return lambda entry: unpack_dir(staging / "layout", entry)

        cache.fill(key, unsquash if squashfs else copy_archive)
    finally:
        os.close(fd)
    return key


def archive_transport(source: str, text: str) -> str:
    """An OCI archive (index.json) or `docker save`'s format (manifest.json only)."""
    try:
        with tarfile.open(source) as tar:
            names = set()
            for member in tar:
                names.add(member.name.removeprefix("./"))
                if "index.json" in names:
                    return "oci-archive"
    except (tarfile.TarError, OSError) as exc:
        raise Refused(
            f"--container-image {text}: neither a squashfs file nor an image archive ({exc})"
        ) from None
    if "manifest.json" in names:
        return "docker-archive"
    raise Refused(f"--container-image {text}: a tar file without index.json or manifest.json")


# --- containers -----------------------------------------------------------------------------


def append_identity(rootfs: Path, uid: int, gid: int) -> None:
    """The user and their group in the container's /etc/passwd and /etc/group, as Enroot
    adds them, so `id` and `whoami` answer there."""
    etc = rootfs / "etc"
    if etc.is_symlink() or not etc.is_dir():
        return
    with contextlib.suppress(KeyError):
        user = pwd.getpwuid(uid)
        line = f"{user.pw_name}:x:{uid}:{gid}:{user.pw_gecos}:{user.pw_dir}:{user.pw_shell}\n"
        add_line(etc / "passwd", line, f":{uid}:", 2)
    with contextlib.suppress(KeyError):
        group = grp.getgrgid(gid)
        add_line(etc / "group", f"{group.gr_name}:x:{gid}:\n", f":{gid}:", 2)


def add_line(path: Path, line: str, needle: str, field_index: int) -> None:
    if path.is_symlink():
        return
    text = path.read_text() if path.is_file() else ""
    wanted = needle.strip(":")
    for existing in text.splitlines():
        parts = existing.split(":")
        if len(parts) > field_index and parts[field_index] == wanted:
            return
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(text + line)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """The container's files are the user's, as Enroot's are: writable where the image's
    modes allow, and owned by root inside with --container-remap-root."""
    os.lchown(root, uid, gid)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.lchown(os.path.join(dirpath, name), uid, gid)


def open_cache(args: argparse.Namespace) -> Cache:
    """The node's image cache, made root's alone: images pulled with someone's credentials."""
    cache = Cache(Path(args.cache_path or Path(args.runtime_path) / "images"),
                  parse_size(args.cache_size))  # fmt: skip
    (cache.root / ".tmp").mkdir(parents=True, exist_ok=True)
    cache.root.chmod(0o700)
    return cache


def prepare(args: argparse.Namespace) -> dict[str, str]:
    runtime = Path(args.runtime_path)
    cache = open_cache(args)
    # a job's container is reached through its own directory, not by listing others'
    (runtime / "jobs").mkdir(parents=True, exist_ok=True)
    (runtime / "jobs").chmod(0o711)
    job_dir = runtime / "jobs" / str(args.job)
    job_dir.mkdir(mode=0o711, exist_ok=True)
    container = job_dir / args.name
    with locked(job_dir / f".{args.name}.lock"):
        if not (container / "ready").is_file():
            if args.existing or not args.image:
                raise Refused(
                    f'a container named "{args.name}" does not exist in this job, and '
                    "--container-image is not set"
                )
            key = import_image(args, cache)
            with locked(cache.lock(key), shared=True):
                entry = cache.entry(key)
                remove(container)
                staging = job_dir / f".{args.name}.new"
                remove(staging)
                staging.mkdir(mode=0o700)
                subprocess.run(["cp", "-a", "--reflink=auto", str(entry / "rootfs"),
                                str(staging / "rootfs")], check=True)  # fmt: skip
                config = json.loads((entry / "config.json").read_text() or "{}")
            image = config.get("config") or {}
            env = [e for e in image.get("Env") or [] if "=" in e and "\0" not in e]
            (staging / "env").write_bytes(b"".join(e.encode() + b"\0" for e in env))
            (staging / "workdir").write_text(image.get("WorkingDir") or "/")
            append_identity(staging / "rootfs", args.uid, args.gid)
            chown_tree(staging / "rootfs", args.uid, args.gid)
            (staging / "tmp").mkdir(mode=0o700)
            os.chown(staging / "tmp", args.uid, args.gid)
            (staging / "ready").write_text(args.image)
            staging.rename(container)
    home = args.home
    if not home:
        with contextlib.suppress(KeyError):
            home = pwd.getpwuid(args.uid).pw_dir
    return {
        "rootfs": str(container / "rootfs"),
        "tmp": str(container / "tmp"),
        "env": str(container / "env"),
        "workdir": (container / "workdir").read_text().strip() or "/",
        "home": home or "",
    }


def remove_containers(args: argparse.Namespace) -> None:
    job_dir = Path(args.runtime_path) / "jobs" / str(args.job)
    if args.all:
        remove(job_dir)
        return
    name = f"step-{args.step}"
    with locked(job_dir / f".{name}.lock"):
        remove(job_dir / name)
    with contextlib.suppress(OSError):
        (job_dir / f".{name}.lock").unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sunk-container")
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare")
    for p in (prep, sub.add_parser("remove"), pull := sub.add_parser("pull")):
        p.add_argument("--runtime-path", default="/var/lib/sunk/containers")
    for p in (prep, pull):
        p.add_argument("--cache-path", default="")
        p.add_argument("--cache-size", default="20G")
        p.add_argument("--insecure-registries", default="")
        p.add_argument("--system-credentials",
                       default="/etc/sunk/containers/credentials/credentials")  # fmt: skip
        p.add_argument("--uid", type=int, default=os.getuid())
        p.add_argument("--gid", type=int, default=os.getgid())
        p.add_argument("--home", default="")
        p.add_argument("--enroot-config-path", default="")
        p.add_argument("--xdg-config-home", default="")
        p.add_argument("--cwd", default="")
    prep.add_argument("--job", type=int, required=True)
    prep.add_argument("--step", type=int, required=True)
    prep.add_argument("--name", required=True)
    prep.add_argument("--image", default="")
    prep.add_argument("--existing", action="store_true")
    prep.add_argument("--writable", action="store_true")
    pull.add_argument("image")
    rm = sub.choices["remove"]
    rm.add_argument("--job", type=int, required=True)
    group = rm.add_mutually_exclusive_group(required=True)
    group.add_argument("--step", type=int)
    group.add_argument("--all", action="store_true")
    parse = sub.add_parser("parse")
    parse.add_argument("image")
    args = parser.parse_args(argv)
    try:
        if args.command == "parse":
            ref = parse_reference(args.image)
            for key in ("registry", "repository", "tag", "digest", "user"):
                print(f"{key}={getattr(ref, key)}")
            return 0
        if args.command == "remove":
            remove_containers(args)
            return 0
        args.insecure = {r for r in args.insecure_registries.split(",") if r}
        if args.command == "pull":
            cache = open_cache(args)
            started = time.monotonic()
            key = import_image(args, cache)
            print(f"digest=sha256:{key}")
            print(f"rootfs={cache.entry(key) / 'rootfs'}")
            print(f"seconds={time.monotonic() - started:.1f}")
            return 0
        if args.name.startswith(".") or "/" in args.name:
            raise Refused(f"--container-name {args.name!r}: use letters, digits, '.', '-', '_'")
        for key, value in prepare(args).items():
            print(f"{key}={value}")
        return 0
    except Refused as exc:
        print(exc, file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError, tarfile.TarError, ValueError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
