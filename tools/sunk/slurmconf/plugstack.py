"""plugstack.conf: the container plugin (Pyxis's `srun --container-image` options) when
`compute.pyxis.enabled`.

One line, `required <plugin> OPTION...`: SPANK splits it on whitespace and knows no quotes, so
every option is one `key=value` word (the guard refuses a space). The options come in this
order, and the plugin lets a later word win over an earlier one:

1. `mount_home=0|1`, `remap_root=0|1` from `compute.pyxis.mountHome` / `remapRoot`;
2. the `compute.pyxis.enrootConfig` keys that have a meaning here (`ENROOT_OPTIONS`);
3. `image_cache_size=` (`imageCacheSize`), `insecure_registries=a,b` (`insecureRegistries`);
4. `env=NAME=VALUE` for every `compute.mpi.env` entry with a value (null and empty: none),
   in name order: the plugin sets them in every task of every step, container or not, unless
   the task has the variable already, so a job's own value wins (and, unlike the other
   options, the first `env=` word for a name: a later one finds the variable set);
5. `compute.pyxis.plugstackOptions`, verbatim.

slurm.conf sets no `PlugStackConfig`: configless slurmd and sackd fetch plugstack.conf from
slurmctld and read it beside slurm.conf, which is where the default points.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sunk.models.values import ENROOT_OPTIONS, PYXIS_OPTIONS, Mpi, Pyxis
from sunk.slurmconf.format import BANNER
from sunk.slurmconf.guard import UnsafeConfigError, check_value

FILE = "plugstack.conf"
PLUGIN_SO = "/usr/local/lib/slurm/spank_sunk_container.so"
# Where the plugin keeps its image cache and the containers' root filesystems unless
# `runtime_path` says otherwise (the slurmd Pods get an emptyDir there).
RUNTIME_PATH = "/var/lib/sunk/containers"
KNOWN_OPTIONS = PYXIS_OPTIONS  # the plugin refuses any other
# The options whose value is a path (the plugin's directories) or a yes/no (written 1/0).
_PATHS = frozenset({"runtime_path", "cache_path"})
_FLAGS = frozenset({"writable", "mount_home", "remap_root"})
_YES = frozenset({"yes", "true", "1"})
_NO = frozenset({"no", "false", "0"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _flag(value: bool) -> str:
    return "1" if value else "0"


def _enroot_option(key: str, value: str) -> str:
    option = ENROOT_OPTIONS[key]
    where = f"compute.pyxis.enrootConfig.{key}"
    if option in _FLAGS:
        word = value.strip().lower()
        if word not in _YES | _NO:
            raise UnsafeConfigError(FILE, where, f"{value[:60]!r} is not yes/no/true/false/1/0")
        return f"{option}={_flag(word in _YES)}"
    text = check_value(value, FILE, where, words=True)
    if option in _PATHS and not text.startswith("/"):
        raise UnsafeConfigError(FILE, where, f"{text[:60]!r} is not an absolute path")
    return f"{option}={text}"


def env_options(env: Mapping[str, str | None], where: str = "compute.mpi.env") -> list[str]:
    """`env=NAME=VALUE` words for the variables with a value (null and empty: not set), in
    name order. SPANK splits the line on whitespace and knows no quotes: a value the guard
    refuses as a word (a space among them) is refused, naming `compute.mpi.env.NAME`."""
    words = []
    for name, value in sorted(env.items()):
        if not value:
            continue
        if not _ENV_NAME.match(name):
            raise UnsafeConfigError(FILE, f"{where}.{name}", "not a variable name")
        words.append(f"env={name}={check_value(value, FILE, f'{where}.{name}', words=True)}")
    return words


def container_options(pyxis: Pyxis, env: Mapping[str, str | None] | None = None) -> list[str]:
    """The plugin's options, in plugstack.conf's order (later words win), each through the
    guard; an UnsafeConfigError names the values key. ``env``: `compute.mpi.env`."""
    options = [f"mount_home={_flag(pyxis.mountHome)}", f"remap_root={_flag(pyxis.remapRoot)}"]
    options += [
        _enroot_option(key, pyxis.enrootConfig[key])
        for key in ENROOT_OPTIONS
        if key in pyxis.enrootConfig
    ]
    if pyxis.imageCacheSize:
        size = check_value(pyxis.imageCacheSize, FILE, "compute.pyxis.imageCacheSize", words=True)
        options.append(f"image_cache_size={size}")
    if pyxis.insecureRegistries:
        for i, host in enumerate(pyxis.insecureRegistries):
            check_value(host, FILE, f"compute.pyxis.insecureRegistries[{i}]", words=True)
        options.append("insecure_registries=" + ",".join(pyxis.insecureRegistries))
    options += env_options(env or {})
    for i, option in enumerate(pyxis.plugstackOptions):
        where = f"compute.pyxis.plugstackOptions[{i}]"
        options.append(check_value(option, FILE, where, words=True))
        key, _, value = option.partition("=")
        if key in _PATHS and not value.startswith("/"):
            raise UnsafeConfigError(FILE, where, f"{key} {value[:60]!r} is not an absolute path")
    return options


def option_value(options: list[str], key: str) -> str | None:
    """The value the plugin takes for ``key``: the last word that sets it."""
    found = None
    for option in options:
        name, sep, value = option.partition("=")
        if sep and name == key:
            found = value
    return found


def runtime_path(pyxis: Pyxis) -> str:
    """Where the plugin keeps images and container root filesystems: `runtime_path`
    (from `ENROOT_DATA_PATH` or `plugstackOptions`), else RUNTIME_PATH."""
    return option_value(container_options(pyxis), "runtime_path") or RUNTIME_PATH


def render_plugstack_conf(pyxis: Pyxis, mpi: Mpi | None = None) -> str:
    """plugstack.conf; ``mpi``: `compute.mpi`, whose env only the container plugin sets (not
    acted on while `compute.pyxis.enabled` is off: `sunkctl validate` says so)."""
    out = [BANNER.rstrip("\n")]
    if pyxis.enabled:
        env = mpi.env if mpi is not None else {}
        out.append(" ".join(["required", PLUGIN_SO, *container_options(pyxis, env)]))
    else:
        out.append("# no SPANK plugin (compute.pyxis.enabled adds the container plugin)")
    return "\n".join(out) + "\n"
